//===- ChannelLoops.cpp - a row's channel loops spread over its lanes -----===//
//
// Part of applying a kernel loop's plan: each 1-D channel op of a row
// becomes `for c = lane*V; c < D; c += lanes*V`, with V-wide vector loads and
// stores where every view of the row is unit-stride and aligned to the
// access width (checked once on the host for views of kernel operands, per
// row otherwise), and a scalar loop with the same lanes otherwise. Loads of
// row-invariant views (`ape`) are issued once per thread, before the loop
// over rows.
//
//===----------------------------------------------------------------------===//

#include "MappingDetail.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::gpu_mapping;

/// Byte alignment that a `width`-channel access of `type` is claimed (and
/// checked) to have.
static int64_t accessAlignment(MemRefType type, int64_t width) {
  return std::min(width * elementBytes(type.getElementType()), kMaxAccessBytes);
}

/// i1: the first element of `view` is aligned to `align` bytes.
static Value isAligned(OpBuilder &b, Location loc, Value view, int64_t align) {
  auto type = cast<MemRefType>(view.getType());
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(
      b, loc, b.getIndexType(), view);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, view);
  Value bytes = arith::MulIOp::create(
      b, loc, meta.getOffset(),
      arith::ConstantIndexOp::create(b, loc,
                                     elementBytes(type.getElementType())));
  Value addr = arith::AddIOp::create(b, loc, base, bytes);
  Value low = arith::AndIOp::create(
      b, loc, addr, arith::ConstantIndexOp::create(b, loc, align - 1));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, low,
                               arith::ConstantIndexOp::create(b, loc, 0));
}

/// Scalar channel loop: `for c = lane; c < D; c += lanes`.
static LogicalResult emitScalarLoop(IRRewriter &rewriter, linalg::LinalgOp op,
                                    Value lane, int64_t lanes) {
  Location loc = op.getLoc();
  Operation *clone = rewriter.clone(*op);
  FailureOr<linalg::LinalgLoops> loops =
      linalg::linalgOpToLoops(rewriter, cast<linalg::LinalgOp>(clone));
  if (failed(loops) || loops->size() != 1)
    return op.emitOpError("could not lower the channel loop to scf.for");
  rewriter.eraseOp(clone);
  auto loop = cast<scf::ForOp>(loops->front());
  rewriter.setInsertionPoint(loop);
  loop.getLowerBoundMutable().assign(lane);
  loop.getStepMutable().assign(
      arith::ConstantIndexOp::create(rewriter, loc, lanes));
  return success();
}

namespace {

/// Distributes the channel ops of one launch: its host-side alignment
/// checks and preloaded row-invariant vectors are shared by its rows.
class ChannelDistributor {
public:
  ChannelDistributor(const KernelLoopPlan &plan, const LaunchPoints &points)
      : plan(plan), points(points) {}

  /// Replaces channel op `op` by its share of the row for the lane.
  LogicalResult distribute(IRRewriter &rewriter, linalg::LinalgOp op,
                           int64_t width);

private:
  LogicalResult
  emitVectorLoop(IRRewriter &rewriter, linalg::LinalgOp op, int64_t width,
                 const DenseMap<Value, Value> &preloadable);
  Value cloneStaticView(IRRewriter &rewriter, Value v, IRMapping &mapping,
                        std::string &key, int depth = 0);
  Value preloadVector(IRRewriter &rewriter, vector::LoadOp load, Value view,
                      int64_t width, Value cond);
  Value rootAligned(IRRewriter &rewriter, Value root, int64_t align);
  Value hostAnd(IRRewriter &rewriter, Value lhs, Value rhs);

  const KernelLoopPlan &plan;
  const LaunchPoints &points;
  /// Host-side alignment checks of kernel operands, by (root, bytes).
  DenseMap<std::pair<Value, int64_t>, Value> rootChecks;
  /// Preloaded row-invariant vectors, by a key of their view chain.
  llvm::StringMap<Value> preloads;
};

} // namespace

/// Vector channel loop: `for c = lane*V; c < D; c += lanes*V`, each step a
/// V-wide vector load per input view and a vector store.
LogicalResult
ChannelDistributor::emitVectorLoop(IRRewriter &rewriter, linalg::LinalgOp op,
                                   int64_t width,
                                   const DenseMap<Value, Value> &preloadable) {
  Location loc = op.getLoc();
  int64_t lanes = plan.lanes;
  int64_t channels = op.getStaticLoopRanges().front();
  Value vec = arith::ConstantIndexOp::create(rewriter, loc, width);
  Value lb = arith::MulIOp::create(rewriter, loc, points.lane, vec);
  Value ub = arith::ConstantIndexOp::create(rewriter, loc, channels);
  Value step = arith::ConstantIndexOp::create(rewriter, loc, lanes * width);
  auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  Value c = loop.getInductionVar();
  IRMapping mapping;
  DenseMap<Value, Value> viewOfTile;
  for (Value v : viewsOf(op)) {
    auto type = cast<MemRefType>(v.getType());
    SmallVector<OpFoldResult> offsets = {c},
                              sizes = {rewriter.getIndexAttr(width)},
                              strides = {rewriter.getIndexAttr(1)};
    auto tileType =
        memref::SubViewOp::inferResultType(type, offsets, sizes, strides);
    Value tile =
        memref::SubViewOp::create(rewriter, loc, cast<MemRefType>(tileType), v,
                                  offsets, sizes, strides);
    mapping.map(v, tile);
    viewOfTile[tile] = v;
  }
  Operation *tiled = rewriter.clone(*op, mapping);
  rewriter.setInsertionPoint(tiled);
  if (failed(linalg::vectorize(rewriter, tiled)))
    return op.emitOpError("could not vectorize the channel loop");
  rewriter.eraseOp(tiled);

  // In-bounds unit-stride 1-D transfers become plain vector loads and
  // stores; they get the alignment the run-time check established.
  SmallVector<Operation *> transfers;
  loop.walk([&](Operation *nested) {
    if (isa<vector::TransferReadOp, vector::TransferWriteOp>(nested))
      transfers.push_back(nested);
  });
  RewritePatternSet patterns(rewriter.getContext());
  vector::populateVectorTransferLoweringPatterns(patterns,
                                                 /*maxTransferRank=*/1);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  if (failed(applyOpPatternsGreedily(transfers, std::move(patterns), config)))
    return op.emitOpError("could not lower the channel transfers");
  WalkResult walk = loop.walk([&](Operation *nested) {
    if (isa<vector::TransferReadOp, vector::TransferWriteOp>(nested))
      return WalkResult::interrupt();
    if (auto load = dyn_cast<vector::LoadOp>(nested))
      load.setAlignment(static_cast<uint64_t>(
          accessAlignment(load.getMemRefType(), width)));
    if (auto store = dyn_cast<vector::StoreOp>(nested))
      store.setAlignment(static_cast<uint64_t>(
          accessAlignment(store.getMemRefType(), width)));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return op.emitOpError("a channel transfer did not become a vector load "
                          "or store");

  // Exactly one step per lane (lanes * V == D): no loop.
  if (lanes * width != channels)
    return success();
  SmallVector<vector::LoadOp> loads;
  loop.walk([&](vector::LoadOp load) { loads.push_back(load); });
  rewriter.eraseOp(loop.getBody()->getTerminator());
  rewriter.inlineBlockBefore(loop.getBody(), loop, ValueRange{lb});
  rewriter.eraseOp(loop);

  // Loads of row-invariant views (`ape`) are issued once per thread,
  // before the loop over rows, and kept in registers.
  for (vector::LoadOp load : loads) {
    Value view = viewOfTile.lookup(load.getBase());
    Value cond = view ? preloadable.lookup(view) : Value();
    if (!cond)
      continue;
    if (Value hoisted = preloadVector(rewriter, load, view, width, cond))
      rewriter.replaceOp(load, hoisted);
  }
  return success();
}

/// Clones the chain of static subviews and casts that makes `v` from a
/// kernel operand at the current insertion point; null when `v` is not
/// such a chain (or a static subview might leave its source, or the loop
/// writes the operand). `key` describes the chain.
Value ChannelDistributor::cloneStaticView(IRRewriter &rewriter, Value v,
                                          IRMapping &mapping, std::string &key,
                                          int depth) {
  gpu::LaunchOp launch = points.launch;
  Region &body = launch.getBody();
  if (!definedIn(v, body)) {
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type || !type.hasStaticShape())
      return Value();
    if (plan.writesUnknown || llvm::is_contained(plan.writtenRoots, v))
      return Value();
    key += std::to_string(reinterpret_cast<uintptr_t>(v.getAsOpaquePointer()));
    return v;
  }
  if (depth > 16)
    return Value();
  Operation *def = v.getDefiningOp();
  Value source;
  if (auto sub = dyn_cast_or_null<memref::SubViewOp>(def)) {
    if (!sub.getOffsets().empty() || !sub.getSizes().empty() ||
        !sub.getStrides().empty())
      return Value();
    auto srcType = cast<MemRefType>(sub.getSource().getType());
    if (!srcType.hasStaticShape())
      return Value();
    for (auto [off, size, dim] :
         llvm::zip(sub.getStaticOffsets(), sub.getStaticSizes(),
                   srcType.getShape()))
      if (off < 0 || size < 0 || off + size > dim)
        return Value();
    source = sub.getSource();
  } else if (auto cast = dyn_cast_or_null<memref::CastOp>(def)) {
    source = cast.getSource();
  } else {
    return Value();
  }
  Value src = cloneStaticView(rewriter, source, mapping, key, depth + 1);
  if (!src)
    return Value();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << def->getName() << def->getAttrDictionary() << v.getType();
  key += "|" + text;
  mapping.map(source, src);
  return rewriter.clone(*def, mapping)->getResult(0);
}

/// `load` (of the `width`-channel tile of row-invariant `view` at
/// `lane * width`) issued in the launch's prefix under `cond` (its
/// operand's host-side alignment check), or null.
Value ChannelDistributor::preloadVector(IRRewriter &rewriter,
                                        vector::LoadOp load, Value view,
                                        int64_t width, Value cond) {
  if (!llvm::all_of(load.getIndices(),
                    [](Value i) { return matchPattern(i, m_Constant()); }))
    return Value();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(points.prefix);
  Location loc = load.getLoc();
  IRMapping mapping;
  std::string key;
  Value base = cloneStaticView(rewriter, view, mapping, key);
  if (!base)
    return Value();
  SmallVector<int64_t> idx;
  for (Value i : load.getIndices())
    idx.push_back(getConstantIntValue(i).value_or(0));
  key += "|w" + std::to_string(width);
  for (int64_t i : idx)
    key += "," + std::to_string(i);
  if (Value cached = preloads.lookup(key))
    return cached;
  Value c = arith::MulIOp::create(
      rewriter, loc, points.lane,
      arith::ConstantIndexOp::create(rewriter, loc, width));
  auto type = cast<MemRefType>(base.getType());
  SmallVector<OpFoldResult> offsets = {c},
                            sizes = {rewriter.getIndexAttr(width)},
                            strides = {rewriter.getIndexAttr(1)};
  auto tileType = cast<MemRefType>(
      memref::SubViewOp::inferResultType(type, offsets, sizes, strides));
  if (tileType != load.getMemRefType())
    return Value();
  Value tile = memref::SubViewOp::create(rewriter, loc, tileType, base,
                                         offsets, sizes, strides);
  VectorType vecType = load.getVectorType();
  auto ifOp = scf::IfOp::create(
      rewriter, loc, cond,
      [&](OpBuilder &b, Location l) {
        SmallVector<Value> indices;
        for (int64_t i : idx)
          indices.push_back(arith::ConstantIndexOp::create(b, l, i));
        auto hoisted = vector::LoadOp::create(b, l, vecType, tile, indices);
        if (auto align = load.getAlignment())
          hoisted.setAlignment(*align);
        scf::YieldOp::create(b, l, hoisted.getResult());
      },
      [&](OpBuilder &b, Location l) {
        // Never used: the vector path runs only when `cond` holds.
        Value zero = arith::ConstantOp::create(b, l, b.getZeroAttr(vecType));
        scf::YieldOp::create(b, l, zero);
      });
  preloads[key] = ifOp.getResult(0);
  return ifOp.getResult(0);
}

/// i1 on the host (before the launch): `root`, a kernel operand, starts
/// aligned to `align` bytes and each of its strides but the innermost
/// (which must be statically 1) is a multiple of `align` bytes, so that
/// every row view of it is aligned. Null when that cannot hold.
Value ChannelDistributor::rootAligned(IRRewriter &rewriter, Value root,
                                      int64_t align) {
  auto key = std::make_pair(root, align);
  if (auto it = rootChecks.find(key); it != rootChecks.end())
    return it->second;
  Value result;
  auto type = dyn_cast<MemRefType>(root.getType());
  if (type && type.getRank() >= 1) {
    auto [strides, offset] = type.getStridesAndOffset();
    (void)offset;
    int64_t bytes = elementBytes(type.getElementType());
    bool possible = strides.back() == 1;
    for (int64_t d = 0; possible && d + 1 < type.getRank(); ++d)
      if (!ShapedType::isDynamic(strides[d]) && (strides[d] * bytes) % align)
        possible = false;
    if (possible) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(points.host);
      Location loc = root.getLoc();
      Value ok = isAligned(rewriter, loc, root, align);
      auto meta = memref::ExtractStridedMetadataOp::create(rewriter, loc, root);
      for (int64_t d = 0; d + 1 < type.getRank(); ++d) {
        if (!ShapedType::isDynamic(strides[d]))
          continue;
        Value sb = arith::MulIOp::create(
            rewriter, loc, meta.getStrides()[d],
            arith::ConstantIndexOp::create(rewriter, loc, bytes));
        Value low = arith::AndIOp::create(
            rewriter, loc, sb,
            arith::ConstantIndexOp::create(rewriter, loc, align - 1));
        Value zero = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::eq, low,
            arith::ConstantIndexOp::create(rewriter, loc, 0));
        ok = arith::AndIOp::create(rewriter, loc, ok, zero);
      }
      result = ok;
    }
  }
  rootChecks[key] = result;
  return result;
}

/// `lhs && rhs` on the host (either may be null).
Value ChannelDistributor::hostAnd(IRRewriter &rewriter, Value lhs, Value rhs) {
  if (!lhs || !rhs)
    return lhs ? lhs : rhs;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(points.host);
  return arith::AndIOp::create(rewriter, rhs.getLoc(), lhs, rhs);
}

LogicalResult ChannelDistributor::distribute(IRRewriter &rewriter,
                                             linalg::LinalgOp op,
                                             int64_t width) {
  Location loc = op.getLoc();
  Value lane = points.lane;
  rewriter.setInsertionPoint(op);
  if (width == 1) {
    if (failed(emitScalarLoop(rewriter, op, lane, plan.lanes)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
  // Vector accesses need every view of this row aligned to its access
  // width; views into padded or offset buffers fall back to scalars.
  // Where a view is a row of a kernel operand, the check is made once, on
  // the host: the operand starts aligned and its row strides keep it so.
  // Other views are checked per row.
  Value hostAligned, rowAligned;
  DenseMap<Value, Value> preloadable;
  SmallVector<Value> inputs;
  for (OpOperand *input : op.getDpsInputOperands())
    inputs.push_back(input->get());
  for (Value v : viewsOf(op)) {
    auto type = cast<MemRefType>(v.getType());
    int64_t align = accessAlignment(type, width);
    int64_t alignElems =
        std::max<int64_t>(1, align / elementBytes(type.getElementType()));
    SmallVector<Value> roots;
    Value ok;
    gpu::LaunchOp launch = points.launch;
    if (traceRoots(v, launch.getBody(), roots, alignElems)) {
      for (Value root : roots) {
        Value rootOk = rootAligned(rewriter, root, align);
        if (!rootOk) {
          ok = Value();
          break;
        }
        ok = ok ? hostAnd(rewriter, ok, rootOk) : rootOk;
      }
    }
    if (ok) {
      hostAligned = hostAnd(rewriter, hostAligned, ok);
      if (roots.size() == 1 && llvm::is_contained(inputs, v))
        preloadable[v] = ok;
      continue;
    }
    Value rowOk = isAligned(rewriter, loc, v, align);
    rowAligned =
        rowAligned
            ? arith::AndIOp::create(rewriter, loc, rowAligned, rowOk).getResult()
            : rowOk;
  }
  Value aligned =
      hostAligned && rowAligned
          ? arith::AndIOp::create(rewriter, loc, hostAligned, rowAligned)
                .getResult()
          : (hostAligned ? hostAligned : rowAligned);
  auto ifOp =
      scf::IfOp::create(rewriter, loc, aligned, /*withElseRegion=*/true);
  rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  if (failed(emitVectorLoop(rewriter, op, width, preloadable)))
    return failure();
  rewriter.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  if (failed(emitScalarLoop(rewriter, op, lane, plan.lanes)))
    return failure();
  rewriter.eraseOp(op);
  return success();
}

LogicalResult gpu_mapping::distributeChannelOps(IRRewriter &rewriter,
                                                const KernelLoopPlan &plan,
                                                const LaunchPoints &points) {
  ChannelDistributor distributor(plan, points);
  for (auto [op, width] : plan.channelOps)
    if (failed(distributor.distribute(rewriter, op, width)))
      return failure();
  return success();
}
