//===- Lowerings.h - the lowerings of the kpool ops -------------*- C++ -*-===//
//
// Each op's lowering as free functions over an Emitter, the op's own
// (CompressLowering.cpp, RingLowering.cpp, PoolOffsetsLowering.cpp) and the
// per-row and per-request parts that the fused kpool.step reuses
// (StepLowering.cpp), so that the step's results are the four ops' bit for
// bit. The conversion patterns (Patterns.cpp) read the operands from the op
// and call these. Metadata operands are signless (MetadataBuilder::signless).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOLINALG_LOWERINGS_H
#define KPOOL_LIB_CONVERSION_KPOOLTOLINALG_LOWERINGS_H

#include "Emitter.h"
#include "ExtentChecks.h"

namespace mlir::kpool::lowering {

//===----------------------------------------------------------------------===//
// compress
//===----------------------------------------------------------------------===//

/// The operands of compress (or of kpool.step's compress part).
struct CompressOperands {
  Value k, gate, ape, pooled, iro, pro, cache;
};

/// Adds compress's extent checks, in host validation's order: the rows'
/// head_dim, gate's rows, ape's [kpool, head_dim], the offsets' lengths
/// (one more than cache_lengths), then the cache's. `pooled` is named
/// `pooledName`.
void addCompressChecks(ExtentChecks &checks, Emitter &e,
                       const CompressOperands &o,
                       const char *pooledName = "pooled");

/// `o` with the operands that `checks` refines (ExtentChecks::refined).
CompressOperands refined(ExtentChecks &checks, const CompressOperands &o);

/// compress: the loop over the rows of `pooled`, on each stride version,
/// `tile` rows per iteration (see lowerCompressTile), under the extent
/// checks.
void lowerCompress(Emitter &e, const CompressOperands &o, int64_t tile);

/// Rows `[t * tile, min((t + 1) * tile, rows))` of `pooled` (`rows` an
/// index) in order: a row inside the rows its predecessor's request claims
/// is that request's next pool; any other row searches for its claimant
/// (findClaimant). With valid metadata a tile searches once per request it
/// meets, and once per row no request claims (compress's rows past pro[B]
/// of a larger output: bad metadata may still claim them, so they cannot be
/// skipped; kpool.step bounds its tiles by the total it scanned). A row
/// several requests claim gets one of their pools, as the contract allows.
/// `numRows` (i64) are the rows of `k`, `batch` (index) the requests.
void lowerCompressTile(Emitter &e, const CompressOperands &o, Value numRows,
                       Value batch, Value rows, Value t, int64_t tile);

/// Row `row` (i64) of `pooled` for request `bIdx` (index), whose output
/// range is `[lo, hi)` (i64): pool `j = row - lo` of the request when the
/// row is in the range and the request has that pool.
void lowerCompressRow(Emitter &e, const CompressOperands &o, Value numRows,
                      Value bIdx, Value row, Value lo, Value hi);

//===----------------------------------------------------------------------===//
// ring_close and seed_tail
//===----------------------------------------------------------------------===//

/// The operands of ring_close (or of kpool.step's ring_close and seed_tail
/// parts, whose rows are `closed`).
struct RingOperands {
  Value tail, k, gate, ape, pooled, closed, iro, cache, slots;

  /// The views the lowering versions on their innermost stride.
  SmallVector<Value> views() const { return {tail, k, gate, ape, pooled}; }
  /// These operands with `views()` replaced by `v` (in that order).
  RingOperands withViews(ArrayRef<Value> v) const {
    RingOperands o = *this;
    o.tail = v[0];
    o.k = v[1];
    o.gate = v[2];
    o.ape = v[3];
    o.pooled = v[4];
    return o;
  }
};

/// What ring_close and seed_tail derive from their operands before the
/// loop over requests.
struct RingBatch {
  Value numRows;     ///< rows of `k` and `gate` (i64)
  Value numRequests; ///< `num_requests` clamped to the batch (index)
  Value requested;   ///< `num_requests` as the op has it (i32)
  Value batch;       ///< the batch the metadata supports (index)
  Value numSlots;    ///< slots of the ring (i64)
  Value window;      ///< the ring window R (i64)
};

RingBatch ringBatch(Emitter &e, const RingOperands &o, Value numRequests);

/// Records the findings of ring request `bIdx` (index): its rows and its
/// slot when it is below the clamped `num_requests`, and (iteration 0)
/// num_requests itself.
void recordRingRequest(Emitter &e, const RingBatch &batch, Value bIdx,
                       const RingOperands &o);

/// Adds seed_tail's extent checks (what ring_close and the step share),
/// in host validation's order: tail's [?, 2, >= kpool, head_dim], the rows'
/// head_dim, gate's rows, input_row_offsets' and slot_idx's lengths.
void addRingChecks(ExtentChecks &checks, Emitter &e, const RingOperands &o);

/// Adds the checks of ring_close's own operands: ape's [kpool, head_dim],
/// then its outputs' [batch, head_dim] (named `rowsName`) and [batch].
void addRingCloseOutputChecks(ExtentChecks &checks, Emitter &e,
                              const RingOperands &o, const char *rowsName);

/// `o` with the operands that `checks` refines (ExtentChecks::refined).
RingOperands refined(ExtentChecks &checks, const RingOperands &o);

/// ring_close: the loop over batch rows on each stride version; when the
/// extents contradict the op, a loop that writes only what the contract
/// defines for every row.
void lowerRingClose(Emitter &e, const RingOperands &o, Value numRequests);

/// Batch row `bIdx` (index, below the larger of the row counts `rowsP` of
/// `pooled` and `rowsC` of `closed_pool`): its `closed_pool` entry and its
/// `pooled` row, each where it exists.
void lowerRingCloseRow(Emitter &e, const RingOperands &o,
                       const RingBatch &batch, Value bIdx, Value rowsP,
                       Value rowsC);

/// What ring_close writes when its extents contradict it (-1 and a zero
/// row for every batch row, so that a tensor.empty destination is never
/// left undefined), over `rows` (index) batch rows: kpool.step writes the
/// same for its ring_close part.
struct RingCloseNothing {
  RingCloseNothing(Emitter &e, const RingOperands &o);
  /// Batch row `bIdx`: -1 and a zero row, each where it exists.
  void row(Value bIdx);
  Emitter &e;
  const RingOperands &o;
  Value rowsP, rowsC, cols, rows;
};

/// seed_tail (its operands are `tail`, `k`, `gate`, `iro`, `cache` and
/// `slots` of `o`): the loop over requests on each stride version.
void lowerSeedTail(Emitter &e, const RingOperands &o, Value numRequests);

/// Request `bIdx` (index, below the clamped `num_requests`): its trailing
/// positions into its ring slot when the slot exists.
void lowerSeedTailRequest(Emitter &e, const RingOperands &o,
                          const RingBatch &batch, Value bIdx);

//===----------------------------------------------------------------------===//
// pool_offsets
//===----------------------------------------------------------------------===//

/// pool_offsets: the scan, in a one-iteration parallel loop so that GPU
/// mappings run it on the device next to its operands. When an extent
/// contradicts the op, every entry gets 0 (zeroOffset).
void lowerPoolOffsets(Emitter &e, Value iro, Value cache, Value out);

/// The scan itself: entries `[0, batch]` of `out` (`length` entries) get
/// the prefix sums of the pool counts, the rest the total.
void lowerPoolOffsetsScan(Emitter &e, Value iro, Value cache, Value out,
                          Value batch, Value length);

/// What pool_offsets (and the step) write to entry `i` (index) of `out`
/// (`length` entries) when an extent contradicts the op: 0, the offsets of
/// a call that completes no pool.
void zeroOffset(Emitter &e, Value out, Value length, Value i);

//===----------------------------------------------------------------------===//
// step
//===----------------------------------------------------------------------===//

/// The operands of kpool.step: ring_close's (its rows are `closed`), the
/// offsets it writes and its `pooled`.
struct StepOperands {
  RingOperands ring;
  Value pro, pooled;
};

/// kpool.step: the four ops of a serving step in one parallel loop. With
/// `scan` the offsets are scanned before the loop and the pooled rows run
/// `tile` to an iteration; otherwise every item walks the pool counts.
void lowerStep(Emitter &e, const StepOperands &o, Value numRequests,
               bool scan, int64_t tile);

} // namespace mlir::kpool::lowering

#endif // KPOOL_LIB_CONVERSION_KPOOLTOLINALG_LOWERINGS_H
