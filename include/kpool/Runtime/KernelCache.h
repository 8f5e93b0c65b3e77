//===- KernelCache.h - the disk cache of compiled kernels -------*- C++ -*-===//
//
// Kernels the JIT compiles are kept on disk, so that the next process gets
// them without compiling (docs/embedding.md, "The kernel cache"):
//
//   where    $KPOOL_CACHE_DIR, else $XDG_CACHE_HOME/kpool, else
//            ~/.cache/kpool. Off when KPOOL_CACHE_DIR is set and empty or
//            KPOOL_DISABLE_CACHE=1.
//   key      everything that changes the code (kernelCacheKey): kpool's
//            version and compiler sources, LLVM's version, the
//            configuration, target and options, the CUDA toolkit's files
//            (CUDA), this host's CPU model and features.
//   entries  one file per key, `<hash>.kpool`: a header with the key's and
//            the contents' lengths and checksums, the key, the contents.
//            Written to a temporary file and renamed into place (readers
//            never see a partial entry; concurrent writers each rename a
//            whole one). An entry whose length, checksum or key does not
//            match is ignored (compiled again and replaced), never loaded.
//            A cache folder that cannot be written only means no caching.
//
// Part of KPoolRuntimeCore (no MLIR, no LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELCACHE_H
#define KPOOL_RUNTIME_KERNELCACHE_H

#include "kpool/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kpool::cache {

/// The cache folder, or "" when caching is off (then `why`, if given, says
/// which setting turned it off).
std::string directory(std::string *why = nullptr);

/// One entry of the cache folder.
struct EntryInfo {
  /// The file's path.
  std::string path;
  uint64_t bytes = 0;
  /// The key's first line summary, e.g. "cpu bf16 d128 k4 (kpool 0.1.0)".
  std::string summary;
  /// Whether the entry is whole (its lengths and checksums match).
  bool valid = false;
  /// Why not, when it is not.
  std::string problem;
};

/// The entries in the cache folder (none when caching is off).
Status list(std::vector<EntryInfo> &entries);

/// Removes every entry (and any temporary file a killed writer left);
/// `removed` receives their number.
Status clear(int64_t *removed = nullptr);

/// What this process's kernel sets met in the cache so far.
struct Statistics {
  /// Configurations loaded from an entry (no compilation).
  int64_t hits = 0;
  /// Configurations looked up and not found (or found damaged).
  int64_t misses = 0;
  /// Configurations compiled (a miss, or caching off).
  int64_t compiled = 0;
  /// Entries written.
  int64_t stored = 0;
  /// Entries found but not used: damaged, made for another key, or not
  /// loadable (each was compiled again and replaced).
  int64_t rejected = 0;
  /// The last entry rejected, or the last write that failed, and why.
  std::string lastProblem;
};
Statistics statistics();

} // namespace kpool::cache

#endif // KPOOL_RUNTIME_KERNELCACHE_H
