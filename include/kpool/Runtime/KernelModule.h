//===- KernelModule.h - the kpool kernel ABI as IR --------------*- C++ -*-===//
//
// Builds the module of the four kernels for one (element type, head_dim,
// kpool): `func.func`s in buffer form over fully dynamic strided memrefs,
// tagged `llvm.emit_c_interface`. The JIT runtime and the ahead-of-time
// build both compile this module, so the calling convention below is the
// one of both:
//
//   void _mlir_ciface_<prefix>compress_memref(pooled, k, gate, ape, iro, pro,
//                                             cache)
//   void _mlir_ciface_<prefix>seed_tail_memref(tail, k, gate, iro, cache,
//                                              slots, n)
//   void _mlir_ciface_<prefix>ring_close_memref(pooled, closed, tail, k, gate,
//                                               ape, iro, cache, slots, n)
//   void _mlir_ciface_<prefix>pool_offsets_memref(pro, iro, cache)
//
// Every memref argument is a pointer to a strided memref descriptor
// {allocated, aligned, offset, sizes[rank], strides[rank]} (see
// kpool/Runtime/Descriptor.h); `n` (num_requests) is an int32_t. Metadata is
// 32-bit (read as unsigned), closed_pool int32, ape f32. kpool-aot's header
// wraps them as `<prefix>compress(const KPoolView *pooled, ...)` and so on.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELMODULE_H
#define KPOOL_RUNTIME_KERNELMODULE_H

#include "kpool-c/View.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir::kpool {

/// The function names of the kernels in a module built with `prefix`.
struct KernelNames {
  std::string compress, seedTail, ringClose, poolOffsets;
  explicit KernelNames(llvm::StringRef prefix);
};

/// A prefix unique to the configuration, e.g. "kpool_bf16_d128_k4_".
std::string kernelPrefix(KPoolElementType type, int64_t headDim, int64_t kpool);

/// Builds the four kernels into a new module (only pool_offsets when
/// `poolOffsetsOnly`). `context` must have the func, memref, arith and kpool
/// dialects loaded (the function loads them).
OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &context,
                                        KPoolElementType type, int64_t headDim,
                                        int64_t kpool, llvm::StringRef prefix,
                                        bool poolOffsetsOnly = false);

} // namespace mlir::kpool

#endif // KPOOL_RUNTIME_KERNELMODULE_H
