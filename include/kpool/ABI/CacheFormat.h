/*===- kpool/ABI/CacheFormat.h - the pool cache's formats ---------*- C -*-===*\
|*                                                                            *|
|* What the pool-cache kernels (`*_cache`, docs/pool-cache.md) store per     *|
|* pool: the one definition of the cache format for the kernel module, the   *|
|* runtime, the C API, the Python package (which reads the names and values  *|
|* from the library) and the tests' reference. The dialect's `rotate` and    *|
|* `scale` attributes (IR syntax) stay in ODS; lib/Dialect/KPool/IR ties     *|
|* their values to these with static_asserts. C-compatible, with the C++     *|
|* spellings (namespace kpool) defined from the same constants.              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_ABI_CACHEFORMAT_H
#define KPOOL_ABI_CACHEFORMAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What the pool-cache kernels store per pool.
typedef enum KPoolCacheEntry {
  KPOOL_CACHE_NONE = 0,    ///< no pool-cache kernels
  KPOOL_CACHE_ELEMENT = 1, ///< entries of the element type
  KPOOL_CACHE_FP8 = 2,     ///< e4m3fn codes (bytes) with one f32 scale each
} KPoolCacheEntry;
#define KPOOL_NUM_CACHE_ENTRIES 3

/// The rotation before a pool enters the cache.
typedef enum KPoolCacheRotate {
  KPOOL_ROTATE_NONE = 0,
  KPOOL_ROTATE_HADAMARD = 1, ///< head_dim must be a power of two
} KPoolCacheRotate;
#define KPOOL_NUM_CACHE_ROTATES 2

/// How an FP8 entry's scale is chosen.
typedef enum KPoolCacheScale {
  KPOOL_SCALE_ABSMAX = 0, ///< max |y| / 448 (floored at 1e-4 / 448)
  KPOOL_SCALE_POW2 = 1,   ///< the smallest power of two at or above that
} KPoolCacheScale;
#define KPOOL_NUM_CACHE_SCALES 2

/// A pool-cache format: the `to_cache` destination, `rotate` and `scale` of
/// the `*_cache` kernels' ops. Fields are int32_t holding the enums above
/// (a C caller may put any value there; the runtime rejects the others).
/// Zero-initialized: no pool cache.
typedef struct KPoolCacheFormat {
  int32_t entry;  ///< a KPoolCacheEntry
  int32_t rotate; ///< a KPoolCacheRotate
  int32_t scale;  ///< a KPoolCacheScale; only FP8 entries have a scale
} KPoolCacheFormat;

#ifdef __cplusplus
}

namespace kpool {

/// What the `*_cache` kernels store per pool (docs/pool-cache.md): no pool
/// cache (the kernel set has no such kernels), entries of the element type,
/// or FP8 (e4m3fn) codes with one f32 scale per entry. The underlying type
/// is fixed, so any 32-bit value a C caller passes is a value of the enum
/// (and rejected by validation).
enum class CacheEntry : int32_t {
  None = KPOOL_CACHE_NONE,
  Element = KPOOL_CACHE_ELEMENT,
  FP8 = KPOOL_CACHE_FP8,
};
/// The rotation before a pool enters the cache (hadamard: head_dim a power
/// of two).
enum class CacheRotate : int32_t {
  None = KPOOL_ROTATE_NONE,
  Hadamard = KPOOL_ROTATE_HADAMARD,
};
/// How an FP8 entry's scale is chosen.
enum class CacheScale : int32_t {
  Absmax = KPOOL_SCALE_ABSMAX,
  Pow2 = KPOOL_SCALE_POW2,
};

/// The names of the values, as the dialect's syntax, kpool-aot's options
/// and the Python package spell them ("none", "element", "fp8";
/// "none", "hadamard"; "absmax", "pow2"); null for a value that is not one.
constexpr const char *cacheEntryName(CacheEntry e) {
  switch (e) {
  case CacheEntry::None:
    return "none";
  case CacheEntry::Element:
    return "element";
  case CacheEntry::FP8:
    return "fp8";
  }
  return nullptr;
}
constexpr const char *cacheRotateName(CacheRotate r) {
  switch (r) {
  case CacheRotate::None:
    return "none";
  case CacheRotate::Hadamard:
    return "hadamard";
  }
  return nullptr;
}
constexpr const char *cacheScaleName(CacheScale s) {
  switch (s) {
  case CacheScale::Absmax:
    return "absmax";
  case CacheScale::Pow2:
    return "pow2";
  }
  return nullptr;
}

/// The pool-cache format of a kernel set's `*_cache` kernels (the
/// `to_cache` destination, `rotate` and `scale` of their ops); the C++
/// spelling of KPoolCacheFormat.
struct CacheFormat {
  CacheEntry entry = CacheEntry::None;
  CacheRotate rotate = CacheRotate::None;
  CacheScale scale = CacheScale::Absmax;

  constexpr CacheFormat() = default;
  constexpr CacheFormat(CacheEntry entry, CacheRotate rotate = CacheRotate::None,
                        CacheScale scale = CacheScale::Absmax)
      : entry(entry), rotate(rotate), scale(scale) {}
  /// The C struct's values as they are (validation rejects bad ones).
  constexpr CacheFormat(const KPoolCacheFormat &c)
      : entry(CacheEntry(c.entry)), rotate(CacheRotate(c.rotate)),
        scale(CacheScale(c.scale)) {}
  constexpr operator KPoolCacheFormat() const {
    return KPoolCacheFormat{int32_t(entry), int32_t(rotate), int32_t(scale)};
  }

  constexpr bool operator==(const CacheFormat &o) const {
    return entry == o.entry && rotate == o.rotate && scale == o.scale;
  }
  constexpr bool operator!=(const CacheFormat &o) const { return !(*this == o); }
};

} // namespace kpool

#endif // __cplusplus

#endif /* KPOOL_ABI_CACHEFORMAT_H */
