// RUN: kpool-opt %s -convert-kpool-to-linalg | FileCheck %s --check-prefix=UNROLLED
// RUN: kpool-opt %s -convert-kpool-to-linalg="unroll-members=4" | FileCheck %s --check-prefix=LOOP
// RUN: not kpool-opt %s -convert-kpool-to-linalg="unroll-members=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not kpool-opt %s -convert-kpool-to-linalg="unroll-members=17" 2>&1 | FileCheck %s --check-prefix=BAD17

// unroll-members=N: pools of at most N members are one linalg.generic with
// an input per member row (kpool.pool_row); larger pools are the member
// loop (kpool.pool_row_loop: a max loop and a sum loop over the members,
// the same operations in the same order, so the same bits). The default is
// 16; the CPU pipeline uses 4, where 8 unrolled members' values spill
// AVX2's vector registers.

// UNROLLED-LABEL: func.func @compress
// UNROLLED:       linalg.generic {{.*}} outs(%{{.*}} : memref<32xf32, strided<[1], offset: ?>>) attrs =  {kpool.pool_row}
// UNROLLED-NOT:   kpool.pool_row_loop
// LOOP-LABEL:     func.func @compress
// LOOP-NOT:       kpool.pool_row}
// LOOP:           linalg.generic {{.*}} outs(%{{.*}} : memref<32xf32, strided<[1], offset: ?>>) attrs =  {kpool.pool_row_loop}
// LOOP:           scf.for %{{.*}} = %c1 to %c8 step %c1 iter_args(%{{.*}} = %{{.*}}) -> (f32)
// LOOP:           arith.maximumf
// LOOP:           scf.for %{{.*}} = %c1 to %c8 step %c1 iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// LOOP:           math.exp
// BAD:            convert-kpool-to-linalg: unroll-members must be in [1, 16], got 0
// BAD17:          convert-kpool-to-linalg: unroll-members must be in [1, 16], got 17
func.func @compress(%k: memref<?x32xf32>, %ape: memref<8x32xf32>,
    %iro: memref<?xui32>, %pro: memref<?xui32>, %cache: memref<?xui32>,
    %out: memref<?x32xf32>) {
  kpool.compress kpool(8) head_dim(32)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : memref<?x32xf32>, memref<?x32xf32>, memref<8x32xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%out : memref<?x32xf32>)
  return
}
