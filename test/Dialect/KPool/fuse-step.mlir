// RUN: kpool-opt %s -split-input-file -kpool-fuse-step | FileCheck %s

// kpool-fuse-step: the four ops of a serving step become one kpool.step;
// anything that is not exactly a step, or whose fusion would move an
// observable effect, is left alone.

// The README's serving step (examples/serving_step.mlir), tensor form.
// CHECK-LABEL: func.func @serving_step
// CHECK-NOT:   kpool.ring_close
// CHECK-NOT:   kpool.pool_offsets
// CHECK-NOT:   kpool.compress
// CHECK:       %[[S:.*]]:5 = kpool.step kpool(4) head_dim(128) ins(%[[K:[^,]*]], %[[G:[^,]*]], %[[APE:[^,]*]], %[[IRO:[^,]*]], %[[CACHE:[^,]*]], %[[SLOTS:[^ ]*]] :
// CHECK-SAME:  outs(%[[CI:[^,]*]], %[[II:[^,]*]], %[[PI:[^,]*]], %[[PO:[^,]*]], %[[TAIL:[^ ]*]] :
// CHECK-NOT:   kpool.seed_tail
// CHECK:       return %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[S]]#3, %[[S]]#4
func.func @serving_step(%tail: tensor<?x2x4x128xbf16>, %k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %closed_init: tensor<?x128xbf16>, %ids_init: tensor<?xi32>,
    %pro_init: tensor<?xui32>, %pooled_init: tensor<?x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
        tensor<?x128xbf16>, tensor<?x2x4x128xbf16>) {
  %closed, %ids = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%closed_init, %ids_init : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
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
  return %closed, %ids, %pro, %pooled, %ring : tensor<?x128xbf16>,
      tensor<?xi32>, tensor<?xui32>, tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
}

// -----

!kv = memref<?x8xbf16>
!ring = memref<?x2x4x8xbf16>
!meta = memref<?xi32>

// Buffer form: fused where seed_tail is. In @moved_write, a store into the
// keys between ring_close and compress would move past compress's read:
// not fused. In @ring_after_seed, ring_close reads the ring seed_tail has
// already written (a different computation): not fused. In @other_keys,
// compress reads other keys: not a step.
// CHECK-LABEL: func.func @buffers
// CHECK-NEXT:  kpool.step kpool(4) head_dim(8)
// CHECK-NEXT:  return
// CHECK-LABEL: func.func @moved_write
// CHECK:       kpool.ring_close
// CHECK:       memref.store
// CHECK:       kpool.seed_tail
// CHECK-NOT:   kpool.step
// CHECK-LABEL: func.func @ring_after_seed
// CHECK-NOT:   kpool.step
// CHECK-LABEL: func.func @other_keys
// CHECK-NOT:   kpool.step
// CHECK:       return
func.func @buffers(%tail: !ring, %k: !kv, %g: !kv, %ape: memref<4x8xf32>,
    %iro: !meta, %cache: !meta, %slots: !meta, %n: i32, %pro: !meta,
    %pooled: !kv, %closed: !kv, %ids: !meta) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, !meta)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %g, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  return
}

func.func @moved_write(%tail: !ring, %k: !kv, %g: !kv, %ape: memref<4x8xf32>,
    %iro: !meta, %cache: !meta, %slots: !meta, %n: i32, %pro: !meta,
    %pooled: !kv, %closed: !kv, %ids: !meta, %v: bf16) {
  %c0 = arith.constant 0 : index
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, !meta)
  memref.store %v, %k[%c0, %c0] : !kv
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %g, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  return
}

func.func @ring_after_seed(%tail: !ring, %k: !kv, %g: !kv,
    %ape: memref<4x8xf32>, %iro: !meta, %cache: !meta, %slots: !meta, %n: i32,
    %pro: !meta, %pooled: !kv, %closed: !kv, %ids: !meta) {
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %g, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, !meta)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  return
}

func.func @other_keys(%tail: !ring, %k: !kv, %k2: !kv, %g: !kv,
    %ape: memref<4x8xf32>, %iro: !meta, %cache: !meta, %slots: !meta, %n: i32,
    %pro: !meta, %pooled: !kv, %closed: !kv, %ids: !meta) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %g, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, !meta)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k2, %g, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %g, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring)
  return
}

// -----

// With one pool cache (the same table and format; on tensors ring_close's
// cache results are compress's cache inits): the step writes that cache.
!rows = tensor<?x8xbf16>
!meta = tensor<?xui32>
!codes = tensor<?x4x8xf8E4M3FN>
!scales = tensor<?x4xf32>
// CHECK-LABEL: func.func @step_with_cache
// CHECK-NOT:   kpool.ring_close
// CHECK-NOT:   kpool.compress
// CHECK:       %[[S:.*]]:7 = kpool.step
// CHECK-SAME:  to_cache(%{{.*}}, %[[CODES:[^,]*]], %[[SCALES:[^ ]*]] : tensor<?x?xi32>, tensor<?x4x8xf8E4M3FN>, tensor<?x4xf32>) rotate(hadamard) scale(pow2)
// CHECK-NOT:   kpool.seed_tail
// CHECK:       return %[[S]]#3, %[[S]]#5, %[[S]]#6
func.func @step_with_cache(%tail: tensor<?x2x4x8xbf16>, %k: !rows,
    %ape: tensor<4x8xf32>, %m: !meta, %n: i32, %c: !rows, %id: tensor<?xi32>,
    %bt: tensor<?x?xi32>, %codes: !codes, %scales: !scales)
    -> (!rows, !codes, !scales) {
  %closed, %ids, %codes1, %scales1 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : tensor<?x2x4x8xbf16>, !rows,
          !rows, tensor<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n)
      outs(%c, %id : !rows, tensor<?xi32>)
      to_cache(%bt, %codes, %scales : tensor<?x?xi32>, !codes, !scales)
      rotate(hadamard) scale(pow2) -> !rows, tensor<?xi32>, !codes, !scales
  %pro = kpool.pool_offsets kpool(4) ins(%m, %m : !meta, !meta)
      outs(%m : !meta) -> !meta
  %pooled, %codes2, %scales2 = kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %pro, %m : !rows, !rows, tensor<4x8xf32>, !meta,
          !meta, !meta)
      outs(%c : !rows)
      to_cache(%bt, %codes1, %scales1 : tensor<?x?xi32>, !codes, !scales)
      rotate(hadamard) scale(pow2) -> !rows, !codes, !scales
  %ring = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %k, %m, %m, %m : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return %pooled, %codes2, %scales2 : !rows, !codes, !scales
}

// -----

// Buffers: the same cache buffers. Different scale modes, or a cache on
// only one of the two ops, are not one step.
!rows = memref<?x8xbf16>
!meta = memref<?xui32>
!codes = memref<?x4x8xf8E4M3FN>
!scales = memref<?x4xf32>
// CHECK-LABEL: func.func @buffers_with_cache
// CHECK:       kpool.step
// CHECK-SAME:  to_cache
// CHECK-NOT:   kpool.ring_close
// CHECK-LABEL: func.func @caches_differ
// CHECK:       kpool.ring_close
// CHECK:       kpool.compress
// CHECK-NOT:   kpool.step
// CHECK-LABEL: func.func @one_cache
// CHECK:       kpool.ring_close
// CHECK-NOT:   kpool.step
// ring_close and compress writing one pooled buffer in turn is valid for
// the four ops, but the step would write it twice in one kernel, which the
// verifier rejects (docs/semantics.md, "Overlapping operands"): not fused.
// CHECK-LABEL: func.func @shared_pooled
// CHECK:       kpool.ring_close
// CHECK:       kpool.pool_offsets
// CHECK:       kpool.compress
// CHECK:       kpool.seed_tail
// CHECK-NOT:   kpool.step
func.func @buffers_with_cache(%tail: memref<?x2x4x8xbf16>, %k: !rows,
    %ape: memref<4x8xf32>, %m: !meta, %n: i32, %c: !rows, %id: memref<?xi32>,
    %bt: memref<?x?xi32>, %codes: !codes, %scales: !scales, %p: !meta,
    %pc: !rows) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x8xbf16>, !rows,
          !rows, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%c, %id : !rows, memref<?xi32>)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, !codes, !scales)
  kpool.pool_offsets kpool(4) ins(%m, %m : !meta, !meta) outs(%p : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %p, %m : !rows, !rows, memref<4x8xf32>, !meta,
          !meta, !meta)
      outs(%pc : !rows)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, !codes, !scales)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %k, %m, %m, %m : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : memref<?x2x4x8xbf16>)
  return
}
func.func @caches_differ(%tail: memref<?x2x4x8xbf16>, %k: !rows,
    %ape: memref<4x8xf32>, %m: !meta, %n: i32, %c: !rows, %id: memref<?xi32>,
    %bt: memref<?x?xi32>, %codes: !codes, %scales: !scales, %p: !meta,
    %pc: !rows) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x8xbf16>, !rows,
          !rows, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%c, %id : !rows, memref<?xi32>)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, !codes, !scales)
      scale(pow2)
  kpool.pool_offsets kpool(4) ins(%m, %m : !meta, !meta) outs(%p : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %p, %m : !rows, !rows, memref<4x8xf32>, !meta,
          !meta, !meta)
      outs(%pc : !rows)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, !codes, !scales)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %k, %m, %m, %m : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : memref<?x2x4x8xbf16>)
  return
}
func.func @one_cache(%tail: memref<?x2x4x8xbf16>, %k: !rows,
    %ape: memref<4x8xf32>, %m: !meta, %n: i32, %c: !rows, %id: memref<?xi32>,
    %bt: memref<?x?xi32>, %codes: !codes, %scales: !scales, %p: !meta,
    %pc: !rows) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x8xbf16>, !rows,
          !rows, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%c, %id : !rows, memref<?xi32>)
  kpool.pool_offsets kpool(4) ins(%m, %m : !meta, !meta) outs(%p : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %p, %m : !rows, !rows, memref<4x8xf32>, !meta,
          !meta, !meta)
      outs(%pc : !rows)
      to_cache(%bt, %codes, %scales : memref<?x?xi32>, !codes, !scales)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %k, %m, %m, %m : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : memref<?x2x4x8xbf16>)
  return
}
func.func @shared_pooled(%tail: memref<?x2x4x8xbf16>, %k: !rows,
    %ape: memref<4x8xf32>, %m: !meta, %n: i32, %c: !rows, %id: memref<?xi32>,
    %p: !meta) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x8xbf16>, !rows,
          !rows, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%c, %id : !rows, memref<?xi32>)
  kpool.pool_offsets kpool(4) ins(%m, %m : !meta, !meta) outs(%p : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %p, %m : !rows, !rows, memref<4x8xf32>, !meta,
          !meta, !meta)
      outs(%c : !rows)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %k, %m, %m, %m : !rows, !rows, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : memref<?x2x4x8xbf16>)
  return
}
