// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" -cse -canonicalize | FileCheck %s --check-prefix=CLEAN
// RUN: kpool-opt %s -one-shot-bufferize | FileCheck %s --check-prefix=NOFB

// One-shot bufferization of the kpool ops. Each `outs` operand bufferizes in
// place into its result. `compress`, `seed_tail` and `pool_offsets` read
// their `outs` (rows or slots they do not write keep their value), so an init
// that is still needed elsewhere is copied; `ring_close` writes every element
// of both outputs, so its inits are never copied.

// The ring is updated in place: no new buffer, no copy.
// CHECK-LABEL: func @seed_tail_in_place
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.seed_tail kpool(4) head_dim(128)
//  CHECK-SAME:     num_requests
//  CHECK-SAME:     outs(%[[TAIL]] : memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>){{$}}
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   return %[[TAIL]]
//
// Without function-boundary bufferization the argument is read-only, and
// since seed_tail reads the slots it does not write, the ring is copied.
// NOFB-LABEL: func @seed_tail_in_place
//  NOFB-SAME:   (%[[TAIL:[^:]+]]: tensor<?x2x4x128xbf16>
//       NOFB:   %[[BUF:.*]] = bufferization.to_buffer %[[TAIL]]
//       NOFB:   %[[ALLOC:.*]] = memref.alloc
//       NOFB:   memref.copy %[[BUF]], %[[ALLOC]]
//       NOFB:   kpool.seed_tail
//  NOFB-SAME:     outs(%[[ALLOC]] : memref<?x2x4x128xbf16>)
func.func @seed_tail_in_place(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32)
    -> tensor<?x2x4x128xbf16> {
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return %ring : tensor<?x2x4x128xbf16>
}

// A ring aliased into a larger cache page: the op writes the page's strided
// subview in place.
// CHECK-LABEL: func @seed_tail_page_slice
//  CHECK-SAME:   (%[[PAGE:[^:]+]]: memref<6x4x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
//   CHECK-NOT:   memref.alloc
//       CHECK:   %[[VIEW:.*]] = memref.subview %[[PAGE]][0, 1, 0, 0] [6, 2, 4, 128] [1, 1, 1, 1]
//   CHECK-NOT:   memref.alloc
//       CHECK:   kpool.seed_tail kpool(4) head_dim(128)
//  CHECK-SAME:     outs(%[[VIEW]] : memref<6x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>)
//   CHECK-NOT:   memref.alloc
//       CHECK:   return %[[PAGE]]
//
// The insert_slice of the slice into itself is a self-copy that cleanup folds.
// CLEAN-LABEL: func @seed_tail_page_slice
//   CLEAN-NOT:   memref.alloc
//   CLEAN-NOT:   memref.copy
//       CLEAN:   kpool.seed_tail
//   CLEAN-NOT:   memref.copy
//       CLEAN:   return
func.func @seed_tail_page_slice(%page: tensor<6x4x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32)
    -> tensor<6x4x4x128xbf16> {
  %tail = tensor.extract_slice %page[0, 1, 0, 0] [6, 2, 4, 128] [1, 1, 1, 1]
      : tensor<6x4x4x128xbf16> to tensor<6x2x4x128xbf16>
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<6x2x4x128xbf16>) -> tensor<6x2x4x128xbf16>
  %new = tensor.insert_slice %ring into %page[0, 1, 0, 0] [6, 2, 4, 128] [1, 1, 1, 1]
      : tensor<6x2x4x128xbf16> into tensor<6x4x4x128xbf16>
  return %new : tensor<6x4x4x128xbf16>
}

// The pooled init is written in place.
// CHECK-LABEL: func @compress_in_place
//  CHECK-SAME:   %[[INIT:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>)
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.compress kpool(4) head_dim(128)
//  CHECK-SAME:     outs(%[[INIT]] : memref<?x128xbf16, strided<[?, ?], offset: ?>>) {test.tag}
//   CHECK-NOT:   memref.copy
//       CHECK:   return %[[INIT]]
func.func @compress_in_place(%k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>,
    %ape: tensor<4x128xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %init: tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xbf16>) {test.tag} -> tensor<?x128xbf16>
  return %pooled : tensor<?x128xbf16>
}

// The init is still returned unchanged, so compress writes a copy of it:
// rows that no request writes must keep the init's values.
// CHECK-LABEL: func @compress_init_still_live
//  CHECK-SAME:   %[[INIT:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>)
//       CHECK:   %[[ALLOC:.*]] = memref.alloc
//       CHECK:   memref.copy %[[INIT]], %[[ALLOC]]
//       CHECK:   kpool.compress
//  CHECK-SAME:     outs(%[[ALLOC]] : memref<?x128xbf16>)
//       CHECK:   return %[[ALLOC]], %[[INIT]]
func.func @compress_init_still_live(%k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>, %init: tensor<?x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x128xbf16>) {
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  return %pooled, %init : tensor<?x128xbf16>, tensor<?x128xbf16>
}

// tensor.empty inits become fresh buffers that are not copied into.
// CHECK-LABEL: func @ring_close_empty_inits
//   CHECK-NOT:   memref.copy
//   CHECK-DAG:   %[[P:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?x128xbf16>
//   CHECK-DAG:   %[[C:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?xi32>
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.ring_close kpool(4) head_dim(128)
//  CHECK-SAME:     outs(%[[P]], %[[C]] : memref<?x128xbf16>, memref<?xi32>){{$}}
//   CHECK-NOT:   memref.copy
//       CHECK:   return %[[P]], %[[C]]
func.func @ring_close_empty_inits(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32) -> (tensor<?x128xbf16>, tensor<?xi32>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %cache, %c0 : tensor<?xui32>
  %pinit = tensor.empty(%b) : tensor<?x128xbf16>
  %cinit = tensor.empty(%b) : tensor<?xi32>
  %pooled, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  return %pooled, %closed : tensor<?x128xbf16>, tensor<?xi32>
}

// ring_close does not read its outs: inits that stay live get fresh buffers,
// still without a copy (compare compress_init_still_live).
// CHECK-LABEL: func @ring_close_inits_still_live
//  CHECK-SAME:   %[[PI:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>, %[[CI:[^:]+]]: memref<?xi32, strided<[?], offset: ?>>)
//   CHECK-NOT:   memref.copy
//       CHECK:   %[[P:.*]] = memref.alloc
//       CHECK:   %[[C:.*]] = memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.ring_close
//  CHECK-SAME:     outs(%[[P]], %[[C]] : memref<?x128xbf16>, memref<?xi32>)
//   CHECK-NOT:   memref.copy
//       CHECK:   return %[[P]], %[[C]], %[[PI]], %[[CI]]
//
// NOFB-LABEL: func @ring_close_inits_still_live
//   NOFB-NOT:   memref.copy
//       NOFB:   kpool.ring_close
//   NOFB-NOT:   memref.copy
//       NOFB:   return
func.func @ring_close_inits_still_live(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32, %pinit: tensor<?x128xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>, tensor<?xi32>) {
  %pooled, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  return %pooled, %closed, %pinit, %cinit
      : tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>, tensor<?xi32>
}

// One call in the order the spec fixes (ring_close reads the ring before
// seed_tail overwrites it, compress uses the offsets pool_offsets computes):
// no copy anywhere, the ring and the pooled init are updated in place.
// CHECK-LABEL: func @step
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
//  CHECK-SAME:   %[[PINIT:[^:]+]]: memref<?x128xbf16, strided<[?, ?], offset: ?>>)
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.ring_close
//  CHECK-SAME:     ins(%[[TAIL]],
//   CHECK-NOT:   memref.copy
//       CHECK:   %[[PRO:.*]] = memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.pool_offsets kpool(4)
//  CHECK-SAME:     outs(%[[PRO]] : memref<?xui32>)
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.compress
//  CHECK-SAME:     %[[PRO]]
//  CHECK-SAME:     outs(%[[PINIT]] :
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.seed_tail
//  CHECK-SAME:     outs(%[[TAIL]] :
//   CHECK-NOT:   memref.copy
//       CHECK:   return
func.func @step(%tail: tensor<?x2x4x128xbf16>, %k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %pooled_init: tensor<?x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>,
        tensor<?x2x4x128xbf16>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %cache, %c0 : tensor<?xui32>
  %pinit = tensor.empty(%b) : tensor<?x128xbf16>
  %cinit = tensor.empty(%b) : tensor<?xi32>
  %closed_rows, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  %b1 = tensor.dim %iro, %c0 : tensor<?xui32>
  %pro_init = tensor.empty(%b1) : tensor<?xui32>
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%pro_init : tensor<?xui32>) -> tensor<?xui32>
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled_init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return %closed_rows, %closed, %pooled, %ring
      : tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>,
        tensor<?x2x4x128xbf16>
}

// If the old ring is still read after seed_tail, seed_tail must write a copy.
// CHECK-LABEL: func @seed_tail_then_ring_close
//  CHECK-SAME:   (%[[TAIL:[^:]+]]: memref<?x2x4x128xbf16, strided<[?, ?, ?, ?], offset: ?>>
//       CHECK:   %[[NEW:.*]] = memref.alloc
//       CHECK:   memref.copy %[[TAIL]], %[[NEW]]
//       CHECK:   kpool.seed_tail
//  CHECK-SAME:     outs(%[[NEW]] :
//       CHECK:   kpool.ring_close
//  CHECK-SAME:     ins(%[[TAIL]],
func.func @seed_tail_then_ring_close(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32, %pinit: tensor<?x128xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>) {
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  %pooled, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  return %ring, %pooled, %closed
      : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?xi32>
}

// pool_offsets reads its outs too (entries past the batch keep their value).
// CHECK-LABEL: func @pool_offsets_in_place
//  CHECK-SAME:   %[[OUT:[^:]+]]: memref<?xui32, strided<[?], offset: ?>>)
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.copy
//       CHECK:   kpool.pool_offsets kpool(3)
//  CHECK-SAME:     outs(%[[OUT]] : memref<?xui32, strided<[?], offset: ?>>)
//       CHECK:   return %[[OUT]]
func.func @pool_offsets_in_place(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %out: tensor<?xui32>) -> tensor<?xui32> {
  %pro = kpool.pool_offsets kpool(3)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%out : tensor<?xui32>) -> tensor<?xui32>
  return %pro : tensor<?xui32>
}
