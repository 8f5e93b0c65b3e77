// RUN: kpool-opt %s -split-input-file -verify-diagnostics

// The common mistakes in the ops' custom syntax, each reported with what the
// clause must hold: the operands by name and count, the types, the missing
// keyword. Unless a case says otherwise the ops use kpool(4) head_dim(8),
// bf16 keys and ui32 metadata.

func.func @compress_missing_operand(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      // expected-error @+1 {{expected 6 operands in 'ins' (k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths), got 5}}
      ins(%k, %gate, %ape, %iro, %pro
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_extra_operand(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      // expected-error @+1 {{expected 6 operands in 'ins' (k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths), got 7}}
      ins(%k, %gate, %ape, %iro, %pro, %cache, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_missing_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          // expected-error @+1 {{expected 6 types in 'ins' (k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths), got 5}}
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_no_types(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      // expected-error @+1 {{expected ':' and 6 types in 'ins' (k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths)}}
      ins(%k, %gate, %ape, %iro, %pro, %cache)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_missing_head_dim(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4)
      // expected-error @+1 {{expected 'head_dim(<channels per key>)'}}
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_missing_kpool(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  // expected-error @+1 {{expected 'kpool(<tokens per pool>)'}}
  %r = kpool.compress head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_kpool_unclosed(%k: tensor<?x8xbf16>) {
  // expected-error @+1 {{expected ')' after 'kpool(4'}}
  %r = kpool.compress kpool(4 head_dim(8)
  return
}

// -----

func.func @compress_outs_without_type(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      // expected-error @+1 {{expected ':' and 1 type in 'outs' (pooled)}}
      outs(%pooled) -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_missing_outs(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      // expected-error @+1 {{expected 'outs(pooled : <type>)'}}
      -> tensor<?x8xbf16>
  return
}

// -----

func.func @compress_ins_unclosed(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %pro: tensor<?xui32>,
    %cache: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r = kpool.compress kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>
      // expected-error @+1 {{expected ')' to end 'ins' (k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths)}}
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @seed_tail_missing_num_requests(%k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %tail: tensor<?x2x4x8xbf16>) {
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      // expected-error @+1 {{expected 'num_requests(%value)' (live requests, i32)}}
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_num_requests_without_parens(%k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32, %tail: tensor<?x2x4x8xbf16>) {
  %r = kpool.seed_tail kpool(4) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<?xui32>, tensor<?xui32>,
            tensor<?xui32>)
      // expected-error @+1 {{expected '(' after 'num_requests'}}
      num_requests %n
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @seed_tail_operand_for_ring(%k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32, %tail: tensor<?x2x4x8xbf16>) {
  // The ring passed among the inputs (as ring_close takes it).
  %r = kpool.seed_tail kpool(4) head_dim(8)
      // expected-error @+1 {{expected 5 operands in 'ins' (k, gate, input_row_offsets, cache_lengths, slot_idx), got 6}}
      ins(%tail, %k, %gate, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x8xbf16>) -> tensor<?x2x4x8xbf16>
  return
}

// -----

func.func @ring_close_one_output(%tail: tensor<?x2x4x8xbf16>, %k: tensor<?x8xbf16>,
    %gate: tensor<?x8xbf16>, %ape: tensor<4x8xf32>, %iro: tensor<?xui32>,
    %cache: tensor<?xui32>, %slots: tensor<?xui32>, %n: i32,
    %pooled: tensor<?x8xbf16>) {
  %r = kpool.ring_close kpool(4) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x8xbf16>, tensor<?x8xbf16>, tensor<?x8xbf16>,
            tensor<4x8xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      // expected-error @+1 {{expected 2 operands in 'outs' (pooled, closed_pool), got 1}}
      outs(%pooled : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @pool_offsets_missing_ins(%iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %pro: tensor<?xui32>) {
  %r = kpool.pool_offsets kpool(4)
      // expected-error @+1 {{expected 'ins(input_row_offsets, cache_lengths : <types>)'}}
      (%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%pro : tensor<?xui32>) -> tensor<?xui32>
  return
}

// -----

func.func @step_four_outputs(%k: tensor<?x8xbf16>, %gate: tensor<?x8xbf16>,
    %ape: tensor<4x8xf32>, %iro: tensor<?xui32>, %cache: tensor<?xui32>,
    %slots: tensor<?xui32>, %n: i32, %closed: tensor<?x8xbf16>,
    %ids: tensor<?xi32>, %pro: tensor<?xui32>, %pooled: tensor<?x8xbf16>) {
  %r:4 = kpool.step kpool(4) head_dim(8)
      ins(%k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x8xbf16>, tensor<?x8xbf16>, tensor<4x8xf32>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      // expected-error @+1 {{expected 5 operands in 'outs' (closed, closed_pool, pool_row_offsets, pooled, tail), got 4}}
      outs(%closed, %ids, %pro, %pooled
           : tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xbf16>)
      -> tensor<?x8xbf16>, tensor<?xi32>, tensor<?xui32>, tensor<?x8xbf16>
  return
}
