//===- Approx.h - .approx instructions within the ISA's bounds -*- C++ -*-===//
//
// The PTX ISA gives no bit-exact definition of its approximate instructions,
// only a maximum error and a table of special inputs. Each is emulated as a
// deterministic function of its input:
//  - Nominal: the correctly rounded (to nearest) f32 result, except
//    div.approx, which is the ISA's own definition a * (1/b) with 1/b
//    correctly rounded;
//  - Adversarial: the result pushed to the documented bound, in a direction
//    drawn from (seed, instruction, input bits), so that a test passing in
//    this mode passes whatever bits within the bound the hardware returns.
// Every result honours the ISA's special-value table (ex2(+-0) = 1 exactly,
// rcp(+-0) = +-inf, ...) and its subnormal rules (.ftz flushes inputs and
// results to sign-preserving zero; without it subnormals are kept).
//
// The bounds (PTX ISA 9.1, "Floating Point Instructions"):
//   ex2.approx.f32    2 ulp from the correctly rounded result, full range
//   lg2.approx.f32    2^-22 absolute in (0.5, 2), 2^-22 relative elsewhere
//   rcp.approx.f32    1 ulp, full range
//   sqrt.approx.f32   2^-23 relative, positive finite range
//   rsqrt.approx.f32  2^-22.9 relative, positive finite range
//   sin/cos.approx    2^-20.5 absolute in [-2pi, 2pi], 2^-14.7 in
//                     [-100pi, 100pi] (no bound outside: 2^-14.7 is used)
//   tanh.approx.f32   2^-11 relative
//   div.approx.f32    2 ulp for |b| in [2^-126, 2^126]; for 2^126 < |b| <
//                     2^128, NaN if a is infinite, else a signed zero
//   div.full.f32      2 ulp, full range
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_APPROX_H
#define KPOOL_TEST_LIB_CUDAEMU_APPROX_H

#include <cstdint>

namespace kpool::emu::approx {

enum class Op : uint8_t {
  Ex2,
  Lg2,
  Rcp,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Div,
  DivFull
};

struct Config {
  bool adversarial = false;
  uint64_t seed = 0;
};

/// One-input instructions (Ex2 ... Tanh); a and the result are f32 bits.
uint32_t unary(Op op, uint32_t a, bool ftz, const Config &config);
/// div.approx (Div) and div.full (DivFull).
uint32_t divide(Op op, uint32_t a, uint32_t b, bool ftz, const Config &config);

} // namespace kpool::emu::approx

#endif // KPOOL_TEST_LIB_CUDAEMU_APPROX_H
