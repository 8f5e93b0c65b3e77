//===- KernelModule.h - the kpool kernel ABI as IR --------------*- C++ -*-===//
//
// Builds the module of the kpool kernels for one (element type, head_dim,
// kpool): one `func.func` per kernel of kpool/ABI/KernelABI.def, in
// buffer form over fully dynamic strided memrefs, tagged
// `llvm.emit_c_interface`, whose body is the kpool op. The JIT
// (KPoolRuntimeJit) and the ahead-of-time build (kpool-aot) both compile
// this module, so its calling convention is the one of both:
//
//   void _mlir_ciface_<prefix><kernel>_memref(<operands of KernelABI.def>)
//
// Every memref argument is a pointer to a strided memref descriptor
// {allocated, aligned, offset, sizes[rank], strides[rank]} (see
// kpool/ABI/Descriptor.h); scalars are passed by value. U32 metadata is
// an i32 memref read as unsigned. kpool-aot's header wraps the entry points
// as `<prefix>compress(const KPoolView *pooled, ...)` and so on.
//
// Library KPoolKernels: the dialect and MLIR's IR, no ExecutionEngine.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_KERNELS_KERNELMODULE_H
#define KPOOL_KERNELS_KERNELMODULE_H

#include "kpool/ABI/CacheFormat.h"
#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/View.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir::kpool {

/// The function name of kernel `id` in a module built with `prefix`, e.g.
/// "kpool_bf16_d128_k4_compress_memref" (the C interface adds
/// `_mlir_ciface_`).
std::string kernelFunctionName(llvm::StringRef prefix,
                               ::kpool::abi::KernelId id);

/// A prefix unique to the configuration, e.g. "kpool_bf16_d128_k4_".
std::string kernelPrefix(KPoolElementType type, int64_t headDim, int64_t kpool);

/// The prefix of a module with only the pool_offsets kernel of `kpool`,
/// e.g. "kpool_offsets_k4_".
std::string poolOffsetsPrefix(int64_t kpool);

/// Builds the kernels into a new module (only pool_offsets when
/// `poolOffsetsOnly`). `context` must allow loading the func, memref, arith
/// and kpool dialects (the function loads them).
OwningOpRef<ModuleOp>
buildKernelModule(MLIRContext &context, KPoolElementType type, int64_t headDim,
                  int64_t kpool, llvm::StringRef prefix,
                  bool poolOffsetsOnly = false,
                  const ::kpool::CacheFormat &cache = {});

/// Whether the module buildKernelModule builds with `poolOffsetsOnly` and
/// `cache` has kernel `id`: the one rule its builder, the JIT and kpool-aot
/// share.
bool hasKernel(::kpool::abi::KernelId id, bool poolOffsetsOnly,
               const ::kpool::CacheFormat &cache);

/// The part of the kernel prefix that names a cache format ("" for none,
/// else e.g. "fp8_hadamard_absmax_"), appended to kernelPrefix's.
std::string cacheFormatPrefix(const ::kpool::CacheFormat &cache);

} // namespace mlir::kpool

#endif // KPOOL_KERNELS_KERNELMODULE_H
