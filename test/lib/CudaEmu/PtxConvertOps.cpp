//===- PtxConvertOps.cpp - cvt: every rounding, saturation and format -----===//
//
// Integer <-> integer (truncation, sign/zero extension, .sat), float <->
// float (f64, f32, f16, bf16, and the packed f16x2/bf16x2/e4m3x2/e5m2x2
// forms with the ISA's operand order: `a` goes to the upper half), integer
// <-> float with the float or integer rounding modes, .ftz, .sat,
// .satfinite and .relu. The bit-level work is in PtxNumerics.cpp; the most
// frequent conversions in kpool's kernels have their own handlers.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"
#include "PtxNumerics.h"
#include "PtxOps.h"

#include <cmath>

using namespace kpool::emu;
using namespace kpool::emu::ptx;
using numerics::floatOf;

namespace {

numerics::Mode modeOf(Round r) {
  switch (r) {
  case Round::RZ:
    return numerics::Mode::RZ;
  case Round::RM:
    return numerics::Mode::RM;
  case Round::RP:
    return numerics::Mode::RP;
  case Round::RNA:
    return numerics::Mode::RNA;
  default:
    return numerics::Mode::RN;
  }
}

bool isInt(Ty t) { return !isFloat(t) && t != Ty::Pred && t != Ty::None; }

uint64_t widthMask(unsigned bits) {
  return bits >= 64 ? ~0ull : (uint64_t(1) << bits) - 1;
}

/// The source as a 64-bit integer (sign- or zero-extended from its width).
uint64_t intSource(Ty t, uint64_t v) {
  unsigned bits = bitsOf(t);
  v &= widthMask(bits);
  if (isSigned(t) && bits < 64 && (v >> (bits - 1) & 1))
    v |= ~widthMask(bits);
  return v;
}

/// The source as a double (exact for every float format).
double floatSource(Ty t, uint64_t v, bool ftz) {
  switch (t) {
  case Ty::F32: {
    uint32_t x = uint32_t(v);
    if (ftz)
      x = numerics::flush32(x);
    return floatOf(x);
  }
  case Ty::F64:
    return numerics::doubleOf(v);
  case Ty::F16:
    return floatOf(numerics::f16ToF32(uint16_t(v)));
  case Ty::BF16:
    return floatOf(numerics::bf16ToF32(uint16_t(v)));
  default:
    return 0;
  }
}

/// The result written to a destination register of mask `dmask`: signed
/// integers sign-extended to the register, everything else zero-extended.
uint64_t extendTo(Ty dst, uint64_t v, uint64_t dmask) {
  return intSource(dst, v) & dmask;
}

/// A float result (f16/bf16/f32/f64 bits) of the exact value x.
uint64_t floatResult(const Inst &in, double x) {
  auto mode = modeOf(in.rnd);
  bool satfinite = in.mode == 1, relu = in.flag;
  if (in.sat && !std::isnan(x))
    x = x <= 0 ? 0.0 : x >= 1 ? 1.0 : x;
  else if (in.sat)
    x = 0;
  switch (in.type) {
  case Ty::F32: {
    uint32_t r = numerics::f64ToF32(x, mode, in.ftz, false);
    if (relu && (r & 0x80000000u))
      r = numerics::isNaN32(r) ? numerics::kCanonicalNaN32 : 0;
    return r;
  }
  case Ty::F64:
    return numerics::canonicalF64(x);
  case Ty::F16:
    return numerics::f64ToF16(x, mode, satfinite, relu);
  case Ty::BF16:
    return numerics::f64ToBF16(x, mode, satfinite, relu);
  default:
    return 0;
  }
}

/// One scalar conversion.
uint64_t convert(const Inst &in, uint64_t a) {
  Ty dst = in.type, src = in.type2;
  if (isInt(dst) && isInt(src)) {
    uint64_t v = intSource(src, a);
    if (in.sat) {
      unsigned bits = bitsOf(dst);
      __int128 x = isSigned(src) ? __int128(int64_t(v)) : __int128(v);
      __int128 lo = isSigned(dst) ? -(__int128(1) << (bits - 1)) : 0;
      __int128 hi = isSigned(dst) ? (__int128(1) << (bits - 1)) - 1
                                  : (__int128(1) << bits) - 1;
      v = uint64_t(x < lo ? lo : x > hi ? hi : x);
    }
    return extendTo(dst, v & widthMask(bitsOf(dst)), in.dmask);
  }
  if (isInt(dst)) { // float to integer
    double x = floatSource(src, a, in.ftz);
    uint64_t r = numerics::floatToInt(x, modeOf(in.rnd), bitsOf(dst),
                                      isSigned(dst), src == Ty::F64);
    return extendTo(dst, r, in.dmask);
  }
  if (isInt(src)) { // integer to float
    uint64_t v = intSource(src, a);
    auto mode = modeOf(in.rnd);
    if (dst == Ty::F32) {
      uint32_t r = numerics::intToF32(v, isSigned(src), mode);
      return in.sat ? numerics::saturateF32(r) : r;
    }
    double x = numerics::intToF64(v, isSigned(src), mode);
    if (dst == Ty::F64)
      return numerics::bitsOf(x);
    return floatResult(in, isSigned(src) ? double(int64_t(v)) : double(v));
  }
  // Float to float.
  if (dst == src && in.mode2) { // rounding to an integral value
    if (dst == Ty::F32)
      return numerics::roundIntegralF32(uint32_t(a), modeOf(in.rnd), in.ftz);
    if (dst == Ty::F64)
      return numerics::bitsOf(
          numerics::roundIntegralF64(numerics::doubleOf(a), modeOf(in.rnd)));
  }
  if (dst == Ty::F32 && src == Ty::F32) {
    uint32_t x = uint32_t(a);
    if (in.ftz)
      x = numerics::flush32(x);
    if (numerics::isNaN32(x))
      x = numerics::kCanonicalNaN32;
    return in.sat ? numerics::saturateF32(x) : x;
  }
  double x = floatSource(src, a, in.ftz);
  if (dst == Ty::F32 && src == Ty::BF16 && in.ftz)
    return numerics::flush32(numerics::bf16ToF32(uint16_t(a)));
  return floatResult(in, x);
}

void generic(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) { d[l] = convert(in, a[l]); });
}

/// cvt{.rn/.rz}{.satfinite}{.relu}.{f16x2,bf16x2}.f32 d, a, b:
/// d = {cvt(a), cvt(b)} with a in the upper half.
template <bool BF16>
void pair16(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  auto mode = modeOf(in.rnd);
  bool satfinite = in.mode == 1;
  forLanes(m, [&](uint32_t l) {
    uint32_t x = uint32_t(a[l]), y = uint32_t(b[l]);
    if (in.ftz) {
      x = numerics::flush32(x);
      y = numerics::flush32(y);
    }
    uint32_t hi = BF16 ? numerics::f32ToBF16(x, mode, satfinite, in.flag)
                       : numerics::f32ToF16(x, mode, satfinite, in.flag);
    uint32_t lo = BF16 ? numerics::f32ToBF16(y, mode, satfinite, in.flag)
                       : numerics::f32ToF16(y, mode, satfinite, in.flag);
    d[l] = (hi << 16) | lo;
  });
}

/// cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b: a in bits 15:8.
template <bool E4M3>
void pairFp8(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    uint32_t hi = E4M3 ? numerics::f32ToE4M3(uint32_t(a[l]), in.flag)
                       : numerics::f32ToE5M2(uint32_t(a[l]), in.flag);
    uint32_t lo = E4M3 ? numerics::f32ToE4M3(uint32_t(b[l]), in.flag)
                       : numerics::f32ToE5M2(uint32_t(b[l]), in.flag);
    d[l] = (hi << 8) | lo;
  });
}

/// cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.{f16x2,bf16x2} d, a.
template <bool E4M3>
void packedToFp8(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  bool bf = in.type2 == Ty::BF16x2;
  forLanes(m, [&](uint32_t l) {
    uint32_t v = uint32_t(a[l]);
    auto one = [&](uint16_t h) {
      uint32_t f = bf ? numerics::bf16ToF32(h) : numerics::f16ToF32(h);
      return E4M3 ? numerics::f32ToE4M3(f, in.flag)
                  : numerics::f32ToE5M2(f, in.flag);
    };
    d[l] = (uint32_t(one(uint16_t(v >> 16))) << 8) | one(uint16_t(v));
  });
}

/// cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a: the upper byte to the upper
/// half (exact).
template <bool E4M3>
void fp8ToF16x2(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) {
    auto one = [&](uint8_t c) -> uint32_t {
      uint16_t h = E4M3 ? numerics::e4m3ToF16(c) : numerics::e5m2ToF16(c);
      if (in.flag && (h & 0x8000u))
        h = (h & 0x7fffu) > 0x7c00u ? 0x7fff : 0;
      return h;
    };
    uint32_t v = uint32_t(a[l]);
    d[l] = (one(uint8_t(v >> 8)) << 16) | one(uint8_t(v));
  });
}

// The frequent plain conversions.
void bf16ToF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) { d[l] = (a[l] & 0xffff) << 16; });
}
void f32ToBf16Rn(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) {
    uint32_t u = uint32_t(a[l]);
    d[l] =
        numerics::isNaN32(u) ? 0x7fff : ((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  });
}
void zeroExtend32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) { d[l] = a[l] & 0xffffffffu; });
}

} // namespace

Handler kpool::emu::ptx::selectConvert(const Inst &in) {
  Ty dst = in.type, src = in.type2;
  bool plain = !in.ftz && !in.sat && in.mode == 0 && !in.flag;
  if (dst == Ty::F16x2 || dst == Ty::BF16x2) {
    if (src == Ty::F32)
      return dst == Ty::BF16x2 ? pair16<true> : pair16<false>;
    if (dst == Ty::F16x2 && (src == Ty::E4M3x2 || src == Ty::E5M2x2))
      return src == Ty::E4M3x2 ? fp8ToF16x2<true> : fp8ToF16x2<false>;
    return nullptr;
  }
  if (dst == Ty::E4M3x2 || dst == Ty::E5M2x2) {
    if (in.mode != 1 || in.rnd != Round::RN)
      return nullptr; // the ISA requires .rn.satfinite
    if (src == Ty::F32)
      return dst == Ty::E4M3x2 ? pairFp8<true> : pairFp8<false>;
    if (src == Ty::F16x2 || src == Ty::BF16x2)
      return dst == Ty::E4M3x2 ? packedToFp8<true> : packedToFp8<false>;
    return nullptr;
  }
  if (src == Ty::F16x2 || src == Ty::BF16x2 || src == Ty::E4M3x2 ||
      src == Ty::E5M2x2 || dst == Ty::B128 || src == Ty::B128 ||
      dst == Ty::Pred || src == Ty::Pred)
    return nullptr;
  if (plain && dst == Ty::F32 && src == Ty::BF16)
    return bf16ToF32;
  if (plain && dst == Ty::BF16 && src == Ty::F32 &&
      (in.rnd == Round::RN || in.rnd == Round::None))
    return f32ToBf16Rn;
  if (plain && (dst == Ty::U64 || dst == Ty::B64 || dst == Ty::S64) &&
      (src == Ty::U32 || src == Ty::B32))
    return zeroExtend32;
  return generic;
}
