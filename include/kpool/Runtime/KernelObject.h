//===- KernelObject.h - compiled kernels as a relocatable object -*- C++
//-*-===//
//
// How kernels compiled at run time reach a KernelSet: a compiler (the JIT,
// KPoolRuntimeJit) turns a configuration into a relocatable object for this
// host -- CPU kernels, or for the CUDA target the host code that launches
// the GPU kernels with their PTX (and cubin) embedded -- and the runtime core
// loads it into the process with its own loader, no LLVM needed. Between
// the two sits the disk cache (kpool/Runtime/KernelCache.h): a process that
// finds a configuration's object there loads it without compiling, and
// without loading MLIR or LLVM at all.
//
// KernelSet::get looks for a configuration's kernels in this order:
//   1. kernels registered in the process (kpool-aot's registration
//      functions, kernel packs: kpool/Runtime/KernelPack.h; for the CUDA
//      target the packs installed next to the runtime library are loaded
//      the first time a configuration is missing);
//   2. a KernelCompiler registered for the target (registerKernelCompiler);
//   3. the disk cache;
//   4. the object compiler registered for the target (registerJitCompiler()
//      registers the JIT's), or else the JIT plugin, libKPoolJit.so, which
//      the runtime loads from next to itself ($KPOOL_JIT_LIBRARY overrides
//      the path) and which registers the JIT's object compilers;
//   5. an error that says how to get the configuration.
//
// Part of KPoolRuntimeCore (no MLIR, no LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELOBJECT_H
#define KPOOL_RUNTIME_KERNELOBJECT_H

#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kpool {

/// A configuration's kernels as a relocatable ELF object for this host.
struct KernelObject {
  /// The object file's bytes.
  std::string object;
  /// Each kernel the object has: its op name (abi::Kernel::name, e.g.
  /// "compress") and the symbol of its C interface entry point.
  std::vector<std::pair<std::string, std::string>> entries;
  /// What produced it, for listings (e.g. "kpool-lower-to-llvm, host
  /// znver4 +avx2,..."); not part of any check.
  std::string description;
};

/// What the runtime decides for a compilation, so that the disk cache's
/// key and the compiler agree on it.
struct CompileOptions {
  /// The CUDA target: the CUDA toolkit to take libdevice and ptxas from
  /// ("" for none: then exact exp cannot be compiled and no cubin is
  /// made). The runtime resolves it once ($CUDA_HOME, $CUDA_PATH,
  /// $CUDA_ROOT, /usr/local/cuda).
  std::string cudaToolkit;
};

/// Compiles the kernels of `config` into `object` (for the CUDA target the
/// host code, with the GPU code embedded; it calls the mgpu* functions of
/// libkpool_cuda_runtime).
using ObjectCompiler =
    std::function<Status(const KernelConfig &config,
                         const CompileOptions &options, KernelObject &object)>;

/// Makes `compiler` the object compiler of `target` (replacing an earlier
/// one; an empty function removes it). Thread-safe.
void registerObjectCompiler(Target target, ObjectCompiler compiler);

/// Loads `object` into the process and fills `backend` with its entry
/// points (for `config`'s target: device residency and prepare for CUDA,
/// whose host code needs libkpool_cuda_runtime, loaded here on first use).
/// The object stays loaded for the life of the process.
Status loadKernelObject(const KernelConfig &config, const KernelObject &object,
                        KernelBackend &backend);

/// The cache key text of `config` under `options`: everything that changes
/// the code (kpool's version and its compiler's sources, LLVM's version,
/// the configuration, the target, the options, this host's CPU). Exposed
/// for tools and tests.
std::string kernelCacheKey(const KernelConfig &config,
                           const CompileOptions &options);

/// The JIT plugin's interface (libKPoolJit.so exports
/// `kpoolJitPlugin`, returning this; see the list above). Both sides are
/// built from the same headers: a plugin of another build is refused by
/// its abiVersion and kpoolVersion.
struct JitPlugin {
  uint32_t abiVersion;
  const char *kpoolVersion;
  /// The compiler of each target.
  Status (*compile)(const KernelConfig &config, const CompileOptions &options,
                    KernelObject &object);
};
/// Changes whenever the plugin interface or the types it passes change.
inline constexpr uint32_t kJitPluginAbiVersion = 1;

} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELOBJECT_H
