//===- PoolOffsetsLowering.cpp - lowering kpool.pool_offsets --------------===//
//
// pool_offsets: a sequential scan of the requests' pool counts.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;

void lowering::lowerPoolOffsets(Emitter &e, Value iro, Value cache, Value out) {
  ExtentChecks checks(e);
  checks.sameAs(iro, 0, "input_row_offsets", cache, 0, 1);
  checks.sameAs(out, 0, "pool_row_offsets", cache, 0, 1);
  Value length;
  checks.guard(
      [&] {
        Value batch = e.batchSize({{cache, 0}, {iro, 1}});
        Value length = e.dim(out, 0);
        // A sequential scan, wrapped in a one-iteration parallel loop so
        // that GPU mappings run it on the device next to its operands.
        e.parallelFor(e.idx(1), [&](Value) {
          lowerPoolOffsetsScan(e, iro, cache, out, batch, length);
        });
      },
      [&] { return length = e.dim(out, 0); },
      [&](Value i) { zeroOffset(e, out, length, i); });
}

void lowering::zeroOffset(Emitter &e, Value out, Value length, Value i) {
  e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, length), [&] {
    Value zero = arith::ConstantIntOp::create(e.b, e.loc, e.b.getI32Type(), 0);
    memref::StoreOp::create(e.b, e.loc, zero, out, ValueRange{i});
  });
}

void lowering::lowerPoolOffsetsScan(Emitter &e, Value iro, Value cache,
                                    Value out, Value batch, Value length) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  // Without `k` there is no row count to check against: only reversed
  // offsets are caught here (any u32 end is below 2^32).
  Value noRowLimit = e.noRowLimit();
  Type i32 = b.getI32Type();
  auto store = [&](Value acc, Value at) {
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, at, length), [&] {
      Value v = arith::TruncIOp::create(b, loc, i32, acc);
      memref::StoreOp::create(b, loc, v, out, ValueRange{at});
    });
  };
  auto loop = scf::ForOp::create(b, loc, e.idx(0), batch, e.idx(1),
                                 ValueRange{e.i64(0)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value bIdx = loop.getInductionVar();
    Value acc = loop.getRegionIterArg(0);
    store(acc, bIdx);
    e.status.guard([&] {
      e.status.record(bIdx, e.status.rowChecks(iro, bIdx, noRowLimit));
    });
    auto range = e.poolRange(e.loadRequest(iro, cache, bIdx, noRowLimit));
    Value next = arith::AddIOp::create(b, loc, acc, range.count);
    scf::YieldOp::create(b, loc, next);
  }
  store(loop.getResult(0), batch);
  // Entries past the requests that have offsets and a cache length: those
  // requests bring no pools, so they repeat the total (every entry of
  // `pool_row_offsets` is written).
  auto rest = scf::ForOp::create(
      b, loc, arith::AddIOp::create(b, loc, batch, e.idx(1)), length, e.idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(rest.getBody()->getTerminator());
  store(loop.getResult(0), rest.getInductionVar());
}
