// closed_pool may be i64 (docs/semantics.md): ring_close writes the same
// ids and -1s into an i64 output as into an i32 one. kpool 2, f32,
// head_dim 2; request 0 holds one member of pool 3 (cache length 7) in ring
// slot 1 and brings one token, so it closes pool 3; request 1 brings
// nothing; batch row 2 is padding (num_requests 2).

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefI64(tensor<*xi64>)

func.func @main() {
  %tail = arith.constant dense<1.0> : tensor<2x2x2x2xf32>
  %k = arith.constant dense<[[2.0, 3.0]]> : tensor<1x2xf32>
  %ape = arith.constant dense<0.5> : tensor<2x2xf32>
  %iro = arith.constant dense<[0, 1, 1, 1]> : tensor<4xi32>
  %cache = arith.constant dense<[7, 4, 0]> : tensor<3xi32>
  %slots = arith.constant dense<[1, 0, 0]> : tensor<3xi32>
  %n = arith.constant 2 : i32
  %p = tensor.empty() : tensor<3x2xf32>
  %c32 = tensor.empty() : tensor<3xi32>
  %c64 = tensor.empty() : tensor<3xi64>
  %p1, %ids32 = kpool.ring_close kpool(2) head_dim(2)
      ins(%tail, %k, %k, %ape, %iro, %cache, %slots
          : tensor<2x2x2x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>,
            tensor<2x2xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>)
      num_requests(%n)
      outs(%p, %c32 : tensor<3x2xf32>, tensor<3xi32>)
      -> tensor<3x2xf32>, tensor<3xi32>
  %p2, %ids64 = kpool.ring_close kpool(2) head_dim(2)
      ins(%tail, %k, %k, %ape, %iro, %cache, %slots
          : tensor<2x2x2x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>,
            tensor<2x2xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>)
      num_requests(%n)
      outs(%p, %c64 : tensor<3x2xf32>, tensor<3xi64>)
      -> tensor<3x2xf32>, tensor<3xi64>
  // CHECK: [3,  -1,  -1]
  // CHECK: [3,  -1,  -1]
  %u32 = tensor.cast %ids32 : tensor<3xi32> to tensor<*xi32>
  %u64 = tensor.cast %ids64 : tensor<3xi64> to tensor<*xi64>
  call @printMemrefI32(%u32) : (tensor<*xi32>) -> ()
  call @printMemrefI64(%u64) : (tensor<*xi64>) -> ()
  return
}
