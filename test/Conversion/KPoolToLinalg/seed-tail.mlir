// RUN: kpool-opt %s -convert-kpool-to-linalg -split-input-file | FileCheck %s

// kpool.seed_tail: a scf.parallel over the requests below num_requests; a
// request whose slot is inside the ring copies the key and gate rows of each
// of its last R positions q in [max(c, c + n - R), c + n) to
// tail[slot, 0/1, q mod R] with linalg.copy (R the ring window, the tail's
// third extent).

// CHECK-LABEL: func @seed_tail
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>, %[[K:[^:]+]]: memref<?x128xbf16>, %[[G:[^:]+]]: memref<?x128xbf16>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %[[S_U:[^:]+]]: memref<?xui32>, %[[N:[^:]+]]: i32)
//       CHECK:   %[[S:.*]] = builtin.unrealized_conversion_cast %[[S_U]] : memref<?xui32> to memref<?xi32>
// gate's rows and the metadata lengths are checked at run time.
//       CHECK:   scf.if
//       CHECK:   arith.extsi %[[N]] : i32 to i64
//       CHECK:   %[[NREQ:.*]] = arith.index_castui %{{.*}} : i64 to index
//       CHECK:   %[[SLOTS:.*]] = memref.dim %[[TAIL]], %{{.*}}
//       CHECK:   %[[NSLOTS:.*]] = arith.index_castui %[[SLOTS]] : index to i64
//       CHECK:   scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[NREQ]]) step (%{{.*}}) {
//       CHECK:     %[[SV:.*]] = memref.load %[[S]][%[[B]]] : memref<?xi32>
//       CHECK:     %[[SLOT:.*]] = arith.extui %[[SV]] : i32 to i64
//       CHECK:     %[[INRING:.*]] = arith.cmpi ult, %[[SLOT]], %[[NSLOTS]] : i64
//       CHECK:     scf.if %[[INRING]] {
// The loop starts at max(c, end - R), signed (end - R may be negative).
//       CHECK:       %[[END:.*]] = arith.addi
//       CHECK:       %[[LAST:.*]] = arith.subi %[[END]], %[[R:.*]] : i64
//       CHECK:       %[[BEGIN:.*]] = arith.maxsi %[[LAST]], %{{.*}} : i64
// One remainder per request: the first position's ring row.
//       CHECK:       %[[ROW0:.*]] = arith.remui %[[BEGIN]], %[[R]] : i64
//       CHECK:       %[[LB:.*]] = arith.index_castui %[[BEGIN]] : i64 to index
//       CHECK:       %[[UB:.*]] = arith.index_castui %[[END]] : i64 to index
//       CHECK:       scf.for %[[Q:.*]] = %[[LB]] to %[[UB]] step %{{.*}} {
// Ring row q mod R of the slot, never the batch row: the first row plus
// q - begin, less R where it wraps.
//       CHECK:         %[[OFF:.*]] = arith.subi %{{.*}}, %[[BEGIN]] : i64
//       CHECK:         %[[NEXT:.*]] = arith.addi %[[ROW0]], %[[OFF]] : i64
//       CHECK:         %[[WRAPS:.*]] = arith.cmpi uge, %[[NEXT]], %[[R]] : i64
//       CHECK:         %[[LESS:.*]] = arith.subi %[[NEXT]], %[[R]] : i64
//       CHECK:         %[[MEMBER:.*]] = arith.select %[[WRAPS]], %[[LESS]], %[[NEXT]] : i64
//       CHECK:         %[[M:.*]] = arith.index_castui %[[MEMBER]] : i64 to index
//       CHECK:         %[[SRCK:.*]] = memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         %[[S0:.*]] = arith.index_castui %[[SLOT]] : i64 to index
//       CHECK:         %[[DSTK:.*]] = memref.subview %[[TAIL]][%[[S0]], 0, %[[M]], 0] [1, 1, 1, 128] [1, 1, 1, 1]
//       CHECK:         linalg.copy ins(%[[SRCK]] : memref<128xbf16, strided<[1], offset: ?>>) outs(%[[DSTK]] : memref<128xbf16, strided<[1], offset: ?>>)
//       CHECK:         %[[SRCG:.*]] = memref.subview %[[G]][%{{.*}}, 0] [1, 128] [1, 1]
//       CHECK:         %[[S1:.*]] = arith.index_castui %[[SLOT]] : i64 to index
//       CHECK:         %[[DSTG:.*]] = memref.subview %[[TAIL]][%[[S1]], 1, %[[M]], 0] [1, 1, 1, 128] [1, 1, 1, 1]
//       CHECK:         linalg.copy ins(%[[SRCG]] : {{.*}}) outs(%[[DSTG]] : {{.*}})
//       CHECK:       }
//       CHECK:     }
//       CHECK:     scf.reduce
//   CHECK-NOT:   kpool.seed_tail
//       CHECK:   return
func.func @seed_tail(%tail: memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>,
    %k: memref<?x128xbf16>, %gate: memref<?x128xbf16>, %iro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32) {
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x128xbf16>, memref<?x128xbf16>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<6x2x4x128xbf16, strided<[2048, 512, 128, 1]>>)
  return
}

// -----

// kpool 1: still lowered (every token closes its own pool, so the loop is
// empty at run time); no pooling arithmetic is involved.
// CHECK-LABEL: func @seed_tail_kpool1
//       CHECK:   scf.parallel
//       CHECK:     scf.for
//       CHECK:       linalg.copy
//       CHECK:       linalg.copy
//   CHECK-NOT:   linalg.generic
//   CHECK-NOT:   math.exp
func.func @seed_tail_kpool1(%tail: memref<?x2x1x16xf32>, %k: memref<?x16xf32>,
    %gate: memref<?x16xf32>, %iro: memref<?xi32>, %cache: memref<?xi32>,
    %slots: memref<?xi32>, %n: i32) {
  kpool.seed_tail kpool(1) head_dim(16)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x16xf32>, memref<?x16xf32>, memref<?xi32>, memref<?xi32>,
            memref<?xi32>)
      num_requests(%n)
      outs(%tail : memref<?x2x1x16xf32>)
  return
}

// -----

// A ring window wider than kpool (speculative decoding): R = 6 for kpool 4.
// CHECK-LABEL: func @seed_tail_window
//       CHECK:   %[[R:.*]] = arith.constant 6 : i64
//       CHECK:   scf.parallel
//       CHECK:       arith.subi %{{.*}}, %[[R]] : i64
//       CHECK:       arith.remui %{{.*}}, %[[R]] : i64
//       CHECK:       scf.for
//       CHECK:         arith.cmpi uge, %{{.*}}, %[[R]] : i64
//       CHECK:         linalg.copy
func.func @seed_tail_window(%tail: memref<?x2x6x128xbf16>,
    %k: memref<?x128xbf16>, %gate: memref<?x128xbf16>, %iro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32) {
  kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x128xbf16>, memref<?x128xbf16>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x6x128xbf16>)
  return
}
