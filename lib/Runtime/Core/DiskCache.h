//===- DiskCache.h - entries of the kernel cache ----------------*- C++ -*-===//
//
// Reading and writing the entries described in kpool/Runtime/KernelCache.h.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_CORE_DISKCACHE_H
#define KPOOL_LIB_RUNTIME_CORE_DISKCACHE_H

#include <cstdint>
#include <string>

namespace kpool::cache::detail {

/// The contents of the entry of `key` in folder `dir`; false when there is
/// none or it is not whole (`problem` then says why, for a damaged one).
bool read(const std::string &dir, const std::string &key, std::string &contents,
          std::string *problem = nullptr);

/// Stores `contents` under `key` in `dir` (created if missing): written to
/// a temporary file, then renamed into place. False (and `problem`) when
/// the folder cannot be written; the caller goes on without the cache.
bool write(const std::string &dir, const std::string &key,
           const std::string &contents, std::string *problem = nullptr);

/// The entry file of `key` in `dir`.
std::string entryPath(const std::string &dir, const std::string &key);

/// FNV-1a, 64 bits: the entries' checksums and file names.
uint64_t hash64(const void *data, size_t size, uint64_t seed = 0);

/// This host's CPU: vendor, model and feature words as the CPU reports them
/// (cpuid and the enabled register state on x86-64), e.g. "x86-64
/// AuthenticAMD 00a10f11 ...": what the JIT's code generation depends on.
std::string hostCpu();

} // namespace kpool::cache::detail

#endif // KPOOL_LIB_RUNTIME_CORE_DISKCACHE_H
