//===- NVVM.cpp - what the mapping knows about NVIDIA GPUs ----------------===//
//
// The NVIDIA-specific parts of kpool-map-to-gpu: kernel names PTX accepts,
// the fast arithmetic that becomes `ex2.approx.f32` and `div.approx.f32`,
// and the pool-cache entries spread over a row group's lanes with warp
// shuffles (`shfl.sync.bfly`) and the FP8 conversion instruction.
//
//===----------------------------------------------------------------------===//

#include "MappingDetail.h"

#include "kpool/Dialect/KPool/Utils/PoolCache.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::gpu_mapping;

std::string gpu_mapping::ptxIdentifier(std::string name) {
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '$')
      c = '_';
  if (name.empty() || llvm::isDigit(name.front()))
    name.insert(name.begin(), '_');
  return name;
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

/// Replaces `op` by its row group's code: the lanes that wrote the entry's
/// pooled row meet at a warp barrier (which orders their stores before the
/// loads after it), then the first `cacheLanes` lanes (the widest power of
/// two that divides the row and is at most `lanes`) each take channels
/// `i * cacheLanes + lane`, exchanging values by `shfl.sync.bfly` within
/// the group. The guards around `op` depend on the row only, so every lane
/// of a group reaches the barrier.
void gpu_mapping::distributeCacheEntry(IRRewriter &rewriter, CacheEntryOp op,
                                       gpu::LaunchOp launch, Value lane,
                                       int64_t lanes, bool hardwareFP8) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  CacheEntryLanes entryLanes;
  if (hardwareFP8)
    entryLanes.toE4M3FNPair = hardwareE4M3FNPair;
  // One lane per row (max-threads-per-row=1): the lane wrote the whole row
  // itself, nothing to exchange.
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
  int64_t channels = cast<MemRefType>(op.getValue().getType()).getDimSize(0);
  int64_t cacheLanes = 1;
  while (cacheLanes * 2 <= lanes && channels % (cacheLanes * 2) == 0)
    cacheLanes *= 2;
  // The group's first lane in its warp: (threadIdx.y * lanes) mod 32.
  Value groupBase = arith::RemUIOp::create(
      rewriter, loc,
      arith::MulIOp::create(rewriter, loc, toI32(launch.getThreadIds().y),
                            c32(lanes)),
      c32(kWarpSize));
  auto maskOf = [&](int64_t n) -> Value {
    uint32_t bits = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
    return arith::ShLIOp::create(rewriter, loc,
                                 c32(static_cast<int32_t>(bits)), groupBase);
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
        arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, lane,
            arith::ConstantIndexOp::create(rewriter, loc, cacheLanes)),
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
