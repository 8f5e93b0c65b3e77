// RUN: kpool-opt %s -split-input-file -verify-diagnostics
// RUN: kpool-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The pass contract of the kpool dialect: the discardable attributes
// kpool.kernel (a kernel name on an scf.parallel), kpool.pool_row and
// kpool.pool_row_loop (unit attributes on a linalg.generic) that
// convert-kpool-to-linalg emits and kpool-vectorize-pool-rows and
// kpool-map-to-gpu read. Each case holds a kpool op so that the dialect is
// loaded and verifies its attributes.

#map = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func @well_placed
//       CHECK:   attrs = {kpool.pool_row}
//       CHECK:   attrs = {kpool.pool_row_loop}
//       CHECK:   } {kpool.kernel = "kpool_compress"}
func.func @well_placed(%a: memref<8xf32>, %o: memref<8xf32>, %n: index,
    %iro: memref<?xui32>, %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%a : memref<8xf32>) outs(%o : memref<8xf32>) attrs = {kpool.pool_row} {
    ^bb0(%x: f32, %y: f32):
      linalg.yield %x : f32
    }
    linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]}
        outs(%o : memref<8xf32>) attrs = {kpool.pool_row_loop} {
    ^bb0(%y: f32):
      linalg.yield %y : f32
    }
    scf.reduce
  } {kpool.kernel = "kpool_compress"}
  return
}

// -----

func.func @kernel_not_a_string(%n: index, %iro: memref<?xui32>,
    %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{expected 'kpool.kernel' to be a non-empty string attribute (the kernel name), got 1 : i64}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.reduce
  } {kpool.kernel = 1}
  return
}

// -----

func.func @kernel_empty(%n: index, %iro: memref<?xui32>,
    %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{expected 'kpool.kernel' to be a non-empty string attribute (the kernel name), got ""}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.reduce
  } {kpool.kernel = ""}
  return
}

// -----

func.func @kernel_on_for(%n: index, %iro: memref<?xui32>,
    %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{expected 'kpool.kernel' to be on an 'scf.parallel', got it on 'scf.for'}}
  scf.for %i = %c0 to %n step %c1 {
  } {kpool.kernel = "kpool_compress"}
  return
}

// -----

#map = affine_map<(d0) -> (d0)>

func.func @pool_row_not_unit(%a: memref<8xf32>, %o: memref<8xf32>,
    %iro: memref<?xui32>, %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  // expected-error @below {{expected 'kpool.pool_row' to be a unit attribute, got "yes"}}
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%o : memref<8xf32>) attrs = {kpool.pool_row = "yes"} {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

func.func @pool_row_on_copy(%a: memref<8xf32>, %o: memref<8xf32>,
    %iro: memref<?xui32>, %cl: memref<?xui32>, %pro: memref<?xui32>) {
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  // expected-error @below {{expected 'kpool.pool_row' to be on a 'linalg.generic', got it on 'linalg.copy'}}
  linalg.copy {kpool.pool_row} ins(%a : memref<8xf32>) outs(%o : memref<8xf32>)
  return
}

// -----

func.func @pool_row_loop_on_func(%iro: memref<?xui32>, %cl: memref<?xui32>,
    %pro: memref<?xui32>) attributes {kpool.pool_row_loop} {
  // expected-error @-2 {{expected 'kpool.pool_row_loop' to be on a 'linalg.generic', got it on 'func.func'}}
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>)
  return
}

// -----

func.func @unknown(%iro: memref<?xui32>, %cl: memref<?xui32>,
    %pro: memref<?xui32>) {
  // expected-error @below {{'kpool.pool_rows' is not an attribute of the kpool dialect (expected kpool.kernel, kpool.pool_row or kpool.pool_row_loop)}}
  kpool.pool_offsets kpool(4) ins(%iro, %cl : memref<?xui32>, memref<?xui32>)
      outs(%pro : memref<?xui32>) {kpool.pool_rows}
  return
}
