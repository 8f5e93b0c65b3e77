//===- VectorizePoolRows.cpp - vectorize the channel loops ----------------===//

#include "kpool/Dialect/KPool/Transforms/Passes.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/Utils/Numerics.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLVECTORIZEPOOLROWSPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

namespace {

/// The widest vector the pass emits. Wider ones only multiply compile time:
/// LLVM's x86 backend took a minute on 1024-channel vectors and aborted
/// ("SmallVector unable to grow") on 65536-channel ones.
constexpr int64_t kMaxVectorSize = 64;

/// The channel count of a pooled row: its one static, positive loop range,
/// or 0 for anything else (such a row stays scalar).
int64_t channels(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ranges.size() != 1 || ShapedType::isDynamic(ranges.front()) ||
      ranges.front() < 1)
    return 0;
  return ranges.front();
}

/// True when every operand of the row has a static unit innermost stride,
/// so that each vector tile is one contiguous load or store. Rows over other
/// views (the slow path of the lowering's stride versioning) stay scalar.
/// (A fill's value operand is not a view.)
bool hasUnitInnerStrides(linalg::LinalgOp op) {
  bool anyView = false;
  for (Type type : op->getOperandTypes()) {
    if (isa<FloatType, IntegerType, IndexType>(type) && isa<linalg::FillOp>(op))
      continue;
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref)
      return false;
    auto [strides, offset] = memref.getStridesAndOffset();
    if (strides.empty() || strides.back() != 1)
      return false;
    anyView = true;
  }
  return anyView;
}

/// A linalg.copy or linalg.fill of one row inside a lowered kpool op (an
/// scf.parallel tagged kpool.kernel): the ring rows of ring_close and
/// seed_tail, the zero rows of ring_close. Left to LLVM these stay element
/// loops (the views may alias as far as LLVM knows, and their strides are
/// only known to MLIR).
bool isKernelRowCopyOrFill(linalg::LinalgOp op, KPoolDialect::KernelAttrHelper
                                                    &kernel) {
  if (!isa<linalg::CopyOp, linalg::FillOp>(op) || op.getNumLoops() != 1 ||
      !op.hasPureBufferSemantics())
    return false;
  for (auto par = op->getParentOfType<scf::ParallelOp>(); par;
       par = par->getParentOfType<scf::ParallelOp>())
    if (kernel.isAttrPresent(par))
      return true;
  return false;
}

struct KPoolVectorizePoolRowsPass
    : public kpool::impl::KPoolVectorizePoolRowsPassBase<
          KPoolVectorizePoolRowsPass> {
  using Base::Base;

  /// Tiles and vectorizes one pooled row; appends the `math.exp` ops and the
  /// transfers of the result to `exps`, its other arithmetic to `arith`.
  LogicalResult vectorizeRow(IRRewriter &rewriter, linalg::LinalgOp op,
                             SmallVectorImpl<Operation *> &exps,
                             SmallVectorImpl<Operation *> &arith) {
    // Full tiles only: the widest power of two up to `vector-size` that
    // divides head_dim (16 for the production 128), so no tile needs a mask.
    int64_t width = poolRowVectorWidth(channels(op), vectorSize);
    rewriter.setInsertionPoint(op);
    scf::SCFTilingOptions options;
    options.setTileSizes({rewriter.getIndexAttr(width)});
    FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
        rewriter, cast<TilingInterface>(op.getOperation()), options);
    if (failed(tiled))
      return op.emitOpError("could not tile the channel loop");
    rewriter.eraseOp(op);
    for (Operation *tiledOp : tiled->tiledOps) {
      rewriter.setInsertionPoint(tiledOp);
      if (failed(linalg::vectorize(rewriter, tiledOp)))
        return tiledOp->emitOpError("could not vectorize the channel loop");
      rewriter.eraseOp(tiledOp);
    }
    for (LoopLikeOpInterface loop : tiled->loops)
      loop->walk([&](Operation *nested) {
        if (isa<math::ExpOp, vector::TransferReadOp, vector::TransferWriteOp>(
                nested))
          exps.push_back(nested);
        collectArith(nested, arith);
      });
    return success();
  }

  static void collectArith(Operation *op, SmallVectorImpl<Operation *> &arith) {
    if (isa<arith::MaximumFOp, arith::AddFOp, arith::TruncFOp>(op))
      arith.push_back(op);
  }

  /// The ops of an unvectorized pooled row (or row loop).
  static void collectScalar(Operation *row, SmallVectorImpl<Operation *> &exps,
                            SmallVectorImpl<Operation *> &arith) {
    row->walk([&](Operation *op) {
      if (isa<math::ExpOp>(op))
        exps.push_back(op);
      collectArith(op, arith);
    });
  }

  void runOnOperation() override {
    if (vectorSize < 0 || vectorSize > kMaxVectorSize) {
      getOperation()->emitError()
          << "kpool-vectorize-pool-rows: vector-size must be in [0, "
          << kMaxVectorSize << "] (0 keeps rows scalar), got "
          << static_cast<int64_t>(vectorSize);
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> rows;
    SmallVector<linalg::LinalgOp> copies;
    SmallVector<Operation *> exps, arith;
    KPoolDialect::PoolRowAttrHelper poolRow(&getContext());
    KPoolDialect::PoolRowLoopAttrHelper poolRowLoop(&getContext());
    KPoolDialect::KernelAttrHelper kernel(&getContext());
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (isKernelRowCopyOrFill(op, kernel))
        copies.push_back(op);
    });
    getOperation()->walk([&](linalg::GenericOp op) {
      if (poolRow.isAttrPresent(op))
        rows.push_back(op);
      // The loop form (large kpool) stays scalar; its exps are approximated
      // like every other pooled row's.
      if (poolRowLoop.isAttrPresent(op))
        collectScalar(op, exps, arith);
    });
    if (rows.empty() && exps.empty() && copies.empty())
      return;

    IRRewriter rewriter(&getContext());
    // Row copies and fills: the same tiles as a pooled row's, when every
    // view is unit-stride (the others stay element loops).
    for (linalg::LinalgOp op : copies) {
      if (vectorSize == 0 || !hasUnitInnerStrides(op) || channels(op) == 0)
        continue;
      SmallVector<Operation *> ignored;
      if (failed(vectorizeRow(rewriter, op, exps, ignored)))
        return signalPassFailure();
    }
    for (linalg::GenericOp op : rows) {
      // Rows that are not one static channel loop (only hand-written IR
      // has them) stay scalar too.
      if (vectorSize == 0 || !hasUnitInnerStrides(op) || channels(op) == 0) {
        collectScalar(op, exps, arith);
        continue;
      }
      if (failed(vectorizeRow(rewriter, op, exps, arith)))
        return signalPassFailure();
    }

    // The max, the fused multiply-adds and the bf16 rounding of every pooled
    // row, vector or scalar, first: the exp expansion adds products and
    // sums of its own.
    {
      RewritePatternSet patterns(&getContext());
      populatePoolingArithmeticPatterns(patterns);
      GreedyRewriteConfig config;
      config.setStrictness(GreedyRewriteStrictness::ExistingOps);
      if (failed(applyOpPatternsGreedily(arith, std::move(patterns), config)))
        return signalPassFailure();
    }

    // Approximate exp wherever a pooled row is computed, vector or scalar:
    // the expansion is elementwise, so a vector lane and a scalar channel
    // compute the same bits. Other exps in the module are left alone.
    // Transfers on unit-stride views become plain vector loads and stores;
    // the others stay for convert-vector-to-scf.
    RewritePatternSet patterns(&getContext());
    populateExpApproximationPatterns(patterns);
    vector::populateVectorTransferLoweringPatterns(patterns,
                                                   /*maxTransferRank=*/1);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    if (failed(applyOpPatternsGreedily(exps, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
