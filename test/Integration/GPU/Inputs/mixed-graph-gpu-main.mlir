// The GPU driver of examples/mixed_graph.mlir: the inputs of mixed-graph-main.mlir
// copied into device memory (gpu.alloc, gpu.memcpy) and handed to @graph as
// tensors (bufferization.to_tensor), @graph's results copied back into host
// buffers and printed in the same order, for Inputs/mixed_graph_check.py.
// Lowered with the rest of the module by kpool-lower-to-nvvm{map-other-ops}:
// main handles device memory, so its buffers are device buffers too
// (kpool-device-buffers: the deallocation of @graph's results is a
// gpu.dealloc, the copy of the strided ring a kernel); the host buffers it
// prints are globals.

memref.global "private" constant @x : memref<6x8xf32> = dense<[[-1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5], [0.75, 1.0, 1.25, -1.25, -1.0, -0.75, -0.5, -0.25], [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, -1.25, -1.0], [-0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0], [1.25, -1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25], [0.5, 0.75, 1.0, 1.25, -1.25, -1.0, -0.75, -0.5]]>
memref.global "private" constant @ape : memref<2x8xf32> = dense<[[-0.25, 0.0, 0.25, -0.25, 0.0, 0.25, -0.25, 0.0], [-0.5, 0.0, 0.5, -0.5, 0.0, 0.5, -0.5, 0.0]]>
memref.global "private" constant @iro : memref<3xi32> = dense<[0, 3, 6]>
memref.global "private" constant @cache : memref<2xi32> = dense<[1, 0]>
memref.global "private" constant @slots : memref<2xi32> = dense<[1, 0]>
memref.global "private" constant @tail : memref<2x2x2x8xf32> = dense<[[[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],  [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]], [[[-0.75, 0.0, 0.75, -0.25, 0.5, -0.5, 0.25, -0.75],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],  [[2.25, 0.0, 2.25, 0.25, 1.0, 1.0, 0.25, 2.25],   [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]>
memref.global "private" @out_h : memref<4x8xf32> = uninitialized
memref.global "private" @ids_h : memref<2xi32> = uninitialized
memref.global "private" @closed_h : memref<2x8xf32> = uninitialized
memref.global "private" @ring_h : memref<2x2x2x8xf32> = uninitialized

func.func @main() {
  %hx = memref.get_global @x : memref<6x8xf32>
  %hape = memref.get_global @ape : memref<2x8xf32>
  %hiro = memref.get_global @iro : memref<3xi32>
  %hcache = memref.get_global @cache : memref<2xi32>
  %hslots = memref.get_global @slots : memref<2xi32>
  %htail = memref.get_global @tail : memref<2x2x2x8xf32>
  %dx = gpu.alloc () : memref<6x8xf32>
  gpu.memcpy %dx, %hx : memref<6x8xf32>, memref<6x8xf32>
  %dape = gpu.alloc () : memref<2x8xf32>
  gpu.memcpy %dape, %hape : memref<2x8xf32>, memref<2x8xf32>
  %diro = gpu.alloc () : memref<3xi32>
  gpu.memcpy %diro, %hiro : memref<3xi32>, memref<3xi32>
  %dcache = gpu.alloc () : memref<2xi32>
  gpu.memcpy %dcache, %hcache : memref<2xi32>, memref<2xi32>
  %dslots = gpu.alloc () : memref<2xi32>
  gpu.memcpy %dslots, %hslots : memref<2xi32>, memref<2xi32>
  %dtail = gpu.alloc () : memref<2x2x2x8xf32>
  gpu.memcpy %dtail, %htail : memref<2x2x2x8xf32>, memref<2x2x2x8xf32>
  %cx = memref.cast %dx : memref<6x8xf32> to memref<?x8xf32>
  %ciro = memref.cast %diro : memref<3xi32> to memref<?xi32>
  %ccache = memref.cast %dcache : memref<2xi32> to memref<?xi32>
  %cslots = memref.cast %dslots : memref<2xi32> to memref<?xi32>
  %ctail = memref.cast %dtail : memref<2x2x2x8xf32> to memref<?x2x2x8xf32>
  %x = bufferization.to_tensor %cx restrict : memref<?x8xf32> to tensor<?x8xf32>
  %ape = bufferization.to_tensor %dape restrict : memref<2x8xf32> to tensor<2x8xf32>
  %iro = bufferization.to_tensor %ciro restrict : memref<?xi32> to tensor<?xi32>
  %cache = bufferization.to_tensor %ccache restrict : memref<?xi32> to tensor<?xi32>
  %slots = bufferization.to_tensor %cslots restrict : memref<?xi32> to tensor<?xi32>
  %tail = bufferization.to_tensor %ctail restrict writable : memref<?x2x2x8xf32> to tensor<?x2x2x8xf32>
  %n = arith.constant 2 : i32
  %capacity = arith.constant 4 : index
  %out, %ids, %closed, %ring = call @graph(%x, %ape, %iro, %cache, %slots,
      %n, %tail, %capacity)
      : (tensor<?x8xf32>, tensor<2x8xf32>, tensor<?xi32>, tensor<?xi32>,
         tensor<?xi32>, i32, tensor<?x2x2x8xf32>, index)
      -> (tensor<?x8xf32>, tensor<?xi32>, tensor<?x8xf32>,
          tensor<?x2x2x8xf32>)
  // Back to the host (the results are row-major: @graph's own buffers).
  %mout = bufferization.to_buffer %out read_only : tensor<?x8xf32> to memref<?x8xf32>
  %mids = bufferization.to_buffer %ids read_only : tensor<?xi32> to memref<?xi32>
  %mclosed = bufferization.to_buffer %closed read_only : tensor<?x8xf32> to memref<?x8xf32>
  // The ring comes back with a strided type (it is the function's updated
  // argument): bufferization copies it into a row-major buffer, which
  // kpool-device-buffers makes a kernel, so that gpu.memcpy can copy it.
  %mring = bufferization.to_buffer %ring read_only : tensor<?x2x2x8xf32> to memref<?x2x2x8xf32>
  %hout = memref.get_global @out_h : memref<4x8xf32>
  %houtc = memref.cast %hout : memref<4x8xf32> to memref<?x8xf32>
  gpu.memcpy %houtc, %mout : memref<?x8xf32>, memref<?x8xf32>
  %hids = memref.get_global @ids_h : memref<2xi32>
  %hidsc = memref.cast %hids : memref<2xi32> to memref<?xi32>
  gpu.memcpy %hidsc, %mids : memref<?xi32>, memref<?xi32>
  %hclosed = memref.get_global @closed_h : memref<2x8xf32>
  %hclosedc = memref.cast %hclosed : memref<2x8xf32> to memref<?x8xf32>
  gpu.memcpy %hclosedc, %mclosed : memref<?x8xf32>, memref<?x8xf32>
  %hring = memref.get_global @ring_h : memref<2x2x2x8xf32>
  %hringc = memref.cast %hring : memref<2x2x2x8xf32> to memref<?x2x2x8xf32>
  gpu.memcpy %hringc, %mring : memref<?x2x2x8xf32>, memref<?x2x2x8xf32>
  %u0 = memref.cast %hout : memref<4x8xf32> to memref<*xf32>
  call @printMemrefF32(%u0) : (memref<*xf32>) -> ()
  %u1 = memref.cast %hids : memref<2xi32> to memref<*xi32>
  call @printMemrefI32(%u1) : (memref<*xi32>) -> ()
  %u2 = memref.cast %hclosed : memref<2x8xf32> to memref<*xf32>
  call @printMemrefF32(%u2) : (memref<*xf32>) -> ()
  %u3 = memref.cast %hring : memref<2x2x2x8xf32> to memref<*xf32>
  call @printMemrefF32(%u3) : (memref<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefI32(memref<*xi32>)
