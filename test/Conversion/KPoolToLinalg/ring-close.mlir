// RUN: kpool-opt %s -convert-kpool-to-linalg -split-input-file | FileCheck %s

// kpool.ring_close: a scf.parallel over batch rows. Rows below num_requests
// (clamped to [0, B]) load their metadata; a row whose pending pool closes in
// this call and whose slot is in the ring runs the pooling linalg.generic with
// members m < held read from tail[slot, 0/1, (p*K + m) mod R] (ring row m
// when the window R is statically K); every other row gets zeros and
// closed_pool = -1.

// CHECK-LABEL: func @ring_close
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>, %[[K:[^:]+]]: memref<?x128xbf16>, %[[G:[^:]+]]: memref<?x128xbf16>, %[[APE:[^:]+]]: memref<4x128xf32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %[[N:[^:]+]]: i32, %[[OUT:[^:]+]]: memref<?x128xbf16>, %[[CLOSED:[^:]+]]: memref<?xi32>)
//   CHECK-DAG:   %[[MINUS1:.*]] = arith.constant -1 : i32
//   CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : bf16
// gate's rows, the metadata lengths and the outputs' rows are checked at
// run time.
//       CHECK:   scf.if
// num_requests is sign-extended and clamped to [0, B].
//       CHECK:   %[[N64:.*]] = arith.extsi %[[N]] : i32 to i64
//       CHECK:   arith.maxsi %[[N64]]
//       CHECK:   %[[NCLAMP:.*]] = arith.minsi
//       CHECK:   %[[NREQ:.*]] = arith.index_castui %[[NCLAMP]] : i64 to index
//       CHECK:   %[[SLOTS:.*]] = memref.dim %[[TAIL]], %{{.*}}
//       CHECK:   %[[NSLOTS:.*]] = arith.index_castui %[[SLOTS]] : index to i64
//   CHECK-DAG:   %[[ROWS_P:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x128xbf16>
//   CHECK-DAG:   %[[ROWS_C:.*]] = memref.dim %[[CLOSED]], %{{.*}} : memref<?xi32>
//       CHECK:   %[[ROWS:.*]] = arith.maxsi %[[ROWS_P]], %[[ROWS_C]] : index
//       CHECK:   scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[ROWS]]) step (%{{.*}}) {
//       CHECK:     %[[ACTIVE:.*]] = arith.cmpi ult, %[[B]], %[[NREQ]] : index
//       CHECK:     %[[META:.*]]:5 = scf.if %[[ACTIVE]] -> (i1, i64, i64, i64, i64) {
// held = c mod K; the pool closes when held > 0, the request brings at least
// K - held tokens and the slot is inside the ring.
//       CHECK:       %[[HELD:.*]] = arith.remui %{{.*}}, %{{.*}} : i64
//       CHECK:       arith.cmpi ugt, %[[HELD]], %{{.*}} : i64
//       CHECK:       arith.subi %{{.*}}, %[[HELD]] : i64
//       CHECK:       arith.cmpi uge
//       CHECK:       %[[ID:.*]] = arith.divui
//       CHECK:       %[[SLOT:.*]] = arith.extui %{{.*}} : i32 to i64
//       CHECK:       %[[INRING:.*]] = arith.cmpi ult, %[[SLOT]], %[[NSLOTS]] : i64
//       CHECK:       %[[CLOSES:.*]] = arith.andi %{{.*}}, %[[INRING]] : i1
//       CHECK:       scf.yield %[[CLOSES]], %[[HELD]], %[[ID]], %[[SLOT]], %{{.*}} : i1, i64, i64, i64, i64
//       CHECK:     } else {
//       CHECK:       scf.yield %false, %{{.*}} : i1, i64, i64, i64, i64
//       CHECK:     }
// closed_pool[b] = closes ? pool id : -1, for rows it has.
//       CHECK:     %[[HAS_C:.*]] = arith.cmpi ult, %[[B]], %[[ROWS_C]] : index
//       CHECK:     scf.if %[[HAS_C]] {
//       CHECK:       %[[ID32:.*]] = arith.trunci %[[META]]#2 : i64 to i32
//       CHECK:       %[[V:.*]] = arith.select %[[META]]#0, %[[ID32]], %[[MINUS1]] : i32
//       CHECK:       memref.store %[[V]], %[[CLOSED]][%[[B]]] : memref<?xi32>
//       CHECK:     }
//       CHECK:     %[[HAS_P:.*]] = arith.cmpi ult, %[[B]], %[[ROWS_P]] : index
//       CHECK:     scf.if %[[HAS_P]] {
//       CHECK:       %[[DST:.*]] = memref.subview %[[OUT]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:       scf.if %[[META]]#0 {
// Member 0: from the ring when 0 < held, else row start + 0 - held.
//       CHECK:         %[[FROM_RING0:.*]] = arith.cmpi ult, %{{.*}}, %[[META]]#1 : i64
//       CHECK:         %[[RK0:.*]] = memref.subview %[[TAIL]][%{{.*}}, 0, 0, 0] [1, 1, 1, 128] [1, 1, 1, 1]
//       CHECK:         %[[KK0:.*]] = memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         arith.select %[[FROM_RING0]], %[[RK0]], %[[KK0]] : memref<128xbf16, strided<[1], offset: ?>>
//       CHECK:         %[[RG0:.*]] = memref.subview %[[TAIL]][%{{.*}}, 1, 0, 0] [1, 1, 1, 128] [1, 1, 1, 1]
//       CHECK:         %[[GG0:.*]] = memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         arith.select %[[FROM_RING0]], %[[RG0]], %[[GG0]]
// Members 1..3 read ring rows 1..3.
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 0, 1, 0]
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 1, 1, 0]
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 0, 2, 0]
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 1, 2, 0]
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 0, 3, 0]
//       CHECK:         memref.subview %[[TAIL]][%{{.*}}, 1, 3, 0]
//       CHECK:         memref.subview %[[APE]][3, 0]
//       CHECK:         linalg.generic
//  CHECK-SAME:           outs(%[[DST]] :
//  CHECK-SAME:           {kpool.pool_row}
//  CHECK-NEXT:         ^bb0({{((%[^:]+: bf16, ){8}(%[^:]+: f32, ){4})}}%{{[^:]+}}: bf16):
//   CHECK-COUNT-4:       math.exp
//       CHECK:           arith.truncf %{{.*}} : f32 to bf16
//       CHECK:       } else {
//       CHECK:         linalg.fill ins(%[[ZERO]] : bf16) outs(%[[DST]] :
//       CHECK:       }
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   kpool.ring_close
//       CHECK:   return
func.func @ring_close(%tail: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
    %k: memref<?x128xbf16>, %gate: memref<?x128xbf16>, %ape: memref<4x128xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %pooled: memref<?x128xbf16>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
            memref<?x128xbf16>, memref<?x128xbf16>, memref<4x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x128xbf16>, memref<?xi32>)
  return
}

// -----

// kpool 3, f32: three members, each a select between ring and call rows.
// CHECK-LABEL: func @ring_close_kpool3_f32
//       CHECK:   scf.parallel
//       CHECK:     scf.if %{{.*}} -> (i1, i64, i64, i64, i64)
//   CHECK-COUNT-6:       arith.select %{{.*}}, %{{.*}}, %{{.*}} : memref<8xf32, strided<[1], offset: ?>>
//   CHECK-NOT:         arith.select %{{.*}} : memref
//       CHECK:         linalg.generic
//  CHECK-SAME:           {kpool.pool_row}
//  CHECK-NEXT:         ^bb0({{((%[^:]+: f32, ){9})}}%{{[^:]+}}: f32):
//       CHECK:         linalg.fill
func.func @ring_close_kpool3_f32(%tail: memref<?x2x3x8xf32>,
    %k: memref<?x8xf32>, %gate: memref<?x8xf32>, %ape: memref<3x8xf32>,
    %iro: memref<?xi32>, %cache: memref<?xi32>, %slots: memref<?xi32>,
    %n: i32, %pooled: memref<?x8xf32>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(3) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x3x8xf32>, memref<?x8xf32>, memref<?x8xf32>,
            memref<3x8xf32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xf32>, memref<?xi32>)
  return
}

// -----

// A ring window wider than kpool: member m of pool p is ring row
// (p*K + m) mod R, one remainder per pool and a conditional wrap per member.
// CHECK-LABEL: func @ring_close_window
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x2x7x8xf32>
//   CHECK-DAG:   %[[R:.*]] = arith.constant 7 : i64
//   CHECK-DAG:   %[[K:.*]] = arith.constant 3 : i64
//       CHECK:   scf.parallel
//       CHECK:       scf.if %{{.*}} {
//       CHECK:         %[[START:.*]] = arith.muli %{{.*}}, %[[K]] : i64
//       CHECK:         %[[BASE:.*]] = arith.remui %[[START]], %[[R]] : i64
//       CHECK:         %[[ROW1:.*]] = arith.addi %[[BASE]], %{{.*}} : i64
//       CHECK:         %[[WRAP1:.*]] = arith.cmpi uge, %[[ROW1]], %[[R]] : i64
//       CHECK:         %[[LESS1:.*]] = arith.subi %[[ROW1]], %[[R]] : i64
//       CHECK:         arith.select %[[WRAP1]], %[[LESS1]], %[[ROW1]] : i64
//       CHECK:         linalg.generic
func.func @ring_close_window(%tail: memref<?x2x7x8xf32>, %k: memref<?x8xf32>,
    %gate: memref<?x8xf32>, %ape: memref<3x8xf32>, %iro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xf32>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(3) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x7x8xf32>, memref<?x8xf32>, memref<?x8xf32>,
            memref<3x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xf32>, memref<?xi32>)
  return
}
