// Transfer helpers of agreement-program.mlir for the CPU pipeline: the
// "device" is host memory.

func.func @to_device_bf16(%h: memref<?x?xbf16>) -> memref<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = memref.dim %h, %c0 : memref<?x?xbf16>
  %c = memref.dim %h, %c1 : memref<?x?xbf16>
  %d = memref.alloc(%r, %c) : memref<?x?xbf16>
  memref.copy %h, %d : memref<?x?xbf16> to memref<?x?xbf16>
  return %d : memref<?x?xbf16>
}

func.func @to_device_f32(%h: memref<?x?xf32>) -> memref<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = memref.dim %h, %c0 : memref<?x?xf32>
  %c = memref.dim %h, %c1 : memref<?x?xf32>
  %d = memref.alloc(%r, %c) : memref<?x?xf32>
  memref.copy %h, %d : memref<?x?xf32> to memref<?x?xf32>
  return %d : memref<?x?xf32>
}

func.func @to_device_i32(%h: memref<?xi32>) -> memref<?xi32> {
  %c0 = arith.constant 0 : index
  %n = memref.dim %h, %c0 : memref<?xi32>
  %d = memref.alloc(%n) : memref<?xi32>
  memref.copy %h, %d : memref<?xi32> to memref<?xi32>
  return %d : memref<?xi32>
}

func.func @to_host_bf16(%d: memref<?x?xbf16>, %h: memref<?x?xbf16>) {
  memref.copy %d, %h : memref<?x?xbf16> to memref<?x?xbf16>
  return
}

func.func @to_host_i32(%d: memref<?xi32>, %h: memref<?xi32>) {
  memref.copy %d, %h : memref<?xi32> to memref<?xi32>
  return
}
