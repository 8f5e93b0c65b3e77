//===- Registry.cpp - the registry and cache of kernel sets ---------------===//
//
// KernelSet::get: one kernel set per configuration for the life of the
// process, from precompiled kernels registered for it (kpool-aot's
// registration functions, kernel packs), else from the compiler registered
// for its target, else from the disk cache and the JIT (libKPoolJit.so,
// opened on demand; KernelObjects.h), else an error saying how to get it.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelSet.h"

#include "KernelObjects.h"

#include <map>
#include <mutex>
#include <tuple>

using namespace kpool;

namespace {

/// Configurations that compile to the same kernels share a key: the CPU
/// code options mean nothing for the CUDA target.
using Key = std::tuple<int, int64_t, int64_t, int, bool, int64_t, bool, int>;
Key keyOf(const KernelConfig &c) {
  bool cpu = c.target == Target::CPU;
  bool all = !c.poolOffsetsOnly;
  bool cache = all && c.cache.entry != CacheEntry::None;
  int format = cache ? 1 + static_cast<int>(c.cache.entry) * 4 +
                           static_cast<int>(c.cache.rotate) * 2 +
                           (c.cache.entry == CacheEntry::FP8
                                ? static_cast<int>(c.cache.scale)
                                : 0)
                     : 0;
  return Key{all ? c.elementType : 0,
             all ? c.headDim : 0,
             c.kpool,
             static_cast<int>(c.target),
             cpu && c.openmp,
             cpu && all ? c.vectorSize : 0,
             c.poolOffsetsOnly,
             format};
}

/// One configuration's slot in the cache. Its mutex is held while the
/// configuration compiles, so that only its own callers wait.
struct Entry {
  std::mutex mutex;
  std::shared_ptr<KernelSet> set;
};

// Kernel sets live for the whole process. These maps are never destroyed:
// tearing JIT engines down during static destruction races with LLVM's own
// globals.
std::mutex &registryMutex() {
  static auto *m = new std::mutex;
  return *m;
}
std::map<Key, KernelBackend> &precompiled() {
  static auto *m = new std::map<Key, KernelBackend>;
  return *m;
}
std::map<Key, std::shared_ptr<Entry>> &cache() {
  static auto *m = new std::map<Key, std::shared_ptr<Entry>>;
  return *m;
}
/// The backends of the sets compiled so far, for scanOf (guarded by the
/// registry lock, unlike the entries' sets).
std::map<Key, KernelBackend> &compiled() {
  static auto *m = new std::map<Key, KernelBackend>;
  return *m;
}
std::map<Target, KernelCompiler> &compilers() {
  static auto *m = new std::map<Target, KernelCompiler>;
  return *m;
}

const char *targetDisplayName(Target target) {
  return target == Target::CPU ? "CPU" : "CUDA";
}

/// Why `config` has no kernels, and how to get some: `packs` says what
/// failed to load among the packs the runtime looks for, `jit` why there
/// was no compiler (empty when the caller asked for precompiled kernels).
Status noKernels(const KernelConfig &config, bool compilerAllowed,
                 const std::string &packs, const std::string &jit) {
  std::string what = std::string("no kernels for ") +
                     elementTypeName(config.elementType) + ", head_dim " +
                     std::to_string(config.headDim) + ", kpool " +
                     std::to_string(config.kpool);
  if (config.poolOffsetsOnly)
    what = "no pool_offsets kernel for kpool " + std::to_string(config.kpool);
  bool cuda = config.target == Target::CUDA;
  what +=
      std::string(" on the ") + targetDisplayName(config.target) + " target";
  std::string spec = std::string(elementTypeName(config.elementType)) + ":" +
                     std::to_string(config.headDim) + ":" +
                     std::to_string(config.kpool);
  std::string why = ": none are registered (" + detail::loadedPacks() +
                    (packs.empty() ? "" : "; " + packs) + ")";
  if (compilerAllowed)
    why += ", and no compiler is available (" + jit + ")";
  std::string how =
      "; build a kernel pack with `kpool-aot --pack --target=" +
      std::string(cuda ? "cuda" : "cpu") + " --config=" + spec +
      " -o pack.o` (kpool_add_kernel_pack in CMake) and load it "
      "(kpoolLoadKernelPack, kpool.load_kernel_pack, "
      "kpool::loadKernelPack, or $KPOOL_KERNEL_PACKS), or register "
      "kpool-aot kernels (kpool_add_aot_kernels and their registration "
      "function)";
  how += compilerAllowed
             ? ", or install the JIT: libKPoolJit.so next to the runtime "
               "library, with LLVM/MLIR 22 (Debian: libmlir-22), or link "
               "KPoolRuntimeJit and call kpool::registerJitCompiler()"
             : ", or use KernelSet::get, which also JIT-compiles";
  return Status::error(what + why + how);
}

} // namespace

void kpool::registerKernelCompiler(Target target, KernelCompiler compiler) {
  std::lock_guard<std::mutex> lock(registryMutex());
  if (compiler)
    compilers()[target] = std::move(compiler);
  else
    compilers().erase(target);
}

void KernelSet::registerPrecompiled(const KernelConfig &config,
                                    KernelBackend backend) {
  std::lock_guard<std::mutex> lock(registryMutex());
  precompiled()[keyOf(config)] = std::move(backend);
}

namespace {

/// The pool_offsets kernel depends on nothing but kpool (and the target):
/// a pool-offsets-only configuration takes it from any set of that kpool
/// already compiled or registered, rather than compiling it again. Sets
/// `backend` to that scan alone. Call with the registry lock held.
bool scanOf(const KernelConfig &config, KernelBackend &backend) {
  auto take = [&](const KernelBackend &full) {
    if (!full.poolOffsets)
      return false;
    backend = KernelBackend();
    backend.poolOffsets = full.poolOffsets;
    backend.deviceResident = full.deviceResident;
    backend.prepare = full.prepare;
    backend.owner = full.owner;
    return true;
  };
  for (auto &[key, full] : precompiled())
    if (std::get<2>(key) == config.kpool &&
        std::get<3>(key) == int(config.target) && take(full))
      return true;
  for (auto &[key, done] : compiled())
    if (std::get<2>(key) == config.kpool &&
        std::get<3>(key) == int(config.target) && take(done))
      return true;
  return false;
}

/// The cached kernel set of `config`, or a new one from its precompiled
/// kernels, or else from its target's registered compiler (when
/// `useCompiler`). Thread-safe; sets `status` on failure and returns null.
std::shared_ptr<KernelSet> getOrCreate(const KernelConfig &config,
                                       Status &status, bool useCompiler) {
  status = validateConfig(config);
  if (!status.ok())
    return nullptr;
  Key key = keyOf(config);
  // The registry lock only guards the maps; the entry's own lock is held
  // while its configuration compiles.
  std::shared_ptr<Entry> entry;
  KernelBackend backend;
  KernelCompiler compile;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    std::shared_ptr<Entry> &slot = cache()[key];
    if (!slot)
      slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> entryLock(entry->mutex);
  if (entry->set)
    return entry->set;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    if (auto it = precompiled().find(key); it != precompiled().end()) {
      backend = it->second;
      found = true;
    } else if (config.poolOffsetsOnly &&
               (found = scanOf(config, backend))) {
      // The scan of a set already compiled or registered for this kpool.
    } else if (auto c = compilers().find(config.target);
               useCompiler && c != compilers().end()) {
      compile = c->second;
    }
  }
  bool compiledHere = false;
  if (!found && compile) {
    status = compile(config, backend);
    compiledHere = true;
  } else if (!found) {
    // Kernel packs next to the runtime, then the disk cache and the JIT.
    std::string packs = detail::loadDefaultPacks(config.target);
    {
      std::lock_guard<std::mutex> lock(registryMutex());
      if (auto it = precompiled().find(key); it != precompiled().end()) {
        backend = it->second;
        found = true;
      } else if (config.poolOffsetsOnly) {
        found = scanOf(config, backend);
      }
    }
    std::string jit;
    if (!found) {
      if (useCompiler && detail::compileKernels(config, backend, status, jit))
        compiledHere = true;
      else
        status = noKernels(config, useCompiler, packs, jit);
    }
  }
  if (!status.ok())
    return nullptr;
  if (compiledHere) {
    std::lock_guard<std::mutex> lock(registryMutex());
    compiled()[key] = backend;
  }
  entry->set = std::make_shared<KernelSet>(config, std::move(backend));
  return entry->set;
}

} // namespace

std::shared_ptr<KernelSet> KernelSet::get(const KernelConfig &config,
                                          Status &status) {
  return getOrCreate(config, status, /*useCompiler=*/true);
}

std::shared_ptr<KernelSet> KernelSet::getPrecompiled(const KernelConfig &config,
                                                     Status &status) {
  return getOrCreate(config, status, /*useCompiler=*/false);
}

