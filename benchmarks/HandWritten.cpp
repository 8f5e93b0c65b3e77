//===- HandWritten.cpp - hand-written C++ kpool kernels -------------------===//
//
// See HandWritten.h. Layout of the vector path: a pooled row is computed 16
// channels at a time as two 8-lane f32 halves, one pool per call of the row
// function, the member loop unrolled for kpool 1..8 (a loop over members
// above). bf16 is widened without shuffles by splitting lanes: a 256-bit
// load of 16 bf16 gives the even channels as `x << 16` and the odd ones as
// `x & 0xffff0000` of its 32-bit lanes, so `ape` is stored in that lane
// order once per call, and the two halves are put back with a shift, an AND
// and an OR after rounding. f16 uses F16C's conversions (round to nearest
// even, NaNs quietened, as the contract's T()).
//
// Compiled with -ffp-contract=off: every multiply-add that is fused is an
// explicit FMA intrinsic, and only exp uses them.
//
//===----------------------------------------------------------------------===//

#include "HandWritten.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define KPOOL_HAND_X86 1
#define KPOOL_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KPOOL_AVX2_INLINE                                                      \
  __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#endif

using namespace kpool::bench;

namespace {

//===----------------------------------------------------------------------===//
// Scalar numerics (the fallback and the channels past the last 16-block).
//===----------------------------------------------------------------------===//

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float bf16ToF32(uint16_t h) { return floatOf(uint32_t(h) << 16); }

uint16_t f32ToBf16(float f) {
  uint32_t u = bitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16ToF32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu,
           mant = h & 0x3ffu;
  if (exp == 0)
    return floatOf(bitsOf(float(mant) * (1.0f / 16777216.0f)) | sign);
  if (exp == 31)
    return floatOf(sign | 0x7f800000u | (mant << 13));
  return floatOf(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32ToF16(float f) {
  uint32_t u = bitsOf(f), a = u & 0x7fffffffu;
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  if (a > 0x7f800000u)
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // >= 65520: infinity (ties to even)
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // normal f16
    uint32_t r = a - 0x38000000u;
    return uint16_t(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Subnormal or zero: |f| * 2^24 rounded to an integer, nearest even (the
  // add of 2^23 rounds in the default mode); 1024 is the smallest normal.
  float scaled = floatOf(a) * 16777216.0f;
  volatile float big = scaled + 8388608.0f;
  return uint16_t(sign | uint32_t(big - 8388608.0f));
}

float loadElement(KPoolElementType type, const char *p) {
  if (type == KPOOL_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return type == KPOOL_BF16 ? bf16ToF32(h) : f16ToF32(h);
}

void storeElement(KPoolElementType type, char *p, float x) {
  if (type == KPOOL_F32) {
    std::memcpy(p, &x, 4);
    return;
  }
  uint16_t h = type == KPOOL_BF16 ? f32ToBf16(x) : f32ToF16(x);
  std::memcpy(p, &h, 2);
}

// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
// [-ln2/2, ln2/2]; exp(r) = 1 + r + c2 r^2 + ... + c6 r^6, a relative-error
// minimax fit (max 1.7e-8 = 0.29 ulp at 1 with these f32 coefficients).
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kMagic = 12582912.0f; // 1.5 * 2^23: adding it rounds to int
constexpr float kC2 = 0.4999999403953552f, kC3 = 0.16666431725025177f,
                kC4 = 0.04166800156235695f, kC5 = 0.00837415549904108f,
                kC6 = 0.0013843653723597527f;
// ln 2 split for the FMA reduction (hi = f32(ln 2)) ...
constexpr float kLn2Hi = 0.693147182464599609375f,
                kLn2Lo = -1.904654299957768e-09f;
// ... and Cody-Waite's for the scalar one without FMA (hi has 9 bits, so
// n * hi is exact for |n| < 2^15).
constexpr float kLn2HiCW = 0.693359375f, kLn2LoCW = -2.12194440e-4f;
// At or above this, n >= -124, so exp(r) * 2^n is normal and the vector
// path builds it by adding n to the exponent field; below it (and for
// -inf), 2^n is built in two normal steps that round once.
constexpr float kFastLimit = -86.0f;
// exp(-110) < 2^-150 rounds to zero; clamping there keeps n bounded.
constexpr float kLowClamp = -110.0f;

} // namespace

float kpool::bench::handExp(float x) {
  if (std::isnan(x))
    return x;
  x = std::max(x, kLowClamp);
  float kf = x * kLog2e + kMagic;
  float nf = kf - kMagic;
  int32_t n = int32_t(nf);
  float r = x - nf * kLn2HiCW;
  r = r - nf * kLn2LoCW;
  float p = kC6;
  p = p * r + kC5;
  p = p * r + kC4;
  p = p * r + kC3;
  p = p * r + kC2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  if (n >= -126)
    return p * floatOf(uint32_t(n + 127) << 23);
  int32_t n1 = n >> 1, n2 = n - n1;
  return p * floatOf(uint32_t(n1 + 127) << 23) *
         floatOf(uint32_t(n2 + 127) << 23);
}

namespace {

//===----------------------------------------------------------------------===//
// Where a pool's member rows are.
//===----------------------------------------------------------------------===//

/// compress: K consecutive rows of k and of gate (byte strides).
struct StridedSrc {
  const char *k, *g;
  int64_t kStride, gStride; // bytes between rows
  int64_t kInner, gInner;   // bytes between channels (scalar path)
  const char *key(int64_t m) const { return k + m * kStride; }
  const char *gate(int64_t m) const { return g + m * gStride; }
  int64_t keyInner(int64_t) const { return kInner; }
  int64_t gateInner(int64_t) const { return gInner; }
};

/// ring_close: any row per member; members below `split` (ring rows) have
/// inner stride `innerLow`, the others (k and gate rows) kInner and gInner.
struct PtrSrc {
  const char *const *k, *const *g;
  int64_t split, innerLow, kInner, gInner; // bytes (scalar path)
  const char *key(int64_t m) const { return k[m]; }
  const char *gate(int64_t m) const { return g[m]; }
  int64_t keyInner(int64_t m) const { return m < split ? innerLow : kInner; }
  int64_t gateInner(int64_t m) const { return m < split ? innerLow : gInner; }
};

/// What one call needs to compute pooled rows.
struct Ctx {
  KPoolElementType type;
  int64_t D, K, esize;
  bool vector; // the AVX2 path: CPU support and unit inner strides
  /// ape in the vector path's lane order (bf16: per 16-channel block, the
  /// even channels then the odd ones), row stride apeLStride floats.
  const float *apeL;
  int64_t apeLStride;
  bool lanesPending; // apeL still to be built (bf16, vector path)
  /// ape as given (element strides).
  const float *ape;
  int64_t apeS0, apeS1;
};

/// The scalar pooling function for one pool, every channel.
/// `outInner`: bytes between the output's channels.
template <typename Src>
void poolRowScalar(const Ctx &c, const Src &s, char *out, int64_t outInner) {
  for (int64_t d = 0; d < c.D; ++d) {
    auto z = [&](int64_t m) {
      return loadElement(c.type, s.gate(m) + d * s.gateInner(m)) +
             c.ape[m * c.apeS0 + d * c.apeS1];
    };
    float maxZ = z(0);
    for (int64_t m = 1; m < c.K; ++m) {
      float zm = z(m);
      maxZ = (std::isnan(maxZ) || std::isnan(zm)) ? NAN : std::max(maxZ, zm);
    }
    float sum = 0, acc = 0;
    for (int64_t m = 0; m < c.K; ++m) {
      float e = handExp(z(m) - maxZ);
      float term = e * loadElement(c.type, s.key(m) + d * s.keyInner(m));
      sum = m == 0 ? e : sum + e;
      acc = m == 0 ? term : acc + term;
    }
    storeElement(c.type, out + d * outInner, acc / sum);
  }
}

#ifdef KPOOL_HAND_X86

//===----------------------------------------------------------------------===//
// The vector path.
//===----------------------------------------------------------------------===//

/// exp of 8 lanes, each <= 0 or NaN. The fast form (every lane at or above
/// kFastLimit, or NaN) reduces with f32(ln 2) alone: n * (ln 2 - f32(ln 2))
/// is at most 124 * 1.9e-9, 2.4e-7 relative (4 ulps of f32 where |x| is
/// near 86, below the contract's f32 allowance of 6 max|z| ulps; nothing at
/// bf16 or f16), and scales by an integer add to the exponent bits; NaN
/// lanes convert n to 0x80000000, whose shift is 0, so they stay NaN. The
/// `Safe` form adds the low part of ln 2 and scales by two multiplies, for
/// subnormal and zero results.
template <bool Safe> KPOOL_AVX2_INLINE __m256 exp8(__m256 x) {
  if (Safe) // max(lo, x) returns x when x is NaN
    x = _mm256_max_ps(_mm256_set1_ps(kLowClamp), x);
  const __m256 magic = _mm256_set1_ps(kMagic);
  __m256 kf = _mm256_fmadd_ps(x, _mm256_set1_ps(kLog2e), magic);
  __m256 nf = _mm256_sub_ps(kf, magic);
  __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(kLn2Hi), x);
  if (Safe)
    r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC6), r, _mm256_set1_ps(kC5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  if (!Safe) { // p * 2^n, normal: add n to the exponent
    __m256i n = _mm256_cvttps_epi32(nf);
    return _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(n, 23)));
  }
  // kf's bits are 0x4b400000 + n.
  __m256i kbits = _mm256_castps_si256(kf);
  __m256i n = _mm256_sub_epi32(kbits, _mm256_set1_epi32(0x4b400000));
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/// Element types: half H (0 or 1) of a 16-channel block as 8 f32 lanes,
/// and the store of a block from its two halves.
struct Bf16 {
  template <int H>
  KPOOL_AVX2_INLINE static __m256 half(const char *row, int64_t off) {
    __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + off * 2));
    if (H == 0)
      return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    return _mm256_castsi256_ps(
        _mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
  /// Rounds to bf16, nearest even, NaNs quietened; the result is in the top
  /// 16 bits of each lane.
  KPOOL_AVX2_INLINE static __m256i round(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb =
        _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded =
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(nan));
  }
  KPOOL_AVX2_INLINE static void store(char *row, int64_t off, __m256 even,
                                      __m256 odd) {
    __m256i lo = _mm256_srli_epi32(round(even), 16);
    __m256i hi =
        _mm256_and_si256(round(odd), _mm256_set1_epi32(int(0xffff0000u)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + off * 2),
                        _mm256_or_si256(lo, hi));
  }
};

struct F16 {
  template <int H>
  KPOOL_AVX2_INLINE static __m256 half(const char *row, int64_t off) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i *>(row + off * 2 + H * 16)));
  }
  KPOOL_AVX2_INLINE static void store(char *row, int64_t off, __m256 lo,
                                      __m256 hi) {
    constexpr int mode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    _mm_storeu_si128(reinterpret_cast<__m128i *>(row + off * 2),
                     _mm256_cvtps_ph(lo, mode));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(row + off * 2 + 16),
                     _mm256_cvtps_ph(hi, mode));
  }
};

struct F32 {
  template <int H>
  KPOOL_AVX2_INLINE static __m256 half(const char *row, int64_t off) {
    return _mm256_loadu_ps(reinterpret_cast<const float *>(row + off * 4) +
                           H * 8);
  }
  KPOOL_AVX2_INLINE static void store(char *row, int64_t off, __m256 lo,
                                      __m256 hi) {
    float *p = reinterpret_cast<float *>(row + off * 4);
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
  }
};

/// The sums of the pooling function, given z and M, for a static K.
template <typename T, int K, int H, bool Safe, typename Src>
KPOOL_AVX2_INLINE __m256 finish(const Src &s, int64_t off, const __m256 *z,
                                __m256 maxZ) {
  __m256 e = exp8<Safe>(_mm256_sub_ps(z[0], maxZ));
  __m256 sum = e;
  __m256 acc = _mm256_mul_ps(e, T::template half<H>(s.key(0), off));
  for (int m = 1; m < K; ++m) {
    e = exp8<Safe>(_mm256_sub_ps(z[m], maxZ));
    sum = _mm256_add_ps(sum, e);
    acc = _mm256_add_ps(acc,
                        _mm256_mul_ps(e, T::template half<H>(s.key(m), off)));
  }
  return _mm256_div_ps(acc, sum);
}

/// One half (8 lanes) of a 16-channel block of one pool, static K.
/// `ape` points at the block's lanes of member 0.
template <typename T, int K, int H, typename Src>
KPOOL_AVX2_INLINE __m256 poolHalf(const Src &s, int64_t off, const float *ape,
                                  int64_t apeStride) {
  __m256 z[K];
  for (int m = 0; m < K; ++m)
    z[m] = _mm256_add_ps(T::template half<H>(s.gate(m), off),
                         _mm256_loadu_ps(ape + m * apeStride + H * 8));
  // A plain max is enough: a NaN z makes its own z - M NaN, hence the
  // result, whatever M is.
  __m256 maxZ = z[0], minZ = z[0];
  for (int m = 1; m < K; ++m) {
    maxZ = _mm256_max_ps(maxZ, z[m]);
    minZ = _mm256_min_ps(minZ, z[m]);
  }
  __m256 low = _mm256_cmp_ps(_mm256_sub_ps(minZ, maxZ),
                             _mm256_set1_ps(kFastLimit), _CMP_LT_OQ);
  if (__builtin_expect(_mm256_movemask_ps(low) != 0, 0))
    return finish<T, K, H, true>(s, off, z, maxZ);
  return finish<T, K, H, false>(s, off, z, maxZ);
}

/// z of member m, half H, for the loop form.
template <typename T, int H, typename Src>
KPOOL_AVX2_INLINE __m256 zOf(const Src &s, int64_t m, int64_t off,
                             const float *ape, int64_t apeStride) {
  return _mm256_add_ps(T::template half<H>(s.gate(m), off),
                       _mm256_loadu_ps(ape + m * apeStride + H * 8));
}

/// The same for any K (above 8): two passes over the members, always the
/// safe exp.
template <typename T, int H, typename Src>
KPOOL_AVX2_INLINE __m256 poolHalfDyn(const Src &s, int64_t K, int64_t off,
                                     const float *ape, int64_t apeStride) {
  __m256 maxZ = zOf<T, H>(s, 0, off, ape, apeStride);
  for (int64_t m = 1; m < K; ++m)
    maxZ = _mm256_max_ps(maxZ, zOf<T, H>(s, m, off, ape, apeStride));
  __m256 e =
      exp8<true>(_mm256_sub_ps(zOf<T, H>(s, 0, off, ape, apeStride), maxZ));
  __m256 sum = e;
  __m256 acc = _mm256_mul_ps(e, T::template half<H>(s.key(0), off));
  for (int64_t m = 1; m < K; ++m) {
    e = exp8<true>(_mm256_sub_ps(zOf<T, H>(s, m, off, ape, apeStride), maxZ));
    sum = _mm256_add_ps(sum, e);
    acc = _mm256_add_ps(acc,
                        _mm256_mul_ps(e, T::template half<H>(s.key(m), off)));
  }
  return _mm256_div_ps(acc, sum);
}

template <typename T, int K, typename Src>
KPOOL_AVX2_INLINE void poolBlock(const Ctx &c, const Src &s, int64_t off,
                                 const float *ape, int64_t apeStride,
                                 char *out) {
  __m256 lo, hi;
  if constexpr (K > 0) {
    lo = poolHalf<T, K, 0>(s, off, ape, apeStride);
    hi = poolHalf<T, K, 1>(s, off, ape, apeStride);
  } else {
    lo = poolHalfDyn<T, 0>(s, c.K, off, ape, apeStride);
    hi = poolHalfDyn<T, 1>(s, c.K, off, ape, apeStride);
  }
  T::store(out, off, lo, hi);
}

/// Lane `i` of a 16-channel block holds channel laneChannel(type, i).
int64_t laneChannel(KPoolElementType type, int64_t i) {
  if (type != KPOOL_BF16)
    return i;
  return i < 8 ? 2 * i : 2 * (i - 8) + 1;
}

/// The channels past the last full 16-block, through zero-padded copies.
template <typename T, int K, typename Src>
KPOOL_AVX2 void poolTail(const Ctx &c, const Src &s, int64_t off, char *out) {
  int64_t n = c.D - off, es = c.esize;
  std::vector<char> keys(c.K * 64, 0), gates(c.K * 64, 0);
  std::vector<float> ape(c.K * 16, 0.0f);
  std::vector<const char *> kp(c.K), gp(c.K);
  for (int64_t m = 0; m < c.K; ++m) {
    std::memcpy(&keys[m * 64], s.key(m) + off * es, n * es);
    std::memcpy(&gates[m * 64], s.gate(m) + off * es, n * es);
    for (int64_t i = 0; i < 16; ++i) {
      int64_t ch = laneChannel(c.type, i);
      if (ch < n)
        ape[m * 16 + i] = c.ape[m * c.apeS0 + (off + ch) * c.apeS1];
    }
    kp[m] = &keys[m * 64];
    gp[m] = &gates[m * 64];
  }
  PtrSrc padded{kp.data(), gp.data(), 0, es, es, es};
  alignas(64) char result[64];
  poolBlock<T, K>(c, padded, 0, ape.data(), 16, result);
  std::memcpy(out + off * es, result, n * es);
}

/// One pooled row, vector path.
template <typename T, int K, typename Src>
KPOOL_AVX2 void poolRowVector(const Ctx &c, const Src &s, char *out,
                              int64_t /*outInner: 1 element*/) {
  int64_t off = 0;
  for (; off + 16 <= c.D; off += 16)
    poolBlock<T, K>(c, s, off, c.apeL + off, c.apeLStride, out);
  if (off < c.D)
    poolTail<T, K>(c, s, off, out);
}

/// `count` consecutive pools of compress, vector path.
template <typename T, int K>
KPOOL_AVX2 void compressRowsVector(const Ctx &c, StridedSrc s, int64_t count,
                                   char *out, int64_t outStride,
                                   int64_t outInner) {
  int64_t kStep = c.K * s.kStride, gStep = c.K * s.gStride;
  for (int64_t j = 0; j < count; ++j) {
    poolRowVector<T, K>(c, s, out, outInner);
    s.k += kStep;
    s.g += gStep;
    out += outStride;
  }
}

KPOOL_AVX2 void expArrayVector(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 low = _mm256_cmp_ps(v, _mm256_set1_ps(kFastLimit), _CMP_LT_OQ);
    _mm256_storeu_ps(out + i,
                     _mm256_movemask_ps(low) ? exp8<true>(v) : exp8<false>(v));
  }
  for (int64_t i = n / 8 * 8; i < n; ++i)
    out[i] = kpool::bench::handExp(x[i]);
}

#endif // KPOOL_HAND_X86

template <typename Src>
void poolRowScalarEntry(const Ctx &c, const Src &s, char *out,
                        int64_t outInner) {
  poolRowScalar(c, s, out, outInner);
}

void compressRowsScalar(const Ctx &c, StridedSrc s, int64_t count, char *out,
                        int64_t outStride, int64_t outInner) {
  for (int64_t j = 0; j < count; ++j) {
    poolRowScalar(c, s, out, outInner);
    s.k += c.K * s.kStride;
    s.g += c.K * s.gStride;
    out += outStride;
  }
}

using CompressRowsFn = void (*)(const Ctx &, StridedSrc, int64_t, char *,
                                int64_t, int64_t);
using PoolRowFn = void (*)(const Ctx &, const PtrSrc &, char *, int64_t);

struct Kernels {
  CompressRowsFn compressRows;
  PoolRowFn poolRow;
};

#ifdef KPOOL_HAND_X86
template <typename T, int K> Kernels kernelsFor() {
  return {compressRowsVector<T, K>, poolRowVector<T, K, PtrSrc>};
}

template <typename T> Kernels kernelsFor(int64_t K) {
  switch (K) {
  case 1:
    return kernelsFor<T, 1>();
  case 2:
    return kernelsFor<T, 2>();
  case 3:
    return kernelsFor<T, 3>();
  case 4:
    return kernelsFor<T, 4>();
  case 5:
    return kernelsFor<T, 5>();
  case 6:
    return kernelsFor<T, 6>();
  case 7:
    return kernelsFor<T, 7>();
  case 8:
    return kernelsFor<T, 8>();
  default:
    return kernelsFor<T, 0>();
  }
}
#endif

bool cpuHasVector() {
#ifdef KPOOL_HAND_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool forceScalar = false;

/// Chooses the path and prepares ape for one call. `views` are the element
/// operands whose inner stride must be 1 for the vector path.
Kernels prepare(Ctx &c, const HandGeometry &g, const KPoolView &ape,
                std::initializer_list<const KPoolView *> views) {
  static const bool hasVector = cpuHasVector();
  c.type = g.type;
  c.D = g.headDim;
  c.K = g.kpool;
  c.esize = g.type == KPOOL_F32 ? 4 : 2;
  c.ape = static_cast<const float *>(ape.data);
  c.apeS0 = ape.strides[0];
  c.apeS1 = ape.strides[1];
  c.vector = hasVector && !forceScalar && ape.strides[1] == 1;
  for (const KPoolView *v : views)
    c.vector &= v->strides[v->rank - 1] == 1;
  c.apeL = c.ape;
  c.apeLStride = c.apeS0;
  c.lanesPending = false;
#ifdef KPOOL_HAND_X86
  if (c.vector) {
    // Built on first use (a decode step often pools nothing).
    c.lanesPending = c.type == KPOOL_BF16;
    switch (c.type) {
    case KPOOL_BF16:
      return kernelsFor<Bf16>(c.K);
    case KPOOL_F16:
      return kernelsFor<F16>(c.K);
    case KPOOL_F32:
      return kernelsFor<F32>(c.K);
    }
  }
#endif
  c.vector = false;
  return {compressRowsScalar, poolRowScalarEntry<PtrSrc>};
}

/// Builds ape in the bf16 lane order if the call has not yet.
void ensureLanes(Ctx &c) {
  if (!c.lanesPending)
    return;
  c.lanesPending = false;
  // Per 16-channel block: the even channels, then the odd ones.
  static thread_local std::vector<float> lanes;
  lanes.resize(c.K * c.D);
  for (int64_t m = 0; m < c.K; ++m) {
    const float *src = c.ape + m * c.apeS0;
    float *dst = lanes.data() + m * c.D;
    int64_t off = 0;
    for (; off + 16 <= c.D; off += 16)
      for (int64_t i = 0; i < 8; ++i) {
        dst[off + i] = src[off + 2 * i];         // even channels
        dst[off + 8 + i] = src[off + 2 * i + 1]; // odd channels
      }
    for (; off < c.D; ++off)
      dst[off] = src[off];
  }
  c.apeL = lanes.data();
  c.apeLStride = c.D;
}

uint32_t loadU32(const KPoolView &v, int64_t i) {
  return static_cast<const uint32_t *>(v.data)[i * v.strides[0]];
}

bool rowsOk(const HandGeometry &g, const KPoolView &v) {
  return v.rank == 2 && v.sizes[1] == g.headDim;
}

char *rowPtr(const KPoolView &v, int64_t esize, int64_t row) {
  return static_cast<char *>(v.data) + row * v.strides[0] * esize;
}

/// compress's pools of one request; `tokens` already 0 for bad rows.
void compressRequest(Ctx &c, const Kernels &kern, const KPoolView &pooled,
                     const KPoolView &k, const KPoolView &gate, int64_t start,
                     int64_t tokens, int64_t cached, int64_t rowLo,
                     int64_t rowHi) {
  int64_t K = c.K;
  int64_t first = (cached + K - 1) / K, last = (cached + tokens) / K;
  int64_t count = std::max<int64_t>(0, last - first);
  int64_t skip = first * K - cached;
  count = std::min({count, rowHi - rowLo, pooled.sizes[0] - rowLo});
  if (count <= 0)
    return;
  ensureLanes(c);
  int64_t es = c.esize;
  StridedSrc s{rowPtr(k, es, start + skip), rowPtr(gate, es, start + skip),
               k.strides[0] * es,           gate.strides[0] * es,
               k.strides[1] * es,           gate.strides[1] * es};
  kern.compressRows(c, s, count, rowPtr(pooled, es, rowLo),
                    pooled.strides[0] * es, pooled.strides[1] * es);
}

} // namespace

const char *kpool::bench::handWrittenIsa() {
  static const bool hasVector = cpuHasVector();
  return hasVector && !forceScalar ? "avx2+fma+f16c" : "scalar";
}

void kpool::bench::setHandWrittenScalar(bool scalar) { forceScalar = scalar; }

void kpool::bench::handExpArray(const float *x, float *out, int64_t n) {
#ifdef KPOOL_HAND_X86
  static const bool hasVector = cpuHasVector();
  if (hasVector && !forceScalar)
    return expArrayVector(x, out, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = handExp(x[i]);
}

void kpool::bench::handCompress(const HandGeometry &g, const KPoolView &pooled,
                                const KPoolView &k, const KPoolView &gate,
                                const KPoolView &ape, const KPoolView &iro,
                                const KPoolView &pro, const KPoolView &cache) {
  if (!rowsOk(g, k) || !rowsOk(g, gate) || !rowsOk(g, pooled) ||
      ape.rank != 2 || ape.sizes[0] != g.kpool || ape.sizes[1] != g.headDim)
    return;
  Ctx c;
  Kernels kern = prepare(c, g, ape, {&k, &gate, &pooled});
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = std::max<int64_t>(
      0, std::min({cache.sizes[0], iro.sizes[0] - 1, pro.sizes[0] - 1}));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lo = loadU32(iro, b), hi = loadU32(iro, b + 1);
    int64_t tokens = (lo <= hi && hi <= numRows) ? hi - lo : 0;
    compressRequest(c, kern, pooled, k, gate, lo, tokens, loadU32(cache, b),
                    loadU32(pro, b), loadU32(pro, b + 1));
  }
}

//===----------------------------------------------------------------------===//
// The step.
//===----------------------------------------------------------------------===//

bool HandStep::run(const HandGeometry &g, const KPoolView &closedRows,
                   const KPoolView &closedPool, const KPoolView &tail,
                   const KPoolView &pro, const KPoolView &pooled,
                   const KPoolView &k, const KPoolView &gate,
                   const KPoolView &ape, const KPoolView &iro,
                   const KPoolView &cache, const KPoolView &slots,
                   int32_t numRequests, std::string *error) {
  auto fail = [&](const std::string &message) {
    if (error)
      *error = "step: " + message;
    return false;
  };
  const int64_t D = g.headDim, K = g.kpool;
  // Shapes: what the four ops' validators check, once.
  if (!rowsOk(g, k) || !rowsOk(g, gate) || k.sizes[0] != gate.sizes[0])
    return fail("'k' and 'gate' must both be [tokens, head_dim]");
  if (ape.rank != 2 || ape.sizes[0] != K || ape.sizes[1] != D)
    return fail("'ape' must be [kpool, head_dim]");
  if (cache.rank != 1 || cache.sizes[0] > INT32_MAX)
    return fail("'cache_lengths' must be [batch], batch < 2^31");
  const int64_t B = cache.sizes[0];
  if (iro.rank != 1 || iro.sizes[0] != B + 1 || pro.rank != 1 ||
      pro.sizes[0] != B + 1 || slots.rank != 1 || slots.sizes[0] != B)
    return fail("offsets must be [batch + 1], slot_idx [batch]");
  if (tail.rank != 4 || tail.sizes[1] != 2 || tail.sizes[2] < K ||
      tail.sizes[3] != D)
    return fail("'tail' must be [max_slots, 2, window >= kpool, head_dim]");
  if (!rowsOk(g, closedRows) || closedRows.sizes[0] != B ||
      closedPool.rank != 1 || closedPool.sizes[0] != B || !rowsOk(g, pooled))
    return fail("ring_close's outputs must be [batch, head_dim] and [batch]");
  if (numRequests < 0 || numRequests > B)
    return fail("num_requests = " + std::to_string(numRequests) +
                " is outside [0, " + std::to_string(B) + "]");
  // One pass over the metadata: rows, slots, and pool_row_offsets.
  const int64_t S = tail.sizes[0], R = tail.sizes[2], N = k.sizes[0];
  if (int64_t(seen_.size()) < S)
    seen_.resize(S, 0);
  if (++epoch_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    epoch_ = 1;
  }
  offsets_.resize(B + 1);
  uint32_t acc = 0, lo = B > 0 ? loadU32(iro, 0) : 0;
  for (int64_t b = 0; b < B; ++b) {
    uint32_t hi = loadU32(iro, b + 1);
    if (lo > hi || hi > N)
      return fail("request " + std::to_string(b) + ": input_row_offsets " +
                  std::to_string(lo) + ".." + std::to_string(hi) +
                  (lo > hi ? " reversed" : " past the rows of 'k'"));
    offsets_[b] = acc;
    int64_t c = loadU32(cache, b), n = hi - lo;
    int64_t first = (c + K - 1) / K, last = (c + n) / K;
    acc += uint32_t(std::max<int64_t>(0, last - first));
    if (b < numRequests) {
      uint32_t slot = loadU32(slots, b);
      if (slot >= S)
        return fail("request " + std::to_string(b) + ": slot_idx " +
                    std::to_string(slot) + " is not below max_slots");
      if (seen_[slot] == epoch_)
        return fail("request " + std::to_string(b) + ": slot_idx " +
                    std::to_string(slot) + " is another request's slot");
      seen_[slot] = epoch_;
    }
    lo = hi;
  }
  offsets_[B] = acc;
  if (acc > pooled.sizes[0])
    return fail(std::to_string(acc) + " pools do not fit the " +
                std::to_string(pooled.sizes[0]) + " rows of 'pooled'");

  // The work. Validated, so no guard below can fail.
  Ctx c;
  Kernels kern = prepare(c, g, ape, {&k, &gate, &pooled, &closedRows, &tail});
  const int64_t es = c.esize, rowBytes = D * es;
  for (int64_t b = 0; b <= B; ++b)
    static_cast<uint32_t *>(pro.data)[b * pro.strides[0]] = offsets_[b];
  auto *closed = static_cast<int32_t *>(closedPool.data);
  auto ring = [&](int64_t slot, int64_t kv, int64_t row) {
    return static_cast<char *>(tail.data) +
           (slot * tail.strides[0] + kv * tail.strides[1] +
            row * tail.strides[2]) *
               es;
  };
  const char *keyRows[64], *gateRows[64];
  std::vector<const char *> keyVec, gateVec;
  const char **kp = keyRows, **gp = gateRows;
  if (K > 64) {
    keyVec.resize(K);
    gateVec.resize(K);
    kp = keyVec.data();
    gp = gateVec.data();
  }
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = loadU32(iro, b), n = loadU32(iro, b + 1) - start;
    int64_t cached = loadU32(cache, b);
    int64_t slot = b < numRequests ? loadU32(slots, b) : -1;
    // ring_close
    int64_t held = cached % K, id = cached / K;
    char *closedRow = rowPtr(closedRows, es, b);
    if (slot >= 0 && held > 0 && n >= K - held) {
      for (int64_t m = 0; m < K; ++m) {
        if (m < held) {
          int64_t r = (id * K + m) % R;
          kp[m] = ring(slot, 0, r);
          gp[m] = ring(slot, 1, r);
        } else {
          kp[m] = rowPtr(k, es, start + m - held);
          gp[m] = rowPtr(gate, es, start + m - held);
        }
      }
      PtrSrc s{kp,
               gp,
               held,
               tail.strides[3] * es,
               k.strides[1] * es,
               gate.strides[1] * es};
      ensureLanes(c);
      kern.poolRow(c, s, closedRow, closedRows.strides[1] * es);
      closed[b * closedPool.strides[0]] = int32_t(id);
    } else {
      if (closedRows.strides[1] == 1)
        std::memset(closedRow, 0, rowBytes);
      else
        for (int64_t d = 0; d < D; ++d)
          std::memset(closedRow + d * closedRows.strides[1] * es, 0, es);
      closed[b * closedPool.strides[0]] = -1;
    }
    // compress
    compressRequest(c, kern, pooled, k, gate, start, n, cached, offsets_[b],
                    offsets_[b + 1]);
    // seed_tail
    if (slot >= 0) {
      int64_t end = cached + n;
      for (int64_t q = std::max(end - R, cached); q < end; ++q) {
        int64_t row = start + q - cached, r = q % R;
        const char *kRow = rowPtr(k, es, row), *gRow = rowPtr(gate, es, row);
        char *kDst = ring(slot, 0, r), *gDst = ring(slot, 1, r);
        if (k.strides[1] == 1 && gate.strides[1] == 1 && tail.strides[3] == 1) {
          std::memcpy(kDst, kRow, rowBytes);
          std::memcpy(gDst, gRow, rowBytes);
        } else {
          for (int64_t d = 0; d < D; ++d) {
            std::memcpy(kDst + d * tail.strides[3] * es,
                        kRow + d * k.strides[1] * es, es);
            std::memcpy(gDst + d * tail.strides[3] * es,
                        gRow + d * gate.strides[1] * es, es);
          }
        }
      }
    }
  }
  return true;
}
