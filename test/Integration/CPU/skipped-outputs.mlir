// Outputs the contract defines are written even when a runtime extent
// contradicts the op (issue 9, item 5; revision 3, "Extents that contradict
// the op at run time"). On tensors whose destinations come from
// tensor.empty, ring_close used to be skipped and return uninitialized
// memory (closed_pool = [-1876307501, 22039, 0, ...]); pool_offsets left
// the entries past a too-short input_row_offsets undefined. Now ring_close
// writes -1 and zero rows, pool_offsets the offsets of no pools (0).

// RUN: kpool-opt %s -kpool-lower-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_c_runner_utils,%mlir_runner_utils \
// RUN: | FileCheck %s

func.func @ring_close(%tail: tensor<?x?x?x?xf32>, %k: tensor<?x2xf32>,
                      %ape: tensor<2x2xf32>, %iro: tensor<?xi32>,
                      %cache: tensor<?xi32>, %slots: tensor<?xi32>, %n: i32)
    -> (tensor<3x2xf32>, tensor<3xi32>) {
  %pe = tensor.empty() : tensor<3x2xf32>
  %ce = tensor.empty() : tensor<3xi32>
  %p, %c = kpool.ring_close kpool(2) head_dim(2)
      ins(%tail, %k, %k, %ape, %iro, %cache, %slots
          : tensor<?x?x?x?xf32>, tensor<?x2xf32>, tensor<?x2xf32>,
            tensor<2x2xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      num_requests(%n)
      outs(%pe, %ce : tensor<3x2xf32>, tensor<3xi32>)
      -> tensor<3x2xf32>, tensor<3xi32>
  return %p, %c : tensor<3x2xf32>, tensor<3xi32>
}

func.func @offsets(%iro: tensor<?xi32>, %cache: tensor<3xi32>)
    -> tensor<4xi32> {
  %e = tensor.empty() : tensor<4xi32>
  %r = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xi32>, tensor<3xi32>)
      outs(%e : tensor<4xi32>) -> tensor<4xi32>
  return %r : tensor<4xi32>
}

func.func @main() {
  // A tail of shape [2, 3, 2, 2]: its second extent is not 2, so ring_close
  // computes nothing, yet every closed_pool is -1 and every pooled row 0.
  %tail0 = arith.constant dense<7.0> : tensor<2x3x2x2xf32>
  %tail = tensor.cast %tail0 : tensor<2x3x2x2xf32> to tensor<?x?x?x?xf32>
  %k0 = arith.constant dense<1.0> : tensor<4x2xf32>
  %k = tensor.cast %k0 : tensor<4x2xf32> to tensor<?x2xf32>
  %ape = arith.constant dense<0.0> : tensor<2x2xf32>
  %iro0 = arith.constant dense<[0, 2, 3, 4]> : tensor<4xi32>
  %iro = tensor.cast %iro0 : tensor<4xi32> to tensor<?xi32>
  %cache0 = arith.constant dense<[1, 1, 1]> : tensor<3xi32>
  %cache = tensor.cast %cache0 : tensor<3xi32> to tensor<?xi32>
  %slots0 = arith.constant dense<[0, 1, 0]> : tensor<3xi32>
  %slots = tensor.cast %slots0 : tensor<3xi32> to tensor<?xi32>
  %n = arith.constant 3 : i32
  %p, %c = call @ring_close(%tail, %k, %ape, %iro, %cache, %slots, %n)
      : (tensor<?x?x?x?xf32>, tensor<?x2xf32>, tensor<2x2xf32>,
         tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, i32)
      -> (tensor<3x2xf32>, tensor<3xi32>)
  // CHECK-LABEL: ring_close
  // CHECK: sizes = [3]
  // CHECK-NEXT: [-1,  -1,  -1]
  // CHECK: sizes = [3, 2]
  // CHECK-NEXT: [0,   0],
  // CHECK-NEXT: [0,   0],
  // CHECK-NEXT: [0,   0]]
  vector.print str "ring_close\n"
  %cu = tensor.cast %c : tensor<3xi32> to tensor<*xi32>
  call @printMemrefI32(%cu) : (tensor<*xi32>) -> ()
  %pu = tensor.cast %p : tensor<3x2xf32> to tensor<*xf32>
  call @printMemrefF32(%pu) : (tensor<*xf32>) -> ()

  // input_row_offsets has 2 entries for 3 requests: it contradicts
  // cache_lengths, so no pool is counted and every entry is written: 0.
  %oiro0 = arith.constant dense<[0, 5]> : tensor<2xi32>
  %oiro = tensor.cast %oiro0 : tensor<2xi32> to tensor<?xi32>
  %ocache = arith.constant dense<0> : tensor<3xi32>
  %o = call @offsets(%oiro, %ocache) : (tensor<?xi32>, tensor<3xi32>)
      -> tensor<4xi32>
  // CHECK-LABEL: pool_offsets
  // CHECK: sizes = [4]
  // CHECK-NEXT: [0,  0,  0,  0]
  vector.print str "pool_offsets\n"
  %ou = tensor.cast %o : tensor<4xi32> to tensor<*xi32>
  call @printMemrefI32(%ou) : (tensor<*xi32>) -> ()
  return
}

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)
