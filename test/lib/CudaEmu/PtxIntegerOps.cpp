//===- PtxIntegerOps.cpp - integer, bit, compare and select instructions -===//
//
// Every operation works on the low N bits of its 64-bit slots and writes its
// result zero-extended, so wraparound is the natural modulo-2^N arithmetic.
// Shifts clamp their amount to N (ISA); integer division by zero, which the
// ISA leaves unspecified, gives all ones for div (as the hardware does for
// unsigned division) and the dividend for rem, and is reported.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"
#include "PtxNumerics.h"
#include "PtxOps.h"

#include <type_traits>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

constexpr uint64_t lowBits(unsigned n) {
  return n >= 64 ? ~0ull : (uint64_t(1) << n) - 1;
}

template <unsigned N> struct Width;
template <> struct Width<8> {
  using U = uint8_t;
  using S = int8_t;
};
template <> struct Width<16> {
  using U = uint16_t;
  using S = int16_t;
};
template <> struct Width<32> {
  using U = uint32_t;
  using S = int32_t;
};
template <> struct Width<64> {
  using U = uint64_t;
  using S = int64_t;
};

template <unsigned N, bool Signed> struct Int {
  using U = typename Width<N>::U;
  using S = typename Width<N>::S;
  using T = std::conditional_t<Signed, S, U>;
  static T get(uint64_t v) { return T(U(v)); }
  static uint64_t put(T v) { return uint64_t(U(v)); }
};

/// d = F(a, b) (and c) for the lanes.
template <class F> void unary(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  forLanes(m, [&](uint32_t l) { d[l] = F::f(a[l]); });
}
template <class F> void binary(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  forLanes(m, [&](uint32_t l) { d[l] = F::f(a[l], b[l]); });
}
template <class F> void ternary(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  forLanes(m, [&](uint32_t l) { d[l] = F::f(a[l], b[l], c[l]); });
}

template <unsigned N, bool Sg> struct Ops {
  using I = Int<N, Sg>;
  using U = typename I::U;
  using T = typename I::T;
  static constexpr uint64_t mask = lowBits(N);

  struct Add {
    static uint64_t f(uint64_t a, uint64_t b) { return (a + b) & mask; }
  };
  struct Sub {
    static uint64_t f(uint64_t a, uint64_t b) { return (a - b) & mask; }
  };
  struct AddSat {
    static uint64_t f(uint64_t a, uint64_t b) {
      __int128 r = __int128(I::get(a)) + __int128(I::get(b));
      return I::put(clamp(r));
    }
  };
  struct SubSat {
    static uint64_t f(uint64_t a, uint64_t b) {
      __int128 r = __int128(I::get(a)) - __int128(I::get(b));
      return I::put(clamp(r));
    }
  };
  static T clamp(__int128 r) {
    __int128 lo = Sg ? -(__int128(1) << (N - 1)) : 0;
    __int128 hi = Sg ? (__int128(1) << (N - 1)) - 1 : (__int128(1) << N) - 1;
    return T(r < lo ? lo : r > hi ? hi : r);
  }
  struct MulLo {
    static uint64_t f(uint64_t a, uint64_t b) { return (a * b) & mask; }
  };
  static __int128 wideProduct(uint64_t a, uint64_t b) {
    return Sg ? __int128(I::get(a)) * __int128(I::get(b))
              : __int128((unsigned __int128)U(a) * (unsigned __int128)U(b));
  }
  struct MulHi {
    static uint64_t f(uint64_t a, uint64_t b) {
      if (N == 64 && !Sg)
        return uint64_t(((unsigned __int128)a * (unsigned __int128)b) >> 64);
      return uint64_t(wideProduct(a, b) >> N) & mask;
    }
  };
  struct MulWide {
    static uint64_t f(uint64_t a, uint64_t b) {
      uint64_t wmask = lowBits(2 * N);
      return uint64_t(wideProduct(a, b)) & wmask;
    }
  };
  struct MadLo {
    static uint64_t f(uint64_t a, uint64_t b, uint64_t c) {
      return (a * b + c) & mask;
    }
  };
  struct MadHi {
    static uint64_t f(uint64_t a, uint64_t b, uint64_t c) {
      return (MulHi::f(a, b) + c) & mask;
    }
  };
  struct MadWide {
    static uint64_t f(uint64_t a, uint64_t b, uint64_t c) {
      uint64_t wmask = lowBits(2 * N);
      return (MulWide::f(a, b) + c) & wmask;
    }
  };
  struct Min {
    static uint64_t f(uint64_t a, uint64_t b) {
      return I::get(a) < I::get(b) ? a & mask : b & mask;
    }
  };
  struct Max {
    static uint64_t f(uint64_t a, uint64_t b) {
      return I::get(a) > I::get(b) ? a & mask : b & mask;
    }
  };
  struct Abs {
    static uint64_t f(uint64_t a) {
      T v = I::get(a);
      return v < 0 ? (uint64_t(0) - a) & mask : a & mask;
    }
  };
  struct Neg {
    static uint64_t f(uint64_t a) { return (uint64_t(0) - a) & mask; }
  };
  struct And {
    static uint64_t f(uint64_t a, uint64_t b) { return a & b & mask; }
  };
  struct Or {
    static uint64_t f(uint64_t a, uint64_t b) { return (a | b) & mask; }
  };
  struct Xor {
    static uint64_t f(uint64_t a, uint64_t b) { return (a ^ b) & mask; }
  };
  struct Not {
    static uint64_t f(uint64_t a) { return ~a & mask; }
  };
  struct Cnot {
    static uint64_t f(uint64_t a) { return (a & mask) == 0 ? 1 : 0; }
  };
  struct Shl {
    static uint64_t f(uint64_t a, uint64_t b) {
      uint32_t s = uint32_t(b);
      return s >= N ? 0 : (a << s) & mask;
    }
  };
  struct Shr {
    static uint64_t f(uint64_t a, uint64_t b) {
      uint32_t s = uint32_t(b);
      if (Sg) {
        T v = I::get(a);
        return I::put(s >= N ? (v < 0 ? T(-1) : T(0)) : T(v >> s));
      }
      return s >= N ? 0 : (a & mask) >> s;
    }
  };
  struct Popc {
    static uint64_t f(uint64_t a) {
      return uint64_t(__builtin_popcountll(a & mask));
    }
  };
  struct Clz {
    static uint64_t f(uint64_t a) {
      a &= mask;
      return a == 0 ? N : uint64_t(__builtin_clzll(a) - (64 - int(N)));
    }
  };
  struct Brev {
    static uint64_t f(uint64_t a) {
      uint64_t r = 0;
      for (unsigned i = 0; i < N; ++i)
        r |= ((a >> i) & 1) << (N - 1 - i);
      return r;
    }
  };
  template <bool Shift> struct Bfind {
    static uint64_t f(uint64_t a) {
      a &= mask;
      if (Sg && (a >> (N - 1) & 1))
        a = ~a & mask;
      if (a == 0)
        return 0xffffffffu;
      uint64_t pos = 63 - uint64_t(__builtin_clzll(a));
      return Shift ? (N - 1) - pos : pos;
    }
  };
  struct Bfe {
    static uint64_t f(uint64_t a, uint64_t b, uint64_t c) {
      unsigned msb = N - 1, pos = unsigned(b & 0xff), len = unsigned(c & 0xff);
      uint64_t sbit = 0;
      if (Sg && len != 0)
        sbit = (a >> std::min(pos + len - 1, msb)) & 1;
      uint64_t d = 0;
      for (unsigned i = 0; i <= msb; ++i) {
        uint64_t bit =
            (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        d |= bit << i;
      }
      return d;
    }
  };
};

template <unsigned N> void bfi(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *f = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]),
                 *d = w.reg(in.s[3]);
  forLanes(m, [&](uint32_t l) {
    unsigned msb = N - 1, pos = unsigned(c[l] & 0xff),
             len = unsigned(d[l] & 0xff);
    uint64_t r = b[l];
    for (unsigned i = 0; i < len && pos + i <= msb; ++i)
      r = (r & ~(uint64_t(1) << (pos + i))) | (((a[l] >> i) & 1) << (pos + i));
    f[l] = r & lowBits(N);
  });
}

void prmt(Launch &, Warp &w, const Inst &in, uint32_t m) {
  static const uint8_t modes[6][4][4] = {
      // [mode][c & 3][target byte 0..3] = source byte
      {{0, 1, 2, 3}, {1, 2, 3, 4}, {2, 3, 4, 5}, {3, 4, 5, 6}}, // f4e
      {{0, 7, 6, 5}, {1, 0, 7, 6}, {2, 1, 0, 7}, {3, 2, 1, 0}}, // b4e
      {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}}, // rc8
      {{0, 1, 2, 3}, {1, 1, 2, 3}, {2, 2, 2, 3}, {3, 3, 3, 3}}, // ecl
      {{0, 0, 0, 0}, {0, 1, 1, 1}, {0, 1, 2, 2}, {0, 1, 2, 3}}, // ecr
      {{0, 1, 0, 1}, {2, 3, 2, 3}, {0, 1, 0, 1}, {2, 3, 2, 3}}, // rc16
  };
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  forLanes(m, [&](uint32_t l) {
    uint64_t src = (uint64_t(uint32_t(b[l])) << 32) | uint32_t(a[l]);
    uint32_t r = 0;
    for (unsigned k = 0; k < 4; ++k) {
      uint32_t byte;
      if (in.mode == 0) {
        uint32_t sel = (uint32_t(c[l]) >> (4 * k)) & 0xf;
        byte = uint32_t(src >> (8 * (sel & 7))) & 0xff;
        if (sel & 8)
          byte = (byte & 0x80) ? 0xff : 0;
      } else {
        byte = uint32_t(src >> (8 * modes[in.mode - 1][c[l] & 3][k])) & 0xff;
      }
      r |= byte << (8 * k);
    }
    d[l] = r;
  });
}

template <unsigned N> void lop3(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]);
  uint32_t lut = in.target;
  forLanes(m, [&](uint32_t l) {
    uint64_t r = 0;
    for (unsigned i = 0; i < 8; ++i)
      if (lut >> i & 1) {
        uint64_t x = (i & 4) ? a[l] : ~a[l];
        uint64_t y = (i & 2) ? b[l] : ~b[l];
        uint64_t z = (i & 1) ? c[l] : ~c[l];
        r |= x & y & z;
      }
    d[l] = r & lowBits(N);
  });
}

template <unsigned N, bool Sg> struct Mul24 {
  static int64_t ext(uint64_t v) {
    return Sg ? int64_t(int32_t(uint32_t(v) << 8) >> 8) : int64_t(v & 0xffffff);
  }
  struct Lo {
    static uint64_t f(uint64_t a, uint64_t b) {
      return uint32_t(uint64_t(ext(a) * ext(b)));
    }
  };
  struct Hi {
    static uint64_t f(uint64_t a, uint64_t b) {
      return uint32_t(uint64_t(ext(a) * ext(b)) >> 16);
    }
  };
};

/// Integer division, with the ISA-unspecified division by zero reported.
template <unsigned N, bool Sg, bool IsRem>
void divide(Launch &L, Warp &w, const Inst &in, uint32_t m) {
  using I = Int<N, Sg>;
  using T = typename I::T;
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  uint32_t byZero = 0;
  forLanes(m, [&](uint32_t l) {
    T x = I::get(a[l]), y = I::get(b[l]);
    if (y == 0) {
      byZero |= 1u << l;
      d[l] = IsRem ? I::put(x) : I::put(T(~T(0)));
      return;
    }
    if (Sg && y == T(-1)) // avoid the host's overflow trap on MIN / -1
      d[l] = IsRem ? 0 : I::put(T(typename I::U(0) - typename I::U(x)));
    else
      d[l] = I::put(IsRem ? T(x % y) : T(x / y));
  });
  if (byZero)
    L.report(Finding::Kind::Execution, false, &w,
             uint32_t(__builtin_ctz(byZero)), &in,
             std::string("integer ") + (IsRem ? "remainder" : "division") +
                 " by zero (the ISA leaves the result unspecified; the "
                 "emulator gives " +
                 (IsRem ? "the dividend" : "all ones") + ")");
}

template <unsigned N> void selp(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  uint32_t p = w.preds[in.s[2] & ~kPredBit];
  forLanes(m, [&](uint32_t l) { d[l] = (p >> l & 1) ? a[l] : b[l]; });
}

void mov(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  uint64_t mask = in.dmask;
  forLanes(m, [&](uint32_t l) { d[l] = a[l] & mask; });
}

template <unsigned N, bool Sg> Handler select(IntOp op) {
  using O = Ops<N, Sg>;
  switch (op) {
  case IntOp::Add:
    return binary<typename O::Add>;
  case IntOp::Sub:
    return binary<typename O::Sub>;
  case IntOp::AddSat:
    return N == 32 && Sg ? binary<typename O::AddSat> : nullptr;
  case IntOp::SubSat:
    return N == 32 && Sg ? binary<typename O::SubSat> : nullptr;
  case IntOp::MulLo:
    return binary<typename O::MulLo>;
  case IntOp::MulHi:
    return binary<typename O::MulHi>;
  case IntOp::MulWide:
    return N < 64 ? binary<typename O::MulWide> : nullptr;
  case IntOp::MadLo:
    return ternary<typename O::MadLo>;
  case IntOp::MadHi:
    return ternary<typename O::MadHi>;
  case IntOp::MadWide:
    return N < 64 ? ternary<typename O::MadWide> : nullptr;
  case IntOp::Mul24Lo:
    return N == 32 ? binary<typename Mul24<N, Sg>::Lo> : nullptr;
  case IntOp::Mul24Hi:
    return N == 32 ? binary<typename Mul24<N, Sg>::Hi> : nullptr;
  case IntOp::Div:
    return divide<N, Sg, false>;
  case IntOp::Rem:
    return divide<N, Sg, true>;
  case IntOp::Min:
    return binary<typename O::Min>;
  case IntOp::Max:
    return binary<typename O::Max>;
  case IntOp::Abs:
    return Sg ? unary<typename O::Abs> : nullptr;
  case IntOp::Neg:
    return Sg ? unary<typename O::Neg> : nullptr;
  case IntOp::And:
    return binary<typename O::And>;
  case IntOp::Or:
    return binary<typename O::Or>;
  case IntOp::Xor:
    return binary<typename O::Xor>;
  case IntOp::Not:
    return unary<typename O::Not>;
  case IntOp::Cnot:
    return unary<typename O::Cnot>;
  case IntOp::Shl:
    return binary<typename O::Shl>;
  case IntOp::Shr:
    return binary<typename O::Shr>;
  case IntOp::Popc:
    return N >= 32 ? unary<typename O::Popc> : nullptr;
  case IntOp::Clz:
    return N >= 32 ? unary<typename O::Clz> : nullptr;
  case IntOp::Brev:
    return N >= 32 ? unary<typename O::Brev> : nullptr;
  case IntOp::Bfind:
    return N >= 32 ? unary<typename O::template Bfind<false>> : nullptr;
  case IntOp::BfindShift:
    return N >= 32 ? unary<typename O::template Bfind<true>> : nullptr;
  case IntOp::Bfe:
    return N >= 32 ? ternary<typename O::Bfe> : nullptr;
  case IntOp::Bfi:
    return N >= 32 ? bfi<N> : nullptr;
  case IntOp::Prmt:
    return N == 32 ? prmt : nullptr;
  case IntOp::Lop3:
    return N == 32 ? lop3<N> : nullptr;
  case IntOp::Mov:
    return mov;
  case IntOp::Selp:
    return selp<N>;
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// setp and predicate logic.
//===----------------------------------------------------------------------===//

template <class T> bool compareInt(Cmp c, T a, T b) {
  switch (c) {
  case Cmp::Eq:
    return a == b;
  case Cmp::Ne:
    return a != b;
  case Cmp::Lt:
  case Cmp::Lo:
    return a < b;
  case Cmp::Le:
  case Cmp::Ls:
    return a <= b;
  case Cmp::Gt:
  case Cmp::Hi:
    return a > b;
  case Cmp::Ge:
  case Cmp::Hs:
    return a >= b;
  default:
    return false;
  }
}

template <class F> bool compareFloat(Cmp c, F a, F b) {
  bool unordered = a != a || b != b;
  switch (c) {
  case Cmp::Eq:
    return !unordered && a == b;
  case Cmp::Ne:
    return !unordered && a != b;
  case Cmp::Lt:
    return !unordered && a < b;
  case Cmp::Le:
    return !unordered && a <= b;
  case Cmp::Gt:
    return !unordered && a > b;
  case Cmp::Ge:
    return !unordered && a >= b;
  case Cmp::Equ:
    return unordered || a == b;
  case Cmp::Neu:
    return unordered || a != b;
  case Cmp::Ltu:
    return unordered || a < b;
  case Cmp::Leu:
    return unordered || a <= b;
  case Cmp::Gtu:
    return unordered || a > b;
  case Cmp::Geu:
    return unordered || a >= b;
  case Cmp::Num:
    return !unordered;
  case Cmp::Nan:
    return unordered;
  default:
    return false;
  }
}

inline bool combine(BoolOp op, bool t, bool c) {
  switch (op) {
  case BoolOp::And:
    return t && c;
  case BoolOp::Or:
    return t || c;
  case BoolOp::Xor:
    return t != c;
  case BoolOp::None:
    return t;
  }
  return t;
}

/// Kind: 0 unsigned, 1 signed, 2 f32, 3 f64.
template <unsigned N, int K>
void setp(Launch &, Warp &w, const Inst &in, uint32_t m) {
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]);
  Cmp cmp = Cmp(in.mode);
  BoolOp op = BoolOp(in.mode2);
  uint32_t c = op == BoolOp::None ? 0 : w.preds[in.s[2] & ~kPredBit];
  if (in.flag)
    c = ~c;
  uint32_t t = 0;
  forLanes(m, [&](uint32_t l) {
    bool r;
    if constexpr (K == 2) {
      uint32_t x = uint32_t(a[l]), y = uint32_t(b[l]);
      if (in.ftz) {
        x = numerics::flush32(x);
        y = numerics::flush32(y);
      }
      r = compareFloat(cmp, numerics::floatOf(x), numerics::floatOf(y));
    } else if constexpr (K == 3) {
      r = compareFloat(cmp, numerics::doubleOf(a[l]), numerics::doubleOf(b[l]));
    } else {
      using I = Int<N, K == 1>;
      r = compareInt(cmp, I::get(a[l]), I::get(b[l]));
    }
    t |= uint32_t(r) << l;
  });
  uint32_t p = 0, q = 0;
  for (uint32_t l = 0; l < 32; ++l) {
    bool tl = t >> l & 1, cl = c >> l & 1;
    p |= uint32_t(combine(op, tl, cl)) << l;
    q |= uint32_t(combine(op, !tl, cl)) << l;
  }
  setPred(w.preds[in.d[0] & ~kPredBit], m, p);
  setPred(w.preds[in.d[1] & ~kPredBit], m, q);
}

template <int Op>
void predLogic(Launch &, Warp &w, const Inst &in, uint32_t m) {
  uint32_t a = w.preds[in.s[0] & ~kPredBit];
  uint32_t b = Op < 3 ? w.preds[in.s[1] & ~kPredBit] : 0;
  uint32_t r = Op == 0   ? (a & b)
               : Op == 1 ? (a | b)
               : Op == 2 ? (a ^ b)
               : Op == 3 ? ~a
                         : a;
  setPred(w.preds[in.d[0] & ~kPredBit], m, r);
}

template <bool Pack> void pack(Launch &, Warp &w, const Inst &in, uint32_t m) {
  unsigned eb = in.size, n = in.vec;
  uint64_t emask = eb == 64 ? ~0ull : (uint64_t(1) << eb) - 1;
  if (Pack) {
    uint64_t *d = w.reg(in.d[0]);
    forLanes(m, [&](uint32_t l) {
      uint64_t r = 0;
      for (unsigned i = 0; i < n; ++i)
        r |= (w.reg(in.s[i])[l] & emask) << (eb * i);
      d[l] = r;
    });
  } else {
    const uint64_t *a = w.reg(in.s[0]);
    forLanes(m, [&](uint32_t l) {
      uint64_t v = a[l];
      for (unsigned i = 0; i < n; ++i)
        w.reg(in.d[i])[l] = (v >> (eb * i)) & emask;
    });
  }
}

} // namespace

Handler kpool::emu::ptx::selectInteger(IntOp op, Ty t) {
  bool sg = isSigned(t);
  switch (bitsOf(t)) {
  case 8:
    return op == IntOp::Mov ? mov : nullptr;
  case 16:
    return sg ? select<16, true>(op) : select<16, false>(op);
  case 32:
    return sg ? select<32, true>(op) : select<32, false>(op);
  case 64:
    return sg ? select<64, true>(op) : select<64, false>(op);
  default:
    return nullptr;
  }
}

Handler kpool::emu::ptx::selectSetp(Ty t) {
  if (t == Ty::F32)
    return setp<32, 2>;
  if (t == Ty::F64)
    return setp<64, 3>;
  bool sg = isSigned(t);
  switch (bitsOf(t)) {
  case 16:
    return sg ? setp<16, 1> : setp<16, 0>;
  case 32:
    return sg ? setp<32, 1> : setp<32, 0>;
  case 64:
    return sg ? setp<64, 1> : setp<64, 0>;
  default:
    return nullptr;
  }
}

Handler kpool::emu::ptx::selectPredLogic(IntOp op) {
  switch (op) {
  case IntOp::And:
    return predLogic<0>;
  case IntOp::Or:
    return predLogic<1>;
  case IntOp::Xor:
    return predLogic<2>;
  case IntOp::Not:
    return predLogic<3>;
  case IntOp::Mov:
    return predLogic<4>;
  default:
    return nullptr;
  }
}

Handler kpool::emu::ptx::selectPack(bool isPack) {
  return isPack ? pack<true> : pack<false>;
}
