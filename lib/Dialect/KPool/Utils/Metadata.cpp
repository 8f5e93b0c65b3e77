//===- Metadata.cpp - kpool metadata arithmetic ---------------------------===//

#include "kpool/Dialect/KPool/Utils/Metadata.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::kpool;

Value MetadataBuilder::i64(int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
}

Value MetadataBuilder::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value MetadataBuilder::toIndex(Value v) {
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
}

Value MetadataBuilder::toI64(Value v) {
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), v);
}

Value MetadataBuilder::signless(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  auto intType = dyn_cast<IntegerType>(type.getElementType());
  if (!intType || intType.isSignless())
    return memref;
  auto signlessType = MemRefType::get(
      type.getShape(), IntegerType::get(b.getContext(), intType.getWidth()),
      type.getLayout(), type.getMemorySpace());
  // Same bits, same layout: the LLVM lowering maps both types to one
  // descriptor, and reconcile-unrealized-casts folds the pair away.
  return UnrealizedConversionCastOp::create(b, loc, signlessType, memref)
      .getResult(0);
}

Value MetadataBuilder::loadU32(Value memref, Value i) {
  Value v = memref::LoadOp::create(b, loc, memref, ValueRange{i});
  return arith::ExtUIOp::create(b, loc, b.getI64Type(), v);
}

Value MetadataBuilder::minIndex(ValueRange values) {
  Value result = values.front();
  for (Value v : values.drop_front())
    result = arith::MinSIOp::create(b, loc, result, v);
  return arith::MaxSIOp::create(b, loc, result, idx(0));
}

MetadataBuilder::Request MetadataBuilder::loadRequest(Value inputRowOffsets,
                                                      Value cacheLengths,
                                                      Value bIdx,
                                                      Value numRows) {
  Value next = arith::AddIOp::create(b, loc, bIdx, idx(1));
  Value start = loadU32(inputRowOffsets, bIdx);
  Value end = loadU32(inputRowOffsets, next);
  Value ordered =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, start, end);
  Value inside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, end, numRows);
  Value ok = arith::AndIOp::create(b, loc, ordered, inside);
  Value count = arith::SelectOp::create(
      b, loc, ok, arith::SubIOp::create(b, loc, end, start), i64(0));
  return {start, count, loadU32(cacheLengths, bIdx)};
}

MetadataBuilder::PoolRange MetadataBuilder::poolRange(const Request &r) {
  Value k = i64(kpool);
  Value first = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, r.cached, i64(kpool - 1)), k);
  Value last = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, r.cached, r.count), k);
  Value some =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, last, first);
  Value count = arith::SelectOp::create(
      b, loc, some, arith::SubIOp::create(b, loc, last, first), i64(0));
  Value skip = arith::SubIOp::create(
      b, loc, arith::MulIOp::create(b, loc, first, k), r.cached);
  return {first, count, skip};
}

MetadataBuilder::PendingPool MetadataBuilder::pendingPool(const Request &r) {
  Value k = i64(kpool);
  Value held = arith::RemUIOp::create(b, loc, r.cached, k);
  Value open =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, held, i64(0));
  Value enough =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, r.count,
                            arith::SubIOp::create(b, loc, k, held));
  Value closes = arith::AndIOp::create(b, loc, open, enough);
  Value id = arith::DivUIOp::create(b, loc, r.cached, k);
  return {held, closes, id};
}

std::pair<Value, Value> MetadataBuilder::ringTail(const Request &r,
                                                  Value window) {
  // Positions are below 2^33 and the window is positive, so `end - R` is a
  // signed i64 that may be negative; `c >= 0` bounds the begin from below.
  Value end = arith::AddIOp::create(b, loc, r.cached, r.count);
  Value last = arith::SubIOp::create(b, loc, end, window);
  Value begin = arith::MaxSIOp::create(b, loc, last, r.cached);
  return {begin, end};
}

Value MetadataBuilder::ringRow(Value position, Value window) {
  if (matchPattern(window, m_Constant()) || !llvm::isPowerOf2_64(kpool))
    return arith::RemUIOp::create(b, loc, position, window);
  // A dynamic window is kpool whenever an engine runs without drafts: then
  // the row is a mask, and the 64-bit division runs only for wider rings.
  // (A mask rather than a remainder by the constant kpool, which LLVM would
  // merge with the other branch's remainder back into one division.)
  Value isK = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, window,
                                    i64(kpool));
  auto ifOp = scf::IfOp::create(
      b, loc, isK,
      [&](OpBuilder &nb, Location nloc) {
        Value mask =
            arith::ConstantIntOp::create(nb, nloc, nb.getI64Type(), kpool - 1);
        scf::YieldOp::create(
            nb, nloc, ValueRange{arith::AndIOp::create(nb, nloc, position, mask)});
      },
      [&](OpBuilder &nb, Location nloc) {
        scf::YieldOp::create(
            nb, nloc,
            ValueRange{arith::RemUIOp::create(nb, nloc, position, window)});
      });
  return ifOp.getResult(0);
}

SmallVector<Value> MetadataBuilder::memberRingRows(Value id, Value window) {
  SmallVector<Value> rows;
  IntegerAttr staticWindow;
  if (matchPattern(window, m_Constant(&staticWindow)) &&
      staticWindow.getInt() == kpool) {
    for (int64_t m = 0; m < kpool; ++m)
      rows.push_back(i64(m));
    return rows;
  }
  Value base = ringRow(arith::MulIOp::create(b, loc, id, i64(kpool)), window);
  for (int64_t m = 0; m < kpool; ++m)
    rows.push_back(m == 0 ? base : ringRowAfter(base, i64(m), window));
  return rows;
}

Value MetadataBuilder::ringRowAfter(Value row, Value offset, Value window) {
  Value next = arith::AddIOp::create(b, loc, row, offset);
  Value wraps =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, next, window);
  return arith::SelectOp::create(
      b, loc, wraps, arith::SubIOp::create(b, loc, next, window), next);
}

Value MetadataBuilder::clampNumRequests(Value numRequests, Value batch) {
  Value n = arith::ExtSIOp::create(b, loc, b.getI64Type(), numRequests);
  n = arith::MaxSIOp::create(b, loc, n, i64(0));
  n = arith::MinSIOp::create(b, loc, n, toI64(batch));
  return toIndex(n);
}

Value MetadataBuilder::findOwner(Value offsets, Value batch, Value row) {
  Type i64Type = b.getI64Type();
  auto loop = scf::WhileOp::create(
      b, loc, TypeRange{i64Type, i64Type}, ValueRange{i64(0), toI64(batch)},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value more = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt,
                                           args[0], args[1]);
        scf::ConditionOp::create(nb, nloc, more, args);
      },
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        MetadataBuilder mb(nb, nloc, kpool);
        Value lo = args[0], hi = args[1];
        Value mid = arith::ShRUIOp::create(
            nb, nloc, arith::AddIOp::create(nb, nloc, lo, hi), mb.i64(1));
        Value atMid = mb.loadU32(offsets, mb.toIndex(mid));
        Value before = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::ule, atMid, row);
        Value newLo = arith::SelectOp::create(
            nb, nloc, before, arith::AddIOp::create(nb, nloc, mid, mb.i64(1)),
            lo);
        Value newHi = arith::SelectOp::create(nb, nloc, before, hi, mid);
        scf::YieldOp::create(nb, nloc, ValueRange{newLo, newHi});
      });
  return arith::SubIOp::create(b, loc, loop.getResult(0), i64(1));
}

Value MetadataBuilder::claimsRow(Value pro, Value iro, Value cache, Value bIdx,
                                 Value row, Value numRows) {
  Value next = arith::AddIOp::create(b, loc, bIdx, idx(1));
  Value lo = loadU32(pro, bIdx), hi = loadU32(pro, next);
  Value count = poolRange(loadRequest(iro, cache, bIdx, numRows)).count;
  // `row - lo` wraps to a huge unsigned value when `row < lo`.
  Value j = arith::SubIOp::create(b, loc, row, lo);
  return arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, hi),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, count));
}

Value MetadataBuilder::findClaimant(Value pro, Value iro, Value cache,
                                    Value batch, Value row, Value numRows) {
  Type i1 = b.getI1Type(), i64Type = b.getI64Type();
  Value candidate = findOwner(pro, batch, row);
  Value found = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                      candidate, i64(0));
  auto check = scf::IfOp::create(
      b, loc, found,
      [&](OpBuilder &nb, Location nloc) {
        MetadataBuilder mb(nb, nloc, kpool);
        Value claims =
            mb.claimsRow(pro, iro, cache, mb.toIndex(candidate), row, numRows);
        scf::YieldOp::create(nb, nloc, claims);
      },
      [&](OpBuilder &nb, Location nloc) {
        Value no = arith::ConstantIntOp::create(nb, nloc, i1, 0);
        scf::YieldOp::create(nb, nloc, no);
      });
  auto owner = scf::IfOp::create(
      b, loc, check.getResult(0),
      [&](OpBuilder &nb, Location nloc) {
        scf::YieldOp::create(nb, nloc, candidate);
      },
      [&](OpBuilder &nb, Location nloc) {
        // The slow path: the first request that claims the row.
        MetadataBuilder mb(nb, nloc, kpool);
        Value end = mb.toI64(batch);
        auto scan = scf::WhileOp::create(
            nb, nloc, TypeRange{i64Type, i64Type},
            ValueRange{mb.i64(0), mb.i64(-1)},
            [&](OpBuilder &wb, Location wloc, ValueRange args) {
              Value more = arith::AndIOp::create(
                  wb, wloc,
                  arith::CmpIOp::create(wb, wloc, arith::CmpIPredicate::slt,
                                        args[0], end),
                  arith::CmpIOp::create(
                      wb, wloc, arith::CmpIPredicate::slt, args[1],
                      MetadataBuilder(wb, wloc, kpool).i64(0)));
              scf::ConditionOp::create(wb, wloc, more, args);
            },
            [&](OpBuilder &wb, Location wloc, ValueRange args) {
              MetadataBuilder wmb(wb, wloc, kpool);
              Value claims = wmb.claimsRow(pro, iro, cache,
                                           wmb.toIndex(args[0]), row, numRows);
              Value result =
                  arith::SelectOp::create(wb, wloc, claims, args[0], args[1]);
              Value next = arith::AddIOp::create(wb, wloc, args[0], wmb.i64(1));
              scf::YieldOp::create(wb, wloc, ValueRange{next, result});
            });
        scf::YieldOp::create(nb, nloc, scan.getResult(1));
      });
  return owner.getResult(0);
}
