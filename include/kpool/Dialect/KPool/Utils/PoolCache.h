//===- PoolCache.h - one pool's pool-cache entry, on any backend -*- C++ -*-===//
//
// The one implementation of the pool-cache formulas (docs/semantics.md, "The
// pool cache"): the staged Walsh-Hadamard rotation with its scaling and
// rounding, the absmax reduction, the absmax/pow2 scale and the exact FP8
// (e4m3fn) encoding. The CPU (kpool-lower-cache-entries, one lane holding
// the whole entry) and the GPU (kpool-map-to-gpu, the entry spread over the
// lanes of a row group, butterflies and the reduction by warp shuffles)
// both emit `kpool.cache_entry` through buildCacheEntry, so their codes and
// scales cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_UTILS_POOLCACHE_H
#define KPOOL_DIALECT_KPOOL_UTILS_POOLCACHE_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;

namespace kpool {
class CacheEntryOp;

/// How the channels of one entry are spread over the lanes computing it:
/// lane `l` of `lanes` (a power of two dividing the entry's length) holds
/// channels `i * lanes + l`. With one lane nothing is exchanged.
struct CacheEntryLanes {
  int64_t lanes = 1;
  /// The lane (index), when `lanes > 1`.
  Value lane;
  /// `shuffleXor(b, loc, v, m)`: the f32 `v` of lane `lane ^ m` (m < lanes),
  /// when `lanes > 1`.
  function_ref<Value(OpBuilder &, Location, Value, int64_t)> shuffleXor;
  /// Optional hardware FP8 conversion of two clamped f32 values to their
  /// e4m3fn codes (i8 each, round to nearest even); null: the exact
  /// software conversion.
  function_ref<std::pair<Value, Value>(OpBuilder &, Location, Value, Value)>
      toE4M3FNPair;
};

/// Replaces `op` by the code of its entry for the channels this lane holds
/// (at the builder's insertion point, which must be `op`'s). The scale is
/// stored by lane 0.
void buildCacheEntry(OpBuilder &b, CacheEntryOp op,
                     const CacheEntryLanes &lanes);

/// e4m3fn codes (i8, or a vector of i8) of f32 values already clamped to
/// [-448, 448], rounded to nearest even, the sign kept (so -0 and negatives
/// that round to zero give 0x80): exact integer arithmetic on the bits.
Value buildE4M3FNEncode(OpBuilder &b, Location loc, Value clamped);

/// The CPU lowering of `kpool.cache_entry` (one lane).
void populateCacheEntryLoweringPatterns(RewritePatternSet &patterns);

} // namespace kpool
} // namespace mlir

#endif // KPOOL_DIALECT_KPOOL_UTILS_POOLCACHE_H
