//===- PtxFloatOps.cpp - f32/f64 arithmetic and the .approx instructions --===//
//
// Round-to-nearest f32 add/sub/mul/fma without .ftz/.sat run on the host's
// IEEE arithmetic (SSE, default rounding, no flush: exactly the ISA's
// result); every other mode goes through PtxNumerics. NaN results are the
// canonical NaN. The .approx instructions go through Approx.cpp with the
// launch's mode (nominal or adversarial).
//
//===----------------------------------------------------------------------===//

#include "Approx.h"
#include "PtxMachine.h"
#include "PtxNumerics.h"
#include "PtxOps.h"

#include <cmath>

using namespace kpool::emu;
using namespace kpool::emu::ptx;
using numerics::bitsOf;
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

inline uint64_t canon(float f) {
  return f != f ? numerics::kCanonicalNaN32 : bitsOf(f);
}

// Fast paths: round to nearest, no .ftz, no .sat.
void addFast(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    d[l] = canon(floatOf(uint32_t(a[l])) + floatOf(uint32_t(b[l])));
  });
}
void subFast(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    d[l] = canon(floatOf(uint32_t(a[l])) - floatOf(uint32_t(b[l])));
  });
}
void mulFast(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    d[l] = canon(floatOf(uint32_t(a[l])) * floatOf(uint32_t(b[l])));
  });
}
void fmaFast(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  forLanes(m, [&](uint32_t l) {
    d[l] = canon(std::fma(floatOf(uint32_t(a[l])), floatOf(uint32_t(b[l])),
                          floatOf(uint32_t(c[l]))));
  });
}

// General f32 paths.
void addF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] =
        numerics::addF32(uint32_t(a[l]), uint32_t(b[l]), mode, in.ftz, in.sat);
  });
}
void subF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    uint32_t nb = uint32_t(b[l]);
    if (!numerics::isNaN32(nb))
      nb ^= 0x80000000u;
    d[l] = numerics::addF32(uint32_t(a[l]), nb, mode, in.ftz, in.sat);
  });
}
void mulF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] =
        numerics::mulF32(uint32_t(a[l]), uint32_t(b[l]), mode, in.ftz, in.sat);
  });
}
void fmaF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] = numerics::fmaF32(uint32_t(a[l]), uint32_t(b[l]), uint32_t(c[l]),
                            mode, in.ftz, in.sat);
  });
}
void divF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] = numerics::divF32(uint32_t(a[l]), uint32_t(b[l]), mode, in.ftz);
  });
}
void rcpF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] = numerics::divF32(0x3f800000u, uint32_t(a[l]), mode, in.ftz);
  });
}
void sqrtF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  auto mode = modeOf(in.rnd);
  forLanes(m, [&](uint32_t l) {
    d[l] = numerics::sqrtF32(uint32_t(a[l]), mode, in.ftz);
  });
}
template <bool Max>
void minMaxF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    d[l] =
        Max ? numerics::maxF32(uint32_t(a[l]), uint32_t(b[l]), in.ftz, in.flag)
            : numerics::minF32(uint32_t(a[l]), uint32_t(b[l]), in.ftz, in.flag);
  });
}
template <bool Neg>
void absNegF32(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) {
    uint32_t x = uint32_t(a[l]);
    if (in.ftz)
      x = numerics::flush32(x);
    d[l] = Neg ? x ^ 0x80000000u : x & 0x7fffffffu;
  });
}
template <unsigned Bits>
void copysignF(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  uint64_t sign = uint64_t(1) << (Bits - 1);
  forLanes(m, [&](uint32_t l) { d[l] = (b[l] & (sign - 1)) | (a[l] & sign); });
}
template <unsigned Bits>
void testp(Launch &, Warp &w, const Inst &in, uint32_t m) {
  const uint64_t *a = w.reg(in.s[0]);
  uint32_t r = 0;
  forLanes(m, [&](uint32_t l) {
    double x =
        Bits == 32 ? double(floatOf(uint32_t(a[l]))) : numerics::doubleOf(a[l]);
    bool v = false;
    switch (in.mode) {
    case 0:
      v = std::isfinite(x);
      break;
    case 1:
      v = std::isinf(x);
      break;
    case 2:
      v = !std::isnan(x);
      break;
    case 3:
      v = std::isnan(x);
      break;
    case 4:
      v = Bits == 32 ? std::isnormal(floatOf(uint32_t(a[l])))
                     : std::isnormal(x);
      break;
    case 5:
      v = Bits == 32 ? std::fpclassify(floatOf(uint32_t(a[l]))) == FP_SUBNORMAL
                     : std::fpclassify(x) == FP_SUBNORMAL;
      break;
    }
    r |= uint32_t(v) << l;
  });
  setPred(w.preds[in.d[0] & ~kPredBit], m, r);
}

template <approx::Op Op>
void approxUnary(Launch &L, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) {
    d[l] = approx::unary(Op, uint32_t(a[l]), in.ftz, L.approx);
  });
}
template <approx::Op Op>
void approxDivide(Launch &L, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    d[l] = approx::divide(Op, uint32_t(a[l]), uint32_t(b[l]), in.ftz, L.approx);
  });
}

// f64: round to nearest (the decoder rejects other modes).
inline double dv(uint64_t v) { return numerics::doubleOf(v); }
template <int Op>
void f64Binary(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) {
    double x = dv(a[l]), y = dv(b[l]), r;
    switch (Op) {
    case 0:
      r = x + y;
      break;
    case 1:
      r = x - y;
      break;
    case 2:
      r = x * y;
      break;
    case 3:
      r = x / y;
      break;
    case 4: // min
    case 5: // max
      if (x != x || y != y) {
        r = (x != x && y != y) || in.flag ? NAN : (x != x ? y : x);
      } else if (x == y) {
        bool xNeg = std::signbit(x);
        r = (Op == 4) == xNeg ? x : y;
      } else {
        r = (Op == 4) == (x < y) ? x : y;
      }
      break;
    }
    d[l] = numerics::canonicalF64(r);
  });
}
void f64Fma(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  forLanes(m, [&](uint32_t l) {
    d[l] = numerics::canonicalF64(std::fma(dv(a[l]), dv(b[l]), dv(c[l])));
  });
}
template <int Op> void f64Unary(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) {
    switch (Op) {
    case 0:
      d[l] = numerics::canonicalF64(1.0 / dv(a[l]));
      break;
    case 1:
      d[l] = numerics::canonicalF64(std::sqrt(dv(a[l])));
      break;
    case 2:
      d[l] = a[l] & 0x7fffffffffffffffull;
      break;
    case 3:
      d[l] = a[l] ^ 0x8000000000000000ull;
      break;
    }
  });
}

} // namespace

Handler kpool::emu::ptx::selectFloat(FloatOp op, const Inst &in) {
  Ty t = in.type;
  bool nearest = in.rnd == Round::RN || in.rnd == Round::None;
  if (t == Ty::F64) {
    if (!nearest || in.ftz || in.sat)
      return nullptr;
    switch (op) {
    case FloatOp::Add:
      return f64Binary<0>;
    case FloatOp::Sub:
      return f64Binary<1>;
    case FloatOp::Mul:
      return f64Binary<2>;
    case FloatOp::Div:
      return f64Binary<3>;
    case FloatOp::Min:
      return f64Binary<4>;
    case FloatOp::Max:
      return f64Binary<5>;
    case FloatOp::Fma:
      return f64Fma;
    case FloatOp::Rcp:
      return f64Unary<0>;
    case FloatOp::Sqrt:
      return f64Unary<1>;
    case FloatOp::Abs:
      return f64Unary<2>;
    case FloatOp::Neg:
      return f64Unary<3>;
    case FloatOp::Copysign:
      return copysignF<64>;
    case FloatOp::Testp:
      return testp<64>;
    default:
      return nullptr;
    }
  }
  if (t != Ty::F32)
    return nullptr;
  bool fast = nearest && !in.ftz && !in.sat;
  switch (op) {
  case FloatOp::Add:
    return fast ? addFast : addF32;
  case FloatOp::Sub:
    return fast ? subFast : subF32;
  case FloatOp::Mul:
    return fast ? mulFast : mulF32;
  case FloatOp::Fma:
    return fast ? fmaFast : fmaF32;
  case FloatOp::Div:
    return divF32;
  case FloatOp::Rcp:
    return rcpF32;
  case FloatOp::Sqrt:
    return sqrtF32;
  case FloatOp::Min:
    return minMaxF32<false>;
  case FloatOp::Max:
    return minMaxF32<true>;
  case FloatOp::Abs:
    return absNegF32<false>;
  case FloatOp::Neg:
    return absNegF32<true>;
  case FloatOp::Copysign:
    return copysignF<32>;
  case FloatOp::Testp:
    return testp<32>;
  case FloatOp::ApproxEx2:
    return approxUnary<approx::Op::Ex2>;
  case FloatOp::ApproxLg2:
    return approxUnary<approx::Op::Lg2>;
  case FloatOp::ApproxRcp:
    return approxUnary<approx::Op::Rcp>;
  case FloatOp::ApproxSqrt:
    return approxUnary<approx::Op::Sqrt>;
  case FloatOp::ApproxRsqrt:
    return approxUnary<approx::Op::Rsqrt>;
  case FloatOp::ApproxSin:
    return approxUnary<approx::Op::Sin>;
  case FloatOp::ApproxCos:
    return approxUnary<approx::Op::Cos>;
  case FloatOp::ApproxTanh:
    return approxUnary<approx::Op::Tanh>;
  case FloatOp::ApproxDiv:
    return approxDivide<approx::Op::Div>;
  case FloatOp::FullDiv:
    return approxDivide<approx::Op::DivFull>;
  }
  return nullptr;
}
