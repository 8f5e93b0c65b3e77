//===- fuzz-gpu-emulated.cpp - the C API fuzzer on the GPU kernels --------===//
//
// kpool-fuzz-capi-gpu runs fuzz-kpool-capi.cpp unchanged, but every kernel
// set of its menu is the GPU mapping (convert-kpool-to-linalg,
// kpool-map-to-gpu: the code kpool-lower-to-nvvm compiles for the device)
// executed on the CPU: each gpu.launch becomes sequential loops over its
// blocks and threads (the kernels use no barriers, shared memory or warp
// operations; utils/launch-to-loops.py does the same for the lit tests), and
// the CPU lowering runs the result. So the GPU kernels' own guards meet the
// fuzzer's bad metadata, strides and views on machines without a GPU. The
// kernels are registered as precompiled kernels before the fuzzer creates
// its kernel sets (this executable links the C API and the runtime
// statically, so it has one registry).
//
// Sequential threads cannot show races between threads; those need a GPU.
//
//===----------------------------------------------------------------------===//

#include "kpool-c/Runtime.h"
#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "kpool/InitAll.h"
#include "kpool/Kernels/KernelModule.h"
#include "kpool/Pipelines/Pipelines.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelSet.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;

/// f32 to bf16, round to nearest even (quiet NaNs stay NaN): LLVM calls this
/// for the GPU mapping's vector conversions, which the CPU pipeline's
/// arith-expand does not reach, and the process has no compiler-rt. The JIT
/// finds it in the executable (linked with ENABLE_EXPORTS).
extern "C" __attribute__((visibility("default"))) __bf16
__truncsfbf2(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t h;
  if ((bits & 0x7fffffff) > 0x7f800000)
    h = static_cast<uint16_t>((bits >> 16) | 0x40);
  else
    h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  __bf16 out;
  memcpy(&out, &h, 2);
  return out;
}

namespace {

/// Replaces each gpu.launch by loops over its grid and block.
LogicalResult launchesToLoops(ModuleOp module) {
  SmallVector<gpu::LaunchOp> launches;
  module->walk([&](gpu::LaunchOp op) { launches.push_back(op); });
  for (gpu::LaunchOp launch : launches) {
    if (!launch.getBody().hasOneBlock() || launch.getAsyncToken() ||
        launch.hasClusterSize())
      return launch.emitError("launch-to-loops: unsupported launch");
    OpBuilder b(launch);
    Location loc = launch.getLoc();
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                    block = launch.getBlockSizeOperandValues();
    IRMapping map;
    gpu::KernelDim3 gridArgs = launch.getGridSize(),
                    blockArgs = launch.getBlockSize();
    map.map(gridArgs.x, grid.x);
    map.map(gridArgs.y, grid.y);
    map.map(gridArgs.z, grid.z);
    map.map(blockArgs.x, block.x);
    map.map(blockArgs.y, block.y);
    map.map(blockArgs.z, block.z);
    gpu::KernelDim3 bids = launch.getBlockIds(), tids = launch.getThreadIds();
    std::pair<Value, Value> loops[] = {{bids.x, grid.x},  {bids.y, grid.y},
                                       {bids.z, grid.z},  {tids.z, block.z},
                                       {tids.y, block.y}, {tids.x, block.x}};
    for (auto [iv, bound] : loops) {
      auto loop = scf::ForOp::create(b, loc, c0, bound, c1);
      map.map(iv, loop.getInductionVar());
      b.setInsertionPoint(loop.getBody()->getTerminator());
    }
    for (Operation &op : launch.getBody().front().without_terminator())
      b.clone(op, map);
    launch.erase();
  }
  return success();
}

DialectRegistry &registry() {
  static DialectRegistry *r = [] {
    auto *reg = new DialectRegistry;
    registerAllDialects(*reg);
    registerAllExtensions(*reg);
    registerAllToLLVMIRTranslations(*reg);
    mlir::kpool::registerAllDialects(*reg);
    return reg;
  }();
  return *r;
}

struct State {
  MLIRContext context{registry()};
  std::unique_ptr<ExecutionEngine> engine;
};

/// Compiles the GPU mapping of `config`'s kernels for the CPU and registers
/// it as the precompiled kernels of `config`.
bool registerEmulated(const ::kpool::KernelConfig &config) {
  auto state = std::make_shared<State>();
  MLIRContext &ctx = state->context;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return success();
  });
  std::string prefix =
      mlir::kpool::kernelPrefix(config.elementType, config.headDim, config.kpool);
  OwningOpRef<ModuleOp> module = mlir::kpool::buildKernelModule(
      ctx, config.elementType, config.headDim, config.kpool, prefix);
  PassManager map(&ctx);
  map.addPass(mlir::kpool::createConvertKPoolToLinalgPass());
  mlir::kpool::KPoolMapToGPUPassOptions mapOptions;
  mapOptions.approximateExp = true; // libdevice is the device's
  map.addNestedPass<func::FuncOp>(mlir::kpool::createKPoolMapToGPUPass(mapOptions));
  PassManager lower(&ctx);
  mlir::kpool::KPoolToLLVMPipelineOptions options;
  options.bufferize = false;
  options.vectorSize = 0; // the mapping's own vector accesses stay
  mlir::kpool::buildLowerToLLVMPipeline(lower, options);
  bool ok = succeeded(map.run(*module)) && succeeded(launchesToLoops(*module));
  if (getenv("KPOOL_FUZZ_GPU_DUMP"))
    module->print(llvm::errs());
  if (!ok || failed(lower.run(*module))) {
    fprintf(stderr, "==fuzz-gpu== lowering failed:\n%s\n", diagnostics.c_str());
    return false;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions engineOptions;
  auto transformer = makeOptimizingTransformer(2, 0, nullptr);
  engineOptions.transformer = transformer;
  auto created = ExecutionEngine::create(*module, engineOptions);
  if (!created) {
    fprintf(stderr, "==fuzz-gpu== JIT failed: %s\n",
            llvm::toString(created.takeError()).c_str());
    return false;
  }
  state->engine = std::move(*created);
  ::kpool::KernelBackend backend;
  for (const ::kpool::abi::Kernel &kernel : ::kpool::abi::kernels) {
    if (!mlir::kpool::hasKernel(kernel.id, config.poolOffsetsOnly,
                                config.cache))
      continue;
    auto symbol = state->engine->lookup(
        "_mlir_ciface_" + mlir::kpool::kernelFunctionName(prefix, kernel.id));
    if (!symbol) {
      llvm::consumeError(symbol.takeError());
      return false;
    }
    backend.setEntry(kernel.id, *symbol);
  }
  backend.owner = std::move(state);
  ::kpool::KernelSet::registerPrecompiled(config, std::move(backend));
  return true;
}

} // namespace

/// The menu of fuzz-kpool-capi.cpp (its kConfigs), as GPU kernels.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Configurations off the menu (the pool-cache sets) are JIT-compiled by
  // the JIT this program links.
  ::kpool::registerJitCompiler();
  struct {
    KPoolElementType type;
    int64_t headDim, kpool, vectorSize;
    bool openmp;
  } menu[] = {{KPOOL_F32, 4, 3, 16, false},
              {KPOOL_BF16, 8, 4, 16, false},
              {KPOOL_F16, 3, 1, 0, false},
              {KPOOL_F32, 5, 2, 4, true}};
  for (auto &m : menu) {
    ::kpool::KernelConfig config;
    config.elementType = m.type;
    config.headDim = m.headDim;
    config.kpool = m.kpool;
    config.openmp = m.openmp;
    config.vectorSize = m.vectorSize;
    if (!registerEmulated(config))
      abort();
  }
  fprintf(stderr, "==fuzz-gpu== the menu's kernel sets are the GPU mapping, "
                  "emulated on the CPU\n");
  return 0;
}
