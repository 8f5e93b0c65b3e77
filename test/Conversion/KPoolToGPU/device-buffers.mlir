// RUN: kpool-opt %s -kpool-device-buffers -split-input-file -verify-diagnostics | FileCheck %s

// kpool-device-buffers (what kpool-lower-to-nvvm{map-other-ops} runs once
// the caller's ops are parallel loops): in a function whose ops run as GPU
// kernels, buffers are allocated and freed in device memory, row-major
// copies are gpu.memcpy and other copies parallel loops (for the caller's
// mapping to make kernels); buffers only the host touches stay on the host.

// CHECK-LABEL: func.func @graph
//  CHECK-SAME:   (%[[A:[^:]*]]: memref<?x8xf32, strided<[?, ?], offset: ?>>, %[[B:[^:]*]]: memref<?x8xf32>, %[[N:[^:]*]]: index
//   CHECK-NOT:   memref.alloc
//       CHECK:   %[[T:.*]] = gpu.alloc  (%[[N]]) : memref<?x8xf32>
//       CHECK:   scf.parallel
//       CHECK:   gpu.memcpy  %[[T]], %[[B]] : memref<?x8xf32>, memref<?x8xf32>
// The strided copy: a parallel loop over the target's elements.
//       CHECK:   %[[D0:.*]] = memref.dim %[[T]], %{{.*}} : memref<?x8xf32>
//       CHECK:   %[[D1:.*]] = memref.dim %[[T]], %{{.*}} : memref<?x8xf32>
//       CHECK:   scf.parallel (%[[I:.*]], %[[J:.*]]) = (%{{.*}}, %{{.*}}) to (%[[D0]], %[[D1]])
//       CHECK:     %[[V:.*]] = memref.load %[[A]][%[[I]], %[[J]]]
//       CHECK:     memref.store %[[V]], %[[T]][%[[I]], %[[J]]]
//       CHECK:   kpool.pool_offsets
//       CHECK:   gpu.dealloc  %[[T]] : memref<?x8xf32>
//   CHECK-NOT:   memref.copy
//   CHECK-NOT:   memref.dealloc
//       CHECK:   return
func.func @graph(%a: memref<?x8xf32, strided<[?, ?], offset: ?>>,
                 %b: memref<?x8xf32>, %n: index, %iro: memref<?xi32>,
                 %cache: memref<?xi32>, %pro: memref<?xi32>) {
  %t = memref.alloc(%n) : memref<?x8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<?x8xf32, strided<[?, ?], offset: ?>>
    memref.store %v, %t[%i, %j] : memref<?x8xf32>
  }
  memref.copy %b, %t : memref<?x8xf32> to memref<?x8xf32>
  memref.copy %a, %t : memref<?x8xf32, strided<[?, ?], offset: ?>> to memref<?x8xf32>
  kpool.pool_offsets kpool(2) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  memref.dealloc %t : memref<?x8xf32>
  return
}

// -----

// A function without kpool ops, kernels or device memory is left alone.
// CHECK-LABEL: func.func @host
//       CHECK:   memref.alloc
//       CHECK:   memref.copy
//       CHECK:   memref.dealloc
func.func @host(%a: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %a, %t : memref<4xf32> to memref<4xf32>
  memref.dealloc %t : memref<4xf32>
  return
}

// -----

// A driver that frees the device buffers a kernel function returned (it
// handles device memory): they are freed with gpu.dealloc; the list the
// deallocation pipeline keeps on the host, read only by the host and by a
// helper that uses no device memory, stays in host memory.
// CHECK-LABEL: func.func @driver
//       CHECK:   %[[D:.*]] = gpu.alloc  () : memref<4xf32>
//       CHECK:   %[[L:.*]] = memref.alloc() : memref<2xindex>
//       CHECK:   memref.store %{{.*}}, %[[L]]
//       CHECK:   call @helper
//       CHECK:   memref.load %[[L]]
//       CHECK:   gpu.dealloc  %[[D]] : memref<4xf32>
//       CHECK:   memref.dealloc %[[L]] : memref<2xindex>
func.func @driver() {
  %d = gpu.alloc () : memref<4xf32>
  %list = memref.alloc() : memref<2xindex>
  %c0 = arith.constant 0 : index
  %p = memref.extract_aligned_pointer_as_index %d : memref<4xf32> -> index
  memref.store %p, %list[%c0] : memref<2xindex>
  %cast = memref.cast %list : memref<2xindex> to memref<?xindex>
  call @helper(%cast) : (memref<?xindex>) -> ()
  %q = memref.load %list[%c0] : memref<2xindex>
  memref.dealloc %d : memref<4xf32>
  memref.dealloc %list : memref<2xindex>
  return
}
func.func private @helper(%l: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %l[%c0] : memref<?xindex>
  return
}

// -----

// A buffer a kernel uses is a device buffer: the host may not read it.
func.func @host_read(%iro: memref<?xi32>, %cache: memref<?xi32>,
                     %pro: memref<?xi32>) -> f32 {
  %t = memref.alloc() : memref<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %f, %t[%i] : memref<4xf32>
  }
  kpool.pool_offsets kpool(2) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  // expected-error @below {{'memref.load' op accesses a buffer outside any parallel loop in a function with GPU kernels; it would access device memory on the host; to lower the function's other ops to GPU kernels too}}
  %v = memref.load %t[%c0] : memref<4xf32>
  return %v : f32
}

// -----

// A global is host memory: a kernel may not read it (a constant tensor of
// a graph bufferizes to one).
memref.global "private" constant @table : memref<4xf32> = dense<1.0>
func.func @constant(%out: memref<4xf32>, %iro: memref<?xi32>,
                    %cache: memref<?xi32>, %pro: memref<?xi32>) {
  // expected-error @below {{'memref.get_global' op is host memory that a GPU kernel would read; pass the values to the function as an argument in device memory}}
  %g = memref.get_global @table : memref<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %g[%i] : memref<4xf32>
    memref.store %v, %out[%i] : memref<4xf32>
  }
  kpool.pool_offsets kpool(2) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  return
}

// -----

// gpu-to-llvm copies row-major memrefs only: a strided gpu.memcpy next to
// kernels is an error here, not a failed translation later.
func.func @strided_memcpy(%d: memref<?xf32, strided<[?], offset: ?>>,
                          %h: memref<4xf32>) {
  %c = memref.cast %h : memref<4xf32> to memref<?xf32>
  // expected-error @below {{'gpu.memcpy' op copies a memref whose type is not row-major ('memref<?xf32, strided<[?], offset: ?>>'), which gpu-to-llvm cannot lower}}
  gpu.memcpy %c, %d : memref<?xf32>, memref<?xf32, strided<[?], offset: ?>>
  return
}
