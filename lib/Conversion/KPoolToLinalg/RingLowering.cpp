//===- RingLowering.cpp - lowering kpool.ring_close and kpool.seed_tail ---===//
//
// The two ops that work on the tail ring: ring_close (one parallel
// iteration per batch row: the pool the ring holds open, closed with this
// call's first tokens) and seed_tail (one per request: its last positions
// into its ring slot).
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include <optional>

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;
using ::kpool::status::Finding;

//===----------------------------------------------------------------------===//
// What both ops share
//===----------------------------------------------------------------------===//

/// The ring window `R` of `tail` (its third extent) as i64: a constant
/// when static.
static Value ringWindow(Emitter &e, Value tail) {
  auto type = cast<MemRefType>(tail.getType());
  if (!type.isDynamicDim(2))
    return e.i64(type.getDimSize(2));
  return e.toI64(e.dim(tail, 2));
}

void lowering::addRingChecks(ExtentChecks &checks, Emitter &e,
                             const RingOperands &o) {
  int64_t D = e.headDim;
  checks.equal(o.tail, 1, "tail", 2);
  checks.equal(o.tail, 3, "tail", D);
  checks.atLeast(o.tail, 2, "tail", e.kpool);
  checks.equal(o.k, 1, "k", D);
  checks.equal(o.gate, 1, "gate", D);
  checks.sameAs(o.gate, 0, "gate", o.k, 0);
  checks.sameAs(o.iro, 0, "input_row_offsets", o.cache, 0, 1);
  checks.sameAs(o.slots, 0, "slot_idx", o.cache, 0);
}

void lowering::addRingCloseOutputChecks(ExtentChecks &checks, Emitter &e,
                                        const RingOperands &o,
                                        const char *rowsName) {
  int64_t D = e.headDim;
  checks.equal(o.ape, 0, "ape", e.kpool);
  checks.equal(o.ape, 1, "ape", D);
  checks.sameAs(o.pooled, 0, rowsName, o.cache, 0);
  checks.equal(o.pooled, 1, rowsName, D);
  checks.sameAs(o.closed, 0, "closed_pool", o.cache, 0);
}

RingOperands lowering::refined(ExtentChecks &checks, const RingOperands &o) {
  RingOperands r = o;
  r.tail = checks.refined(o.tail);
  r.k = checks.refined(o.k);
  r.gate = checks.refined(o.gate);
  if (o.ape)
    r.ape = checks.refined(o.ape);
  if (o.pooled)
    r.pooled = checks.refined(o.pooled);
  return r;
}

RingBatch lowering::ringBatch(Emitter &e, const RingOperands &o,
                              Value numRequests) {
  RingBatch r;
  r.numRows = e.tokenRows(o.k, o.gate);
  Value batch = e.batchSize({{o.cache, 0}, {o.iro, 1}, {o.slots, 0}});
  r.numRequests = e.clampNumRequests(numRequests, batch);
  r.requested = numRequests;
  r.batch = batch;
  r.numSlots = e.toI64(e.dim(o.tail, 0));
  r.window = ringWindow(e, o.tail);
  return r;
}

void lowering::recordRingRequest(Emitter &e, const RingBatch &batch,
                                 Value bIdx, const RingOperands &o) {
  e.status.guard([&] {
    e.ifThen(e.cmp(arith::CmpIPredicate::eq, bIdx, e.idx(0)), [&] {
      e.status.recordNumRequests(batch.requested, batch.batch);
    });
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, batch.numRequests), [&] {
      SmallVector<StatusRecorder::Check> checks =
          e.status.rowChecks(o.iro, bIdx, batch.numRows);
      checks.push_back({e.cmp(arith::CmpIPredicate::uge,
                              e.loadU32(o.slots, bIdx), batch.numSlots),
                        Finding::SlotOutOfRange});
      e.status.record(bIdx, checks);
    });
  });
}

//===----------------------------------------------------------------------===//
// ring_close
//===----------------------------------------------------------------------===//

namespace {
/// What a batch row knows about its request's pending pool.
struct PendingRow {
  Value closes; ///< i1: the row closes a pool (false past num_requests)
  Value held;   ///< members of the pool in the ring (i64)
  Value id;     ///< the pool's id (i64)
  Value slot;   ///< the request's ring slot (i64)
  Value start;  ///< the request's first row in `k` (i64)
};
} // namespace

/// Row `bIdx`'s pending pool: its request's when `bIdx < num_requests`
/// and the slot exists, else none (`closes` false, the rest 0).
static PendingRow pendingRow(Emitter &e, const RingOperands &o,
                             const RingBatch &batch, Value bIdx) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto ifOp = scf::IfOp::create(
      b, loc, e.cmp(arith::CmpIPredicate::ult, bIdx, batch.numRequests),
      [&](OpBuilder &, Location) {
        auto req = e.loadRequest(o.iro, o.cache, bIdx, batch.numRows);
        auto pool = e.pendingPool(req);
        Value slot = e.loadU32(o.slots, bIdx);
        Value closes = arith::AndIOp::create(
            b, loc, pool.closes,
            e.cmp(arith::CmpIPredicate::ult, slot, batch.numSlots));
        scf::YieldOp::create(
            b, loc, ValueRange{closes, pool.held, pool.id, slot, req.start});
      },
      [&](OpBuilder &, Location) {
        Value no = e.i1(false);
        Value zero = e.i64(0);
        scf::YieldOp::create(b, loc, ValueRange{no, zero, zero, zero, zero});
      });
  ResultRange r = ifOp.getResults();
  return PendingRow{r[0], r[1], r[2], r[3], r[4]};
}

/// Pools the members of pool `p.id` into `outRow`. Member m is position
/// id*K + m; the ring holds it in row (id*K + m) mod R. Members below
/// `held` are in the ring; the rest are this call's rows
/// `start + m - held`. The unselected view is built from a clamped index
/// and never read.
static void closePool(Emitter &e, const RingOperands &o, Value window,
                      const PendingRow &p, Value outRow) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto member = [&](Value m, Value ringRow) -> std::pair<Value, Value> {
    Value fromRing = e.cmp(arith::CmpIPredicate::ult, m, p.held);
    Value row = arith::SelectOp::create(
        b, loc, fromRing, p.start,
        arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, p.start, m),
                              p.held));
    Value safeSlot =
        arith::SelectOp::create(b, loc, fromRing, p.slot, e.i64(0));
    return {e.selectView(fromRing, e.ringView(o.tail, safeSlot, 0, ringRow),
                         e.rowView(o.k, row)),
            e.selectView(fromRing, e.ringView(o.tail, safeSlot, 1, ringRow),
                         e.rowView(o.gate, row))};
  };
  if (!e.unrolledPools()) {
    Value base = e.ringRow(
        arith::MulIOp::create(b, loc, p.id, e.i64(e.kpool)), window);
    return e.poolRowLoop(
        [&](Value m) { return member(m, e.ringRowAfter(base, m, window)); },
        o.ape, outRow);
  }
  SmallVector<Value> ringRows = e.memberRingRows(p.id, window);
  SmallVector<Value> keys, gates;
  for (int64_t m = 0; m < e.kpool; ++m) {
    auto [key, gate] = member(e.i64(m), ringRows[m]);
    keys.push_back(key);
    gates.push_back(gate);
  }
  e.poolRow(keys, gates, o.ape, outRow);
}

void lowering::lowerRingCloseRow(Emitter &e, const RingOperands &o,
                                 const RingBatch &batch, Value bIdx,
                                 Value rowsP, Value rowsC) {
  OpBuilder &b = e.b;
  PendingRow pending = pendingRow(e, o, batch, bIdx);
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsC), [&] {
    // closed_pool is i32 or i64; ids are below 2^31 either way.
    Type idType = cast<MemRefType>(o.closed.getType()).getElementType();
    Value id = pending.id;
    if (idType != id.getType())
      id = arith::TruncIOp::create(b, e.loc, idType, id);
    Value none = arith::ConstantIntOp::create(b, e.loc, idType, -1);
    Value value = arith::SelectOp::create(b, e.loc, pending.closes, id, none);
    memref::StoreOp::create(b, e.loc, value, o.closed, ValueRange{bIdx});
  });
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsP), [&] {
    Value outRow = e.rowView(o.pooled, e.toI64(bIdx));
    e.ifThenElse(
        pending.closes,
        [&] {
          closePool(e, o, batch.window, pending, outRow);
          e.cache.storeEntry(bIdx, pending.id, outRow);
        },
        [&] { e.zeroRow(outRow); });
  });
}

RingCloseNothing::RingCloseNothing(Emitter &e, const RingOperands &o)
    : e(e), o(o) {
  rowsP = e.dim(o.pooled, 0);
  rowsC = e.dim(o.closed, 0);
  cols = e.dim(o.pooled, 1);
  rows = arith::MaxSIOp::create(e.b, e.loc, rowsP, rowsC);
}

void RingCloseNothing::row(Value bIdx) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Type elt = cast<MemRefType>(o.pooled.getType()).getElementType();
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsC), [&] {
    Value none = arith::ConstantIntOp::create(
        b, loc, cast<MemRefType>(o.closed.getType()).getElementType(), -1);
    memref::StoreOp::create(b, loc, none, o.closed, ValueRange{bIdx});
  });
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsP), [&] {
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
    auto loop = scf::ForOp::create(b, loc, e.idx(0), cols, e.idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    memref::StoreOp::create(b, loc, zero, o.pooled,
                            ValueRange{bIdx, loop.getInductionVar()});
  });
}

/// The loop over batch rows, on one stride version.
static void lowerRingCloseRows(Emitter &e, const RingOperands &o,
                               Value numRequests) {
  OpBuilder &b = e.b;
  RingBatch batch = ringBatch(e, o, numRequests);
  Value rowsP = e.dim(o.pooled, 0), rowsC = e.dim(o.closed, 0);
  Value rows = e.status.withStatusIteration(
      arith::MaxSIOp::create(b, e.loc, rowsP, rowsC));
  e.parallelFor(rows, [&](Value bIdx) {
    recordRingRequest(e, batch, bIdx, o);
    lowerRingCloseRow(e, o, batch, bIdx, rowsP, rowsC);
  });
}

void lowering::lowerRingClose(Emitter &e, const RingOperands &o,
                              Value numRequests) {
  ExtentChecks checks(e);
  addRingChecks(checks, e, o);
  addRingCloseOutputChecks(checks, e, o, "pooled");
  e.cache.addExtentChecks(checks);
  // The extents contradict the op: nothing is computed, but what the
  // contract defines for every row is still written.
  std::optional<RingCloseNothing> nothing;
  checks.guard(
      [&] {
        RingOperands r = refined(checks, o);
        e.cache.withRefinedKeys(checks, [&] {
          e.versionWithCache(r.views(), [&](ArrayRef<Value> v) {
            lowerRingCloseRows(e, r.withViews(v), numRequests);
          });
        });
      },
      [&] { return nothing.emplace(e, o).rows; },
      [&](Value bIdx) { nothing->row(bIdx); });
}

//===----------------------------------------------------------------------===//
// seed_tail
//===----------------------------------------------------------------------===//

/// Copies the key and gate rows of the trailing (at most R) positions of
/// `req` into its ring slot.
static void copyTail(Emitter &e, const RingOperands &o,
                     const MetadataBuilder::Request &req, Value slot,
                     Value window) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto [begin, end] = e.ringTail(req, window);
  // One remainder per request: the rows of the positions follow from the
  // first one's.
  Value firstRow = e.ringRow(begin, window);
  auto loop =
      scf::ForOp::create(b, loc, e.toIndex(begin), e.toIndex(end), e.idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value q = e.toI64(loop.getInductionVar());
  Value row = arith::AddIOp::create(
      b, loc, req.start, arith::SubIOp::create(b, loc, q, req.cached));
  Value member = e.toIndex(e.ringRowAfter(
      firstRow, arith::SubIOp::create(b, loc, q, begin), window));
  auto ringRow = [&](int64_t which) {
    return e.channelView(o.tail,
                         {e.toIndex(slot), b.getIndexAttr(which), member});
  };
  linalg::CopyOp::create(b, loc, e.rowView(o.k, row), ringRow(0));
  linalg::CopyOp::create(b, loc, e.rowView(o.gate, row), ringRow(1));
}

void lowering::lowerSeedTailRequest(Emitter &e, const RingOperands &o,
                                    const RingBatch &batch, Value bIdx) {
  auto req = e.loadRequest(o.iro, o.cache, bIdx, batch.numRows);
  Value slot = e.loadU32(o.slots, bIdx);
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, slot, batch.numSlots),
           [&] { copyTail(e, o, req, slot, batch.window); });
}

void lowering::lowerSeedTail(Emitter &e, const RingOperands &o,
                             Value numRequests) {
  ExtentChecks checks(e);
  addRingChecks(checks, e, o);
  checks.guard([&] {
    RingOperands r = refined(checks, o);
    e.versionOnUnitStride({r.tail, r.k, r.gate}, [&](ArrayRef<Value> v) {
      RingOperands version = r;
      version.tail = v[0];
      version.k = v[1];
      version.gate = v[2];
      RingBatch batch = ringBatch(e, version, numRequests);
      bool status = e.status.present();
      e.parallelFor(
          e.status.withStatusIteration(batch.numRequests), [&](Value bIdx) {
            recordRingRequest(e, batch, bIdx, version);
            e.ifThen(status ? e.cmp(arith::CmpIPredicate::ult, bIdx,
                                    batch.numRequests)
                            : Value(),
                     [&] { lowerSeedTailRequest(e, version, batch, bIdx); });
          });
    });
  });
}
