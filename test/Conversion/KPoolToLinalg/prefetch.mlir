// RUN: kpool-opt %s -convert-kpool-to-linalg="prefetch-pools=2" | FileCheck %s
// RUN: kpool-opt %s -convert-kpool-to-linalg | FileCheck %s --check-prefix=NONE
// RUN: not kpool-opt %s -convert-kpool-to-linalg="prefetch-pools=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: kpool-opt %s -kpool-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// prefetch-pools=N: each pooled row prefetches, before computing its pool,
// every cache line of the member rows of the pool N pools later in its
// request (row first + N*kpool + m, clamped to k's last row), keys and
// gates: here 2 members x 2 lines (32 f32 channels) x 2 operands. The
// CPU pipeline uses N = 2; the default is none.

// CHECK-LABEL: func.func @compress
// CHECK:       %[[AHEAD:.*]] = arith.addi %{{.*}}, %c4_i64 : i64
// CHECK:       %[[R0:.*]] = arith.minsi %[[AHEAD]], %[[LAST:.*]] : i64
// CHECK:       %[[I0:.*]] = arith.index_castui %[[R0]]
// CHECK-COUNT-4: memref.prefetch %{{.*}}[%[[I0]], %{{c0|c16}}], read, locality<3>, data
// CHECK:       %[[M1:.*]] = arith.addi %[[AHEAD]], %c1_i64 : i64
// CHECK:       arith.minsi %[[M1]], %[[LAST]] : i64
// CHECK-COUNT-4: memref.prefetch
// CHECK-NOT:   memref.prefetch
// CHECK:       linalg.generic
// NONE-NOT:    memref.prefetch
// BAD:         convert-kpool-to-linalg: prefetch-pools must be 0 or more, got -1
// LLVM:        "llvm.intr.prefetch"
func.func @compress(%k: memref<?x32xf32>, %ape: memref<2x32xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cache: memref<?xui32>,
    %out: memref<?x32xf32>) {
  kpool.compress kpool(2) head_dim(32)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : memref<?x32xf32>, memref<?x32xf32>, memref<2x32xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%out : memref<?x32xf32>)
  return
}
