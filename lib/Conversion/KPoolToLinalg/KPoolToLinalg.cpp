//===- KPoolToLinalg.cpp - lower kpool ops to linalg and scf --------------===//
//
// Lowers the buffer form of the kpool ops to structured IR: parallel loops
// over pooled rows or requests, and one `linalg.generic` over the channels of
// each pooled row. The pooling arithmetic comes from Utils/Pooling.h and the
// metadata arithmetic from Utils/Metadata.h; this file only arranges them and
// places the guards that keep every access inside the operands. The pass
// that applies these patterns is in KPoolToLinalgPass.cpp.
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"

#include "kpool/ABI/StatusWord.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Utils/Metadata.h"
#include "kpool/Dialect/KPool/Utils/Pooling.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::kpool;
using ::kpool::status::Finding;

namespace {

/// Emission helpers shared by the four lowerings.
class Emitter : public MetadataBuilder {
public:
  Emitter(OpBuilder &b, Location loc, int64_t kpool, int64_t headDim,
          StringRef kernelName)
      : MetadataBuilder(b, loc, kpool), b(b), loc(loc), kpool(kpool),
        headDim(headDim), kernelName(kernelName) {}

  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(b, loc, memref, d);
  }

  Value cmp(arith::CmpIPredicate pred, Value lhs, Value rhs) {
    return arith::CmpIOp::create(b, loc, pred, lhs, rhs);
  }

  /// The 1-D view of `headDim` elements at `leading` (all but the last
  /// dimension are dropped). Its layout is `strided<[1], offset: ?>` when the
  /// source's innermost stride is statically 1 (the vectorizable case) and
  /// fully dynamic otherwise, so that views of different operands share a
  /// type.
  Value channelView(Value memref, ArrayRef<OpFoldResult> leading) {
    auto type = cast<MemRefType>(memref.getType());
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> offsets(leading);
    offsets.push_back(b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes(rank - 1, b.getIndexAttr(1));
    sizes.push_back(b.getIndexAttr(headDim));
    SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
    auto reduced = memref::SubViewOp::inferRankReducedResultType(
        {headDim}, type, offsets, sizes, strides);
    Value view = memref::SubViewOp::create(b, loc, reduced, memref, offsets,
                                           sizes, strides);
    int64_t inner = innermostStride(type);
    auto layout =
        StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                               {inner == 1 ? 1 : ShapedType::kDynamic});
    auto viewType = MemRefType::get({headDim}, type.getElementType(), layout,
                                    type.getMemorySpace());
    if (view.getType() != viewType)
      view = memref::CastOp::create(b, loc, viewType, view);
    return view;
  }

  /// Static innermost stride of `type`, or ShapedType::kDynamic.
  static int64_t innermostStride(MemRefType type) {
    auto [strides, offset] = type.getStridesAndOffset();
    return strides.empty() ? 1 : strides.back();
  }

  /// `select` between two channel views, casting both to the fully dynamic
  /// layout when their layouts differ.
  Value selectView(Value cond, Value lhs, Value rhs) {
    if (lhs.getType() != rhs.getType()) {
      auto type = cast<MemRefType>(lhs.getType());
      auto layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                                           {ShapedType::kDynamic});
      auto dynType = MemRefType::get(type.getShape(), type.getElementType(),
                                     layout, type.getMemorySpace());
      lhs = memref::CastOp::create(b, loc, dynType, lhs);
      rhs = memref::CastOp::create(b, loc, dynType, rhs);
    }
    return arith::SelectOp::create(b, loc, cond, lhs, rhs);
  }

  /// Emits `fn` twice under `scf.if`: once with `memrefs` cast to a layout
  /// whose innermost stride is statically 1 (taken when that holds at run
  /// time, the common case that vectorizes into contiguous loads) and once
  /// with the operands as they are (any strides). Emits `fn` once when no
  /// operand has a dynamic innermost stride.
  void versionOnUnitStride(ArrayRef<Value> memrefs,
                           function_ref<void(ArrayRef<Value>)> fn) {
    Value unit;
    SmallVector<std::pair<size_t, MemRefType>> unitTypes;
    for (auto [i, memref] : llvm::enumerate(memrefs)) {
      auto type = cast<MemRefType>(memref.getType());
      if (!ShapedType::isDynamic(innermostStride(type)))
        continue;
      auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
      Value isUnit =
          cmp(arith::CmpIPredicate::eq, meta.getStrides().back(), idx(1));
      unit = unit ? arith::AndIOp::create(b, loc, unit, isUnit).getResult()
                  : isUnit;
      auto [strides, offset] = type.getStridesAndOffset();
      strides.back() = 1;
      unitTypes.push_back(
          {i, MemRefType::get(
                  type.getShape(), type.getElementType(),
                  StridedLayoutAttr::get(b.getContext(), offset, strides),
                  type.getMemorySpace())});
    }
    if (!unit)
      return fn(memrefs);
    ifThenElse(
        unit,
        [&] {
          SmallVector<Value> unitOperands(memrefs);
          for (auto [i, type] : unitTypes)
            unitOperands[i] = memref::CastOp::create(b, loc, type, memrefs[i]);
          fn(unitOperands);
        },
        [&] {
          // The general-stride copy of the op's loops is a kernel of its own.
          llvm::SaveAndRestore<bool> general(generalStrides, true);
          fn(memrefs);
        });
  }

  /// Row `row` (i64) of a 2-D memref.
  Value rowView(Value memref, Value row) {
    return channelView(memref, {toIndex(row)});
  }

  /// Ring row `tail[slot, which, row, :]` (`slot` and `row` i64).
  Value ringView(Value tail, Value slot, int64_t which, Value row) {
    IntegerAttr staticRow;
    OpFoldResult rowIndex =
        matchPattern(row, m_Constant(&staticRow))
            ? OpFoldResult(b.getIndexAttr(staticRow.getInt()))
            : OpFoldResult(toIndex(row));
    return channelView(tail, {toIndex(slot), b.getIndexAttr(which), rowIndex});
  }

  /// The ring window `R` of `tail` (its third extent) as i64: a constant
  /// when static.
  Value ringWindow(Value tail) {
    auto type = cast<MemRefType>(tail.getType());
    if (!type.isDynamicDim(2))
      return i64(type.getDimSize(2));
    return toI64(dim(tail, 2));
  }

  /// i1 that holds when the dynamic ring window of `tail` is at least `K`
  /// (the verifier checked a static one), or null when it is static.
  Value ringWindowOk(Value tail) {
    if (!cast<MemRefType>(tail.getType()).isDynamicDim(2))
      return Value();
    return cmp(arith::CmpIPredicate::sge, dim(tail, 2), idx(kpool));
  }

  /// `lhs && rhs` where either may be null (always true).
  Value both(Value lhs, Value rhs) {
    if (!lhs || !rhs)
      return lhs ? lhs : rhs;
    return arith::AndIOp::create(b, loc, lhs, rhs);
  }

  /// i1 that holds when every dynamic extent listed equals its static
  /// expectation, or null when all of them are static (the verifier checked
  /// those).
  Value extentsMatch(ArrayRef<std::tuple<Value, int64_t, int64_t>> checks) {
    Value ok;
    for (auto [memref, d, expected] : checks) {
      if (!cast<MemRefType>(memref.getType()).isDynamicDim(d))
        continue;
      Value same = cmp(arith::CmpIPredicate::eq, dim(memref, d), idx(expected));
      ok = ok ? arith::AndIOp::create(b, loc, ok, same).getResult() : same;
    }
    return ok;
  }

  /// Runs `fn` under `scf.if cond` (or directly when `cond` is null).
  void ifThen(Value cond, function_ref<void()> fn) {
    if (!cond)
      return fn();
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    fn();
  }

  /// `thenFn` under `scf.if cond`, `elseFn` in its else branch; only
  /// `thenFn` when `cond` is null (nothing to check).
  void ifThenOtherwise(Value cond, function_ref<void()> thenFn,
                       function_ref<void()> elseFn) {
    if (!cond)
      return thenFn();
    ifThenElse(cond, thenFn, elseFn);
  }

  void ifThenElse(Value cond, function_ref<void()> thenFn,
                  function_ref<void()> elseFn) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    thenFn();
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    elseFn();
  }

  /// `scf.parallel` over `[0, ub)`; `fn` gets the index induction variable.
  /// The loop is tagged with the kernel it becomes (`kpool.kernel`):
  /// the op's name, with `_strided` for the general-stride copy.
  void parallelFor(Value ub, function_ref<void(Value)> fn) {
    auto par = scf::ParallelOp::create(b, loc, ValueRange{idx(0)},
                                       ValueRange{ub}, ValueRange{idx(1)});
    KPoolDialect::KernelAttrHelper(b.getContext())
        .setAttr(par, b.getStringAttr("kpool_" + kernelName +
                                      (generalStrides ? "_strided" : "")));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(par.getBody());
    fn(par.getInductionVars()[0]);
  }

  /// Runs the pooling function of the given members into `outRow`.
  void poolRow(ArrayRef<Value> keys, ArrayRef<Value> gates, Value ape,
               Value outRow) {
    SmallVector<Value> apes;
    for (int64_t m = 0; m < kpool; ++m)
      apes.push_back(channelView(ape, {b.getIndexAttr(m)}));
    buildPoolRow(b, loc, keys, gates, apes, outRow);
  }

  /// The pooling function into `outRow` in the loop form (any kpool, IR
  /// independent of it); `member(m)` (m an i64) gives member m's key and
  /// gate rows.
  void poolRowLoop(function_ref<std::pair<Value, Value>(Value)> member,
                   Value ape, Value outRow) {
    buildPoolRowLoop(
        b, loc, kpool, [&](Value m) { return member(toI64(m)); }, ape, outRow);
  }

  /// The op's pool-cache destination (`table` null when it has none).
  struct CacheDest {
    Value table, keys, scales;
    Rotate rotate = Rotate::none;
    Scale scale = Scale::absmax;
  };
  CacheDest cacheDest;

  /// Takes the pool-cache destination of `op` (an op with `to_cache`).
  template <typename OpTy, typename Adaptor>
  void setCacheDest(OpTy op, Adaptor adaptor) {
    if (!adaptor.getBlockTable())
      return;
    cacheDest.table = signless(adaptor.getBlockTable());
    cacheDest.keys = adaptor.getCacheKeys();
    cacheDest.scales = adaptor.getCacheScales();
    cacheDest.rotate = op.getRotate().value_or(Rotate::none);
    cacheDest.scale = op.getScale().value_or(Scale::absmax);
  }

  /// versionOnUnitStride over `memrefs` and the cache's keys (when the op
  /// has a cache): `fn` sees the version of `memrefs`, and the cache
  /// destination uses the version of the keys meanwhile.
  void versionWithCache(ArrayRef<Value> memrefs,
                        function_ref<void(ArrayRef<Value>)> fn) {
    if (!cacheDest.table)
      return versionOnUnitStride(memrefs, fn);
    SmallVector<Value> all(memrefs);
    all.push_back(cacheDest.keys);
    Value keys = cacheDest.keys;
    versionOnUnitStride(all, [&](ArrayRef<Value> v) {
      cacheDest.keys = v.back();
      fn(v.drop_back());
      cacheDest.keys = keys;
    });
  }

  /// i1: the cache's extents agree with the op (its rows are head_dim
  /// long), or null when there is no cache or nothing to check.
  Value cacheExtentsMatch() {
    if (!cacheDest.table)
      return Value();
    return extentsMatch({{cacheDest.keys, 2, headDim}});
  }

  /// Stores pool `poolId` (i64) of batch row `bIdx` (index), whose dense
  /// value is the row view `value`, into its pool-cache entry when the op
  /// has a cache and the entry exists: the batch row is below the table's
  /// rows, the page index `poolId / page_size` below its width, and the
  /// page below the cache's pages (and the scales'; the row below their
  /// page size). An i32 -1 in the table reads as a huge unsigned page.
  void storeEntry(Value bIdx, Value poolId, Value value) {
    if (!cacheDest.table)
      return;
    const CacheDest &c = cacheDest;
    Value pageSize = toI64(dim(c.keys, 1));
    Value tableOk = both(
        cmp(arith::CmpIPredicate::ult, bIdx, dim(c.table, 0)),
        cmp(arith::CmpIPredicate::sgt, pageSize, i64(0)));
    ifThen(tableOk, [&] {
      Value pageIdx = arith::DivUIOp::create(b, loc, poolId, pageSize);
      Value row = arith::RemUIOp::create(b, loc, poolId, pageSize);
      Value inTable =
          cmp(arith::CmpIPredicate::ult, pageIdx, toI64(dim(c.table, 1)));
      ifStatus([&] {
        record(bIdx, {{arith::XOrIOp::create(b, loc, inTable, i1(true)),
                       Finding::TablePastWidth}});
      });
      ifThen(inTable, [&] {
        Value page = arith::ExtUIOp::create(
            b, loc, b.getI64Type(),
            memref::LoadOp::create(b, loc, c.table,
                                   ValueRange{bIdx, toIndex(pageIdx)}));
        Value ok = cmp(arith::CmpIPredicate::ult, page, toI64(dim(c.keys, 0)));
        if (c.scales)
          ok = both(both(ok, cmp(arith::CmpIPredicate::ult, page,
                                 toI64(dim(c.scales, 0)))),
                    cmp(arith::CmpIPredicate::ult, row,
                        toI64(dim(c.scales, 1))));
        ifStatus([&] {
          Value bad = arith::XOrIOp::create(b, loc, ok, i1(true));
          Value padding = cmp(arith::CmpIPredicate::eq, page, i64(UINT32_MAX));
          record(bIdx, {{arith::AndIOp::create(b, loc, bad, padding),
                         Finding::TablePadding},
                        {bad, Finding::TablePageOutOfRange}});
        });
        ifThen(ok, [&] {
          Value entry = channelView(c.keys, {toIndex(page), toIndex(row)});
          Value scale;
          if (c.scales) {
            auto type = cast<MemRefType>(c.scales.getType());
            SmallVector<OpFoldResult> offsets = {toIndex(page), toIndex(row)};
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

  /// The op's status word (a 1-D signless i64 memref), or null.
  Value status;

  /// Takes the status word of `op` (an op with `status`).
  template <typename Adaptor> void setStatus(Adaptor adaptor) {
    if (Value s = adaptor.getStatus())
      status = signless(s);
  }

  /// A finding for the status word: `finding` when `cond` (i1) holds.
  using Check = std::pair<Value, Finding>;

  /// Runs `fn` (which computes checks and records them) only when the op
  /// has a status word and the word has an element: a call without one
  /// pays a branch, not the checks.
  void ifStatus(function_ref<void()> fn) {
    if (!status)
      return;
    ifThen(cmp(arith::CmpIPredicate::sgt, dim(status, 0), idx(0)), fn);
  }

  /// Records in the status word, for request `request` (index or i64), the
  /// first of `checks` whose condition holds (the smallest code: the list
  /// is in code order), with one atomic that keeps the word's smallest
  /// nonzero code. Call it under ifStatus.
  void record(Value request, ArrayRef<Check> checks) {
    if (!status || checks.empty())
      return;
    Value code = i64(0);
    for (auto [cond, finding] : llvm::reverse(checks))
      code = arith::SelectOp::create(b, loc, cond, i64(int64_t(finding)), code);
    ifThen(cmp(arith::CmpIPredicate::ne, code, i64(0)), [&] {
      Value req = isa<IndexType>(request.getType()) ? toI64(request) : request;
      Value word = arith::OrIOp::create(
          b, loc,
          arith::ShLIOp::create(b, loc, req,
                                i64(::kpool::status::kFindingBits)),
          code);
      auto rmw = memref::GenericAtomicRMWOp::create(b, loc, status,
                                                    ValueRange{idx(0)});
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(rmw.getBody());
      Value old = rmw.getCurrentValue();
      Value keep = arith::AndIOp::create(
          b, loc, cmp(arith::CmpIPredicate::ne, old, i64(0)),
          cmp(arith::CmpIPredicate::ult, old, word));
      memref::AtomicYieldOp::create(
          b, loc, arith::SelectOp::create(b, loc, keep, old, word));
    });
  }

  /// The findings of request `bIdx`'s rows `[iro[b], iro[b+1])` against
  /// `numRows` rows of `k` (i64; 2^32 when there is no `k`).
  SmallVector<Check> rowChecks(Value iro, Value bIdx, Value numRows) {
    Value start = loadU32(iro, bIdx);
    Value end = loadU32(iro, arith::AddIOp::create(b, loc, bIdx, idx(1)));
    Value reversed = cmp(arith::CmpIPredicate::ugt, start, end);
    return {{reversed, Finding::RowsReversed},
            {cmp(arith::CmpIPredicate::ugt, end, numRows), Finding::RowsPastK}};
  }

  /// Records the num_requests finding (request 0) when `numRequests` (the
  /// op's i32) is outside `[0, batch]`.
  void recordNumRequests(Value numRequests, Value batch) {
    if (!status)
      return;
    Value n = arith::ExtSIOp::create(b, loc, b.getI64Type(), numRequests);
    Value outside = arith::OrIOp::create(
        b, loc, cmp(arith::CmpIPredicate::slt, n, i64(0)),
        cmp(arith::CmpIPredicate::sgt, n, toI64(batch)));
    record(i64(0), {{outside, Finding::NumRequests}});
  }

  /// A parallel loop bound `ub` (index), at least 1 with a status word: the
  /// call-level findings are recorded by iteration 0 even when there is
  /// nothing else to do.
  Value withStatusIteration(Value ub) {
    if (!status)
      return ub;
    return arith::MaxSIOp::create(b, loc, ub, idx(1));
  }

  Value zeroRow(Value outRow) {
    Type elt = cast<MemRefType>(outRow.getType()).getElementType();
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
    linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{outRow});
    return outRow;
  }

  Value i1(bool v) {
    return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v);
  }

  /// A 1-D operand whose length is the batch size plus `delta` (as in the
  /// verifier): `cache_lengths` and `slot_idx` (0), offsets (1).
  struct BatchOperand {
    Value memref;
    int64_t delta;
  };

  /// The batch size the metadata supports: the smallest length minus delta
  /// of `operands`, at least 0.
  Value batchSize(ArrayRef<BatchOperand> operands) {
    SmallVector<Value> sizes;
    for (auto [memref, delta] : operands) {
      Value size = dim(memref, 0);
      if (delta != 0)
        size = arith::SubIOp::create(b, loc, size, idx(delta));
      sizes.push_back(size);
    }
    return minIndex(sizes);
  }

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

  RingBatch ringBatch(Value k, Value gate, Value iro, Value cache,
                      Value slots, Value tail, Value numRequests) {
    RingBatch r;
    r.numRows = tokenRows(k, gate);
    Value batch = batchSize({{cache, 0}, {iro, 1}, {slots, 0}});
    r.numRequests = clampNumRequests(numRequests, batch);
    r.requested = numRequests;
    r.batch = batch;
    r.numSlots = toI64(dim(tail, 0));
    r.window = ringWindow(tail);
    return r;
  }

  /// Records the findings of ring request `bIdx` (index): its rows and
  /// its slot when it is below the clamped `num_requests`, and
  /// (iteration 0) num_requests itself. `iro` and `slots` are ring_close's
  /// and seed_tail's metadata.
  void recordRingRequest(const RingBatch &batch, Value bIdx, Value iro,
                         Value slots) {
    ifStatus([&] {
      ifThen(cmp(arith::CmpIPredicate::eq, bIdx, idx(0)),
             [&] { recordNumRequests(batch.requested, batch.batch); });
      ifThen(cmp(arith::CmpIPredicate::ult, bIdx, batch.numRequests), [&] {
        SmallVector<Check> checks = rowChecks(iro, bIdx, batch.numRows);
        checks.push_back({cmp(arith::CmpIPredicate::uge, loadU32(slots, bIdx),
                              batch.numSlots),
                          Finding::SlotOutOfRange});
        record(bIdx, checks);
      });
    });
  }

  /// A row count no 32-bit offset reaches (i64 2^32): loadRequest's bound
  /// where an op has no `k` (pool_offsets counts every request's tokens).
  Value noRowLimit() { return i64(int64_t(1) << 32); }

  /// The rows of `k` and `gate` both have (i64).
  Value tokenRows(Value k, Value gate) {
    return toI64(minIndex({dim(k, 0), dim(gate, 0)}));
  }

  /// The runtime shape guard of an op with a ring: the dynamic extents in
  /// `checks` and the ring window of `tail`.
  Value ringShapesMatch(ArrayRef<std::tuple<Value, int64_t, int64_t>> checks,
                        Value tail) {
    Value extents = extentsMatch(checks);
    return both(extents, ringWindowOk(tail));
  }

  OpBuilder &b;
  Location loc;
  int64_t kpool;
  int64_t headDim;
  std::string kernelName;
  bool generalStrides = false;
  /// Pools ahead whose member rows compress's rows prefetch (0: none).
  int64_t prefetchPools = 0;
  /// Pools of at most this many members are unrolled, larger ones use the
  /// member loop (`unroll-members`; the same bits either way).
  int64_t unrollMembers = kMaxUnrolledMembers;
  bool unrolledPools() const { return kpool <= unrollMembers; }

  /// Prefetches, when `prefetchPools` is set, the key and gate rows of the
  /// pool `prefetchPools` pools after the one whose members start at row
  /// `first` (i64) of `k` and `gate` (`numRows` i64 rows, at least one):
  /// every cache line of each member row, the row clamped to the last one
  /// (a prefetch has no effect on results). Pools of more than
  /// kMaxUnrolledMembers members are not prefetched (the code would grow
  /// with kpool).
  void prefetchMembers(Value k, Value gate, Value first, Value numRows) {
    if (prefetchPools <= 0 || kpool > kMaxUnrolledMembers)
      return;
    Value last = arith::SubIOp::create(b, loc, numRows, i64(1));
    Value ahead = arith::AddIOp::create(b, loc, first,
                                        i64(prefetchPools * kpool));
    for (int64_t m = 0; m < kpool; ++m) {
      Value member =
          m ? arith::AddIOp::create(b, loc, ahead, i64(m)).getResult() : ahead;
      Value row = toIndex(arith::MinSIOp::create(b, loc, member, last));
      for (Value rows : {k, gate}) {
        auto type = cast<MemRefType>(rows.getType());
        // Channels per 64-byte cache line.
        int64_t perLine = std::max<int64_t>(
            1, 512 / std::max<int64_t>(1, type.getElementTypeBitWidth()));
        for (int64_t c = 0; c < headDim; c += perLine)
          memref::PrefetchOp::create(b, loc, rows, ValueRange{row, idx(c)},
                                     /*isWrite=*/false, /*localityHint=*/3,
                                     /*isDataCache=*/true);
      }
    }
  }
};

/// Base pattern: only the buffer form is lowered (the pass reports the
/// tensor form before converting).
template <typename OpTy>
struct KPoolLowering : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpConversionPattern<OpTy>::OpAdaptor;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    lower(op, adaptor, rewriter);
    rewriter.eraseOp(op);
    return success();
  }

  virtual void lower(OpTy op, OpAdaptor adaptor, OpBuilder &b) const = 0;
};

/// An emitter for `op`, named after it.
template <typename OpTy>
static Emitter emitterFor(OpTy op, OpBuilder &b, int64_t headDim) {
  return Emitter(b, op.getLoc(), op.getKpool(), headDim,
                 op->getName().stripDialect().str());
}

struct CompressLowering : public KPoolLowering<CompressOp> {
  CompressLowering(MLIRContext *context, const KPoolToLinalgOptions &options)
      : KPoolLowering(context), options(options) {}

  /// `prefetch-pools` (Emitter::prefetchMembers), `rows-per-iteration` and
  /// `unroll-members`.
  KPoolToLinalgOptions options;

  void lower(CompressOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    int64_t D = op.getHeadDim();
    Emitter e = emitterFor(op, b, D);
    e.prefetchPools = options.prefetchPools;
    e.unrollMembers = options.unrollMembers;
    Value k = adaptor.getK(), gate = adaptor.getGate(), ape = adaptor.getApe();
    Value pooled = adaptor.getPooled();
    Value iro = e.signless(adaptor.getInputRowOffsets());
    Value pro = e.signless(adaptor.getPoolRowOffsets());
    Value cache = e.signless(adaptor.getCacheLengths());
    e.setCacheDest(op, adaptor);
    e.setStatus(adaptor);
    Value shapesOk = e.both(e.extentsMatch({{k, 1, D},
                                            {gate, 1, D},
                                            {ape, 0, e.kpool},
                                            {ape, 1, D},
                                            {pooled, 1, D}}),
                            e.cacheExtentsMatch());
    int64_t tile = options.rowsPerIteration;
    e.ifThen(shapesOk, [&] {
      e.versionWithCache({k, gate, ape, pooled}, [&](ArrayRef<Value> v) {
        lowerRows(e, v[0], v[1], v[2], v[3], iro, pro, cache, tile);
      });
    });
  }

  /// The loop over the rows of `pooled`, on one stride version: one row per
  /// iteration, or `tile` consecutive rows (see lowerTile).
  static void lowerRows(Emitter &e, Value k, Value gate, Value ape,
                        Value pooled, Value iro, Value pro, Value cache,
                        int64_t tile) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    Value numRows = e.tokenRows(k, gate);
    Value batch = e.batchSize({{cache, 0}, {iro, 1}, {pro, 1}});
    Value rows = e.dim(pooled, 0);
    Value work = tile > 1 ? arith::CeilDivUIOp::create(b, loc, rows, e.idx(tile))
                                .getResult()
                          : rows;
    // With a status word, iteration b also checks request b's metadata.
    Value iterations =
        e.status ? arith::MaxSIOp::create(b, loc, work, batch).getResult()
                 : work;
    e.parallelFor(iterations, [&](Value r) {
      e.ifThen(e.status ? e.cmp(arith::CmpIPredicate::ult, r, work) : Value(),
               [&] {
        if (tile > 1)
          return lowerTile(e, k, gate, ape, pooled, iro, pro, cache, numRows,
                           batch, rows, r, tile);
        Value row = e.toI64(r);
        // The request that claims the row (the contract's per-request
        // guard): valid metadata finds it by binary search.
        Value owner = e.findClaimant(pro, iro, cache, batch, row, numRows);
        e.ifThen(e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)), [&] {
          Value bIdx = e.toIndex(owner);
          Value next = arith::AddIOp::create(b, loc, bIdx, e.idx(1));
          lowerRow(e, k, gate, ape, pooled, iro, cache, numRows, bIdx, row,
                   e.loadU32(pro, bIdx), e.loadU32(pro, next));
        });
      });
      e.ifStatus([&] {
        e.ifThen(e.cmp(arith::CmpIPredicate::ult, r, batch),
                 [&] { recordRequest(e, iro, pro, cache, numRows, rows, r); });
      });
    });
  }

  /// Rows `[t * tile, min((t + 1) * tile, rows))` of `pooled` in order: a
  /// row inside the rows its predecessor's request claims is that
  /// request's next pool; any other row searches for its claimant
  /// (findClaimant). With valid metadata a tile searches once per request
  /// it meets, and once per row no request claims (compress's rows past
  /// pro[B] of a larger output: bad metadata may still claim them, so they
  /// cannot be skipped; kpool.step bounds its tiles by the total it
  /// scanned). A row several requests claim gets one of their pools, as
  /// the contract allows.
  static void lowerTile(Emitter &e, Value k, Value gate, Value ape,
                        Value pooled, Value iro, Value pro, Value cache,
                        Value numRows, Value batch, Value rows, Value t,
                        int64_t tile) {
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
      Value owner = e.findClaimant(pro, iro, cache, batch, row, numRows);
      auto found = scf::IfOp::create(
          b, loc, TypeRange(SmallVector<Type>(5, i64)),
          e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)),
          /*withElseRegion=*/true);
      scf::YieldOp::create(b, loc, found.getResults());
      b.setInsertionPointToStart(found.thenBlock());
      Value bIdx = e.toIndex(owner);
      Value lo = e.loadU32(pro, bIdx);
      Value hi = e.loadU32(pro, arith::AddIOp::create(b, loc, bIdx, e.idx(1)));
      auto req = e.loadRequest(iro, cache, bIdx, numRows);
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
      scf::YieldOp::create(b, loc,
                           ValueRange{owner, lo, claimEnd, memberBase,
                                      entryBase});
      b.setInsertionPointToStart(found.elseBlock());
      scf::YieldOp::create(b, loc, none);
    }
    ValueRange now = claim.getResults();
    e.ifThen(e.cmp(arith::CmpIPredicate::sge, now[0], e.i64(0)), [&] {
      Value first = arith::AddIOp::create(
          b, loc, now[3], arith::MulIOp::create(b, loc, row, e.i64(e.kpool)));
      poolClaimedRow(e, k, gate, ape, pooled, numRows, e.toIndex(now[0]), row,
                     first, arith::AddIOp::create(b, loc, now[4], row));
    });
    scf::YieldOp::create(b, loc, now);
  }

  /// Records the findings of request `bIdx` (index): its rows against the
  /// `numRows` of `k`, its output range against its pools and against the
  /// `rows` (index) of `pooled`.
  static void recordRequest(Emitter &e, Value iro, Value pro, Value cache,
                            Value numRows, Value rows, Value bIdx) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    SmallVector<Emitter::Check> checks = e.rowChecks(iro, bIdx, numRows);
    auto range = e.poolRange(e.loadRequest(iro, cache, bIdx, numRows));
    Value lo = e.loadU32(pro, bIdx);
    Value hi = e.loadU32(pro, arith::AddIOp::create(b, loc, bIdx, e.idx(1)));
    Value got = arith::SubIOp::create(b, loc, hi, lo);
    checks.push_back({e.cmp(arith::CmpIPredicate::ne, got, range.count),
                      Finding::PoolRangeMismatch});
    checks.push_back({e.cmp(arith::CmpIPredicate::ugt, hi, e.toI64(rows)),
                      Finding::PoolRowsPastOutput});
    e.record(bIdx, checks);
  }

  /// Row `row` (i64) of `pooled` for request `bIdx` (index), whose output
  /// range is `[lo, hi)` (i64): pool `j = row - lo` of the request when the
  /// row is in the range and the request has that pool.
  static void lowerRow(Emitter &e, Value k, Value gate, Value ape,
                       Value pooled, Value iro, Value cache, Value numRows,
                       Value bIdx, Value row, Value lo, Value hi) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    auto req = e.loadRequest(iro, cache, bIdx, numRows);
    auto range = e.poolRange(req);
    Value j = arith::SubIOp::create(b, loc, row, lo);
    Value valid = arith::AndIOp::create(
        b, loc, e.cmp(arith::CmpIPredicate::ult, row, hi),
        e.cmp(arith::CmpIPredicate::ult, j, range.count));
    e.ifThen(valid, [&] {
      Value first = arith::AddIOp::create(
          b, loc, arith::AddIOp::create(b, loc, req.start, range.skip),
          arith::MulIOp::create(b, loc, j, e.i64(e.kpool)));
      poolClaimedRow(e, k, gate, ape, pooled, numRows, bIdx, row, first,
                     arith::AddIOp::create(b, loc, range.first, j));
    });
  }

  /// Row `row` (i64) of `pooled`, which request `bIdx` (index) claims: the
  /// pool whose first member is row `first` (i64) of `k` and `gate`, and
  /// whose id is `id` (i64; its pool-cache entry).
  static void poolClaimedRow(Emitter &e, Value k, Value gate, Value ape,
                             Value pooled, Value numRows, Value bIdx,
                             Value row, Value first, Value id) {
    e.prefetchMembers(k, gate, first, numRows);
    poolMembers(e, k, gate, ape, first, pooled, row);
    e.storeEntry(bIdx, id, e.rowView(pooled, row));
  }

  /// Pooled row `row` of `pooled`: the pool whose members are the rows
  /// `first + m` of `k` and `gate`.
  static void poolMembers(Emitter &e, Value k, Value gate, Value ape,
                          Value first, Value pooled, Value row) {
    auto member = [&](Value m) -> std::pair<Value, Value> {
      Value memberRow = arith::AddIOp::create(e.b, e.loc, first, m);
      return {e.rowView(k, memberRow), e.rowView(gate, memberRow)};
    };
    if (!e.unrolledPools())
      return e.poolRowLoop(member, ape, e.rowView(pooled, row));
    SmallVector<Value> keys, gates;
    for (int64_t m = 0; m < e.kpool; ++m) {
      auto [key, g] = member(e.i64(m));
      keys.push_back(key);
      gates.push_back(g);
    }
    e.poolRow(keys, gates, ape, e.rowView(pooled, row));
  }
};

struct RingCloseLowering : public KPoolLowering<RingCloseOp> {
  RingCloseLowering(MLIRContext *context, const KPoolToLinalgOptions &options)
      : KPoolLowering(context), options(options) {}

  /// `unroll-members`.
  KPoolToLinalgOptions options;

  /// The operands one stride version of the lowering works on.
  struct Operands {
    Value tail, k, gate, ape, pooled, closed, iro, cache, slots;
  };

  /// What a batch row knows about its request's pending pool.
  struct PendingRow {
    Value closes; ///< i1: the row closes a pool (false past num_requests)
    Value held;   ///< members of the pool in the ring (i64)
    Value id;     ///< the pool's id (i64)
    Value slot;   ///< the request's ring slot (i64)
    Value start;  ///< the request's first row in `k` (i64)
  };

  /// The operands of ring_close (or of kpool.step's ring_close part, whose
  /// rows are `closed`), metadata as signless memrefs.
  template <typename Adaptor>
  static Operands operandsOf(Emitter &e, Adaptor adaptor, Value pooled) {
    Operands o;
    o.tail = adaptor.getTail();
    o.k = adaptor.getK();
    o.gate = adaptor.getGate();
    o.ape = adaptor.getApe();
    o.pooled = pooled;
    o.closed = adaptor.getClosedPool();
    o.iro = e.signless(adaptor.getInputRowOffsets());
    o.cache = e.signless(adaptor.getCacheLengths());
    o.slots = e.signless(adaptor.getSlotIdx());
    return o;
  }

  /// The runtime shape guard of ring_close's operands.
  static Value shapesMatch(Emitter &e, const Operands &o) {
    int64_t D = e.headDim;
    return e.ringShapesMatch({{o.k, 1, D},
                              {o.gate, 1, D},
                              {o.ape, 0, e.kpool},
                              {o.ape, 1, D},
                              {o.tail, 1, 2},
                              {o.tail, 3, D},
                              {o.pooled, 1, D}},
                             o.tail);
  }

  void lower(RingCloseOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    Emitter e = emitterFor(op, b, op.getHeadDim());
    e.unrollMembers = options.unrollMembers;
    e.setCacheDest(op, adaptor);
    e.setStatus(adaptor);
    Operands o = operandsOf(e, adaptor, adaptor.getPooled());
    Value shapesOk = e.both(shapesMatch(e, o), e.cacheExtentsMatch());
    Value numRequests = adaptor.getNumRequests();
    e.ifThenOtherwise(
        shapesOk,
        [&] {
          e.versionWithCache(
              {o.tail, o.k, o.gate, o.ape, o.pooled}, [&](ArrayRef<Value> v) {
                Operands version = o;
                version.tail = v[0];
                version.k = v[1];
                version.gate = v[2];
                version.ape = v[3];
                version.pooled = v[4];
                lowerRows(e, version, numRequests);
              });
        },
        [&] { lowerMismatch(e, o); });
  }

  /// The loop over batch rows, on one stride version.
  static void lowerRows(Emitter &e, const Operands &o, Value numRequests) {
    OpBuilder &b = e.b;
    Emitter::RingBatch batch =
        e.ringBatch(o.k, o.gate, o.iro, o.cache, o.slots, o.tail, numRequests);
    Value rowsP = e.dim(o.pooled, 0), rowsC = e.dim(o.closed, 0);
    Value rows = e.withStatusIteration(
        arith::MaxSIOp::create(b, e.loc, rowsP, rowsC));
    e.parallelFor(rows, [&](Value bIdx) {
      e.recordRingRequest(batch, bIdx, o.iro, o.slots);
      lowerRow(e, o, batch, bIdx, rowsP, rowsC);
    });
  }

  /// Batch row `bIdx` (index, below the larger of the row counts `rowsP` of
  /// `pooled` and `rowsC` of `closed_pool`): its `closed_pool` entry and its
  /// `pooled` row, each where it exists.
  static void lowerRow(Emitter &e, const Operands &o,
                       const Emitter::RingBatch &batch, Value bIdx,
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
            e.storeEntry(bIdx, pending.id, outRow);
          },
          [&] { e.zeroRow(outRow); });
    });
  }

  /// Row `bIdx`'s pending pool: its request's when `bIdx < num_requests`
  /// and the slot exists, else none (`closes` false, the rest 0).
  static PendingRow pendingRow(Emitter &e, const Operands &o,
                               const Emitter::RingBatch &batch, Value bIdx) {
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
          Value no = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
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
  static void closePool(Emitter &e, const Operands &o, Value window,
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
          [&](Value m) {
            return member(m, e.ringRowAfter(base, m, window));
          },
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

  /// The extents contradict the op: nothing is computed, but what the
  /// contract defines for every row is still written (-1 and a zero row), so
  /// that a tensor.empty destination is never left undefined.
  static void lowerMismatch(Emitter &e, const Operands &o) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    llvm::SaveAndRestore<std::string> name(e.kernelName,
                                           "ring_close_mismatch");
    Value rowsP = e.dim(o.pooled, 0), rowsC = e.dim(o.closed, 0);
    Value cols = e.dim(o.pooled, 1);
    Value rows = arith::MaxSIOp::create(b, loc, rowsP, rowsC);
    e.parallelFor(rows, [&](Value bIdx) {
      lowerMismatchRow(e, o, bIdx, rowsP, rowsC, cols);
    });
  }

  /// Batch row `bIdx` when the extents contradict the op: -1 and a zero
  /// row of `cols` channels, each where it exists (`rowsP`, `rowsC` as in
  /// lowerRow).
  static void lowerMismatchRow(Emitter &e, const Operands &o, Value bIdx,
                               Value rowsP, Value rowsC, Value cols) {
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
};

struct SeedTailLowering : public KPoolLowering<SeedTailOp> {
  using KPoolLowering::KPoolLowering;

  void lower(SeedTailOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    int64_t D = op.getHeadDim();
    Emitter e = emitterFor(op, b, D);
    Value tail = adaptor.getTail(), k = adaptor.getK();
    Value gate = adaptor.getGate();
    Value iro = e.signless(adaptor.getInputRowOffsets());
    Value cache = e.signless(adaptor.getCacheLengths());
    Value slots = e.signless(adaptor.getSlotIdx());
    e.setStatus(adaptor);
    Value shapesOk = e.ringShapesMatch(
        {{k, 1, D}, {gate, 1, D}, {tail, 1, 2}, {tail, 3, D}}, tail);
    Value numRequests = adaptor.getNumRequests();
    e.ifThen(shapesOk, [&] {
      e.versionOnUnitStride({tail, k, gate}, [&](ArrayRef<Value> v) {
        Value tail = v[0], k = v[1], gate = v[2];
        Emitter::RingBatch batch =
            e.ringBatch(k, gate, iro, cache, slots, tail, numRequests);
        e.parallelFor(e.withStatusIteration(batch.numRequests),
                      [&](Value bIdx) {
          e.recordRingRequest(batch, bIdx, iro, slots);
          e.ifThen(e.status ? e.cmp(arith::CmpIPredicate::ult, bIdx,
                                    batch.numRequests)
                            : Value(),
                   [&] {
                     lowerRequest(e, tail, k, gate, iro, cache, slots, batch,
                                  bIdx);
                   });
        });
      });
    });
  }

  /// Request `bIdx` (index, below the clamped `num_requests`): its trailing
  /// positions into its ring slot when the slot exists.
  static void lowerRequest(Emitter &e, Value tail, Value k, Value gate,
                           Value iro, Value cache, Value slots,
                           const Emitter::RingBatch &batch, Value bIdx) {
    auto req = e.loadRequest(iro, cache, bIdx, batch.numRows);
    Value slot = e.loadU32(slots, bIdx);
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, slot, batch.numSlots),
             [&] { copyTail(e, tail, k, gate, req, slot, batch.window); });
  }

  /// Copies the key and gate rows of the trailing (at most R) positions of
  /// `req` into its ring slot.
  static void copyTail(Emitter &e, Value tail, Value k, Value gate,
                       const MetadataBuilder::Request &req, Value slot,
                       Value window) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    auto [begin, end] = e.ringTail(req, window);
    // One remainder per request: the rows of the positions follow from the
    // first one's.
    Value firstRow = e.ringRow(begin, window);
    auto loop = scf::ForOp::create(b, loc, e.toIndex(begin), e.toIndex(end),
                                   e.idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value q = e.toI64(loop.getInductionVar());
    Value row = arith::AddIOp::create(
        b, loc, req.start, arith::SubIOp::create(b, loc, q, req.cached));
    Value member = e.toIndex(e.ringRowAfter(
        firstRow, arith::SubIOp::create(b, loc, q, begin), window));
    auto ringRow = [&](int64_t which) {
      return e.channelView(
          tail, {e.toIndex(slot), b.getIndexAttr(which), member});
    };
    linalg::CopyOp::create(b, loc, e.rowView(k, row), ringRow(0));
    linalg::CopyOp::create(b, loc, e.rowView(gate, row), ringRow(1));
  }
};

struct PoolOffsetsLowering : public KPoolLowering<PoolOffsetsOp> {
  using KPoolLowering::KPoolLowering;

  void lower(PoolOffsetsOp op, OpAdaptor adaptor,
             OpBuilder &rewriter) const override {
    Emitter e = emitterFor(op, rewriter, /*headDim=*/1);
    Value iro = e.signless(adaptor.getInputRowOffsets());
    Value cache = e.signless(adaptor.getCacheLengths());
    Value out = e.signless(adaptor.getPoolRowOffsets());
    e.setStatus(adaptor);
    Value batch = e.batchSize({{cache, 0}, {iro, 1}});
    Value length = e.dim(out, 0);
    // A sequential scan, wrapped in a one-iteration parallel loop so that GPU
    // mappings run it on the device next to its operands.
    e.parallelFor(e.idx(1),
                  [&](Value) { lowerScan(e, iro, cache, out, batch, length); });
  }

  /// The scan itself: entries `[0, batch]` of `out` (`length` entries) get
  /// the prefix sums of the pool counts, the rest the total.
  static void lowerScan(Emitter &e, Value iro, Value cache, Value out,
                        Value batch, Value length) {
    OpBuilder &rewriter = e.b;
    Location loc = e.loc;
    // Without `k` there is no row count to check against: only reversed
    // offsets are caught here (any u32 end is below 2^32).
    Value noRowLimit = e.noRowLimit();
    Type i32 = rewriter.getI32Type();
    auto store = [&](Value acc, Value at) {
      e.ifThen(e.cmp(arith::CmpIPredicate::ult, at, length), [&] {
        Value v = arith::TruncIOp::create(rewriter, loc, i32, acc);
        memref::StoreOp::create(rewriter, loc, v, out, ValueRange{at});
      });
    };
    {
      auto loop = scf::ForOp::create(rewriter, loc, e.idx(0), batch, e.idx(1),
                                     ValueRange{e.i64(0)});
      {
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(loop.getBody());
        Value bIdx = loop.getInductionVar();
        Value acc = loop.getRegionIterArg(0);
        store(acc, bIdx);
        e.ifStatus(
            [&] { e.record(bIdx, e.rowChecks(iro, bIdx, noRowLimit)); });
        auto range = e.poolRange(e.loadRequest(iro, cache, bIdx, noRowLimit));
        Value next = arith::AddIOp::create(rewriter, loc, acc, range.count);
        scf::YieldOp::create(rewriter, loc, next);
      }
      store(loop.getResult(0), batch);
      // Entries past the requests that have offsets and a cache length:
      // those requests bring no pools, so they repeat the total (every
      // entry of `pool_row_offsets` is written).
      auto rest = scf::ForOp::create(
          rewriter, loc, arith::AddIOp::create(rewriter, loc, batch, e.idx(1)),
          length, e.idx(1));
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(rest.getBody()->getTerminator());
      store(loop.getResult(0), rest.getInductionVar());
    }
  }
};

/// kpool.step: the four ops of a serving step in one parallel loop (see the
/// op's description for the ordering design). Iterations `[0, W)` are batch
/// rows, `W` the longest of ring_close's outputs and `pool_row_offsets`:
/// ring_close's row, then seed_tail of the same request, then the offsets
/// entry. Iterations `[W, W + P)` are the rows of `pooled`. Each part keeps
/// its op's extent checks and guards, and the pooling function is the one
/// of every op, so the results are the four ops' bit for bit.
struct StepLowering : public KPoolLowering<StepOp> {
  StepLowering(MLIRContext *context, const KPoolToLinalgOptions &options)
      : KPoolLowering(context), options(options) {}

  /// `step-offsets=scan`: pool offsets by a sequential scan before the
  /// loop, pooled rows by a search over them (the CPU's choice: one O(B)
  /// pass instead of O(B) per item), `rows-per-iteration` of them per
  /// iteration; otherwise every item walks the counts inside the one loop
  /// (one GPU launch). `prefetch-pools`, for the pooled rows (see
  /// Emitter::prefetchMembers).
  KPoolToLinalgOptions options;

  void lower(StepOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    int64_t D = op.getHeadDim();
    Emitter e = emitterFor(op, b, D);
    e.prefetchPools = options.prefetchPools;
    e.unrollMembers = options.unrollMembers;
    e.setCacheDest(op, adaptor);
    e.setStatus(adaptor);
    RingCloseLowering::Operands o =
        RingCloseLowering::operandsOf(e, adaptor, adaptor.getClosed());
    Value pro = e.signless(adaptor.getPoolRowOffsets());
    Value pooled = adaptor.getPooled();
    // The extent checks of each op, on its own operands.
    Checks checks;
    checks.ringClose =
        e.both(RingCloseLowering::shapesMatch(e, o), e.cacheExtentsMatch());
    checks.seedTail = e.ringShapesMatch(
        {{o.k, 1, D}, {o.gate, 1, D}, {o.tail, 1, 2}, {o.tail, 3, D}}, o.tail);
    checks.compress = e.both(e.extentsMatch({{o.k, 1, D},
                                             {o.gate, 1, D},
                                             {o.ape, 0, e.kpool},
                                             {o.ape, 1, D},
                                             {pooled, 1, D}}),
                             e.cacheExtentsMatch());
    Value numRequests = adaptor.getNumRequests();
    e.versionWithCache(
        {o.tail, o.k, o.gate, o.ape, o.pooled, pooled},
        [&](ArrayRef<Value> v) {
          RingCloseLowering::Operands version = o;
          version.tail = v[0];
          version.k = v[1];
          version.gate = v[2];
          version.ape = v[3];
          version.pooled = v[4];
          lowerItems(e, version, pro, v[5], numRequests, checks,
                     options.scanStepOffsets,
                     options.scanStepOffsets ? options.rowsPerIteration : 1);
        });
  }

  /// The i1 extent checks of the four parts (null: nothing to check).
  struct Checks {
    Value ringClose, seedTail, compress;
  };

  static void lowerItems(Emitter &e, const RingCloseLowering::Operands &o,
                         Value pro, Value pooled, Value numRequests,
                         const Checks &checks, bool scan, int64_t tile) {
    OpBuilder &b = e.b;
    Location loc = e.loc;
    Emitter::RingBatch batch =
        e.ringBatch(o.k, o.gate, o.iro, o.cache, o.slots, o.tail, numRequests);
    Value offsets = e.dim(pro, 0);
    Value rowsP = e.dim(o.pooled, 0), rowsC = e.dim(o.closed, 0);
    Value cols = e.dim(o.pooled, 1);
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
      PoolOffsetsLowering::lowerScan(e, o.iro, o.cache, pro, offsetsBatch,
                                     offsets);
      auto last = scf::IfOp::create(
          b, loc, e.cmp(arith::CmpIPredicate::ult, compressBatch, offsets),
          [&](OpBuilder &, Location) {
            scf::YieldOp::create(b, loc, e.loadU32(pro, compressBatch));
          },
          [&](OpBuilder &, Location) {
            scf::YieldOp::create(b, loc, e.i64(0));
          });
      total = last.getResult(0);
    }
    e.parallelFor(items, [&](Value i) {
      e.ifThenElse(
          e.cmp(arith::CmpIPredicate::ult, i, batchRows),
          [&] {
            // ring_close reads the request's ring rows before seed_tail of
            // the same request overwrites them: same iteration, same
            // channel-to-thread mapping, in this order.
            e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, closeRows), [&] {
              e.ifThenOtherwise(
                  checks.ringClose,
                  [&] {
                    RingCloseLowering::lowerRow(e, o, batch, i, rowsP, rowsC);
                  },
                  [&] {
                    RingCloseLowering::lowerMismatchRow(e, o, i, rowsP, rowsC,
                                                        cols);
                  });
            });
            e.ifThen(
                e.both(checks.seedTail,
                       e.cmp(arith::CmpIPredicate::ult, i, batch.numRequests)),
                [&] {
                  SeedTailLowering::lowerRequest(e, o.tail, o.k, o.gate, o.iro,
                                                 o.cache, o.slots, batch, i);
                });
            e.recordRingRequest(batch, i, o.iro, o.slots);
            if (!scan)
            e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, offsets), [&] {
              Value end = e.minIndex({i, offsetsBatch});
              Value acc = poolsBefore(e, o.iro, o.cache, end);
              Value v = arith::TruncIOp::create(b, loc, b.getI32Type(), acc);
              memref::StoreOp::create(b, loc, v, pro, ValueRange{i});
              e.ifStatus([&] {
                recordPooledRequest(e, o, pooled, offsetsBatch, batch.numRows,
                                    i, acc);
              });
            });
            if (scan)
              e.ifStatus([&] {
                e.ifThen(e.cmp(arith::CmpIPredicate::ult, i, offsets), [&] {
                  recordPooledRequest(e, o, pooled, offsetsBatch,
                                      batch.numRows, i, e.loadU32(pro, i));
                });
              });
          },
          [&] {
            Value r = arith::SubIOp::create(b, loc, i, batchRows);
            e.ifThen(checks.compress, [&] {
              if (!scan)
                return lowerPooledRow(e, o, pooled, compressBatch,
                                      batch.numRows, e.toI64(r));
              // compress's row, over the offsets the scan wrote.
              if (tile > 1) {
                // Rows at or past the total are claimed by no request.
                Value bound = e.toIndex(arith::MinUIOp::create(
                    b, loc, total, e.toI64(e.dim(pooled, 0))));
                return CompressLowering::lowerTile(
                    e, o.k, o.gate, o.ape, pooled, o.iro, pro, o.cache,
                    batch.numRows, compressBatch, bound, r, tile);
              }
              Value row = e.toI64(r);
              e.ifThen(e.cmp(arith::CmpIPredicate::ult, row, total), [&] {
              Value owner = e.findClaimant(pro, o.iro, o.cache, compressBatch,
                                           row, batch.numRows);
              e.ifThen(e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)), [&] {
                Value bIdx = e.toIndex(owner);
                Value next = arith::AddIOp::create(b, loc, bIdx, e.idx(1));
                CompressLowering::lowerRow(e, o.k, o.gate, o.ape, pooled, o.iro,
                                           o.cache, batch.numRows, bIdx, row,
                                           e.loadU32(pro, bIdx),
                                           e.loadU32(pro, next));
              });
              });
            });
          });
    });
  }

  /// Records the findings of the compress part for request `bIdx` (index,
  /// below `offsetsBatch` for there to be one) whose pools start at row
  /// `start` (i64): its rows against `numRows`, and its pools against the
  /// capacity of `pooled`. Call it under ifStatus.
  static void recordPooledRequest(Emitter &e,
                                  const RingCloseLowering::Operands &o,
                                  Value pooled, Value offsetsBatch,
                                  Value numRows, Value bIdx, Value start) {
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, offsetsBatch), [&] {
      SmallVector<Emitter::Check> checks = e.rowChecks(o.iro, bIdx, numRows);
      Value noRowLimit = e.noRowLimit();
      auto range = e.poolRange(e.loadRequest(o.iro, o.cache, bIdx, noRowLimit));
      Value end = arith::AddIOp::create(e.b, e.loc, start, range.count);
      checks.push_back({e.cmp(arith::CmpIPredicate::ugt, end,
                              e.toI64(e.dim(pooled, 0))),
                        Finding::PooledCapacity});
      e.record(bIdx, checks);
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

  /// Row `row` (i64) of `pooled`: the request whose range of the prefix
  /// sums holds it, found by walking the pool counts of requests below
  /// `batch` (index), then compress's row.
  static void lowerPooledRow(Emitter &e, const RingCloseLowering::Operands &o,
                             Value pooled, Value batch, Value numRows,
                             Value row) {
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
                Value no =
                    arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
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
      auto range =
          e.poolRange(e.loadRequest(o.iro, o.cache, owner, noRowLimit));
      Value hi = arith::AddIOp::create(b, loc, lo, range.count);
      CompressLowering::lowerRow(e, o.k, o.gate, o.ape, pooled, o.iro,
                                 o.cache, numRows, owner, row, lo, hi);
    });
  }
};

} // namespace

void mlir::kpool::populateKPoolToLinalgConversionPatterns(
    RewritePatternSet &patterns, const KPoolToLinalgOptions &options) {
  patterns.add<SeedTailLowering, PoolOffsetsLowering>(patterns.getContext());
  patterns.add<RingCloseLowering>(patterns.getContext(), options);
  patterns.add<CompressLowering>(patterns.getContext(), options);
  patterns.add<StepLowering>(patterns.getContext(), options);
}
