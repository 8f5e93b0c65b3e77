//===- Pipelines.cpp - kpool lowering pipelines ---------------------------===//

#include "kpool/Pipelines/Pipelines.h"

#include "PipelineSteps.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
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

void kpool::addFuseAndBufferize(OpPassManager &pm, bool fuseStep,
                                bool bufferize, bool deallocate) {
  if (fuseStep)
    pm.addPass(createKPoolFuseStepPass());
  if (bufferize)
    buildBufferizationPipeline(pm, deallocate);
}

LogicalResult kpool::verifyLowerToLLVMOptions(const KPoolToLLVMPipelineOptions &options,
                                              std::string &error) {
  if (options.vectorSize < 0) {
    error = "kpool-lower-to-llvm: vector-size must be 0 (scalar) or a "
            "positive number of channels, got " +
            std::to_string(options.vectorSize);
    return failure();
  }
  return success();
}

LogicalResult kpool::checkPipelineAnchor(const OpPassManager &pm,
                                         StringRef pipeline,
                                         std::string *error) {
  std::optional<StringRef> anchor = pm.getOpName();
  if (!anchor || *anchor == ModuleOp::getOperationName())
    return success();
  if (error)
    *error =
        (pipeline +
         " must be nested in 'builtin.module' (it bufferizes "
         "and converts whole modules), got a pass manager on '" +
         *anchor + "'; e.g. -pass-pipeline='builtin.module(" + pipeline + ")'")
            .str();
  return failure();
}

LogicalResult kpool::buildLowerToLLVMPipeline(OpPassManager &pm,
                                              const KPoolToLLVMPipelineOptions &options,
                                              std::string *error) {
  if (failed(checkPipelineAnchor(pm, "kpool-lower-to-llvm", error)))
    return failure();
  if (failed(beginPipeline(pm, options, verifyLowerToLLVMOptions,
                           options.deallocate, error)))
    return failure();
  // The CPU runs kpool.step's offsets scan as a prologue of its loop (one
  // O(B) pass); a GPU launch cannot, so kpool-lower-to-nvvm walks.
  ConvertKPoolToLinalgPassOptions linalgOptions;
  linalgOptions.stepOffsets = "scan";
  // Two pools ahead, as the hand-written kernel of kpool-bench-cpu.
  linalgOptions.prefetchPools = 2;
  // Sixteen pooled rows per iteration: one claimant search per request a
  // tile meets instead of one per row.
  linalgOptions.rowsPerIteration = 16;
  // Pools of more than 4 members in the member loop: unrolled, their z
  // values outgrow AVX2's 16 vector registers (same bits either way).
  linalgOptions.unrollMembers = 4;
  pm.addPass(createConvertKPoolToLinalgPass(linalgOptions));
  KPoolVectorizePoolRowsPassOptions vectorizeOptions;
  vectorizeOptions.vectorSize = options.vectorSize;
  pm.addPass(createKPoolVectorizePoolRowsPass(vectorizeOptions));
  pm.addPass(createKPoolLowerCacheEntriesPass());
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
  return success();
}

/// Registers a pipeline whose builder checks its options: a bad value is
/// reported through the pipeline parser's error handler (a diagnostic and a
/// failed pass-pipeline parse), never by a crash in a later pass.
template <typename Options>
static void registerChecked(StringRef name, StringRef description,
                            LogicalResult (*build)(OpPassManager &,
                                                   const Options &,
                                                   std::string *)) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, StringRef text,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        if (failed(build(pm, options, &error)))
          return errorHandler(error);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(Options());
      });
}

void kpool::registerPipelines() {
  registerChecked<KPoolToLLVMPipelineOptions>(
      "kpool-lower-to-llvm",
      "Lower kpool ops on tensors (or memrefs, bufferize=false) in func.func "
      "to the LLVM dialect for the CPU",
      buildLowerToLLVMPipeline);
  registerChecked<KPoolToNVVMPipelineOptions>(
      "kpool-lower-to-nvvm",
      "Lower kpool ops on tensors (or memrefs, bufferize=false) in func.func "
      "to GPU kernels in a gpu.binary (NVVM) and host code in the LLVM "
      "dialect that launches them on the caller's device buffers",
      buildLowerToNVVMPipeline);
}
