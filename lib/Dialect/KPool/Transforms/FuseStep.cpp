//===- FuseStep.cpp - fuse a serving step's four ops into kpool.step ------===//
//
// Finds ring_close, pool_offsets, compress and seed_tail of one serving step
// (the same keys, gates, metadata, slots and num_requests; compress's
// pool_row_offsets produced by that pool_offsets; ring_close reading the ring
// that seed_tail writes) and replaces them with one kpool.step, which lowers
// to one kernel. The four ops' results are replaced by the step's.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLFUSESTEPPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

namespace {

/// The four ops of one step.
struct Step {
  RingCloseOp ringClose;
  PoolOffsetsOp poolOffsets;
  CompressOp compress;
  SeedTailOp seedTail;

  SmallVector<Operation *, 4> ops() {
    return {ringClose, poolOffsets, compress, seedTail};
  }
};

/// The pool_offsets whose offsets `compress` reads: on tensors the producer
/// of the operand, on buffers the last pool_offsets before `compress` in its
/// block that writes that buffer.
PoolOffsetsOp offsetsOf(CompressOp compress) {
  Value pro = compress.getPoolRowOffsets();
  if (isa<RankedTensorType>(pro.getType()))
    return pro.getDefiningOp<PoolOffsetsOp>();
  for (Operation *op = compress->getPrevNode(); op; op = op->getPrevNode())
    if (auto po = dyn_cast<PoolOffsetsOp>(op))
      if (po.getPoolRowOffsets() == pro)
        return po;
  return nullptr;
}

/// Whether ring_close and compress write one pool cache, or neither has
/// one: the same table and format, and on buffers the same cache buffers;
/// on tensors compress's cache inits are ring_close's cache results, used
/// by nothing else (the step's cache results replace compress's).
bool sameCache(RingCloseOp rc, CompressOp cp, bool tensors) {
  if (!rc.getBlockTable() && !cp.getBlockTable())
    return true;
  if (!rc.getBlockTable() || !cp.getBlockTable() ||
      rc.getBlockTable() != cp.getBlockTable() ||
      rc.getRotate() != cp.getRotate() || rc.getScale() != cp.getScale() ||
      bool(rc.getCacheScales()) != bool(cp.getCacheScales()))
    return false;
  if (!tensors)
    return rc.getCacheKeys() == cp.getCacheKeys() &&
           rc.getCacheScales() == cp.getCacheScales();
  // ring_close's results: pooled, closed_pool, cache_keys[, cache_scales].
  auto fedOnly = [&](Value result, Value init) {
    return result == init && result.hasOneUse();
  };
  return fedOnly(rc->getResult(2), cp.getCacheKeys()) &&
         (!rc.getCacheScales() ||
          fedOnly(rc->getResult(3), cp.getCacheScales()));
}

/// Finds the step that ends with `seedTail`, or fails.
FailureOr<Step> matchStep(SeedTailOp seedTail) {
  Block *block = seedTail->getBlock();
  bool tensors = seedTail.hasPureTensorSemantics();
  Step step;
  step.seedTail = seedTail;
  auto sameRequests = [&](auto op) {
    return op.getKpool() == seedTail.getKpool() && op.getK() == seedTail.getK() &&
           op.getGate() == seedTail.getGate() &&
           op.getInputRowOffsets() == seedTail.getInputRowOffsets() &&
           op.getCacheLengths() == seedTail.getCacheLengths();
  };
  for (Operation &op : *block) {
    if (auto rc = dyn_cast<RingCloseOp>(&op)) {
      // On buffers ring_close must read the ring before seed_tail writes it.
      if (rc.getTail() == seedTail.getTail() && sameRequests(rc) &&
          rc.getHeadDim() == seedTail.getHeadDim() &&
          rc.getSlotIdx() == seedTail.getSlotIdx() &&
          rc.getNumRequests() == seedTail.getNumRequests() &&
          rc.hasPureTensorSemantics() == tensors &&
          (tensors || rc->isBeforeInBlock(seedTail)))
        step.ringClose = rc;
    }
  }
  if (!step.ringClose)
    return failure();
  for (Operation &op : *block) {
    auto cp = dyn_cast<CompressOp>(&op);
    if (!cp || !sameRequests(cp) || cp.getHeadDim() != seedTail.getHeadDim() ||
        cp.getApe() != step.ringClose.getApe() ||
        cp.hasPureTensorSemantics() != tensors ||
        !sameCache(step.ringClose, cp, tensors))
      continue;
    PoolOffsetsOp po = offsetsOf(cp);
    if (!po || po->getBlock() != block || po.getKpool() != seedTail.getKpool() ||
        po.getInputRowOffsets() != seedTail.getInputRowOffsets() ||
        po.getCacheLengths() != seedTail.getCacheLengths())
      continue;
    step.compress = cp;
    step.poolOffsets = po;
    break;
  }
  if (!step.compress)
    return failure();
  // One status word for the step: on buffers the four ops share it (or
  // none has one); the tensor form of a status word threads it from op to
  // op, which the step does not rewire, so those stay unfused.
  Value status = seedTail.getStatus();
  for (Value other : {step.ringClose.getStatus(), step.poolOffsets.getStatus(),
                      step.compress.getStatus()})
    if (other != status || (tensors && other))
      return failure();
  return step;
}

/// The op of the step that comes last in the block: where the fused op
/// goes. Fails when moving the others there could change what the program
/// computes: on tensors a result used before that point by another op; on
/// buffers another op with memory effects between the first and the last.
FailureOr<Operation *> insertionPoint(Step step) {
  SmallVector<Operation *, 4> ops = step.ops();
  Operation *first = ops.front(), *last = ops.front();
  for (Operation *op : ops) {
    if (op->isBeforeInBlock(first))
      first = op;
    if (last->isBeforeInBlock(op))
      last = op;
  }
  auto isStepOp = [&](Operation *op) { return llvm::is_contained(ops, op); };
  if (step.seedTail.hasPureTensorSemantics()) {
    for (Operation *op : ops)
      for (Operation *user : op->getUsers()) {
        if (isStepOp(user))
          continue;
        Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
        if (inBlock && !last->isBeforeInBlock(inBlock))
          return failure();
      }
    return last;
  }
  for (Operation *op = first->getNextNode(); op != last; op = op->getNextNode())
    if (!isStepOp(op) && !isMemoryEffectFree(op))
      return failure();
  return last;
}

struct KPoolFuseStepPass
    : public kpool::impl::KPoolFuseStepPassBase<KPoolFuseStepPass> {
  void runOnOperation() override {
    SmallVector<SeedTailOp> seeds;
    getOperation()->walk([&](SeedTailOp op) { seeds.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (SeedTailOp seed : seeds) {
      FailureOr<Step> step = matchStep(seed);
      if (failed(step))
        continue;
      FailureOr<Operation *> at = insertionPoint(*step);
      if (failed(at))
        continue;
      fuse(rewriter, *step, *at);
    }
  }

  /// Replaces the four ops by one kpool.step, unless on buffers the step
  /// would write one of its operands through another (e.g. ring_close and
  /// compress writing one pooled buffer, which the separate ops may do in
  /// turn): the verifier rejects such a step, so the four ops stay.
  static void fuse(IRRewriter &rewriter, Step s, Operation *at) {
    rewriter.setInsertionPoint(at);
    RingCloseOp rc = s.ringClose;
    CompressOp cp = s.compress;
    bool tensors = s.seedTail.hasPureTensorSemantics();
    // The cache (if any) starts from ring_close's inits: on tensors those
    // are the cache before the step; compress's are ring_close's results.
    Value keys = rc.getCacheKeys(), scales = rc.getCacheScales();
    SmallVector<Type> resultTypes;
    if (tensors) {
      resultTypes = {rc.getPooled().getType(), rc.getClosedPool().getType(),
                     s.poolOffsets.getPoolRowOffsets().getType(),
                     cp.getPooled().getType(), s.seedTail.getTail().getType()};
      for (Value v : {keys, scales})
        if (v)
          resultTypes.push_back(v.getType());
    }
    auto step = StepOp::create(
        rewriter, s.seedTail.getLoc(), resultTypes, rc.getKpoolAttr(),
        rc.getHeadDimAttr(), rc.getK(), rc.getGate(), rc.getApe(),
        rc.getInputRowOffsets(), rc.getCacheLengths(), rc.getSlotIdx(),
        rc.getNumRequests(), rc.getBlockTable(), rc.getPooled(),
        rc.getClosedPool(), s.poolOffsets.getPoolRowOffsets(), cp.getPooled(),
        s.seedTail.getTail(), keys, scales, s.seedTail.getStatus(),
        rc.getRotateAttr(),
        rc.getScaleAttr());
    if (!tensors && hasOverlappingOperands(step)) {
      rewriter.eraseOp(step);
      return;
    }
    if (tensors) {
      // ring_close's cache results fed only compress, which goes too.
      SmallVector<Value> rcResults = {step->getResult(0), step->getResult(1)};
      SmallVector<Value> cpResults = {step->getResult(3)};
      for (unsigned i = 5; i < step->getNumResults(); ++i) {
        rcResults.push_back(step->getResult(i));
        cpResults.push_back(step->getResult(i));
      }
      rewriter.replaceOp(cp, cpResults);
      rewriter.replaceOp(rc, rcResults);
      rewriter.replaceOp(s.poolOffsets, step->getResult(2));
      rewriter.replaceOp(s.seedTail, step->getResult(4));
      return;
    }
    for (Operation *op : s.ops())
      rewriter.eraseOp(op);
  }
};

} // namespace
