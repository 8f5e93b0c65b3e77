/*===- kpool-c/Packs.h - kernel packs, the kernel cache -----------*- C -*-===*\
|*                                                                            *|
|* Where the runtime's kernels come from, beyond the JIT: kernel packs       *|
|* (shared libraries made by kpool-aot --pack, needing no MLIR), and the     *|
|* disk cache of kernels the JIT compiled (docs/embedding.md, "Where kernels *|
|* come from"). Part of libKPoolRuntime.so; errors as in kpool-c/Runtime.h.  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_PACKS_H
#define KPOOL_C_PACKS_H

#include "kpool-c/Runtime.h"
#include "kpool-c/Version.h" /* kpoolGetVersion */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Loads the kernel pack at `path` and registers its configurations, so
/// that kernel sets of those configurations (kpoolKernelSetCreate*) use its
/// kernels; `numConfigurations` (if not NULL) receives their number. Loading
/// a pack again does nothing. The packs installed next to the runtime
/// library load by themselves (the CUDA ones the first time a CUDA
/// configuration is not found); $KPOOL_KERNEL_PACKS, a colon-separated list
/// of files and folders, replaces them.
KPOOL_CAPI_EXPORTED KPoolError *kpoolLoadKernelPack(const char *path,
                                                    int64_t *numConfigurations);

/// The disk cache of compiled kernels: its folder ($KPOOL_CACHE_DIR, else
/// $XDG_CACHE_HOME/kpool, else ~/.cache/kpool), or NULL when caching is off
/// (KPOOL_CACHE_DIR set and empty, or KPOOL_DISABLE_CACHE=1). The string
/// is valid until the next call from the same thread.
KPOOL_CAPI_EXPORTED const char *kpoolKernelCacheGetDirectory(void);

/// One entry of the kernel cache (valid during the callback only).
typedef struct KPoolKernelCacheEntryInfo {
  const char *path;
  uint64_t bytes;
  /// e.g. "cpu bf16 d128 k4 vector 16 (kpool 0.1.0)"; "" when not valid.
  const char *summary;
  int32_t valid;       ///< 1 when whole (lengths and checksums match)
  const char *problem; ///< why not, when not valid; "" otherwise
} KPoolKernelCacheEntryInfo;

typedef void (*KPoolKernelCacheCallback)(const KPoolKernelCacheEntryInfo *entry,
                                         void *userData);

/// Calls `callback` for each entry in the cache folder.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelCacheList(KPoolKernelCacheCallback callback, void *userData);

/// Removes every entry; `removed` (if not NULL) receives their number.
KPOOL_CAPI_EXPORTED KPoolError *kpoolKernelCacheClear(int64_t *removed);

/// What this process met in the cache so far.
typedef struct KPoolKernelCacheStatistics {
  int64_t hits;     ///< configurations loaded from an entry
  int64_t misses;   ///< looked up, not found (or found damaged)
  int64_t compiled; ///< configurations compiled
  int64_t stored;   ///< entries written
  int64_t rejected; ///< entries found but damaged, foreign or not loadable
} KPoolKernelCacheStatistics;

/// Fills `statistics`; `lastProblem` (if not NULL) receives the last
/// rejected entry or failed write and why ("" for none; valid until the
/// next call from the same thread).
KPOOL_CAPI_EXPORTED void
kpoolKernelCacheGetStatistics(KPoolKernelCacheStatistics *statistics,
                              const char **lastProblem);

#ifdef __cplusplus
}
#endif

#endif /* KPOOL_C_PACKS_H */
