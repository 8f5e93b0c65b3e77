//===- Launch.cpp - a kernel loop's plan applied --------------------------===//
//
// The second half of kpool-map-to-gpu, as convert-parallel-loops-to-gpu is
// of the upstream mapping: the plan's loop becomes one `gpu.launch` with the
// same body. Row group `blockIdx.x * rows + threadIdx.y`, then every
// `gridDim.x * rows` rows after it (a grid-stride loop); `threadIdx.x` the
// lane. The loop body (binary search, guards, row views) moves into the
// launch unchanged, so the guards of the lowering hold on the GPU.
//
//===----------------------------------------------------------------------===//

#include "MappingDetail.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::gpu_mapping;

/// Moves every op of `dest` (a launch's row loop body) that writes memory
/// outside the channel loops and cache entries under `lane == 0`: one lane
/// per row does the stores.
static LogicalResult storeOnOneLane(IRRewriter &rewriter, Block *dest,
                                    Value lane) {
  SmallVector<Operation *> writers;
  dest->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isChannelOp(op) || isa<CacheEntryOp>(op))
      return WalkResult::skip();
    if (!mayWrite(op))
      return WalkResult::advance();
    writers.push_back(op);
    return WalkResult::skip();
  });
  for (Operation *op : writers) {
    // An atomic whose old value nobody reads (the status word's) runs on
    // one lane like a store.
    if (!op->use_empty())
      return op->emitOpError(
          "writes memory and has used results; cannot run it on one lane");
    rewriter.setInsertionPoint(op);
    auto first = scf::IfOp::create(
        rewriter, op->getLoc(),
        arith::CmpIOp::create(
            rewriter, op->getLoc(), arith::CmpIPredicate::eq, lane,
            arith::ConstantIndexOp::create(rewriter, op->getLoc(), 0)),
        /*withElseRegion=*/false);
    rewriter.moveOpBefore(op, first.thenBlock()->getTerminator());
  }
  return success();
}

LogicalResult
kpool::applyKernelLoopPlan(const KernelLoopPlan &plan,
                           const KPoolMapToGPUPassOptions &options) {
  scf::ParallelOp loop = plan.loop;
  Location loc = loop.getLoc();

  // The GPU's fast arithmetic, in the pooled rows' bodies before they are
  // distributed, so that the vector and scalar paths compute alike. Only
  // pools stored as bf16 or f16: their tolerance (1 ulp of T) absorbs the
  // approximate instructions with a wide margin; an f32 pool's (a few f32
  // ulps) does not, so it keeps the accurate arithmetic. approximate-exp
  // asks for the CPU path's arithmetic instead.
  if (options.fastMath && !options.approximateExp)
    for (auto [op, width] : plan.channelOps) {
      Type out = getElementTypeOrSelf(op.getDpsInits().front().getType());
      if (isa<linalg::GenericOp>(op.getOperation()) &&
          (out.isBF16() || out.isF16()))
        applyGPUFastMath(op->getRegion(0));
    }

  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Value lb = loop.getLowerBound().front();
  Value ub = loop.getUpperBound().front();
  Value step = loop.getStep().front();
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value span = arith::MaxSIOp::create(
      rewriter, loc, arith::SubIOp::create(rewriter, loc, ub, lb), zero);
  Value trips = arith::CeilDivUIOp::create(rewriter, loc, span, step);
  Value rowsV = arith::ConstantIndexOp::create(rewriter, loc, plan.rowsPerBlock);
  Value lanesV = arith::ConstantIndexOp::create(rewriter, loc, plan.lanes);
  // At most grid-blocks blocks; a grid-stride loop covers the rest. The
  // geometry depends on the shapes only.
  Value blocks = arith::MinUIOp::create(
      rewriter, loc, arith::CeilDivUIOp::create(rewriter, loc, trips, rowsV),
      arith::ConstantIndexOp::create(
          rewriter, loc, std::max<int64_t>(options.gridBlocks, 1)));

  // CUDA rejects an empty grid: an empty iteration space launches nothing.
  auto some = scf::IfOp::create(
      rewriter, loc,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ugt, trips,
                            zero),
      /*withElseRegion=*/false);
  rewriter.setInsertionPoint(some.thenBlock()->getTerminator());
  auto launch = gpu::LaunchOp::create(rewriter, loc, blocks, one, one, lanesV,
                                      rowsV, one);
  if (!plan.kernelName.empty())
    launch.setFunctionAttr(FlatSymbolRefAttr::get(
        rewriter.getStringAttr(plan.kernelName)));
  Block &body = launch.getBody().front();
  rewriter.setInsertionPointToEnd(&body);
  gpu::TerminatorOp::create(rewriter, loc);
  rewriter.setInsertionPointToStart(&body);
  Value lane = launch.getThreadIds().x;
  Value first = arith::AddIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x, rowsV),
      launch.getThreadIds().y);
  Value stride =
      arith::MulIOp::create(rewriter, loc, launch.getGridSize().x, rowsV);
  auto rowLoop = scf::ForOp::create(rewriter, loc, first, trips, stride);
  LaunchPoints points{launch, some, rowLoop, lane};
  rewriter.setInsertionPoint(rowLoop.getBody()->getTerminator());
  Value index = rowLoop.getInductionVar();
  Value iv = arith::AddIOp::create(
      rewriter, loc, lb, arith::MulIOp::create(rewriter, loc, index, step));

  // Move the loop body (all but its scf.reduce) into the launch.
  Block *loopBody = loop.getBody();
  loopBody->getArgument(0).replaceAllUsesWith(iv);
  Block *dest = rowLoop.getBody();
  dest->getOperations().splice(dest->getTerminator()->getIterator(),
                               loopBody->getOperations(), loopBody->begin(),
                               loopBody->getTerminator()->getIterator());
  rewriter.eraseOp(loop);

  if (plan.lanes > 1 && failed(storeOnOneLane(rewriter, dest, lane)))
    return failure();
  if (failed(distributeChannelOps(rewriter, plan, points)))
    return failure();
  for (CacheEntryOp op : plan.cacheEntries)
    distributeCacheEntry(rewriter, op, launch, lane, plan.lanes,
                         options.hardwareFP8);
  return success();
}

LogicalResult
kpool::mapKernelLoopToGPU(scf::ParallelOp loop,
                          const KPoolMapToGPUPassOptions &options) {
  std::string error;
  if (failed(verifyMapToGPUOptions(options, error)))
    return loop.emitError("kpool-map-to-gpu: " + error);
  FailureOr<KernelLoopPlan> plan = planKernelLoop(loop, options);
  if (failed(plan))
    return failure();
  return applyKernelLoopPlan(*plan, options);
}
