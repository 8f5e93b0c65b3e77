//===- KernelObjects.h - where KernelSet::get finds kernels -----*- C++ -*-===//
//
// The steps of KernelSet::get after the kernels registered in the process
// (kpool/Runtime/KernelObject.h): kernel packs, the disk cache, the object
// compilers and the JIT plugin; and what the CUDA target's loaded code needs
// from libkpool_cuda_runtime, which the core opens on first use.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_CORE_KERNELOBJECTS_H
#define KPOOL_LIB_RUNTIME_CORE_KERNELOBJECTS_H

#include "kpool/Runtime/KernelObject.h"

#include <string>

namespace kpool::detail {

/// Kernels for `config` from the disk cache or an object compiler (the
/// registered one, else the JIT plugin). Returns false when no compiler is
/// available (`why` says what was tried); true otherwise, with `status`
/// the compilation's or loading's result.
bool compileKernels(const KernelConfig &config, KernelBackend &backend,
                    Status &status, std::string &why);

/// libkpool_cuda_runtime, opened once ($KPOOL_CUDA_RUNTIME, else by name:
/// LD_LIBRARY_PATH, then next to the runtime library); null and `why` when
/// it cannot be.
void *cudaRuntime(std::string *why = nullptr);

/// KernelBackend::prepare of CUDA kernels loaded by the runtime (the JIT's
/// objects, kernel packs): libkpool_cuda_runtime's kpoolCudaPrepare.
Status cudaPrepare(void *stream);

/// The folder of the file the runtime core is linked into (the shared
/// runtime library, or a program that links the core statically).
std::string runtimeDirectory();

/// Loads the kernel packs KernelSet::get loads by itself for `target`,
/// once per target: the files and folders of $KPOOL_KERNEL_PACKS (a
/// colon-separated list; set and empty: none), else the packs installed in
/// <runtime directory>/kpool-packs/<cpu|cuda> (and ../lib/kpool-packs/...
/// for a program in bin/). Returns what could not be loaded, for error
/// messages ("" when nothing failed).
std::string loadDefaultPacks(Target target);

/// A description of the packs loaded so far, for error messages: "packs
/// loaded: <path> (<its description>), ..." or "no kernel pack is loaded".
std::string loadedPacks();

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_CORE_KERNELOBJECTS_H
