//===- JitCompiler.cpp - kpool kernels compiled at run time ---------------===//
//
// The JIT's object compiler for both targets: the kernels of a
// configuration through kpool/Kernels/KernelCompile.h -- the compiler and
// options kpool-aot uses -- into a relocatable object for this host (CPU
// kernels for its CPU and features; for CUDA, the host code with the PTX and
// a cubin embedded), which the runtime core caches on disk and loads.
// Nothing here touches the core's registries: this file is also the whole
// of the JIT plugin, libKPoolJit.so (JitPlugin.cpp).
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/Jit.h"

#include "kpool/Kernels/KernelCompile.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/FileSystem.h"

using namespace kpool;

static mlir::DialectRegistry &registry() {
  static mlir::DialectRegistry *r = [] {
    auto *reg = new mlir::DialectRegistry();
    mlir::kpool::registerKernelCompileDialects(*reg);
    return reg;
  }();
  return *r;
}

Status kpool::compileKernelObject(const KernelConfig &config,
                                  const CompileOptions &compile,
                                  KernelObject &object) {
  bool cuda = config.target == Target::CUDA;
  mlir::kpool::KernelModuleSpec spec;
  spec.type = config.elementType;
  spec.headDim = config.headDim;
  spec.kpool = config.kpool;
  spec.poolOffsetsOnly = config.poolOffsetsOnly;
  spec.cache = config.cache;
  mlir::kpool::KernelCompileOptions options;
  options.cuda = cuda;
  options.openmp = config.openmp;
  options.vectorSize = config.vectorSize;
  // The JIT's CUDA code is kpool-aot's default: sm_90, PTX 8.0, PTX and
  // a cubin (where the toolkit has ptxas) with the fallback to the PTX.
  options.cudaToolkit = compile.cudaToolkit;

  // One context per compilation: configurations compile concurrently (the
  // kernel set registry locks per configuration).
  mlir::MLIRContext context(registry());
  llvm::LLVMContext llvmContext;
  std::string error;
  std::unique_ptr<llvm::Module> module =
      mlir::kpool::lowerKernels(context, llvmContext, spec, options, error);
  if (!module)
    return Status::error("JIT compilation failed: " + error);
  KernelObject out;
  if (mlir::failed(
          mlir::kpool::emitObject(*module, options, out.object, error)))
    return Status::error("JIT compilation failed: " + error);
  for (auto &[id, symbol] : mlir::kpool::kernelEntryPoints(spec, options))
    out.entries.push_back({abi::kernel(id).name, symbol});
  if (cuda) {
    bool ptxas = !compile.cudaToolkit.empty() &&
                 llvm::sys::fs::can_execute(compile.cudaToolkit + "/bin/ptxas");
    out.description = "kpool-lower-to-nvvm " + options.chip + " " +
                      options.features + ", " +
                      (ptxas ? "PTX and cubin" : "PTX only (no ptxas)");
  } else {
    out.description =
        "kpool-lower-to-llvm for " + mlir::kpool::describeHostCPU(options);
  }
  object = std::move(out);
  return Status();
}
