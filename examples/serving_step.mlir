// One serving step of the pooled-key cache, as a graph compiler would emit
// it: close the pools the ring holds open, size and build every pool made of
// this call's tokens, then stash the trailing tokens in the ring. bf16,
// head_dim 128, kpool 4 (the production geometry); token and batch counts
// are dynamic, metadata is unsigned 32-bit. Outputs are passed in
// (destination-passing style), so the step allocates nothing.
//
//   kpool-opt serving_step.mlir -kpool-lower-to-llvm="deallocate=false"  (CPU;
//       the step allocates nothing, so nothing needs deallocating and
//       the ring and outputs are updated in place)
//   kpool-opt serving_step.mlir -kpool-lower-to-nvvm          (sm_90)
//
// Both pipelines first fuse the four ops into one kpool.step
// (kpool-fuse-step; fuse-step=false keeps them apart), which lowers to one
// kernel: one GPU launch per step.

func.func @serving_step(
    %tail: tensor<?x2x4x128xbf16>,        // the ring, [max_slots, 2, 4, 128]
    %k: tensor<?x128xbf16>,               // this call's keys
    %gate: tensor<?x128xbf16>,            // and gate scores
    %ape: tensor<4x128xf32>,              // within-pool position embedding
    %iro: tensor<?xui32>,                 // input_row_offsets [B+1]
    %cache: tensor<?xui32>,               // cache_lengths [B]
    %slots: tensor<?xui32>,               // slot_idx [B]
    %num_requests: i32,
    %closed_init: tensor<?x128xbf16>,     // [B, 128]
    %closed_ids_init: tensor<?xi32>,      // [B]
    %pro_init: tensor<?xui32>,            // [B+1]
    %pooled_init: tensor<?x128xbf16>)     // [P, 128], P = pool_row_offsets[B]
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
        tensor<?x128xbf16>, tensor<?x2x4x128xbf16>) {
  // 1. The ring is read before seed_tail overwrites it.
  %closed, %closed_ids = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%num_requests)
      outs(%closed_init, %closed_ids_init : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  // 2. Where each request's new pools go.
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%pro_init : tensor<?xui32>) -> tensor<?xui32>
  // 3. Every pool made only of this call's tokens.
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled_init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  // 4. The trailing members of each still-open pool.
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%num_requests)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return %closed, %closed_ids, %pro, %pooled, %ring
      : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
        tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
}
