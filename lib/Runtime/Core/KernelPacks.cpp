//===- KernelPacks.cpp - kernels from kernel packs ------------------------===//
//
// Loads kernel packs (kpool/ABI/KernelPack.h) and registers their
// configurations; finds the packs installed next to the runtime.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelPacks.h"

#include "KernelObjects.h"

#include "kpool/ABI/KernelPack.h"
#include "kpool/Runtime/KernelSet.h"
#include "kpool/Version.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <vector>

using namespace kpool;
using namespace kpool::detail;

namespace {

std::mutex &packMutex() {
  static auto *m = new std::mutex;
  return *m;
}
/// Loaded packs: path -> description.
std::vector<std::pair<std::string, std::string>> &loaded() {
  static auto *v = new std::vector<std::pair<std::string, std::string>>;
  return *v;
}

std::string realPath(const std::string &path) {
  char *resolved = realpath(path.c_str(), nullptr);
  if (!resolved)
    return path;
  std::string out = resolved;
  std::free(resolved);
  return out;
}

/// The configuration a pack's table describes, or an error.
Status configOf(const KPoolPackConfig &c, KernelConfig &config) {
  if (c.elementType < KPOOL_BF16 || c.elementType > KPOOL_F32)
    return Status::error("element type " + std::to_string(c.elementType));
  if (c.target != 0 && c.target != 1)
    return Status::error("target " + std::to_string(c.target));
  if (c.cacheEntry < 0 || c.cacheEntry > 2 || c.cacheRotate < 0 ||
      c.cacheRotate > 1 || c.cacheScale < 0 || c.cacheScale > 1)
    return Status::error("cache format " + std::to_string(c.cacheEntry) + "/" +
                         std::to_string(c.cacheRotate) + "/" +
                         std::to_string(c.cacheScale));
  if (c.headDim < 1 || c.kpool < 1)
    return Status::error("head_dim " + std::to_string(c.headDim) + ", kpool " +
                         std::to_string(c.kpool));
  config = KernelConfig();
  config.elementType = static_cast<ElementType>(c.elementType);
  config.headDim = c.headDim;
  config.kpool = c.kpool;
  config.target = c.target ? Target::CUDA : Target::CPU;
  config.openmp = c.openmp != 0;
  config.vectorSize = c.vectorSize;
  config.poolOffsetsOnly = c.poolOffsetsOnly != 0;
  config.cache.entry = static_cast<CacheEntry>(c.cacheEntry);
  config.cache.rotate = static_cast<CacheRotate>(c.cacheRotate);
  config.cache.scale = static_cast<CacheScale>(c.cacheScale);
  return Status();
}

} // namespace

Status kpool::loadKernelPack(const std::string &path, int64_t *configurations) {
  if (configurations)
    *configurations = 0;
  std::string full = realPath(path);
  std::lock_guard<std::mutex> lock(packMutex());
  for (auto &[p, description] : loaded())
    if (p == full)
      return Status();
  auto fail = [&](const std::string &what) {
    return Status::error("kernel pack " + path + ": " + what);
  };
  // A pack of CUDA kernels needs libkpool_cuda_runtime; the one the runtime
  // opens (an emulation through LD_LIBRARY_PATH included) must be the one
  // the pack binds to, so open it first (a pack of CPU kernels needs none,
  // and no CUDA driver: a failure here is not the pack's).
  cudaRuntime();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *e = dlerror();
    return fail(std::string("cannot be loaded: ") + (e ? e : "dlopen failed"));
  }
  auto entry = reinterpret_cast<KPoolKernelPackEntryFn>(
      dlsym(handle, KPOOL_KERNEL_PACK_ENTRY));
  if (!entry) {
    dlclose(handle);
    return fail("not a kernel pack: it has no " KPOOL_KERNEL_PACK_ENTRY
                " entry point (a pack of another layout version, or not made "
                "by kpool-aot --pack)");
  }
  const KPoolKernelPack *pack = entry();
  if (!pack || pack->version != KPOOL_KERNEL_PACK_VERSION)
    return fail("its table has version " +
                std::to_string(pack ? pack->version : 0) + ", expected " +
                std::to_string(KPOOL_KERNEL_PACK_VERSION));
  if (pack->kernelAbiHash != kernelAbiHash())
    return fail(std::string("it was made by kpool ") +
                (pack->kpoolVersion ? pack->kpoolVersion : "?") +
                " for another kernel ABI than this runtime's "
                "(kpool " KPOOL_VERSION_STRING "): rebuild it with this "
                "kpool-aot");
  // Check every configuration before registering any.
  std::vector<std::pair<KernelConfig, KernelBackend>> sets;
  for (uint32_t i = 0; i < pack->numConfigs; ++i) {
    const KPoolPackConfig &c = pack->configs[i];
    KernelConfig config;
    Status s = configOf(c, config);
    if (!s.ok())
      return fail("configuration " + std::to_string(i) + " has a bad " +
                  s.message());
    if (config.target == Target::CUDA) {
      std::string why;
      if (!cudaRuntime(&why))
        return fail("it holds CUDA kernels, but " + why);
    }
    KernelBackend backend;
    for (int32_t e = 0; e < c.numEntries; ++e) {
      const KPoolPackEntry &entry = c.entries[e];
      bool known = false;
      for (const abi::Kernel &k : abi::kernels)
        if (entry.kernel && !std::strcmp(entry.kernel, k.name) &&
            entry.function) {
          backend.setEntry(k.id, entry.function);
          known = true;
        }
      if (!known)
        return fail("configuration " + std::to_string(i) +
                    " names an unknown kernel '" +
                    (entry.kernel ? entry.kernel : "") + "'");
    }
    if (config.target == Target::CUDA) {
      backend.deviceResident = true;
      backend.prepare = cudaPrepare;
    }
    sets.push_back({config, backend});
  }
  for (auto &[config, backend] : sets)
    KernelSet::registerPrecompiled(config, backend);
  loaded().push_back(
      {full, pack->description ? pack->description : std::string()});
  if (configurations)
    *configurations = int64_t(sets.size());
  return Status();
}

std::string detail::loadDefaultPacks(Target target) {
  static std::mutex mutex;
  static std::set<int> done;
  static std::string failures[2];
  std::lock_guard<std::mutex> lock(mutex);
  int t = target == Target::CUDA ? 1 : 0;
  if (done.count(t))
    return failures[t];
  done.insert(t);
  std::vector<std::string> places;
  if (const char *list = std::getenv("KPOOL_KERNEL_PACKS")) {
    // The same list serves both targets: load it once.
    if (done.count(1 - t))
      return failures[t];
    std::string s = list;
    for (size_t at = 0; at <= s.size();) {
      size_t colon = s.find(':', at);
      if (colon == std::string::npos)
        colon = s.size();
      if (colon > at)
        places.push_back(s.substr(at, colon - at));
      at = colon + 1;
    }
  } else {
    const char *sub = t ? "cuda" : "cpu";
    std::string dir = runtimeDirectory();
    places.push_back(dir + "/kpool-packs/" + sub);
    places.push_back(dir + "/../lib/kpool-packs/" + sub);
  }
  std::string &failure = failures[t];
  for (const std::string &place : places) {
    struct stat st;
    if (stat(place.c_str(), &st) != 0)
      continue;
    std::vector<std::string> files;
    if (S_ISDIR(st.st_mode)) {
      if (DIR *d = opendir(place.c_str())) {
        while (struct dirent *e = readdir(d)) {
          std::string name = e->d_name;
          if (name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0)
            files.push_back(place + "/" + name);
        }
        closedir(d);
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(place);
    }
    for (const std::string &file : files) {
      Status s = loadKernelPack(file);
      if (!s.ok())
        failure += (failure.empty() ? "" : "; ") + s.message();
    }
  }
  return failure;
}

std::string detail::loadedPacks() {
  std::lock_guard<std::mutex> lock(packMutex());
  if (loaded().empty())
    return "no kernel pack is loaded";
  std::string out = "kernel packs loaded:";
  for (auto &[path, description] : loaded())
    out += " " + path + " (" + description + ")";
  return out;
}
