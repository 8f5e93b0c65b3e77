//===- kpool-plugin.cpp - kpool for stock MLIR tools ----------------------===//
//
// libKPoolPlugin.so: a dialect plugin and a pass plugin, for any mlir-opt
// (or MlirOptMain-based tool) of the same LLVM/MLIR, e.g. Debian's:
//
//   mlir-opt --load-dialect-plugin=libKPoolPlugin.so \
//       --pass-pipeline='builtin.module(kpool-lower-to-llvm)' step.mlir
//
// The dialect plugin adds the kpool dialect with its bufferization models
// and registers every kpool pass and pipeline; the pass plugin
// (--load-pass-plugin) registers the passes and pipelines alone. The library
// links kpool's own libraries statically and MLIR/LLVM from the shared
// libMLIR.so/libLLVM.so the tool runs with, so there is one copy of MLIR's
// registries in the process (docs/embedding.md, "Stock tools").
//
//===----------------------------------------------------------------------===//

#include "kpool/InitAll.h"
#include "kpool/Version.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Support/Compiler.h"

#include <mutex>

/// Registers kpool's passes and pipelines once, whichever plugin entry point
/// (or both) the tool calls: a pipeline registered twice is an error in
/// builds of MLIR with assertions.
static void registerPassesOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mlir::kpool::registerAllPasses(); });
}

extern "C" LLVM_ATTRIBUTE_WEAK
    LLVM_ATTRIBUTE_VISIBILITY_DEFAULT mlir::DialectPluginLibraryInfo
    mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "KPool", KPOOL_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::kpool::registerAllDialects(*registry);
            registerPassesOnce();
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK
    LLVM_ATTRIBUTE_VISIBILITY_DEFAULT mlir::PassPluginLibraryInfo
    mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "KPoolPasses", KPOOL_VERSION_STRING,
          [] { registerPassesOnce(); }};
}
