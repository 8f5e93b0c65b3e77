// RUN: kpool-opt %s -convert-kpool-to-linalg -split-input-file | FileCheck %s

// kpool.compress: a scf.parallel over the rows of `pooled`; each row finds its
// request by a binary search (scf.while) over pool_row_offsets (and a scan
// when the candidate does not claim the row), checks that
// the row is one of the pools the request completes, and runs one
// linalg.generic (tagged kpool.pool_row) over the head_dim channels with one
// input per member row of k, gate and ape.

// CHECK-LABEL: func @compress
//  CHECK-SAME:   (%[[K:[^:]+]]: memref<?x128xbf16>, %[[G:[^:]+]]: memref<?x128xbf16>, %[[APE:[^:]+]]: memref<4x128xf32>, %[[IRO_U:[^:]+]]: memref<?xui32>, %[[PRO_U:[^:]+]]: memref<?xui32>, %[[C_U:[^:]+]]: memref<?xui32>, %[[OUT:[^:]+]]: memref<?x128xbf16>)
// ui32 metadata is read through signless views of the same buffers.
//   CHECK-DAG:   %[[IRO:.*]] = builtin.unrealized_conversion_cast %[[IRO_U]] : memref<?xui32> to memref<?xi32>
//   CHECK-DAG:   %[[PRO:.*]] = builtin.unrealized_conversion_cast %[[PRO_U]] : memref<?xui32> to memref<?xi32>
//   CHECK-DAG:   %[[C:.*]] = builtin.unrealized_conversion_cast %[[C_U]] : memref<?xui32> to memref<?xi32>
// head_dim and ape are static; gate's rows and the metadata lengths are
// checked at run time (one branch around the op, nothing to write when they
// contradict it without a status word); no stride versioning.
//       CHECK:   scf.if
//   CHECK-NOT:   memref.extract_strided_metadata
//       CHECK:   %[[ROWS:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x128xbf16>
//       CHECK:   scf.parallel (%[[R:.*]]) = (%{{.*}}) to (%[[ROWS]]) step (%{{.*}}) {
//       CHECK:     %[[ROW:.*]] = arith.index_castui %[[R]] : index to i64
// Binary search for the last request whose first pooled row is <= row.
//       CHECK:     %[[FOUND:.*]]:2 = scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (i64, i64) -> (i64, i64) {
//       CHECK:       arith.cmpi slt
//       CHECK:       scf.condition
//       CHECK:     } do {
//       CHECK:       arith.shrui
//       CHECK:       memref.load %[[PRO]][%{{.*}}] : memref<?xi32>
//       CHECK:       arith.extui %{{.*}} : i32 to i64
//       CHECK:       arith.cmpi ule, %{{.*}}, %[[ROW]] : i64
//       CHECK:       scf.yield
//       CHECK:     }
//       CHECK:     %[[CAND:.*]] = arith.subi %[[FOUND]]#0, %{{.*}} : i64
//       CHECK:     %[[FOUND_ONE:.*]] = arith.cmpi sge, %[[CAND]], %{{.*}} : i64
// The candidate must claim the row (pro[b] + j with j below its pool count);
// when it does not (bad metadata in some request), a scan over all requests
// takes the first that does, so guards are per request.
//       CHECK:     %[[CLAIMS:.*]] = scf.if %[[FOUND_ONE]] -> (i1) {
//       CHECK:     %[[OWNER:.*]] = scf.if %[[CLAIMS]] -> (i64) {
//       CHECK:       scf.yield %[[CAND]] : i64
//       CHECK:     } else {
//       CHECK:       scf.while
//       CHECK:     }
//       CHECK:     %[[HAS:.*]] = arith.cmpi sge, %[[OWNER]], %{{.*}} : i64
//       CHECK:     scf.if %[[HAS]] {
// The request's rows, cache length and pool range, in 64 bits.
//   CHECK-DAG:       memref.load %[[IRO]]
//   CHECK-DAG:       memref.load %[[C]]
//       CHECK:       arith.divui
//       CHECK:       %[[VALID:.*]] = arith.andi
//       CHECK:       scf.if %[[VALID]] {
// One row of k and of gate per member, then ape row m for member m.
//       CHECK:         memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         %[[DST:.*]] = memref.subview %[[OUT]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[APE]][0, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[APE]][1, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[APE]][2, 0] [1, 128] [1, 1]
//       CHECK:         memref.subview %[[APE]][3, 0] [1, 128] [1, 1]
//       CHECK:         linalg.generic
//  CHECK-SAME:           iterator_types = ["parallel"]
//  CHECK-SAME:           outs(%[[DST]] : memref<128xbf16, strided<[1], offset: ?>>)
//  CHECK-SAME:           {kpool.pool_row}
// 4 keys, 4 gates (bf16), 4 ape rows (f32), the output.
//  CHECK-NEXT:         ^bb0({{((%[^:]+: bf16, ){8}(%[^:]+: f32, ){4})}}%{{[^:]+}}: bf16):
// The pooling function: f32 arithmetic, max-shifted exp, one rounding.
//       CHECK:           arith.extf %{{.*}} : bf16 to f32
//       CHECK:           arith.addf
//   CHECK-COUNT-3:       arith.maximumf
//   CHECK-COUNT-4:       math.exp
//       CHECK:           arith.divf
//  CHECK-NEXT:           arith.truncf %{{.*}} : f32 to bf16
//  CHECK-NEXT:           linalg.yield
//       CHECK:       }
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   kpool.compress
//       CHECK:   return
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

// kpool 3 and f32 keys: three members, no truncation, signless i32 metadata
// is read directly.
// CHECK-LABEL: func @compress_kpool3_f32
//   CHECK-NOT:   builtin.unrealized_conversion_cast
//       CHECK:   scf.parallel
//       CHECK:     scf.while
//       CHECK:         memref.subview %{{.*}}[2, 0] [1, 64] [1, 1] : memref<3x64xf32>
//   CHECK-NOT:         memref.subview %{{.*}}[3, 0]
//       CHECK:         linalg.generic
//  CHECK-SAME:           {kpool.pool_row}
//  CHECK-NEXT:         ^bb0({{((%[^:]+: f32, ){9})}}%{{[^:]+}}: f32):
//   CHECK-COUNT-2:       arith.maximumf
//   CHECK-COUNT-3:       math.exp
//       CHECK:           %[[Q:.*]] = arith.divf
//   CHECK-NOT:           arith.truncf
//       CHECK:           linalg.yield %[[Q]] : f32
func.func @compress_kpool3_f32(%k: memref<?x64xf32>, %gate: memref<?x64xf32>,
    %ape: memref<3x64xf32>, %iro: memref<?xi32>, %pro: memref<?xi32>,
    %cache: memref<?xi32>, %pooled: memref<?x64xf32>) {
  kpool.compress kpool(3) head_dim(64)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x64xf32>, memref<?x64xf32>, memref<3x64xf32>,
            memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%pooled : memref<?x64xf32>)
  return
}

// -----

// kpool 1: every token is its own pool; one member, no max and no exp: the
// function is the key itself for a finite z = gate + ape, and the NaN of
// z - z otherwise (the bits exp, product and quotient would give).
// CHECK-LABEL: func @compress_kpool1_f16
//       CHECK:   linalg.generic
//  CHECK-SAME:     {kpool.pool_row}
//  CHECK-NEXT:   ^bb0(%[[K:[^:]+]]: f16, %[[G:[^:]+]]: f16, %[[A:[^:]+]]: f32, %{{[^:]+}}: f16):
//   CHECK-NOT:     arith.maximumf
//   CHECK-NOT:     math.exp
//       CHECK:     %[[GF:.*]] = arith.extf %[[G]] : f16 to f32
//       CHECK:     %[[Z:.*]] = arith.addf %[[GF]], %[[A]] : f32
//       CHECK:     %[[D:.*]] = arith.subf %[[Z]], %[[Z]] : f32
//       CHECK:     %[[FIN:.*]] = arith.cmpf ord, %[[D]], %[[D]] : f32
//       CHECK:     %[[KF:.*]] = arith.extf %[[K]] : f16 to f32
//       CHECK:     %[[S:.*]] = arith.select %[[FIN]], %[[KF]], %[[D]] : f32
//   CHECK-NOT:     math.exp
//       CHECK:     arith.truncf %[[S]] : f32 to f16
func.func @compress_kpool1_f16(%k: memref<?x8xf16>, %gate: memref<?x8xf16>,
    %ape: memref<1x8xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x8xf16>) {
  kpool.compress kpool(1) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xf16>, memref<?x8xf16>, memref<1x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xf16>)
  return
}
