// RUN: kpool-opt %s -convert-kpool-to-linalg -split-input-file | FileCheck %s

// Guards and layout versioning of convert-kpool-to-linalg:
// - an operand whose dynamic extent disagrees with head_dim/kpool (or with
//   another operand: gate's rows and k's, the metadata lengths) makes the op
//   a no-op: the lowering sits under one scf.if on the extent checks, in
//   host validation's order; past it, the operands are cast to the static
//   extents the op fixes;
// - an operand with a dynamic innermost stride gets a unit-stride version
//   (memref.extract_strided_metadata, scf.if, memref.cast to a layout with
//   innermost stride 1) next to the general one.

// CHECK-LABEL: func @compress_dynamic_extents
//  CHECK-SAME:   (%[[K:[^:]+]]: memref<?x?xbf16>, %[[G:[^:]+]]: memref<?x128xbf16>, %[[APE:[^:]+]]: memref<?x?xf32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %[[OUT:[^:]+]]: memref<?x?xbf16>)
//   CHECK-DAG:   %[[C4:.*]] = arith.constant 4 : index
//   CHECK-DAG:   %[[C128:.*]] = arith.constant 128 : index
//   CHECK-DAG:   %[[C0:.*]] = arith.constant 0 : index
//   CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
//       CHECK:   %[[KD:.*]] = memref.dim %[[K]], %[[C1]]
//       CHECK:   %[[OK0:.*]] = arith.cmpi eq, %[[KD]], %[[C128]] : index
//       CHECK:   %[[GR:.*]] = memref.dim %[[G]], %[[C0]]
//       CHECK:   %[[KR:.*]] = memref.dim %[[K]], %[[C0]]
//       CHECK:   %[[OK1:.*]] = arith.cmpi eq, %[[GR]], %[[KR]] : index
//       CHECK:   arith.andi %[[OK0]], %[[OK1]] : i1
//       CHECK:   %[[AK:.*]] = memref.dim %[[APE]], %[[C0]]
//       CHECK:   arith.cmpi eq, %[[AK]], %[[C4]] : index
//       CHECK:   %[[AD:.*]] = memref.dim %[[APE]], %[[C1]]
//       CHECK:   arith.cmpi eq, %[[AD]], %[[C128]] : index
//       CHECK:   %[[OD:.*]] = memref.dim %[[OUT]], %[[C1]]
//       CHECK:   arith.cmpi eq, %[[OD]], %[[C128]] : index
// The offsets are one longer than cache_lengths.
//       CHECK:   arith.addi %{{.*}}, %[[C1]] : index
//       CHECK:   arith.addi %{{.*}}, %[[C1]] : index
//       CHECK:   %[[OK:.*]] = arith.andi
//  CHECK-NEXT:   scf.if %[[OK]] {
//   CHECK-DAG:     memref.cast %[[K]] : memref<?x?xbf16> to memref<?x128xbf16>
//   CHECK-DAG:     memref.cast %[[APE]] : memref<?x?xf32> to memref<4x128xf32>
//   CHECK-DAG:     memref.cast %[[OUT]] : memref<?x?xbf16> to memref<?x128xbf16>
//   CHECK-NOT:     memref.extract_strided_metadata
//       CHECK:     scf.parallel
//       CHECK:       linalg.generic
//       CHECK:   }
//   CHECK-NOT:   else
//       CHECK:   return
func.func @compress_dynamic_extents(%k: memref<?x?xbf16>,
    %gate: memref<?x128xbf16>, %ape: memref<?x?xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>, %pooled: memref<?x?xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x?xbf16>, memref<?x128xbf16>, memref<?x?xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x?xbf16>)
  return
}

// -----

// A ring of unknown shape must be [?, 2, R, head_dim] with R >= kpool at run
// time; positions go to ring row q mod R.
// CHECK-LABEL: func @seed_tail_dynamic_ring
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x?x?x?xf16>
//   CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
//   CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : index
//   CHECK-DAG:   %[[C3:.*]] = arith.constant 3 : index
//   CHECK-DAG:   %[[C16:.*]] = arith.constant 16 : index
//       CHECK:   %[[D1:.*]] = memref.dim %[[TAIL]], %[[C1]]
//       CHECK:   arith.cmpi eq, %[[D1]], %[[C2]] : index
//       CHECK:   %[[D3:.*]] = memref.dim %[[TAIL]], %[[C3]]
//       CHECK:   arith.cmpi eq, %[[D3]], %[[C16]] : index
//       CHECK:   arith.andi
//       CHECK:   %[[D2:.*]] = memref.dim %[[TAIL]], %[[C2]]
//       CHECK:   arith.cmpi sge, %[[D2]], %[[C3]] : index
// gate's rows, input_row_offsets' and slot_idx's lengths.
//       CHECK:   arith.cmpi eq, %{{.*}}, %{{.*}} : index
//       CHECK:   arith.cmpi eq, %{{.*}}, %{{.*}} : index
//       CHECK:   arith.cmpi eq, %{{.*}}, %{{.*}} : index
//       CHECK:   %[[OK:.*]] = arith.andi
//  CHECK-NEXT:   scf.if %[[OK]] {
//       CHECK:     %[[RT:.*]] = memref.cast %[[TAIL]] : memref<?x?x?x?xf16> to memref<?x2x?x16xf16>
//       CHECK:     %[[R:.*]] = memref.dim %[[RT]], %[[C2]]
//       CHECK:     %[[W:.*]] = arith.index_castui %[[R]] : index to i64
//       CHECK:     scf.parallel
//       CHECK:       arith.subi %{{.*}}, %[[W]] : i64
//       CHECK:       arith.maxsi
//       CHECK:       arith.remui %{{.*}}, %[[W]] : i64
//       CHECK:       scf.for
//       CHECK:         arith.cmpi uge, %{{.*}}, %[[W]] : i64
//       CHECK:       linalg.copy
func.func @seed_tail_dynamic_ring(%tail: memref<?x?x?x?xf16>,
    %k: memref<?x16xf16>, %gate: memref<?x16xf16>, %iro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32) {
  kpool.seed_tail kpool(3) head_dim(16)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x16xf16>, memref<?x16xf16>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x?x?x?xf16>)
  return
}

// -----

// Fully dynamic strides (what one-shot-bufferize gives function arguments):
// the fast version casts every such operand to an innermost stride of 1, so
// the pooled rows are contiguous views; the slow version keeps any stride.
// CHECK-LABEL: func @compress_unit_stride_versioning
//  CHECK-SAME:   (%[[K:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>, %[[G:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>, %[[APE:[^:]+]]: memref<4x128xf32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %{{[^:]+}}: memref<?xui32>, %[[OUT:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>)
//   CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
// The extent guard (gate's rows, the metadata lengths) comes first.
//       CHECK:   scf.if
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}}:2, %[[KS:.*]]:2 = memref.extract_strided_metadata %[[K]]
//       CHECK:   %[[KU:.*]] = arith.cmpi eq, %[[KS]]#1, %[[C1]] : index
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}}:2, %[[GS:.*]]:2 = memref.extract_strided_metadata %[[G]]
//       CHECK:   %[[GU:.*]] = arith.cmpi eq, %[[GS]]#1, %[[C1]] : index
//       CHECK:   arith.andi %[[KU]], %[[GU]] : i1
// ape has static strides: it is not versioned.
//   CHECK-NOT:   memref.extract_strided_metadata %[[APE]]
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}}:2, %[[OS:.*]]:2 = memref.extract_strided_metadata %[[OUT]]
//       CHECK:   arith.cmpi eq, %[[OS]]#1, %[[C1]] : index
//       CHECK:   %[[UNIT:.*]] = arith.andi
//  CHECK-NEXT:   scf.if %[[UNIT]] {
//   CHECK-DAG:     %[[KC:.*]] = memref.cast %[[K]] : memref<?x128xbf16, strided<[?, ?], offset: ?>> to memref<?x128xbf16, strided<[?, 1], offset: ?>>
//   CHECK-DAG:     memref.cast %[[G]] : memref<?x128xbf16, strided<[?, ?], offset: ?>> to memref<?x128xbf16, strided<[?, 1], offset: ?>>
//   CHECK-DAG:     memref.cast %[[OUT]] : memref<?x128xbf16, strided<[?, ?], offset: ?>> to memref<?x128xbf16, strided<[?, 1], offset: ?>>
//       CHECK:     scf.parallel
//       CHECK:       memref.subview %[[KC]][%{{.*}}, 0] [1, 128] [1, 1] : memref<?x128xbf16, strided<[?, 1], offset: ?>> to memref<128xbf16, strided<[1], offset: ?>>
//       CHECK:       linalg.generic
//  CHECK-SAME:         outs(%{{.*}} : memref<128xbf16, strided<[1], offset: ?>>)
//  CHECK-SAME:         {kpool.pool_row}
//       CHECK:   } else {
//   CHECK-NOT:     memref.cast %[[K]]
//       CHECK:     scf.parallel
//       CHECK:       memref.subview %[[K]][%{{.*}}, 0] [1, 128] [1, 1] : memref<?x128xbf16, strided<[?, ?], offset: ?>> to memref<128xbf16, strided<[?], offset: ?>>
//       CHECK:       linalg.generic
//  CHECK-SAME:         outs(%{{.*}} : memref<128xbf16, strided<[?], offset: ?>>)
//  CHECK-SAME:         {kpool.pool_row}
//       CHECK:   }
//       CHECK:   return
func.func @compress_unit_stride_versioning(
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %ape: memref<4x128xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>,
    %pooled: memref<?x128xbf16, strided<[?, ?], offset: ?>>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16, strided<[?, ?], offset: ?>>,
            memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<4x128xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16, strided<[?, ?], offset: ?>>)
  return
}

// -----

// Both: the extent guard outside, the stride versioning inside.
// CHECK-LABEL: func @ring_close_guard_and_versioning
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>, %[[K:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>
//   CHECK-DAG:   %[[C3:.*]] = arith.constant 3 : index
//   CHECK-DAG:   %[[C128:.*]] = arith.constant 128 : index
//   CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : index
//   CHECK-DAG:   %[[C4:.*]] = arith.constant 4 : index
//       CHECK:   %[[D3:.*]] = memref.dim %[[TAIL]], %[[C3]] :
//       CHECK:   arith.cmpi eq, %[[D3]], %[[C128]] : index
//  CHECK-NEXT:   arith.andi
//  CHECK-NEXT:   %[[D2:.*]] = memref.dim %[[TAIL]], %[[C2]] :
//  CHECK-NEXT:   arith.cmpi sge, %[[D2]], %[[C4]] : index
// gate's rows, the metadata lengths, the outputs' rows (the batch).
//  CHECK-COUNT-5: arith.cmpi eq, %{{.*}}, %{{.*}} : index
//       CHECK:   %[[OK:.*]] = arith.andi
//  CHECK-NEXT:   scf.if %[[OK]] {
//       CHECK:     %[[RT:.*]] = memref.cast %[[TAIL]] : {{.*}} to memref<?x2x?x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:     %{{.*}}, %{{.*}}, %{{.*}}:4, %[[TS:.*]]:4 = memref.extract_strided_metadata %[[RT]]
//       CHECK:     arith.cmpi eq, %[[TS]]#3
//       CHECK:     %{{.*}}, %{{.*}}, %{{.*}}:2, %[[KS:.*]]:2 = memref.extract_strided_metadata %[[K]]
//       CHECK:     arith.cmpi eq, %[[KS]]#1
//  CHECK-NEXT:     %[[UNIT:.*]] = arith.andi
//  CHECK-NEXT:     scf.if %[[UNIT]] {
//       CHECK:       memref.cast %[[RT]] : {{.*}} to memref<?x2x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
//       CHECK:       scf.parallel
//       CHECK:         linalg.generic
//       CHECK:         linalg.fill
//       CHECK:     } else {
//       CHECK:       scf.parallel
//       CHECK:         linalg.generic
//       CHECK:         linalg.fill
//       CHECK:     }
//       CHECK:   }
//       CHECK:   return
func.func @ring_close_guard_and_versioning(
    %tail: memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>,
    %k: memref<?x128xbf16, strided<[?, ?], offset: ?>>,
    %gate: memref<?x128xbf16>, %ape: memref<4x128xf32>, %iro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x128xbf16>, %closed: memref<?xi32>) {
  kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>,
            memref<?x128xbf16, strided<[?, ?], offset: ?>>, memref<?x128xbf16>,
            memref<4x128xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x128xbf16>, memref<?xi32>)
  return
}

// -----

// A static non-unit innermost stride needs no versioning: the channel views
// are fully dynamic and there is one lowering.
// CHECK-LABEL: func @compress_static_non_unit_stride
//   CHECK-NOT:   memref.extract_strided_metadata
//       CHECK:   memref.subview %{{.*}} : memref<?x128xbf16, strided<[256, 2]>> to memref<128xbf16, strided<[2], offset: ?>>
//       CHECK:   memref.cast %{{.*}} : memref<128xbf16, strided<[2], offset: ?>> to memref<128xbf16, strided<[?], offset: ?>>
//       CHECK:   linalg.generic
//   CHECK-NOT:   linalg.generic
func.func @compress_static_non_unit_stride(
    %k: memref<?x128xbf16, strided<[256, 2]>>, %gate: memref<?x128xbf16>,
    %ape: memref<4x128xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %pooled: memref<?x128xbf16>) {
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x128xbf16, strided<[256, 2]>>, memref<?x128xbf16>,
            memref<4x128xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x128xbf16>)
  return
}
