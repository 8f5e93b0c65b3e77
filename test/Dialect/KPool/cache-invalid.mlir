// RUN: kpool-opt %s -split-input-file -verify-diagnostics

// The verifier of the pool-cache destination (`to_cache`) of compress,
// ring_close and step: each static mistake is a diagnostic that names the
// operand or attribute.

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @hadamard_not_power_of_two(%k: memref<?x96xbf16>, %ape: memref<4x96xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %p: memref<?x96xbf16>,
    %ck: memref<?x16x96xf8E4M3FN>, %cs: memref<?x16xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'head_dim' to be a power of two for rotate(hadamard), got 96}}
  kpool.compress kpool(4) head_dim(96)
      ins(%k, %k, %ape, %m, %m, %m : memref<?x96xbf16>, memref<?x96xbf16>,
          memref<4x96xf32>, !meta, !meta, !meta)
      outs(%p : memref<?x96xbf16>)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x16x96xf8E4M3FN>, memref<?x16xf32>)
      rotate(hadamard)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @fp8_without_scales(%k: !rows, %ape: memref<4x128xf32>, %m: !meta,
    %bt: memref<?x?xi32>, %ck: memref<?x16x128xf8E4M3FN>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_scales' with f8E4M3FN 'cache_keys' (one f32 scale per entry)}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<?x?xi32>, memref<?x16x128xf8E4M3FN>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @scales_with_element_entries(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x128xbf16>,
    %cs: memref<?x16xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected no 'cache_scales' with 'bf16' 'cache_keys' (only FP8 entries have a scale)}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x16x128xbf16>, memref<?x16xf32>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @scale_mode_with_element_entries(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected no 'scale' with 'bf16' 'cache_keys' (only FP8 entries have a scale)}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<?x?xi32>, memref<?x16x128xbf16>) scale(pow2)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @entry_of_another_type(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x128xf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_keys' element type to be 'bf16' (the element type of 'k') or f8E4M3FN, got 'f16'}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<?x?xi32>, memref<?x16x128xf16>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @keys_wrong_head_dim(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x64xf8E4M3FN>,
    %cs: memref<?x16xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_keys' to have shape [?, ?, 128] (pages x page_size x head_dim), got [?, 16, 64]}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x16x64xf8E4M3FN>, memref<?x16xf32>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @scales_other_page_size(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x128xf8E4M3FN>,
    %cs: memref<?x8xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_scales' to have shape [?, 16] (pages x page_size, as 'cache_keys'), got [?, 8]}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x16x128xf8E4M3FN>, memref<?x8xf32>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @scales_not_f32(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi32>, %ck: memref<?x16x128xf8E4M3FN>,
    %cs: memref<?x16xf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_scales' element type to be 'f32', got 'f16'}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck, %cs : memref<?x?xi32>, memref<?x16x128xf8E4M3FN>, memref<?x16xf16>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @table_rank(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?xi32>, %ck: memref<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'block_table' to have rank 2 (batch x pages per request), got rank 1}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<?xi32>, memref<?x16x128xbf16>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @table_element(%k: !rows, %ape: memref<4x128xf32>,
    %m: !meta, %bt: memref<?x?xi64>, %ck: memref<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'block_table' element type to be i32 or ui32, got 'i64'}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<?x?xi64>, memref<?x16x128xbf16>)
  return
}

// -----

!rows = memref<?x128xbf16>
func.func @table_rows_not_batch(%k: !rows, %ape: memref<4x128xf32>,
    %m: memref<3xui32>, %c: memref<2xui32>, %bt: memref<3x?xi32>,
    %ck: memref<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'block_table' to have shape [2, ?] (batch x pages per request), got [3, ?]}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %c : !rows, !rows, memref<4x128xf32>, memref<3xui32>, memref<3xui32>, memref<2xui32>)
      outs(%k : !rows)
      to_cache(%bt, %ck : memref<3x?xi32>, memref<?x16x128xbf16>)
  return
}

// -----

!rows = memref<?x128xbf16>
!meta = memref<?xui32>
func.func @rotate_without_cache(%k: !rows, %ape: memref<4x128xf32>, %m: !meta) {
  // expected-error @+1 {{'kpool.compress' op expected 'rotate' only with a pool-cache destination ('to_cache')}}
  kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, memref<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows) rotate(hadamard)
  return
}

// -----

!rows = tensor<?x128xbf16>
!meta = tensor<?xui32>
func.func @cache_memref_in_tensor_form(%k: !rows, %ape: tensor<4x128xf32>,
    %m: !meta, %bt: tensor<?x?xi32>, %ck: memref<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected all shaped operands to be tensors like 'k', got 'cache_keys' of type 'memref<?x16x128xbf16>'}}
  %r = kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, tensor<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : tensor<?x?xi32>, memref<?x16x128xbf16>) -> !rows
  return
}

// -----

!rows = tensor<?x128xbf16>
!meta = tensor<?xui32>
func.func @cache_result_missing(%k: !rows, %ape: tensor<4x128xf32>,
    %m: !meta, %bt: tensor<?x?xi32>, %ck: tensor<?x16x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 2 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %m, %m, %m : !rows, !rows, tensor<4x128xf32>, !meta, !meta, !meta)
      outs(%k : !rows)
      to_cache(%bt, %ck : tensor<?x?xi32>, tensor<?x16x128xbf16>) -> !rows
  return
}

// -----

!rows = memref<?x8xbf16>
!meta = memref<?xui32>
func.func @ring_close_hadamard(%tail: memref<?x2x4x12xbf16>, %k: memref<?x12xbf16>,
    %ape: memref<4x12xf32>, %m: !meta, %n: i32, %p: memref<?x12xbf16>,
    %id: memref<?xi32>, %bt: memref<?x?xi32>, %ck: memref<?x4x12xbf16>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'head_dim' to be a power of two for rotate(hadamard), got 12}}
  kpool.ring_close kpool(4) head_dim(12)
      ins(%tail, %k, %k, %ape, %m, %m, %m : memref<?x2x4x12xbf16>, memref<?x12xbf16>,
          memref<?x12xbf16>, memref<4x12xf32>, !meta, !meta, !meta)
      num_requests(%n)
      outs(%p, %id : memref<?x12xbf16>, memref<?xi32>)
      to_cache(%bt, %ck : memref<?x?xi32>, memref<?x4x12xbf16>) rotate(hadamard)
  return
}

// -----

func.func @step_fp8_without_scales(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %m: memref<?xui32>, %n: i32, %c: memref<?x8xbf16>,
    %id: memref<?xi32>, %bt: memref<?x?xui32>, %ck: memref<?x4x8xf8E4M3FN>) {
  // expected-error @+1 {{'kpool.step' op expected 'cache_scales' with f8E4M3FN 'cache_keys' (one f32 scale per entry)}}
  kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : memref<?x8xbf16>, memref<?x8xbf16>,
          memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%c, %id, %m, %c, %tail : memref<?x8xbf16>, memref<?xi32>,
           memref<?xui32>, memref<?x8xbf16>, memref<?x2x4x8xbf16>)
      to_cache(%bt, %ck : memref<?x?xui32>, memref<?x4x8xf8E4M3FN>)
  return
}

// -----

// The generic form can name one part of the destination without the other.
func.func @table_without_keys(%k: memref<?x8xf32>, %ape: memref<4x8xf32>,
    %m: memref<?xui32>, %bt: memref<?x?xi32>, %p: memref<?x8xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_keys' with a 'block_table' (the pool-cache destination)}}
  "kpool.compress"(%k, %k, %ape, %m, %m, %m, %bt, %p) <{head_dim = 8 : i64, kpool = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0>}> : (memref<?x8xf32>, memref<?x8xf32>, memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>, memref<?x?xi32>, memref<?x8xf32>) -> ()
  return
}

// -----

func.func @keys_without_table(%k: memref<?x8xf32>, %ape: memref<4x8xf32>,
    %m: memref<?xui32>, %p: memref<?x8xf32>, %ck: memref<?x4x8xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected a 'block_table' with 'cache_keys' (the pool-cache destination is block_table, cache_keys and, for FP8, cache_scales)}}
  "kpool.compress"(%k, %k, %ape, %m, %m, %m, %p, %ck) <{head_dim = 8 : i64, kpool = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0>}> : (memref<?x8xf32>, memref<?x8xf32>, memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>, memref<?x8xf32>, memref<?x4x8xf32>) -> ()
  return
}
