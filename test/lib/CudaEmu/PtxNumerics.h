//===- PtxNumerics.h - bit-exact PTX floating-point arithmetic -*- C++ -*-===//
//
// The floating-point operations of the PTX ISA that have an exact definition,
// on bit patterns: IEEE-754 f32 add/sub/mul/fma/div/sqrt in the four rounding
// modes with the ISA's .ftz and .sat, f32 min/max (with .NaN), and the cvt
// conversions between f32/f64, f16, bf16, FP8 (E4M3, E5M2) and integers with
// every rounding, .satfinite and .relu. Results that are NaN are the
// canonical NaN of their format (0x7fffffff for f32, 0x7fff for f16 and
// bf16, 0x7f | sign for the FP8 formats), which the ISA allows ("unspecified
// NaN") and GPUs produce.
//
// Public so that tests can run a conversion directly (the e4m3 test feeds it
// 10 million inputs).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXNUMERICS_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXNUMERICS_H

#include <cstdint>
#include <cstring>

namespace kpool::emu::numerics {

/// RN: to nearest, ties to even; RZ/RM/RP: toward zero, -inf, +inf; RNA: to
/// nearest, ties away from zero.
enum class Mode : uint8_t { RN, RZ, RM, RP, RNA };

constexpr uint32_t kCanonicalNaN32 = 0x7fffffffu;
constexpr uint64_t kCanonicalNaN64 = 0x7fffffffffffffffull;

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint64_t bitsOf(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}
inline double doubleOf(uint64_t u) {
  double f;
  std::memcpy(&f, &u, 8);
  return f;
}
inline bool isNaN32(uint32_t a) { return (a & 0x7fffffffu) > 0x7f800000u; }
inline bool isSubnormal32(uint32_t a) {
  return (a & 0x7f800000u) == 0 && (a & 0x007fffffu) != 0;
}
/// .ftz on an input or result: subnormals become zero of the same sign.
inline uint32_t flush32(uint32_t a) {
  return isSubnormal32(a) ? (a & 0x80000000u) : a;
}

/// The f32 nearest (per `mode`) to the exact value hi + lo, where hi is a
/// double and |lo| is below half an ulp of hi in double precision (what
/// TwoSum and an exact remainder give).
uint32_t roundToF32(double hi, double lo, Mode mode);

// f32 arithmetic (a, b, c, results: f32 bits).
uint32_t addF32(uint32_t a, uint32_t b, Mode mode, bool ftz, bool sat);
uint32_t mulF32(uint32_t a, uint32_t b, Mode mode, bool ftz, bool sat);
uint32_t fmaF32(uint32_t a, uint32_t b, uint32_t c, Mode mode, bool ftz,
                bool sat);
uint32_t divF32(uint32_t a, uint32_t b, Mode mode, bool ftz);
uint32_t sqrtF32(uint32_t a, Mode mode, bool ftz);
/// min/max per the ISA: NaN inputs are ignored unless `nanMode` (.NaN),
/// where any NaN gives the canonical NaN; -0 < +0.
uint32_t minF32(uint32_t a, uint32_t b, bool ftz, bool nanMode);
uint32_t maxF32(uint32_t a, uint32_t b, bool ftz, bool nanMode);
/// .sat: clamp to [0, 1], NaN (and -0) to +0.
uint32_t saturateF32(uint32_t a);

// f64 arithmetic (round to nearest only, what PTX code uses).
uint64_t canonicalF64(double x);

// Narrow formats. `satfinite`: out-of-range magnitudes (and infinities)
// give the largest finite value of the sign; `relu`: negative results give
// +0 and NaN the canonical NaN.
uint16_t f32ToBF16(uint32_t a, Mode mode, bool satfinite, bool relu);
uint16_t f32ToF16(uint32_t a, Mode mode, bool satfinite, bool relu);
uint16_t f64ToF16(double a, Mode mode, bool satfinite = false,
                  bool relu = false);
uint16_t f64ToBF16(double a, Mode mode, bool satfinite = false,
                   bool relu = false);
/// cvt.rn.satfinite{.relu}.e4m3x2.f32 for one value: an E4M3FN code (no
/// infinity; 0x7f/0xff are NaN; 448 is the largest finite value).
uint8_t f32ToE4M3(uint32_t a, bool relu);
/// The same for E5M2 (IEEE-like, with infinities; satfinite always).
uint8_t f32ToE5M2(uint32_t a, bool relu);
uint32_t bf16ToF32(uint16_t h);
uint32_t f16ToF32(uint16_t h);
uint16_t e4m3ToF16(uint8_t c);
uint16_t e5m2ToF16(uint8_t c);

/// f32/f64 to f32/f64 rounded to an integral value (cvt.rni/rzi/rmi/rpi
/// with equal types).
uint32_t roundIntegralF32(uint32_t a, Mode mode, bool ftz);
double roundIntegralF64(double a, Mode mode);

/// Float to integer, clamped to the destination range; NaN gives 0, or
/// 1 << 63 for a 64-bit destination from f64 (ISA, cvt "Integer Notes").
/// `bits` is 8, 16, 32 or 64.
uint64_t floatToInt(double a, Mode mode, unsigned bits, bool isSigned,
                    bool fromF64);
/// Integer (sign- or zero-extended to 64 bits per `isSigned`) to f32.
uint32_t intToF32(uint64_t a, bool isSigned, Mode mode);
double intToF64(uint64_t a, bool isSigned, Mode mode);
/// f64 to f32.
uint32_t f64ToF32(double a, Mode mode, bool ftz, bool sat);

} // namespace kpool::emu::numerics

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXNUMERICS_H
