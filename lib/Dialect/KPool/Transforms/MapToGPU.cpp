//===- MapToGPU.cpp - map lowered kpool loops to gpu.launch ---------------===//
//
// Takes the structured IR of convert-kpool-to-linalg (an `scf.parallel` per
// op over pooled rows or requests, the row's metadata and guards inside it,
// and 1-D linalg ops over the channels of each row) to `gpu.launch`: a row
// group of `threadIdx.x` lanes per iteration, the channel loops spread over
// the lanes with vector accesses where the views allow. The loop bodies move
// into the launches unchanged, so the guards of the lowering hold on the GPU.
//
// The upstream mapping (gpu-map-parallel-loops, convert-parallel-loops-to-gpu)
// cannot be used: it needs the thread-level loops directly nested in the
// block-level one, while here the channel loops sit under `scf.if` and after
// `scf.while` (the binary search) and memory reads.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/Transforms/MapToGPU.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "kpool/Dialect/KPool/Utils/Numerics.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLMAPTOGPUPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

/// Widest access the hardware has per thread (ld.global.v4.b32).
static constexpr int64_t kMaxAccessBytes = 16;

/// A 1-D linalg op over the channels of one row: the pooled-row generic,
/// and the fills and copies of zero rows and ring rows.
/// `name` with every character PTX identifiers do not allow replaced by '_'
/// (and a leading '_' before a digit).
static std::string ptxIdentifier(std::string name) {
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '$')
      c = '_';
  if (name.empty() || llvm::isDigit(name.front()))
    name.insert(name.begin(), '_');
  return name;
}

static bool isChannelOp(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() ||
      linalgOp.getNumLoops() != 1 || linalgOp.getNumReductionLoops() != 0 ||
      ShapedType::isDynamic(linalgOp.getStaticLoopRanges().front()))
    return false;
  if (isa<linalg::GenericOp>(op))
    return KPoolDialect::PoolRowAttrHelper(op->getContext()).isAttrPresent(op) ||
           KPoolDialect::PoolRowLoopAttrHelper(op->getContext())
               .isAttrPresent(op);
  return isa<linalg::FillOp, linalg::CopyOp>(op);
}

static int64_t elementBytes(Type type) {
  return llvm::divideCeil(type.getIntOrFloatBitWidth(), 8);
}

/// The memref operands of a channel op.
static SmallVector<Value> viewsOf(linalg::LinalgOp op) {
  SmallVector<Value> views;
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()))
      views.push_back(v);
  return views;
}

/// Byte alignment that a `width`-channel access of `type` is claimed (and
/// checked) to have.
static int64_t accessAlignment(MemRefType type, int64_t width) {
  return std::min(width * elementBytes(type.getElementType()), kMaxAccessBytes);
}

namespace {

/// Maps kernel loops with one set of options.
class KernelLoopMapper {
public:
  explicit KernelLoopMapper(const KernelLoopMappingOptions &options)
      : vectorBytes(options.vectorBytes), blockSize(options.blockSize),
        maxThreadsPerRow(options.maxThreadsPerRow) {}

  /// Channels per thread and step for `op`: the widest power of two whose
  /// bytes fit `vectorBytes` and that divides the channel count, or 1 when a
  /// view is not statically unit-stride.
  int64_t vectorWidth(linalg::LinalgOp op) const {
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

  /// i1: the first element of `view` is aligned to `align` bytes.
  static Value isAligned(OpBuilder &b, Location loc, Value view,
                         int64_t align) {
    auto type = cast<MemRefType>(view.getType());
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(
        b, loc, b.getIndexType(), view);
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, view);
    Value bytes =
        arith::MulIOp::create(b, loc, meta.getOffset(),
                              arith::ConstantIndexOp::create(
                                  b, loc, elementBytes(type.getElementType())));
    Value addr = arith::AddIOp::create(b, loc, base, bytes);
    Value low = arith::AndIOp::create(
        b, loc, addr, arith::ConstantIndexOp::create(b, loc, align - 1));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, low,
                                 arith::ConstantIndexOp::create(b, loc, 0));
  }

  /// Scalar channel loop: `for c = lane; c < D; c += lanes`.
  LogicalResult emitScalarLoop(IRRewriter &rewriter, linalg::LinalgOp op,
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

  /// Vector channel loop: `for c = lane*V; c < D; c += lanes*V`, each step a
  /// V-wide vector load per input view and a vector store.
  LogicalResult emitVectorLoop(IRRewriter &rewriter, linalg::LinalgOp op,
                               Value lane, int64_t lanes, int64_t width) {
    Location loc = op.getLoc();
    int64_t channels = op.getStaticLoopRanges().front();
    Value vec = arith::ConstantIndexOp::create(rewriter, loc, width);
    Value lb = arith::MulIOp::create(rewriter, loc, lane, vec);
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, channels);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, lanes * width);
    auto loop = scf::ForOp::create(rewriter, loc, lb, ub, step);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
    Value c = loop.getInductionVar();
    IRMapping mapping;
    for (Value v : viewsOf(op)) {
      auto type = cast<MemRefType>(v.getType());
      SmallVector<OpFoldResult> offsets = {c},
                                sizes = {rewriter.getIndexAttr(width)},
                                strides = {rewriter.getIndexAttr(1)};
      auto tileType =
          memref::SubViewOp::inferResultType(type, offsets, sizes, strides);
      Value tile =
          memref::SubViewOp::create(rewriter, loc, cast<MemRefType>(tileType),
                                    v, offsets, sizes, strides);
      mapping.map(v, tile);
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
    return success();
  }

  /// Replaces channel op `op` by its share of the row for `lane` of `lanes`.
  LogicalResult distribute(IRRewriter &rewriter, linalg::LinalgOp op,
                           Value lane, int64_t lanes) {
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    int64_t width = vectorWidth(op);
    if (width == 1) {
      if (failed(emitScalarLoop(rewriter, op, lane, lanes)))
        return failure();
      rewriter.eraseOp(op);
      return success();
    }
    // Vector accesses need every view of this row aligned to its access
    // width; views into padded or offset buffers fall back to scalars.
    Value aligned;
    for (Value v : viewsOf(op)) {
      Value ok =
          isAligned(rewriter, loc, v,
                    accessAlignment(cast<MemRefType>(v.getType()), width));
      aligned =
          aligned
              ? arith::AndIOp::create(rewriter, loc, aligned, ok).getResult()
              : ok;
    }
    auto ifOp = scf::IfOp::create(rewriter, loc, aligned,
                                  /*withElseRegion=*/true);
    rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    if (failed(emitVectorLoop(rewriter, op, lane, lanes, width)))
      return failure();
    rewriter.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    if (failed(emitScalarLoop(rewriter, op, lane, lanes)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }

  /// Whether `op` writes memory (or may: unknown effects count as writes).
  static bool mayWrite(Operation *op) {
    if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        op->hasTrait<OpTrait::IsTerminator>())
      return false;
    auto iface = dyn_cast<MemoryEffectOpInterface>(op);
    if (!iface)
      return true;
    return iface.hasEffect<MemoryEffects::Write>() ||
           iface.hasEffect<MemoryEffects::Free>();
  }

  LogicalResult mapLoop(scf::ParallelOp loop) {
    Location loc = loop.getLoc();
    if (loop.getNumLoops() != 1 || loop.getNumResults() != 0)
      return loop.emitOpError(
          "expected a 1-D parallel loop without reductions (the form "
          "convert-kpool-to-linalg emits)");

    SmallVector<linalg::LinalgOp> channelOps;
    loop.getBody()->walk([&](Operation *op) {
      if (isChannelOp(op))
        channelOps.push_back(cast<linalg::LinalgOp>(op));
    });

    // Lanes per row: enough for one access per lane over the widest row,
    // capped at a warp (or the option).
    int64_t lanes = 1;
    for (linalg::LinalgOp op : channelOps) {
      int64_t channels = op.getStaticLoopRanges().front();
      lanes =
          std::max<int64_t>(lanes, llvm::divideCeil(channels, vectorWidth(op)));
    }
    lanes =
        std::clamp<int64_t>(lanes, 1, std::max<int64_t>(maxThreadsPerRow, 1));
    int64_t rowsPerBlock = std::max<int64_t>(1, blockSize / lanes);

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
    // A static trip count (pool_offsets' single scan) needs no more rows.
    std::optional<int64_t> lbC = getConstantIntValue(lb),
                           ubC = getConstantIntValue(ub),
                           stepC = getConstantIntValue(step);
    if (lbC && ubC && stepC && *stepC > 0)
      rowsPerBlock = std::clamp<int64_t>(
          llvm::divideCeil(std::max<int64_t>(*ubC - *lbC, 0), *stepC), 1,
          rowsPerBlock);
    Value rowsV = arith::ConstantIndexOp::create(rewriter, loc, rowsPerBlock);
    Value lanesV = arith::ConstantIndexOp::create(rewriter, loc, lanes);
    Value blocks = arith::CeilDivUIOp::create(rewriter, loc, trips, rowsV);

    // CUDA rejects an empty grid: an empty iteration space launches nothing.
    auto some = scf::IfOp::create(
        rewriter, loc,
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ugt, trips,
                              zero),
        /*withElseRegion=*/false);
    rewriter.setInsertionPoint(some.thenBlock()->getTerminator());
    auto launch = gpu::LaunchOp::create(rewriter, loc, blocks, one, one, lanesV,
                                        rowsV, one);
    // Outlining names the kernel after the function and the loop's tag
    // (serving_step_kpool_compress, ...), spelled as a PTX identifier: a
    // function name may hold characters PTX rejects (`@a.b`, `@"x y"`), and
    // ptxas would fail on the kernel's name.
    auto func = loop->getParentOfType<FunctionOpInterface>();
    if (StringAttr name =
            KPoolDialect::KernelAttrHelper(loop.getContext()).getAttr(loop);
        name && func) {
      launch.setFunctionAttr(FlatSymbolRefAttr::get(rewriter.getStringAttr(
          ptxIdentifier((func.getName() + "_" + name.getValue()).str()))));
    }
    Block &body = launch.getBody().front();
    rewriter.setInsertionPointToEnd(&body);
    gpu::TerminatorOp::create(rewriter, loc);
    rewriter.setInsertionPointToStart(&body);
    Value lane = launch.getThreadIds().x;
    Value index = arith::AddIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x, rowsV),
        launch.getThreadIds().y);
    auto inRange = scf::IfOp::create(
        rewriter, loc,
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, index,
                              trips),
        /*withElseRegion=*/false);
    rewriter.setInsertionPoint(inRange.thenBlock()->getTerminator());
    Value iv = arith::AddIOp::create(
        rewriter, loc, lb, arith::MulIOp::create(rewriter, loc, index, step));

    // Move the loop body (all but its scf.reduce) into the launch.
    Block *loopBody = loop.getBody();
    loopBody->getArgument(0).replaceAllUsesWith(iv);
    Block *dest = inRange.thenBlock();
    dest->getOperations().splice(dest->getTerminator()->getIterator(),
                                 loopBody->getOperations(), loopBody->begin(),
                                 loopBody->getTerminator()->getIterator());
    rewriter.eraseOp(loop);

    // Stores outside the channel loops: one lane per row does them.
    if (lanes > 1) {
      SmallVector<Operation *> writers;
      dest->walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (isChannelOp(op))
          return WalkResult::skip();
        if (!mayWrite(op))
          return WalkResult::advance();
        writers.push_back(op);
        return WalkResult::skip();
      });
      for (Operation *op : writers) {
        if (op->getNumResults() != 0)
          return op->emitOpError(
              "writes memory and has results; cannot run it on one lane");
        rewriter.setInsertionPoint(op);
        auto first = scf::IfOp::create(
            rewriter, op->getLoc(),
            arith::CmpIOp::create(
                rewriter, op->getLoc(), arith::CmpIPredicate::eq, lane,
                arith::ConstantIndexOp::create(rewriter, op->getLoc(), 0)),
            /*withElseRegion=*/false);
        rewriter.moveOpBefore(op, first.thenBlock()->getTerminator());
      }
    }

    for (linalg::LinalgOp op : channelOps)
      if (failed(distribute(rewriter, op, lane, lanes)))
        return failure();
    return success();
  }

private:
  int64_t vectorBytes, blockSize, maxThreadsPerRow;
};

} // namespace

LogicalResult
kpool::verifyKernelLoopMappingOptions(Location loc,
                                      const KernelLoopMappingOptions &options) {
  if (options.vectorBytes < 1 || options.vectorBytes > kMaxAccessBytes ||
      !llvm::isPowerOf2_64(options.vectorBytes))
    return emitError(loc) << "kpool-map-to-gpu: vector-bytes must be a power "
                             "of two in [1, "
                          << kMaxAccessBytes << "], got "
                          << options.vectorBytes;
  if (options.blockSize < 1 || options.blockSize > 1024)
    return emitError(loc) << "kpool-map-to-gpu: block-size must be in [1, "
                             "1024], got "
                          << options.blockSize;
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

LogicalResult
kpool::mapKernelLoopToGPU(scf::ParallelOp loop,
                          const KernelLoopMappingOptions &options) {
  if (failed(verifyKernelLoopMappingOptions(loop.getLoc(), options)))
    return failure();
  return KernelLoopMapper(options).mapLoop(loop);
}

LogicalResult kpool::verifyNoHostAccess(func::FuncOp func) {
  bool hostAccess = false;
  func.walk([&](Operation *op) {
    if (op->getParentOfType<scf::ParallelOp>() ||
        op->getParentOfType<gpu::LaunchOp>())
      return;
    if (isa<memref::AllocOp, memref::AllocaOp, memref::ReallocOp,
            memref::CopyOp, bufferization::CloneOp>(op)) {
      op->emitOpError()
          << "would place a buffer in host memory next to GPU kernels; "
             "kpool-map-to-gpu expects every operand to be a "
             "caller-provided device buffer (write the results into "
             "function arguments)";
      hostAccess = true;
    } else if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp,
                   vector::StoreOp, vector::TransferReadOp,
                   vector::TransferWriteOp, linalg::LinalgOp>(op)) {
      // E.g. a canonicalization folded a one-iteration parallel loop.
      op->emitOpError() << "accesses a buffer outside any parallel loop "
                           "in a function with GPU kernels; it would "
                           "access device memory on the host";
      hostAccess = true;
    }
  });
  return failure(hostAccess);
}

namespace {

struct KPoolMapToGPUPass
    : public kpool::impl::KPoolMapToGPUPassBase<KPoolMapToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    KernelLoopMappingOptions options;
    options.vectorBytes = vectorBytes;
    options.blockSize = blockSize;
    options.maxThreadsPerRow = maxThreadsPerRow;
    if (failed(verifyKernelLoopMappingOptions(func.getLoc(), options)))
      return signalPassFailure();

    // Launches already in the function (the caller's own) would be
    // outlined as <function>_kernel, which must be a PTX identifier too.
    std::string outlined = (func.getName() + "_kernel").str();
    if (ptxIdentifier(outlined) != outlined)
      func.walk([&](gpu::LaunchOp launch) {
        if (!launch.getFunctionAttr())
          launch.setFunctionAttr(FlatSymbolRefAttr::get(
              &getContext(), ptxIdentifier(outlined)));
      });

    // Only the loops kpool's lowering produced; the caller's own loops,
    // allocations and ops are left to the caller's pipeline.
    SmallVector<scf::ParallelOp> loops = getKernelLoops(func);
    if (loops.empty())
      return;
    if (checkHostAccess && failed(verifyNoHostAccess(func)))
      return signalPassFailure();

    KernelLoopMapper mapper(options);
    for (scf::ParallelOp loop : loops)
      if (failed(mapper.mapLoop(loop)))
        return signalPassFailure();

    if (approximateExp) {
      // The same rewrite kpool-vectorize-pool-rows applies on the CPU.
      SmallVector<Operation *> exps;
      func.walk([&](math::ExpOp exp) {
        if (exp->getParentOfType<gpu::LaunchOp>())
          exps.push_back(exp);
      });
      RewritePatternSet patterns(&getContext());
      populateExpApproximationPatterns(patterns);
      GreedyRewriteConfig config;
      config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
      if (failed(applyOpPatternsGreedily(exps, std::move(patterns), config)))
        return signalPassFailure();
    }
  }
};

} // namespace
