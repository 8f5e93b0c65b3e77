//===- PoolCache.cpp - one pool's pool-cache entry, on any backend --------===//
//
// See PoolCache.h. A lane holds its channels `i * lanes + lane` (n = D /
// lanes of them) in chunks of vector<w x f32>: stage `h` of the rotation
// pairs channel c with c ^ h, which is element i of lane `lane ^ h` when
// h < lanes (a warp shuffle), else element i ^ (h / lanes) of the same
// lane: in the same chunk (a vector shuffle) or in chunk c ^ (h / lanes /
// w) (whole-vector adds and subtracts). Channel c keeps `x_c + x_{c^h}` where bit h of c is
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

/// The values a lane holds: its `n` channels (element i is channel
/// `i * lanes + lane`) as `n / w` chunks of `vector<w x f32>` (element i is
/// element `i mod w` of chunk `i / w`). One chunk on the GPU (a lane holds
/// few channels); register-wide chunks on the CPU, where one lane holds the
/// whole entry, so that every operation is on native vectors.
using Chunks = SmallVector<Value>;

/// Emission of one lane's share of an entry.
class EntryBuilder {
public:
  EntryBuilder(OpBuilder &b, Location loc, const CacheEntryLanes &lanes,
               int64_t channels)
      : b(b), loc(loc), lanes(lanes), n(channels / lanes.lanes),
        w(chunkWidth(lanes, n)), f32(b.getF32Type()), i32(b.getI32Type()),
        vf32(VectorType::get({w}, f32)) {}

  /// Channels per chunk: all of them with several lanes; on one lane the
  /// widest power of two of at most kChunk that divides the entry.
  static int64_t chunkWidth(const CacheEntryLanes &lanes, int64_t n) {
    constexpr int64_t kChunk = 8; // f32 lanes of a 256-bit register
    if (lanes.lanes > 1)
      return n;
    int64_t w = 1;
    while (w * 2 <= kChunk && n % (w * 2) == 0)
      w *= 2;
    return w;
  }

  int64_t numChunks() const { return n / w; }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value splatF32(float v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vf32, b.getF32FloatAttr(v)));
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

  /// This lane's channels of `row` as f32 chunks.
  Chunks load(Value row) {
    Type elt = cast<MemRefType>(row.getType()).getElementType();
    VectorType chunkType = VectorType::get({w}, elt);
    Chunks chunks;
    for (int64_t c = 0; c < numChunks(); ++c) {
      Value v;
      if (lanes.lanes == 1 && unitStride(row)) {
        v = vector::LoadOp::create(b, loc, chunkType, row,
                                   ValueRange{idx(c * w)});
      } else {
        SmallVector<Value> elems;
        for (int64_t j = 0; j < w; ++j)
          elems.push_back(memref::LoadOp::create(b, loc, row,
                                                 channel(c * w + j)));
        v = vector::FromElementsOp::create(b, loc, chunkType, elems);
      }
      if (elt != f32)
        v = arith::ExtFOp::create(b, loc, vf32, v);
      chunks.push_back(v);
    }
    return chunks;
  }

  /// Stores this lane's channels `chunks` (of `row`'s element type).
  void store(const Chunks &chunks, Value row) {
    for (int64_t c = 0; c < numChunks(); ++c) {
      if (lanes.lanes == 1 && unitStride(row)) {
        vector::StoreOp::create(b, loc, chunks[c], row,
                                ValueRange{idx(c * w)});
        continue;
      }
      for (int64_t j = 0; j < w; ++j) {
        Value e =
            vector::ExtractOp::create(b, loc, chunks[c], ArrayRef<int64_t>{j});
        memref::StoreOp::create(b, loc, e, row, channel(c * w + j));
      }
    }
  }

  /// `fn` on every chunk.
  Chunks map(const Chunks &in, function_ref<Value(Value)> fn) {
    Chunks out;
    for (Value v : in)
      out.push_back(fn(v));
    return out;
  }

  /// i1 vector: bit `bit` of the in-chunk element index is clear.
  Value elementBitClear(int64_t bit) {
    SmallVector<bool> bits;
    for (int64_t j = 0; j < w; ++j)
      bits.push_back((j & bit) == 0);
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(VectorType::get({w}, b.getI1Type()), bits));
  }

  /// `(clear ? v + p : p - v)`: channel c keeps x_c + x_{c^h} where bit h
  /// of c is clear and takes x_{c^h} - x_c where it is set.
  Value butterfly(Value v, Value p, Value clear) {
    Value sum = arith::AddFOp::create(b, loc, v, p);
    Value diff = arith::SubFOp::create(b, loc, p, v);
    return arith::SelectOp::create(b, loc, clear, sum, diff);
  }

  /// The staged transform, stages h = 1, 2, ..., D/2 (channel distances).
  Chunks hadamard(Chunks v, int64_t channels) {
    for (int64_t h = 1; h < channels; h *= 2) {
      if (h < lanes.lanes) {
        // Across lanes: element i of lane `lane ^ h`.
        Value bit = arith::AndIOp::create(b, loc, lanes.lane, idx(h));
        Value clear = vector::BroadcastOp::create(
            b, loc, VectorType::get({w}, b.getI1Type()),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bit,
                                  idx(0)));
        v = map(v, [&](Value chunk) {
          SmallVector<Value> elems;
          for (int64_t j = 0; j < w; ++j) {
            Value e =
                vector::ExtractOp::create(b, loc, chunk, ArrayRef<int64_t>{j});
            elems.push_back(lanes.shuffleXor(b, loc, e, h));
          }
          Value p = vector::FromElementsOp::create(b, loc, vf32, elems);
          return butterfly(chunk, p, clear);
        });
        continue;
      }
      int64_t hv = h / lanes.lanes; // distance between a lane's elements
      if (hv < w) {
        // Within a chunk.
        SmallVector<int64_t> mask;
        for (int64_t j = 0; j < w; ++j)
          mask.push_back(j ^ hv);
        Value clear = elementBitClear(hv);
        v = map(v, [&](Value chunk) {
          Value p = vector::ShuffleOp::create(b, loc, chunk, chunk, mask);
          return butterfly(chunk, p, clear);
        });
        continue;
      }
      // Between chunks c and c ^ (hv / w): whole-vector adds and subtracts.
      int64_t hc = hv / w;
      Chunks next(v.size());
      for (int64_t c = 0; c < numChunks(); ++c) {
        if (c & hc)
          continue;
        next[c] = arith::AddFOp::create(b, loc, v[c], v[c ^ hc]);
        next[c ^ hc] = arith::SubFOp::create(b, loc, v[c], v[c ^ hc]);
      }
      v = next;
    }
    return v;
  }

  /// max over the entry of `v` (f32, every lane gets it).
  Value reduceMax(const Chunks &v) {
    Value acc = v.front();
    for (size_t c = 1; c < v.size(); ++c)
      acc = arith::MaxNumFOp::create(b, loc, acc, v[c]);
    Value m = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF,
                                          acc);
    for (int64_t s = lanes.lanes / 2; s >= 1; s /= 2)
      m = arith::MaxNumFOp::create(b, loc, m, lanes.shuffleXor(b, loc, m, s));
    return m;
  }

  OpBuilder &b;
  Location loc;
  const CacheEntryLanes &lanes;
  int64_t n, w;
  Type f32, i32;
  VectorType vf32;
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
  VectorType chunkOfT = VectorType::get({e.w}, T);

  // x = f32(T(pool)): the dense value's bits.
  Chunks y = e.load(op.getValue());
  if (op.getRotate() == Rotate::hadamard) {
    y = e.hadamard(y, channels);
    // y = f32(T(f32(y * c))), c = f32(1/sqrt(D)).
    float c =
        static_cast<float>(1.0 / std::sqrt(static_cast<double>(channels)));
    Value scale = e.splatF32(c);
    y = e.map(y, [&](Value v) -> Value {
      v = arith::MulFOp::create(b, loc, v, scale);
      if (T == e.f32)
        return v;
      Value rounded = arith::TruncFOp::create(b, loc, chunkOfT, v);
      return arith::ExtFOp::create(b, loc, e.vf32, rounded);
    });
  }

  if (!isa<Float8E4M3FNType>(entryType.getElementType())) {
    Chunks out = y;
    if (T != e.f32)
      out = e.map(y, [&](Value v) -> Value {
        return arith::TruncFOp::create(b, loc, chunkOfT, v);
      });
    e.store(out, op.getEntry());
    return;
  }

  // a = max(max |y|, 1e-4); s = f32(a * f32(1/448)), or the smallest power
  // of two at or above it (exact on the bits: a normal f32 with a non-zero
  // mantissa goes to the next exponent).
  Value a = e.reduceMax(
      e.map(y, [&](Value v) -> Value { return math::AbsFOp::create(b, loc, v); }));
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
  Value sv = vector::BroadcastOp::create(b, loc, e.vf32, s);
  Value lo = e.splatF32(-448.0f), hi = e.splatF32(448.0f);
  Type codeType = VectorType::get({e.w}, entryType.getElementType());
  Type i8Chunk = VectorType::get({e.w}, b.getI8Type());
  Chunks codes = e.map(y, [&](Value v) -> Value {
    Value q = arith::DivFOp::create(b, loc, v, sv);
    q = arith::MinNumFOp::create(b, loc, arith::MaxNumFOp::create(b, loc, q, lo),
                                 hi);
    Value c;
    if (lanes.toE4M3FNPair && e.w % 2 == 0) {
      SmallVector<Value> elems;
      for (int64_t i = 0; i < e.w; i += 2) {
        Value x0 = vector::ExtractOp::create(b, loc, q, ArrayRef<int64_t>{i});
        Value x1 =
            vector::ExtractOp::create(b, loc, q, ArrayRef<int64_t>{i + 1});
        auto [c0, c1] = lanes.toE4M3FNPair(b, loc, x0, x1);
        elems.push_back(c0);
        elems.push_back(c1);
      }
      c = vector::FromElementsOp::create(b, loc, i8Chunk, elems);
    } else {
      c = buildE4M3FNEncode(b, loc, q);
    }
    return arith::BitcastOp::create(b, loc, codeType, c);
  });
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
