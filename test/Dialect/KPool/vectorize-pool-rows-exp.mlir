// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-vectorize-pool-rows | FileCheck %s
// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-vectorize-pool-rows=vector-size=0 | FileCheck %s
// RUN: kpool-opt %s -split-input-file -kpool-lower-to-llvm=bufferize=false | FileCheck %s --check-prefix=LLVM

// kpool-vectorize-pool-rows rewrites the math.exp of every pooled row, vector
// or scalar, with kpool's polynomial approximation (Numerics.cpp: x clamped
// at -88; a round-to-nearest reduction by one math.fma with 1.5 * 2^23 +
// 127, FMAs, 2^n by a shift of that sum's bits, replaced by +0 below
// -126 ln 2 = -87.3365..., which flushes every subnormal weight; no
// math.floor and no float-to-int conversion), so that no libm call or
// llvm.intr.exp is left and every row computes the same bits. (The predicate given to
// populateMathPolynomialApproximationPatterns sees the full operation name,
// "math.exp"; comparing it with "exp" once left every exp in place.)

// CHECK-LABEL: func @compress
//   CHECK-NOT:   math.exp
//   CHECK-DAG:   arith.constant {{(dense<)?}}-8.800000e+01
//   CHECK-DAG:   arith.constant {{(dense<)?}}-87.336540{{[0-9]*}}
//   CHECK-DAG:   arith.constant {{(dense<)?}}0x4B40007F
//   CHECK-NOT:   math.floor
//       CHECK:   math.fma
//   CHECK-NOT:   math.floor
//   CHECK-NOT:   arith.fptosi
//   CHECK-NOT:   math.exp
//       CHECK:   return
// LLVM-LABEL: llvm.func @compress(
//   LLVM-NOT:   llvm.intr.exp
//       LLVM:   llvm.intr.fma
//   LLVM-NOT:   llvm.intr.exp
//       LLVM:   llvm.return
func.func @compress(%k: memref<?x128xbf16>, %gate: memref<?x128xbf16>,
    %ape: memref<4x128xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x128xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16>, memref<?x128xbf16>, memref<4x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16>)
  return
}

// -----

// Both stride versions: the vectorized fast path and the scalar slow path.
// CHECK-LABEL: func @ring_close_stride_versions
//   CHECK-NOT:   math.exp
//       CHECK:   math.fma
//   CHECK-NOT:   math.exp
//       CHECK:   return
// LLVM-LABEL: llvm.func @ring_close_stride_versions(
//   LLVM-NOT:   llvm.intr.exp
//       LLVM:   llvm.intr.fma
//   LLVM-NOT:   llvm.intr.exp
//       LLVM:   llvm.return
func.func @ring_close_stride_versions(
    %tail: memref<?x2x4x8xbf16, strided<[?, ?, ?, ?], offset: ?>>,
    %k: memref<?x8xbf16>, %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16, strided<[?, ?, ?, ?], offset: ?>>,
            memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}
