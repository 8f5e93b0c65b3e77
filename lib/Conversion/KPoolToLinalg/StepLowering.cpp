//===- StepLowering.cpp - lowering kpool.step -----------------------------===//
//
// kpool.step: the four ops of a serving step in one parallel loop (see the
// op's description for the ordering design). Iterations `[0, W)` are batch
// rows, `W` the longest of ring_close's outputs and `pool_row_offsets`:
// ring_close's row, then seed_tail of the same request, then the offsets
// entry. Iterations `[W, W + P)` are the rows of `pooled`. Each part keeps
// its op's guards and is built by its op's lowering functions
// (Lowerings.h), so the results are the four ops' bit for bit. The extent
// checks of the four ops guard the whole step.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include <optional>

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;
using ::kpool::status::Finding;

/// compress's operands within the step.
static CompressOperands compressPart(const RingOperands &o, Value pro,
                                     Value pooled) {
  return {o.k, o.gate, o.ape, pooled, o.iro, pro, o.cache};
}

/// Records the findings of the compress part for request `bIdx` (index,
/// below `offsetsBatch` for there to be one) whose pools start at row
/// `start` (i64): its rows against `numRows`, and its pools against the
/// capacity of `pooled`. Call it under the status guard.
static void recordPooledRequest(Emitter &e, const RingOperands &o,
                                Value pooled, Value offsetsBatch,
                                Value numRows, Value bIdx, Value start) {
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, offsetsBatch), [&] {
    SmallVector<StatusRecorder::Check> checks =
        e.status.rowChecks(o.iro, bIdx, numRows);
    Value noRowLimit = e.noRowLimit();
    auto range = e.poolRange(e.loadRequest(o.iro, o.cache, bIdx, noRowLimit));
    Value end = arith::AddIOp::create(e.b, e.loc, start, range.count);
    checks.push_back({e.cmp(arith::CmpIPredicate::ugt, end,
                            e.toI64(e.dim(pooled, 0))),
                      Finding::PooledCapacity});
    e.status.record(bIdx, checks);
  });
}

/// The pools of requests `[0, end)` (index) as pool_offsets counts them
/// (i64, not wrapped).
static Value poolsBefore(Emitter &e, Value iro, Value cache, Value end) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value noRowLimit = e.noRowLimit();
  auto loop = scf::ForOp::create(b, loc, e.idx(0), end, e.idx(1),
                                 ValueRange{e.i64(0)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  auto range = e.poolRange(
      e.loadRequest(iro, cache, loop.getInductionVar(), noRowLimit));
  scf::YieldOp::create(
      b, loc,
      ValueRange{arith::AddIOp::create(b, loc, loop.getRegionIterArg(0),
                                       range.count)});
  return loop.getResult(0);
}

/// Row `row` (i64) of `pooled`: the request whose range of the prefix sums
/// holds it, found by walking the pool counts of requests below `batch`
/// (index), then compress's row.
static void lowerPooledRow(Emitter &e, const CompressOperands &o, Value batch,
                           Value numRows, Value row) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value noRowLimit = e.noRowLimit();
  Type i64 = b.getI64Type(), index = b.getIndexType();
  // while (b < batch && acc + count_b <= row) { acc += count_b; ++b; }
  auto walk = scf::WhileOp::create(
      b, loc, TypeRange{index, i64}, ValueRange{e.idx(0), e.i64(0)},
      [&](OpBuilder &, Location, ValueRange args) {
        Value bIdx = args[0], acc = args[1];
        Value inBatch = e.cmp(arith::CmpIPredicate::ult, bIdx, batch);
        // The count is read only for a request in the batch.
        auto next = scf::IfOp::create(
            b, loc, inBatch,
            [&](OpBuilder &, Location) {
              auto range = e.poolRange(
                  e.loadRequest(o.iro, o.cache, bIdx, noRowLimit));
              Value hi = arith::AddIOp::create(b, loc, acc, range.count);
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{e.cmp(arith::CmpIPredicate::ule, hi, row), hi});
            },
            [&](OpBuilder &, Location) {
              Value no = e.i1(false);
              scf::YieldOp::create(b, loc, ValueRange{no, acc});
            });
        // Going on: the next request starts at this one's end; done: the
        // results are the owner and its first row.
        Value go = next.getResult(0);
        Value carried =
            arith::SelectOp::create(b, loc, go, next.getResult(1), acc);
        scf::ConditionOp::create(b, loc, go, ValueRange{bIdx, carried});
      },
      [&](OpBuilder &, Location, ValueRange args) {
        Value bNext = arith::AddIOp::create(b, loc, args[0], e.idx(1));
        scf::YieldOp::create(b, loc, ValueRange{bNext, args[1]});
      });
  Value owner = walk.getResult(0), lo = walk.getResult(1);
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, owner, batch), [&] {
    auto range = e.poolRange(e.loadRequest(o.iro, o.cache, owner, noRowLimit));
    Value hi = arith::AddIOp::create(b, loc, lo, range.count);
    lowerCompressRow(e, o, numRows, owner, row, lo, hi);
  });
}

/// The batch row `i` (index) of the step: ring_close's row, seed_tail's
/// request, and the offsets entry (walked, or checked after the scan).
static void lowerBatchItem(Emitter &e, const RingOperands &o, Value pro,
                           Value pooled, const RingBatch &batch, bool scan,
                           Value i, Value closeRows, Value rowsP, Value rowsC,
                           Value offsets, Value offsetsBatch) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  // ring_close reads the request's ring rows before seed_tail of the same
  // request overwrites them: same iteration, same channel-to-thread
  // mapping, in this order.
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, closeRows),
           [&] { lowerRingCloseRow(e, o, batch, i, rowsP, rowsC); });
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, batch.numRequests),
           [&] { lowerSeedTailRequest(e, o, batch, i); });
  recordRingRequest(e, batch, i, o);
  if (!scan)
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, offsets), [&] {
      Value end = e.minIndex({i, offsetsBatch});
      Value acc = poolsBefore(e, o.iro, o.cache, end);
      Value v = arith::TruncIOp::create(b, loc, b.getI32Type(), acc);
      memref::StoreOp::create(b, loc, v, pro, ValueRange{i});
      e.status.guard([&] {
        recordPooledRequest(e, o, pooled, offsetsBatch, batch.numRows, i, acc);
      });
    });
  if (scan)
    e.status.guard([&] {
      e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, offsets), [&] {
        recordPooledRequest(e, o, pooled, offsetsBatch, batch.numRows, i,
                            e.loadU32(pro, i));
      });
    });
}

/// The pooled row (or tile of rows) `r` (index) of the step: compress's,
/// over the offsets walked or scanned (`total` their last entry).
static void lowerPooledItem(Emitter &e, const CompressOperands &c,
                            Value compressBatch, Value numRows, Value total,
                            bool scan, int64_t tile, Value r) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  if (!scan)
    return lowerPooledRow(e, c, compressBatch, numRows, e.toI64(r));
  // compress's row, over the offsets the scan wrote.
  if (tile > 1) {
    // Rows at or past the total are claimed by no request.
    Value bound = e.toIndex(arith::MinUIOp::create(
        b, loc, total, e.toI64(e.dim(c.pooled, 0))));
    return lowerCompressTile(e, c, numRows, compressBatch, bound, r, tile);
  }
  Value row = e.toI64(r);
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, row, total), [&] {
    Value owner =
        e.findClaimant(c.pro, c.iro, c.cache, compressBatch, row, numRows);
    e.ifThen(e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)), [&] {
      Value bIdx = e.toIndex(owner);
      Value next = arith::AddIOp::create(b, loc, bIdx, e.idx(1));
      lowerCompressRow(e, c, numRows, bIdx, row, e.loadU32(c.pro, bIdx),
                       e.loadU32(c.pro, next));
    });
  });
}

/// The step's loop on one stride version.
static void lowerItems(Emitter &e, const RingOperands &o, Value pro,
                       Value pooled, Value numRequests, bool scan,
                       int64_t tile) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  RingBatch batch = ringBatch(e, o, numRequests);
  Value offsets = e.dim(pro, 0);
  Value rowsP = e.dim(o.pooled, 0), rowsC = e.dim(o.closed, 0);
  Value closeRows = arith::MaxSIOp::create(b, loc, rowsP, rowsC);
  Value batchRows = arith::MaxSIOp::create(b, loc, closeRows, offsets);
  // The pooled rows' iterations: one per row, or per `tile` rows.
  Value pooledWork = e.dim(pooled, 0);
  if (tile > 1)
    pooledWork = arith::CeilDivUIOp::create(b, loc, pooledWork, e.idx(tile));
  Value items = arith::AddIOp::create(b, loc, batchRows, pooledWork);
  // pool_offsets' batch and compress's (which also needs offsets).
  Value offsetsBatch = e.batchSize({{o.cache, 0}, {o.iro, 1}});
  Value compressBatch = e.batchSize({{o.cache, 0}, {o.iro, 1}, {pro, 1}});
  // With the scan, the offsets are known before the loop: rows at or past
  // their total (most of a capacity-shaped output) are claimed by no
  // request and skip the claimant search.
  Value total;
  if (scan) {
    lowerPoolOffsetsScan(e, o.iro, o.cache, pro, offsetsBatch, offsets);
    auto last = scf::IfOp::create(
        b, loc, e.cmp(arith::CmpIPredicate::ult, compressBatch, offsets),
        [&](OpBuilder &, Location) {
          scf::YieldOp::create(b, loc, e.loadU32(pro, compressBatch));
        },
        [&](OpBuilder &, Location) { scf::YieldOp::create(b, loc, e.i64(0)); });
    total = last.getResult(0);
  }
  CompressOperands compress = compressPart(o, pro, pooled);
  e.parallelFor(items, [&](Value i) {
    e.ifThenElse(
        e.cmp(arith::CmpIPredicate::ult, i, batchRows),
        [&] {
          lowerBatchItem(e, o, pro, pooled, batch, scan, i, closeRows, rowsP,
                         rowsC, offsets, offsetsBatch);
        },
        [&] {
          Value r = arith::SubIOp::create(b, loc, i, batchRows);
          lowerPooledItem(e, compress, compressBatch, batch.numRows, total,
                          scan, tile, r);
        });
  });
}

void lowering::lowerStep(Emitter &e, const StepOperands &o, Value numRequests,
                         bool scan, int64_t tile) {
  const RingOperands &ring = o.ring;
  // The checks of the four ops, in host validation's order: seed_tail's,
  // ring_close's outputs (`closed`, `closed_pool`), the offsets and
  // `pooled`, the cache. Any contradiction makes the whole step write only
  // what the contract defines for a call that produces nothing: ring_close's
  // -1 and zero rows, and zero offsets.
  ExtentChecks checks(e);
  addRingChecks(checks, e, ring);
  addRingCloseOutputChecks(checks, e, ring, "closed");
  checks.sameAs(o.pro, 0, "pool_row_offsets", ring.cache, 0, 1);
  checks.equal(o.pooled, 1, "pooled", e.headDim);
  e.cache.addExtentChecks(checks);
  std::optional<RingCloseNothing> nothing;
  Value offsets;
  checks.guard(
      [&] {
        RingOperands r = refined(checks, ring);
        Value pooled = checks.refined(o.pooled);
        e.cache.withRefinedKeys(checks, [&] {
          SmallVector<Value> views = r.views();
          views.push_back(pooled);
          e.versionWithCache(views, [&](ArrayRef<Value> v) {
            lowerItems(e, r.withViews(v), o.pro, v.back(), numRequests, scan,
                       scan ? tile : 1);
          });
        });
      },
      [&] {
        nothing.emplace(e, ring);
        offsets = e.dim(o.pro, 0);
        return arith::MaxSIOp::create(e.b, e.loc, nothing->rows, offsets)
            .getResult();
      },
      [&](Value i) {
        nothing->row(i);
        zeroOffset(e, o.pro, offsets, i);
      });
}
