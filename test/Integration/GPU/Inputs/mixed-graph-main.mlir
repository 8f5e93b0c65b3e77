// The CPU driver of examples/mixed_graph.mlir (test/Integration/CPU/mixed-graph.test):
// two requests of three tokens; request 0 has one token cached, held in
// ring slot 1 (its key and gate, from a token x0, as the graph's producers
// make them), so ring_close closes its pool 0; request 1 is new. It prints
// the consumer's output (4 rows of capacity), closed_pool, the closed rows
// and the ring, which Inputs/mixed_graph_check.py compares with numpy and
// kpool.reference. The same inputs drive the GPU form (docs/embedding.md).

func.func @main() {
  %x0 = arith.constant dense<[[-1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5], [0.75, 1.0, 1.25, -1.25, -1.0, -0.75, -0.5, -0.25], [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, -1.25, -1.0], [-0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0], [1.25, -1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25], [0.5, 0.75, 1.0, 1.25, -1.25, -1.0, -0.75, -0.5]]> : tensor<6x8xf32>
  %x = tensor.cast %x0 : tensor<6x8xf32> to tensor<?x8xf32>
  %ape = arith.constant dense<[[-0.25, 0.0, 0.25, -0.25, 0.0, 0.25, -0.25, 0.0], [-0.5, 0.0, 0.5, -0.5, 0.0, 0.5, -0.5, 0.0]]> : tensor<2x8xf32>
  %iro0 = arith.constant dense<[0, 3, 6]> : tensor<3xi32>
  %iro = tensor.cast %iro0 : tensor<3xi32> to tensor<?xi32>
  %cache0 = arith.constant dense<[1, 0]> : tensor<2xi32>
  %cache = tensor.cast %cache0 : tensor<2xi32> to tensor<?xi32>
  %slots0 = arith.constant dense<[1, 0]> : tensor<2xi32>
  %slots = tensor.cast %slots0 : tensor<2xi32> to tensor<?xi32>
  %n = arith.constant 2 : i32
  %tail0 = arith.constant dense<[[[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],  [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]], [[[-0.75, 0.0, 0.75, -0.25, 0.5, -0.5, 0.25, -0.75],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],  [[2.25, 0.0, 2.25, 0.25, 1.0, 1.0, 0.25, 2.25],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x2x2x8xf32>
  %tail = tensor.cast %tail0 : tensor<2x2x2x8xf32> to tensor<?x2x2x8xf32>
  %capacity = arith.constant 4 : index
  %out, %ids, %closed, %ring = call @graph(%x, %ape, %iro, %cache, %slots,
      %n, %tail, %capacity)
      : (tensor<?x8xf32>, tensor<2x8xf32>, tensor<?xi32>, tensor<?xi32>,
         tensor<?xi32>, i32, tensor<?x2x2x8xf32>, index)
      -> (tensor<?x8xf32>, tensor<?xi32>, tensor<?x8xf32>,
          tensor<?x2x2x8xf32>)
  %u0 = tensor.cast %out : tensor<?x8xf32> to tensor<*xf32>
  call @printMemrefF32(%u0) : (tensor<*xf32>) -> ()
  %u1 = tensor.cast %ids : tensor<?xi32> to tensor<*xi32>
  call @printMemrefI32(%u1) : (tensor<*xi32>) -> ()
  %u2 = tensor.cast %closed : tensor<?x8xf32> to tensor<*xf32>
  call @printMemrefF32(%u2) : (tensor<*xf32>) -> ()
  %u3 = tensor.cast %ring : tensor<?x2x2x8xf32> to tensor<*xf32>
  call @printMemrefF32(%u3) : (tensor<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
