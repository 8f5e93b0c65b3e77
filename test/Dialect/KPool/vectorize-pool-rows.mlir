// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-vectorize-pool-rows | FileCheck %s
// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-vectorize-pool-rows=vector-size=10 | FileCheck %s --check-prefix=VS10
// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-vectorize-pool-rows=vector-size=0 | FileCheck %s --check-prefix=SCALAR

// kpool-vectorize-pool-rows tiles the channel loop of every linalg.generic
// tagged kpool.pool_row by the widest power of two <= vector-size that
// divides head_dim (no masked tile; the rule kpool-map-to-gpu uses too,
// kpool/Dialect/KPool/Utils/Numerics.h) and vectorizes the tile; rows over views whose
// innermost stride is not statically 1 stay scalar. vector-size=0 keeps all
// rows scalar. In every pooled row, vector or scalar, the max is a
// compare-and-select (one vmaxps), acc + e * k is one math.fma and the bf16
// rounding is integer arithmetic with its NaN select on 32-bit lanes
// (kpool/Dialect/KPool/Utils/Numerics.h, populatePoolingArithmeticPatterns).

// head_dim 128: tiles of 16 (default vector-size), 8 with vector-size 10.
// CHECK-LABEL: func @compress_head_dim_128
//   CHECK-NOT:   linalg.generic
//       CHECK:   scf.for %{{.*}} = %[[LB:.*]] to %[[C128:.*]] step %[[C16:.*]] {
//   CHECK-COUNT-8:   vector.load %{{.*}} : memref<16xbf16, strided<[1], offset: ?>>, vector<16xbf16>
//   CHECK-COUNT-4:   vector.load %{{.*}} : memref<16xf32, strided<[1], offset: ?>>, vector<16xf32>
//       CHECK:     arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
//   CHECK-NOT:     arith.maximumf
//       CHECK:     %[[GT:.*]] = arith.cmpf ogt, %[[A:.*]], %[[B:.*]] : vector<16xf32>
//       CHECK:     arith.select %[[GT]], %[[A]], %[[B]] : vector<16xi1>, vector<16xf32>
//   CHECK-NOT:     arith.maximumf
//       CHECK:     math.fma %{{.*}} : vector<16xf32>
//       CHECK:     arith.divf %{{.*}} : vector<16xf32>
//   CHECK-NOT:     arith.truncf
//       CHECK:     arith.cmpf uno, %{{.*}} : vector<16xf32>
//       CHECK:     arith.select %{{.*}} : vector<16xi1>, vector<16xi32>
//       CHECK:     arith.trunci %{{.*}} : vector<16xi32> to vector<16xi16>
//       CHECK:     %[[T:.*]] = arith.bitcast %{{.*}} : vector<16xi16> to vector<16xbf16>
//       CHECK:     vector.store %[[T]], %{{.*}} : memref<16xbf16, strided<[1], offset: ?>>, vector<16xbf16>
//       CHECK:   }
//   CHECK-NOT:   linalg.generic
//   CHECK-NOT:   vector.transfer_read
//   CHECK-NOT:   vector.transfer_write
//       CHECK:   return
//
// VS10-LABEL: func @compress_head_dim_128
//       VS10:   arith.constant 8 : index
//       VS10:   scf.for
//       VS10:     vector.load {{.*}} vector<8xbf16>
//       VS10:     vector.store {{.*}} vector<8xbf16>
//
// SCALAR-LABEL: func @compress_head_dim_128
//   SCALAR-NOT:   vector.
//       SCALAR:   linalg.generic
//  SCALAR-SAME:     {kpool.pool_row}
//       SCALAR:     arith.divf %{{.*}} : f32
//   SCALAR-NOT:   vector.
//       SCALAR:   return
func.func @compress_head_dim_128(%k: memref<?x128xbf16>, %gate: memref<?x128xbf16>,
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

// head_dim 96: 16 divides it; with vector-size 10 the widest power of two
// is 8.
// CHECK-LABEL: func @compress_head_dim_96
//       CHECK:   scf.for
//       CHECK:     vector.load {{.*}} vector<16xf16>
//       CHECK:     vector.store {{.*}} vector<16xf16>
//
// VS10-LABEL: func @compress_head_dim_96
//       VS10:     vector.load {{.*}} vector<8xf16>
//       VS10:     vector.store {{.*}} vector<8xf16>
func.func @compress_head_dim_96(%k: memref<?x96xf16>, %gate: memref<?x96xf16>,
    %ape: memref<4x96xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x96xf16>) {
  kpool.compress kpool(4) head_dim(96)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x96xf16>, memref<?x96xf16>, memref<4x96xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x96xf16>)
  return
}

// -----

// head_dim 24: 16 does not divide it, 8 is the widest power of two that
// does (12 divides it too, but is no power of two: a GPU thread could not
// align a 24-byte access, and x86 splits a 12-lane vector anyway).
// CHECK-LABEL: func @compress_head_dim_24
//   CHECK-DAG:   %[[C8:.*]] = arith.constant 8 : index
//   CHECK-DAG:   %[[C24:.*]] = arith.constant 24 : index
//       CHECK:   scf.for %{{.*}} = %{{.*}} to %[[C24]] step %[[C8]] {
//       CHECK:     vector.load {{.*}} vector<8xbf16>
//       CHECK:     vector.store {{.*}} vector<8xbf16>
//
// VS10-LABEL: func @compress_head_dim_24
//       VS10:     vector.load {{.*}} vector<8xbf16>
func.func @compress_head_dim_24(%k: memref<?x24xbf16>, %gate: memref<?x24xbf16>,
    %ape: memref<4x24xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x24xbf16>) {
  kpool.compress kpool(4) head_dim(24)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x24xbf16>, memref<?x24xbf16>, memref<4x24xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x24xbf16>)
  return
}

// -----

// head_dim 8 is narrower than vector-size 16: one tile of 8. ring_close
// (kpool 3, f32) vectorizes the same way, and so does the fill of its zero
// rows (a linalg.fill of one row inside the kpool.kernel loop).
// CHECK-LABEL: func @ring_close_head_dim_8
//       CHECK:   scf.if
//       CHECK:     scf.for
//   CHECK-COUNT-6:   vector.load %{{.*}} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
//       CHECK:       arith.cmpf ogt, %{{.*}} : vector<8xf32>
//       CHECK:       vector.store %{{.*}} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
//       CHECK:   } else {
//   CHECK-NOT:     linalg.fill
//       CHECK:     vector.store %{{.*}} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
//
// VS10-LABEL: func @ring_close_head_dim_8
//       VS10:       vector.store {{.*}} vector<8xf32>
func.func @ring_close_head_dim_8(%tail: memref<?x2x3x8xf32>,
    %k: memref<?x8xf32>, %gate: memref<?x8xf32>, %ape: memref<3x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %pooled: memref<?x8xf32>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(3) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x3x8xf32>, memref<?x8xf32>, memref<?x8xf32>,
            memref<3x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xf32>, memref<?xi32>)
  return
}

// -----

// Dynamic strides: the unit-stride version of the lowering is vectorized,
// the general version keeps its scalar row.
// CHECK-LABEL: func @compress_stride_versions
//       CHECK:   memref.extract_strided_metadata
//       CHECK:   scf.if
//       CHECK:     scf.for
//       CHECK:       vector.load {{.*}} vector<16xbf16>
//   CHECK-NOT:     linalg.generic
//       CHECK:   } else {
//   CHECK-NOT:     vector.load
//       CHECK:     linalg.generic
//  CHECK-SAME:       ins({{.*}} : memref<128xbf16, strided<[?], offset: ?>>
//  CHECK-SAME:       {kpool.pool_row}
//   CHECK-NOT:     vector.
//       CHECK:   return
func.func @compress_stride_versions(
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16>, %ape: memref<4x128xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x128xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16>,
            memref<4x128xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16>)
  return
}

// -----

// Rows over a view with a static non-unit innermost stride stay scalar.
// CHECK-LABEL: func @compress_strided_keys
//   CHECK-NOT:   vector.
//       CHECK:   linalg.generic
//  CHECK-SAME:     {kpool.pool_row}
//   CHECK-NOT:   vector.
//       CHECK:   return
func.func @compress_strided_keys(%k: memref<?x128xbf16, strided<[256, 2]>>,
    %gate: memref<?x128xbf16>, %ape: memref<4x128xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x128xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16, strided<[256, 2]>>, memref<?x128xbf16>,
            memref<4x128xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16>)
  return
}

// -----

// A math.exp outside the pooled rows is not touched, and untagged
// linalg.generic ops are not vectorized.
// CHECK-LABEL: func @other_ops
//       CHECK:   linalg.generic
//       CHECK:     math.exp %{{.*}} : f32
//   CHECK-NOT:   vector.
//       CHECK:   return
#id = affine_map<(d0) -> (d0)>
func.func @other_ops(%in: memref<128xf32>, %out: memref<128xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%in : memref<128xf32>) outs(%out : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// The ring-row copies of seed_tail (a linalg.copy of one row inside the
// kpool.kernel loop) are tiled and vectorized like pooled rows on the
// unit-stride path; on the general-stride path they stay linalg.copy.
// CHECK-LABEL: func @seed_tail_row_copies
//       CHECK:   scf.if
//       CHECK:     scf.for %{{.*}} step %[[C16:.*]] {
//       CHECK:       %[[V:.*]] = vector.load %{{.*}} : memref<16xbf16, strided<[1], offset: ?>>, vector<16xbf16>
//       CHECK:       vector.store %[[V]], %{{.*}} : memref<16xbf16, strided<[1], offset: ?>>, vector<16xbf16>
//       CHECK:   } else {
//       CHECK:     linalg.copy ins(%{{.*}} : memref<128xbf16, strided<[?], offset: ?>>)
//
// SCALAR-LABEL: func @seed_tail_row_copies
//   SCALAR-NOT:   vector.
//       SCALAR:   linalg.copy
//   SCALAR-NOT:   vector.
//       SCALAR:   return
func.func @seed_tail_row_copies(%tail: memref<6x2x4x128xbf16>,
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16>, %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32) {
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<6x2x4x128xbf16>)
  return
}
