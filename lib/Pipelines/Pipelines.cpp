//===- Pipelines.cpp - kpool lowering pipelines ---------------------------===//

#include "kpool/Pipelines/Pipelines.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kpool::buildBufferizationPipeline(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  bufferization::BufferDeallocationPipelineOptions deallocOptions;
  bufferization::buildBufferDeallocationPipeline(pm, deallocOptions);
}

void kpool::buildLowerToLLVMPipeline(OpPassManager &pm,
                                     const LowerToLLVMOptions &options) {
  if (options.bufferize)
    buildBufferizationPipeline(pm);
  pm.addPass(createConvertKPoolToLinalgPass());
  KPoolVectorizePoolRowsPassOptions vectorizeOptions;
  vectorizeOptions.vectorSize = options.vectorSize;
  pm.addPass(createKPoolVectorizePoolRowsPass(vectorizeOptions));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertLinalgToLoopsPass());
  if (options.openmp)
    pm.addPass(createConvertSCFToOpenMPPass());
  // Transfers on views with a non-unit innermost stride (the slow path of
  // the unit-stride versioning) become scalar loads; unit-stride ones stay
  // vector loads.
  VectorTransferToSCFOptions transferOptions;
  transferOptions.enableFullUnroll();
  transferOptions.setTargetRank(0);
  pm.addPass(createConvertVectorToSCFPass(transferOptions));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
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
}
