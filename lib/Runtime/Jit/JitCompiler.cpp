//===- JitCompiler.cpp - JIT-compiled kpool kernels -----------------------===//
//
// The CPU target's KernelCompiler: builds the kernel module
// (kpool/Kernels/KernelModule.h), lowers it with kpool-lower-to-llvm and
// compiles it with MLIR's ExecutionEngine for the host CPU.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/Jit.h"

#include "kpool/InitAll.h"
#include "kpool/Kernels/KernelModule.h"
#include "kpool/Pipelines/Pipelines.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <mutex>

using namespace kpool;

static mlir::DialectRegistry &registry() {
  static mlir::DialectRegistry *r = [] {
    auto *reg = new mlir::DialectRegistry();
    mlir::registerAllDialects(*reg);
    mlir::registerAllExtensions(*reg);
    mlir::registerAllToLLVMIRTranslations(*reg);
    mlir::kpool::registerAllDialects(*reg);
    return reg;
  }();
  return *r;
}

namespace {
/// What JIT-compiled kernels live in.
struct JitState {
  mlir::MLIRContext context{registry()};
  std::unique_ptr<mlir::ExecutionEngine> engine;
};
} // namespace

Status kpool::compileJitKernels(const KernelConfig &config,
                                KernelBackend &backend) {
  if (config.target != Target::CPU)
    return Status::error("the CUDA target is served by the ahead-of-time "
                         "kernels (kpool-aot); the JIT runtime compiles for "
                         "the CPU");
  // The context outlives the engine's entry points: both are kept by the
  // backend's owner.
  auto state = std::make_shared<JitState>();
  mlir::MLIRContext &context = state->context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return mlir::success();
  });

  bool offsetsOnly = config.poolOffsetsOnly;
  std::string prefix =
      offsetsOnly ? mlir::kpool::poolOffsetsPrefix(config.kpool)
                  : mlir::kpool::kernelPrefix(config.elementType,
                                              config.headDim, config.kpool) +
                        mlir::kpool::cacheFormatPrefix(config.cache);
  CacheFormat cache = offsetsOnly ? CacheFormat() : config.cache;
  auto module = mlir::kpool::buildKernelModule(
      context, config.elementType, offsetsOnly ? 1 : config.headDim,
      config.kpool, prefix, offsetsOnly, cache);
  mlir::PassManager pm(&context);
  mlir::kpool::KPoolToLLVMPipelineOptions options;
  options.bufferize = false;
  options.openmp = config.openmp;
  options.vectorSize = config.vectorSize;
  std::string pipelineError;
  if (mlir::failed(
          mlir::kpool::buildLowerToLLVMPipeline(pm, options, &pipelineError)))
    return Status::error(pipelineError);
  if (mlir::failed(pm.run(*module)))
    return Status::error("lowering the kernels failed:\n" + diagnostics);

  // Configurations compile concurrently (the cache locks per
  // configuration); LLVM's target registration happens once.
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  // LLVM's optimizer gets the host's target machine, CPU name and features
  // both (detectHost), the target the JIT's code generator compiles for:
  // without one its cost models know no vector registers (nothing MLIR left
  // scalar is vectorized or unrolled for the host). The CPU name alone is
  // not enough: this VM reports znver4, which implies AVX-512 it does not
  // have, and the optimizer then plans 512-bit loops for a code generator
  // without them. The transformer runs inside ExecutionEngine::create.
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder)
    return Status::error("JIT: no target machine for the host: " +
                         llvm::toString(machineBuilder.takeError()));
  machineBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto machine = machineBuilder->createTargetMachine();
  if (!machine)
    return Status::error("JIT: no target machine for the host: " +
                         llvm::toString(machine.takeError()));
  mlir::ExecutionEngineOptions engineOptions;
  auto transformer = mlir::makeOptimizingTransformer(
      /*optLevel=*/3, /*sizeLevel=*/0, machine->get());
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.enablePerfNotificationListener = false;
  llvm::SmallVector<llvm::StringRef> libs;
  if (config.openmp)
    libs.push_back(KPOOL_LIBOMP_PATH);
  engineOptions.sharedLibPaths = libs;
  auto created = mlir::ExecutionEngine::create(*module, engineOptions);
  if (!created)
    return Status::error(
        "JIT compilation failed: " + llvm::toString(created.takeError()) +
        "\n" + diagnostics);
  state->engine = std::move(*created);
  mlir::ExecutionEngine &engine = *state->engine;

  for (const abi::Kernel &kernel : abi::kernels) {
    if (!mlir::kpool::hasKernel(kernel.id, offsetsOnly, cache))
      continue;
    std::string name = mlir::kpool::kernelFunctionName(prefix, kernel.id);
    auto symbol = engine.lookup("_mlir_ciface_" + name);
    if (!symbol)
      return Status::error("kernel '" + name + "' not found: " +
                           llvm::toString(symbol.takeError()));
    backend.setEntry(kernel.id, *symbol);
  }
  backend.owner = std::move(state);
  return Status();
}

void kpool::registerJitCompiler() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    registerKernelCompiler(Target::CPU, compileJitKernels);
  });
}
