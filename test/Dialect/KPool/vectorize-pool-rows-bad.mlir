// kpool-vectorize-pool-rows on what it must not crash on or blow up: a
// vector-size past 64 (LLVM took a minute to compile 1024-channel vectors
// and aborted on 65536: now an error, also through kpool-lower-to-llvm and
// so through the runtime's JIT), and hand-written kpool.pool_row ops that
// are not one static, non-empty channel loop (a 0-channel row divided by
// zero): they stay scalar.

// RUN: not kpool-opt %s -kpool-vectorize-pool-rows=vector-size=65 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not kpool-opt %s -kpool-vectorize-pool-rows=vector-size=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not kpool-opt %kpool_src_root/examples/serving_step.mlir -kpool-lower-to-llvm=vector-size=65536 2>&1 | FileCheck %s --check-prefix=WIDE2
// RUN: kpool-opt %s -kpool-vectorize-pool-rows=vector-size=64 | FileCheck %s

// WIDE: error: kpool-vectorize-pool-rows: vector-size must be in [0, 64] (0 keeps rows scalar), got 65
// NEG: error: kpool-vectorize-pool-rows: vector-size must be in [0, 64] (0 keeps rows scalar), got -1
// WIDE2: error: kpool-vectorize-pool-rows: vector-size must be in [0, 64] (0 keeps rows scalar), got 65536

#map = affine_map<(d0) -> (d0)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func @zero_channels
//   CHECK-NOT:   vector.
//       CHECK:   linalg.generic
//   CHECK-NOT:   math.exp
func.func @zero_channels(%a: memref<0xf32>, %o: memref<0xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<0xf32>) outs(%o : memref<0xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

// CHECK-LABEL: func @dynamic_channels
//   CHECK-NOT:   vector.
//       CHECK:   linalg.generic
func.func @dynamic_channels(%a: memref<?xf32>, %o: memref<?xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<?xf32>) outs(%o : memref<?xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

// CHECK-LABEL: func @two_loops
//   CHECK-NOT:   vector.
//       CHECK:   linalg.generic
func.func @two_loops(%a: memref<4x8xf32>, %o: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%o : memref<4x8xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

// A real row still vectorizes at the widest allowed width.
// CHECK-LABEL: func @row_of_64
//       CHECK:   vector<64xf32>
func.func @row_of_64(%a: memref<128xf32>, %o: memref<128xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<128xf32>) outs(%o : memref<128xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}
