//===- PoolCache.cpp - one pool's pool-cache entry, on any backend --------===//
//
// See PoolCache.h. A lane holds its channels `i * lanes + lane` as one
// vector<n x f32> (n = D / lanes): stage `h` of the rotation pairs channel
// c with c ^ h, which is element i ^ (h / lanes) of the same lane when
// h >= lanes (a vector shuffle) and element i of lane `lane ^ h` otherwise
// (a warp shuffle). Channel c keeps `x_c + x_{c^h}` where bit h of c is
// clear and takes `x_{c^h} - x_c` where it is set, the spec's pair
// `(x_i + x_{i+h}, x_i - x_{i+h})`.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/Utils/PoolCache.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kpool;

namespace {

/// Emission of one lane's share of an entry.
class EntryBuilder {
public:
  EntryBuilder(OpBuilder &b, Location loc, const CacheEntryLanes &lanes,
               int64_t channels)
      : b(b), loc(loc), lanes(lanes), n(channels / lanes.lanes),
        f32(b.getF32Type()), i32(b.getI32Type()),
        vf32(VectorType::get({n}, f32)), vi32(VectorType::get({n}, i32)) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value splatF32(float v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vf32, b.getF32FloatAttr(v)));
  }
  Value splatI32(int32_t v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vi32, b.getI32IntegerAttr(v)));
  }
  Value f32Const(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }

  /// Channel of element i: i * lanes + lane (index).
  Value channel(int64_t i) {
    if (lanes.lanes == 1)
      return idx(i);
    return arith::AddIOp::create(b, loc, idx(i * lanes.lanes), lanes.lane);
  }

  static bool unitStride(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    auto [strides, offset] = type.getStridesAndOffset();
    return strides.back() == 1;
  }

  /// This lane's channels of `row` as f32.
  Value load(Value row) {
    auto type = cast<MemRefType>(row.getType());
    Type elt = type.getElementType();
    Value v;
    if (lanes.lanes == 1 && unitStride(row)) {
      v = vector::LoadOp::create(b, loc, VectorType::get({n}, elt), row,
                                 ValueRange{idx(0)});
    } else {
      SmallVector<Value> elems;
      for (int64_t i = 0; i < n; ++i)
        elems.push_back(memref::LoadOp::create(b, loc, row, channel(i)));
      v = vector::FromElementsOp::create(b, loc, VectorType::get({n}, elt),
                                         elems);
    }
    if (elt != f32)
      v = arith::ExtFOp::create(b, loc, vf32, v);
    return v;
  }

  /// Stores this lane's channels `v` (n elements of `row`'s type).
  void store(Value v, Value row) {
    if (lanes.lanes == 1 && unitStride(row)) {
      vector::StoreOp::create(b, loc, v, row, ValueRange{idx(0)});
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      Value e = vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{i});
      memref::StoreOp::create(b, loc, e, row, channel(i));
    }
  }

  /// v(c ^ h) for this lane's channels c.
  Value partner(Value v, int64_t h) {
    if (h >= lanes.lanes) {
      int64_t hv = h / lanes.lanes;
      SmallVector<int64_t> mask;
      for (int64_t i = 0; i < n; ++i)
        mask.push_back(i ^ hv);
      return vector::ShuffleOp::create(b, loc, v, v, mask);
    }
    SmallVector<Value> elems;
    for (int64_t i = 0; i < n; ++i) {
      Value e = vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{i});
      elems.push_back(lanes.shuffleXor(b, loc, e, h));
    }
    return vector::FromElementsOp::create(b, loc, vf32, elems);
  }

  /// i1 vector: bit h of this lane's channels is clear.
  Value bitClear(int64_t h) {
    if (h >= lanes.lanes) {
      int64_t hv = h / lanes.lanes;
      SmallVector<bool> bits;
      for (int64_t i = 0; i < n; ++i)
        bits.push_back((i & hv) == 0);
      return arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(VectorType::get({n}, b.getI1Type()), bits));
    }
    Value bit = arith::AndIOp::create(b, loc, lanes.lane, idx(h));
    Value clear = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bit,
                                        idx(0));
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({n}, b.getI1Type()), clear);
  }

  /// The staged transform, stages h = 1, 2, ..., D/2.
  Value hadamard(Value v, int64_t channels) {
    for (int64_t h = 1; h < channels; h *= 2) {
      Value p = partner(v, h);
      Value sum = arith::AddFOp::create(b, loc, v, p);
      Value diff = arith::SubFOp::create(b, loc, p, v);
      v = arith::SelectOp::create(b, loc, bitClear(h), sum, diff);
    }
    return v;
  }

  /// max over the entry of `v` (f32, every lane gets it).
  Value reduceMax(Value v) {
    Value m = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF,
                                          v);
    for (int64_t s = lanes.lanes / 2; s >= 1; s /= 2)
      m = arith::MaxNumFOp::create(b, loc, m, lanes.shuffleXor(b, loc, m, s));
    return m;
  }

  OpBuilder &b;
  Location loc;
  const CacheEntryLanes &lanes;
  int64_t n;
  Type f32, i32;
  VectorType vf32, vi32;
};

} // namespace

Value mlir::kpool::buildE4M3FNEncode(OpBuilder &b, Location loc,
                                     Value clamped) {
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), i8 = b.getI8Type();
  auto vecType = dyn_cast<VectorType>(clamped.getType());
  auto like = [&](Type elt) -> Type {
    return vecType ? Type(VectorType::get(vecType.getShape(), elt)) : elt;
  };
  auto cI = [&](int64_t v) -> Value {
    Attribute a = b.getI32IntegerAttr(static_cast<int32_t>(v));
    if (vecType)
      a = DenseElementsAttr::get(cast<ShapedType>(like(i32)), a);
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(a));
  };
  auto cF = [&](float v) -> Value {
    Attribute a = b.getF32FloatAttr(v);
    if (vecType)
      a = DenseElementsAttr::get(cast<ShapedType>(like(f32)), a);
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(a));
  };
  Value bits = arith::BitcastOp::create(b, loc, like(i32), clamped);
  // The sign, as bit 7 of the code.
  Value sign = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, cI(24)), cI(0x80));
  Value mag = arith::AndIOp::create(b, loc, bits, cI(0x7fffffff));
  Value magF = arith::BitcastOp::create(b, loc, like(f32), mag);
  // Below 2^-6 (subnormal codes, steps of 2^-9): |x| * 2^9 is exact, and
  // adding 2^23 rounds it to an integer, nearest even, which the low
  // mantissa bits then hold.
  Value scaled = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, magF, cF(512.0f)),
      cF(8388608.0f));
  Value sub = arith::SubIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, like(i32), scaled),
      cI(0x4b000000));
  // Normal codes: round the mantissa to 3 bits, nearest even, on the bits
  // (a carry moves into the exponent), then rebias from 127 to 7. |x| is
  // at most 448, so the result is at most 0x7e.
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, mag, cI(20)), cI(1));
  Value rounded = arith::AddIOp::create(
      b, loc, mag, arith::AddIOp::create(b, loc, lsb, cI(0x7ffff)));
  Value normal = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, rounded, cI(20)),
      cI((127 - 7) << 3));
  Value isSub = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, mag,
                                      cI(0x3c800000)); // 2^-6
  Value code = arith::OrIOp::create(
      b, loc, sign, arith::SelectOp::create(b, loc, isSub, sub, normal));
  return arith::TruncIOp::create(b, loc, like(i8), code);
}

void mlir::kpool::buildCacheEntry(OpBuilder &b, CacheEntryOp op,
                                  const CacheEntryLanes &lanes) {
  Location loc = op.getLoc();
  auto valueType = cast<MemRefType>(op.getValue().getType());
  auto entryType = cast<MemRefType>(op.getEntry().getType());
  int64_t channels = valueType.getDimSize(0);
  Type T = valueType.getElementType();
  EntryBuilder e(b, loc, lanes, channels);

  // x = f32(T(pool)): the dense value's bits.
  Value y = e.load(op.getValue());
  if (op.getRotate() == Rotate::hadamard) {
    y = e.hadamard(y, channels);
    // y = f32(T(f32(y * c))), c = f32(1/sqrt(D)).
    float c = static_cast<float>(1.0 / std::sqrt(static_cast<double>(channels)));
    y = arith::MulFOp::create(b, loc, y, e.splatF32(c));
    if (T != e.f32) {
      Value rounded =
          arith::TruncFOp::create(b, loc, VectorType::get({e.n}, T), y);
      y = arith::ExtFOp::create(b, loc, e.vf32, rounded);
    }
  }

  if (!isa<Float8E4M3FNType>(entryType.getElementType())) {
    Value out = y;
    if (T != e.f32)
      out = arith::TruncFOp::create(b, loc, VectorType::get({e.n}, T), y);
    e.store(out, op.getEntry());
    return;
  }

  // a = max(max |y|, 1e-4); s = f32(a * f32(1/448)), or the smallest power
  // of two at or above it (exact on the bits: a normal f32 with a non-zero
  // mantissa goes to the next exponent).
  Value a = e.reduceMax(math::AbsFOp::create(b, loc, y));
  a = arith::MaxNumFOp::create(b, loc, a, e.f32Const(1e-4f));
  Value s = arith::MulFOp::create(b, loc, a, e.f32Const(1.0f / 448.0f));
  if (op.getScaleMode() == Scale::pow2) {
    auto cI = [&](int32_t v) {
      return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
    };
    Value bits = arith::BitcastOp::create(b, loc, e.i32, s);
    Value mant = arith::AndIOp::create(b, loc, bits, cI(0x7fffff));
    Value up = arith::AddIOp::create(
        b, loc, arith::AndIOp::create(b, loc, bits, cI(0x7f800000)),
        cI(0x800000));
    Value exact = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        mant, cI(0));
    s = arith::BitcastOp::create(
        b, loc, e.f32, arith::SelectOp::create(b, loc, exact, bits, up));
  }

  // codes = e4m3fn(min(max(y / s, -448), 448)).
  Value q = arith::DivFOp::create(
      b, loc, y, vector::BroadcastOp::create(b, loc, e.vf32, s));
  q = arith::MinNumFOp::create(
      b, loc, arith::MaxNumFOp::create(b, loc, q, e.splatF32(-448.0f)),
      e.splatF32(448.0f));
  Value codes;
  if (lanes.toE4M3FNPair && e.n % 2 == 0) {
    SmallVector<Value> elems;
    for (int64_t i = 0; i < e.n; i += 2) {
      Value lo = vector::ExtractOp::create(b, loc, q, ArrayRef<int64_t>{i});
      Value hi = vector::ExtractOp::create(b, loc, q, ArrayRef<int64_t>{i + 1});
      auto [cLo, cHi] = lanes.toE4M3FNPair(b, loc, lo, hi);
      elems.push_back(cLo);
      elems.push_back(cHi);
    }
    codes = vector::FromElementsOp::create(
        b, loc, VectorType::get({e.n}, b.getI8Type()), elems);
  } else {
    codes = buildE4M3FNEncode(b, loc, q);
  }
  codes = arith::BitcastOp::create(
      b, loc, VectorType::get({e.n}, entryType.getElementType()), codes);
  e.store(codes, op.getEntry());

  Value scale = op.getScale();
  if (lanes.lanes == 1) {
    memref::StoreOp::create(b, loc, s, scale, ValueRange{});
    return;
  }
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      lanes.lane, e.idx(0));
  auto ifOp = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  memref::StoreOp::create(b, loc, s, scale, ValueRange{});
}

namespace {
struct LowerCacheEntry : OpRewritePattern<CacheEntryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CacheEntryOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    buildCacheEntry(rewriter, op, CacheEntryLanes{});
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::kpool::populateCacheEntryLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerCacheEntry>(patterns.getContext());
}
