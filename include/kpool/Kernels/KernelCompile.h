//===- KernelCompile.h - one configuration's kernels to an object -*- C++
//-*-===//
//
// The one way kpool's kernels are compiled to machine code, shared by
// kpool-aot (objects, headers and kernel packs) and the JIT
// (KPoolRuntimeJit): build the kernel module (KernelModule.h), lower it with
// kpool-lower-to-llvm (CPU) or kpool-lower-to-nvvm (CUDA), translate it to
// LLVM IR, make the CUDA host code launch on each call's stream, optimize
// for the host and emit a relocatable object. So the JIT's kernels are the
// ones kpool-aot ships, option for option.
//
// The CUDA target's GPU code: with format `ptx+cubin` (the default) the
// kernels are embedded as a kpool/ABI/CudaImage.h image, the PTX and, when
// ptxas is found in the toolkit, a cubin for `chip`; libkpool_cuda_runtime
// loads the cubin and falls back to the PTX when the driver rejects it.
// `isa`, `bin` and `fatbin` embed what gpu-module-to-binary makes.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_KERNELS_KERNELCOMPILE_H
#define KPOOL_KERNELS_KERNELCOMPILE_H

#include "kpool/Kernels/KernelModule.h"
#include "llvm/IR/Module.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class LLVMContext;
} // namespace llvm

namespace mlir::kpool {

/// What to compile a kernel module for.
struct KernelCompileOptions {
  bool cuda = false;
  // CPU (kpool-lower-to-llvm).
  bool openmp = false;
  int64_t vectorSize = 16;
  /// The host CPU the code is for: "" or "native" for this machine (its
  /// name and features), or an LLVM CPU name. The CUDA host code defaults to
  /// generic x86-64.
  std::string hostCPU;
  // CUDA (kpool-lower-to-nvvm).
  std::string chip = "sm_90";
  std::string features = "+ptx80";
  /// ptx+cubin, isa, bin or fatbin.
  std::string format = "ptx+cubin";
  /// The toolkit for libdevice and ptxas ("": $CUDA_HOME, ... as the
  /// pipeline resolves it).
  std::string cudaToolkit;
};

/// The configuration of one kernel module.
struct KernelModuleSpec {
  KPoolElementType type = KPOOL_BF16;
  int64_t headDim = 128;
  int64_t kpool = 4;
  bool poolOffsetsOnly = false;
  ::kpool::CacheFormat cache;
  /// The kernels to build, a subset of those the configuration has (empty:
  /// all). A kernel pack builds each cache format's `*_cache` kernels
  /// apart from the dense ones its formats share.
  std::vector<::kpool::abi::KernelId> only;
};

/// The symbol prefix of `spec`'s kernels (kernelPrefix, the cache format's
/// part, and "cuda_" for the CUDA target), e.g.
/// "kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_".
std::string kernelSymbolPrefix(const KernelModuleSpec &spec,
                               const KernelCompileOptions &options);

/// Which kernels `spec` builds, each with the symbol of its C interface
/// entry point (`_mlir_ciface_<prefix><kernel>_memref`).
std::vector<std::pair<::kpool::abi::KernelId, std::string>>
kernelEntryPoints(const KernelModuleSpec &spec,
                  const KernelCompileOptions &options);

/// Builds, lowers and translates the kernels of `spec` into an LLVM module
/// in `llvmContext` (not yet optimized: emitObject does that). `context`
/// must have kpool's and MLIR's dialects and LLVM translations registered
/// (registerKernelCompileDialects). Null on failure, with `error` set.
std::unique_ptr<llvm::Module> lowerKernels(MLIRContext &context,
                                           llvm::LLVMContext &llvmContext,
                                           const KernelModuleSpec &spec,
                                           const KernelCompileOptions &options,
                                           std::string &error);

/// The kernels of several specs (distinct symbol prefixes) in one module,
/// lowered together: one host module, and on the CUDA target one GPU module
/// for all (a kernel pack).
std::unique_ptr<llvm::Module> lowerKernels(MLIRContext &context,
                                           llvm::LLVMContext &llvmContext,
                                           ArrayRef<KernelModuleSpec> specs,
                                           const KernelCompileOptions &options,
                                           std::string &error);

/// Optimizes `module` for the host (O3 with the target machine, as the JIT
/// always did) and emits it as a relocatable object into `object`;
/// `llvmIR`, when given, receives the optimized IR.
LogicalResult emitObject(llvm::Module &module,
                         const KernelCompileOptions &options,
                         std::string &object, std::string &error,
                         std::string *llvmIR = nullptr);

/// The registrations lowerKernels needs in a context's registry.
void registerKernelCompileDialects(DialectRegistry &registry);

/// "the host's CPU and features" as emitObject compiles for them, e.g.
/// "znver4 +avx2,+fma,...": for descriptions only.
std::string describeHostCPU(const KernelCompileOptions &options);

} // namespace mlir::kpool

#endif // KPOOL_KERNELS_KERNELCOMPILE_H
