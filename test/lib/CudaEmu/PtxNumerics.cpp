//===- PtxNumerics.cpp - bit-exact PTX floating-point arithmetic ----------===//
//
// Every f32 result is computed exactly in double precision (a product of two
// f32 is exact; a sum or an fma is kept as an unevaluated hi + lo pair by
// TwoSum; a quotient or a square root as its double rounding plus the sign
// of its exact remainder) and then rounded once to f32 in the requested
// mode. The host's rounding mode is never changed: directed roundings step
// from the round-to-nearest result by the sign of the residual. Built with
// -ffp-contract=off so that the compiler never fuses what is written apart.
//
//===----------------------------------------------------------------------===//

#include "PtxNumerics.h"

#include <cmath>
#include <limits>

using namespace kpool::emu::numerics;

namespace {

/// The double nearest to hi + lo with the sign of the rounding error known:
/// TwoSum of two doubles (exact).
inline void twoSum(double a, double b, double &s, double &e) {
  s = a + b;
  double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

inline uint32_t signOf(uint32_t a) { return a & 0x80000000u; }

inline uint32_t stepF32(float f, bool up) {
  return bitsOf(
      std::nextafter(f, up ? std::numeric_limits<float>::infinity()
                           : -std::numeric_limits<float>::infinity()));
}

} // namespace

uint32_t kpool::emu::numerics::roundToF32(double hi, double lo, Mode mode) {
  if (std::isnan(hi))
    return kCanonicalNaN32;
  if (std::isinf(hi))
    return hi > 0 ? 0x7f800000u : 0xff800000u;
  float f = static_cast<float>(hi); // to nearest, ties to even
  bool negative = std::signbit(hi);
  if (std::isinf(f)) {
    // Overflow: only the modes that round away from zero reach infinity.
    bool toInf = mode == Mode::RN || mode == Mode::RNA ||
                 (mode == Mode::RP && !negative) ||
                 (mode == Mode::RM && negative);
    if (toInf)
      return bitsOf(f);
    return negative ? 0xff7fffffu : 0x7f7fffffu;
  }
  double d = hi - static_cast<double>(f); // exact
  if (mode == Mode::RN || mode == Mode::RNA) {
    if (d == 0 || (lo == 0 && mode == Mode::RN))
      return bitsOf(f); // exact, or hi + 0 rounded once
    // Only a hi exactly halfway between two f32 values can round the other
    // way: for f32-normal magnitudes its double fraction then ends in a 1
    // followed by 28 zeros.
    if (std::fabs(hi) >= 0x1p-126 &&
        (bitsOf(hi) & 0x1fffffffull) != 0x10000000ull)
      return bitsOf(f);
    // A tie in hi may be broken by lo; a tie in hi + lo only when lo == 0.
    float n =
        std::nextafter(f, d > 0 ? std::numeric_limits<float>::infinity()
                                : -std::numeric_limits<float>::infinity());
    double mid = (static_cast<double>(f) + static_cast<double>(n)) / 2;
    if (hi != mid)
      return bitsOf(f);
    if (lo != 0)
      return (lo > 0) == (d > 0) ? bitsOf(n) : bitsOf(f);
    if (mode == Mode::RNA)
      return std::fabs(n) > std::fabs(f) ? bitsOf(n) : bitsOf(f);
    return bitsOf(f);
  }
  double r = d + lo; // its sign is exact
  if (r == 0)
    return bitsOf(f);
  switch (mode) {
  case Mode::RZ:
    if ((f > 0 && r < 0) || (f < 0 && r > 0))
      return bitsOf(std::nextafter(f, 0.0f));
    // f == 0 or f nearer zero than the value: f is the truncation already,
    // unless RN rounded a value away from zero past f's neighbour (no: RN
    // moves at most half an ulp).
    return bitsOf(f);
  case Mode::RM:
    return r < 0 ? stepF32(f, false) : bitsOf(f);
  case Mode::RP:
    return r > 0 ? stepF32(f, true) : bitsOf(f);
  default:
    return bitsOf(f);
  }
}

//===----------------------------------------------------------------------===//
// f32 arithmetic.
//===----------------------------------------------------------------------===//

uint32_t kpool::emu::numerics::saturateF32(uint32_t a) {
  if (isNaN32(a) || (a & 0x80000000u))
    return 0; // NaN, negatives and -0 give +0
  if (a >= 0x3f800000u)
    return 0x3f800000u; // >= 1 (and +inf)
  return a;
}

static uint32_t finishF32(uint32_t r, bool ftz, bool sat) {
  if (ftz)
    r = flush32(r);
  if (sat)
    r = saturateF32(r);
  return r;
}

uint32_t kpool::emu::numerics::addF32(uint32_t a, uint32_t b, Mode mode,
                                      bool ftz, bool sat) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
  }
  if (isNaN32(a) || isNaN32(b))
    return finishF32(kCanonicalNaN32, false, sat);
  double x = floatOf(a), y = floatOf(b), s, e;
  twoSum(x, y, s, e);
  uint32_t r;
  if (s == 0 && e == 0) {
    // An exact zero: +0 + +0 = +0, -0 + -0 = -0; otherwise +0, or -0 in RM.
    bool bothZero = !(a & 0x7fffffffu) && !(b & 0x7fffffffu);
    if (bothZero && signOf(a) == signOf(b))
      r = signOf(a);
    else
      r = mode == Mode::RM ? 0x80000000u : 0u;
  } else {
    r = roundToF32(s, e, mode);
  }
  return finishF32(r, ftz, sat);
}

uint32_t kpool::emu::numerics::mulF32(uint32_t a, uint32_t b, Mode mode,
                                      bool ftz, bool sat) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
  }
  if (isNaN32(a) || isNaN32(b))
    return finishF32(kCanonicalNaN32, false, sat);
  double p = double(floatOf(a)) * double(floatOf(b)); // exact
  return finishF32(roundToF32(p, 0, mode), ftz, sat);
}

uint32_t kpool::emu::numerics::fmaF32(uint32_t a, uint32_t b, uint32_t c,
                                      Mode mode, bool ftz, bool sat) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
    c = flush32(c);
  }
  if (isNaN32(a) || isNaN32(b) || isNaN32(c))
    return finishF32(kCanonicalNaN32, false, sat);
  double p = double(floatOf(a)) * double(floatOf(b)); // exact
  double z = floatOf(c), s, e;
  if (std::isinf(p) || std::isinf(z)) {
    s = p + z; // inf, or NaN for inf - inf
    e = 0;
  } else {
    twoSum(p, z, s, e);
  }
  uint32_t r;
  if (s == 0 && e == 0) {
    bool productNeg = std::signbit(p);
    bool cNeg = (c & 0x80000000u) != 0;
    if (p == 0 && z == 0 && productNeg == cNeg)
      r = productNeg ? 0x80000000u : 0u;
    else
      r = mode == Mode::RM ? 0x80000000u : 0u;
  } else {
    r = roundToF32(s, e, mode);
  }
  return finishF32(r, ftz, sat);
}

uint32_t kpool::emu::numerics::divF32(uint32_t a, uint32_t b, Mode mode,
                                      bool ftz) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
  }
  if (isNaN32(a) || isNaN32(b))
    return kCanonicalNaN32;
  if (mode == Mode::RN) { // the host's IEEE division rounds to nearest even
    float q = floatOf(a) / floatOf(b);
    return q != q ? kCanonicalNaN32 : (ftz ? flush32(bitsOf(q)) : bitsOf(q));
  }
  double x = floatOf(a), y = floatOf(b);
  double q = x / y;
  double lo = 0;
  if (std::isfinite(q) && q != 0 && y != 0) {
    double rem = std::fma(-q, y, x); // exact remainder x - q*y
    lo = rem / y;                    // only its sign and zeroness matter
  }
  return finishF32(roundToF32(q, lo, mode), ftz, false);
}

uint32_t kpool::emu::numerics::sqrtF32(uint32_t a, Mode mode, bool ftz) {
  if (ftz)
    a = flush32(a);
  if (isNaN32(a) || (signOf(a) && (a & 0x7fffffffu)))
    return kCanonicalNaN32; // NaN, and negatives other than -0
  if (mode == Mode::RN) {   // the host's IEEE square root
    uint32_t r = bitsOf(std::sqrt(floatOf(a)));
    return ftz ? flush32(r) : r;
  }
  double x = floatOf(a);
  double s = std::sqrt(x);
  double lo = 0;
  if (std::isfinite(s) && s != 0) {
    double rem = std::fma(-s, s, x); // exact: x - s^2
    lo = rem / (2 * s);              // about sqrt(x) - s
  }
  return finishF32(roundToF32(s, lo, mode), ftz, false);
}

static bool lessF32(uint32_t a, uint32_t b) {
  float x = floatOf(a), y = floatOf(b);
  if (x == y) // +-0: -0 is the smaller
    return (a & 0x80000000u) && !(b & 0x80000000u);
  return x < y;
}

uint32_t kpool::emu::numerics::minF32(uint32_t a, uint32_t b, bool ftz,
                                      bool nanMode) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
  }
  bool na = isNaN32(a), nb = isNaN32(b);
  if (na || nb) {
    if (nanMode || (na && nb))
      return kCanonicalNaN32;
    return na ? b : a;
  }
  return lessF32(b, a) ? b : a;
}

uint32_t kpool::emu::numerics::maxF32(uint32_t a, uint32_t b, bool ftz,
                                      bool nanMode) {
  if (ftz) {
    a = flush32(a);
    b = flush32(b);
  }
  bool na = isNaN32(a), nb = isNaN32(b);
  if (na || nb) {
    if (nanMode || (na && nb))
      return kCanonicalNaN32;
    return na ? b : a;
  }
  return lessF32(a, b) ? b : a;
}

uint64_t kpool::emu::numerics::canonicalF64(double x) {
  return std::isnan(x) ? kCanonicalNaN64 : bitsOf(x);
}

//===----------------------------------------------------------------------===//
// Narrow formats.
//===----------------------------------------------------------------------===//

namespace {

/// A binary floating-point format of at most 16 bits: `mant` fraction
/// bits, smallest normal exponent `emin`, the code of the largest finite
/// magnitude, infinity's code (0: none) and the NaN code.
struct Format {
  int mant;
  int emin;
  uint32_t maxCode;
  uint32_t infCode;
  uint32_t nanCode;
  unsigned signShift;
  bool nanKeepsSign;
};

constexpr Format kBF16{7, -126, 0x7f7f, 0x7f80, 0x7fff, 15, false};
constexpr Format kF16{10, -14, 0x7bff, 0x7c00, 0x7fff, 15, false};
constexpr Format kE4M3{3, -6, 0x7e, 0, 0x7f, 7, true};
constexpr Format kE5M2{2, -14, 0x7b, 0x7c, 0x7f, 7, true};

/// The code of exact value `x` in `f`, rounded per `mode`.
uint32_t encode(double x, const Format &f, Mode mode, bool satfinite,
                bool relu) {
  bool negative = std::signbit(x);
  uint32_t sign = negative ? (1u << f.signShift) : 0;
  if (std::isnan(x))
    return f.nanCode | (f.nanKeepsSign && !relu ? sign : 0);
  if (relu && negative)
    return 0;
  double a = std::fabs(x);
  bool towardZero = mode == Mode::RZ || (mode == Mode::RM && !negative) ||
                    (mode == Mode::RP && negative);
  if (std::isinf(a)) {
    if (satfinite || !f.infCode)
      return (satfinite ? f.maxCode : f.nanCode) | sign;
    return f.infCode | sign;
  }
  if (a == 0)
    return sign;
  int e2;
  std::frexp(a, &e2); // a = m * 2^e2, m in [0.5, 1)
  int exponent = e2 - 1;
  if (exponent < f.emin)
    exponent = f.emin; // subnormal range: the quantum stays 2^(emin-mant)
  double quantum = std::ldexp(1.0, exponent - f.mant);
  double n = a / quantum; // exact
  double k = std::floor(n);
  double frac = n - k;
  bool up = false;
  switch (mode) {
  case Mode::RN:
    up = frac > 0.5 || (frac == 0.5 && std::fmod(k, 2.0) != 0);
    break;
  case Mode::RNA:
    up = frac >= 0.5;
    break;
  case Mode::RZ:
    break;
  case Mode::RM:
    up = negative && frac > 0;
    break;
  case Mode::RP:
    up = !negative && frac > 0;
    break;
  }
  if (up)
    k += 1;
  // Code = ((exponent - emin) << mant) + k: a carry of k into 2^(mant+1)
  // is the next binade's code.
  uint64_t code =
      (uint64_t(exponent - f.emin) << f.mant) + static_cast<uint64_t>(k);
  if (code > f.maxCode) {
    if (satfinite || towardZero)
      return f.maxCode | sign;
    return (f.infCode ? f.infCode : f.nanCode) | sign;
  }
  return uint32_t(code) | sign;
}

/// The value of a code of `f` (exact in double).
double decode(uint32_t code, const Format &f) {
  uint32_t sign = code >> f.signShift & 1;
  uint32_t mag = code & ((1u << f.signShift) - 1);
  if ((!f.infCode && mag == f.nanCode) || (f.infCode && mag > f.infCode))
    return std::numeric_limits<double>::quiet_NaN();
  if (f.infCode && mag == f.infCode)
    return sign ? -INFINITY : INFINITY;
  uint32_t field = mag >> f.mant;
  uint32_t frac = mag & ((1u << f.mant) - 1);
  double v = field == 0 ? std::ldexp(double(frac), f.emin - f.mant)
                        : std::ldexp(double(frac | (1u << f.mant)),
                                     int(field) - 1 + f.emin - f.mant);
  return sign ? -v : v;
}

} // namespace

uint16_t kpool::emu::numerics::f32ToBF16(uint32_t a, Mode mode, bool satfinite,
                                         bool relu) {
  if (mode == Mode::RN && !satfinite && !relu) {
    // Round to nearest even on the 16 dropped bits; a carry into the
    // exponent (up to infinity) is the right result.
    if (isNaN32(a))
      return 0x7fff;
    return uint16_t((a + 0x7fffu + ((a >> 16) & 1u)) >> 16);
  }
  return uint16_t(encode(double(floatOf(a)), kBF16, mode, satfinite, relu));
}

uint16_t kpool::emu::numerics::f32ToF16(uint32_t a, Mode mode, bool satfinite,
                                        bool relu) {
  return uint16_t(encode(double(floatOf(a)), kF16, mode, satfinite, relu));
}

uint16_t kpool::emu::numerics::f64ToF16(double a, Mode mode, bool satfinite,
                                        bool relu) {
  return uint16_t(encode(a, kF16, mode, satfinite, relu));
}

uint16_t kpool::emu::numerics::f64ToBF16(double a, Mode mode, bool satfinite,
                                         bool relu) {
  return uint16_t(encode(a, kBF16, mode, satfinite, relu));
}

uint8_t kpool::emu::numerics::f32ToE4M3(uint32_t a, bool relu) {
  // Bit-level round to nearest even (kernels convert every cache entry).
  uint32_t sign = (a >> 24) & 0x80u, mag = a & 0x7fffffffu;
  if (mag > 0x7f800000u) // NaN: 0x7f, keeping the sign unless .relu
    return uint8_t(relu ? 0x7fu : 0x7fu | sign);
  if (relu && sign)
    return 0;
  if (mag >= 0x43e00000u) // >= 448 (and infinity): .satfinite
    return uint8_t(0x7eu | sign);
  if (mag < 0x3c800000u) { // below 2^-6: subnormal codes k * 2^-9
    float scaled = floatOf(mag) * 512.0f; // exact; < 8
    return uint8_t(uint32_t(std::nearbyint(scaled)) | sign);
  }
  // Normal: keep 3 fraction bits, ties to even; the f32 exponent rebiased
  // from 127 to 7 is (E - 120), i.e. code = (mag >> 20) - (120 << 3).
  uint32_t rounded = mag + 0x7ffffu + ((mag >> 20) & 1u);
  return uint8_t(((rounded >> 20) - (120u << 3)) | sign);
}

uint8_t kpool::emu::numerics::f32ToE5M2(uint32_t a, bool relu) {
  return uint8_t(encode(double(floatOf(a)), kE5M2, Mode::RN, true, relu));
}

uint32_t kpool::emu::numerics::bf16ToF32(uint16_t h) {
  return uint32_t(h) << 16;
}

uint32_t kpool::emu::numerics::f16ToF32(uint16_t h) {
  double v = decode(h, kF16);
  if (std::isnan(v))
    return (uint32_t(h & 0x8000u) << 16) | 0x7fc00000u |
           (uint32_t(h & 0x3ffu) << 13);
  return bitsOf(float(v)); // exact
}

uint16_t kpool::emu::numerics::e4m3ToF16(uint8_t c) {
  double v = decode(c, kE4M3);
  if (std::isnan(v))
    return 0x7fff;
  return uint16_t(encode(v, kF16, Mode::RN, false, false)); // exact
}

uint16_t kpool::emu::numerics::e5m2ToF16(uint8_t c) {
  return uint16_t(c) << 8; // E5M2 is the top byte of an f16
}

//===----------------------------------------------------------------------===//
// Integral values and integers.
//===----------------------------------------------------------------------===//

static double roundIntegral(double x, Mode mode) {
  switch (mode) {
  case Mode::RN:
    return std::nearbyint(x); // the host's default mode: ties to even
  case Mode::RNA:
    return std::round(x);
  case Mode::RZ:
    return std::trunc(x);
  case Mode::RM:
    return std::floor(x);
  case Mode::RP:
    return std::ceil(x);
  }
  return x;
}

uint32_t kpool::emu::numerics::roundIntegralF32(uint32_t a, Mode mode,
                                                bool ftz) {
  if (ftz)
    a = flush32(a);
  if (isNaN32(a))
    return kCanonicalNaN32;
  return bitsOf(float(roundIntegral(double(floatOf(a)), mode)));
}

double kpool::emu::numerics::roundIntegralF64(double a, Mode mode) {
  if (std::isnan(a))
    return doubleOf(kCanonicalNaN64);
  return roundIntegral(a, mode);
}

uint64_t kpool::emu::numerics::floatToInt(double a, Mode mode, unsigned bits,
                                          bool isSigned, bool fromF64) {
  if (std::isnan(a))
    return (fromF64 || bits == 64) ? (uint64_t(1) << (bits - 1)) : 0;
  double r = roundIntegral(a, mode);
  if (isSigned) {
    double lo = -std::ldexp(1.0, int(bits) - 1);
    double hiExclusive = std::ldexp(1.0, int(bits) - 1);
    if (r < lo)
      return uint64_t(int64_t(-1) << (bits - 1));
    if (r >= hiExclusive)
      return (uint64_t(1) << (bits - 1)) - 1;
    return uint64_t(int64_t(r));
  }
  if (r <= 0)
    return 0;
  double hiExclusive = std::ldexp(1.0, int(bits));
  if (r >= hiExclusive)
    return bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  return uint64_t(r);
}

uint32_t kpool::emu::numerics::intToF32(uint64_t a, bool isSigned, Mode mode) {
  __int128 v = isSigned ? __int128(int64_t(a)) : __int128(a);
  double hi = isSigned ? double(int64_t(a)) : double(a); // to nearest
  double lo = double(v - __int128(hi));                  // sign is exact
  return roundToF32(hi, lo, mode);
}

double kpool::emu::numerics::intToF64(uint64_t a, bool isSigned, Mode mode) {
  __int128 v = isSigned ? __int128(int64_t(a)) : __int128(a);
  double hi = isSigned ? double(int64_t(a)) : double(a);
  __int128 rem = v - __int128(hi);
  if (rem == 0 || mode == Mode::RN)
    return hi; // RNA differs from RN only on ties, impossible below 2^54
  bool negative = hi < 0;
  switch (mode) {
  case Mode::RZ:
    // hi is farther from zero than v when rem points toward zero.
    return (rem > 0) == negative ? std::nextafter(hi, 0.0) : hi;
  case Mode::RM:
    return rem < 0 ? std::nextafter(hi, -INFINITY) : hi;
  case Mode::RP:
    return rem > 0 ? std::nextafter(hi, INFINITY) : hi;
  default:
    return hi;
  }
}

uint32_t kpool::emu::numerics::f64ToF32(double a, Mode mode, bool ftz,
                                        bool sat) {
  if (std::isnan(a))
    return sat ? 0 : kCanonicalNaN32;
  return finishF32(roundToF32(a, 0, mode), ftz, sat);
}
