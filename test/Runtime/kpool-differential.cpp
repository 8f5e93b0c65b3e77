//===- kpool-differential.cpp - the runtime kernels vs the reference ------===//
//
// Runs the JIT-compiled kpool kernels (KPoolRuntime) and the plain reference
// (test/lib/Reference) on the same seeded inputs and compares them:
//  - pool_offsets, seed_tail (the ring) and closed_pool bit for bit, pooled
//    keys within a tolerance of T (the kernels' exp is a polynomial, the
//    reference's std::exp);
//  - the spec's bit-identity properties on the kernels alone, bit for bit:
//    a serving-engine loop (ring_close, pool_offsets, compress, seed_tail per
//    call) under many chunkings must produce every pool exactly once and
//    bit-identical to a one-shot compress of the whole sequence;
//  - strided operands give the dense results bit for bit;
//  - bad metadata under Validation::Trust writes nothing outside the
//    operands or the request's own rows and slot (every operand sits between
//    canaries), and under Validation::Check is rejected with a message that
//    names the request and the field, leaving the outputs untouched.
//
// Prints one line per case and `N passed, M failed`; exits 1 on failure.
// Usage: kpool-differential [-v] [-m] [-x substring]... [substring...]
//   substring: run only cases whose name contains one of them;
//   -x: skip cases whose name contains it; -v: timings, notes, histograms;
//   -m: measure only (no pooled tolerance).
//
//===----------------------------------------------------------------------===//

#include "Reference/Float.h"
#include "Reference/Reference.h"
#include "Reference/VerifySchedule.h"
#include "Support/ArgsByName.h"
#include "Support/Differential.h"
#include "kpool/Runtime/Jit.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace kpool;
namespace ref = kpool::reference;
using test::Buffer;
using test::Layout;
using test::sentinel;

namespace {

//===----------------------------------------------------------------------===//
// Deterministic random numbers (splitmix64; no std distributions, whose
// algorithms are implementation-defined).
//===----------------------------------------------------------------------===//

/// The generator of test/lib/Reference/VerifySchedule.h, seeded apart.
using Rng = ref::TestRng;

//===----------------------------------------------------------------------===//
// Configurations.
//===----------------------------------------------------------------------===//

using test::Config;

/// A value of T as raw bits, drawn uniformly from [lo, hi) and rounded.
uint32_t randomT(Rng &rng, ElementType type, double lo, double hi) {
  return ref::roundToBits(type, float(rng.uniform(lo, hi)));
}

/// Distance in units in the last place of T between two non-NaN values.
int64_t ulpDistance(ElementType type, uint32_t a, uint32_t b) {
  auto ordered = [&](uint32_t x) -> int64_t {
    if (type == KPOOL_F32)
      return (x & 0x80000000u) ? -int64_t(x & 0x7fffffffu) : int64_t(x);
    x &= 0xffffu;
    return (x & 0x8000u) ? -int64_t(x & 0x7fffu) : int64_t(x);
  };
  int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

bool isNaNBits(ElementType type, uint32_t x) {
  return std::isnan(ref::fromBits(type, x));
}

//===----------------------------------------------------------------------===//
// Results.
//===----------------------------------------------------------------------===//

/// Failure messages of one case (the first few are printed).
bool gVerbose = false;

struct Check {
  std::vector<std::string> failures;
  std::vector<std::string> notes; // printed with -v
  void note(const std::string &msg) { notes.push_back(msg); }
  void fail(const std::string &msg) { failures.push_back(msg); }
  bool expect(bool cond, const std::string &msg) {
    if (!cond)
      fail(msg);
    return cond;
  }
  bool ok() const { return failures.empty(); }
};

/// How pooled keys are compared with the reference. The kernels evaluate exp
/// with a polynomial, the reference with std::exp, so the f32 weights may
/// differ by an ulp or two. A pooled value passes when
///   ulp(kernel, reference) <= ulp[T]                          (plainly close)
/// or
///   |kernel - reference| <= ulp_T(reference) + scaleUlps * 2^-24 * S,
/// where S = (sum_m e_m |k_m|) / Z is the magnitude of the convex
/// combination (the reference's pool of |k|, computed alongside). Weight
/// errors of a few f32 ulps move the result by a few 2^-24 * S; when members
/// of opposite sign cancel (|A| << S) that is many ulps of the result, and a
/// bound in ulps of T alone would have to be huge for f32. Gross errors (a
/// wrong member, a wrong ape row, a missing max subtraction with large gates,
/// a rounding in the middle) are far outside both bounds.
struct Tolerance {
  int64_t ulp[3] = {1, 1, 2}; // bf16, f16, f32
  double scaleUlps = 8;
  // What was observed (only values the reference wrote, once each).
  int64_t maxUlp[3] = {0, 0, 0};
  double maxScaled[3] = {0, 0, 0}; // max |diff| / (2^-24 * S) beyond ulp[T]
  int64_t compared[3] = {0, 0, 0};
  int64_t exact[3] = {0, 0, 0};
  std::map<int64_t, int64_t> histogram[3];
};
Tolerance tolerance;

/// Pooled values against the exact pooling function (evaluated in double
/// from the f32 z = f32(g) + ape, as the spec defines z), in ulps of T at
/// the magnitude S = sum e_m |k_m| / Z. Correct rounding reaches 0.5 for
/// bf16 and f16; the kernels' f32 arithmetic may add at most 0.01 (the
/// contract allows 1 ulp). f32: the contract's 4 + 6 max|z| ulps.
struct ExactStats {
  double bound16 = 0.51;
  double maxUlp[3] = {0, 0, 0};        // max error in ulps of S
  double maxShare[3] = {0, 0, 0};      // f32: max error / (4 + 6 max|z|)
  int64_t compared[3] = {0, 0, 0};
};
ExactStats exactStats;

/// The gap from |x| (x given as bits of T) to the next larger magnitude of
/// T: NaN when |x| is infinite, so that an infinite reference never admits
/// a finite result. (reference::ulpOf is the spacing of T at a double.)
double gapAbove(ElementType type, uint32_t bits) {
  uint32_t mag = type == KPOOL_F32 ? bits & 0x7fffffffu : bits & 0x7fffu;
  return double(ref::fromBits(type, mag + 1)) - double(ref::fromBits(type, mag));
}

/// How the pooled elements of a buffer are compared.
struct PooledCompare {
  ElementType type;
  const Buffer *scale = nullptr; // S per element (reference layout)
  bool exact = false;            // bit for bit
  bool record = false;           // count in the statistics
};

/// Compares two buffers of one operand, storage element by storage element:
/// the view's elements of a pooled buffer within the tolerance, everything
/// else (the canaries, the gaps of a strided view, every integer operand, the
/// ring, NaN canaries inside a pooled view that nothing wrote) bit for bit.
void compareBuffer(Check &c, const std::string &what, const Buffer &got,
                   const Buffer &want, std::optional<PooledCompare> pooled) {
  if (got.bytes.size() != want.bytes.size()) {
    c.fail(what + ": storage sizes differ");
    return;
  }
  int reported = 0;
  for (int64_t e = 0; e < got.storageElements(); ++e) {
    uint32_t g = got.raw(e), w = want.raw(e);
    bool same = g == w;
    int64_t ulp = 0;
    if (pooled && !pooled->exact && got.inView[e] &&
        !isNaNBits(pooled->type, g) && !isNaNBits(pooled->type, w)) {
      ElementType type = pooled->type;
      int t = int(type);
      ulp = ulpDistance(type, g, w);
      same = ulp <= tolerance.ulp[t];
      double scaled = 0;
      if (!same && pooled->scale) {
        double diff = std::fabs(double(ref::fromBits(type, g)) -
                                double(ref::fromBits(type, w)));
        double S = std::fabs(double(ref::fromBits(type, pooled->scale->raw(e))));
        scaled = std::max(0.0, diff - gapAbove(type, w)) / (0x1.0p-24 * S);
        same = diff <= gapAbove(type, w) + tolerance.scaleUlps * 0x1.0p-24 * S;
      }
      if (pooled->record) {
        tolerance.maxUlp[t] = std::max(tolerance.maxUlp[t], ulp);
        if (ulp > tolerance.ulp[t])
          tolerance.maxScaled[t] = std::max(tolerance.maxScaled[t], scaled);
        tolerance.compared[t]++;
        tolerance.exact[t] += ulp == 0;
        tolerance.histogram[t][ulp]++;
      }
    }
    if (!same && reported++ < 4) {
      std::ostringstream os;
      os << what << ": storage element " << e - got.offset
         << (got.inView[e] ? "" : " (outside the view)") << ": kernel 0x"
         << std::hex << g << ", reference 0x" << w << std::dec;
      if (pooled && !isNaNBits(pooled->type, g) && !isNaNBits(pooled->type, w))
        os << " (" << ref::fromBits(pooled->type, g) << " vs "
           << ref::fromBits(pooled->type, w) << ", "
           << ulpDistance(pooled->type, g, w) << " ulp)";
      c.fail(os.str());
    }
  }
  if (reported > 4)
    c.fail(what + ": " + std::to_string(reported - 4) + " more mismatches");
}

void compareBits(Check &c, const std::string &what, const Buffer &a,
                 const Buffer &b) {
  compareBuffer(c, what, a, b, std::nullopt);
}

//===----------------------------------------------------------------------===//
// The operands of one call.
//===----------------------------------------------------------------------===//

struct Layouts {
  Layout k, gate, ape, tail, rcPooled, closed, pooled, iro, cache, slots, pro;
};

/// Metadata and data of one call.
struct CallSpec {
  std::vector<uint32_t> iro, cache, slots;
  int64_t rows = 0; // rows of k and gate
  std::vector<uint32_t> k, gate; // rows * D bits
  int32_t numRequests = 0;
  int64_t batch() const { return int64_t(cache.size()); }
};

struct Ops {
  Buffer k, gate, ape, iro, cache, slots, pro, tail, rcPooled, closed, pooled;
  Layout pooledLayout; // compress's pooled is allocated once pro is known
  int32_t numRequests = 0;
  // Reference side only: S of every pooled value (see Tolerance).
  std::optional<Buffer> rcScale, pooledScale;
};

Ops makeOps(const Config &cfg, const CallSpec &spec, const Buffer &ape,
            const Buffer &tail, const Layouts &l) {
  Ops o;
  int64_t B = spec.batch(), es = cfg.esize();
  o.k = Buffer::make(es, {spec.rows, cfg.D}, l.k);
  o.k.fill(spec.k);
  o.gate = Buffer::make(es, {spec.rows, cfg.D}, l.gate);
  o.gate.fill(spec.gate);
  o.ape = ape;
  o.tail = tail;
  o.iro = Buffer::make(4, {int64_t(spec.iro.size())}, l.iro);
  o.iro.fill(spec.iro);
  o.cache = Buffer::make(4, {B}, l.cache);
  o.cache.fill(spec.cache);
  o.slots = Buffer::make(4, {int64_t(spec.slots.size())}, l.slots);
  o.slots.fill(spec.slots);
  o.pro = Buffer::make(4, {int64_t(spec.iro.size())}, l.pro);
  o.rcPooled = Buffer::make(es, {B, cfg.D}, l.rcPooled);
  o.closed = Buffer::make(4, {B}, l.closed);
  o.pooled = Buffer::make(es, {0, cfg.D}, l.pooled);
  o.pooledLayout = l.pooled;
  o.numRequests = spec.numRequests;
  return o;
}

/// Which pooled output an op just wrote (its values enter the statistics).
enum class Fresh { None, RingClose, Compress };

/// Compares every operand of the kernel run against the reference run.
void compareOps(Check &c, const std::string &tag, const Config &cfg,
                const Ops &got, const Ops &want, Fresh fresh = Fresh::None,
                bool exact = false) {
  compareBits(c, tag + " k", got.k, want.k);
  compareBits(c, tag + " gate", got.gate, want.gate);
  compareBits(c, tag + " ape", got.ape, want.ape);
  compareBits(c, tag + " input_row_offsets", got.iro, want.iro);
  compareBits(c, tag + " cache_lengths", got.cache, want.cache);
  compareBits(c, tag + " slot_idx", got.slots, want.slots);
  compareBits(c, tag + " pool_row_offsets", got.pro, want.pro);
  compareBits(c, tag + " tail", got.tail, want.tail);
  compareBits(c, tag + " closed_pool", got.closed, want.closed);
  PooledCompare rc{cfg.type, want.rcScale ? &*want.rcScale : nullptr, exact,
                   fresh == Fresh::RingClose};
  compareBuffer(c, tag + " ring_close pooled", got.rcPooled, want.rcPooled,
                rc);
  PooledCompare cp{cfg.type, want.pooledScale ? &*want.pooledScale : nullptr,
                   exact, fresh == Fresh::Compress};
  compareBuffer(c, tag + " compress pooled", got.pooled, want.pooled, cp);
}

/// A copy of `o` whose keys (rows of k, ring keys) are |k|: the reference
/// pools of these are S = sum e_m |k_m| / Z.
Ops absoluteKeys(const Ops &o) {
  Ops s = o;
  uint32_t sign = s.k.esize == 2 ? 0x8000u : 0x80000000u;
  s.k.forEach([&](const int64_t *, int64_t e) {
    s.k.setRaw(e, s.k.raw(e) & ~sign);
  });
  s.tail.forEach([&](const int64_t *idx, int64_t e) {
    if (idx[1] == 0)
      s.tail.setRaw(e, s.tail.raw(e) & ~sign);
  });
  return s;
}

//===----------------------------------------------------------------------===//
// Running the ops: kernels and reference.
//===----------------------------------------------------------------------===//

/// Kernel A's arguments from the call's operands, by their table names;
/// ring_close's `pooled` (the pools it closes) is the step's `closed`.
template <typename A> A args(Ops &o) {
  return test::argsByName<A>(
      {{"tail", o.tail.view()},
       {"k", o.k.view()},
       {"gate", o.gate.view()},
       {"ape", o.ape.view()},
       {"input_row_offsets", o.iro.view()},
       {"pool_row_offsets", o.pro.view()},
       {"cache_lengths", o.cache.view()},
       {"slot_idx", o.slots.view()},
       {"closed", o.rcPooled.view()},
       {"closed_pool", o.closed.view()},
       {"pooled", o.pooled.view()}},
      o.numRequests);
}

Status kRingClose(const KernelSet &ks, Ops &o, Validation v) {
  return ks.ringClose(
      test::with(args<RingCloseArgs>(o), {{"pooled", o.rcPooled.view()}}), v);
}
Status kPoolOffsets(const KernelSet &ks, Ops &o, Validation v) {
  return ks.poolOffsets(args<PoolOffsetsArgs>(o), v);
}
Status kCompress(const KernelSet &ks, Ops &o, Validation v) {
  return ks.compress(args<CompressArgs>(o), v);
}
Status kSeedTail(const KernelSet &ks, Ops &o, Validation v) {
  return ks.seedTail(args<SeedTailArgs>(o), v);
}
Status kStep(const KernelSet &ks, Ops &o, Validation v) {
  return ks.step(args<StepArgs>(o), v);
}

void rRingClose(const Config &cfg, Ops &o) {
  ref::ringClose(cfg.geometry(), o.rcPooled.view(), o.closed.view(),
                 o.tail.view(), o.k.view(), o.gate.view(), o.ape.view(),
                 o.iro.view(), o.cache.view(), o.slots.view(), o.numRequests);
}
void rPoolOffsets(const Config &cfg, Ops &o) {
  ref::poolOffsets(cfg.geometry(), o.pro.view(), o.iro.view(), o.cache.view());
}
void rCompress(const Config &cfg, Ops &o) {
  ref::compress(cfg.geometry(), o.pooled.view(), o.k.view(), o.gate.view(),
                o.ape.view(), o.iro.view(), o.pro.view(), o.cache.view());
}
void rSeedTail(const Config &cfg, Ops &o) {
  ref::seedTail(cfg.geometry(), o.tail.view(), o.k.view(), o.gate.view(),
                o.iro.view(), o.cache.view(), o.slots.view(), o.numRequests);
}

bool expectOk(Check &c, const std::string &what, const Status &s) {
  return c.expect(s.ok(), what + " returned an error: " + s.message());
}

/// Calls whose fused kpool.step was compared with the four ops.
int64_t stepCompared = 0;

/// How a call's compress output and pool_row_offsets are chosen.
struct CallOptions {
  Validation validation = Validation::Check;
  /// Replaces pool_row_offsets (after pool_offsets ran) when set.
  std::optional<std::vector<uint32_t>> pro;
  /// Rows of compress's pooled; default pro[B] (0 when pro has no entry B)
  /// plus extraPooledRows (which nothing may write).
  std::optional<int64_t> pooledRows;
  int64_t extraPooledRows = 0;
  /// Pooled keys bit for bit against the reference (inputs whose weights
  /// are exactly 1, see exactWeightCall).
  bool exact = false;
};

/// One call the way a serving engine makes it: ring_close, pool_offsets,
/// compress, seed_tail, on the kernels (kOps) and on the reference (rOps),
/// comparing every operand after every op.
void runCall(Check &c, const std::string &tag, const Config &cfg,
             const KernelSet &ks, Ops &kOps, Ops &rOps,
             const CallOptions &opt = CallOptions()) {
  Validation v = opt.validation;
  bool exact = opt.exact;
  // The fused step runs on a copy of the call's operands afterwards.
  Ops fused = kOps;
  bool allOk = true;
  auto ok = [&](const std::string &what, const Status &s) {
    allOk &= s.ok();
    return expectOk(c, what, s);
  };
  // One op: the kernel, then the reference (first on absolute keys, for
  // the scale its pooled output is compared at, when it has one), then
  // every operand compared.
  auto stage = [&](const char *op, Status (*kernel)(const KernelSet &, Ops &,
                                                     Validation),
                   void (*reference)(const Config &, Ops &),
                   Buffer Ops::*pooled, std::optional<Buffer> Ops::*scale,
                   Fresh fresh) {
    ok(tag + " " + op, kernel(ks, kOps, v));
    if (scale) {
      Ops s = absoluteKeys(rOps);
      reference(cfg, s);
      rOps.*scale = s.*pooled;
    }
    reference(cfg, rOps);
    compareOps(c, tag + " after " + op + ":", cfg, kOps, rOps, fresh, exact);
  };
  stage("ring_close", kRingClose, rRingClose, &Ops::rcPooled, &Ops::rcScale,
        Fresh::RingClose);
  stage("pool_offsets", kPoolOffsets, rPoolOffsets, nullptr, nullptr,
        Fresh::None);
  if (opt.pro) {
    kOps.pro.fill(*opt.pro);
    rOps.pro.fill(*opt.pro);
  }

  int64_t B = kOps.cache.sizes[0];
  int64_t rows = opt.pooledRows ? *opt.pooledRows
                 : B < kOps.pro.sizes[0] ? int64_t(kOps.pro.at({B}))
                                         : 0;
  rows += opt.extraPooledRows;
  kOps.pooled = Buffer::make(cfg.esize(), {rows, cfg.D}, kOps.pooledLayout);
  rOps.pooled = kOps.pooled;
  stage("compress", kCompress, rCompress, &Ops::pooled, &Ops::pooledScale,
        Fresh::Compress);
  stage("seed_tail", kSeedTail, rSeedTail, nullptr, nullptr, Fresh::None);

  // kpool.step on the same operands writes what the four ops wrote, bit for
  // bit (every operand, canaries and gaps included), when they all
  // succeeded with validation and computed their own pool_row_offsets.
  if (allOk && v == Validation::Check && !opt.pro) {
    fused.pooled =
        Buffer::make(cfg.esize(), {rows, cfg.D}, kOps.pooledLayout);
    Status s = kStep(ks, fused, v);
    if (expectOk(c, tag + " step", s)) {
      compareOps(c, tag + " step vs the four ops:", cfg, fused, kOps,
                 Fresh::None, /*exact=*/true);
      ++stepCompared;
    }
  }
}

//===----------------------------------------------------------------------===//
// Kernel sets.
//===----------------------------------------------------------------------===//

std::shared_ptr<KernelSet> kernels(const Config &cfg, Check &c,
                                   bool openmp = false,
                                   int64_t vectorSize = -1) {
  KernelConfig kc;
  kc.elementType = cfg.type;
  kc.headDim = cfg.D;
  kc.kpool = cfg.K;
  kc.openmp = openmp;
  if (vectorSize >= 0)
    kc.vectorSize = vectorSize;
  Status s;
  kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  auto set = KernelSet::get(kc, s);
  if (!set)
    c.fail("KernelSet::get(" + cfg.name() + ") failed: " + s.message());
  return set;
}

//===----------------------------------------------------------------------===//
// Inputs.
//===----------------------------------------------------------------------===//

/// Keys in [-4, 4), gates in [-10, 10) (large, so the softmax discriminates).
void randomRows(Rng &rng, const Config &cfg, int64_t rows,
                std::vector<uint32_t> &k, std::vector<uint32_t> &gate) {
  for (int64_t i = 0; i < rows * cfg.D; ++i) {
    k.push_back(randomT(rng, cfg.type, -4, 4));
    gate.push_back(randomT(rng, cfg.type, -10, 10));
  }
}

/// A non-zero ape in [-3, 3).
Buffer makeApe(const Config &cfg, Rng &rng, const Layout &layout = Layout()) {
  Buffer ape = Buffer::make(4, {cfg.K, cfg.D}, layout);
  std::vector<uint32_t> v;
  for (int64_t i = 0; i < cfg.K * cfg.D; ++i)
    v.push_back(ref::f32Bits(float(rng.uniform(-3, 3))));
  ape.fill(v);
  return ape;
}

/// A ring whose every member holds random (finite) values.
/// A ring of `window` rows per slot (0: kpool).
Buffer makeTail(const Config &cfg, Rng &rng, int64_t slots,
                const Layout &layout = Layout(), int64_t window = 0) {
  Buffer tail = Buffer::make(cfg.esize(),
                             {slots, 2, window ? window : cfg.K, cfg.D}, layout);
  std::vector<uint32_t> v;
  for (int64_t i = 0; i < tail.numElements(); ++i)
    v.push_back(randomT(rng, cfg.type, -4, 4));
  tail.fill(v);
  return tail;
}

/// A ragged call of requests (tokens, cached, slot) with fresh random rows.
CallSpec makeCall(const Config &cfg, Rng &rng,
                  const std::vector<std::array<int64_t, 3>> &requests,
                  int32_t numRequests) {
  CallSpec s;
  s.iro.push_back(0);
  for (auto [n, c, slot] : requests) {
    s.rows += n;
    s.iro.push_back(uint32_t(s.rows));
    s.cache.push_back(uint32_t(c));
    s.slots.push_back(uint32_t(slot));
  }
  randomRows(rng, cfg, s.rows, s.k, s.gate);
  s.numRequests = numRequests;
  return s;
}

//===----------------------------------------------------------------------===//
// The serving-engine simulation (bit identity on the kernels).
//===----------------------------------------------------------------------===//

struct SimRequest {
  int64_t start = 0;   // absolute position of token 0 (a multiple of K)
  int64_t preseed = 0; // tokens put into the ring before the first call
  uint32_t slot = 0;
  std::vector<uint32_t> k, gate; // length * D
  int64_t length = 0;
};

struct Schedule {
  std::vector<std::vector<int64_t>> calls; // tokens per request, -1: absent
  bool reverseOdd = false;                 // reverse batch order on odd calls
  int64_t padRows = 0;                     // trailing batch padding rows
};

/// Pools a sequence of calls produced, by (request, pool id).
using PoolMap = std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>>;

void runSimulation(Check &c, const Config &cfg, const KernelSet &ks,
                   std::vector<SimRequest> &reqs, const Schedule &sched,
                   int64_t maxSlots, uint64_t seed) {
  Rng rng(seed);
  Buffer ape = makeApe(cfg, rng);
  Buffer ring = makeTail(cfg, rng, maxSlots);
  std::vector<int64_t> seen(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    SimRequest &q = reqs[r];
    for (int64_t m = 0; m < q.preseed; ++m)
      for (int64_t d = 0; d < cfg.D; ++d) {
        ring.set({q.slot, 0, m, d}, q.k[m * cfg.D + d]);
        ring.set({q.slot, 1, m, d}, q.gate[m * cfg.D + d]);
      }
    seen[r] = q.preseed;
  }
  Buffer refRing = ring;

  PoolMap produced;
  auto record = [&](int64_t r, int64_t id, std::vector<uint32_t> bits,
                    const std::string &who) {
    auto [it, inserted] = produced.emplace(std::make_pair(r, id), bits);
    c.expect(inserted, who + " produced pool " + std::to_string(id) +
                           " of request " + std::to_string(r) + " again");
  };

  for (size_t callNo = 0; callNo < sched.calls.size(); ++callNo) {
    const auto &counts = sched.calls[callNo];
    std::vector<int64_t> order;
    for (size_t r = 0; r < counts.size(); ++r)
      if (counts[r] >= 0)
        order.push_back(int64_t(r));
    if (sched.reverseOdd && callNo % 2 == 1)
      std::reverse(order.begin(), order.end());
    CallSpec spec;
    spec.iro.push_back(0);
    for (int64_t r : order) {
      SimRequest &q = reqs[r];
      int64_t n = counts[r];
      c.expect(seen[r] + n <= q.length, "schedule runs past the data");
      for (int64_t i = 0; i < n * cfg.D; ++i) {
        spec.k.push_back(q.k[seen[r] * cfg.D + i]);
        spec.gate.push_back(q.gate[seen[r] * cfg.D + i]);
      }
      spec.rows += n;
      spec.iro.push_back(uint32_t(spec.rows));
      spec.cache.push_back(uint32_t(q.start + seen[r]));
      spec.slots.push_back(q.slot);
    }
    spec.numRequests = int32_t(order.size());
    for (int64_t p = 0; p < sched.padRows; ++p) {
      // Padding: no tokens, a cached length with a pending pool, the slot of
      // a live request; num_requests excludes it.
      spec.iro.push_back(uint32_t(spec.rows));
      spec.cache.push_back(uint32_t(cfg.K > 1 ? 1 : 0));
      spec.slots.push_back(reqs[0].slot);
    }
    Ops kOps = makeOps(cfg, spec, ape, ring, Layouts());
    Ops rOps = kOps;
    rOps.tail = refRing;
    std::string tag = "call " + std::to_string(callNo);
    runCall(c, tag, cfg, ks, kOps, rOps);
    if (!c.ok())
      return;
    ring = kOps.tail;
    refRing = rOps.tail;

    // Collect the pools by id.
    std::vector<uint32_t> rows = kOps.pooled.dense();
    std::vector<uint32_t> rcRows = kOps.rcPooled.dense();
    for (size_t b = 0; b < order.size(); ++b) {
      int64_t r = order[b];
      int64_t cached = reqs[r].start + seen[r], n = counts[r];
      int32_t closed = int32_t(kOps.closed.at({int64_t(b)}));
      int64_t held = cached % cfg.K;
      bool shouldClose = held > 0 && n >= cfg.K - held;
      c.expect((closed >= 0) == shouldClose,
               tag + ": ring_close of request " + std::to_string(r) +
                   " returned " + std::to_string(closed));
      if (closed >= 0)
        record(r, closed,
               std::vector<uint32_t>(rcRows.begin() + b * cfg.D,
                                     rcRows.begin() + (b + 1) * cfg.D),
               tag + " ring_close");
      ref::PoolRange range = ref::poolRange(cfg.K, cached, n);
      int64_t lo = kOps.pro.at({int64_t(b)});
      for (int64_t j = 0; j < range.count; ++j)
        record(r, range.first + j,
               std::vector<uint32_t>(rows.begin() + (lo + j) * cfg.D,
                                     rows.begin() + (lo + j + 1) * cfg.D),
               tag + " compress");
      seen[r] += n;
    }
  }

  // The truth: one compress over each whole sequence.
  for (size_t r = 0; r < reqs.size(); ++r) {
    SimRequest &q = reqs[r];
    c.expect(seen[r] == q.length, "request " + std::to_string(r) +
                                      ": the schedule leaves tokens unused");
    CallSpec spec;
    spec.iro = {0, uint32_t(q.length)};
    spec.cache = {uint32_t(q.start)};
    spec.slots = {q.slot};
    spec.rows = q.length;
    spec.k = q.k;
    spec.gate = q.gate;
    spec.numRequests = 0; // ring untouched: only compress matters here
    Ops kOps = makeOps(cfg, spec, ape, ring, Layouts());
    Ops rOps = kOps;
    runCall(c, "one-shot compress of request " + std::to_string(r), cfg, ks,
            kOps, rOps);
    if (!c.ok())
      return;
    int64_t pools = q.length / cfg.K;
    c.expect(int64_t(kOps.pro.at({1})) == pools, "one-shot pool count");
    std::vector<uint32_t> rows = kOps.pooled.dense();
    for (int64_t j = 0; j < pools; ++j) {
      int64_t id = q.start / cfg.K + j;
      auto it = produced.find({int64_t(r), id});
      if (!c.expect(it != produced.end(),
                    "pool " + std::to_string(id) + " of request " +
                        std::to_string(r) + " was never produced"))
        continue;
      std::vector<uint32_t> truth(rows.begin() + j * cfg.D,
                                  rows.begin() + (j + 1) * cfg.D);
      if (it->second != truth) {
        int64_t d = 0;
        while (it->second[d] == truth[d])
          ++d;
        std::ostringstream os;
        os << "pool " << id << " of request " << r
           << " differs from the one-shot compress (first at channel " << d
           << ": 0x" << std::hex << it->second[d] << " vs 0x" << truth[d]
           << ")";
        c.fail(os.str());
      }
      produced.erase(it);
    }
  }
  for (auto &[key, bits] : produced)
    c.fail("pool " + std::to_string(key.second) + " of request " +
           std::to_string(key.first) + " was produced but is not complete");
}

SimRequest makeRequest(const Config &cfg, Rng &rng, int64_t length,
                       int64_t start, int64_t preseed, uint32_t slot) {
  SimRequest q;
  q.start = start;
  q.preseed = preseed;
  q.slot = slot;
  q.length = length;
  randomRows(rng, cfg, length, q.k, q.gate);
  return q;
}

//===----------------------------------------------------------------------===//
// The suite.
//===----------------------------------------------------------------------===//

struct Suite {
  std::vector<std::string> filters;
  bool verbose = false;
  int passed = 0, failed = 0;

  std::vector<std::string> excludes;

  bool selected(const std::string &name) const {
    for (const std::string &x : excludes)
      if (name.find(x) != std::string::npos)
        return false;
    if (filters.empty())
      return true;
    for (const std::string &f : filters)
      if (name.find(f) != std::string::npos)
        return true;
    return false;
  }

  void run(const std::string &name, const std::function<void(Check &)> &fn) {
    if (!selected(name))
      return;
    auto t0 = std::chrono::steady_clock::now();
    Check c;
    fn(c);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    if (c.ok()) {
      ++passed;
      std::printf("PASS: %s", name.c_str());
    } else {
      ++failed;
      std::printf("FAIL: %s", name.c_str());
    }
    if (verbose)
      std::printf(" (%.0f ms)", ms);
    std::printf("\n");
    if (verbose)
      for (const std::string &n : c.notes)
        std::printf("    note: %s\n", n.c_str());
    for (size_t i = 0; i < c.failures.size() && i < 12; ++i)
      std::printf("    %s\n", c.failures[i].c_str());
    if (c.failures.size() > 12)
      std::printf("    ... %zu more\n", c.failures.size() - 12);
    std::fflush(stdout);
  }
};

//===----------------------------------------------------------------------===//
// Cases: the float conversions themselves.
//===----------------------------------------------------------------------===//

void floatCases(Suite &suite) {
  suite.run("float: f16 and bf16 round trips", [](Check &c) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
      float f = ref::f16ToF32(uint16_t(h));
      uint16_t back = ref::f32ToF16(f);
      bool nan = std::isnan(f);
      c.expect(nan ? (back & 0x7fff) > 0x7c00 : back == h,
               "f16 round trip of " + std::to_string(h));
      float g = ref::bf16ToF32(uint16_t(h));
      uint16_t back2 = ref::f32ToBf16(g);
      c.expect(std::isnan(g) ? (back2 & 0x7fff) > 0x7f80 : back2 == h,
               "bf16 round trip of " + std::to_string(h));
      if (c.failures.size() > 8)
        return;
    }
  });
  suite.run("float: narrowing rounds to nearest even", [](Check &c) {
    // Ties and near-ties, subnormals, overflow, against exact expectations.
    struct Case {
      float in;
      uint16_t f16, bf16;
    };
    const Case cases[] = {
        {1.0f, 0x3c00, 0x3f80},
        {-2.5f, 0xc100, 0xc020},
        {1.0f + 0x1.0p-11f, 0x3c00, 0x3f80},         // f16 tie -> even (down)
        {1.0f + 0x1.8p-10f, 0x3c02, 0x3f80},         // f16 tie -> even (up)
        {1.0f + 0x1.0p-8f, 0x3c04, 0x3f80},          // bf16 tie -> even (down)
        {1.0f + 0x1.8p-7f, 0x3c0c, 0x3f82},          // bf16 tie -> even (up)
        {65504.0f, 0x7bff, 0x4780},
        {65519.0f, 0x7bff, 0x4780},
        {65520.0f, 0x7c00, 0x4780},                  // f16 overflow on a tie
        {0x1.0p-14f, 0x0400, 0x3880},                // smallest normal f16
        {0x1.0p-24f, 0x0001, 0x3380},                // smallest subnormal
        {0x1.0p-25f, 0x0000, 0x3300},                // tie to even: zero
        {0x1.8p-24f, 0x0002, 0x33c0},                // tie to even: 2
        {0x1.4p-24f, 0x0001, 0x33a0},                // below the tie
        {0x1.ffcp-15f, 0x0400, 0x3880},              // rounds up to normal
        {-0.0f, 0x8000, 0x8000},
        {INFINITY, 0x7c00, 0x7f80},
        {-INFINITY, 0xfc00, 0xff80},
        {0x1.fffffep127f, 0x7c00, 0x7f80},           // bf16 overflow
    };
    for (const Case &k : cases) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%a", double(k.in));
      uint16_t h = ref::f32ToF16(k.in), b = ref::f32ToBf16(k.in);
      c.expect(h == k.f16, std::string("f16(") + buf + ") = " +
                               std::to_string(h) + ", want " +
                               std::to_string(k.f16));
      c.expect(b == k.bf16, std::string("bf16(") + buf + ") = " +
                                std::to_string(b) + ", want " +
                                std::to_string(k.bf16));
    }
    c.expect(std::isnan(ref::f16ToF32(ref::f32ToF16(NAN))), "f16 NaN");
    c.expect(std::isnan(ref::bf16ToF32(ref::f32ToBf16(NAN))), "bf16 NaN");
#if defined(__FLT16_MAX__) && defined(__clang__)
    // Against the compiler's own conversion on many f32 bit patterns.
    Rng rng(7);
    for (int i = 0; i < 2000000 && c.failures.size() < 8; ++i) {
      uint32_t bits = uint32_t(rng.next());
      if (i < 1000000) // concentrate on the f16 range
        bits = (bits & 0x807fffffu) | ((0x65u + (bits >> 23) % 0x1eu) << 23);
      float f = ref::f32FromBits(bits);
      if (std::isnan(f))
        continue;
      _Float16 h = static_cast<_Float16>(f);
      uint16_t hb;
      std::memcpy(&hb, &h, 2);
      c.expect(ref::f32ToF16(f) == hb,
               "f16 of bits " + std::to_string(bits) + " differs from _Float16");
      c.expect(ref::f16ToF32(hb) == static_cast<float>(h),
               "f16 widening of " + std::to_string(hb));
    }
#endif
  });
}

//===----------------------------------------------------------------------===//
// Cases: the reference itself, against independent calculations.
//===----------------------------------------------------------------------===//

void referenceSelfCases(Suite &suite) {
  suite.run("reference: pooling function vs a double-precision softmax",
            [](Check &c) {
              Rng rng(9);
              double worst = 0;
              for (int i = 0; i < 200000; ++i) {
                int64_t K = 1 + int64_t(rng.next() % 6);
                float k[8], g[8], a[8];
                for (int64_t m = 0; m < K; ++m) {
                  k[m] = float(rng.uniform(-4, 4));
                  g[m] = float(rng.uniform(-30, 30));
                  a[m] = float(rng.uniform(-3, 3));
                }
                double z[8], zmax = -INFINITY, Z = 0, A = 0, S = 0;
                for (int64_t m = 0; m < K; ++m) {
                  // z is an f32 sum in the spec: start from its value.
                  z[m] = double(g[m] + a[m]);
                  zmax = std::max(zmax, z[m]);
                }
                for (int64_t m = 0; m < K; ++m) {
                  double e = std::exp(z[m] - zmax);
                  Z += e;
                  A += e * k[m];
                  S += e * std::fabs(k[m]);
                }
                double err = std::fabs(double(ref::poolChannel(K, k, g, a)) -
                                       A / Z) /
                             (0x1.0p-24 * S / Z);
                worst = std::max(worst, err);
              }
              // f32 rounding of z - M, exp, products, sums, division: a few
              // units of 2^-24 * S.
              c.expect(worst < 16, "reference pooling error " +
                                       std::to_string(worst) +
                                       " * 2^-24 * S");
              c.note("max error " + std::to_string(worst) + " * 2^-24 * S");
              // K = 1: the pool is the key itself, bit for bit.
              float k = 0.3f, g = 100.0f, a = -7.0f;
              c.expect(ref::poolChannel(1, &k, &g, &a) == k, "K = 1 pool");
              // Equal z: the mean, summed in member order.
              float ks[4] = {1.0f, 0x1.0p-24f, 0x1.0p-24f, 0.0f};
              float gs[4] = {2, 2, 2, 2}, as[4] = {0.5f, 0.5f, 0.5f, 0.5f};
              c.expect(ref::poolChannel(4, ks, gs, as) == 0.25f,
                       "member-order sum: (((1 + 2^-24) + 2^-24) + 0) / 4");
            });
  suite.run("reference: short metadata and guards, by hand", [](Check &c) {
    // K = 2, D = 1, f32. Ring of 3 slots.
    ref::Geometry g{KPOOL_F32, 1, 2};
    Buffer tail = Buffer::make(4, {3, 2, 2, 1});
    std::vector<uint32_t> ring;
    for (int i = 0; i < 12; ++i)
      ring.push_back(ref::f32Bits(float(100 + i)));
    tail.fill(ring);
    Buffer k = Buffer::make(4, {4, 1}), gate = Buffer::make(4, {4, 1});
    k.fill({ref::f32Bits(1), ref::f32Bits(2), ref::f32Bits(3),
            ref::f32Bits(4)});
    gate.fill(std::vector<uint32_t>(4, ref::f32Bits(0)));
    Buffer ape = Buffer::make(4, {2, 1});
    ape.fill(std::vector<uint32_t>(2, ref::f32Bits(0)));
    // Three requests by input_row_offsets, but only two cache lengths and
    // one slot: ring ops see one request, compress two.
    Buffer iro = Buffer::make(4, {4});
    iro.fill({0, 1, 3, 4});
    Buffer cache = Buffer::make(4, {2});
    cache.fill({1, 0});
    Buffer slots = Buffer::make(4, {1});
    slots.fill({2});
    Buffer pooled = Buffer::make(4, {3, 1}), closed = Buffer::make(4, {3});
    ref::ringClose(g, pooled.view(), closed.view(), tail.view(), k.view(),
                   gate.view(), ape.view(), iro.view(), cache.view(),
                   slots.view(), 7);
    // Request 0: held 1 of pool 0 in slot 2 (key 108, gate 110 -> weight
    // e^110 vs e^0 for the row: the ring member wins) .
    c.expect(int32_t(closed.at({0})) == 0, "request 0 closes pool 0");
    c.expect(ref::f32FromBits(pooled.at({0})) == 108.0f,
             "pool 0 = ring member (gate 110 dominates)");
    c.expect(int32_t(closed.at({1})) == -1 && pooled.at({1}) == 0,
             "row 1 (beyond len(slot_idx)) closes nothing");
    c.expect(int32_t(closed.at({2})) == -1 && pooled.at({2}) == 0,
             "row 2 (beyond B) closes nothing");
    Buffer pro = Buffer::make(4, {4});
    ref::poolOffsets(g, pro.view(), iro.view(), cache.view());
    // B = 2: request 0 (c=1, n=1) completes no own pool, request 1 (c=0,
    // n=2) one; pro[3] is beyond B and stays a canary.
    c.expect(pro.at({0}) == 0 && pro.at({1}) == 0 && pro.at({2}) == 1 &&
                 pro.at({3}) == sentinel(4),
             "pool_offsets over the two requests the metadata describes");
    Buffer out = Buffer::make(4, {1, 1});
    ref::compress(g, out.view(), k.view(), gate.view(), ape.view(), iro.view(),
                  pro.view(), cache.view());
    c.expect(ref::f32FromBits(out.at({0, 0})) == 2.5f,
             "request 1's pool: mean of 2 and 3");
    // Request 0 ends at a pool boundary: the ring (R = K = 2) keeps its last
    // R positions that this call brings, position 1 only (key 1, gate 0), in
    // ring row 1 mod 2 of slot 2; nothing else changes.
    Buffer expected = tail;
    expected.set({2, 0, 1, 0}, ref::f32Bits(1));
    expected.set({2, 1, 1, 0}, ref::f32Bits(0));
    ref::seedTail(g, tail.view(), k.view(), gate.view(), iro.view(),
                  cache.view(), slots.view(), 7);
    compareBits(c, "seed_tail: request 0 ends at a pool boundary", tail,
                expected);
  });
}

//===----------------------------------------------------------------------===//
// Cases per configuration.
//===----------------------------------------------------------------------===//

/// A small ragged call with the ring pre-filled: request 0 closes a ring
/// pool and compresses, request 1 holds a remainder and stays short,
/// request 2 starts at a pool boundary and leaves a tail, request 3 brings
/// no tokens. Slots 3, 0, 5, 2 of 6.
CallSpec raggedCall(const Config &cfg, Rng &rng) {
  int64_t K = cfg.K;
  return makeCall(cfg, rng,
                  {{3 * K + 2, 5 * K + (K > 1 ? 1 : 0), 3},
                   {K > 2 ? K - 2 : 0, 2 * K + (K > 2 ? 1 : 0), 0},
                   {2 * K + (K > 1 ? K - 1 : 0), 7 * K, 5},
                   {0, 4 * K + (K > 1 ? K - 1 : 0), 2}},
                  4);
}

void referenceCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " ";
  // Ring windows R = K (production), K + 1 and K + 5 (speculative decoding:
  // ring rows q mod R, pending members at (p*K + m) mod R, wrapping).
  for (int64_t window : {cfg.K, cfg.K + 1, cfg.K + 5})
    suite.run(p + "vs reference: ragged call, ring window " +
                  std::to_string(window),
              [&, window](Check &c) {
                auto ks = kernels(cfg, c);
                if (!ks)
                  return;
                for (uint64_t seed = 1; seed <= 6; ++seed) {
                  Rng rng(100 + seed);
                  Buffer ape = makeApe(cfg, rng);
                  Buffer tail = makeTail(cfg, rng, 6, Layout(), window);
                  CallSpec spec = raggedCall(cfg, rng);
                  Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
                  Ops rOps = kOps;
                  CallOptions opt;
                  // Rows past pro[B] stay put.
                  opt.extraPooledRows = seed % 2 ? 0 : 3;
                  runCall(c, "seed " + std::to_string(seed), cfg, *ks, kOps,
                          rOps, opt);
                }
              });
  suite.run(p + "vs reference: 64 requests, many empty, slots scattered",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              int64_t K = cfg.K;
              for (uint64_t seed = 1; seed <= 3; ++seed) {
                Rng rng(250 + seed);
                const int64_t slots = 80, B = 64;
                Buffer ape = makeApe(cfg, rng);
                Buffer tail = makeTail(cfg, rng, slots);
                std::vector<int64_t> perm(slots);
                for (int64_t i = 0; i < slots; ++i)
                  perm[i] = i;
                for (int64_t i = slots - 1; i > 0; --i)
                  std::swap(perm[i], perm[rng.next() % (i + 1)]);
                const int64_t sizes[] = {0, 0, 0, 1, 2, K - 1, K, K + 1,
                                         3 * K + 2};
                std::vector<std::array<int64_t, 3>> reqs;
                for (int64_t b = 0; b < B; ++b)
                  reqs.push_back({std::max<int64_t>(0, sizes[rng.next() % 9]),
                                  int64_t(rng.next() % 1000), perm[b]});
                CallSpec spec = makeCall(cfg, rng, reqs, int32_t(B));
                Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
                Ops rOps = kOps;
                runCall(c, "seed " + std::to_string(seed), cfg, *ks, kOps,
                        rOps);
              }
            });
  suite.run(p + "vs reference: large prefill", [&](Check &c) {
    auto ks = kernels(cfg, c);
    if (!ks)
      return;
    Rng rng(200);
    Buffer ape = makeApe(cfg, rng);
    Buffer tail = makeTail(cfg, rng, 8);
    // 8 requests, 1000-ish tokens, various cached lengths.
    std::vector<std::array<int64_t, 3>> reqs;
    for (int64_t b = 0; b < 8; ++b)
      reqs.push_back({97 + 31 * b, b * 5 + (b % 3), 7 - b});
    CallSpec spec = makeCall(cfg, rng, reqs, 8);
    Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
    Ops rOps = kOps;
    runCall(c, "prefill", cfg, *ks, kOps, rOps);
  });
}

/// raggedCall's metadata with inputs whose softmax weights are exactly 1:
/// every token and ring member carries the same gate row and every ape row is
/// the same, so z_m is the same for all members of a pool, e_m = exp(0) = 1,
/// and a pool is T((k_0 + k_1 + ... + k_{K-1}) / K) summed in member order.
/// Keys spread over many binades so that the order of the sum and the single
/// final rounding show in the bits.
void exactWeightInputs(const Config &cfg, Rng &rng, CallSpec &spec,
                       Buffer &ape, Buffer &tail) {
  std::vector<uint32_t> gateRow, apeRow;
  for (int64_t d = 0; d < cfg.D; ++d) {
    gateRow.push_back(randomT(rng, cfg.type, -10, 10));
    apeRow.push_back(ref::f32Bits(float(rng.uniform(-3, 3))));
  }
  int binades = cfg.type == KPOOL_F16 ? 7 : 11;
  auto key = [&] {
    double mant = rng.uniform(1, 2) * (rng.next() & 1 ? -1 : 1);
    int e = int(rng.next() % (2 * binades + 1)) - binades;
    return ref::roundToBits(cfg.type, float(std::ldexp(mant, e)));
  };
  for (int64_t i = 0; i < spec.rows * cfg.D; ++i) {
    spec.k[i] = key();
    spec.gate[i] = gateRow[i % cfg.D];
  }
  std::vector<uint32_t> apeValues;
  for (int64_t m = 0; m < cfg.K; ++m)
    apeValues.insert(apeValues.end(), apeRow.begin(), apeRow.end());
  ape.fill(apeValues);
  tail.forEach([&](const int64_t *idx, int64_t e) {
    tail.setRaw(e, idx[1] == 1 ? gateRow[idx[3]] : key());
  });
}

void numericsCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " ";
  suite.run(p + "vs reference: weights exactly 1, bit for bit (member-order "
                "sums, one rounding)",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              for (uint64_t seed = 1; seed <= 4; ++seed) {
                Rng rng(500 + seed);
                Buffer ape = makeApe(cfg, rng);
                Buffer tail = makeTail(cfg, rng, 6);
                CallSpec spec = raggedCall(cfg, rng);
                exactWeightInputs(cfg, rng, spec, ape, tail);
                Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
                Ops rOps = kOps;
                CallOptions opt;
                opt.exact = true;
                runCall(c, "seed " + std::to_string(seed), cfg, *ks, kOps,
                        rOps, opt);
              }
            });
  suite.run(p + "vs reference: gates up to +-200 (exp(z) alone overflows)",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              Rng rng(600);
              Buffer ape = makeApe(cfg, rng);
              Buffer tail = makeTail(cfg, rng, 6);
              CallSpec spec = raggedCall(cfg, rng);
              for (uint32_t &g : spec.gate)
                g = randomT(rng, cfg.type, -200, 200);
              tail.forEach([&](const int64_t *idx, int64_t e) {
                if (idx[1] == 1)
                  tail.setRaw(e, randomT(rng, cfg.type, -200, 200));
              });
              Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
              Ops rOps = kOps;
              runCall(c, "extreme gates", cfg, *ks, kOps, rOps);
            });
  suite.run(p + "compile variants agree bit for bit (vector 16, scalar, "
                "OpenMP)",
            [&](Check &c) {
              std::shared_ptr<KernelSet> sets[3] = {
                  kernels(cfg, c), kernels(cfg, c, false, 0),
                  kernels(cfg, c, true)};
              if (!sets[0] || !sets[1] || !sets[2])
                return;
              std::vector<std::vector<uint32_t>> outs[3];
              for (int v = 0; v < 3; ++v) {
                Rng rng(700);
                Buffer ape = makeApe(cfg, rng);
                Buffer tail = makeTail(cfg, rng, 8);
                std::vector<std::array<int64_t, 3>> reqs;
                for (int64_t b = 0; b < 8; ++b)
                  reqs.push_back({37 + 11 * b, b * 5 + (b % 3), 7 - b});
                CallSpec spec = makeCall(cfg, rng, reqs, 8);
                Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
                Ops rOps = kOps;
                runCall(c, "variant " + std::to_string(v), cfg, *sets[v], kOps,
                        rOps);
                outs[v] = {kOps.rcPooled.dense(), kOps.closed.dense(),
                           kOps.pro.dense(), kOps.pooled.dense(),
                           kOps.tail.dense()};
              }
              c.expect(outs[1] == outs[0],
                       "scalar kernels differ from the vectorized ones");
              c.expect(outs[2] == outs[0],
                       "OpenMP kernels differ from the sequential ones");
            });
}

/// The exact pooling function of one channel (double precision from the
/// f32 z = f32(g) + ape, as the spec defines z) under a backend's subnormal
/// rule (docs/semantics.md, "Subnormal weights"): a weight the rule flushes
/// (its f32 argument f32(z_m - M) below -126 ln 2) is 0, every other one
/// exact. `grid` is what rounding kept weights below 2^-126 to f32's
/// subnormal grid may cost, one unit of 2^-149 each: the sum of
/// 2^-149 |k_m| / Z over those members (0 when the rule flushes them).
struct ExactPool {
  double value = 0, S = 0, grid = 0, maxAbsZ = 0;
  bool subnormal = false; // a weight in [2^-150, 2^-126) (flushed or kept)
};
ExactPool exactPool(int64_t K, const double *z, const double *k,
                    ref::SubnormalWeights rule = ref::kCpuSubnormalWeights) {
  ExactPool r;
  double maxZ = -INFINITY;
  for (int64_t m = 0; m < K; ++m) {
    maxZ = std::max(maxZ, z[m]);
    r.maxAbsZ = std::max(r.maxAbsZ, std::fabs(z[m]));
  }
  double Z = 0, A = 0, S = 0, grid = 0;
  for (int64_t m = 0; m < K; ++m) {
    double e = std::exp(z[m] - maxZ);
    r.subnormal |= e >= 0x1.0p-150 && e < 0x1.0p-126;
    if (ref::flushesWeight(rule, float(z[m]) - float(maxZ)))
      e = 0;
    Z += e;
    A += e * k[m];
    S += e * std::fabs(k[m]);
    if (e > 0 && e < 0x1.0p-126)
      grid += 0x1.0p-149 * std::fabs(k[m]);
  }
  r.value = A / Z;
  r.S = S / Z;
  r.grid = grid / Z;
  return r;
}

/// compress on one request of many pools against the exact value of the
/// pooling function (see ExactStats): moderate gates, wide gates (weights
/// down to subnormal and zero) and gates up to +-200.
void exactCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " ";
  suite.run(p + "vs exact (double precision): within " +
                (cfg.type == KPOOL_F32 ? std::string("4 + 6 max|z| ulps")
                                       : std::string("0.51 ulp")) +
                " of the magnitude",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              const int t = int(cfg.type);
              const int64_t K = cfg.K, D = cfg.D;
              const int64_t pools = std::max<int64_t>(64, 8192 / D);
              const double spreads[] = {3, 30, 200};
              int reported = 0;
              for (int round = 0; round < 3; ++round) {
                Rng rng(900 + round);
                Buffer ape = makeApe(cfg, rng);
                Buffer tail = makeTail(cfg, rng, 1);
                CallSpec spec = makeCall(cfg, rng, {{pools * K, 0, 0}}, 1);
                for (uint32_t &g : spec.gate)
                  g = randomT(rng, cfg.type, -spreads[round], spreads[round]);
                Ops o = makeOps(cfg, spec, ape, tail, Layouts());
                if (!c.expect(kPoolOffsets(*ks, o, Validation::Check).ok(),
                              "pool_offsets failed"))
                  return;
                o.pooled = Buffer::make(cfg.esize(), {pools, D});
                if (!c.expect(kCompress(*ks, o, Validation::Check).ok(),
                              "compress failed"))
                  return;
                for (int64_t j = 0; j < pools; ++j)
                  for (int64_t d = 0; d < D; ++d) {
                    double z[64], k[64];
                    for (int64_t m = 0; m < K; ++m) {
                      int64_t row = j * K + m;
                      float g = ref::fromBits(cfg.type, o.gate.at({row, d}));
                      float a = ref::fromBits(KPOOL_F32, o.ape.at({m, d}));
                      z[m] = double(g + a); // an f32 sum, as in the spec
                      k[m] = ref::fromBits(cfg.type, o.k.at({row, d}));
                    }
                    // Under the CPU kernels' rule for subnormal weights.
                    ExactPool x = exactPool(K, z, k);
                    double got = ref::fromBits(cfg.type, o.pooled.at({j, d}));
                    double err =
                        std::fabs(got - x.value) / ref::ulpOf(cfg.type, x.S);
                    double bound = cfg.type == KPOOL_F32 ? 4 + 6 * x.maxAbsZ
                                                         : exactStats.bound16;
                    exactStats.maxUlp[t] = std::max(exactStats.maxUlp[t], err);
                    exactStats.maxShare[t] =
                        std::max(exactStats.maxShare[t], err / bound);
                    exactStats.compared[t]++;
                    if (!(err <= bound) && reported++ < 4)
                      c.fail("gates +-" + std::to_string(int(spreads[round])) +
                             ": pool " + std::to_string(j) + " channel " +
                             std::to_string(d) + ": " + std::to_string(got) +
                             " vs exact " + std::to_string(x.value) + ", " +
                             std::to_string(err) + " ulp of S (bound " +
                             std::to_string(bound) + ")");
                  }
              }
            });
}

/// Subnormal weights (revision 3; issue 24, finding 5): a member whose z is
/// 80 to 106 below the pool's max and whose key is as large as T allows
/// (3e38 in bf16 and f32). Its weight exp(z - M) is subnormal below 87.3,
/// yet its term e * k is of the order of 1. The CPU kernels flush every
/// such weight and no other, so they (and the reference, given the CPU's
/// rule) must match the exact function with exactly those weights zero,
/// within the contract's bound in ulps of S; under the other rule (keep)
/// the same inputs differ from it by up to 1.8 per flushed weight, which
/// the case checks too, so that it can tell the rules apart. Pool 0 channel
/// 0 is the finding's case: a member with key 3e38 and a z 88 below the
/// other member's (exact value 2.82 with the weight kept, 1 with it
/// flushed; the exp before revision 3 flushed it there but kept weights
/// 87.34 to 87.68 below the max).
void subnormalCases(Suite &suite, const Config &cfg) {
  if (cfg.K < 2)
    return; // one member weighs exactly 1
  std::string p = cfg.name() + " ";
  suite.run(p + "subnormal weights flushed, all and only those: gaps of "
                "80..106 with keys up to 3e38, kernels and reference vs exact",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              const int64_t K = cfg.K, D = cfg.D, pools = 64;
              const double huge =
                  cfg.type == KPOOL_F16 ? 65504.0 : 3e38; // largest keys
              Rng rng(950);
              Buffer ape = makeApe(cfg, rng);
              Buffer tail = makeTail(cfg, rng, 1);
              CallSpec spec = makeCall(cfg, rng, {{pools * K, 0, 0}}, 1);
              auto f32At = [&](const std::vector<uint32_t> &v, int64_t row,
                               int64_t d) {
                return ref::fromBits(cfg.type, v[row * D + d]);
              };
              // Channel 0 has ape = 0, so the finding's z are its gates.
              for (int64_t m = 0; m < K; ++m)
                ape.set({m, 0}, ref::f32Bits(0.0f));
              for (int64_t j = 0; j < pools; ++j)
                for (int64_t d = 0; d < D; ++d) {
                  int64_t i = j * D + d;
                  double gap = 80 + 26.0 * double(i) / double(pools * D);
                  int64_t a = i % K, b = (a + 1 + (i / K) % (K - 1)) % K;
                  double ka = i % 3 == 0 ? 1.0 : i % 3 == 1 ? 0.0 : -0.5;
                  double kb = (i / 3) % 3 == 0   ? huge
                              : (i / 3) % 3 == 1 ? -huge
                                                 : 1.0;
                  if (i == 0) { // the finding's case
                    a = 0, b = 1, gap = 88, ka = 1, kb = huge;
                  }
                  auto apeOf = [&](int64_t m) {
                    return double(ref::fromBits(KPOOL_F32, ape.at({m, d})));
                  };
                  double ga = i == 0 ? 0 : rng.uniform(-5, 5);
                  for (int64_t m = 0; m < K; ++m) {
                    int64_t row = j * K + m;
                    double g = m == a   ? ga
                               : m == b ? ga + apeOf(a) - apeOf(m) - gap
                                        : ga + apeOf(a) - apeOf(m) - 120;
                    double key = m == a ? ka : m == b ? kb : 1.0;
                    spec.gate[row * D + d] = ref::roundToBits(cfg.type, float(g));
                    spec.k[row * D + d] = ref::roundToBits(cfg.type, float(key));
                  }
                }
              Ops o = makeOps(cfg, spec, ape, tail, Layouts());
              if (!c.expect(kPoolOffsets(*ks, o, Validation::Check).ok(),
                            "pool_offsets failed"))
                return;
              o.pooled = Buffer::make(cfg.esize(), {pools, D});
              Ops r = o;
              if (!c.expect(kCompress(*ks, o, Validation::Check).ok(),
                            "compress failed"))
                return;
              rCompress(cfg, r);
              const double bound16 = 0.51;
              double worst[2] = {0, 0}; // kernels, reference: err / allowed
              int64_t subnormal = 0, rulesDiffer = 0;
              int reported = 0;
              for (int64_t j = 0; j < pools; ++j)
                for (int64_t d = 0; d < D; ++d) {
                  double z[64], k[64];
                  for (int64_t m = 0; m < K; ++m) {
                    int64_t row = j * K + m;
                    float g = f32At(spec.gate, row, d);
                    float a = ref::fromBits(KPOOL_F32, o.ape.at({m, d}));
                    z[m] = double(g + a); // an f32 sum, as in the spec
                    k[m] = f32At(spec.k, row, d);
                  }
                  ExactPool e = exactPool(K, z, k);
                  ExactPool kept =
                      exactPool(K, z, k, ref::SubnormalWeights::Keep);
                  subnormal += e.subnormal;
                  if (std::fabs(kept.value - e.value) >
                      64 * ref::ulpOf(cfg.type, e.S))
                    ++rulesDiffer;
                  double bound = cfg.type == KPOOL_F32 ? 4 + 6 * e.maxAbsZ
                                                       : bound16;
                  double allowed =
                      bound * ref::ulpOf(cfg.type, e.S) + e.grid;
                  for (int side = 0; side < 2; ++side) {
                    const Buffer &out = side == 0 ? o.pooled : r.pooled;
                    double got = ref::fromBits(cfg.type, out.at({j, d}));
                    double err = std::fabs(got - e.value);
                    worst[side] = std::max(worst[side], err / allowed);
                    if (j == 0 && d == 0 && side == 0) {
                      char buf[160];
                      std::snprintf(buf, sizeof(buf),
                                    "finding's case (key %g, gap 88): "
                                    "kernels %.6g, exact %.6g (with the "
                                    "weight kept: %.6g)",
                                    k[1], got, e.value, kept.value);
                      c.note(buf);
                    }
                    if (!(err <= allowed) && reported++ < 4) {
                      char buf[320];
                      std::snprintf(
                          buf, sizeof(buf),
                          "%s: pool %lld channel %lld: %.9g vs exact %.9g "
                          "(S %.3g), %.3g ulp of S (bound %.3g + the "
                          "subnormal grid %.3g ulp)",
                          side == 0 ? "kernels" : "reference", (long long)j,
                          (long long)d, got, e.value, e.S,
                          err / ref::ulpOf(cfg.type, e.S), bound,
                          e.grid / ref::ulpOf(cfg.type, e.S));
                      c.fail(buf);
                    }
                  }
                }
              c.note(std::to_string(subnormal) +
                     " channels with a subnormal weight (" +
                     std::to_string(rulesDiffer) +
                     " where keeping it would be off by more than 64 ulp of "
                     "S); worst error / allowed: kernels " +
                     std::to_string(worst[0]) + ", reference " +
                     std::to_string(worst[1]));
              // f16 keys (at most 65504) make every subnormal term
              // negligible; in bf16 and f32 the case must separate the
              // rules.
              if (cfg.type != KPOOL_F16)
                c.expect(rulesDiffer > pools,
                         "the inputs do not tell flushing from keeping");
            });
}

void identityCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " identity: ";
  int64_t K = cfg.K;
  int64_t L = 5 * K + 3;
  int64_t near32 = ((int64_t(1) << 32) - 3 * K) / K * K;

  auto single = [&](const std::string &name, uint64_t seed, int64_t start,
                    int64_t preseed, std::vector<int64_t> chunks) {
    suite.run(p + name, [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      Rng rng(seed);
      std::vector<SimRequest> reqs = {
          makeRequest(cfg, rng, L, start, preseed, 3)};
      Schedule s;
      int64_t left = L - preseed;
      for (int64_t n : chunks) {
        n = std::min(n, left);
        s.calls.push_back({n});
        left -= n;
      }
      while (left > 0) { // decode the rest
        s.calls.push_back({1});
        --left;
      }
      runSimulation(c, cfg, *ks, reqs, s, 6, seed);
    });
  };
  single("one prefill", 11, 0, 0, {L});
  single("one token per call", 12, 0, 0, {});
  single("chunked prefill inside pools, then decode", 13, 0, 0,
         {K + 1, K + 2, K > 1 ? K - 1 : 2, 2});
  single("positions past 2^16 (pool ids past 2^16), ring pre-seeded", 14,
         K * 70001, K - 1, {K + 1, 2 * K + 3});
  single("positions past 2^32 in 64-bit arithmetic, ring pre-seeded", 15,
         near32, K - 1, {K + 1, L});

  auto mixed = [&](const std::string &name, uint64_t seed, int64_t base,
                   std::vector<int64_t> preseeds) {
    suite.run(p + name, [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      Rng rng(seed);
      // Remainders differ after the first call; no later call brings 1 token.
      Schedule s;
      s.calls = {{K, K + 1, K + 2, K + 3},
                 {2, K + 3, 3, 2 * K + 2},
                 {-1, -1, -1, -1}, // only the padding row
                 {K + 2, 2, 0, 3},
                 {-1, 3, 2, 2},
                 {5, 0, -1, K + 4}};
      s.reverseOdd = true;
      s.padRows = 1;
      const uint32_t slots[4] = {3, 0, 5, 2};
      std::vector<SimRequest> reqs;
      for (int r = 0; r < 4; ++r) {
        int64_t n = preseeds[r];
        for (auto &call : s.calls)
          n += std::max<int64_t>(call[r], 0);
        reqs.push_back(makeRequest(cfg, rng, n, base + K * 13 * r,
                                   preseeds[r], slots[r]));
      }
      runSimulation(c, cfg, *ks, reqs, s, 6, seed);
    });
  };
  mixed("mixed ragged calls, slots 3,0,5,2 of 6, batch padding", 21, 0,
        {0, 0, 0, 0});
  mixed("mixed ragged calls past 2^16, rings pre-seeded", 22, K * 70000,
        {K > 1 ? 1 : 0, 0, K > 2 ? 2 : 0, K - 1});

  suite.run(p + "a pool over a prefix equals the pool over the whole",
            [&](Check &c) {
              auto ks = kernels(cfg, c);
              if (!ks)
                return;
              Rng rng(31);
              Buffer ape = makeApe(cfg, rng);
              Buffer tail = makeTail(cfg, rng, 1);
              CallSpec whole = makeCall(cfg, rng, {{L, 0, 0}}, 1);
              Ops w = makeOps(cfg, whole, ape, tail, Layouts());
              Ops wr = w;
              runCall(c, "whole", cfg, *ks, w, wr);
              std::vector<uint32_t> all = w.pooled.dense();
              for (int64_t len : {K, 2 * K + 1, 3 * K - 1, L - 1}) {
                if (len < 1)
                  continue;
                CallSpec prefix = whole;
                prefix.rows = len;
                prefix.iro = {0, uint32_t(len)};
                prefix.k.resize(len * cfg.D);
                prefix.gate.resize(len * cfg.D);
                Ops o = makeOps(cfg, prefix, ape, tail, Layouts());
                Ops r = o;
                runCall(c, "prefix " + std::to_string(len), cfg, *ks, o, r);
                std::vector<uint32_t> got = o.pooled.dense();
                c.expect(int64_t(got.size()) == len / K * cfg.D,
                         "prefix pool count");
                c.expect(std::equal(got.begin(), got.end(), all.begin()),
                         "prefix of " + std::to_string(len) +
                             " tokens: pools differ from the whole's");
              }
            });
}

void emptyCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " empty: ";
  int64_t K = cfg.K;
  auto call = [&](const std::string &name, uint64_t seed,
                  std::vector<std::array<int64_t, 3>> reqs, int32_t nreq) {
    suite.run(p + name, [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      Rng rng(seed);
      Buffer ape = makeApe(cfg, rng);
      Buffer tail = makeTail(cfg, rng, 6);
      CallSpec spec = makeCall(cfg, rng, reqs, nreq);
      Ops kOps = makeOps(cfg, spec, ape, tail, Layouts());
      Ops rOps = kOps;
      Buffer before = tail;
      runCall(c, name, cfg, *ks, kOps, rOps);
      // These calls complete no pools and write nothing to the ring unless
      // a request brings tokens.
      bool anyTokens = false;
      for (auto &r : reqs)
        anyTokens |= r[0] > 0 && nreq > 0;
      if (!anyTokens)
        compareBits(c, "ring unchanged", kOps.tail, before);
      for (int64_t b = 0; b < kOps.closed.sizes[0]; ++b)
        c.expect(int32_t(kOps.closed.at({b})) == -1, "a pool closed");
    });
  };
  call("no requests (B = 0)", 41, {}, 0);
  call("requests with zero tokens", 42,
       {{0, K + (K > 1 ? 1 : 0), 3}, {0, 0, 0}, {0, 2 * K + K - 1, 5}}, 3);
  if (K > 2)
    call("calls shorter than a pool", 43,
         {{1, K + 1, 3}, {K - 2, 0, 0}, {1, 3 * K, 5}}, 3);
  call("num_requests = 0", 44, {{2 * K + 1, 1, 3}, {K, K + 1, 0}}, 0);
}

void stridedCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " strided: ";
  int64_t K = cfg.K, D = cfg.D;
  struct Variant {
    std::string name;
    Layouts layouts;
  };
  std::vector<Variant> variants;
  {
    Variant v{"k and gate rows inside wider buffers", {}};
    v.layouts.k.strides = {D + 13, 1};
    v.layouts.gate.strides = {2 * D + 1, 1};
    variants.push_back(v);
  }
  {
    Variant v{"padded tail ring (slot stride > 2*K*D)", {}};
    v.layouts.tail.strides = {2 * (K * (D + 1) + 3) + 7, K * (D + 1) + 3,
                              D + 1, 1};
    variants.push_back(v);
  }
  {
    Variant v{"k with channel stride 2", {}};
    v.layouts.k.strides = {2 * D + 3, 2};
    variants.push_back(v);
  }
  {
    Variant v{"every operand strided, innermost strides 2 and 3", {}};
    Layouts &l = v.layouts;
    l.k.strides = {2 * D + 3, 2};
    l.gate.strides = {3 * D, 3};
    l.ape.strides = {2 * D + 2, 2};
    int64_t s2 = 2 * D + 1, s1 = K * s2 + 5;
    l.tail.strides = {2 * s1 + 3, s1, s2, 2};
    l.rcPooled.strides = {3 * D + 1, 3};
    l.pooled.strides = {2 * D + 5, 2};
    l.closed.strides = {2};
    l.iro.strides = {3};
    l.cache.strides = {2};
    l.slots.strides = {5};
    l.pro.strides = {2};
    variants.push_back(v);
  }
  for (const Variant &v : variants) {
    suite.run(p + v.name, [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      for (uint64_t seed = 1; seed <= 2; ++seed) {
        Rng rng(300 + seed);
        Buffer ape = makeApe(cfg, rng);
        Buffer tail = makeTail(cfg, rng, 6);
        CallSpec spec = raggedCall(cfg, rng);
        // Dense.
        Ops d = makeOps(cfg, spec, ape, tail, Layouts());
        Ops dr = d;
        runCall(c, "dense", cfg, *ks, d, dr);
        // Strided: same values, other layouts.
        Buffer sApe = Buffer::make(4, {K, D}, v.layouts.ape);
        sApe.fill(ape.dense());
        Buffer sTail = Buffer::make(cfg.esize(), {6, 2, K, D}, v.layouts.tail);
        sTail.fill(tail.dense());
        Ops s = makeOps(cfg, spec, sApe, sTail, v.layouts);
        Ops sr = s;
        runCall(c, "strided", cfg, *ks, s, sr);
        c.expect(s.rcPooled.dense() == d.rcPooled.dense(),
                 "ring_close pooled differs from the dense run");
        c.expect(s.closed.dense() == d.closed.dense(),
                 "closed_pool differs from the dense run");
        c.expect(s.pro.dense() == d.pro.dense(),
                 "pool_row_offsets differ from the dense run");
        c.expect(s.pooled.dense() == d.pooled.dense(),
                 "compress pooled differs from the dense run");
        c.expect(s.tail.dense() == d.tail.dense(),
                 "the ring differs from the dense run");
      }
    });
  }
}

/// Bytes of every ring slot other than `owned`, to check they stay put.
std::vector<uint32_t> otherSlots(const Buffer &tail, std::set<int64_t> owned) {
  std::vector<uint32_t> out;
  tail.forEach([&](const int64_t *idx, int64_t e) {
    if (!owned.count(idx[0]))
      out.push_back(tail.raw(e));
  });
  return out;
}

struct BadCase {
  std::string name;
  CallSpec spec;
  std::optional<std::vector<uint32_t>> pro;
  std::optional<int64_t> pooledRows;
  /// Expected host-validation failures: op -> substrings of the message.
  std::map<std::string, std::vector<std::string>> rejects;
  /// Whether the kernels' own behaviour is defined (and run under Trust).
  bool trust = true;
};

void badMetadataCases(Suite &suite, const Config &cfg) {
  std::string p = cfg.name() + " bad metadata: ";
  int64_t K = cfg.K;
  const int64_t slots = 4;
  std::vector<BadCase> cases;
  auto base = [&](uint64_t seed) {
    Rng rng(seed);
    // Three requests that each close a ring pool, compress and seed.
    return makeCall(cfg, rng,
                    {{2 * K + 2, K > 1 ? K + 1 : 3, 1},
                     {3 * K + 1, K > 1 ? 2 * K + 1 : 5, 3},
                     {2 * K + 3, K > 1 ? 4 * K + 1 : 2, 0}},
                    3);
  };
  const std::vector<std::string> ringOps = {"ring_close", "seed_tail"};
  {
    BadCase b{"slot_idx out of range (request 1)", base(51), {}, {}, {}};
    b.spec.slots[1] = slots + 2;
    for (auto &op : ringOps)
      b.rejects[op] = {"request 1", "slot_idx"};
    cases.push_back(b);
  }
  {
    BadCase b{"slot_idx = 2^32-1 (request 2)", base(52), {}, {}, {}};
    b.spec.slots[2] = 0xffffffffu;
    for (auto &op : ringOps)
      b.rejects[op] = {"request 2", "slot_idx"};
    cases.push_back(b);
  }
  {
    BadCase b{"reversed input_row_offsets (request 1)", base(53), {}, {}, {}};
    std::swap(b.spec.iro[1], b.spec.iro[2]); // iro[1] > iro[2]
    for (auto &op : {"ring_close", "seed_tail", "compress", "pool_offsets"})
      b.rejects[op] = {"request 1", "input_row_offsets"};
    cases.push_back(b);
  }
  {
    BadCase b{"overlong input_row_offsets (request 2)", base(54), {}, {}, {}};
    b.spec.iro[3] = uint32_t(b.spec.rows + 5);
    for (auto &op : {"ring_close", "seed_tail", "compress"})
      b.rejects[op] = {"request 2", "input_row_offsets"};
    cases.push_back(b);
  }
  {
    BadCase b{"input_row_offsets near 2^32 (requests 1, 2)", base(55), {}, {},
              {}};
    b.spec.iro[2] = 0xfffffff0u; // request 1 overlong, request 2 reversed
    b.pooledRows = 64;           // pool_offsets counts ~2^30 pools for 1
    for (auto &op : {"ring_close", "seed_tail", "compress"})
      b.rejects[op] = {"request 1", "input_row_offsets"};
    b.rejects["pool_offsets"] = {"request 2", "input_row_offsets"};
    cases.push_back(b);
  }
  {
    BadCase b{"too few pooled rows", base(56), {}, {}, {}};
    // pool_offsets gives the true total; allocate fewer rows.
    int64_t total = 0;
    for (int64_t r = 0; r < 3; ++r)
      total += ref::poolRange(K, b.spec.cache[r],
                              b.spec.iro[r + 1] - b.spec.iro[r])
                   .count;
    b.pooledRows = total - 3;
    b.rejects["compress"] = {"pool_row_offsets", "pooled"};
    cases.push_back(b);
  }
  {
    BadCase b{"pool_row_offsets too short for request 0", base(57), {}, {},
              {}};
    std::vector<int64_t> counts;
    for (int64_t r = 0; r < 3; ++r)
      counts.push_back(ref::poolRange(K, b.spec.cache[r],
                                      b.spec.iro[r + 1] - b.spec.iro[r])
                           .count);
    // Request 0 gets one row fewer than it has pools; the others as usual.
    std::vector<uint32_t> pro = {0};
    pro.push_back(uint32_t(counts[0] - 1));
    pro.push_back(pro.back() + uint32_t(counts[1]));
    pro.push_back(pro.back() + uint32_t(counts[2]));
    b.pro = pro;
    b.rejects["compress"] = {"request 0", "pool_row_offsets"};
    cases.push_back(b);
  }
  {
    // Two requests writing one slot race; only host validation is defined.
    BadCase b{"two requests share a slot (requests 0, 2)", base(61), {}, {},
              {}};
    b.spec.slots[2] = b.spec.slots[0];
    for (auto &op : ringOps)
      b.rejects[op] = {"request 2", "slot_idx"};
    b.trust = false;
    cases.push_back(b);
  }
  {
    BadCase b{"num_requests = -3", base(58), {}, {}, {}};
    b.spec.numRequests = -3;
    for (auto &op : ringOps)
      b.rejects[op] = {"num_requests"};
    cases.push_back(b);
  }
  {
    BadCase b{"num_requests = B + 5", base(59), {}, {}, {}};
    b.spec.numRequests = 3 + 5;
    for (auto &op : ringOps)
      b.rejects[op] = {"num_requests"};
    cases.push_back(b);
  }
  {
    BadCase b{"num_requests = 1 (rows 1, 2 are padding with tokens)",
              base(60), {}, {}, {}};
    b.spec.numRequests = 1;
    cases.push_back(b); // valid: nothing to reject
  }

  for (const BadCase &bc : cases) {
    // The kernels' guards with a ring of R = K and of R = K + 3 rows.
    for (int64_t window : {K, K + 3})
    if (bc.trust)
    suite.run(p + bc.name + " [Trust: kernel guards" +
                  (window == K ? "" : ", ring window " +
                                          std::to_string(window)) + "]",
              [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      Rng rng(400);
      Buffer ape = makeApe(cfg, rng);
      Buffer tail = makeTail(cfg, rng, slots, Layout(), window);
      Ops kOps = makeOps(cfg, bc.spec, ape, tail, Layouts());
      Ops rOps = kOps;
      CallOptions opt;
      opt.validation = Validation::Trust;
      opt.pro = bc.pro;
      opt.pooledRows = bc.pooledRows;
      runCall(c, "trust", cfg, *ks, kOps, rOps, opt);
      // Explicitly: only the slots of valid requests < num_requests moved.
      std::set<int64_t> owned;
      int64_t n = std::clamp<int64_t>(bc.spec.numRequests, 0,
                                      bc.spec.batch());
      for (int64_t b = 0; b < n; ++b)
        if (bc.spec.slots[b] < slots)
          owned.insert(bc.spec.slots[b]);
      c.expect(otherSlots(kOps.tail, owned) == otherSlots(tail, owned),
               "a ring slot no valid request owns changed");
    });
    if (bc.rejects.empty())
      continue;
    suite.run(p + bc.name + " [Check: host validation]", [=](Check &c) {
      auto ks = kernels(cfg, c);
      if (!ks)
        return;
      Rng rng(400);
      Buffer ape = makeApe(cfg, rng);
      Buffer tail = makeTail(cfg, rng, slots);
      Ops o = makeOps(cfg, bc.spec, ape, tail, Layouts());
      // pool_row_offsets as the reference computes them (or the case's).
      ref::poolOffsets(cfg.geometry(), o.pro.view(), o.iro.view(),
                       o.cache.view());
      if (bc.pro)
        o.pro.fill(*bc.pro);
      int64_t rows = bc.pooledRows ? *bc.pooledRows
                                   : int64_t(o.pro.at({bc.spec.batch()}));
      o.pooled = Buffer::make(cfg.esize(), {rows, cfg.D});
      const Ops before = o;
      std::map<std::string, std::function<Status()>> run = {
          {"ring_close", [&] { return kRingClose(*ks, o, Validation::Check); }},
          {"pool_offsets",
           [&] { return kPoolOffsets(*ks, o, Validation::Check); }},
          {"compress", [&] { return kCompress(*ks, o, Validation::Check); }},
          {"seed_tail", [&] { return kSeedTail(*ks, o, Validation::Check); }}};
      for (auto &[op, expected] : bc.rejects) {
        Status s = run.at(op)();
        if (!c.expect(!s.ok(), op + " accepted bad metadata"))
          continue;
        for (const std::string &word : expected)
          c.expect(s.message().find(word) != std::string::npos,
                   op + ": message '" + s.message() + "' does not name '" +
                       word + "'");
        c.note(op + ": " + s.message());
      }
      compareOps(c, "after rejected calls:", cfg, o, before);
    });
  }
}

} // namespace

int main(int argc, char **argv) {
  Suite suite;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-x" && i + 1 < argc)
      suite.excludes.push_back(argv[++i]);
    else if (std::string(argv[i]) == "-v")
      suite.verbose = gVerbose = true;
    else if (std::string(argv[i]) == "-m") { // measure: no tolerance
      for (int64_t &t : tolerance.ulp)
        t = INT64_MAX;
      tolerance.scaleUlps = INFINITY;
    }
    else
      suite.filters.push_back(argv[i]);
  }

  floatCases(suite);
  referenceSelfCases(suite);

  std::vector<Config> configs;
  for (ElementType t : {KPOOL_BF16, KPOOL_F16, KPOOL_F32})
    // kpool 6: the CPU pipeline's member loop (unroll-members=4).
    for (auto [D, K] : {std::pair<int64_t, int64_t>{128, 4}, {12, 3}, {8, 1},
                        {20, 4}, {16, 6}})
      configs.push_back({t, D, K});

  for (const Config &cfg : configs) {
    referenceCases(suite, cfg);
    numericsCases(suite, cfg);
    exactCases(suite, cfg);
    subnormalCases(suite, cfg);
    identityCases(suite, cfg);
    emptyCases(suite, cfg);
    stridedCases(suite, cfg);
    badMetadataCases(suite, cfg);
  }

  const char *names[3] = {"bf16", "f16", "f32"};
  for (int t = 0; t < 3; ++t) {
    if (!tolerance.compared[t])
      continue;
    std::printf("pooled vs reference, %s: %lld values, %.4f%% bit-exact, "
                "max %lld ulp (tolerance %lld ulp, or 1 ulp + %g * 2^-24 * S; "
                "max beyond ulp tolerance: %.2f * 2^-24 * S)",
                names[t], (long long)tolerance.compared[t],
                100.0 * double(tolerance.exact[t]) /
                    double(tolerance.compared[t]),
                (long long)tolerance.maxUlp[t], (long long)tolerance.ulp[t],
                tolerance.scaleUlps, tolerance.maxScaled[t]);
    if (suite.verbose) {
      std::printf(", histogram:");
      for (auto [ulp, n] : tolerance.histogram[t])
        std::printf(" %lld:%lld", (long long)ulp, (long long)n);
    }
    std::printf("\n");
  }
  for (int t = 0; t < 3; ++t) {
    if (!exactStats.compared[t])
      continue;
    if (t == int(KPOOL_F32))
      std::printf("compress vs exact, %s: %lld values, max %.3f ulp of the "
                  "magnitude, max %.1f%% of the bound 4 + 6 max|z| ulps\n",
                  names[t], (long long)exactStats.compared[t],
                  exactStats.maxUlp[t], 100 * exactStats.maxShare[t]);
    else
      std::printf("compress vs exact, %s: %lld values, max %.4f ulp of the "
                  "magnitude (bound %.2f)\n",
                  names[t], (long long)exactStats.compared[t],
                  exactStats.maxUlp[t], exactStats.bound16);
  }
  std::printf("kpool.step: %lld calls bit-identical to ring_close + "
              "pool_offsets + compress + seed_tail\n",
              (long long)stepCompared);
  std::printf("%d passed, %d failed\n", suite.passed, suite.failed);
  return suite.failed ? 1 : 0;
}
