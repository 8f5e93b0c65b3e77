//===- CompressLowering.cpp - lowering kpool.compress ---------------------===//
//
// compress: one parallel iteration per row (or tile of rows) of `pooled`;
// each row finds the request that claims it and pools that request's
// members.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;
using ::kpool::status::Finding;

/// Records the findings of request `bIdx` (index): its rows against the
/// `numRows` of `k`, its output range against its pools and against the
/// `rows` (index) of `pooled`.
static void recordRequest(Emitter &e, const CompressOperands &o,
                          Value numRows, Value rows, Value bIdx) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  SmallVector<StatusRecorder::Check> checks =
      e.status.rowChecks(o.iro, bIdx, numRows);
  auto range = e.poolRange(e.loadRequest(o.iro, o.cache, bIdx, numRows));
  Value lo = e.loadU32(o.pro, bIdx);
  Value hi = e.loadU32(o.pro, arith::AddIOp::create(b, loc, bIdx, e.idx(1)));
  Value got = arith::SubIOp::create(b, loc, hi, lo);
  checks.push_back({e.cmp(arith::CmpIPredicate::ne, got, range.count),
                    Finding::PoolRangeMismatch});
  checks.push_back({e.cmp(arith::CmpIPredicate::ugt, hi, e.toI64(rows)),
                    Finding::PoolRowsPastOutput});
  e.status.record(bIdx, checks);
}

/// Pooled row `row` of `pooled`: the pool whose members are the rows
/// `first + m` of `k` and `gate`.
static void poolMembers(Emitter &e, const CompressOperands &o, Value first,
                        Value row) {
  auto member = [&](Value m) -> std::pair<Value, Value> {
    Value memberRow = arith::AddIOp::create(e.b, e.loc, first, m);
    return {e.rowView(o.k, memberRow), e.rowView(o.gate, memberRow)};
  };
  if (!e.unrolledPools())
    return e.poolRowLoop(member, o.ape, e.rowView(o.pooled, row));
  SmallVector<Value> keys, gates;
  for (int64_t m = 0; m < e.kpool; ++m) {
    auto [key, g] = member(e.i64(m));
    keys.push_back(key);
    gates.push_back(g);
  }
  e.poolRow(keys, gates, o.ape, e.rowView(o.pooled, row));
}

/// Row `row` (i64) of `pooled`, which request `bIdx` (index) claims: the
/// pool whose first member is row `first` (i64) of `k` and `gate`, and
/// whose id is `id` (i64; its pool-cache entry).
static void poolClaimedRow(Emitter &e, const CompressOperands &o,
                           Value numRows, Value bIdx, Value row, Value first,
                           Value id) {
  e.prefetchMembers(o.k, o.gate, first, numRows);
  poolMembers(e, o, first, row);
  e.cache.storeEntry(bIdx, id, e.rowView(o.pooled, row));
}

/// The loop over the rows of `pooled`, on one stride version: one row per
/// iteration, or `tile` consecutive rows (see lowerCompressTile).
static void lowerRows(Emitter &e, const CompressOperands &o, int64_t tile) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value numRows = e.tokenRows(o.k, o.gate);
  Value batch = e.batchSize({{o.cache, 0}, {o.iro, 1}, {o.pro, 1}});
  Value rows = e.dim(o.pooled, 0);
  Value work = tile > 1 ? arith::CeilDivUIOp::create(b, loc, rows, e.idx(tile))
                              .getResult()
                        : rows;
  // With a status word, iteration b also checks request b's metadata.
  bool status = e.status.present();
  Value iterations =
      status ? arith::MaxSIOp::create(b, loc, work, batch).getResult() : work;
  e.parallelFor(iterations, [&](Value r) {
    e.ifThen(status ? e.cmp(arith::CmpIPredicate::ult, r, work) : Value(),
             [&] {
               if (tile > 1)
                 return lowerCompressTile(e, o, numRows, batch, rows, r, tile);
               Value row = e.toI64(r);
               // The request that claims the row (the contract's
               // per-request guard): valid metadata finds it by binary
               // search.
               Value owner =
                   e.findClaimant(o.pro, o.iro, o.cache, batch, row, numRows);
               e.ifThen(e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)), [&] {
                 Value bIdx = e.toIndex(owner);
                 Value next = arith::AddIOp::create(b, loc, bIdx, e.idx(1));
                 lowerCompressRow(e, o, numRows, bIdx, row,
                                  e.loadU32(o.pro, bIdx),
                                  e.loadU32(o.pro, next));
               });
             });
    e.status.guard([&] {
      e.ifThen(e.cmp(arith::CmpIPredicate::ult, r, batch),
               [&] { recordRequest(e, o, numRows, rows, r); });
    });
  });
}

void lowering::addCompressChecks(ExtentChecks &checks, Emitter &e,
                                 const CompressOperands &o,
                                 const char *pooledName) {
  int64_t D = e.headDim;
  checks.equal(o.k, 1, "k", D);
  checks.equal(o.gate, 1, "gate", D);
  checks.sameAs(o.gate, 0, "gate", o.k, 0);
  checks.equal(o.ape, 0, "ape", e.kpool);
  checks.equal(o.ape, 1, "ape", D);
  checks.equal(o.pooled, 1, pooledName, D);
  checks.sameAs(o.iro, 0, "input_row_offsets", o.cache, 0, 1);
  checks.sameAs(o.pro, 0, "pool_row_offsets", o.cache, 0, 1);
  e.cache.addExtentChecks(checks);
}

CompressOperands lowering::refined(ExtentChecks &checks,
                                   const CompressOperands &o) {
  CompressOperands r = o;
  r.k = checks.refined(o.k);
  r.gate = checks.refined(o.gate);
  r.ape = checks.refined(o.ape);
  r.pooled = checks.refined(o.pooled);
  return r;
}

void lowering::lowerCompress(Emitter &e, const CompressOperands &o,
                             int64_t tile) {
  ExtentChecks checks(e);
  addCompressChecks(checks, e, o);
  checks.guard([&] {
    CompressOperands r = refined(checks, o);
    e.cache.withRefinedKeys(checks, [&] {
      e.versionWithCache({r.k, r.gate, r.ape, r.pooled},
                         [&](ArrayRef<Value> v) {
                           CompressOperands version = r;
                           version.k = v[0];
                           version.gate = v[1];
                           version.ape = v[2];
                           version.pooled = v[3];
                           lowerRows(e, version, tile);
                         });
    });
  });
}

void lowering::lowerCompressTile(Emitter &e, const CompressOperands &o,
                                 Value numRows, Value batch, Value rows,
                                 Value t, int64_t tile) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Type i64 = b.getI64Type();
  Value begin = arith::MulIOp::create(b, loc, t, e.idx(tile));
  Value end = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, begin, e.idx(tile)), rows);
  // The claimant (-1: none), its claimed rows [lo, end), and its pools'
  // first member row and entry id at row 0 (first = base + row * K).
  SmallVector<Value> none = {e.i64(-1), e.i64(0), e.i64(0), e.i64(0),
                             e.i64(0)};
  auto loop = scf::ForOp::create(b, loc, begin, end, e.idx(1), none);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value row = e.toI64(loop.getInductionVar());
  ValueRange carried = loop.getRegionIterArgs();
  Value inClaim = arith::AndIOp::create(
      b, loc, e.cmp(arith::CmpIPredicate::sge, row, carried[1]),
      e.cmp(arith::CmpIPredicate::slt, row, carried[2]));
  auto claim = scf::IfOp::create(b, loc, TypeRange(SmallVector<Type>(5, i64)),
                                 inClaim, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(claim.thenBlock());
    scf::YieldOp::create(b, loc, carried);
    b.setInsertionPointToStart(claim.elseBlock());
    Value owner = e.findClaimant(o.pro, o.iro, o.cache, batch, row, numRows);
    auto found = scf::IfOp::create(
        b, loc, TypeRange(SmallVector<Type>(5, i64)),
        e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)),
        /*withElseRegion=*/true);
    scf::YieldOp::create(b, loc, found.getResults());
    b.setInsertionPointToStart(found.thenBlock());
    Value bIdx = e.toIndex(owner);
    Value lo = e.loadU32(o.pro, bIdx);
    Value hi = e.loadU32(o.pro, arith::AddIOp::create(b, loc, bIdx, e.idx(1)));
    auto req = e.loadRequest(o.iro, o.cache, bIdx, numRows);
    auto range = e.poolRange(req);
    // The owner claims the row, so lo <= row < hi and row - lo < count.
    Value claimEnd = arith::AddIOp::create(
        b, loc, lo,
        arith::MinSIOp::create(b, loc, range.count,
                               arith::SubIOp::create(b, loc, hi, lo)));
    Value memberBase = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, req.start, range.skip),
        arith::MulIOp::create(b, loc, lo, e.i64(e.kpool)));
    Value entryBase = arith::SubIOp::create(b, loc, range.first, lo);
    scf::YieldOp::create(
        b, loc, ValueRange{owner, lo, claimEnd, memberBase, entryBase});
    b.setInsertionPointToStart(found.elseBlock());
    scf::YieldOp::create(b, loc, none);
  }
  ValueRange now = claim.getResults();
  e.ifThen(e.cmp(arith::CmpIPredicate::sge, now[0], e.i64(0)), [&] {
    Value first = arith::AddIOp::create(
        b, loc, now[3], arith::MulIOp::create(b, loc, row, e.i64(e.kpool)));
    poolClaimedRow(e, o, numRows, e.toIndex(now[0]), row, first,
                   arith::AddIOp::create(b, loc, now[4], row));
  });
  scf::YieldOp::create(b, loc, now);
}

void lowering::lowerCompressRow(Emitter &e, const CompressOperands &o,
                                Value numRows, Value bIdx, Value row, Value lo,
                                Value hi) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto req = e.loadRequest(o.iro, o.cache, bIdx, numRows);
  auto range = e.poolRange(req);
  Value j = arith::SubIOp::create(b, loc, row, lo);
  Value valid = arith::AndIOp::create(
      b, loc, e.cmp(arith::CmpIPredicate::ult, row, hi),
      e.cmp(arith::CmpIPredicate::ult, j, range.count));
  e.ifThen(valid, [&] {
    Value first = arith::AddIOp::create(
        b, loc, arith::AddIOp::create(b, loc, req.start, range.skip),
        arith::MulIOp::create(b, loc, j, e.i64(e.kpool)));
    poolClaimedRow(e, o, numRows, bIdx, row, first,
                   arith::AddIOp::create(b, loc, range.first, j));
  });
}
