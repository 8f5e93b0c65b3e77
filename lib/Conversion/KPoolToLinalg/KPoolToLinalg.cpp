//===- KPoolToLinalg.cpp - lower kpool ops to linalg and scf --------------===//
//
// Lowers the buffer form of the kpool ops to structured IR: parallel loops
// over pooled rows or requests, and one `linalg.generic` over the channels of
// each pooled row. The pooling arithmetic comes from Utils/Pooling.h and the
// metadata arithmetic from Utils/Metadata.h; this file only arranges them and
// places the guards that keep every access inside the operands.
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Utils/Metadata.h"
#include "kpool/Dialect/KPool/Utils/Pooling.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/SaveAndRestore.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_CONVERTKPOOLTOLINALGPASS
#include "kpool/Conversion/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

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
  /// The loop is tagged with the kernel it becomes (`kKernelNameAttrName`):
  /// the op's name, with `_strided` for the general-stride copy.
  void parallelFor(Value ub, function_ref<void(Value)> fn) {
    auto par = scf::ParallelOp::create(b, loc, ValueRange{idx(0)},
                                       ValueRange{ub}, ValueRange{idx(1)});
    par->setAttr(kKernelNameAttrName,
                 b.getStringAttr("kpool_" + kernelName +
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

  Value zeroRow(Value outRow) {
    Type elt = cast<MemRefType>(outRow.getType()).getElementType();
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
    linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{outRow});
    return outRow;
  }

  OpBuilder &b;
  Location loc;
  int64_t kpool;
  int64_t headDim;
  std::string kernelName;
  bool generalStrides = false;
};

/// Base pattern: only the buffer form is lowered here.
template <typename OpTy> struct KPoolLowering : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected the buffer form");
    lower(op, rewriter);
    rewriter.eraseOp(op);
    return success();
  }

  virtual void lower(OpTy op, PatternRewriter &rewriter) const = 0;
};

struct CompressLowering : public KPoolLowering<CompressOp> {
  using KPoolLowering::KPoolLowering;

  void lower(CompressOp op, PatternRewriter &rewriter) const override {
    int64_t K = op.getKpool(), D = op.getHeadDim();
    Emitter e(rewriter, op.getLoc(), K, D, op->getName().stripDialect().str());
    Value k = op.getK(), gate = op.getGate(), ape = op.getApe();
    Value pooled = op.getPooled();
    Value iro = e.signless(op.getInputRowOffsets());
    Value pro = e.signless(op.getPoolRowOffsets());
    Value cache = e.signless(op.getCacheLengths());
    Value shapesOk = e.extentsMatch(
        {{k, 1, D}, {gate, 1, D}, {ape, 0, K}, {ape, 1, D}, {pooled, 1, D}});
    e.ifThen(shapesOk, [&] {
      e.versionOnUnitStride({k, gate, ape, pooled}, [&](ArrayRef<Value> v) {
        Value k = v[0], gate = v[1], ape = v[2], pooled = v[3];
        Value numRows = e.toI64(e.minIndex({e.dim(k, 0), e.dim(gate, 0)}));
        Value one = e.idx(1);
        Value batch = e.minIndex(
            {e.dim(cache, 0),
             arith::SubIOp::create(rewriter, e.loc, e.dim(iro, 0), one),
             arith::SubIOp::create(rewriter, e.loc, e.dim(pro, 0), one)});
        e.parallelFor(e.dim(pooled, 0), [&](Value r) {
          Value row = e.toI64(r);
          // The request that claims the row (the contract's per-request
          // guard): valid metadata finds it by binary search.
          Value owner = e.findClaimant(pro, iro, cache, batch, row, numRows);
          e.ifThen(e.cmp(arith::CmpIPredicate::sge, owner, e.i64(0)), [&] {
            Value bIdx = e.toIndex(owner);
            Value next = arith::AddIOp::create(rewriter, e.loc, bIdx, one);
            Value lo = e.loadU32(pro, bIdx), hi = e.loadU32(pro, next);
            auto req = e.loadRequest(iro, cache, bIdx, numRows);
            auto range = e.poolRange(req);
            Value j = arith::SubIOp::create(rewriter, e.loc, row, lo);
            Value valid = arith::AndIOp::create(
                rewriter, e.loc, e.cmp(arith::CmpIPredicate::ult, row, hi),
                e.cmp(arith::CmpIPredicate::ult, j, range.count));
            e.ifThen(valid, [&] {
              Value first = arith::AddIOp::create(
                  rewriter, e.loc,
                  arith::AddIOp::create(rewriter, e.loc, req.start, range.skip),
                  arith::MulIOp::create(rewriter, e.loc, j, e.i64(K)));
              if (K > kMaxUnrolledMembers) {
                e.poolRowLoop(
                    [&](Value m) -> std::pair<Value, Value> {
                      Value member =
                          arith::AddIOp::create(rewriter, e.loc, first, m);
                      return {e.rowView(k, member), e.rowView(gate, member)};
                    },
                    ape, e.rowView(pooled, row));
                return;
              }
              SmallVector<Value> keys, gates;
              for (int64_t m = 0; m < K; ++m) {
                Value member =
                    arith::AddIOp::create(rewriter, e.loc, first, e.i64(m));
                keys.push_back(e.rowView(k, member));
                gates.push_back(e.rowView(gate, member));
              }
              e.poolRow(keys, gates, ape, e.rowView(pooled, row));
            });
          });
        });
      });
    });
  }
};

struct RingCloseLowering : public KPoolLowering<RingCloseOp> {
  using KPoolLowering::KPoolLowering;

  void lower(RingCloseOp op, PatternRewriter &rewriter) const override {
    int64_t K = op.getKpool(), D = op.getHeadDim();
    Emitter e(rewriter, op.getLoc(), K, D, op->getName().stripDialect().str());
    Location loc = op.getLoc();
    Value tail = op.getTail(), k = op.getK(), gate = op.getGate();
    Value ape = op.getApe(), pooled = op.getPooled();
    Value closed = op.getClosedPool();
    Value iro = e.signless(op.getInputRowOffsets());
    Value cache = e.signless(op.getCacheLengths());
    Value slots = e.signless(op.getSlotIdx());
    Value shapesOk = e.both(e.extentsMatch({{k, 1, D},
                                            {gate, 1, D},
                                            {ape, 0, K},
                                            {ape, 1, D},
                                            {tail, 1, 2},
                                            {tail, 3, D},
                                            {pooled, 1, D}}),
                            e.ringWindowOk(tail));
    e.ifThenOtherwise(
        shapesOk,
        [&] {
          e.versionOnUnitStride({tail, k, gate, ape, pooled}, [&](ArrayRef<
                                                                  Value>
                                                                      v) {
            Value tail = v[0], k = v[1], gate = v[2], ape = v[3], pooled = v[4];
            Value numRows = e.toI64(e.minIndex({e.dim(k, 0), e.dim(gate, 0)}));
            Value batch = e.minIndex(
                {e.dim(cache, 0),
                 arith::SubIOp::create(rewriter, loc, e.dim(iro, 0), e.idx(1)),
                 e.dim(slots, 0)});
            Value numRequests = e.clampNumRequests(op.getNumRequests(), batch);
            Value numSlots = e.toI64(e.dim(tail, 0));
            Value window = e.ringWindow(tail);
            Value rowsP = e.dim(pooled, 0), rowsC = e.dim(closed, 0);
            Value rows = arith::MaxSIOp::create(rewriter, loc, rowsP, rowsC);
            e.parallelFor(rows, [&](Value bIdx) {
              // closes, held, pool id, slot, first row.
              auto meta = scf::IfOp::create(
                  rewriter, loc,
                  e.cmp(arith::CmpIPredicate::ult, bIdx, numRequests),
                  [&](OpBuilder &, Location) {
                    auto req = e.loadRequest(iro, cache, bIdx, numRows);
                    auto pending = e.pendingPool(req);
                    Value slot = e.loadU32(slots, bIdx);
                    Value closes = arith::AndIOp::create(
                        rewriter, loc, pending.closes,
                        e.cmp(arith::CmpIPredicate::ult, slot, numSlots));
                    scf::YieldOp::create(rewriter, loc,
                                         ValueRange{closes, pending.held,
                                                    pending.id, slot,
                                                    req.start});
                  },
                  [&](OpBuilder &, Location) {
                    Value no = arith::ConstantIntOp::create(
                        rewriter, loc, rewriter.getI1Type(), 0);
                    Value zero = e.i64(0);
                    scf::YieldOp::create(
                        rewriter, loc, ValueRange{no, zero, zero, zero, zero});
                  });
              Value closes = meta.getResult(0), held = meta.getResult(1);
              Value id = meta.getResult(2), slot = meta.getResult(3);
              Value start = meta.getResult(4);

              e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsC), [&] {
                Value id32 = arith::TruncIOp::create(rewriter, loc,
                                                     rewriter.getI32Type(), id);
                Value none = arith::ConstantIntOp::create(
                    rewriter, loc, rewriter.getI32Type(), -1);
                Value value =
                    arith::SelectOp::create(rewriter, loc, closes, id32, none);
                memref::StoreOp::create(rewriter, loc, value, closed,
                                        ValueRange{bIdx});
              });
              e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsP), [&] {
                Value outRow = e.rowView(pooled, e.toI64(bIdx));
                e.ifThenElse(
                    closes,
                    [&] {
                      // Member m of pool `id` is position id*K + m; the
                      // ring holds it in row (id*K + m) mod R. Members below
                      // `held` are in the ring; the rest are this call's
                      // rows `start + m - held`. The unselected view is
                      // built from a clamped index and never read.
                      if (K > kMaxUnrolledMembers) {
                        Value base = e.ringRow(
                            arith::MulIOp::create(rewriter, loc, id, e.i64(K)),
                            window);
                        e.poolRowLoop(
                            [&](Value m) -> std::pair<Value, Value> {
                              Value ringRow = e.ringRowAfter(base, m, window);
                              Value fromRing =
                                  e.cmp(arith::CmpIPredicate::ult, m, held);
                              Value row = arith::SelectOp::create(
                                  rewriter, loc, fromRing, start,
                                  arith::SubIOp::create(
                                      rewriter, loc,
                                      arith::AddIOp::create(rewriter, loc,
                                                            start, m),
                                      held));
                              Value safeSlot = arith::SelectOp::create(
                                  rewriter, loc, fromRing, slot, e.i64(0));
                              return {e.selectView(fromRing,
                                                   e.ringView(tail, safeSlot, 0,
                                                              ringRow),
                                                   e.rowView(k, row)),
                                      e.selectView(fromRing,
                                                   e.ringView(tail, safeSlot, 1,
                                                              ringRow),
                                                   e.rowView(gate, row))};
                            },
                            ape, outRow);
                        return;
                      }
                      SmallVector<Value> ringRows =
                          e.memberRingRows(id, window);
                      SmallVector<Value> keys, gates;
                      for (int64_t m = 0; m < K; ++m) {
                        // Members below `held` are in the ring; the rest are
                        // this call's rows `start + m - held`. The unselected
                        // view is built from a clamped index and never read.
                        Value ringRow = ringRows[m];
                        Value fromRing =
                            e.cmp(arith::CmpIPredicate::ult, e.i64(m), held);
                        Value row = arith::SelectOp::create(
                            rewriter, loc, fromRing, start,
                            arith::SubIOp::create(
                                rewriter, loc,
                                arith::AddIOp::create(rewriter, loc, start,
                                                      e.i64(m)),
                                held));
                        Value safeSlot = arith::SelectOp::create(
                            rewriter, loc, fromRing, slot, e.i64(0));
                        keys.push_back(e.selectView(
                            fromRing, e.ringView(tail, safeSlot, 0, ringRow),
                            e.rowView(k, row)));
                        gates.push_back(e.selectView(
                            fromRing, e.ringView(tail, safeSlot, 1, ringRow),
                            e.rowView(gate, row)));
                      }
                      e.poolRow(keys, gates, ape, outRow);
                    },
                    [&] { e.zeroRow(outRow); });
              });
            });
          });
        },
        [&] {
          // The extents contradict the op: nothing is computed, but what the
          // contract defines for every row is still written (-1 and a zero
          // row), so that a tensor.empty destination is never left undefined.
          llvm::SaveAndRestore<std::string> name(e.kernelName,
                                                 "ring_close_mismatch");
          Value rowsP = e.dim(pooled, 0), rowsC = e.dim(closed, 0);
          Value cols = e.dim(pooled, 1);
          Value rows = arith::MaxSIOp::create(rewriter, loc, rowsP, rowsC);
          Type elt = cast<MemRefType>(pooled.getType()).getElementType();
          e.parallelFor(rows, [&](Value bIdx) {
            e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsC), [&] {
              Value none = arith::ConstantIntOp::create(
                  rewriter, loc, rewriter.getI32Type(), -1);
              memref::StoreOp::create(rewriter, loc, none, closed,
                                      ValueRange{bIdx});
            });
            e.ifThen(e.cmp(arith::CmpIPredicate::ult, bIdx, rowsP), [&] {
              Value zero = arith::ConstantOp::create(rewriter, loc,
                                                     rewriter.getZeroAttr(elt));
              auto loop =
                  scf::ForOp::create(rewriter, loc, e.idx(0), cols, e.idx(1));
              OpBuilder::InsertionGuard guard(rewriter);
              rewriter.setInsertionPoint(loop.getBody()->getTerminator());
              memref::StoreOp::create(rewriter, loc, zero, pooled,
                                      ValueRange{bIdx, loop.getInductionVar()});
            });
          });
        });
  }
};

struct SeedTailLowering : public KPoolLowering<SeedTailOp> {
  using KPoolLowering::KPoolLowering;

  void lower(SeedTailOp op, PatternRewriter &rewriter) const override {
    int64_t K = op.getKpool(), D = op.getHeadDim();
    Emitter e(rewriter, op.getLoc(), K, D, op->getName().stripDialect().str());
    Location loc = op.getLoc();
    Value tail = op.getTail(), k = op.getK(), gate = op.getGate();
    Value iro = e.signless(op.getInputRowOffsets());
    Value cache = e.signless(op.getCacheLengths());
    Value slots = e.signless(op.getSlotIdx());
    Value shapesOk = e.both(
        e.extentsMatch({{k, 1, D}, {gate, 1, D}, {tail, 1, 2}, {tail, 3, D}}),
        e.ringWindowOk(tail));
    e.ifThen(shapesOk, [&] {
      e.versionOnUnitStride({tail, k, gate}, [&](ArrayRef<Value> v) {
        Value tail = v[0], k = v[1], gate = v[2];
        Value numRows = e.toI64(e.minIndex({e.dim(k, 0), e.dim(gate, 0)}));
        Value batch = e.minIndex(
            {e.dim(cache, 0),
             arith::SubIOp::create(rewriter, loc, e.dim(iro, 0), e.idx(1)),
             e.dim(slots, 0)});
        Value numRequests = e.clampNumRequests(op.getNumRequests(), batch);
        Value numSlots = e.toI64(e.dim(tail, 0));
        Value window = e.ringWindow(tail);
        e.parallelFor(numRequests, [&](Value bIdx) {
          auto req = e.loadRequest(iro, cache, bIdx, numRows);
          Value slot = e.loadU32(slots, bIdx);
          e.ifThen(e.cmp(arith::CmpIPredicate::ult, slot, numSlots), [&] {
            auto [begin, end] = e.ringTail(req, window);
            // One remainder per request: the rows of the (at most R)
            // positions follow from the first one's.
            Value firstRow = e.ringRow(begin, window);
            auto loop = scf::ForOp::create(rewriter, loc, e.toIndex(begin),
                                           e.toIndex(end), e.idx(1));
            OpBuilder::InsertionGuard guard(rewriter);
            rewriter.setInsertionPoint(loop.getBody()->getTerminator());
            Value q = e.toI64(loop.getInductionVar());
            Value row = arith::AddIOp::create(
                rewriter, loc, req.start,
                arith::SubIOp::create(rewriter, loc, q, req.cached));
            Value member = e.toIndex(e.ringRowAfter(
                firstRow, arith::SubIOp::create(rewriter, loc, q, begin),
                window));
            auto ringRow = [&](int64_t which) {
              return e.channelView(
                  tail,
                  {e.toIndex(slot), rewriter.getIndexAttr(which), member});
            };
            linalg::CopyOp::create(rewriter, loc, e.rowView(k, row),
                                   ringRow(0));
            linalg::CopyOp::create(rewriter, loc, e.rowView(gate, row),
                                   ringRow(1));
          });
        });
      });
    });
  }
};

struct PoolOffsetsLowering : public KPoolLowering<PoolOffsetsOp> {
  using KPoolLowering::KPoolLowering;

  void lower(PoolOffsetsOp op, PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc(), op.getKpool(), /*headDim=*/1,
              op->getName().stripDialect().str());
    Location loc = op.getLoc();
    Value iro = e.signless(op.getInputRowOffsets());
    Value cache = e.signless(op.getCacheLengths());
    Value out = e.signless(op.getPoolRowOffsets());
    Value batch = e.minIndex(
        {e.dim(cache, 0),
         arith::SubIOp::create(rewriter, loc, e.dim(iro, 0), e.idx(1))});
    Value length = e.dim(out, 0);
    // Without `k` there is no row count to check against: only reversed
    // offsets are caught here (any u32 end is below 2^32).
    Value noRowLimit = e.i64(int64_t(1) << 32);
    Type i32 = rewriter.getI32Type();
    auto store = [&](Value acc, Value at) {
      e.ifThen(e.cmp(arith::CmpIPredicate::ult, at, length), [&] {
        Value v = arith::TruncIOp::create(rewriter, loc, i32, acc);
        memref::StoreOp::create(rewriter, loc, v, out, ValueRange{at});
      });
    };
    // A sequential scan, wrapped in a one-iteration parallel loop so that GPU
    // mappings run it on the device next to its operands.
    e.parallelFor(e.idx(1), [&](Value) {
      auto loop = scf::ForOp::create(rewriter, loc, e.idx(0), batch, e.idx(1),
                                     ValueRange{e.i64(0)});
      {
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(loop.getBody());
        Value bIdx = loop.getInductionVar();
        Value acc = loop.getRegionIterArg(0);
        store(acc, bIdx);
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
    });
  }
};

struct ConvertKPoolToLinalgPass
    : public kpool::impl::ConvertKPoolToLinalgPassBase<
          ConvertKPoolToLinalgPass> {
  void runOnOperation() override {
    bool failedTensor = false;
    getOperation()->walk([&](Operation *op) {
      auto dps = dyn_cast<DestinationStyleOpInterface>(op);
      if (!dps || !isa<KPoolDialect>(op->getDialect()) ||
          dps.hasPureBufferSemantics())
        return;
      op->emitOpError() << "has tensor operands; run one-shot-bufferize "
                           "before convert-kpool-to-linalg";
      failedTensor = true;
    });
    if (failedTensor)
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateKPoolToLinalgPatterns(patterns);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace

void mlir::kpool::populateKPoolToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<CompressLowering, RingCloseLowering, SeedTailLowering,
               PoolOffsetsLowering>(patterns.getContext());
}
