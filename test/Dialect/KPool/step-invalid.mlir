// RUN: kpool-opt %s -split-input-file -verify-diagnostics

// The verifier of kpool.step: it checks what each of the four ops it fuses
// checks (invalid.mlir has every diagnostic per op); these are the checks
// that tie its operands together.

func.func @window_below_kpool(%tail: tensor<?x2x3x8xbf16>, %k: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %m: tensor<?xui32>, %n: i32, %c: tensor<?x8xbf16>,
    %id: tensor<?xi32>, %p: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.step' op expected the ring window of 'tail' (dimension 2) to be at least kpool = 4, got 3}}
  %r:5 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xbf16>, tensor<?x8xbf16>,
          tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%c, %id, %m, %p, %tail : tensor<?x8xbf16>, tensor<?xi32>,
           tensor<?xui32>, tensor<?x8xbf16>, tensor<?x2x3x8xbf16>)
      -> tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xbf16>,
         tensor<?x2x3x8xbf16>
  return
}

// -----

func.func @offsets_not_one_longer(%tail: tensor<?x2x4x8xbf16>,
    %k: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %iro: tensor<3xui32>,
    %cache: tensor<2xui32>, %n: i32, %c: tensor<?x8xbf16>,
    %id: tensor<?xi32>, %pro: tensor<2xui32>, %p: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.step' op expected 'pool_row_offsets' to have one more element than 'cache_lengths' (3), got 2}}
  %r:5 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %iro, %cache, %cache : tensor<?x8xbf16>,
          tensor<?x8xbf16>, tensor<4x8xf32>, tensor<3xui32>, tensor<2xui32>,
          tensor<2xui32>)
      num_requests(%n)
      outs(%c, %id, %pro, %p, %tail : tensor<?x8xbf16>, tensor<?xi32>,
           tensor<2xui32>, tensor<?x8xbf16>, tensor<?x2x4x8xbf16>)
      -> tensor<?x8xbf16>, tensor<?xi32>, tensor<2xui32>, tensor<?x8xbf16>,
         tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @closed_rows_not_batch(%tail: tensor<?x2x4x8xbf16>,
    %k: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %iro: tensor<3xui32>,
    %cache: tensor<2xui32>, %n: i32, %c: tensor<3x8xbf16>,
    %id: tensor<?xi32>, %pro: tensor<?xui32>, %p: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.step' op expected 'closed' to have shape [2, 8] (batch x head_dim), got [3, 8]}}
  %r:5 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %iro, %cache, %cache : tensor<?x8xbf16>,
          tensor<?x8xbf16>, tensor<4x8xf32>, tensor<3xui32>, tensor<2xui32>,
          tensor<2xui32>)
      num_requests(%n)
      outs(%c, %id, %pro, %p, %tail : tensor<3x8xbf16>, tensor<?xi32>,
           tensor<?xui32>, tensor<?x8xbf16>, tensor<?x2x4x8xbf16>)
      -> tensor<3x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xbf16>,
         tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @pooled_other_type(%tail: tensor<?x2x4x8xbf16>,
    %k: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %m: tensor<?xui32>, %n: i32,
    %c: tensor<?x8xbf16>, %id: tensor<?xi32>, %p: tensor<?x8xf16>) {
  // expected-error @+1 {{'kpool.step' op expected 'pooled' element type to be 'bf16' (the element type of 'k'), got 'f16'}}
  %r:5 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xbf16>, tensor<?x8xbf16>,
          tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%c, %id, %m, %p, %tail : tensor<?x8xbf16>, tensor<?xi32>,
           tensor<?xui32>, tensor<?x8xf16>, tensor<?x2x4x8xbf16>)
      -> tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xf16>,
         tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @mixed_forms(%tail: memref<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %m: tensor<?xui32>, %n: i32, %c: tensor<?x8xbf16>,
    %id: tensor<?xi32>, %p: tensor<?x8xbf16>) {
  // expected-error @+1 {{'kpool.step' op expected all shaped operands to be tensors like 'k', got 'tail' of type 'memref<?x2x4x8xbf16>'}}
  %r:4 = kpool.step kpool(4) head_dim(8)
      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xbf16>, tensor<?x8xbf16>,
          tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%c, %id, %m, %p, %tail : tensor<?x8xbf16>, tensor<?xi32>,
           tensor<?xui32>, tensor<?x8xbf16>, memref<?x2x4x8xbf16>)
      -> tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xbf16>
  return
}
