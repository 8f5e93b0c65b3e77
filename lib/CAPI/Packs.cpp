//===- Packs.cpp - C API: kernel packs, the kernel cache ------------------===//

#include "Handles.h"

#include "kpool-c/Packs.h"

#include "kpool/Runtime/KernelCache.h"
#include "kpool/Runtime/KernelObject.h"
#include "kpool/Runtime/KernelPacks.h"

#include <string>

using kpool::capi::makeError;
using kpool::capi::wrap;

KPoolError *kpoolLoadKernelPack(const char *path, int64_t *numConfigurations) {
  if (numConfigurations)
    *numConfigurations = 0;
  if (!path || !*path)
    return makeError("kernel pack: the path is null or empty");
  return wrap(kpool::loadKernelPack(path, numConfigurations));
}

const char *kpoolKernelCacheGetDirectory(void) {
  static thread_local std::string dir;
  dir = kpool::cache::directory();
  return dir.empty() ? nullptr : dir.c_str();
}

KPoolError *kpoolKernelCacheList(KPoolKernelCacheCallback callback,
                                 void *userData) {
  std::vector<kpool::cache::EntryInfo> entries;
  kpool::Status s = kpool::cache::list(entries);
  if (!s.ok())
    return wrap(s);
  if (!callback)
    return nullptr;
  for (const kpool::cache::EntryInfo &e : entries) {
    KPoolKernelCacheEntryInfo info{e.path.c_str(), e.bytes, e.summary.c_str(),
                                   e.valid ? 1 : 0, e.problem.c_str()};
    callback(&info, userData);
  }
  return nullptr;
}

KPoolError *kpoolKernelCacheClear(int64_t *removed) {
  return wrap(kpool::cache::clear(removed));
}

void kpoolKernelCacheGetStatistics(KPoolKernelCacheStatistics *statistics,
                                   const char **lastProblem) {
  kpool::cache::Statistics s = kpool::cache::statistics();
  if (statistics)
    *statistics = {s.hits, s.misses, s.compiled, s.stored, s.rejected};
  static thread_local std::string problem;
  problem = s.lastProblem;
  if (lastProblem)
    *lastProblem = problem.c_str();
}
