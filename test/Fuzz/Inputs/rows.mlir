#map = affine_map<(d0) -> (d0)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>

func.func @zero_channels(%a: memref<0xf32>, %o: memref<0xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<0xf32>) outs(%o : memref<0xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

func.func @dynamic_channels(%a: memref<?xf32>, %o: memref<?xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<?xf32>) outs(%o : memref<?xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}

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
func.func @row_of_64(%a: memref<128xf32>, %o: memref<128xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : memref<128xf32>) outs(%o : memref<128xf32>) attrs = {kpool.pool_row} {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  return
}
