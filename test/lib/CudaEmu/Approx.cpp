//===- Approx.cpp - the .approx instructions, within the ISA's bounds ----===//

#include "Approx.h"
#include "PtxNumerics.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace kpool::emu;
using namespace kpool::emu::approx;
using numerics::bitsOf;
using numerics::floatOf;
using numerics::Mode;

namespace {

constexpr uint32_t kPlusInf = 0x7f800000u, kMinusInf = 0xff800000u;
constexpr uint32_t kOne = 0x3f800000u;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// +1 or -1, drawn from the seed, the instruction and its inputs.
int direction(const Config &c, Op op, uint32_t a, uint32_t b = 0) {
  uint64_t h = mix(c.seed ^ mix(uint64_t(op) << 56 ^ uint64_t(a) << 24 ^ b));
  return (h & 1) ? 1 : -1;
}

/// Spacing of f32 values at magnitude |x| (its binade's ulp).
double ulpAt(double x) {
  x = std::fabs(x);
  if (x < std::ldexp(1.0, -126))
    return std::ldexp(1.0, -149);
  int e;
  std::frexp(x, &e); // x = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 1 - 23);
}

/// n ulps at `exact` toward `dir`, in the ulp of the smaller binade when the
/// push crosses into it.
double ulpRadius(double exact, int n, int dir) {
  double u = ulpAt(exact);
  if ((exact > 0) != (dir > 0))
    u = std::min(u, ulpAt(std::fabs(exact) - n * u));
  return n * u;
}

/// The f32 nearest to `exact + dir * radius` on the side of `exact`, so that
/// it lies within `radius` of `exact`; never of the opposite sign, never
/// infinite for a finite `exact`.
uint32_t pushed(double exact, double radius, int dir) {
  double target = exact + dir * radius;
  uint32_t r = numerics::roundToF32(target, 0, dir > 0 ? Mode::RM : Mode::RP);
  if (std::signbit(floatOf(r)) != std::signbit(exact) || floatOf(r) == 0)
    return std::signbit(exact) ? 0x80000000u : 0u;
  return r;
}

/// Steps the f32 `r` by `n` values in direction `dir`, staying finite and
/// of the same sign.
uint32_t stepped(uint32_t r, int n, int dir) {
  float f = floatOf(r);
  if (!std::isfinite(f))
    return r;
  for (int i = 0; i < n; ++i) {
    float g = std::nextafter(f, dir > 0 ? std::numeric_limits<float>::max()
                                        : -std::numeric_limits<float>::max());
    if (std::signbit(g) != std::signbit(f) || g == 0)
      break;
    f = g;
  }
  return bitsOf(f);
}

uint32_t nearest(double x) { return numerics::roundToF32(x, 0, Mode::RN); }

bool isNeg(uint32_t a) { return (a & 0x80000000u) != 0; }
bool isZero(uint32_t a) { return (a & 0x7fffffffu) == 0; }
bool isInf(uint32_t a) { return (a & 0x7fffffffu) == 0x7f800000u; }

uint32_t unaryImpl(Op op, uint32_t a, bool ftz, const Config &c) {
  if (ftz)
    a = numerics::flush32(a);
  if (numerics::isNaN32(a))
    return numerics::kCanonicalNaN32;
  double x = floatOf(a);
  int dir = direction(c, op, a);
  switch (op) {
  case Op::Ex2: {
    if (isZero(a))
      return kOne;
    if (a == kMinusInf)
      return 0;
    if (a == kPlusInf)
      return kPlusInf;
    uint32_t r = nearest(std::exp2(x));
    return c.adversarial ? stepped(r, 2, dir) : r;
  }
  case Op::Lg2: {
    if (isZero(a))
      return kMinusInf;
    if (isNeg(a))
      return numerics::kCanonicalNaN32;
    if (a == kPlusInf)
      return kPlusInf;
    double e = std::log2(x);
    if (!c.adversarial)
      return nearest(e);
    double radius = (x > 0.5 && x < 2) ? std::ldexp(1.0, -22)
                                       : std::fabs(e) * std::ldexp(1.0, -22);
    return pushed(e, radius * (1 - std::ldexp(1.0, -20)), dir);
  }
  case Op::Rcp: {
    if (isZero(a))
      return isNeg(a) ? kMinusInf : kPlusInf;
    if (isInf(a))
      return isNeg(a) ? 0x80000000u : 0u;
    if (!c.adversarial)
      return numerics::divF32(kOne, a, Mode::RN, false);
    double e = 1.0 / x;
    return pushed(e, ulpRadius(e, 1, dir), dir);
  }
  case Op::Sqrt: {
    if (isZero(a))
      return a;
    if (isNeg(a))
      return numerics::kCanonicalNaN32;
    if (a == kPlusInf)
      return kPlusInf;
    if (!c.adversarial)
      return numerics::sqrtF32(a, Mode::RN, false);
    double e = std::sqrt(x);
    return pushed(e, e * std::ldexp(1.0, -23) * (1 - std::ldexp(1.0, -20)),
                  dir);
  }
  case Op::Rsqrt: {
    if (isZero(a))
      return isNeg(a) ? kMinusInf : kPlusInf;
    if (isNeg(a))
      return numerics::kCanonicalNaN32;
    if (a == kPlusInf)
      return 0;
    double e = 1.0 / std::sqrt(x);
    if (!c.adversarial)
      return nearest(e);
    return pushed(e, e * std::pow(2.0, -22.9) * (1 - std::ldexp(1.0, -20)),
                  dir);
  }
  case Op::Sin:
  case Op::Cos: {
    if (isInf(a))
      return numerics::kCanonicalNaN32;
    if (isZero(a))
      return op == Op::Sin ? a : kOne;
    double e = op == Op::Sin ? std::sin(x) : std::cos(x);
    if (!c.adversarial)
      return nearest(e);
    double radius =
        std::fabs(x) <= 2 * M_PI ? std::pow(2.0, -20.5) : std::pow(2.0, -14.7);
    radius *= 1 - std::ldexp(1.0, -20);
    // An absolute bound may cross zero: keep the pushed value's own sign.
    double target = e + dir * radius;
    return numerics::roundToF32(target, 0, dir > 0 ? Mode::RM : Mode::RP);
  }
  case Op::Tanh: {
    if (isZero(a) || numerics::isSubnormal32(a))
      return a; // subnormal inputs pass through (ISA)
    if (isInf(a))
      return isNeg(a) ? 0xbf800000u : kOne;
    double e = std::tanh(x);
    if (!c.adversarial)
      return nearest(e);
    return pushed(
        e, std::fabs(e) * std::ldexp(1.0, -11) * (1 - std::ldexp(1.0, -20)),
        dir);
  }
  default:
    return numerics::kCanonicalNaN32;
  }
}

} // namespace

uint32_t kpool::emu::approx::unary(Op op, uint32_t a, bool ftz,
                                   const Config &config) {
  uint32_t r = unaryImpl(op, a, ftz, config);
  return ftz ? numerics::flush32(r) : r;
}

uint32_t kpool::emu::approx::divide(Op op, uint32_t a, uint32_t b, bool ftz,
                                    const Config &config) {
  if (ftz) {
    a = numerics::flush32(a);
    b = numerics::flush32(b);
  }
  uint32_t r;
  if (numerics::isNaN32(a) || numerics::isNaN32(b)) {
    r = numerics::kCanonicalNaN32;
  } else if (op == Op::Div &&
             std::fabs(double(floatOf(b))) > std::ldexp(1.0, 126) &&
             std::fabs(double(floatOf(b))) < std::ldexp(1.0, 128)) {
    // The ISA's rule for huge divisors.
    r = isInf(a) ? numerics::kCanonicalNaN32 : ((a ^ b) & 0x80000000u);
  } else {
    double x = floatOf(a), y = floatOf(b);
    double e = x / y;
    if (!config.adversarial || !std::isfinite(e) || e == 0) {
      if (op == Op::Div) // a * (1/b), 1/b correctly rounded
        r = numerics::mulF32(a,
                             numerics::divF32(0x3f800000u, b, Mode::RN, false),
                             Mode::RN, false, false);
      else
        r = numerics::divF32(a, b, Mode::RN, false);
    } else {
      int dir = direction(config, op, a, b);
      r = pushed(e, ulpRadius(e, 2, dir), dir);
    }
  }
  return ftz ? numerics::flush32(r) : r;
}
