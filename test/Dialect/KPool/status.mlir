// RUN: kpool-opt %s -split-input-file | kpool-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: kpool-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF
// RUN: kpool-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries" -convert-kpool-to-linalg | FileCheck %s --check-prefix=LOWER
// RUN: kpool-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries" -convert-kpool-to-linalg -kpool-map-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: kpool-opt %s -split-input-file -kpool-fuse-step | FileCheck %s --check-prefix=FUSE
// RUN: kpool-opt %s -split-input-file -kpool-lower-to-nvvm="format=isa" | FileCheck %s --check-prefix=PTX

// The status word (docs/semantics.md, "The status word"): an optional last
// `outs` operand of every op, read and written (the kernels keep its
// smallest finding), threaded through the tensor form like any `outs`.

// ROUND-LABEL: func.func @tensors
// ROUND:       kpool.compress {{.*}} outs(%{{.*}} : tensor<?x8xf32>) status(%{{.*}} : tensor<1xi64>) -> tensor<?x8xf32>, tensor<1xi64>
// ROUND:       kpool.pool_offsets {{.*}} status(%{{.*}} : tensor<1xui64>) -> tensor<?xui32>, tensor<1xui64>
// BUF-LABEL:   func.func @tensors
// BUF:         kpool.compress {{.*}} status(%{{.*}} : memref<1xi64
// BUF:         kpool.pool_offsets {{.*}} status(%{{.*}} : memref<1xui64
func.func @tensors(%k: tensor<?x8xf32>, %ape: tensor<2x8xf32>,
    %iro: tensor<?xui32>, %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %out: tensor<?x8xf32>, %st: tensor<1xi64>, %st2: tensor<1xui64>)
    -> (tensor<?x8xf32>, tensor<1xi64>, tensor<?xui32>, tensor<1xui64>) {
  %p, %s = kpool.compress kpool(2) head_dim(8)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : tensor<?x8xf32>, tensor<?x8xf32>, tensor<2x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%out : tensor<?x8xf32>) status(%st : tensor<1xi64>)
      -> tensor<?x8xf32>, tensor<1xi64>
  %o, %s2 = kpool.pool_offsets kpool(2)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>) status(%st2 : tensor<1xui64>)
      -> tensor<?xui32>, tensor<1xui64>
  return %p, %s, %o, %s2
      : tensor<?x8xf32>, tensor<1xi64>, tensor<?xui32>, tensor<1xui64>
}

// -----

!kv = memref<?x8xbf16>
!ring = memref<?x2x4x8xbf16>
!meta = memref<?xui32>
!st = memref<?xi64>

// The buffer form of a step's four ops sharing one status word: every
// kernel records into it: one atomic per place that checks (ring_close and
// seed_tail: num_requests and the request; pool_offsets and compress: the
// request), each only reached when a check failed and the word has an
// element, and one more per op in the kernel that runs when an extent
// contradicts the op (the Extent finding; k's and gate's rows and the
// metadata lengths are dynamic here). Fused into one kpool.step with that
// status word.
// LOWER-LABEL: func.func @step_ops
// LOWER-COUNT-10: memref.generic_atomic_rmw %{{.*}}[%{{.*}}] : memref<?xi64>
// LOWER-NOT:   memref.generic_atomic_rmw
// LOWER:       return
// GPU-LABEL:   func.func @step_ops
// GPU:         gpu.launch
// GPU:         memref.generic_atomic_rmw
// FUSE-LABEL:  func.func @step_ops
// FUSE-NEXT:   kpool.step kpool(4) head_dim(8) {{.*}} status(%{{.*}} : memref<?xi64>)
// FUSE-NEXT:   return
// PTX:         atom{{.*}}.global.cas.b64
func.func @step_ops(%tail: !ring, %k: !kv, %gate: !kv, %ape: memref<4x8xf32>,
    %iro: !meta, %cache: !meta, %slots: !meta, %n: i32, %closed: !kv,
    %ids: memref<?xi32>, %pro: !meta, %pooled: !kv, %st: !st) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, memref<?xi32>)
      status(%st : !st)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta) status(%st : !st)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv) status(%st : !st)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring) status(%st : !st)
  return
}

// -----

!kv = memref<?x8xbf16>
!ring = memref<?x2x4x8xbf16>
!meta = memref<?xui32>
!st = memref<?xi64>

// Different status words (or one op without): not fused.
// FUSE-LABEL: func.func @two_words
// FUSE-NOT:   kpool.step
// FUSE:       return
func.func @two_words(%tail: !ring, %k: !kv, %gate: !kv, %ape: memref<4x8xf32>,
    %iro: !meta, %cache: !meta, %slots: !meta, %n: i32, %closed: !kv,
    %ids: memref<?xi32>, %pro: !meta, %pooled: !kv, %st: !st, %st2: !st) {
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : !ring, !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n) outs(%closed, %ids : !kv, memref<?xi32>)
      status(%st : !st)
  kpool.pool_offsets kpool(4) ins(%iro, %cache : !meta, !meta)
      outs(%pro : !meta)
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv) status(%st2 : !st)
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots : !kv, !kv, !meta, !meta, !meta)
      num_requests(%n) outs(%tail : !ring) status(%st : !st)
  return
}

// -----

!kv = memref<?x8xbf16>
!meta = memref<?xui32>

// Without a status word nothing is recorded.
// LOWER-LABEL: func.func @no_word
// LOWER-NOT:   generic_atomic_rmw
// LOWER:       return
func.func @no_word(%k: !kv, %ape: memref<4x8xf32>, %iro: !meta, %pro: !meta,
    %cache: !meta, %pooled: !kv) {
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : !kv, !kv, memref<4x8xf32>, !meta, !meta, !meta)
      outs(%pooled : !kv)
  return
}
