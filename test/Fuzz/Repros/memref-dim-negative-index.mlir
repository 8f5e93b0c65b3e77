// Repro of an upstream MLIR 22.1.8 bug the IR fuzzer found (not kpool's; the
// fuzzer skips such inputs): canonicalize with the GPU dialect loaded folds
// memref.dim with a negative constant index and reads out of bounds
// (llvm/llvm-project#205073, fixed by #205338 after 22.1.8):
//   valgrind /usr/lib/llvm-22/bin/mlir-opt memref-dim-negative-index.mlir -canonicalize
// reports an invalid read; kpool-fuzz-ir built with ASan died with SEGV.
gpu.module @unused {}
func.func @f(%m: memref<?xi32>) -> index {
  %c = arith.constant -2 : index
  %d = memref.dim %m, %c : memref<?xi32>
  return %d : index
}
