//===- CacheStore.cpp - emitting pool-cache stores ------------------------===//

#include "CacheStore.h"

#include "Emitter.h"
#include "ExtentChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/SaveAndRestore.h"

#include <cstdint>

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;
using ::kpool::status::Finding;

CacheStore::CacheStore(Emitter &e, const CacheDest &cacheDest)
    : e(e), dest(cacheDest) {
  if (dest.table)
    dest.table = e.signless(dest.table);
}

void CacheStore::addExtentChecks(ExtentChecks &checks) {
  if (dest.table)
    checks.equal(dest.keys, 2, "cache_keys", e.headDim);
}

void CacheStore::withKeys(Value keys, function_ref<void()> fn) {
  llvm::SaveAndRestore<Value> version(dest.keys, keys);
  fn();
}

void CacheStore::withRefinedKeys(ExtentChecks &checks,
                                 function_ref<void()> fn) {
  if (!dest.table)
    return fn();
  withKeys(checks.refined(dest.keys), fn);
}

void CacheStore::storeEntry(Value bIdx, Value poolId, Value value) {
  if (!dest.table)
    return;
  OpBuilder &b = e.b;
  Location loc = e.loc;
  const CacheDest &c = dest;
  Value pageSize = e.toI64(e.dim(c.keys, 1));
  Value tableOk = e.both(
      e.cmp(arith::CmpIPredicate::ult, bIdx, e.dim(c.table, 0)),
      e.cmp(arith::CmpIPredicate::sgt, pageSize, e.i64(0)));
  e.ifThen(tableOk, [&] {
    Value pageIdx = arith::DivUIOp::create(b, loc, poolId, pageSize);
    Value row = arith::RemUIOp::create(b, loc, poolId, pageSize);
    Value inTable =
        e.cmp(arith::CmpIPredicate::ult, pageIdx, e.toI64(e.dim(c.table, 1)));
    e.status.guard([&] {
      e.status.record(bIdx,
                      {{arith::XOrIOp::create(b, loc, inTable, e.i1(true)),
                        Finding::TablePastWidth}});
    });
    e.ifThen(inTable, [&] {
      Value page = arith::ExtUIOp::create(
          b, loc, b.getI64Type(),
          memref::LoadOp::create(b, loc, c.table,
                                 ValueRange{bIdx, e.toIndex(pageIdx)}));
      Value ok =
          e.cmp(arith::CmpIPredicate::ult, page, e.toI64(e.dim(c.keys, 0)));
      if (c.scales)
        ok = e.both(e.both(ok, e.cmp(arith::CmpIPredicate::ult, page,
                                     e.toI64(e.dim(c.scales, 0)))),
                    e.cmp(arith::CmpIPredicate::ult, row,
                          e.toI64(e.dim(c.scales, 1))));
      e.status.guard([&] {
        Value bad = arith::XOrIOp::create(b, loc, ok, e.i1(true));
        Value padding =
            e.cmp(arith::CmpIPredicate::eq, page, e.i64(UINT32_MAX));
        e.status.record(bIdx, {{arith::AndIOp::create(b, loc, bad, padding),
                                Finding::TablePadding},
                               {bad, Finding::TablePageOutOfRange}});
      });
      e.ifThen(ok, [&] {
        Value entry = e.channelView(c.keys, {e.toIndex(page), e.toIndex(row)});
        Value scale;
        if (c.scales) {
          auto type = cast<MemRefType>(c.scales.getType());
          SmallVector<OpFoldResult> offsets = {e.toIndex(page),
                                               e.toIndex(row)};
          SmallVector<OpFoldResult> ones(2, b.getIndexAttr(1));
          auto reduced = memref::SubViewOp::inferRankReducedResultType(
              {}, type, offsets, ones, ones);
          scale = memref::SubViewOp::create(b, loc, reduced, c.scales,
                                            offsets, ones, ones);
        }
        CacheEntryOp::create(b, loc, value, entry, scale, c.rotate, c.scale);
      });
    });
  });
}
