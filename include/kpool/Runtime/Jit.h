//===- Jit.h - kernels compiled at run time ---------------------*- C++ -*-===//
//
// The JIT layer (KPoolRuntimeJit): compiles a configuration's kernels with
// the compiler kpool-aot uses (kpool/Kernels/KernelCompile.h) into an object
// that the runtime core loads (kpool/Runtime/KernelObject.h), for the CPU
// (this host's CPU and features) and for CUDA (the host code with PTX and a
// cubin embedded). The shared runtime library loads it by itself
// (libKPoolJit.so); a program that links KPoolRuntimeJit registers it with
// registerJitCompiler().
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_JIT_H
#define KPOOL_RUNTIME_JIT_H

#include "kpool/Runtime/KernelObject.h"
#include "kpool/Runtime/KernelSet.h"

namespace kpool {

/// Compiles the kernels of `config` into `object` (the JIT's object
/// compiler, for either target).
Status compileKernelObject(const KernelConfig &config,
                           const CompileOptions &options, KernelObject &object);

/// Compiles and loads the kernels of `config` into `backend`, bypassing the
/// kernel registry and the disk cache.
Status compileJitKernels(const KernelConfig &config, KernelBackend &backend);

/// Registers compileKernelObject as the object compiler of both targets, so
/// that KernelSet::get compiles configurations that have no registered
/// kernels (through the disk cache). Idempotent and thread-safe.
void registerJitCompiler();

} // namespace kpool

#endif // KPOOL_RUNTIME_JIT_H
