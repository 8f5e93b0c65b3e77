//===- Metadata.h - kpool metadata arithmetic -------------------*- C++ -*-===//
//
// The one implementation, as IR builders, of the per-request metadata
// arithmetic of docs/semantics.md: where a request's rows are, which pools
// it completes, what the ring holds. All position arithmetic is i64; the
// 32-bit metadata is read as unsigned. Every value here is guarded so that no
// metadata makes a kernel index outside its operands.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_UTILS_METADATA_H
#define KPOOL_DIALECT_KPOOL_UTILS_METADATA_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::kpool {

/// Emits helpers at the insertion point of `b`. Positions are i64 values.
class MetadataBuilder {
public:
  MetadataBuilder(OpBuilder &b, Location loc, int64_t kpool)
      : b(b), loc(loc), kpool(kpool) {}

  /// i64 and index constants.
  Value i64(int64_t v);
  Value idx(int64_t v);
  Value toIndex(Value i64Value);
  Value toI64(Value indexValue);

  /// Loads element `i` (index) of a 1-D memref of i32/ui32 as an unsigned i64.
  Value loadU32(Value memref, Value i);

  /// Returns `memref` unchanged if its element type is signless, else a
  /// view of the same buffer with the signless integer element type.
  Value signless(Value memref);

  /// Number of requests the metadata describes safely: the minimum of the
  /// given extents (index values), never negative.
  Value minIndex(ValueRange values);

  /// The rows `[start, start + count)` of request `b` in `k`/`gate`, and its
  /// cached length. A request whose offsets are reversed or reach past
  /// `numRows` (i64) brings no tokens (count 0).
  struct Request {
    Value start;  ///< s_b, i64
    Value count;  ///< n_b, i64 (0 when the offsets are bad)
    Value cached; ///< c_b, i64
  };
  Request loadRequest(Value inputRowOffsets, Value cacheLengths, Value b,
                      Value numRows);

  /// The pools made only of a request's own tokens (see `compress`).
  struct PoolRange {
    Value first; ///< ceil(c / K)
    Value count; ///< max(0, floor((c + n) / K) - first)
    Value skip;  ///< first * K - c
  };
  PoolRange poolRange(const Request &r);

  /// What `ring_close` needs: `held = c mod K`, whether the pool completes
  /// in this call (`held > 0 && n >= K - held`), and its id `c / K`.
  struct PendingPool {
    Value held;
    Value closes; ///< i1
    Value id;
  };
  PendingPool pendingPool(const Request &r);

  /// The positions `[begin, end)` that `seed_tail` stores in a ring of
  /// `window` rows (i64, `R >= K`): the request's last `R` positions that
  /// this call owns, `[max(c, c+n-R), c+n)`.
  std::pair<Value, Value> ringTail(const Request &r, Value window);

  /// The ring row (i64) of absolute position `position` in a ring of
  /// `window` rows: `position mod R`.
  Value ringRow(Value position, Value window);

  /// The ring row `offset` (i64, `0 <= offset < R`) positions after ring row
  /// `row`: `row + offset`, less `R` when that wraps. A conditional
  /// subtraction, so that a loop over positions pays one remainder in all.
  Value ringRowAfter(Value row, Value offset, Value window);

  /// The ring rows of the `kpool` members of pool `id` (i64) in a ring of
  /// `window` rows: `(id*K + m) mod R`. One division per pool (members
  /// follow with a conditional subtraction, as `m < K <= R`); constants `m`
  /// when the window is statically `K`.
  SmallVector<Value> memberRingRows(Value id, Value window);

  /// Clamps the i32 `num_requests` to `[0, batch]` (batch an index value).
  Value clampNumRequests(Value numRequests, Value batch);

  /// Index of the last `b` in `[0, batch)` with `offsets[b] <= row` (i64),
  /// by binary search; -1 (i64) when there is none. `offsets` is a 1-D
  /// signless i32 memref read as unsigned.
  Value findOwner(Value offsets, Value batch, Value row);

  /// Whether request `bIdx` (index) claims pooled row `row` (i64): `row` is
  /// `pro[b] + j` with `j < min(count_b, pro[b+1] - pro[b])` (the contract's
  /// claiming rule; the caller bounds `row` by the output's rows). `numRows`
  /// is k's row count, as for loadRequest.
  Value claimsRow(Value pro, Value iro, Value cache, Value bIdx, Value row,
                  Value numRows);

  /// The request in `[0, batch)` that claims pooled row `row`, or -1 (i64).
  /// The binary search of findOwner finds it whenever `pro` is monotone;
  /// when its candidate does not claim the row (bad metadata somewhere, or
  /// a row past every request's range), a scan over all requests takes the
  /// first that claims it. So each request's guards hold whatever the other
  /// requests' offsets are, and valid metadata pays one check per row.
  Value findClaimant(Value pro, Value iro, Value cache, Value batch, Value row,
                     Value numRows);

private:
  OpBuilder &b;
  Location loc;
  int64_t kpool;
};

} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_UTILS_METADATA_H
