// RUN: kpool-opt %s | kpool-opt | FileCheck %s --check-prefix=ROUND
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" -convert-kpool-to-linalg | FileCheck %s --check-prefix=LOWER
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" -convert-kpool-to-linalg -kpool-lower-cache-entries | FileCheck %s --check-prefix=CPU
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" -convert-kpool-to-linalg -kpool-map-to-gpu | FileCheck %s --check-prefix=GPU

// The pool-cache destination of compress (FP8, Hadamard, pow2 scales) in
// tensor form: it round-trips, bufferizes in place (the cache operands are
// read and written, no copy), lowers to a guarded kpool.cache_entry after
// the pooled row, and that entry becomes vector code on the CPU and a row
// group's warp-shuffle code on the GPU.

!rows = tensor<?x128xbf16>
!meta = tensor<?xui32>
!codes = tensor<?x16x128xf8E4M3FN>
!scales = tensor<?x16xf32>

// ROUND-LABEL: func.func @compress_to_cache
// ROUND: kpool.compress kpool(4) head_dim(128)
// ROUND-SAME: to_cache(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xi32>, tensor<?x16x128xf8E4M3FN>, tensor<?x16xf32>) rotate(hadamard) scale(pow2)
// ROUND-SAME: -> tensor<?x128xbf16>, tensor<?x16x128xf8E4M3FN>, tensor<?x16xf32>

// BUF-LABEL: func.func @compress_to_cache
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: kpool.compress
// BUF-SAME: to_cache(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x?xi32, strided<[?, ?], offset: ?>>, memref<?x16x128xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x16xf32, strided<[?, ?], offset: ?>>)
// BUF-NOT: memref.copy

// The entry's guards: the batch row below the table's rows and a page size
// above 0, the page index below the table's width, the page below the
// cache's pages (and the scales'), the row below the scales' page size.
// LOWER-LABEL: func.func @compress_to_cache
// LOWER: linalg.generic
// LOWER: arith.divui
// LOWER: arith.remui
// LOWER: memref.load
// LOWER: arith.extui
// LOWER: kpool.cache_entry rotate(hadamard) scale(pow2) %{{.*}} into %{{.*}}, %{{.*}} : memref<128xbf16, strided<[1], offset: ?>>, memref<128xf8E4M3FN, strided<[1], offset: ?>>, memref<f32, strided<[], offset: ?>>
// LOWER: kpool.cache_entry rotate(hadamard) scale(pow2) %{{.*}} into %{{.*}}, %{{.*}} : memref<128xbf16, strided<[?], offset: ?>>, memref<128xf8E4M3FN, strided<[?], offset: ?>>

// CPU-LABEL: func.func @compress_to_cache
// CPU-NOT: kpool.cache_entry
// CPU: vector.load {{.*}} vector<8xbf16>
// CPU: vector.shuffle
// CPU: vector.reduction <maxnumf>
// CPU: vector.store {{.*}} vector<8xf8E4M3FN>
// CPU: memref.store {{.*}} memref<f32, strided<[], offset: ?>>

// GPU-LABEL: func.func @compress_to_cache
// GPU: gpu.launch
// GPU: nvvm.bar.warp.sync
// GPU: nvvm.shfl.sync bfly
// GPU: nvvm.convert.f32x2.to.f8x2
func.func @compress_to_cache(%k: !rows, %gate: !rows, %ape: tensor<4x128xf32>,
    %iro: !meta, %pro: !meta, %cache: !meta, %bt: tensor<?x?xi32>,
    %pooled: !rows, %codes: !codes, %scales: !scales)
    -> (!rows, !codes, !scales) {
  %p, %c, %s = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : !rows, !rows, tensor<4x128xf32>, !meta, !meta, !meta)
      outs(%pooled : !rows)
      to_cache(%bt, %codes, %scales : tensor<?x?xi32>, !codes, !scales)
      rotate(hadamard) scale(pow2) -> !rows, !codes, !scales
  return %p, %c, %s : !rows, !codes, !scales
}

// ring_close with entries of the keys' element type (no scales), and the
// fused step.
// ROUND-LABEL: func.func @ring_close_to_cache
// ROUND: to_cache(%{{.*}}, %{{.*}} : tensor<?x?xui32>, tensor<?x4x8xf16>)
// ROUND-NOT: rotate
// ROUND-LABEL: func.func @step_to_cache
// ROUND: kpool.step
// ROUND-SAME: to_cache(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xi32>, tensor<?x4x8xf8E4M3FN>, tensor<?x4xf32>) rotate(none)
func.func @ring_close_to_cache(%tail: tensor<?x2x4x8xf16>, %k: tensor<?x8xf16>,
    %ape: tensor<4x8xf32>, %m: !meta, %n: i32, %p: tensor<?x8xf16>,
    %id: tensor<?xi32>, %bt: tensor<?x?xui32>, %ck: tensor<?x4x8xf16>)
    -> (tensor<?x8xf16>, tensor<?xi32>, tensor<?x4x8xf16>) {
  %r:3 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %k, %ape, %m, %m, %m : tensor<?x2x4x8xf16>, tensor<?x8xf16>,
          tensor<?x8xf16>, tensor<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n)
      outs(%p, %id : tensor<?x8xf16>, tensor<?xi32>)
      to_cache(%bt, %ck : tensor<?x?xui32>, tensor<?x4x8xf16>)
      -> tensor<?x8xf16>, tensor<?xi32>, tensor<?x4x8xf16>
  return %r#0, %r#1, %r#2 : tensor<?x8xf16>, tensor<?xi32>, tensor<?x4x8xf16>
}

func.func @step_to_cache(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %m: !meta, %n: i32, %c: tensor<?x8xbf16>,
    %id: tensor<?xi32>, %bt: tensor<?x?xi32>, %ck: tensor<?x4x8xf8E4M3FN>,
    %cs: tensor<?x4xf32>) -> tensor<?x4x8xf8E4M3FN> {
  %r:7 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xbf16>, tensor<?x8xbf16>,
          tensor<4x8xf32>, !meta, !meta, !meta)
      num_requests(%n)
      outs(%c, %id, %m, %c, %tail : tensor<?x8xbf16>, tensor<?xi32>,
           !meta, tensor<?x8xbf16>, tensor<?x2x4x8xbf16>)
      to_cache(%bt, %ck, %cs : tensor<?x?xi32>, tensor<?x4x8xf8E4M3FN>, tensor<?x4xf32>)
      rotate(none)
      -> tensor<?x8xbf16>, tensor<?xi32>, !meta, tensor<?x8xbf16>,
         tensor<?x2x4x8xbf16>, tensor<?x4x8xf8E4M3FN>, tensor<?x4xf32>
  return %r#5 : tensor<?x4x8xf8E4M3FN>
}
