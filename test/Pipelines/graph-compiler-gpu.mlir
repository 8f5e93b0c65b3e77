// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" \
// RUN:   -convert-kpool-to-linalg -kpool-map-to-gpu \
// RUN:   -convert-linalg-to-parallel-loops -gpu-map-parallel-loops \
// RUN:   -convert-parallel-loops-to-gpu | FileCheck %s
// RUN: kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" \
// RUN:   -convert-kpool-to-linalg -kpool-map-to-gpu \
// RUN:   -convert-linalg-to-parallel-loops -gpu-map-parallel-loops \
// RUN:   -convert-parallel-loops-to-gpu -gpu-kernel-outlining \
// RUN:   | FileCheck %s --check-prefix=OUTLINED
// RUN: not kpool-opt %s -one-shot-bufferize="bufferize-function-boundaries" \
// RUN:   -convert-kpool-to-linalg -kpool-map-to-gpu=check-host-access=true \
// RUN:   2>&1 | FileCheck %s --check-prefix=GUARD

// kpool's passes inside a graph compiler's pipeline: a function that also
// holds the compiler's own ops and allocations (an elementwise producer of
// `k` and `gate`, pool_offsets, compress, an elementwise consumer). The
// kpool loops become gpu.launch kernels by kpool-map-to-gpu; the compiler's
// elementwise ops stay for upstream's parallel-loop mapping, which turns
// them into launches too. Only with check-host-access (the standalone
// kpool-lower-to-nvvm's guard) does the pass refuse the host allocations.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func @graph(%x: tensor<64x128xf32>, %ape: tensor<4x128xf32>,
    %iro: tensor<2xui32>, %cache: tensor<1xui32>,
    %pro_init: tensor<2xui32>, %pooled_init: tensor<16x128xf32>)
    -> tensor<16x128xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  // The compiler's producers of k and gate.
  %k = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<64x128xf32>
  %gate = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.negf %a : f32
    linalg.yield %t : f32
  } -> tensor<64x128xf32>
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<2xui32>, tensor<1xui32>)
      outs(%pro_init : tensor<2xui32>) -> tensor<2xui32>
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<64x128xf32>, tensor<64x128xf32>, tensor<4x128xf32>,
            tensor<2xui32>, tensor<2xui32>, tensor<1xui32>)
      outs(%pooled_init : tensor<16x128xf32>) -> tensor<16x128xf32>
  // The compiler's consumer.
  %e2 = tensor.empty() : tensor<16x128xf32>
  %out = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pooled : tensor<16x128xf32>) outs(%e2 : tensor<16x128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<16x128xf32>
  return %out : tensor<16x128xf32>
}

// CHECK-LABEL: func.func @graph
//       CHECK:   memref.alloc
//       CHECK:   gpu.launch
//       CHECK:     arith.mulf
//       CHECK:   gpu.launch
//       CHECK:     arith.negf
//       CHECK:   gpu.launch {{.*}} function(@graph_kpool_pool_offsets)
//       CHECK:   gpu.launch {{.*}} function(@graph_kpool_compress)
//       CHECK:     math.exp
//       CHECK:   gpu.launch
//       CHECK:     arith.addf
//   CHECK-NOT:   scf.parallel
//   CHECK-NOT:   linalg.generic
//       CHECK:   return

// OUTLINED-LABEL: func.func @graph
//   OUTLINED-COUNT-5: gpu.launch_func
//   OUTLINED-NOT: gpu.launch {
// OUTLINED-DAG: gpu.func @graph_kpool_pool_offsets(
// OUTLINED-DAG: gpu.func @graph_kpool_compress(

// GUARD: error: 'memref.alloc' op would place a buffer in host memory next to GPU kernels
