// One serving step that writes its pools into the production pool cache:
// the fused kpool.step with a paged, Hadamard-rotated, FP8 (e4m3fn)
// destination (docs/semantics.md, "The pool cache"). bf16, head_dim 128,
// kpool 4; the cache is the DeepSeek/vLLM indexer layout, one page of
// `page_size * 128` code bytes followed by `page_size` f32 scales, seen as
// two strided views of one allocation (any page stride).
//
//   kpool-opt serving_step_cache.mlir -kpool-lower-to-llvm="deallocate=false"
//   kpool-opt serving_step_cache.mlir -kpool-lower-to-nvvm          (sm_90)
//
// Each pool is computed, rounded to bf16 (the dense `pooled` and `closed`
// rows), rotated, reduced, quantized and stored in the same kernel: one
// launch per step.

!codes = tensor<?x?x128xf8E4M3FN>
!scales = tensor<?x?xf32>

func.func @serving_step_cache(
    %tail: tensor<?x2x4x128xbf16>, %k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %num_requests: i32,
    %block_table: tensor<?x?xi32>,        // [B, pages per request]
    %closed_init: tensor<?x128xbf16>, %closed_ids_init: tensor<?xi32>,
    %pro_init: tensor<?xui32>, %pooled_init: tensor<?x128xbf16>,
    %codes_init: !codes,                   // [N, page_size, 128]
    %scales_init: !scales)                 // [N, page_size]
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
        tensor<?x128xbf16>, tensor<?x2x4x128xbf16>, !codes, !scales) {
  %closed, %ids, %pro, %pooled, %ring, %codes, %scales =
      kpool.step kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%num_requests)
      outs(%closed_init, %closed_ids_init, %pro_init, %pooled_init, %tail
           : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
             tensor<?x128xbf16>, tensor<?x2x4x128xbf16>)
      to_cache(%block_table, %codes_init, %scales_init
               : tensor<?x?xi32>, !codes, !scales)
      rotate(hadamard) scale(absmax)
      -> tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
         tensor<?x128xbf16>, tensor<?x2x4x128xbf16>, !codes, !scales
  return %closed, %ids, %pro, %pooled, %ring, %codes, %scales
      : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
        tensor<?x128xbf16>, tensor<?x2x4x128xbf16>, !codes, !scales
}
