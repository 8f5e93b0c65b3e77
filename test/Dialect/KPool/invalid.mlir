// RUN: kpool-opt %s -split-input-file -verify-diagnostics

// One case for every diagnostic of the kpool verifiers, for each op it applies to,
// plus the ODS type constraints. Unless a case says otherwise the ops use
// kpool(4) head_dim(8), bf16 keys and ui32 metadata.

//===----------------------------------------------------------------------===//
// kpool.compress
//===----------------------------------------------------------------------===//

func.func @compress_kpool_zero(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'kpool' to be at least 1, got 0}}
  %r = kpool.compress kpool(0) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

// Positions are below 2^33, so a pool of more than 2^32 members can never
// complete; every kpool up to 2^32 lowers in flat time (members as a loop).
func.func @compress_kpool_huge(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<?x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'kpool' to be at most 2^32 (positions are below 2^33, so no larger pool can complete), got 4294967297}}
  %r = kpool.compress kpool(4294967297) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_kpool_negative(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'kpool' to be at least 1, got -4}}
  %r = kpool.compress kpool(-4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_head_dim_zero(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'head_dim' to be at least 1, got 0}}
  %r = kpool.compress kpool(4) head_dim(0)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_mixed_tensor_memref_outs(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected all shaped operands to be tensors like 'k', got 'pooled' of type 'memref<?x8xbf16>'}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : memref<?x8xbf16>)
  return
}

// -----

func.func @compress_mixed_memref_tensor_ins(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected all shaped operands to be memrefs like 'k', got 'ape' of type 'tensor<4x8xf32>'}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, tensor<4x8xf32>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xbf16>)
  return
}

// -----

func.func @compress_tensor_no_result(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 1 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 0}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>)
  return
}

// -----

func.func @compress_tensor_two_results(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 1 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 2}}
  %r:2 = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>, tensor<?x8xbf16>
  return
}

// -----

func.func @compress_memref_with_result(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 0 result(s) in memref form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_result_type_mismatch(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected result #0 to have the type of its 'outs' operand ('tensor<?x8xbf16>'), got 'tensor<16x8xbf16>'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<16x8xbf16>
  return
}

// -----

func.func @compress_k_rank(%k: tensor<?xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'k' to have shape [?, 8] (tokens x head_dim), got [?]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_k_head_dim(%k: tensor<?x16xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'k' to have shape [?, 8] (tokens x head_dim), got [?, 16]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_k_i8(%k: tensor<?x8xi8>, %gate: tensor<?x8xi8>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xi8>) {
  // expected-error @+1 {{'kpool.compress' op expected 'k' element type to be bf16, f16 or f32, got 'i8'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xi8>, tensor<?x8xi8>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xi8>) -> tensor<?x8xi8>
  return
}

// -----

func.func @compress_k_f64(%k: memref<?x8xf64>, %gate: memref<?x8xf64>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xf64>) {
  // expected-error @+1 {{'kpool.compress' op expected 'k' element type to be bf16, f16 or f32, got 'f64'}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xf64>, memref<?x8xf64>, memref<4x8xf32>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xf64>)
  return
}

// -----

func.func @compress_gate_head_dim(%k: tensor<?x8xbf16>, %gate: tensor<?x4xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'gate' to have shape [?, 8] (tokens x head_dim), got [?, 4]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x4xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_gate_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x1x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'gate' to have shape [?, 8] (tokens x head_dim), got [?, 1, 8]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x1x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_gate_element_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'gate' element type to be 'bf16' (the element type of 'k'), got 'f16'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_gate_rows(%k: tensor<16x8xbf16>, %gate: tensor<12x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'gate' to have the shape of 'k' [16, 8], got [12, 8]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<16x8xbf16>, tensor<12x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_ape_kpool(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<3x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'ape' to have shape [4, 8] (kpool x head_dim), got [3, 8]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<3x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_ape_head_dim(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x16xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'ape' to have shape [4, 8] (kpool x head_dim), got [4, 16]}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x16xf32>,
            memref<?xui32>, memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xbf16>)
  return
}

// -----

func.func @compress_ape_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<32xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'ape' to have shape [4, 8] (kpool x head_dim), got [32]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<32xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_ape_bf16(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xbf16>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'ape' element type to be 'f32', got 'bf16'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xbf16>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_iro_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?x1xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'input_row_offsets' to have rank 1, got rank 2}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?x1xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_iro_i64(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xi64>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'input_row_offsets' element type to be i32 or ui32, got 'i64'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xi64>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_pro_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<ui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pool_row_offsets' to have rank 1, got rank 0}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<ui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_pro_si32(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xsi32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pool_row_offsets' element type to be i32 or ui32, got 'si32'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xsi32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_cache_rank(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?x?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_lengths' to have rank 1, got rank 2}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>,
            memref<?xui32>, memref<?x?xui32>)
      outs(%pooled : memref<?x8xbf16>)
  return
}

// -----

func.func @compress_cache_index(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xindex>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'cache_lengths' element type to be i32 or ui32, got 'index'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xindex>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_iro_length(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<3xui32>,
    %pro: tensor<?xui32>, %cache: tensor<3xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'input_row_offsets' to have one more element than 'cache_lengths' (4), got 3}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<3xui32>,
            tensor<?xui32>, tensor<3xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_pro_length(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<4xui32>,
    %pro: tensor<5xui32>, %cache: tensor<3xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pool_row_offsets' to have one more element than 'cache_lengths' (4), got 5}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<4xui32>,
            tensor<5xui32>, tensor<3xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

// The largest static batch: the expected length (2^63) is printed as it is,
// not wrapped to a negative count.
func.func @compress_iro_length_huge(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<3xui32>,
    %pro: tensor<?xui32>, %cache: tensor<9223372036854775807xui32>,
    %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'input_row_offsets' to have one more element than 'cache_lengths' (9223372036854775808), got 3}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<3xui32>,
            tensor<?xui32>, tensor<9223372036854775807xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_pooled_head_dim(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x16xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' to have shape [?, 8] (pools x head_dim), got [?, 16]}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @compress_pooled_rank(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' to have shape [?, 8] (pools x head_dim), got [?]}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?xbf16>)
  return
}

// -----

func.func @compress_pooled_element_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pooled: tensor<?x8xf32>) {
  // expected-error @+1 {{'kpool.compress' op expected 'pooled' element type to be 'bf16' (the element type of 'k'), got 'f32'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xf32>) -> tensor<?x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// kpool.seed_tail
//===----------------------------------------------------------------------===//

func.func @seed_tail_kpool_zero(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'kpool' to be at least 1, got 0}}
  %r = kpool.seed_tail kpool(0) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_head_dim_negative(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'head_dim' to be at least 1, got -1}}
  %r = kpool.seed_tail kpool(4) head_dim(-1)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_mixed_tensor_memref(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: memref<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected all shaped operands to be tensors like 'k', got 'tail' of type 'memref<?x2x4x8xbf16>'}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xbf16>)
  return
}

// -----

func.func @seed_tail_mixed_memref_tensor(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: memref<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected all shaped operands to be memrefs like 'k', got 'slot_idx' of type 'tensor<?xui32>'}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<?xui32>, memref<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xbf16>)
  return
}

// -----

func.func @seed_tail_tensor_no_result(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 1 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 0}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>)
  return
}

// -----

func.func @seed_tail_memref_with_result(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %tail: memref<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 0 result(s) in memref form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_result_type_mismatch(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected result #0 to have the type of its 'outs' operand ('tensor<?x2x4x8xbf16>'), got 'tensor<6x2x4x8xbf16>'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<6x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_k_head_dim(%k: tensor<?x7xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'k' to have shape [?, 8] (tokens x head_dim), got [?, 7]}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x7xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_k_i8(%k: memref<?x8xi8>, %gate: memref<?x8xi8>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %tail: memref<?x2x4x8xi8>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'k' element type to be bf16, f16 or f32, got 'i8'}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x8xi8>, memref<?x8xi8>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xi8>)
  return
}

// -----

func.func @seed_tail_gate_head_dim(%k: tensor<?x8xbf16>, %gate: tensor<?x16xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'gate' to have shape [?, 8] (tokens x head_dim), got [?, 16]}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x16xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_gate_element_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'gate' element type to be 'bf16' (the element type of 'k'), got 'f32'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xf32>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_gate_rows(%k: memref<5x8xbf16>, %gate: memref<6x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %tail: memref<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'gate' to have the shape of 'k' [5, 8], got [6, 8]}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<5x8xbf16>, memref<6x8xbf16>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xbf16>)
  return
}

// -----

func.func @seed_tail_iro_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<ui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'input_row_offsets' to have rank 1, got rank 0}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<ui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_iro_i64(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xi64>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'input_row_offsets' element type to be i32 or ui32, got 'i64'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xi64>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_cache_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<1x?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'cache_lengths' to have rank 1, got rank 2}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>,
            tensor<1x?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_cache_si32(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xsi32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'cache_lengths' element type to be i32 or ui32, got 'si32'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xsi32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_slot_idx_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?x1xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'slot_idx' to have rank 1, got rank 2}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?x1xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_slot_idx_i16(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xi16>, %n: i32,
    %tail: memref<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'slot_idx' element type to be i32 or ui32, got 'i16'}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<?xui32>, memref<?xui32>,
            memref<?xi16>)
      num_requests(%n)
      outs(%tail : memref<?x2x4x8xbf16>)
  return
}

// -----

func.func @seed_tail_iro_length(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<2xui32>, %cache: tensor<2xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'input_row_offsets' to have one more element than 'cache_lengths' (3), got 2}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<2xui32>, tensor<2xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_slot_idx_length(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<3xui32>, %cache: tensor<2xui32>,
    %slots: tensor<3xui32>, %n: i32,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'slot_idx' to have as many elements as 'cache_lengths' (2), got 3}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<3xui32>, tensor<2xui32>,
            tensor<3xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_tail_rank(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'tail' to have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got [2, 4, 8]}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_tail_not_key_and_gate(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<6x1x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'tail' to have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got [6, 1, 4, 8]}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<6x1x4x8xbf16>) -> tensor<6x1x4x8xbf16>
  return
}

// -----

func.func @seed_tail_tail_window(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %tail: memref<6x2x3x8xbf16, strided<[64, 32, 8, 1]>>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected the ring window of 'tail' (dimension 2) to be at least kpool = 4, got 3}}
  kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%tail : memref<6x2x3x8xbf16, strided<[64, 32, 8, 1]>>)
  return
}

// -----

func.func @seed_tail_tail_head_dim(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x16xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'tail' to have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got [?, 2, 4, 16]}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x16xbf16>) -> tensor<?x2x4x16xbf16>
  return
}

// -----

func.func @seed_tail_tail_element_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<?x2x4x8xf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'tail' element type to be 'bf16' (the element type of 'k'), got 'f16'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xf16>) -> tensor<?x2x4x8xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// kpool.ring_close
//===----------------------------------------------------------------------===//

func.func @ring_close_kpool_zero(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'kpool' to be at least 1, got 0}}
  %r:2 = kpool.ring_close kpool(0) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_head_dim_zero(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'head_dim' to be at least 1, got 0}}
  %r:2 = kpool.ring_close kpool(4) head_dim(0)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_mixed_tensor_memref(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected all shaped operands to be tensors like 'tail', got 'closed_pool' of type 'memref<?xi32>'}}
  %r = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, memref<?xi32>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @ring_close_mixed_memref_tensor(%tail: memref<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected all shaped operands to be memrefs like 'tail', got 'k' of type 'tensor<?x8xbf16>'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, tensor<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_tensor_one_result(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 2 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @ring_close_memref_with_results(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 0 result(s) in memref form (one per 'outs' operand on tensors, none on memrefs), got 2}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_result_type_mismatch(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected result #1 to have the type of its 'outs' operand ('tensor<?xi32>'), got 'tensor<4xi32>'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<4xi32>
  return
}

// -----

func.func @ring_close_k_rank(%tail: tensor<?x2x4x8xbf16>, %k: tensor<8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'k' to have shape [?, 8] (tokens x head_dim), got [8]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_k_i8(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xi8>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'k' element type to be bf16, f16 or f32, got 'i8'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xi8>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_gate_head_dim(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'gate' to have shape [?, 8] (tokens x head_dim), got [?, 128]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x128xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_gate_element_type(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'gate' element type to be 'bf16' (the element type of 'k'), got 'f16'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_gate_rows(%tail: tensor<?x2x4x8xbf16>, %k: tensor<9x8xbf16>,
    %gate: tensor<8x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'gate' to have the shape of 'k' [9, 8], got [8, 8]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<9x8xbf16>, tensor<8x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_tail_rank(%tail: tensor<?x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'tail' to have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got [?, 8]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_tail_window(%tail: tensor<?x2x3x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected the ring window of 'tail' (dimension 2) to be at least kpool = 4, got 3}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x3x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_tail_head_dim(%tail: memref<6x2x4x4xbf16, strided<[64, 32, 8, 1]>>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'tail' to have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got [6, 2, 4, 4]}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<6x2x4x4xbf16, strided<[64, 32, 8, 1]>>, memref<?x8xbf16>,
            memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_tail_element_type(%tail: tensor<?x2x4x8xf32>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'tail' element type to be 'bf16' (the element type of 'k'), got 'f32'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xf32>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_ape_kpool(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<1x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'ape' to have shape [4, 8] (kpool x head_dim), got [1, 8]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<1x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_ape_head_dim(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x9xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'ape' to have shape [4, 8] (kpool x head_dim), got [4, 9]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x9xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_ape_bf16(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xbf16>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'ape' element type to be 'f32', got 'bf16'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xbf16>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_iro_rank(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?x2xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'input_row_offsets' to have rank 1, got rank 2}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?x2xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_iro_si32(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xsi32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'input_row_offsets' element type to be i32 or ui32, got 'si32'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xsi32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_cache_rank(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<ui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'cache_lengths' to have rank 1, got rank 0}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<ui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_cache_i64(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xi64>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'cache_lengths' element type to be i32 or ui32, got 'i64'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xi64>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_slot_idx_rank(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?x?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'slot_idx' to have rank 1, got rank 2}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?x?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_slot_idx_i64(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xi64>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'slot_idx' element type to be i32 or ui32, got 'i64'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xi64>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_iro_length(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<5xui32>, %cache: tensor<3xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'input_row_offsets' to have one more element than 'cache_lengths' (4), got 5}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<5xui32>, tensor<3xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_slot_idx_length(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<3xui32>,
    %slots: tensor<4xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'slot_idx' to have as many elements as 'cache_lengths' (3), got 4}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<3xui32>, tensor<4xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>) -> tensor<?x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_pooled_batch(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<3xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<2x8xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'pooled' to have shape [3, 8] (batch x head_dim), got [2, 8]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<3xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<2x8xbf16>, tensor<?xi32>) -> tensor<2x8xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_pooled_head_dim(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x16xbf16>, %closed: tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'pooled' to have shape [?, 8] (batch x head_dim), got [?, 16]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x16xbf16>, tensor<?xi32>) -> tensor<?x16xbf16>, tensor<?xi32>
  return
}

// -----

func.func @ring_close_pooled_element_type(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xf32>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'pooled' element type to be 'bf16' (the element type of 'k'), got 'f32'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xf32>, memref<?xi32>)
  return
}

// -----

func.func @ring_close_closed_pool_batch(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<3xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<4xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'closed_pool' to have shape [3] (batch), got [4]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<3xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<4xi32>) -> tensor<?x8xbf16>, tensor<4xi32>
  return
}

// -----

func.func @ring_close_closed_pool_rank(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?x1xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'closed_pool' to have shape [?] (batch), got [?, 1]}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?x1xi32>) -> tensor<?x8xbf16>, tensor<?x1xi32>
  return
}

// -----

func.func @ring_close_closed_pool_ui32(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>, %closed: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'closed_pool' element type to be i32 or i64, got 'ui32'}}
  %r:2 = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<?x8xbf16>, tensor<?xui32>) -> tensor<?x8xbf16>, tensor<?xui32>
  return
}

// -----

func.func @ring_close_closed_pool_i16(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi16>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'closed_pool' element type to be i32 or i64, got 'i16'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>,
            memref<4x8xf32>, memref<?xui32>, memref<?xui32>, memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi16>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// kpool.pool_offsets
//===----------------------------------------------------------------------===//

func.func @pool_offsets_kpool_zero(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'kpool' to be at least 1, got 0}}
  %r = kpool.pool_offsets kpool(0)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_mixed_tensor_memref(%iro: tensor<?xui32>, %cache: memref<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected all shaped operands to be tensors like 'input_row_offsets', got 'cache_lengths' of type 'memref<?xui32>'}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, memref<?xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_tensor_no_result(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 1 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 0}}
  kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>)
  return
}

// -----

func.func @pool_offsets_memref_with_result(%iro: memref<?xui32>, %cache: memref<?xui32>,
    %pro: memref<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 0 result(s) in memref form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_result_type_mismatch(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected result #0 to have the type of its 'outs' operand ('tensor<?xui32>'), got 'tensor<?xi32>'}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xi32>
  return
}

// -----

func.func @pool_offsets_iro_rank(%iro: tensor<2x?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'input_row_offsets' to have rank 1, got rank 2}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<2x?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_iro_i64(%iro: memref<?xi64>, %cache: memref<?xui32>,
    %pro: memref<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'input_row_offsets' element type to be i32 or ui32, got 'i64'}}
  kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : memref<?xi64>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

// -----

func.func @pool_offsets_cache_rank(%iro: tensor<?xui32>, %cache: tensor<ui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'cache_lengths' to have rank 1, got rank 0}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<ui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_cache_si32(%iro: tensor<?xui32>, %cache: tensor<?xsi32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'cache_lengths' element type to be i32 or ui32, got 'si32'}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xsi32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_pro_rank(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?x1xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'pool_row_offsets' to have rank 1, got rank 2}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?x1xui32>) -> tensor<?x1xui32>
  return
}

// -----

func.func @pool_offsets_pro_i64(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xi64>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'pool_row_offsets' element type to be i32 or ui32, got 'i64'}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xi64>) -> tensor<?xi64>
  return
}

// -----

func.func @pool_offsets_iro_length(%iro: tensor<6xui32>, %cache: tensor<4xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'input_row_offsets' to have one more element than 'cache_lengths' (5), got 6}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<6xui32>, tensor<4xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @pool_offsets_pro_length(%iro: memref<?xui32>, %cache: memref<4xui32>,
    %pro: memref<4xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'pool_row_offsets' to have one more element than 'cache_lengths' (5), got 4}}
  kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : memref<?xui32>, memref<4xui32>)
      outs(%pro : memref<4xui32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Operand and result type constraints (ODS)
//===----------------------------------------------------------------------===//

func.func @compress_unranked_memref(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<*xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op operand #2 must be ranked tensor or strided memref, but got 'memref<*xf32>'}}
  kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : memref<?x8xbf16>, memref<?x8xbf16>, memref<*xf32>, memref<?xui32>,
            memref<?xui32>, memref<?xui32>)
      outs(%pooled : memref<?x8xbf16>)
  return
}

// -----

func.func @seed_tail_unranked_tensor(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32,
    %tail: tensor<*xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op operand #6 must be ranked tensor or strided memref, but got 'tensor<*xbf16>'}}
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<*xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @pool_offsets_vector_operand(%iro: tensor<?xui32>, %cache: vector<4xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op operand #1 must be ranked tensor or strided memref, but got 'vector<4xui32>'}}
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache
          : tensor<?xui32>, vector<4xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @ring_close_non_strided_layout(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16, affine_map<(d0, d1) -> (d0 floordiv 2, d1)>>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: i32,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op operand #1 must be ranked tensor or strided memref, but got 'memref<?x8xbf16, affine_map<(d0, d1) -> (d0 floordiv 2, d1)>>'}}
  kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : memref<?x2x4x8xbf16>,
            memref<?x8xbf16, affine_map<(d0, d1) -> (d0 floordiv 2, d1)>>,
            memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>, memref<?xui32>,
            memref<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : memref<?x8xbf16>, memref<?xi32>)
  return
}

// -----

// The custom form fixes the type of num_requests; the generic form does not.
func.func @seed_tail_num_requests_i64(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i64,
    %tail: tensor<?x2x4x8xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op operand #5 must be 32-bit signless integer, but got 'i64'}}
  %r = "kpool.seed_tail"(%k, %gate, %iro, %cache, %slots, %n, %tail)
      <{head_dim = 8 : i64, kpool = 4 : i64}>
      : (tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
         tensor<?xui32>, i64, tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @ring_close_num_requests_index(%tail: memref<?x2x4x8xbf16>, %k: memref<?x8xbf16>,
    %gate: memref<?x8xbf16>, %ape: memref<4x8xf32>,
    %iro: memref<?xui32>, %cache: memref<?xui32>,
    %slots: memref<?xui32>, %n: index,
    %pooled: memref<?x8xbf16>, %closed: memref<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op operand #7 must be 32-bit signless integer, but got 'index'}}
  "kpool.ring_close"(%tail, %k, %gate, %ape, %iro, %cache, %slots, %n, %pooled, %closed)
      <{head_dim = 8 : i64, kpool = 4 : i64,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0>}>
      : (memref<?x2x4x8xbf16>, memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>,
         memref<?xui32>, memref<?xui32>, memref<?xui32>, index, memref<?x8xbf16>,
         memref<?xi32>) -> ()
  return
}

// -----

// Results are tensors: the buffer form has none.
func.func @compress_memref_result(%k: memref<?x8xbf16>, %gate: memref<?x8xbf16>,
    %ape: memref<4x8xf32>, %iro: memref<?xui32>,
    %pro: memref<?xui32>, %cache: memref<?xui32>,
    %pooled: memref<?x8xbf16>) {
  // expected-error @+1 {{'kpool.compress' op result #0 must be variadic of ranked tensor of any type values, but got 'memref<?x8xbf16>'}}
  %r = "kpool.compress"(%k, %gate, %ape, %iro, %pro, %cache, %pooled)
      <{head_dim = 8 : i64, kpool = 4 : i64,
        operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0>}>
      : (memref<?x8xbf16>, memref<?x8xbf16>, memref<4x8xf32>, memref<?xui32>,
         memref<?xui32>, memref<?xui32>, memref<?x8xbf16>) -> memref<?x8xbf16>
  return
}

// -----

// kpool is a required property.
func.func @pool_offsets_missing_kpool(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op requires attribute 'kpool'}}
  %r = "kpool.pool_offsets"(%iro, %cache, %pro)
      : (tensor<?xui32>, tensor<?xui32>, tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

// With cache_lengths dynamic, the batch size comes from the first static
// batch-sized operand.
func.func @seed_tail_batch_from_offsets(%k: tensor<?x128xbf16>,
    %iro: tensor<4xui32>, %cache: tensor<?xui32>, %slots: tensor<7xui32>,
    %n: i32, %tail: tensor<?x2x4x128xbf16>) {
  // expected-error @+1 {{'kpool.seed_tail' op expected 'slot_idx' to have one fewer element than 'input_row_offsets' (3), got 7}}
  %r = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %k, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4xui32>,
            tensor<?xui32>, tensor<7xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return
}

// -----

func.func @pool_offsets_batch_from_offsets(%iro: tensor<3xui32>,
    %cache: tensor<?xui32>, %pro: tensor<7xui32>) {
  // expected-error @+1 {{'kpool.pool_offsets' op expected 'pool_row_offsets' to have as many elements as 'input_row_offsets' (3), got 7}}
  %r = kpool.pool_offsets kpool(4) ins(%iro, %cache : tensor<3xui32>, tensor<?xui32>)
      outs(%pro : tensor<7xui32>) -> tensor<7xui32>
  return
}

// -----

func.func @compress_empty_offsets(%k: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<0xui32>, %pro: tensor<?xui32>, %cache: tensor<?xui32>,
    %out: tensor<?x128xbf16>) {
  // expected-error @+1 {{'kpool.compress' op expected 'input_row_offsets' to have at least 1 element, got 0}}
  %r = kpool.compress kpool(4) head_dim(128)
      ins(%k, %k, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<0xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%out : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  return
}

// -----

// With all metadata dynamic, closed_pool's length fixes the batch size.
func.func @ring_close_batch_from_closed_pool(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %m: tensor<?xui32>,
    %n: i32, %pooled: tensor<5x128xbf16>, %closed: tensor<2xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op expected 'pooled' to have shape [2, 128] (batch x head_dim), got [5, 128]}}
  %p, %c = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %k, %ape, %m, %m, %m
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pooled, %closed : tensor<5x128xbf16>, tensor<2xi32>)
      -> tensor<5x128xbf16>, tensor<2xi32>
  return
}

// -----

// The status word: 1-D, 64-bit, of the op's form.
func.func @status_rank(%iro: memref<?xui32>, %cache: memref<?xui32>,
    %pro: memref<?xui32>, %st: memref<1x1xi64>) {
  // expected-error @+1 {{expected 'status' to have rank 1 (the status word), got rank 2}}
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>) status(%st : memref<1x1xi64>)
  return
}

// -----

func.func @status_element(%iro: memref<?xui32>, %cache: memref<?xui32>,
    %pro: memref<?xui32>, %st: memref<?xi32>) {
  // expected-error @+1 {{expected 'status' element type to be i64 or ui64, got 'i32'}}
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>) status(%st : memref<?xi32>)
  return
}

// -----

func.func @status_form(%k: tensor<?x8xf32>, %ape: tensor<4x8xf32>,
    %m: tensor<?xui32>, %p: tensor<?x8xf32>, %st: memref<1xi64>) {
  // expected-error @+1 {{expected all shaped operands to be tensors like 'k', got 'status' of type 'memref<1xi64>'}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xf32>, tensor<?x8xf32>,
          tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%p : tensor<?x8xf32>) status(%st : memref<1xi64>) -> tensor<?x8xf32>
  return
}

// -----

func.func @status_result(%k: tensor<?x8xf32>, %ape: tensor<4x8xf32>,
    %m: tensor<?xui32>, %p: tensor<?x8xf32>, %st: tensor<1xi64>) {
  // expected-error @+1 {{expected 2 result(s) in tensor form (one per 'outs' operand on tensors, none on memrefs), got 1}}
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xf32>, tensor<?x8xf32>,
          tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%p : tensor<?x8xf32>) status(%st : tensor<1xi64>) -> tensor<?x8xf32>
  return
}
