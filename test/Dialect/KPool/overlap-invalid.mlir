// RUN: kpool-opt %s -split-input-file -verify-diagnostics

// Overlapping operands (docs/semantics.md, "Overlapping operands"): in
// buffer form no operand an op writes (its `outs`: pooled, closed,
// closed_pool, pool_row_offsets, the tail of seed_tail and step, the cache
// keys and scales, the status word) may overlap another operand of the same
// op. The verifier rejects what it can prove: one buffer passed twice
// (through memref.cast too), a buffer and a subview of it with static,
// non-zero sizes, and two subviews of one buffer whose static offsets,
// sizes and strides pick a common element. The cases of issue 24's finding
// 7 are among them. Unless a case says otherwise the ops use kpool(4)
// head_dim(8), bf16 keys and ui32 metadata.

func.func @compress_pooled_is_k(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' (written by the op) not to overlap 'k', got the same buffer}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%k : memref<?x8xbf16>)
  return
}

// -----

// A cast is the same buffer.
func.func @compress_pooled_is_a_cast_of_gate(%k: memref<?x8xbf16>,
    %gate: memref<16x8xbf16>, %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>) {
  %g = memref.cast %gate : memref<16x8xbf16> to memref<?x8xbf16>
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' (written by the op) not to overlap 'gate', got the same buffer}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%gate : memref<16x8xbf16>)
  return
}

// -----

func.func @pool_offsets_in_place(%iro: memref<?xui32>, %cache: memref<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'pool_row_offsets' (written by the op) not to overlap 'input_row_offsets', got the same buffer}}
  kpool.pool_offsets kpool(4)
      ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%iro : memref<?xui32>)
  return
}

// -----

// Finding 7: ring_close writing `pooled` into the ring it reads.
func.func @ring_close_pooled_in_ring(%ring: memref<3x2x4x8xbf16>,
    %k: memref<?x8xbf16>, %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %closed: memref<?xi32>) {
  %pooled = memref.subview %ring[0, 0, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1]
      : memref<3x2x4x8xbf16> to memref<4x8xbf16, strided<[8, 1]>>
  // expected-error @+1 {{'kpool.ring_close' op expected 'pooled' (written by the op) not to overlap 'tail', got 'pooled' as a subview of 'tail' with sizes [1, 1, 4, 8]}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%ring, %k, %gate, %ape, %iro, %cache, %slots
          : memref<3x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed
           : memref<4x8xbf16, strided<[8, 1]>>, memref<?xi32>)
  return
}

// -----

// The status word inside closed_pool (an i64 closed_pool: the same
// element type; a status word inside `pooled` is a view of another element
// type, which only host validation's address ranges see).
func.func @ring_close_status_is_closed_pool(%tail: memref<?x2x4x8xbf16>,
    %k: memref<?x8xbf16>, %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>, %slots: memref<?xui32>,
    %n: i32, %pooled: memref<?x8xbf16>, %closed: memref<?xi64>) {
  %s = memref.subview %closed[3] [1] [1]
      : memref<?xi64> to memref<1xi64, strided<[1], offset: 3>>
  // expected-error @+1 {{'kpool.ring_close' op expected 'status' (written by the op) not to overlap 'closed_pool', got 'status' as a subview of 'closed_pool' with sizes [1]}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi64>)
      status(%s : memref<1xi64, strided<[1], offset: 3>>)
  return
}

// -----

// Finding 7: seed_tail with the ring overlapping `k` (two static subviews
// of one buffer that share element [1, 0, 0, 0]).
func.func @seed_tail_ring_over_k(%buf: memref<8x2x4x8xbf16>,
    %gate: memref<4x8xbf16>, %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32) {
  %tail = memref.subview %buf[0, 0, 0, 0] [2, 2, 4, 8] [1, 1, 1, 1]
      : memref<8x2x4x8xbf16> to memref<2x2x4x8xbf16, strided<[64, 32, 8, 1]>>
  %k = memref.subview %buf[1, 0, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1]
      : memref<8x2x4x8xbf16> to memref<4x8xbf16, strided<[8, 1], offset: 64>>
  // expected-error @+1 {{'kpool.seed_tail' op expected 'tail' (written by the op) not to overlap 'k', got subviews of one buffer that both hold its element [1, 0, 0, 0]}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<4x8xbf16, strided<[8, 1], offset: 64>>, memref<4x8xbf16>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<2x2x4x8xbf16, strided<[64, 32, 8, 1]>>)
  return
}

// -----

// Interleaved views: rows 0, 2, 4, ... and rows 1, 4, 7, ... of one buffer
// share row 4.
func.func @compress_strided_rows_meet(%buf: memref<16x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>) {
  %k = memref.subview %buf[0, 0] [8, 8] [2, 1]
      : memref<16x8xbf16> to memref<8x8xbf16, strided<[16, 1]>>
  %pooled = memref.subview %buf[1, 0] [5, 8] [3, 1]
      : memref<16x8xbf16> to memref<5x8xbf16, strided<[24, 1], offset: 8>>
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' (written by the op) not to overlap 'k', got subviews of one buffer that both hold its element [4, 0]}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<8x8xbf16, strided<[16, 1]>>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<5x8xbf16, strided<[24, 1], offset: 8>>)
  return
}

// -----

// Finding 7: step with `closed` aliasing pooled[:2].
func.func @step_closed_in_pooled(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32, %ids: memref<?xi32>,
    %pro: memref<?xui32>, %pooled: memref<?x8xbf16>,
    %tail: memref<?x2x4x8xbf16>) {
  %closed = memref.subview %pooled[0, 0] [2, 8] [1, 1]
      : memref<?x8xbf16> to memref<2x8xbf16, strided<[8, 1]>>
  // expected-error @+1 {{'kpool.step' op expected 'pooled' (written by the op) not to overlap 'closed', got 'closed' as a subview of 'pooled' with sizes [2, 8]}}
  kpool.step kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %cache, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%closed, %ids, %pro, %pooled, %tail
           : memref<2x8xbf16, strided<[8, 1]>>, memref<?xi32>,
             memref<?xui32>, memref<?x8xbf16>, memref<?x2x4x8xbf16>)
  return
}

// -----

// The pool cache's scales written over `ape`.
func.func @compress_cache_scales_over_ape(%k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>, %pooled: memref<?x8xbf16>,
    %table: memref<?x?xi32>, %keys: memref<4x8x8xf8E4M3FN>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_scales' (written by the op) not to overlap 'ape', got the same buffer}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xbf16>)
      to_cache(%table, %keys, %ape
               : memref<?x?xi32>, memref<4x8x8xf8E4M3FN>, memref<4x8xf32>)
  return
}

// -----

// What the verifier accepts: inputs passed twice (only read), disjoint
// static subviews of one buffer (rows 0, 2, 4, ... and rows 1, 3, 5, ...;
// slots 0-1 and 2-3), subviews it cannot resolve (dynamic offsets: host
// validation compares the address ranges), and the tensor form, where
// bufferization copies what would overlap.
func.func @accepted(%buf: memref<16x8xbf16>, %ring: memref<4x2x4x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>, %pro: memref<?xui32>,
    %cache: memref<?xui32>, %slots: memref<?xui32>, %n: i32, %i: index,
    %t: tensor<?x8xbf16>, %tape: tensor<4x8xf32>, %tiro: tensor<?xui32>,
    %tcache: tensor<?xui32>) {
  %even = memref.subview %buf[0, 0] [8, 8] [2, 1]
      : memref<16x8xbf16> to memref<8x8xbf16, strided<[16, 1]>>
  %odd = memref.subview %buf[1, 0] [8, 8] [2, 1]
      : memref<16x8xbf16> to memref<8x8xbf16, strided<[16, 1], offset: 8>>
  kpool.compress kpool(4) head_dim(8)
      ins(%even, %even, %ape, %iro, %pro, %cache
          : memref<8x8xbf16, strided<[16, 1]>>,
            memref<8x8xbf16, strided<[16, 1]>>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%odd : memref<8x8xbf16, strided<[16, 1], offset: 8>>)
  %lo = memref.subview %ring[0, 0, 0, 0] [2, 2, 4, 8] [1, 1, 1, 1]
      : memref<4x2x4x8xbf16> to memref<2x2x4x8xbf16, strided<[64, 32, 8, 1]>>
  %hi = memref.subview %ring[2, 0, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1]
      : memref<4x2x4x8xbf16> to memref<4x8xbf16, strided<[8, 1], offset: 128>>
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%hi, %hi, %iro, %cache, %slots
          : memref<4x8xbf16, strided<[8, 1], offset: 128>>,
            memref<4x8xbf16, strided<[8, 1], offset: 128>>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%lo : memref<2x2x4x8xbf16, strided<[64, 32, 8, 1]>>)
  %dyn = memref.subview %buf[%i, 0] [4, 8] [1, 1]
      : memref<16x8xbf16> to memref<4x8xbf16, strided<[8, 1], offset: ?>>
  kpool.compress kpool(4) head_dim(8)
      ins(%even, %even, %ape, %iro, %pro, %cache
          : memref<8x8xbf16, strided<[16, 1]>>,
            memref<8x8xbf16, strided<[16, 1]>>, memref<4x8xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%dyn : memref<4x8xbf16, strided<[8, 1], offset: ?>>)
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%t, %t, %tape, %tiro, %tiro, %tcache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%t : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}
