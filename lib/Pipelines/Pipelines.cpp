//===- Pipelines.cpp - kpool lowering pipelines ---------------------------===//

#include "kpool/Pipelines/Pipelines.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kpool::buildBufferizationPipeline(OpPassManager &pm, bool deallocate) {
  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  if (!deallocate)
    return;
  bufferization::BufferDeallocationPipelineOptions deallocOptions;
  bufferization::buildBufferDeallocationPipeline(pm, deallocOptions);
  // The deallocation pipeline leaves bufferization.clone where a function
  // returns a buffer it also updated (the ring after seed_tail).
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void kpool::buildLowerToLLVMPipeline(OpPassManager &pm,
                                     const LowerToLLVMOptions &options) {
  if (options.bufferize)
    buildBufferizationPipeline(pm, options.deallocate);
  pm.addPass(createConvertKPoolToLinalgPass());
  KPoolVectorizePoolRowsPassOptions vectorizeOptions;
  vectorizeOptions.vectorSize = options.vectorSize;
  pm.addPass(createKPoolVectorizePoolRowsPass(vectorizeOptions));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertLinalgToLoopsPass());
  if (options.openmp) {
    pm.addPass(createConvertSCFToOpenMPPass());
    // Inlines the memref.alloca_scope the conversion wraps loop bodies in
    // (the bodies allocate nothing), before scf-to-cf splits them in blocks.
    pm.addPass(createCanonicalizerPass());
  }
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // bf16 conversions as integer arithmetic (round to nearest even): LLVM
  // would otherwise call __truncsfbf2, which nothing provides, on CPUs
  // without AVX512-BF16, and every CPU now computes the same bits.
  arith::ArithExpandOpsPassOptions expandOptions;
  expandOptions.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expandOptions));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void kpool::registerPipelines() {
  PassPipelineRegistration<LowerToLLVMOptions>(
      "kpool-lower-to-llvm",
      "Lower kpool ops on tensors (or memrefs, bufferize=false) in func.func "
      "to the LLVM dialect for the CPU",
      buildLowerToLLVMPipeline);
  PassPipelineRegistration<LowerToNVVMOptions>(
      "kpool-lower-to-nvvm",
      "Lower kpool ops on tensors (or memrefs, bufferize=false) in func.func "
      "to GPU kernels in a gpu.binary (NVVM) and host code in the LLVM "
      "dialect that launches them on the caller's device buffers",
      buildLowerToNVVMPipeline);
}
