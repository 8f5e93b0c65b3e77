//===- CacheStore.h - emitting pool-cache stores ----------------*- C++ -*-===//
//
// The pool-cache half of a lowering (docs/pool-cache.md): after each pooled
// row, the placement guards of the contract and one `kpool.cache_entry`
// that kpool-lower-cache-entries (CPU) or the GPU mapping turns into code.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOLINALG_CACHESTORE_H
#define KPOOL_LIB_CONVERSION_KPOOLTOLINALG_CACHESTORE_H

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/IR/Value.h"

namespace mlir::kpool::lowering {

class Emitter;
class ExtentChecks;

/// An op's pool-cache destination (`table` null when it has none).
struct CacheDest {
  Value table, keys, scales;
  Rotate rotate = Rotate::none;
  Scale scale = Scale::absmax;
};

/// The pool-cache destination of `op` (an op with `to_cache`), read from
/// the operands of `adaptor`.
template <typename OpTy, typename Adaptor>
CacheDest cacheDestOf(OpTy op, Adaptor adaptor) {
  CacheDest dest;
  if (!adaptor.getBlockTable())
    return dest;
  dest.table = adaptor.getBlockTable();
  dest.keys = adaptor.getCacheKeys();
  dest.scales = adaptor.getCacheScales();
  dest.rotate = op.getRotate().value_or(Rotate::none);
  dest.scale = op.getScale().value_or(Scale::absmax);
  return dest;
}

/// Stores pools into the pool cache of the op an Emitter lowers. With no
/// cache, every method emits nothing (and `present()` is false).
class CacheStore {
public:
  /// Reads `dest.table` as signless metadata.
  CacheStore(Emitter &e, const CacheDest &dest);

  bool present() const { return bool(dest.table); }
  /// The cache's keys (the version versionWithKeys is emitting).
  Value keys() const { return dest.keys; }

  /// Adds the cache's extent checks to `checks`: its rows are head_dim
  /// long (the page count and page size may be anything; the placement
  /// guards bound each entry).
  void addExtentChecks(ExtentChecks &checks);

  /// Runs `fn` with the cache's keys replaced by `keys` (a cast of them).
  void withKeys(Value keys, function_ref<void()> fn);
  /// Runs `fn` with the cache's keys refined by `checks`
  /// (ExtentChecks::refined), or directly when there is no cache.
  void withRefinedKeys(ExtentChecks &checks, function_ref<void()> fn);

  /// Stores pool `poolId` (i64) of batch row `bIdx` (index), whose dense
  /// value is the row view `value`, into its pool-cache entry when the op
  /// has a cache and the entry exists: the batch row is below the table's
  /// rows, the page index `poolId / page_size` below its width, and the
  /// page below the cache's pages (and the scales'; the row below their
  /// page size). An i32 -1 in the table reads as a huge unsigned page.
  void storeEntry(Value bIdx, Value poolId, Value value);

private:
  Emitter &e;
  CacheDest dest;
};

} // namespace mlir::kpool::lowering

#endif // KPOOL_LIB_CONVERSION_KPOOLTOLINALG_CACHESTORE_H
