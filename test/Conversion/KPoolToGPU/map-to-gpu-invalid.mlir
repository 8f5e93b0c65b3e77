// RUN: kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-map-to-gpu=check-host-access=true -verify-diagnostics
// RUN: not kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-map-to-gpu=vector-bytes=12 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: not kpool-opt %s -split-input-file -convert-kpool-to-linalg -kpool-map-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BLOCK

// BYTES: error: kpool-map-to-gpu: vector-bytes must be a power of two in [1, 16], got 12
// BLOCK: error: kpool-map-to-gpu: block-size must be in [1, 1024], got 2048

// A function that launches kernels on its buffers may not allocate host
// memory for them (here: a bufferization-style temporary for the output).
func.func @host_alloc(%iro: memref<?xi32>, %cache: memref<?xi32>) -> memref<3xi32> {
  // expected-error @below {{'memref.alloc' op would place a buffer in host memory next to GPU kernels}}
  %pro = memref.alloc() : memref<3xi32>
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<3xi32>)
  return %pro : memref<3xi32>
}

// -----

// ... nor read them on the host.
func.func @host_read(%iro: memref<?xi32>, %cache: memref<?xi32>,
                     %pro: memref<?xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  // expected-error @below {{'memref.load' op accesses a buffer outside any parallel loop in a function with GPU kernels}}
  %v = memref.load %pro[%c0] : memref<?xi32>
  return %v : i32
}

// -----

// ... nor copy them there.
func.func @host_copy(%iro: memref<?xi32>, %cache: memref<?xi32>,
                     %pro: memref<?xi32>, %save: memref<?xi32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cache : memref<?xi32>, memref<?xi32>)
      outs(%pro : memref<?xi32>)
  // expected-error @below {{'memref.copy' op would place a buffer in host memory next to GPU kernels}}
  memref.copy %pro, %save : memref<?xi32> to memref<?xi32>
  return
}

// -----

// Multi-dimensional parallel loops are not the form convert-kpool-to-linalg
// emits.
func.func @two_dims(%m: memref<?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  // expected-error @below {{'scf.parallel' op expected a 1-D parallel loop without reductions}}
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    memref.store %f, %m[%i, %j] : memref<?x?xf32>
    scf.reduce
  } {kpool.kernel = "kpool_two_dims"}
  return
}
