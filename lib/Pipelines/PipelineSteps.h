//===- PipelineSteps.h - what the kpool pipelines share ---------*- C++ -*-===//
//
// Internal to lib/Pipelines: the steps kpool-lower-to-llvm and
// kpool-lower-to-nvvm both begin with.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_PIPELINES_PIPELINESTEPS_H
#define KPOOL_LIB_PIPELINES_PIPELINESTEPS_H

#include "kpool/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace mlir::kpool {

/// Checks `options` with `verify`, then adds what both pipelines start
/// with: kpool-fuse-step (with `fuse-step`) and buildBufferizationPipeline
/// (with `bufferize`; deallocations with `deallocate`). On a bad value adds
/// nothing, returns failure and stores the message in `error` (when not
/// null).
template <typename Options>
LogicalResult beginPipeline(OpPassManager &pm, const Options &options,
                            LogicalResult (*verify)(const Options &,
                                                    std::string &),
                            bool deallocate, std::string *error) {
  std::string message;
  if (failed(verify(options, message))) {
    if (error)
      *error = message;
    return failure();
  }
  addFuseAndBufferize(pm, options.fuseStep, options.bufferize, deallocate);
  return success();
}

} // namespace mlir::kpool

#endif // KPOOL_LIB_PIPELINES_PIPELINESTEPS_H
