// A graph compiler's function around one serving step: the caller's
// elementwise producers of `k` and `gate`, kpool's four ops (which
// kpool-fuse-step makes one kpool.step), the caller's consumer of the
// pooled rows, and the allocations of everything in between, on tensors.
// For the GPU, kpool-lower-to-nvvm{map-other-ops=true} lowers all of it to
// kernels in one command (docs/embedding.md, "Composing with a graph on
// the GPU"); kpool-lower-to-llvm lowers it for the CPU. Tests:
// test/Pipelines/mixed-graph-gpu.test (PTX through ptxas),
// test/Integration/CPU/mixed-graph.test and
// test/Integration/GPU/mixed-graph.test (executed, checked against numpy
// and kpool.reference).

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @graph(%x: tensor<?x8xf32>, %ape: tensor<2x8xf32>,
    %iro: tensor<?xi32>, %cache: tensor<?xi32>, %slots: tensor<?xi32>,
    %n: i32, %tail: tensor<?x2x2x8xf32>, %capacity: index)
    -> (tensor<?x8xf32>, tensor<?xi32>, tensor<?x8xf32>,
        tensor<?x2x2x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %two = arith.constant 2.0 : f32
  %one = arith.constant 1.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>
  %b = tensor.dim %cache, %c0 : tensor<?xi32>
  %b1 = arith.addi %b, %c1 : index
  // The caller's producers: k = x / 2, gate = x * x.
  %ek = tensor.empty(%t) : tensor<?x8xf32>
  %k = linalg.generic {indexing_maps = [#id, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xf32>) outs(%ek : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %half : f32
    linalg.yield %v : f32
  } -> tensor<?x8xf32>
  %eg = tensor.empty(%t) : tensor<?x8xf32>
  %gate = linalg.generic {indexing_maps = [#id, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xf32>) outs(%eg : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %a : f32
    linalg.yield %v : f32
  } -> tensor<?x8xf32>
  // The serving step.
  %closed_init = tensor.empty(%b) : tensor<?x8xf32>
  %ids_init = tensor.empty(%b) : tensor<?xi32>
  %closed, %ids = kpool.ring_close kpool(2) head_dim(8)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x2x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>,
            tensor<2x8xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      num_requests(%n)
      outs(%closed_init, %ids_init : tensor<?x8xf32>, tensor<?xi32>)
      -> tensor<?x8xf32>, tensor<?xi32>
  %pro_init = tensor.empty(%b1) : tensor<?xi32>
  %pro = kpool.pool_offsets kpool(2)
      ins(%iro, %cache : tensor<?xi32>, tensor<?xi32>)
      outs(%pro_init : tensor<?xi32>) -> tensor<?xi32>
  %pooled_init = tensor.empty(%capacity) : tensor<?x8xf32>
  %pooled_zero = linalg.fill ins(%zero : f32)
      outs(%pooled_init : tensor<?x8xf32>) -> tensor<?x8xf32>
  %pooled = kpool.compress kpool(2) head_dim(8)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x8xf32>, tensor<?x8xf32>, tensor<2x8xf32>,
            tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      outs(%pooled_zero : tensor<?x8xf32>) -> tensor<?x8xf32>
  %ring = kpool.seed_tail kpool(2) head_dim(8)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi32>, tensor<?xi32>,
            tensor<?xi32>)
      num_requests(%n) outs(%tail : tensor<?x2x2x8xf32>)
      -> tensor<?x2x2x8xf32>
  // The caller's consumer: 2 * pooled + 1.
  %eo = tensor.empty(%capacity) : tensor<?x8xf32>
  %out = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel", "parallel"]}
      ins(%pooled : tensor<?x8xf32>) outs(%eo : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %two : f32
    %w = arith.addf %v, %one : f32
    linalg.yield %w : f32
  } -> tensor<?x8xf32>
  return %out, %ids, %closed, %ring
      : tensor<?x8xf32>, tensor<?xi32>, tensor<?x8xf32>, tensor<?x2x2x8xf32>
}
