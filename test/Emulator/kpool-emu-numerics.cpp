//===- kpool-emu-numerics.cpp - conversions against the reference -------===//
//
// The FP8 conversion kpool's cache kernels use, cvt.rn.satfinite.e4m3x2.f32,
// against the project's independent software encoder
// (reference::e4m3fnEncode, which searches the code table):
//  - a PTX kernel on the executor over every f32 exponent boundary (each
//    biased exponent with the smallest, a middle and the largest mantissa,
//    both signs, infinities and NaNs) and every E4M3 code's value, its
//    midpoints with the next code and the f32 values next to those
//    midpoints; both halves of every result, so the operand order (a in the
//    upper byte) is checked too;
//  - 10 million random inputs through the executor's conversion routine
//    directly (half random bit patterns, half values in E4M3's range),
//    against the reference encoder's values (through a threshold table the
//    reference itself defines, checked against direct calls on the first
//    500000).
// The f32 arithmetic in every rounding mode against the host FPU (run under
// fesetround). And the bf16 and f16 roundings (cvt.rn.bf16.f32, cvt.rn.f16.f32)
// against the reference's converters on the same 10 million inputs (NaNs
// compared as NaNs: the reference keeps payloads, the ISA gives an unspecified
// NaN).
//
// Prints a line per check and `N passed, M failed`; exits 1 on failure.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "PtxNumerics.h"
#include "Reference/Float.h"
#include "Reference/PoolCache.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace kpool;
using namespace kpool::emu;

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed) += 1;
}

const char *kKernel = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry e4m3(.param .u64 in, .param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b16 %rs<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.u32 %r5, %r3, %r4, %r2;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd3, %r5, 8;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.v2.f32 {%r6, %r7}, [%rd4];
  cvt.rn.satfinite.e4m3x2.f32 %rs1, %r6, %r7;
  mul.wide.u32 %rd5, %r5, 2;
  add.s64 %rd6, %rd2, %rd5;
  st.global.b16 [%rd6], %rs1;
DONE:
  ret;
}
)";

struct Map final : MemoryMap {
  std::vector<Allocation> a;
  const Allocation *find(uint64_t address, uint64_t bytes) const override {
    for (const Allocation &x : a)
      if (address >= x.base && address + bytes <= x.base + x.bytes)
        return &x;
    return nullptr;
  }
};

float f32(uint32_t bits) { return reference::f32FromBits(bits); }

/// Every f32 exponent boundary and every E4M3 code's value and midpoints.
std::vector<uint32_t> boundaryInputs() {
  std::vector<uint32_t> v;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t m : {0u, 1u, 0x400000u, 0x7fffffu})
        v.push_back(sign | (e << 23) | m);
  v.push_back(0x7fc00000u); // quiet NaN
  v.push_back(0xffc00000u);
  for (int code = 0; code < 0x7f; ++code) {
    float lo = reference::e4m3fnDecode(uint8_t(code));
    float hi = code < 0x7e ? reference::e4m3fnDecode(uint8_t(code + 1))
                           : 464.0f; // past 448: the saturation threshold
    float mid = float((double(lo) + double(hi)) / 2); // exact in f32
    for (float x : {lo, mid})
      for (float y :
           {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)})
        for (float s : {1.0f, -1.0f})
          v.push_back(reference::f32Bits(s * y));
  }
  return v;
}

void testKernel() {
  std::vector<uint32_t> inputs = boundaryInputs();
  // Pairs (a, b): every input as a with a neighbour as b, and as b.
  size_t n = inputs.size();
  std::vector<uint32_t> pairs(2 * n);
  for (size_t i = 0; i < n; ++i) {
    pairs[2 * i] = inputs[i];
    pairs[2 * i + 1] = inputs[(i * 7 + 3) % n];
  }
  std::vector<uint16_t> out(n, 0xdead);
  Map map;
  map.a.push_back({reinterpret_cast<uint64_t>(pairs.data()), pairs.size() * 4});
  map.a.push_back({reinterpret_cast<uint64_t>(out.data()), out.size() * 2});
  std::string error;
  auto module = loadModule(kKernel, error);
  if (!module) {
    check(false, "the e4m3 kernel parses: " + error);
    return;
  }
  uint64_t in = reinterpret_cast<uint64_t>(pairs.data());
  uint64_t o = reinterpret_cast<uint64_t>(out.data());
  uint32_t count = uint32_t(n);
  void *params[] = {&in, &o, &count};
  uint32_t block = 128, grid = uint32_t((n + block - 1) / block);
  LaunchResult r = launch(*module->function("e4m3"), Dim3{grid, 1, 1},
                          Dim3{block, 1, 1}, 0, params, map, Options());
  check(r.completed && r.findings.empty(),
        "the e4m3 kernel runs without findings");
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint16_t want = uint16_t(reference::e4m3fnEncode(f32(pairs[2 * i])) << 8 |
                             reference::e4m3fnEncode(f32(pairs[2 * i + 1])));
    if (out[i] != want && bad++ < 5)
      std::printf("  a = 0x%08x, b = 0x%08x: emulator 0x%04x, reference "
                  "0x%04x\n",
                  pairs[2 * i], pairs[2 * i + 1], out[i], want);
  }
  check(bad == 0, "cvt.rn.satfinite.e4m3x2.f32 on the executor equals the "
                  "reference encoder on " +
                      std::to_string(n) +
                      " boundary inputs (every f32 exponent, every E4M3 "
                      "code, midpoint and neighbour), both bytes");
}

/// The reference encoder as a table: for non-NaN inputs it is a
/// non-decreasing function of |x| (the nearest of increasing code values),
/// so thresholds[c], the smallest magnitude (as f32 bits) it maps to a code
/// >= c, found by bisection with the reference encoder itself, give its
/// value by a search. Checked against direct calls below.
struct ReferenceTable {
  std::vector<uint32_t> thresholds;
  ReferenceTable() {
    thresholds.push_back(0);
    for (int c = 1; c <= 0x7e; ++c) {
      uint32_t lo = thresholds.back(), hi = 0x7f800000u;
      while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (reference::e4m3fnEncode(f32(mid)) >= c)
          hi = mid;
        else
          lo = mid + 1;
      }
      thresholds.push_back(lo);
    }
  }
  uint8_t code(uint32_t bits) const {
    uint32_t mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u)
      return reference::e4m3fnEncode(f32(bits));
    size_t c =
        size_t(std::upper_bound(thresholds.begin(), thresholds.end(), mag) -
               thresholds.begin()) -
        1;
    return uint8_t(c | ((bits >> 24) & 0x80u));
  }
};

void testRandom() {
  constexpr size_t kCount = 10000000, kDirect = 500000;
  ReferenceTable table;
  std::mt19937_64 rng(20260101);
  size_t badE4m3 = 0, badBf16 = 0, badF16 = 0, badTable = 0;
  for (size_t i = 0; i < kCount; ++i) {
    uint64_t r = rng();
    uint32_t bits;
    if (i & 1) {
      bits = uint32_t(r);
    } else {
      // Exponents around E4M3's range (2^-12 .. 2^9), random mantissa.
      uint32_t e = 115 + uint32_t((r >> 32) % 22);
      bits = (uint32_t(r) & 0x807fffffu) | (e << 23);
    }
    float x = f32(bits);
    uint8_t got = numerics::f32ToE4M3(bits, false);
    uint8_t want = table.code(bits);
    if (i < kDirect && want != reference::e4m3fnEncode(x) && badTable++ < 5)
      std::printf("  table(0x%08x) = 0x%02x, reference 0x%02x\n", bits, want,
                  reference::e4m3fnEncode(x));
    if (got != want && badE4m3++ < 5)
      std::printf("  e4m3(0x%08x): emulator 0x%02x, reference 0x%02x\n", bits,
                  got, want);
    uint16_t b = numerics::f32ToBF16(bits, numerics::Mode::RN, false, false);
    uint16_t bw = reference::f32ToBf16(x);
    bool bNaN = (b & 0x7fff) > 0x7f80, bwNaN = (bw & 0x7fff) > 0x7f80;
    if ((bNaN != bwNaN || (!bNaN && b != bw)) && badBf16++ < 5)
      std::printf("  bf16(0x%08x): emulator 0x%04x, reference 0x%04x\n", bits,
                  b, bw);
    uint16_t h = numerics::f32ToF16(bits, numerics::Mode::RN, false, false);
    uint16_t hw = reference::f32ToF16(x);
    bool hNaN = (h & 0x7fff) > 0x7c00, hwNaN = (hw & 0x7fff) > 0x7c00;
    if ((hNaN != hwNaN || (!hNaN && h != hw)) && badF16++ < 5)
      std::printf("  f16(0x%08x): emulator 0x%04x, reference 0x%04x\n", bits, h,
                  hw);
  }
  check(badTable == 0, "the reference encoder's threshold table equals "
                       "direct calls on " +
                           std::to_string(kDirect) + " random inputs");
  check(badE4m3 == 0, "e4m3: 10000000 random inputs equal the reference "
                      "encoder (" +
                          std::to_string(badE4m3) + " differ)");
  check(badBf16 == 0, "bf16 (rn): 10000000 random inputs equal the "
                      "reference (" +
                          std::to_string(badBf16) + " differ)");
  check(badF16 == 0, "f16 (rn): 10000000 random inputs equal the "
                     "reference (" +
                         std::to_string(badF16) + " differ)");
}

/// add/sub/mul/fma/div/sqrt in the four IEEE rounding modes and with .ftz
/// and .sat against the host FPU under fesetround (an independent
/// mechanism: the emulator never changes the rounding mode).
void testArithmetic() {
  constexpr int kCount = 300000;
  std::mt19937_64 rng(99);
  static const int hostModes[] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD,
                                  FE_UPWARD};
  static const numerics::Mode modes[] = {numerics::Mode::RN, numerics::Mode::RZ,
                                         numerics::Mode::RM,
                                         numerics::Mode::RP};
  auto randomF32 = [&](uint64_t r) {
    // Mostly nearby exponents (so that sums round and cancel), some
    // anywhere, some subnormal.
    uint32_t bits = uint32_t(r);
    switch ((r >> 32) & 7) {
    case 0:
      return bits;
    case 1:
      return bits & 0x807fffffu; // subnormal or zero
    default:
      return (bits & 0x807fffffu) | uint32_t(120 + ((r >> 40) % 16)) << 23;
    }
  };
  size_t bad = 0;
  auto flushed = [](float x, bool ftz) {
    return ftz ? f32(numerics::flush32(reference::f32Bits(x))) : x;
  };
  for (int m = 0; m < 4; ++m) {
    for (int i = 0; i < kCount; ++i) {
      uint32_t a = randomF32(rng()), b = randomF32(rng()), c = randomF32(rng());
      bool ftz = (i & 3) == 0, sat = (i & 7) == 1;
      volatile float x = flushed(f32(a), ftz), y = flushed(f32(b), ftz),
                     z = flushed(f32(c), ftz);
      std::fesetround(hostModes[m]);
      float sum = x + y, product = x * y, fused = std::fma(x, y, z),
            quotient = x / y, root = std::sqrt(std::fabs(x));
      std::fesetround(FE_TONEAREST);
      auto expect = [&](float r, bool withSat) {
        uint32_t u = reference::f32Bits(r);
        if ((u & 0x7fffffffu) > 0x7f800000u)
          u = numerics::kCanonicalNaN32;
        if (ftz)
          u = numerics::flush32(u);
        if (withSat && sat)
          u = numerics::saturateF32(u);
        return u;
      };
      uint32_t got[5] = {numerics::addF32(a, b, modes[m], ftz, sat),
                         numerics::mulF32(a, b, modes[m], ftz, sat),
                         numerics::fmaF32(a, b, c, modes[m], ftz, sat),
                         numerics::divF32(a, b, modes[m], ftz),
                         numerics::sqrtF32(a & 0x7fffffffu, modes[m], ftz)};
      uint32_t want[5] = {expect(sum, true), expect(product, true),
                          expect(fused, true), expect(quotient, false),
                          expect(root, false)};
      for (int k = 0; k < 5; ++k)
        if (got[k] != want[k] && bad++ < 5)
          std::printf("  op %d mode %d ftz %d sat %d: a 0x%08x b 0x%08x c "
                      "0x%08x: emulator 0x%08x, host 0x%08x\n",
                      k, m, ftz, sat, a, b, c, got[k], want[k]);
    }
  }
  // cvt.{rn,rz,rm,rp}.f32.s64 / .s32 against the host's conversion.
  size_t badCvt = 0;
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < kCount; ++i) {
      uint64_t r = rng();
      volatile int64_t v = (i & 1) ? int64_t(r) : int64_t(int32_t(r));
      std::fesetround(hostModes[m]);
      float host = float(v);
      std::fesetround(FE_TONEAREST);
      uint32_t got = numerics::intToF32(uint64_t(v), true, modes[m]);
      if (got != reference::f32Bits(host) && badCvt++ < 5)
        std::printf("  cvt mode %d of %lld: emulator 0x%08x, host 0x%08x\n", m,
                    (long long)v, got, reference::f32Bits(host));
    }
  check(badCvt == 0, "cvt.f32.s64/s32 in rn/rz/rm/rp equal the host's "
                     "conversion on " +
                         std::to_string(4 * kCount) + " random integers");
  check(bad == 0, "add/mul/fma/div/sqrt.f32 in rn/rz/rm/rp with .ftz and "
                  ".sat equal the host FPU on " +
                      std::to_string(4 * kCount) + " random operand triples (" +
                      std::to_string(bad) + " differ)");
}

} // namespace

int main() {
  testArithmetic();
  testKernel();
  testRandom();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
