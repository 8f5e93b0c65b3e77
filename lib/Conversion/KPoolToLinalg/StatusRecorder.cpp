//===- StatusRecorder.cpp - emitting the status word's findings -----------===//

#include "StatusRecorder.h"

#include "Emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::kpool::lowering;
using ::kpool::status::Finding;

StatusRecorder::StatusRecorder(Emitter &e, Value statusWord)
    : e(e), word(statusWord ? e.signless(statusWord) : Value()) {}

void StatusRecorder::guard(function_ref<void()> fn) {
  if (!word)
    return;
  e.ifThen(e.cmp(arith::CmpIPredicate::sgt, e.dim(word, 0), e.idx(0)), fn);
}

void StatusRecorder::record(Value request, ArrayRef<Check> checks) {
  if (!word || checks.empty())
    return;
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value code = e.i64(0);
  for (auto [cond, finding] : llvm::reverse(checks))
    code = arith::SelectOp::create(b, loc, cond, e.i64(int64_t(finding)),
                                   code);
  e.ifThen(e.cmp(arith::CmpIPredicate::ne, code, e.i64(0)), [&] {
    Value req = isa<IndexType>(request.getType()) ? e.toI64(request) : request;
    keepSmallest(arith::OrIOp::create(
        b, loc,
        arith::ShLIOp::create(b, loc, req,
                              e.i64(::kpool::status::kFindingBits)),
        code));
  });
}

void StatusRecorder::recordCode(Value code) {
  if (!word)
    return;
  e.ifThen(e.cmp(arith::CmpIPredicate::ne, code, e.i64(0)),
           [&] { keepSmallest(code); });
}

void StatusRecorder::keepSmallest(Value code) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto rmw =
      memref::GenericAtomicRMWOp::create(b, loc, word, ValueRange{e.idx(0)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rmw.getBody());
  Value old = rmw.getCurrentValue();
  Value keep = arith::AndIOp::create(
      b, loc, e.cmp(arith::CmpIPredicate::ne, old, e.i64(0)),
      e.cmp(arith::CmpIPredicate::ult, old, code));
  memref::AtomicYieldOp::create(
      b, loc, arith::SelectOp::create(b, loc, keep, old, code));
}

SmallVector<StatusRecorder::Check>
StatusRecorder::rowChecks(Value iro, Value bIdx, Value numRows) {
  Value start = e.loadU32(iro, bIdx);
  Value end =
      e.loadU32(iro, arith::AddIOp::create(e.b, e.loc, bIdx, e.idx(1)));
  Value reversed = e.cmp(arith::CmpIPredicate::ugt, start, end);
  return {{reversed, Finding::RowsReversed},
          {e.cmp(arith::CmpIPredicate::ugt, end, numRows), Finding::RowsPastK}};
}

void StatusRecorder::recordNumRequests(Value numRequests, Value batch) {
  if (!word)
    return;
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Value n = arith::ExtSIOp::create(b, loc, b.getI64Type(), numRequests);
  Value outside = arith::OrIOp::create(
      b, loc, e.cmp(arith::CmpIPredicate::slt, n, e.i64(0)),
      e.cmp(arith::CmpIPredicate::sgt, n, e.toI64(batch)));
  record(e.i64(0), {{outside, Finding::NumRequests}});
}

Value StatusRecorder::withStatusIteration(Value ub) {
  if (!word)
    return ub;
  return arith::MaxSIOp::create(e.b, e.loc, ub, e.idx(1));
}
