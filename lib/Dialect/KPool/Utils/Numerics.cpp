//===- Numerics.cpp - numeric choices every kpool backend shares ----------===//

#include "kpool/Dialect/KPool/Utils/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace {

/// A splat (or scalar) constant of `type` (f32 or i32, scalar or vector).
Value constant(PatternRewriter &rw, Location loc, Type type, Attribute elem) {
  TypedAttr attr;
  if (auto vec = dyn_cast<VectorType>(type))
    attr = DenseElementsAttr::get(vec, elem);
  else
    attr = cast<TypedAttr>(elem);
  return arith::ConstantOp::create(rw, loc, type, attr);
}

Value f32Constant(PatternRewriter &rw, Location loc, Type type, float v) {
  return constant(rw, loc, type, rw.getF32FloatAttr(v));
}

Value i32Constant(PatternRewriter &rw, Location loc, Type type, int32_t v) {
  return constant(rw, loc, type, rw.getI32IntegerAttr(v));
}

Type withElement(Type type, Type elem) {
  if (auto vec = dyn_cast<VectorType>(type))
    return vec.clone(elem);
  return elem;
}

/// exp(x) = 2^n * exp(r), n = round-to-nearest(x log2 e), r = x - n ln 2 in
/// [-ln2/2, ln2/2] (one FMA with f32(ln 2); see below for its error),
/// exp(r) = 1 + r + c2 r^2 + ... + c6 r^6 (Horner with FMA; a relative
/// minimax fit, 1.7e-8 = 0.29 ulp at 1 with these f32 coefficients), times
/// 2^n built from the exponent bits. One FMA with 1.5 * 2^23 + 127 rounds
/// x log2 e to an integer and leaves n + 127 in the low mantissa bits of t,
/// so t - that constant is n and t << 23 is 2^n: no float-to-int
/// conversion (undefined for NaN), no floor, no clamp of n.
///
/// Subnormal results are flushed to +0, all of them and only them
/// (docs/semantics.md, "Subnormal weights"): for every f32 x below
/// -126 ln 2 (x < -87.33654022, the f32 just above it; exp(x) < 2^-126
/// exactly there) 2^n is replaced by +0 with one select on its bits, off
/// the polynomial's path, so no subnormal is ever produced; for every x at
/// or above it n >= -126 and, at n = -126, r >= 4.7e-6 > 0, so p >= 1 and
/// the result is normal. Keeping them instead (2^-24 folded into the
/// coefficients, 2^(n + 24) built from the bits: the same 12 instructions)
/// made compress 1.5 to 3 times slower on this project's x86 machine
/// whenever many members sit 87 to 105 below a pool's max, from the
/// subnormal arithmetic; the select costs 5 to 11% while compress runs from
/// cache and nothing measurable when it is bound by memory
/// (docs/semantics.md, "Subnormal weights").
///
/// Domain: x <= 88.3 (2^n at most 2^127), -inf and NaN; the pooled rows call
/// it with x = z - max z <= 0 (or NaN). x below -88 is clamped to -88 with
/// one NaN-keeping select (a `vmaxps`), where n + 127 = 0 makes 2^n = +0
/// (the flush covers it anyway; the clamp keeps p finite for x = -inf and
/// huge negative x, so that +0 * p is +0 and not NaN). NaN stays NaN: p is
/// NaN, x < cut is false, and NaN * 2^n is NaN whatever bits t's NaN
/// shifted into 2^n. exp(0) = 1 exactly (the member at the max weighs
/// exactly 1).
///
/// Reducing with f32(ln 2) alone leaves n (ln 2 - f32(ln 2)) = n * 1.9e-9 in
/// r: a relative error of at most 0.046 |x| + 0.016 f32 ulps in exp(x) (4
/// ulps near x = -88). A pool's error relative to S is a weighted mean of
/// its members' errors, so at most 0.09 max|z| + 0.02 ulps of S, far inside
/// the f32 contract's 4 + 6 max|z|; with keys of one magnitude the far
/// members weigh exp(x) and it vanishes (kpool-differential's exact check:
/// bf16 0.5000, f16 0.5002, f32 4.13 ulps of S, with or without a second
/// reduction FMA for the rest of ln 2).
///
/// 14 instructions per vector on AVX-512 (the select is a compare and a
/// zero-masked move): max, 8 FMAs, a subtraction, a shift, the flush and
/// a multiply (MLIR's polynomial expansion: about 22).
struct KPoolExpApproximation : OpRewritePattern<math::ExpOp> {
  KPoolExpApproximation(MLIRContext *ctx)
      : OpRewritePattern<math::ExpOp>(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(math::ExpOp op,
                                PatternRewriter &rw) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32())
      return failure();
    Location loc = op.getLoc();
    Type intType = withElement(type, rw.getI32Type());
    auto cst = [&](float v) { return f32Constant(rw, loc, type, v); };
    auto fma = [&](Value a, Value b, Value c) -> Value {
      return math::FmaOp::create(rw, loc, a, b, c);
    };

    Value x = op.getOperand();
    Value lo = cst(-88.0f);
    // x < lo is false for NaN: the select keeps NaN.
    Value clamp =
        arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OLT, x, lo);
    Value xc = arith::SelectOp::create(rw, loc, clamp, lo, x);
    Value shifter = cst(12582912.0f + 127.0f); // 1.5 * 2^23 + 127
    Value t = fma(xc, cst(1.44269504088896341f), shifter);
    Value n = arith::SubFOp::create(rw, loc, t, shifter);
    Value r = fma(n, cst(-0.693147182464599609375f), xc);
    Value p = fma(cst(0.0013843653723597527f), r, cst(0.00837415549904108f));
    p = fma(p, r, cst(0.04166800156235695f));
    p = fma(p, r, cst(0.16666431725025177f));
    p = fma(p, r, cst(0.4999999403953552f));
    p = fma(p, r, cst(1.0f));
    p = fma(p, r, cst(1.0f));
    Value tBits = arith::BitcastOp::create(rw, loc, intType, t);
    Value scaleBits = arith::ShLIOp::create(rw, loc, tBits,
                                            i32Constant(rw, loc, intType, 23));
    // The flush: 2^n = +0 for x below -126 ln 2 (false for NaN).
    Value cut = cst(-87.33654022216796875f);
    Value below =
        arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OLT, x, cut);
    scaleBits = arith::SelectOp::create(
        rw, loc, below, i32Constant(rw, loc, intType, 0), scaleBits);
    Value scale = arith::BitcastOp::create(rw, loc, type, scaleBits);
    rw.replaceOpWithNewOp<arith::MulFOp>(op, p, scale);
    return success();
  }
};

/// max(a, b) of the pooling function as `a > b ? a : b` (one `vmaxps`
/// instead of arith.maximumf's NaN-propagating sequence). It differs from
/// maximumf only when an operand is NaN, and then the pool is NaN anyway:
/// the NaN member's own z - M is NaN, so are its e and both sums. Only for
/// the max of the pooled rows.
struct PoolingMax : OpRewritePattern<arith::MaximumFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::MaximumFOp op,
                                PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value a = op.getLhs(), b = op.getRhs();
    Value greater =
        arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OGT, a, b);
    rw.replaceOpWithNewOp<arith::SelectOp>(op, greater, a, b);
    return success();
  }
};

/// acc + e * k as one fused multiply-add (the product of a pooled row has
/// one use: the sum it is added to).
struct PoolingFma : OpRewritePattern<arith::AddFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::AddFOp op,
                                PatternRewriter &rw) const override {
    for (int i = 0; i < 2; ++i) {
      auto mul = op->getOperand(1 - i).getDefiningOp<arith::MulFOp>();
      if (!mul || !mul->hasOneUse())
        continue;
      rw.replaceOpWithNewOp<math::FmaOp>(op, mul.getLhs(), mul.getRhs(),
                                         op->getOperand(i));
      rw.eraseOp(mul);
      return success();
    }
    return failure();
  }
};

/// f32 -> bf16, round to nearest even, a NaN quietened with its sign and top
/// payload bits kept (as the reference's f32ToBf16 does), with the NaN
/// select on the 32-bit lanes, where the comparison's mask is, and between
/// two computed values. arith-expand{include-bf16} selects the constant
/// 0x7fc0 on 16-bit lanes; LLVM folds its shift and truncation into that
/// select and the x86 backend then scalarizes it (a ucomiss, a cmov and a
/// 16-bit store per channel).
struct PoolingTruncToBf16 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rw) const override {
    Type in = op.getIn().getType(), out = op.getType();
    if (!getElementTypeOrSelf(in).isF32() ||
        !getElementTypeOrSelf(out).isBF16())
      return failure();
    Location loc = op.getLoc();
    Type i32 = withElement(in, rw.getI32Type());
    Type i16 = withElement(in, rw.getI16Type());
    auto c = [&](int32_t v) { return i32Constant(rw, loc, i32, v); };
    Value x = op.getIn();
    Value u = arith::BitcastOp::create(rw, loc, i32, x);
    Value lsb = arith::AndIOp::create(
        rw, loc, arith::ShRUIOp::create(rw, loc, u, c(16)), c(1));
    Value rounded = arith::AddIOp::create(
        rw, loc, u, arith::AddIOp::create(rw, loc, lsb, c(0x7fff)));
    Value isNaN =
        arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::UNO, x, x);
    Value quiet = arith::OrIOp::create(rw, loc, u, c(0x00400000));
    Value bits = arith::SelectOp::create(rw, loc, isNaN, quiet, rounded);
    Value high = arith::ShRUIOp::create(rw, loc, bits, c(16));
    Value h = arith::TruncIOp::create(rw, loc, i16, high);
    rw.replaceOpWithNewOp<arith::BitcastOp>(op, out, h);
    return success();
  }
};

} // namespace

void mlir::kpool::populateExpApproximationPatterns(
    RewritePatternSet &patterns) {
  patterns.add<KPoolExpApproximation>(patterns.getContext());
  // Other element types (the pooled rows have none) keep MLIR's expansion.
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    name.consume_front("math.");
    return name == "exp";
  });
}

void mlir::kpool::populatePoolingArithmeticPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PoolingMax, PoolingFma, PoolingTruncToBf16>(
      patterns.getContext());
}

int64_t mlir::kpool::poolRowVectorWidth(int64_t channels, int64_t maxWidth) {
  int64_t width = 1;
  while (width * 2 <= maxWidth && channels > 0 && channels % (width * 2) == 0)
    width *= 2;
  return width;
}
