//===- Patterns.cpp - the kpool to linalg conversion patterns -------------===//
//
// Lowers the buffer form of the kpool ops to structured IR: parallel loops
// over pooled rows or requests, and one `linalg.generic` over the channels of
// each pooled row. Each pattern reads its op's operands and calls the op's
// lowering (Lowerings.h); the pooling arithmetic comes from Utils/Pooling.h
// and the metadata arithmetic from Utils/Metadata.h. The pass that applies
// these patterns is in KPoolToLinalgPass.cpp.
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"

#include "Lowerings.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;

namespace {

/// A pattern that lowers the buffer form of `OpTy` (the pass reports the
/// tensor form before converting) with an Emitter made for the op.
template <typename OpTy>
struct KPoolLowering : public OpConversionPattern<OpTy> {
  using OpAdaptor = typename OpConversionPattern<OpTy>::OpAdaptor;

  KPoolLowering(MLIRContext *context, const KPoolToLinalgOptions &options)
      : OpConversionPattern<OpTy>(context), options(options) {}

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

  /// The kernel of `op`, whose head_dim is `headDim`.
  KernelSpec specFor(OpTy op, int64_t headDim) const {
    KernelSpec spec;
    spec.kpool = op.getKpool();
    spec.headDim = headDim;
    spec.name = op->getName().stripDialect().str();
    spec.prefetchPools = options.prefetchPools;
    spec.unrollMembers = options.unrollMembers;
    return spec;
  }

  KPoolToLinalgOptions options;
};

/// The operands ring_close and seed_tail share (and kpool.step), with
/// `pooled` the rows ring_close writes; metadata as signless memrefs.
template <typename Adaptor>
RingOperands ringOperandsOf(Emitter &e, Adaptor adaptor, Value pooled,
                            Value closed) {
  RingOperands o;
  o.tail = adaptor.getTail();
  o.k = adaptor.getK();
  o.gate = adaptor.getGate();
  o.pooled = pooled;
  o.closed = closed;
  o.iro = e.signless(adaptor.getInputRowOffsets());
  o.cache = e.signless(adaptor.getCacheLengths());
  o.slots = e.signless(adaptor.getSlotIdx());
  return o;
}

struct CompressLowering : public KPoolLowering<CompressOp> {
  using KPoolLowering::KPoolLowering;
  void lower(CompressOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    Emitter e(b, op.getLoc(), specFor(op, op.getHeadDim()),
              adaptor.getStatus(), cacheDestOf(op, adaptor));
    CompressOperands o{adaptor.getK(),
                       adaptor.getGate(),
                       adaptor.getApe(),
                       adaptor.getPooled(),
                       e.signless(adaptor.getInputRowOffsets()),
                       e.signless(adaptor.getPoolRowOffsets()),
                       e.signless(adaptor.getCacheLengths())};
    lowerCompress(e, o, options.rowsPerIteration);
  }
};

struct RingCloseLowering : public KPoolLowering<RingCloseOp> {
  using KPoolLowering::KPoolLowering;
  void lower(RingCloseOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    Emitter e(b, op.getLoc(), specFor(op, op.getHeadDim()),
              adaptor.getStatus(), cacheDestOf(op, adaptor));
    RingOperands o = ringOperandsOf(e, adaptor, adaptor.getPooled(),
                                    adaptor.getClosedPool());
    o.ape = adaptor.getApe();
    lowerRingClose(e, o, adaptor.getNumRequests());
  }
};

struct SeedTailLowering : public KPoolLowering<SeedTailOp> {
  using KPoolLowering::KPoolLowering;
  void lower(SeedTailOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    Emitter e(b, op.getLoc(), specFor(op, op.getHeadDim()),
              adaptor.getStatus(), CacheDest());
    RingOperands o = ringOperandsOf(e, adaptor, Value(), Value());
    lowerSeedTail(e, o, adaptor.getNumRequests());
  }
};

struct PoolOffsetsLowering : public KPoolLowering<PoolOffsetsOp> {
  using KPoolLowering::KPoolLowering;
  void lower(PoolOffsetsOp op, OpAdaptor adaptor,
             OpBuilder &b) const override {
    Emitter e(b, op.getLoc(), specFor(op, /*headDim=*/1), adaptor.getStatus(),
              CacheDest());
    lowerPoolOffsets(e, e.signless(adaptor.getInputRowOffsets()),
                     e.signless(adaptor.getCacheLengths()),
                     e.signless(adaptor.getPoolRowOffsets()));
  }
};

/// kpool.step. `step-offsets=scan`: pool offsets by a sequential scan
/// before the loop, pooled rows by a search over them (the CPU's choice:
/// one O(B) pass instead of O(B) per item), `rows-per-iteration` of them per
/// iteration; otherwise every item walks the counts inside the one loop
/// (one GPU launch).
struct StepLowering : public KPoolLowering<StepOp> {
  using KPoolLowering::KPoolLowering;
  void lower(StepOp op, OpAdaptor adaptor, OpBuilder &b) const override {
    Emitter e(b, op.getLoc(), specFor(op, op.getHeadDim()),
              adaptor.getStatus(), cacheDestOf(op, adaptor));
    StepOperands o;
    o.ring = ringOperandsOf(e, adaptor, adaptor.getClosed(),
                            adaptor.getClosedPool());
    o.ring.ape = adaptor.getApe();
    o.pro = e.signless(adaptor.getPoolRowOffsets());
    o.pooled = adaptor.getPooled();
    lowerStep(e, o, adaptor.getNumRequests(), options.scanStepOffsets,
              options.rowsPerIteration);
  }
};

} // namespace

void mlir::kpool::populateKPoolToLinalgConversionPatterns(
    RewritePatternSet &patterns, const KPoolToLinalgOptions &options) {
  patterns.add<CompressLowering, RingCloseLowering, SeedTailLowering,
               PoolOffsetsLowering, StepLowering>(patterns.getContext(),
                                                  options);
}
