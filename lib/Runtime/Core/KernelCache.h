//===- KernelCache.h - the process-wide kernel set cache --------*- C++ -*-===//

#ifndef KPOOL_LIB_RUNTIME_KERNELCACHE_H
#define KPOOL_LIB_RUNTIME_KERNELCACHE_H

#include "kpool/Runtime/Runtime.h"

#include <functional>

namespace kpool::detail {

/// Returns the cached kernel set of `config`, or creates it from the
/// precompiled kernels registered for it, or else from `compile` (when
/// given). Thread-safe; sets `status` on failure and returns null.
std::shared_ptr<KernelSet>
getOrCreate(const KernelConfig &config, Status &status,
            const std::function<Status(KernelBackend &)> &compile);

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_KERNELCACHE_H
