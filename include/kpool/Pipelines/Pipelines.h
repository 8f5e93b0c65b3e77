//===- Pipelines.h - kpool lowering pipelines -------------------*- C++ -*-===//
//
// The pass pipelines that take kpool ops on tensors in `func.func`s to the
// LLVM dialect (CPU) and to NVVM plus a GPU binary (NVIDIA). Each is an
// options struct, a build function a graph compiler calls on its own pass
// manager, and one command-line registration.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_PIPELINES_PIPELINES_H
#define KPOOL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;

namespace kpool {

/// Options of `kpool-lower-to-llvm`.
struct LowerToLLVMOptions : public PassPipelineOptions<LowerToLLVMOptions> {
  PassOptions::Option<bool> openmp{
      *this, "openmp",
      llvm::cl::desc("Run pooled rows and requests on OpenMP threads "
                     "(convert-scf-to-openmp); link libomp at run time"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> vectorSize{
      *this, "vector-size",
      llvm::cl::desc("Channels per vector in the pooled-row loops "
                     "(kpool-vectorize-pool-rows); 0 keeps them scalar"),
      llvm::cl::init(16)};
  PassOptions::Option<bool> bufferize{
      *this, "bufferize",
      llvm::cl::desc("Run one-shot-bufferize (function boundaries included) "
                     "first; turn off for input that is already on memrefs"),
      llvm::cl::init(true)};
};

/// Bufferizes, lowers kpool to linalg, vectorizes the channel loops, lowers
/// to loops (OpenMP when asked) and converts everything to the LLVM dialect.
/// The result runs under `mlir-runner` or the ExecutionEngine.
void buildLowerToLLVMPipeline(OpPassManager &pm,
                              const LowerToLLVMOptions &options);

/// The bufferization prefix both pipelines share: one-shot-bufferize with
/// function boundaries and fully dynamic layouts on function arguments, then
/// the buffer deallocation pipeline.
void buildBufferizationPipeline(OpPassManager &pm);

/// Registers `kpool-lower-to-llvm` (and the GPU pipeline when it is built).
void registerPipelines();

} // namespace kpool
} // namespace mlir

#endif // KPOOL_PIPELINES_PIPELINES_H
