// Executes kpool.pool_offsets and kpool.compress through the CPU pipeline
// (serial, OpenMP and scalar channel loops) and checks the printed pools.
// K = 2, D = 2, one request holding one cached token and bringing five, so
// the first new token belongs to the pending pool and two pools complete.
// Expected values, from docs/semantics.md:
//   pool 1 = rows 1, 2; channel 0 has equal gates: (3 + 5) / 2 = 4;
//   channel 1 has gates 1, 0: (4 e^0 + 6 e^-1) / (1 + e^-1) = 4.537883;
//   pool 2 = rows 3, 4 with equal gates: (7 + 9) / 2, (8 + 10) / 2.
// The third pooled row is owned by no request and keeps its value.

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s
// RUN: kpool-opt %s -kpool-lower-to-llvm="openmp=true" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils,%libomp \
// RUN: | FileCheck %s
// RUN: kpool-opt %s -kpool-lower-to-llvm="vector-size=0" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

func.func @main() {
  %k = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xf32>
  %g = arith.constant dense<[[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]> : tensor<5x2xf32>
  %ape = arith.constant dense<0.0> : tensor<2x2xf32>
  %iro = arith.constant dense<[0, 5]> : tensor<2xi32>
  %cache = arith.constant dense<[1]> : tensor<1xi32>
  %pooled_init = arith.constant dense<-1.0> : tensor<3x2xf32>
  %pro_init = arith.constant dense<0> : tensor<2xi32>
  %pro = kpool.pool_offsets kpool(2)
      ins(%iro, %cache : tensor<2xi32>, tensor<1xi32>)
      outs(%pro_init : tensor<2xi32>) -> tensor<2xi32>
  %pooled = kpool.compress kpool(2) head_dim(2)
      ins(%k, %g, %ape, %iro, %pro, %cache
          : tensor<5x2xf32>, tensor<5x2xf32>, tensor<2x2xf32>,
            tensor<2xi32>, tensor<2xi32>, tensor<1xi32>)
      outs(%pooled_init : tensor<3x2xf32>) -> tensor<3x2xf32>

  // CHECK: sizes = [2]
  // CHECK-NEXT: [0,  2]
  %p = tensor.cast %pro : tensor<2xi32> to tensor<*xi32>
  call @printMemrefI32(%p) : (tensor<*xi32>) -> ()

  // CHECK: sizes = [3, 2]
  // CHECK-NEXT: [4,   4.53788],
  // CHECK-NEXT: [8,   9],
  // CHECK-NEXT: [-1,   -1]]
  %u = tensor.cast %pooled : tensor<3x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
