//===- Plan.cpp - what each kpool kernel loop maps to ---------------------===//
//
// The first half of kpool-map-to-gpu, as gpu-map-parallel-loops is of the
// upstream mapping: for each `scf.parallel` that convert-kpool-to-linalg
// tagged `kpool.kernel` (an iteration per pooled row or request, the row's
// metadata and guards inside it, 1-D linalg ops over the channels of each
// row), the plan says how many lanes share a row, how many rows a block
// holds, and how wide each channel loop's accesses are.
//
// The upstream mapping cannot map these loops itself: it needs the
// thread-level loops directly nested in the block-level one, while here the
// channel loops sit under `scf.if` and after `scf.while` (the binary search)
// and memory reads.
//
//===----------------------------------------------------------------------===//

#include "MappingDetail.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/Utils/Numerics.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::gpu_mapping;

bool gpu_mapping::isChannelOp(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() ||
      linalgOp.getNumLoops() != 1 || linalgOp.getNumReductionLoops() != 0 ||
      ShapedType::isDynamic(linalgOp.getStaticLoopRanges().front()))
    return false;
  if (isa<linalg::GenericOp>(op))
    return KPoolDialect::PoolRowAttrHelper(op->getContext())
               .isAttrPresent(op) ||
           KPoolDialect::PoolRowLoopAttrHelper(op->getContext())
               .isAttrPresent(op);
  return isa<linalg::FillOp, linalg::CopyOp>(op);
}

int64_t gpu_mapping::elementBytes(Type type) {
  return llvm::divideCeil(type.getIntOrFloatBitWidth(), 8);
}

SmallVector<Value> gpu_mapping::viewsOf(linalg::LinalgOp op) {
  SmallVector<Value> views;
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()))
      views.push_back(v);
  return views;
}

bool gpu_mapping::definedIn(Value v, Region &region) {
  return region.isAncestor(v.getParentRegion());
}

bool gpu_mapping::traceRoots(Value view, Region &region,
                             SmallVectorImpl<Value> &roots, int64_t alignElems,
                             int depth) {
  if (depth > 16)
    return false;
  if (!definedIn(view, region)) {
    roots.push_back(view);
    return true;
  }
  Operation *def = view.getDefiningOp();
  if (auto cast = dyn_cast_or_null<memref::CastOp>(def))
    return traceRoots(cast.getSource(), region, roots, alignElems, depth + 1);
  if (auto select = dyn_cast_or_null<arith::SelectOp>(def))
    return traceRoots(select.getTrueValue(), region, roots, alignElems,
                      depth + 1) &&
           traceRoots(select.getFalseValue(), region, roots, alignElems,
                      depth + 1);
  auto sub = dyn_cast_or_null<memref::SubViewOp>(def);
  if (!sub)
    return false;
  if (alignElems > 0) {
    auto srcType = cast<MemRefType>(sub.getSource().getType());
    int64_t last = srcType.getRank() - 1;
    if (last < 0 || sub.getDroppedDims().test(last))
      return false;
    if (!llvm::all_of(sub.getStaticStrides(),
                      [](int64_t s) { return s == 1; }))
      return false;
    int64_t innerOffset = sub.getStaticOffsets().back();
    if (ShapedType::isDynamic(innerOffset) || innerOffset % alignElems != 0)
      return false;
  }
  return traceRoots(sub.getSource(), region, roots, alignElems, depth + 1);
}

bool gpu_mapping::mayWrite(Operation *op) {
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return false;
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return true;
  return iface.hasEffect<MemoryEffects::Write>() ||
         iface.hasEffect<MemoryEffects::Free>();
}

LogicalResult
kpool::verifyMapToGPUOptions(const KPoolMapToGPUPassOptions &options,
                             std::string &error) {
  if (options.vectorBytes < 1 || options.vectorBytes > kMaxAccessBytes ||
      !llvm::isPowerOf2_64(options.vectorBytes)) {
    error = "vector-bytes must be a power of two in [1, " +
            std::to_string(kMaxAccessBytes) + "], got " +
            std::to_string(options.vectorBytes);
    return failure();
  }
  if (options.blockSize < 1 || options.blockSize > 1024) {
    error = "block-size must be in [1, 1024], got " +
            std::to_string(options.blockSize);
    return failure();
  }
  if (options.gridBlocks < 1 || options.gridBlocks > (int64_t(1) << 31) - 1) {
    error = "grid-blocks must be in [1, 2^31 - 1], got " +
            std::to_string(options.gridBlocks);
    return failure();
  }
  return success();
}

SmallVector<scf::ParallelOp> kpool::getKernelLoops(func::FuncOp func) {
  KPoolDialect::KernelAttrHelper kernel(func.getContext());
  SmallVector<scf::ParallelOp> loops;
  func.walk([&](scf::ParallelOp par) {
    if (kernel.isAttrPresent(par) && !par->getParentOfType<scf::ParallelOp>() &&
        !par->getParentOfType<gpu::LaunchOp>())
      loops.push_back(par);
  });
  return loops;
}

/// Channels per thread and step for `op`: the widest power of two whose
/// bytes fit `vectorBytes` and that divides the channel count, or 1 when a
/// view is not statically unit-stride.
static int64_t vectorWidth(linalg::LinalgOp op, int64_t vectorBytes) {
  // The loop form of a pooled row (large kpool) reads its members inside
  // its body: scalar channels.
  if (KPoolDialect::PoolRowLoopAttrHelper(op->getContext()).isAttrPresent(op))
    return 1;
  int64_t channels = op.getStaticLoopRanges().front();
  Type elt = op.getDpsInits().front().getType();
  int64_t bytes = elementBytes(cast<MemRefType>(elt).getElementType());
  for (Value v : viewsOf(op)) {
    auto [strides, offset] =
        cast<MemRefType>(v.getType()).getStridesAndOffset();
    (void)offset;
    if (strides.back() != 1)
      return 1;
  }
  return poolRowVectorWidth(channels, vectorBytes / bytes);
}

/// The roots of every memref the body of `loop` writes, into the plan.
static void collectWrittenRoots(scf::ParallelOp loop, KernelLoopPlan &plan) {
  loop.getBody()->walk([&](Operation *op) {
    SmallVector<Value> written;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      for (Value init : linalgOp.getDpsInits())
        written.push_back(init);
    } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
      written.push_back(store.getMemRef());
    } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
      written.push_back(store.getBase());
    } else if (mayWrite(op)) {
      for (Value v : op->getOperands())
        if (isa<MemRefType>(v.getType()))
          written.push_back(v);
      if (op->getNumOperands() == 0)
        plan.writesUnknown = true;
    }
    for (Value v : written) {
      SmallVector<Value> roots;
      if (!traceRoots(v, loop.getRegion(), roots))
        plan.writesUnknown = true;
      llvm::append_range(plan.writtenRoots, roots);
    }
  });
}

FailureOr<KernelLoopPlan>
kpool::planKernelLoop(scf::ParallelOp loop,
                      const KPoolMapToGPUPassOptions &options) {
  if (loop.getNumLoops() != 1 || loop.getNumResults() != 0)
    return loop.emitOpError(
        "expected a 1-D parallel loop without reductions (the form "
        "convert-kpool-to-linalg emits)");
  KernelLoopPlan plan;
  plan.loop = loop;
  // Outlining names the kernel after the function and the loop's tag
  // (serving_step_kpool_compress, ...), spelled as a PTX identifier: a
  // function name may hold characters PTX rejects (`@a.b`, `@"x y"`), and
  // ptxas would fail on the kernel's name.
  auto func = loop->getParentOfType<FunctionOpInterface>();
  if (StringAttr name =
          KPoolDialect::KernelAttrHelper(loop.getContext()).getAttr(loop);
      name && func)
    plan.kernelName =
        ptxIdentifier((func.getName() + "_" + name.getValue()).str());

  loop.getBody()->walk([&](Operation *op) {
    if (isChannelOp(op)) {
      auto channelOp = cast<linalg::LinalgOp>(op);
      plan.channelOps.push_back(
          {channelOp, vectorWidth(channelOp, options.vectorBytes)});
    }
  });
  // What the body writes: row-invariant loads are hoisted only from
  // operands it does not write.
  collectWrittenRoots(loop, plan);
  loop.getBody()->walk(
      [&](CacheEntryOp op) { plan.cacheEntries.push_back(op); });

  // Lanes per row: enough for one access per lane over the widest row,
  // capped at a warp (or the option).
  int64_t lanes = 1;
  for (auto [op, width] : plan.channelOps) {
    int64_t channels = op.getStaticLoopRanges().front();
    lanes = std::max<int64_t>(lanes, llvm::divideCeil(channels, width));
  }
  int64_t maxThreadsPerRow = std::max<int64_t>(options.maxThreadsPerRow, 1);
  lanes = std::clamp<int64_t>(lanes, 1, maxThreadsPerRow);
  // A pool-cache entry is exchanged between the lanes of its row by warp
  // shuffles: a row group must be an aligned power-of-two part of a warp.
  // Rounded up within the same bounds: at most a warp, the option and the
  // block (down to powers of two).
  if (!plan.cacheEntries.empty()) {
    int64_t cap = std::min<int64_t>(
        {kWarpSize, int64_t(llvm::bit_floor(uint64_t(maxThreadsPerRow))),
         int64_t(llvm::bit_floor(
             uint64_t(std::max<int64_t>(options.blockSize, 1))))});
    lanes = std::min<int64_t>(int64_t(llvm::PowerOf2Ceil(lanes)), cap);
  }
  plan.lanes = lanes;
  plan.rowsPerBlock = std::max<int64_t>(1, options.blockSize / lanes);
  // A static trip count (pool_offsets' single scan) needs no more rows.
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()[0]),
                         ub = getConstantIntValue(loop.getUpperBound()[0]),
                         step = getConstantIntValue(loop.getStep()[0]);
  if (lb && ub && step && *step > 0)
    plan.rowsPerBlock = std::clamp<int64_t>(
        llvm::divideCeil(std::max<int64_t>(*ub - *lb, 0), *step), 1,
        plan.rowsPerBlock);
  return plan;
}
