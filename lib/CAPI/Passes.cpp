//===- Passes.cpp - C API of the kpool passes and pipelines ---------------===//

#include "kpool-c/Dialect.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "kpool/InitAll.h"
#include "kpool/Pipelines/Pipelines.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>

using namespace mlir;
using namespace mlir::kpool;

extern "C" {
#include "kpool-c/ConversionPasses.capi.cpp.inc"
#include "kpool-c/TransformsPasses.capi.cpp.inc"
}

void mlirKPoolRegisterAllPasses(void) { mlir::kpool::registerAllPasses(); }

void mlirKPoolRegisterPipelines(void) { mlir::kpool::registerPipelines(); }

/// Parses `options` into a pipeline's options struct, checks their values
/// and appends the pipeline; reports a parse error or a bad value through
/// `callback` (and adds nothing). (Errors in an option's
/// value are also printed to stderr by llvm::cl, which has no other outlet.)
template <typename Options, typename Build>
static MlirLogicalResult
addPipeline(const char *name, MlirOpPassManager passManager,
            MlirStringRef options, MlirStringCallback callback, void *userData,
            Build build) {
  Options parsed;
  std::string details;
  llvm::raw_string_ostream os(details);
  if (failed(parsed.parseFromString(unwrap(options), os))) {
    if (callback) {
      os.flush();
      std::string message = std::string(name) + ": invalid options '" +
                            unwrap(options).str() + "'";
      if (!details.empty())
        message += ": " + StringRef(details).trim().str();
      callback(mlirStringRefCreate(message.data(), message.size()), userData);
    }
    return mlirLogicalResultFailure();
  }
  std::string error;
  if (failed(build(*unwrap(passManager), parsed, &error))) {
    if (callback)
      callback(mlirStringRefCreate(error.data(), error.size()), userData);
    return mlirLogicalResultFailure();
  }
  return mlirLogicalResultSuccess();
}

MlirLogicalResult mlirKPoolAddLowerToLLVMPipeline(MlirOpPassManager passManager,
                                                  MlirStringRef options,
                                                  MlirStringCallback callback,
                                                  void *userData) {
  return addPipeline<KPoolToLLVMPipelineOptions>(
      "kpool-lower-to-llvm", passManager, options, callback, userData,
      [](OpPassManager &pm, const KPoolToLLVMPipelineOptions &o, std::string *error) {
        return buildLowerToLLVMPipeline(pm, o, error);
      });
}

MlirLogicalResult mlirKPoolAddLowerToNVVMPipeline(MlirOpPassManager passManager,
                                                  MlirStringRef options,
                                                  MlirStringCallback callback,
                                                  void *userData) {
  return addPipeline<KPoolToNVVMPipelineOptions>(
      "kpool-lower-to-nvvm", passManager, options, callback, userData,
      [](OpPassManager &pm, const KPoolToNVVMPipelineOptions &o, std::string *error) {
        return buildLowerToNVVMPipeline(pm, o, error);
      });
}
