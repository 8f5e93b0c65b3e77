//===- Float.h - bf16/f16 <-> f32 conversions for the reference -*- C++ -*-===//
//
// Plain bit-level conversions, used by the reference implementation and the
// differential test. Narrowing is round-to-nearest-even; subnormals, infinities
// and NaNs are handled (NaNs stay NaNs, quietened, sign and top payload bits
// kept). Test-only code: written to be obviously right, not fast.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_REFERENCE_FLOAT_H
#define KPOOL_TEST_REFERENCE_FLOAT_H

#include <cstdint>
#include <cstring>

namespace kpool::reference {

inline uint32_t f32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float f32FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

//===----------------------------------------------------------------------===//
// bf16: the top 16 bits of an f32.
//===----------------------------------------------------------------------===//

inline float bf16ToF32(uint16_t h) { return f32FromBits(uint32_t(h) << 16); }

inline uint16_t f32ToBf16(float f) {
  uint32_t u = f32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign and payload top, quiet
    return uint16_t((u >> 16) | 0x0040u);
  // Round to nearest, ties to even, on the 16 dropped bits. Overflow carries
  // into the exponent and yields infinity, which is the right answer.
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return uint16_t(u >> 16);
}

//===----------------------------------------------------------------------===//
// f16 (IEEE binary16): 1 sign, 5 exponent (bias 15), 10 mantissa bits.
//===----------------------------------------------------------------------===//

inline float f16ToF32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float mag = float(mant) * (1.0f / 16777216.0f);
    return f32FromBits(f32Bits(mag) | sign);
  }
  if (exp == 31) // infinity or NaN (payload kept)
    return f32FromBits(sign | 0x7f800000u | (mant << 13));
  return f32FromBits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

inline uint16_t f32ToF16(float f) {
  uint32_t u = f32Bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: quiet, keep the top payload bits
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  // 65520 is halfway between 65504 (largest f16, odd mantissa) and 65536:
  // ties go to even, i.e. to infinity. Infinity maps to infinity.
  if (a >= 0x477ff000u)
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // normal f16 (>= 2^-14)
    uint32_t exp = (a >> 23) - 127 + 15;
    uint32_t mant = a & 0x7fffffu;
    uint32_t r = (exp << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
      ++r; // a carry into the exponent is the right result
    return uint16_t(sign | r);
  }
  // Subnormal f16 or zero: round |f| / 2^-24 to an integer.
  uint32_t e = a >> 23; // biased f32 exponent, <= 112 here
  if (e == 0)           // f32 zero or subnormal: far below 2^-25
    return sign;
  uint32_t mant = (a & 0x7fffffu) | 0x800000u; // value = mant * 2^(e-150)
  uint32_t shift = 126 - e;                    // value / 2^-24 = mant >> shift
  if (shift > 31)
    return sign;
  uint32_t r = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u)))
    ++r; // 0x400 is the smallest normal: right again
  return uint16_t(sign | r);
}

} // namespace kpool::reference

#endif // KPOOL_TEST_REFERENCE_FLOAT_H
