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
#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Utils/Numerics.h"
#include "kpool/Dialect/KPool/Utils/PoolCache.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
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
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLMAPTOGPUPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

/// Widest access the hardware has per thread (ld.global.v4.b32).
static constexpr int64_t kMaxAccessBytes = 16;
/// Threads of a warp.
static constexpr int64_t kWarpSize = 32;

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

/// Whether `v` is defined inside `region` (or a region nested in it).
static bool definedIn(Value v, Region &region) {
  return region.isAncestor(v.getParentRegion());
}

/// Collects into `roots` the memrefs defined outside `region` that `view`
/// may be a view of, through subviews, casts and selects; false when it
/// cannot tell. With `alignElems` > 0 it also requires every step to keep
/// the alignment of a row start: unit strides and an innermost offset that
/// is a static multiple of `alignElems` on the kept innermost dimension.
/// Then `view` is aligned to `alignElems` elements whenever each root
/// starts aligned and every stride of the root but the innermost is a
/// multiple of `alignElems`.
static bool traceRoots(Value view, Region &region,
                       SmallVectorImpl<Value> &roots, int64_t alignElems = 0,
                       int depth = 0) {
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

void kpool::applyGPUFastMath(Region &region) {
  SmallVector<math::ExpOp> exps;
  region.walk([&](math::ExpOp exp) { exps.push_back(exp); });
  for (math::ExpOp exp : exps) {
    Type type = exp.getType();
    if (!getElementTypeOrSelf(type).isF32())
      continue;
    OpBuilder b(exp);
    Location loc = exp.getLoc();
    // f32(log2 e) = 0x3FB8AA3B. exp(x) = exp2(x * log2 e): for the pooling
    // function's x = z - M <= 0 the product's rounding costs at most
    // |x| * 2^-24 in the exponent (see docs/gpu.md).
    TypedAttr log2e = b.getF32FloatAttr(static_cast<float>(M_LOG2E));
    if (auto vec = dyn_cast<VectorType>(type))
      log2e = DenseElementsAttr::get(vec, log2e);
    Value scale = arith::ConstantOp::create(b, loc, type, log2e);
    Value x = arith::MulFOp::create(b, loc, exp.getOperand(), scale);
    exp.replaceAllUsesWith(math::Exp2Op::create(b, loc, x).getResult());
    exp.erase();
  }
  region.walk([&](arith::DivFOp div) {
    if (getElementTypeOrSelf(div.getType()).isF32())
      div.setFastmath(arith::FastMathFlags::afn);
  });
}

/// The e4m3fn codes of two clamped f32 values by the hardware conversion,
/// `cvt.rn.satfinite.e4m3x2.f32` (round to nearest even; its first operand
/// goes to the upper byte).
static std::pair<Value, Value> hardwareE4M3FNPair(OpBuilder &b, Location l,
                                                  Value lo, Value hi) {
  Value packed = NVVM::ConvertF32x2ToF8x2Op::create(
      b, l, b.getI16Type(), hi, lo,
      NVVM::FPRoundingModeAttr::get(b.getContext(), NVVM::FPRoundingMode::RN),
      NVVM::SaturationModeAttr::get(b.getContext(),
                                    NVVM::SaturationMode::SATFINITE),
      b.getBoolAttr(false), TypeAttr::get(b.getType<Float8E4M3FNType>()));
  Type i8 = b.getI8Type(), i16 = b.getI16Type();
  Value low = arith::TruncIOp::create(b, l, i8, packed);
  Value high = arith::TruncIOp::create(
      b, l, i8,
      arith::ShRUIOp::create(b, l, packed,
                             arith::ConstantIntOp::create(b, l, i16, 8)));
  return {low, high};
}

namespace {

/// Maps kernel loops with one set of options.
class KernelLoopMapper {
public:
  explicit KernelLoopMapper(const KernelLoopMappingOptions &options)
      : vectorBytes(options.vectorBytes), blockSize(options.blockSize),
        maxThreadsPerRow(options.maxThreadsPerRow),
        gridBlocks(options.gridBlocks), fastMath(options.fastMath),
        hardwareFP8(options.hardwareFP8) {}

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
                               Value lane, int64_t lanes, int64_t width,
                               const DenseMap<Value, Value> &preloadable) {
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
    DenseMap<Value, Value> viewOfTile;
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
      if (Value hoisted = preloadVector(rewriter, load, view, width, cond)) {
        rewriter.replaceOp(load, hoisted);
      }
    }
    return success();
  }

  /// Clones the chain of static subviews and casts that makes `v` from a
  /// kernel operand at the current insertion point; null when `v` is not
  /// such a chain (or a static subview might leave its source). `key`
  /// describes the chain.
  Value cloneStaticView(IRRewriter &rewriter, Value v, IRMapping &mapping,
                        std::string &key, int depth = 0) {
    Region &body = launch.getBody();
    if (!definedIn(v, body)) {
      auto type = dyn_cast<MemRefType>(v.getType());
      if (!type || !type.hasStaticShape())
        return Value();
      if (!writesUnknown && llvm::is_contained(writtenRoots, v))
        return Value();
      if (writesUnknown)
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
  Value preloadVector(IRRewriter &rewriter, vector::LoadOp load, Value view,
                      int64_t width, Value cond) {
    if (!llvm::all_of(load.getIndices(), [](Value i) {
          return matchPattern(i, m_Constant());
        }))
      return Value();
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(prefixPoint);
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
        rewriter, loc, prefixLane,
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
  Value rootAligned(IRRewriter &rewriter, Value root, int64_t align) {
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
        rewriter.setInsertionPoint(hostPoint);
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
  Value hostAnd(IRRewriter &rewriter, Value lhs, Value rhs) {
    if (!lhs || !rhs)
      return lhs ? lhs : rhs;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(hostPoint);
    return arith::AndIOp::create(rewriter, rhs.getLoc(), lhs, rhs);
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
      rowAligned = rowAligned ? arith::AndIOp::create(rewriter, loc,
                                                      rowAligned, rowOk)
                                    .getResult()
                              : rowOk;
    }
    Value aligned =
        hostAligned && rowAligned
            ? arith::AndIOp::create(rewriter, loc, hostAligned, rowAligned)
                  .getResult()
            : (hostAligned ? hostAligned : rowAligned);
    auto ifOp = scf::IfOp::create(rewriter, loc, aligned,
                                  /*withElseRegion=*/true);
    rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    if (failed(emitVectorLoop(rewriter, op, lane, lanes, width, preloadable)))
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

    // The GPU's fast arithmetic, in the pooled rows' bodies before they are
    // distributed, so that the vector and scalar paths compute alike.
    // Only pools stored as bf16 or f16: their tolerance (1 ulp of T) absorbs
    // the approximate instructions with a wide margin; an f32 pool's (a few
    // f32 ulps) does not, so it keeps the accurate arithmetic.
    if (fastMath)
      for (linalg::LinalgOp op : channelOps) {
        Type out = getElementTypeOrSelf(op.getDpsInits().front().getType());
        if (isa<linalg::GenericOp>(op.getOperation()) &&
            (out.isBF16() || out.isF16()))
          applyGPUFastMath(op->getRegion(0));
      }

    // What the body writes: row-invariant loads are hoisted only from
    // operands it does not write.
    writtenRoots.clear();
    writesUnknown = false;
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
          writesUnknown = true;
      }
      for (Value v : written) {
        SmallVector<Value> roots;
        if (!traceRoots(v, loop.getRegion(), roots))
          writesUnknown = true;
        llvm::append_range(writtenRoots, roots);
      }
    });

    SmallVector<CacheEntryOp> cacheEntries;
    loop.getBody()->walk(
        [&](CacheEntryOp op) { cacheEntries.push_back(op); });

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
    // A pool-cache entry is exchanged between the lanes of its row by warp
    // shuffles: a row group must be an aligned power-of-two part of a warp.
    // Rounded up within the same bounds: at most a warp, the option and
    // the block (down to powers of two).
    if (!cacheEntries.empty()) {
      int64_t cap = std::min<int64_t>(
          {kWarpSize,
           int64_t(llvm::bit_floor(uint64_t(std::max<int64_t>(maxThreadsPerRow, 1)))),
           int64_t(llvm::bit_floor(uint64_t(std::max<int64_t>(blockSize, 1))))});
      lanes = std::min<int64_t>(int64_t(llvm::PowerOf2Ceil(lanes)), cap);
    }
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
    // At most grid-blocks blocks; a grid-stride loop covers the rest. The
    // geometry depends on the shapes only.
    Value blocks = arith::MinUIOp::create(
        rewriter, loc, arith::CeilDivUIOp::create(rewriter, loc, trips, rowsV),
        arith::ConstantIndexOp::create(rewriter, loc,
                                       std::max<int64_t>(gridBlocks, 1)));

    // CUDA rejects an empty grid: an empty iteration space launches nothing.
    auto some = scf::IfOp::create(
        rewriter, loc,
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ugt, trips,
                              zero),
        /*withElseRegion=*/false);
    rewriter.setInsertionPoint(some.thenBlock()->getTerminator());
    launch = gpu::LaunchOp::create(rewriter, loc, blocks, one, one, lanesV,
                                   rowsV, one);
    hostPoint = some;
    rootChecks.clear();
    preloads.clear();
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
    prefixLane = lane;
    // Row group `blockIdx.x * rows + threadIdx.y`, then every
    // `gridDim.x * rows` rows after it (a grid-stride loop).
    Value first = arith::AddIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, launch.getBlockIds().x, rowsV),
        launch.getThreadIds().y);
    Value stride =
        arith::MulIOp::create(rewriter, loc, launch.getGridSize().x, rowsV);
    auto rowLoop = scf::ForOp::create(rewriter, loc, first, trips, stride);
    prefixPoint = rowLoop;
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

    // Stores outside the channel loops: one lane per row does them.
    if (lanes > 1) {
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
        // An atomic whose old value nobody reads (the status word's) runs
        // on one lane like a store.
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
    }

    for (linalg::LinalgOp op : channelOps)
      if (failed(distribute(rewriter, op, lane, lanes)))
        return failure();
    for (CacheEntryOp op : cacheEntries)
      distributeCacheEntry(rewriter, op, launch, lane, lanes);
    return success();
  }

  /// Replaces `op` by its row group's code: the lanes that wrote the
  /// entry's pooled row meet at a warp barrier (which orders their stores
  /// before the loads after it), then the first `cacheLanes` lanes (the
  /// widest power of two that divides the row and is at most `lanes`) each
  /// take channels `i * cacheLanes + lane`, exchanging values by
  /// `shfl.sync.bfly` within the group. The guards around `op` depend on
  /// the row only, so every lane of a group reaches the barrier.
  void distributeCacheEntry(IRRewriter &rewriter, CacheEntryOp op,
                            gpu::LaunchOp launch, Value lane, int64_t lanes) {
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    CacheEntryLanes entryLanes;
    if (hardwareFP8)
      entryLanes.toE4M3FNPair = hardwareE4M3FNPair;
    // One lane per row (max-threads-per-row=1): the lane wrote the whole
    // row itself, nothing to exchange.
    if (lanes == 1) {
      buildCacheEntry(rewriter, op, entryLanes);
      rewriter.eraseOp(op);
      return;
    }
    Type i32 = rewriter.getI32Type();
    auto c32 = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(rewriter, loc, i32, v);
    };
    auto toI32 = [&](Value index) -> Value {
      return arith::IndexCastUIOp::create(rewriter, loc, i32, index);
    };
    int64_t channels =
        cast<MemRefType>(op.getValue().getType()).getDimSize(0);
    int64_t cacheLanes = 1;
    while (cacheLanes * 2 <= lanes && channels % (cacheLanes * 2) == 0)
      cacheLanes *= 2;
    // The group's first lane in its warp: (threadIdx.y * lanes) mod 32.
    Value groupBase = arith::RemUIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc,
                              toI32(launch.getThreadIds().y), c32(lanes)),
        c32(kWarpSize));
    auto maskOf = [&](int64_t n) -> Value {
      uint32_t bits = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
      return arith::ShLIOp::create(
          rewriter, loc, c32(static_cast<int32_t>(bits)), groupBase);
    };
    NVVM::SyncWarpOp::create(rewriter, loc, maskOf(lanes));
    Value cacheMask = maskOf(cacheLanes);
    auto shuffleXor = [&](OpBuilder &b, Location l, Value v,
                          int64_t m) -> Value {
      return NVVM::ShflOp::create(b, l, v.getType(), cacheMask, v,
                                  c32(static_cast<int32_t>(m)), c32(0x1f),
                                  NVVM::ShflKind::bfly, UnitAttr());
    };
    entryLanes.lanes = cacheLanes;
    entryLanes.lane = lane;
    entryLanes.shuffleXor = shuffleXor;
    if (cacheLanes < lanes) {
      auto ifOp = scf::IfOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, lane,
                                arith::ConstantIndexOp::create(rewriter, loc,
                                                               cacheLanes)),
          /*withElseRegion=*/false);
      rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    }
    if (cacheLanes == 1) {
      entryLanes.lane = Value();
      entryLanes.shuffleXor = nullptr;
    }
    buildCacheEntry(rewriter, op, entryLanes);
    rewriter.eraseOp(op);
  }

private:
  int64_t vectorBytes, blockSize, maxThreadsPerRow, gridBlocks;
  bool fastMath, hardwareFP8;

  // State of the launch being built (mapLoop).
  /// The launch; values defined outside its body are kernel-invariant.
  gpu::LaunchOp launch;
  /// Host-side point before the launch, where kernel-invariant checks go.
  Operation *hostPoint = nullptr;
  /// Point in the launch body before the loop over rows, where per-thread
  /// row-invariant values (preloaded `ape`) go.
  Operation *prefixPoint = nullptr;
  /// `lane` as seen from the prefix.
  Value prefixLane;
  /// Host-side alignment checks of kernel operands, by (root, bytes).
  DenseMap<std::pair<Value, int64_t>, Value> rootChecks;
  /// Roots of every memref the loop body writes (or null: unknown).
  SmallVector<Value> writtenRoots;
  bool writesUnknown = false;
  /// Preloaded row-invariant vectors, by a key of their view chain.
  llvm::StringMap<Value> preloads;
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
  if (options.gridBlocks < 1 || options.gridBlocks > (int64_t(1) << 31) - 1)
    return emitError(loc) << "kpool-map-to-gpu: grid-blocks must be in [1, "
                             "2^31 - 1], got "
                          << options.gridBlocks;
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
    options.gridBlocks = gridBlocks;
    // approximate-exp asks for the CPU path's arithmetic: polynomial exp and
    // an IEEE division.
    options.fastMath = fastMath && !approximateExp;
    options.hardwareFP8 = hardwareFP8;
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
