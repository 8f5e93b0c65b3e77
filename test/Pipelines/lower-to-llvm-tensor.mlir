// kpool-lower-to-llvm on the value form (default bufferize=true): functions
// whose results are fresh buffers lower to the LLVM dialect only and
// translate to LLVM IR. (Functions that return an updated argument, like the
// ring after seed_tail, are in lower-to-llvm-inplace.mlir.)
//
// DEFINE: %{llvm_only} = --implicit-check-not=" kpool." --implicit-check-not=" linalg." --implicit-check-not=" scf." --implicit-check-not=" memref." --implicit-check-not=" vector." --implicit-check-not=" arith." --implicit-check-not=" math." --implicit-check-not=" cf." --implicit-check-not=" affine." --implicit-check-not=" bufferization." --implicit-check-not=" tensor." --implicit-check-not=" ub." --implicit-check-not=unrealized_conversion_cast
//
// RUN: kpool-opt %s -kpool-lower-to-llvm | FileCheck %s %{llvm_only} --implicit-check-not=" omp."
// RUN: kpool-opt %s -kpool-lower-to-llvm | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR
// RUN: kpool-opt %s -kpool-lower-to-llvm="openmp=true" | FileCheck %s --check-prefix=OMP %{llvm_only}
// RUN: kpool-opt %s -kpool-lower-to-llvm="openmp=true" | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR
// RUN: kpool-opt %s -kpool-lower-to-llvm="vector-size=0" | FileCheck %s --check-prefix=SCALAR %{llvm_only} --implicit-check-not=" omp." --implicit-check-not="vector<"

// ring_close into fresh outputs, then the offsets and the pools of the call.
// CHECK-LABEL: llvm.func @close_and_compress(
//       CHECK:   llvm.call @malloc
//       CHECK:   llvm.load {{.*}} -> vector<16xbf16>
//       CHECK:   llvm.return
// IR-LABEL: define { {{.*}} } @close_and_compress(
// OMP-LABEL: llvm.func @close_and_compress(
//   OMP-COUNT-3:   omp.parallel
//       OMP:   llvm.return
// SCALAR-LABEL: llvm.func @close_and_compress(
//       SCALAR:   llvm.return
func.func @close_and_compress(%tail: tensor<?x2x4x128xbf16>,
    %k: tensor<?x128xbf16>, %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>,
    %iro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32, %num_pools: index)
    -> (tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>) {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %cache, %c0 : tensor<?xui32>
  %pinit = tensor.empty(%b) : tensor<?x128xbf16>
  %cinit = tensor.empty(%b) : tensor<?xi32>
  %closed_rows, %closed = kpool.ring_close kpool(4) head_dim(128)
      ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
          : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
            tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
      -> tensor<?x128xbf16>, tensor<?xi32>
  %b1 = tensor.dim %iro, %c0 : tensor<?xui32>
  %pro_init = tensor.empty(%b1) : tensor<?xui32>
  %pro = kpool.pool_offsets kpool(4)
      ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
      outs(%pro_init : tensor<?xui32>) -> tensor<?xui32>
  %zero = arith.constant 0.0 : bf16
  %empty = tensor.empty(%num_pools) : tensor<?x128xbf16>
  %init = linalg.fill ins(%zero : bf16) outs(%empty : tensor<?x128xbf16>)
      -> tensor<?x128xbf16>
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  return %closed_rows, %closed, %pooled
      : tensor<?x128xbf16>, tensor<?xi32>, tensor<?x128xbf16>
}
