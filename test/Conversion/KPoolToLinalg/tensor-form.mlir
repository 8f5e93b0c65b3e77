// RUN: kpool-opt %s -convert-kpool-to-linalg -split-input-file -verify-diagnostics

// Only the buffer form is lowered: tensor-form ops are an error that says
// what to run first.

func.func @compress_tensor(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %init: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{'kpool.compress' op has tensor operands; run one-shot-bufferize before convert-kpool-to-linalg}}
  %pooled = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %pooled : tensor<?x8xbf16>
}

// -----

func.func @seed_tail_tensor(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32) -> tensor<?x2x4x8xbf16> {
  // expected-error @+1 {{'kpool.seed_tail' op has tensor operands; run one-shot-bufferize before convert-kpool-to-linalg}}
  %ring = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return %ring : tensor<?x2x4x8xbf16>
}

// -----

func.func @ring_close_tensor(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %pinit: tensor<?x8xbf16>, %cinit: tensor<?xi32>)
    -> (tensor<?x8xbf16>, tensor<?xi32>) {
  // expected-error @+1 {{'kpool.ring_close' op has tensor operands; run one-shot-bufferize before convert-kpool-to-linalg}}
  %pooled, %closed = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x8xbf16>, tensor<?xi32>)
      -> tensor<?x8xbf16>, tensor<?xi32>
  return %pooled, %closed : tensor<?x8xbf16>, tensor<?xi32>
}

// -----

// One error per tensor-form op; buffer-form ops next to them are left alone
// because the pass fails before rewriting anything.
func.func @pool_offsets_tensor(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %init: tensor<?xui32>, %m_iro: memref<?xui32>, %m_cache: memref<?xui32>,
    %m_out: memref<?xui32>) -> tensor<?xui32> {
  kpool.pool_offsets kpool(4)
      ins(%m_iro, %m_cache : memref<?xui32>, memref<?xui32>)
      outs(%m_out : memref<?xui32>)
  // expected-error @+1 {{'kpool.pool_offsets' op has tensor operands; run one-shot-bufferize before convert-kpool-to-linalg}}
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?xui32>) -> tensor<?xui32>
  return %pro : tensor<?xui32>
}
