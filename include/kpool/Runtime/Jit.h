//===- Jit.h - kernels JIT-compiled for the host CPU ------------*- C++ -*-===//
//
// The JIT layer (KPoolRuntimeJit): builds the kernel module
// (kpool/Kernels/KernelModule.h), lowers it with kpool-lower-to-llvm and
// compiles it with MLIR's ExecutionEngine for the host CPU. It plugs into
// KernelSet::get through registerKernelCompiler.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_JIT_H
#define KPOOL_RUNTIME_JIT_H

#include "kpool/Runtime/KernelSet.h"

namespace kpool {

/// JIT-compiles the kernels of `config` (CPU target) into `backend`.
Status compileJitKernels(const KernelConfig &config, KernelBackend &backend);

/// Registers compileJitKernels as the CPU target's KernelCompiler, so that
/// KernelSet::get JIT-compiles CPU configurations that have no precompiled
/// kernels. Idempotent and thread-safe.
void registerJitCompiler();

} // namespace kpool

#endif // KPOOL_RUNTIME_JIT_H
