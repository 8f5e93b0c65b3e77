// kpool-lower-to-llvm on the value form when a function returns an argument
// it updated in place (the ring after seed_tail, the pooled rows after
// compress): the result must still be LLVM dialect only.
//
// The buffer deallocation pipeline returns such arguments through
// `bufferization.clone`; the bufferization prefix of the pipelines runs
// convert-bufferization-to-memref so that none survives. With
// `deallocate=false` (input that allocates nothing) the arguments are
// updated and returned in place: no allocation, no copy.
//
// DEFINE: %{llvm_only} = --implicit-check-not=" kpool." --implicit-check-not=" linalg." --implicit-check-not=" scf." --implicit-check-not=" memref." --implicit-check-not=" vector." --implicit-check-not=" arith." --implicit-check-not=" math." --implicit-check-not=" cf." --implicit-check-not=" affine." --implicit-check-not=" bufferization." --implicit-check-not=" tensor." --implicit-check-not=" ub." --implicit-check-not=unrealized_conversion_cast
//
// RUN: kpool-opt %s -kpool-lower-to-llvm="vector-size=0" | FileCheck %s %{llvm_only} --implicit-check-not=" omp."
// RUN: kpool-opt %s -kpool-lower-to-llvm | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR
// RUN: kpool-opt %s -kpool-lower-to-llvm | FileCheck %s --check-prefix=COPY
// RUN: kpool-opt %s -kpool-lower-to-llvm="deallocate=false" | FileCheck %s --check-prefix=INPLACE

// COPY: llvm.call @malloc
// INPLACE-NOT: @malloc
// INPLACE-NOT: memcpy
// INPLACE-NOT: llvm.intr.memcpy

// CHECK-LABEL: llvm.func @step(
//       CHECK:   llvm.return
// IR-LABEL: define { {{.*}} } @step(
func.func @step(%tail: tensor<?x2x4x128xbf16>, %k: tensor<?x128xbf16>,
    %gate: tensor<?x128xbf16>, %ape: tensor<4x128xf32>, %iro: tensor<?xui32>,
    %pro: tensor<?xui32>, %cache: tensor<?xui32>, %slots: tensor<?xui32>,
    %n: i32, %pooled_init: tensor<?x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x2x4x128xbf16>) {
  %pooled = kpool.compress kpool(4) head_dim(128)
      ins(%k, %gate, %ape, %iro, %pro, %cache
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
            tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
      outs(%pooled_init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
  %ring = kpool.seed_tail kpool(4) head_dim(128)
      ins(%k, %gate, %iro, %cache, %slots
          : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
            tensor<?xui32>, tensor<?xui32>)
      num_requests(%n)
      outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
  return %pooled, %ring : tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
}
