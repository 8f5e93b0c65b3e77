//===- kpool-bench-cpu.cpp - CPU throughput of the kpool kernels ----------===//
//
// A benchmark, not a test: prints figures. Everything is measured side by
// side in one run (the machines are shared and noisy): the candidates of a
// figure are timed in interleaved rounds (Measure.h) and the median is
// reported, with the spread to the fastest sample. One thread throughout:
// the kernel sets are compiled without OpenMP, and OMP_NUM_THREADS=1 is set
// before anything could start an OpenMP runtime.
//
// compress, per size or configuration:
//   kpool   the JIT kernel through KernelSet::compress, validated as the
//           runtime does by default;
//   floor   the same reads and writes with no math (Traffic.h);
//   memcpy  a memcpy of as many bytes as compress moves (so it moves about
//           twice compress's traffic);
//   hand    the hand-written AVX2/FMA kernel (HandWritten.h), checked
//           against the reference before it is timed: bf16/f16 within 1
//           ulp of the magnitude S of the contract, f32 within
//           4 + 6 max|z| ulps; a figure whose check fails prints FAIL;
//   ref     the plain reference (test/lib/Reference), -O3.
// GB/s count the bytes compress moves: every member row of k and gate read
// once, every pooled row written once.
//
// The decode step: ring_close, pool_offsets, compress and seed_tail through
// KernelSet (each call validates) against HandStep (one validating pass
// over the metadata, then the same work), one token per request; from batch
// 32 on also kpool's four ops timed one by one.
//
// Usage: kpool-bench-cpu [--quick] [--decode] [tokens]
//   --decode  only the decode-step figures
//   KPOOL_BENCH_VECTOR_SIZE=n  compiles kpool's kernels with vector-size n
//             (KernelConfig::vectorSize; default 16)
//
//===----------------------------------------------------------------------===//

#include "HandWritten.h"
#include "Measure.h"
#include "Traffic.h"

#include "Reference/Reference.h"
#include "kpool/Runtime/Jit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kpool;
using namespace kpool::bench;

namespace {

/// The reference the hand-written kernels are checked against: they keep
/// subnormal softmax weights (HandWritten.h), which the contract allows as
/// well as kpool's CPU kernels' flush (docs/semantics.md, "Subnormal
/// weights"), so under that rule.
reference::Geometry handReference(ElementType type, int64_t D, int64_t K) {
  return {type, D, K, reference::SubnormalWeights::Keep};
}

//===----------------------------------------------------------------------===//
// Setup.
//===----------------------------------------------------------------------===//

struct Options {
  bool quick = false;
  bool decodeOnly = false; // --decode: only the decode-step figures
  std::vector<int64_t> tokens; // overrides the size sweep when given
};

/// How long figures take: quick is a smoke run.
struct Effort {
  int rounds;
  double sampleSeconds, budgetSeconds;
};

void die(const Status &s) {
  if (s.ok())
    return;
  std::fprintf(stderr, "kpool-bench-cpu: %s\n", s.message().c_str());
  std::exit(1);
}

std::shared_ptr<KernelSet> kernels(ElementType type, int64_t D, int64_t K) {
  KernelConfig c;
  c.elementType = type;
  c.headDim = D;
  c.kpool = K;
  c.openmp = false;
  if (const char *v = std::getenv("KPOOL_BENCH_VECTOR_SIZE"))
    c.vectorSize = std::atoll(v);
  Status s;
  kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  auto set = KernelSet::get(c, s);
  die(s);
  return set;
}

/// A dense view with rows `rowStride` elements apart.
View rowsView(void *data, int64_t rows, int64_t cols, int64_t rowStride) {
  View v = denseView(data, {rows, cols});
  v.strides[0] = rowStride;
  return v;
}

int64_t esizeOf(ElementType t) { return elementTypeSize(t); }

char *elementPtr(const View &v, ElementType t, int64_t i, int64_t j) {
  return static_cast<char *>(v.data) +
         (i * v.strides[0] + j * v.strides[1]) * esizeOf(t);
}

uint32_t bitsAt(const View &v, ElementType t, int64_t i, int64_t j) {
  return reference::elementBits(t, elementPtr(v, t, i, j));
}

float valueAt(const View &v, ElementType t, int64_t i, int64_t j) {
  return reference::fromBits(t, bitsAt(v, t, i, j));
}

uint32_t u32At(const View &v, int64_t i) {
  return static_cast<const uint32_t *>(v.data)[i * v.strides[0]];
}

/// N(0, sigma) values of `t`: 4096 draws, then picked by a 64-bit LCG
/// (std::normal_distribution for every element of a million-token case
/// took seconds).
void fillNormal(void *p, ElementType t, int64_t count, float sigma,
                std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.f, sigma);
  uint32_t table[4096];
  for (uint32_t &x : table)
    x = reference::roundToBits(t, dist(rng));
  uint64_t state = (uint64_t(rng()) << 32) | rng();
  char *out = static_cast<char *>(p);
  int64_t es = esizeOf(t);
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    reference::setElementBits(t, out + i * es, table[state >> 52]);
  }
}

//===----------------------------------------------------------------------===//
// Accuracy: a result against the reference's and against the exact value of
// the contract's pooling function (z rounded to f32 as the contract has it,
// the rest in double), in ulps of the magnitude S.
//===----------------------------------------------------------------------===//

struct Errors {
  double maxRef = 0, maxExact = 0; // ulps of S
  double maxShare = 0;             // of the contract's tolerance
  int64_t checked = 0, bad = 0;
  std::string first;

  void fail(const std::string &what) {
    if (bad++ == 0)
      first = what;
  }
  void merge(const Errors &o) {
    maxRef = std::max(maxRef, o.maxRef);
    maxExact = std::max(maxExact, o.maxExact);
    maxShare = std::max(maxShare, o.maxShare);
    checked += o.checked;
    if (o.bad && !bad)
      first = o.first;
    bad += o.bad;
  }
};

constexpr int64_t kMaxCheckedK = 64;

void checkChannel(Errors &err, ElementType t, int64_t K, const float *keys,
                  const float *gates, const float *apes, uint32_t bits,
                  uint32_t refBits, const char *where, int64_t row, int64_t d) {
  ++err.checked;
  float x = reference::fromBits(t, bits), r = reference::fromBits(t, refBits);
  auto describe = [&](const char *why) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s row %lld channel %lld: got %.9g (0x%x), reference "
                  "%.9g (0x%x): %s",
                  where, (long long)row, (long long)d, x, bits, r, refBits,
                  why);
    err.fail(buf);
  };
  if (std::isnan(r)) {
    if (!std::isnan(x))
      describe("reference is NaN");
    return;
  }
  if (std::isinf(r)) {
    if (x != r)
      describe("reference is infinite");
    return;
  }
  if (!std::isfinite(x))
    return describe("not finite");
  float z[kMaxCheckedK];
  double maxZ = -INFINITY, maxAbsZ = 0;
  for (int64_t m = 0; m < K; ++m) {
    z[m] = gates[m] + apes[m];
    maxZ = std::max(maxZ, double(z[m]));
    maxAbsZ = std::max(maxAbsZ, std::fabs(double(z[m])));
  }
  double sum = 0, acc = 0, mag = 0;
  for (int64_t m = 0; m < K; ++m) {
    double e = std::exp(double(z[m]) - maxZ);
    sum += e;
    acc += e * keys[m];
    mag += e * std::fabs(keys[m]);
  }
  double ulp = reference::ulpOf(t, mag / sum);
  double eRef = std::fabs(double(x) - double(r)) / ulp;
  double eExact = std::fabs(double(x) - acc / sum) / ulp;
  err.maxRef = std::max(err.maxRef, eRef);
  err.maxExact = std::max(err.maxExact, eExact);
  double tolerance = t == KPOOL_F32 ? 4 + 6 * maxAbsZ : 1.0;
  err.maxShare = std::max(err.maxShare, eExact / tolerance);
  if (eExact > tolerance)
    describe("beyond the contract's tolerance");
}

/// The rows compress writes: row -> first source row of its pool (-1 when
/// no request claims it; a later request wins, as in the reference).
std::vector<int64_t> claimedRows(int64_t K, const View &pooled, const View &k,
                                 const View &gate, const View &iro,
                                 const View &pro, const View &cache) {
  std::vector<int64_t> src(pooled.sizes[0], -1);
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = std::max<int64_t>(
      0, std::min({cache.sizes[0], iro.sizes[0] - 1, pro.sizes[0] - 1}));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lo = u32At(iro, b), hi = u32At(iro, b + 1);
    int64_t tokens = (lo <= hi && hi <= numRows) ? hi - lo : 0;
    auto range = reference::poolRange(K, u32At(cache, b), tokens);
    int64_t rowLo = u32At(pro, b), rowHi = u32At(pro, b + 1);
    for (int64_t j = 0; j < range.count; ++j) {
      int64_t row = rowLo + j;
      if (row >= rowHi || row >= pooled.sizes[0])
        break;
      src[row] = lo + range.skip + j * K;
    }
  }
  return src;
}

/// compress's output `out` against the reference's `ref` (both started
/// from the same contents).
Errors compareCompress(ElementType t, int64_t D, int64_t K, const View &out,
                       const View &ref, const View &k, const View &gate,
                       const View &ape, const View &iro, const View &pro,
                       const View &cache, const char *where) {
  Errors err;
  std::vector<int64_t> src = claimedRows(K, out, k, gate, iro, pro, cache);
  float keys[kMaxCheckedK], gates[kMaxCheckedK], apes[kMaxCheckedK];
  for (int64_t row = 0; row < out.sizes[0]; ++row)
    for (int64_t d = 0; d < D; ++d) {
      uint32_t bits = bitsAt(out, t, row, d), refBits = bitsAt(ref, t, row, d);
      if (src[row] < 0) {
        if (bits != refBits)
          err.fail(std::string(where) + ": row " + std::to_string(row) +
                   ", which no request claims, was written");
        continue;
      }
      for (int64_t m = 0; m < K; ++m) {
        keys[m] = valueAt(k, t, src[row] + m, d);
        gates[m] = valueAt(gate, t, src[row] + m, d);
        apes[m] = static_cast<const float *>(
            ape.data)[m * ape.strides[0] + d * ape.strides[1]];
      }
      checkChannel(err, t, K, keys, gates, apes, bits, refBits, where, row, d);
    }
  return err;
}

//===----------------------------------------------------------------------===//
// The hand-written kernel against the reference on hard inputs: ragged
// requests with cached prefixes (some past 2^16), bad metadata, padded row
// strides, large gates (subnormal and zero weights), NaN, infinities, huge
// and subnormal keys; every element type, odd head_dims and kpools; both
// the AVX2 path and the scalar fallback.
//===----------------------------------------------------------------------===//

struct Special {
  float p;     // probability that an element is special
  bool finite; // only huge/tiny finite values, no NaN/inf
};

void sprinkle(void *p, ElementType t, int64_t count, Special sp,
              std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(0, 1);
  const float values[] = {NAN,    INFINITY, -INFINITY, 1e30f,    -3e38f,
                          1e-40f, -1e-42f,  60000.f,   -65504.f, 0.f};
  for (int64_t i = 0; i < count; ++i) {
    if (u(rng) >= sp.p)
      continue;
    int pick = std::uniform_int_distribution<int>(sp.finite ? 3 : 0, 9)(rng);
    reference::setElementBits(t, static_cast<char *>(p) + i * esizeOf(t),
                              reference::roundToBits(t, values[pick]));
  }
}

Errors correctnessCase(ElementType t, int64_t D, int64_t K, std::mt19937 &rng,
                       int trial) {
  std::uniform_int_distribution<int> coin(0, 99);
  int64_t es = esizeOf(t);
  int64_t batch = std::uniform_int_distribution<int>(0, 6)(rng);
  std::vector<uint32_t> iro(batch + 1, 0), cache(batch), pro(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = std::uniform_int_distribution<int>(0, int(5 * K + 7))(rng);
    iro[b + 1] = iro[b] + uint32_t(n);
    cache[b] =
        coin(rng) < 20
            ? 65530u + std::uniform_int_distribution<uint32_t>(0, 40)(rng)
            : std::uniform_int_distribution<uint32_t>(0, 3 * K)(rng);
  }
  int64_t rows = iro[batch];
  // Bad metadata now and then: reversed rows or rows past k.
  if (batch > 1 && coin(rng) < 15)
    std::swap(iro[1], iro[batch - 1]);
  if (batch > 0 && coin(rng) < 10)
    iro[batch] = uint32_t(rows + 3);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lo = iro[b], hi = iro[b + 1];
    int64_t n = (lo <= hi && hi <= rows) ? hi - lo : 0;
    pro[b + 1] = pro[b] + uint32_t(reference::poolRange(K, cache[b], n).count);
  }
  int64_t pools = batch > 0 ? pro[batch] : 0;
  if (batch > 2 && coin(rng) < 15) // a non-monotone pool_row_offsets
    pro[2] = pro[2] + 2;
  if (pools > 0 && coin(rng) < 15) // fewer output rows than pools
    pools -= 1;
  pools += coin(rng) < 20 ? 2 : 0;
  int64_t pad = coin(rng) < 30 ? 8 : 0; // padded row strides
  int64_t stride = D + pad;
  AlignedBuffer k(std::max<int64_t>(1, rows * stride * es)),
      g(std::max<int64_t>(1, rows * stride * es)),
      out(std::max<int64_t>(1, pools * stride * es)),
      ref(std::max<int64_t>(1, pools * stride * es));
  float gateSigma = coin(rng) < 30 ? 40.f : 2.f;
  fillNormal(k.data(), t, rows * stride, 3.f, rng);
  fillNormal(g.data(), t, rows * stride, gateSigma, rng);
  if (trial % 3 == 1) {
    Special sp{0.02f, coin(rng) < 50};
    sprinkle(k.data(), t, rows * stride, sp, rng);
    sprinkle(g.data(), t, rows * stride, sp, rng);
  }
  fillNormal(out.data(), t, pools * stride, 1.f, rng); // a sentinel
  std::memcpy(ref.data(), out.data(), pools * stride * es);
  std::vector<float> ape(K * D);
  std::normal_distribution<float> apeDist(0.f, coin(rng) < 20 ? 30.f : 2.f);
  for (float &a : ape)
    a = apeDist(rng);
  View kV = rowsView(k.data(), rows, D, stride),
       gV = rowsView(g.data(), rows, D, stride),
       outV = rowsView(out.data(), pools, D, stride),
       refV = rowsView(ref.data(), pools, D, stride),
       apeV = denseView(ape.data(), {K, D}),
       iroV = denseView(iro.data(), {batch + 1}),
       proV = denseView(pro.data(), {batch + 1}),
       cacheV = denseView(cache.data(), {batch});
  reference::compress(handReference(t, D, K), refV, kV, gV, apeV, iroV, proV,
                      cacheV);
  handCompress({t, D, K}, outV, kV, gV, apeV, iroV, proV, cacheV);
  return compareCompress(t, D, K, outV, refV, kV, gV, apeV, iroV, proV, cacheV,
                         "compress");
}

bool runCorrectness(bool quick) {
  std::printf("hand-written compress against the reference (ragged and bad "
              "metadata, padded rows, large gates, NaN/inf/huge/subnormal "
              "values; error in ulps of the magnitude S, against the "
              "reference and against the exact value):\n");
  const int64_t shapes[][2] = {{1, 1},   {3, 2},  {8, 3},   {16, 4},
                               {24, 5},  {64, 8}, {128, 4}, {136, 7},
                               {256, 1}, {40, 9}, {32, 17}, {128, 6}};
  bool ok = true;
  bool vector = std::strcmp(handWrittenIsa(), "scalar") != 0;
  for (int path = vector ? 0 : 1; path < 2; ++path) {
    setHandWrittenScalar(path == 1);
    for (ElementType t : {KPOOL_BF16, KPOOL_F16, KPOOL_F32}) {
      std::mt19937 rng(1234 + int(t));
      Errors all;
      int cases = 0;
      for (auto &shape : shapes)
        for (int trial = 0; trial < (quick ? 3 : 12); ++trial, ++cases)
          all.merge(correctnessCase(t, shape[0], shape[1], rng, trial));
      bool pass = all.bad == 0;
      ok &= pass;
      std::printf(
          "  %-6s %-4s %4d cases, %7lld channels: max %.3f ulp vs "
          "reference, %.3f ulp vs exact, %.0f%% of the tolerance "
          "(%s)  %s\n",
          path == 0 ? "avx2" : "scalar", elementTypeName(t), cases,
          (long long)all.checked, all.maxRef, all.maxExact, all.maxShare * 100,
          t == KPOOL_F32 ? "4 + 6 max|z| ulps" : "1 ulp", pass ? "ok" : "FAIL");
      if (!pass)
        std::printf("    %lld bad; first: %s\n", (long long)all.bad,
                    all.first.c_str());
    }
  }
  setHandWrittenScalar(false);
  // The exp itself, on its domain (x <= 0), against libm, in ulps of f32
  // (normal results) and absolutely (subnormal ones, in units of 2^-149).
  std::vector<float> xs, ys(0);
  for (float x = -104.0f; x <= 0.0f; x = x + 2e-5f * (1 + std::fabs(x)))
    xs.push_back(x);
  ys.resize(xs.size());
  for (int form = vector ? 0 : 1; form < 2; ++form) {
    if (form == 0)
      handExpArray(xs.data(), ys.data(), int64_t(xs.size()));
    else
      for (size_t i = 0; i < xs.size(); ++i)
        ys[i] = handExp(xs[i]);
    double worst = 0, worstSub = 0;
    float worstAt = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double exact = std::exp(double(xs[i])), y = ys[i];
      if (exact >= 0x1p-126) {
        double e = std::fabs(y - exact) / reference::ulpOf(KPOOL_F32, exact);
        if (e > worst) {
          worst = e;
          worstAt = xs[i];
        }
      } else {
        worstSub = std::max(worstSub, std::fabs(y - exact) / 0x1p-149);
      }
    }
    std::printf("  exp, %s form, %zu points in [-104, 0]: max %.2f ulp of f32 "
                "(at x = %.7g), subnormal results within %.2f x 2^-149\n",
                form == 0 ? "avx2" : "scalar", xs.size(), worst, worstAt,
                worstSub);
  }
  return ok;
}

//===----------------------------------------------------------------------===//
// compress figures.
//===----------------------------------------------------------------------===//

struct CompressCase {
  ElementType type;
  int64_t D, K, tokens, batch = 8, pools = 0, bytes = 0;
  AlignedBuffer source; // k, gate, then room for memcpy's extra bytes
  AlignedBuffer outKpool, outFloor, outHand, outRef, copyDst;
  std::vector<uint32_t> iro, pro, cache;
  std::vector<float> ape;
  View k, gate, apeV, iroV, proV, cacheV, kpoolV, floorV, handV, refV;
};

/// `tokens` tokens in 8 requests of about equal length, each after a cached
/// prefix of 0..4095 positions (so most start inside a pool).
void makeCompressCase(CompressCase &c, std::mt19937 &rng) {
  int64_t es = esizeOf(c.type), row = c.D * es;
  c.iro.assign(c.batch + 1, 0);
  c.pro.assign(c.batch + 1, 0);
  c.cache.assign(c.batch, 0);
  std::uniform_int_distribution<uint32_t> prefix(0, 4095);
  for (int64_t b = 0; b < c.batch; ++b) {
    c.iro[b + 1] = uint32_t(c.tokens * (b + 1) / c.batch);
    c.cache[b] = prefix(rng);
    c.pro[b + 1] =
        c.pro[b] +
        uint32_t(reference::poolRange(c.K, c.cache[b], c.iro[b + 1] - c.iro[b])
                     .count);
  }
  c.pools = c.pro[c.batch];
  c.bytes = (2 * c.K + 1) * c.pools * row;
  int64_t kBytes = (c.tokens * row + 63) / 64 * 64;
  c.source = AlignedBuffer(2 * kBytes + c.pools * row);
  char *base = c.source.data<char>();
  fillNormal(base, c.type, c.tokens * c.D, 2.f, rng);
  fillNormal(base + kBytes, c.type, c.tokens * c.D, 2.f, rng);
  size_t outBytes = std::max<int64_t>(64, c.pools * row);
  c.outKpool = AlignedBuffer(outBytes);
  c.outFloor = AlignedBuffer(outBytes);
  c.outHand = AlignedBuffer(outBytes);
  c.outRef = AlignedBuffer(outBytes);
  c.copyDst = AlignedBuffer(c.bytes);
  std::normal_distribution<float> dist(0.f, 2.f);
  c.ape.resize(c.K * c.D);
  for (float &a : c.ape)
    a = dist(rng);
  c.k = denseView(base, {c.tokens, c.D});
  c.gate = denseView(base + kBytes, {c.tokens, c.D});
  c.apeV = denseView(c.ape.data(), {c.K, c.D});
  c.iroV = denseView(c.iro.data(), {c.batch + 1});
  c.proV = denseView(c.pro.data(), {c.batch + 1});
  c.cacheV = denseView(c.cache.data(), {c.batch});
  c.kpoolV = denseView(c.outKpool.data(), {c.pools, c.D});
  c.floorV = denseView(c.outFloor.data(), {c.pools, c.D});
  c.handV = denseView(c.outHand.data(), {c.pools, c.D});
  c.refV = denseView(c.outRef.data(), {c.pools, c.D});
}

enum { kKpool, kFloor, kMemcpy, kHand, kRef, kCandidates };
const char *const kNames[kCandidates] = {"kpool", "floor", "memcpy", "hand",
                                         "ref"};

void printCompressHeader(const char *label) {
  std::printf("  %-14s %8s |", label, "MiB");
  for (const char *n : kNames)
    std::printf(" %9s ms   GB/s |", n);
  std::printf(" kpool/hand kpool/floor | hand ulp ref exact | kpool ulp "
              "exact | spread\n");
}

/// One figure: checks, then times the five candidates.
void compressFigure(const std::string &label, ElementType type, int64_t D,
                    int64_t K, int64_t tokens, const Effort &effort,
                    std::mt19937 &rng) {
  CompressCase c;
  c.type = type;
  c.D = D;
  c.K = K;
  c.tokens = tokens;
  makeCompressCase(c, rng);
  auto set = kernels(type, D, K);
  reference::Geometry geometry = handReference(type, D, K);
  HandGeometry hand{type, D, K};

  CompressArgs args{};
  args.pooled = c.kpoolV;
  args.k = c.k;
  args.gate = c.gate;
  args.ape = c.apeV;
  args.input_row_offsets = c.iroV;
  args.pool_row_offsets = c.proV;
  args.cache_lengths = c.cacheV;
  auto runKpool = [&] { die(set->compress(args)); };
  auto runFloor = [&] {
    trafficFloor(esizeOf(type), D, K, c.floorV, c.k, c.gate, c.iroV, c.proV,
                 c.cacheV);
  };
  auto runCopy = [&] {
    copyBytes(c.copyDst.data(), c.source.data(), size_t(c.bytes));
  };
  auto runHand = [&] {
    handCompress(hand, c.handV, c.k, c.gate, c.apeV, c.iroV, c.proV, c.cacheV);
  };
  auto runRef = [&] {
    reference::compress(geometry, c.refV, c.k, c.gate, c.apeV, c.iroV, c.proV,
                        c.cacheV);
  };
  // Check before timing.
  runRef();
  runHand();
  runKpool();
  Errors handErr = compareCompress(type, D, K, c.handV, c.refV, c.k, c.gate,
                                   c.apeV, c.iroV, c.proV, c.cacheV, "hand");
  Errors kpoolErr = compareCompress(type, D, K, c.kpoolV, c.refV, c.k, c.gate,
                                    c.apeV, c.iroV, c.proV, c.cacheV, "kpool");
  double mib = c.bytes / 1048576.0;
  std::printf("  %-14s %8.1f |", label.c_str(), mib);
  if (handErr.bad) {
    std::printf(" FAIL: the hand-written kernel is wrong (%lld channels): "
                "%s\n",
                (long long)handErr.bad, handErr.first.c_str());
    std::fflush(stdout);
    return;
  }
  auto t = measureAdaptive({runKpool, runFloor, runCopy, runHand, runRef},
                           effort.rounds, effort.sampleSeconds,
                           effort.budgetSeconds);
  double spread = 0;
  for (int i = 0; i < kCandidates; ++i) {
    std::printf(" %12.3f %6.2f |", t[i].median * 1e3,
                c.bytes / t[i].median / 1e9);
    spread = std::max(spread, t[i].median / t[i].min - 1);
  }
  std::printf(" %10.2f %11.2f | %8.3f %8.3f | %15.3f | %5.1f%%\n",
              t[kKpool].median / t[kHand].median,
              t[kKpool].median / t[kFloor].median, handErr.maxRef,
              handErr.maxExact, kpoolErr.maxExact, spread * 100);
  if (kpoolErr.bad)
    std::printf("    note: kpool outside the contract's tolerance on %lld "
                "channels: %s\n",
                (long long)kpoolErr.bad, kpoolErr.first.c_str());
  std::fflush(stdout);
}

//===----------------------------------------------------------------------===//
// The decode step.
//===----------------------------------------------------------------------===//

struct StepBuffers {
  std::vector<uint16_t> tail, closedRows, pooled;
  std::vector<int32_t> closed;
  std::vector<uint32_t> pro;
};

/// One decode step per call; request b's pool closes in this step when
/// b % 4 == 0 (`closing`) or never (!closing), as in a steady decode, where
/// each request closes a pool every kpool steps.
void decodeFigure(int64_t batch, bool closing, const Effort &effort,
                  std::mt19937 &rng, double *batch1Diff) {
  const ElementType type = KPOOL_BF16;
  const int64_t D = 128, K = 4;
  auto set = kernels(type, D, K);
  reference::Geometry geometry = handReference(type, D, K);
  HandGeometry hand{type, D, K};
  std::uniform_int_distribution<uint32_t> lengths(250, 25000);
  std::vector<uint32_t> iro(batch + 1), cache(batch), slots(batch);
  for (int64_t b = 0; b <= batch; ++b)
    iro[b] = uint32_t(b);
  for (int64_t b = 0; b < batch; ++b) {
    // held = cache % K: the step closes the pool when held == K - 1.
    uint32_t held = closing && b % K == 0 ? K - 1 : uint32_t(b % (K - 1));
    cache[b] = lengths(rng) * K + held;
    slots[b] = uint32_t(batch - 1 - b);
  }
  AlignedBuffer kBuf(batch * D * 2), gBuf(batch * D * 2);
  fillNormal(kBuf.data(), type, batch * D, 2.f, rng);
  fillNormal(gBuf.data(), type, batch * D, 2.f, rng);
  std::vector<uint16_t> tail0(batch * 2 * K * D);
  fillNormal(tail0.data(), type, int64_t(tail0.size()), 2.f, rng);
  std::vector<float> ape(K * D);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (float &a : ape)
    a = dist(rng);
  View kV = denseView(kBuf.data(), {batch, D}),
       gV = denseView(gBuf.data(), {batch, D}),
       apeV = denseView(ape.data(), {K, D}),
       iroV = denseView(iro.data(), {batch + 1}),
       cacheV = denseView(cache.data(), {batch}),
       slotV = denseView(slots.data(), {batch});
  int32_t n = int32_t(batch);
  // Each candidate has its own outputs and ring.
  StepBuffers bufs[4]; // kpool's four ops, hand, reference, kpool.step
  for (auto &s : bufs) {
    s.tail = tail0;
    s.closedRows.assign(batch * D, 0);
    // The fused step's pooled rows are a capacity: floor(T / K) + B.
    s.pooled.assign(std::max<int64_t>(1, batch / K + batch) * D, 0);
    s.closed.assign(batch, 0);
    s.pro.assign(batch + 1, 0);
  }
  auto views = [&](StepBuffers &s) {
    struct {
      View tail, closedRows, closed, pro;
    } v{denseView(s.tail.data(), {batch, 2, K, D}),
        denseView(s.closedRows.data(), {batch, D}),
        denseView(s.closed.data(), {batch}),
        denseView(s.pro.data(), {batch + 1})};
    return v;
  };
  auto vk = views(bufs[0]), vh = views(bufs[1]), vr = views(bufs[2]),
       vf = views(bufs[3]);
  View fusedPooled = denseView(bufs[3].pooled.data(), {batch / K + batch, D});
  // Each call's arguments, built once (compress's rows are set per step,
  // from pool_offsets' result).
  StepArgs fa{};
  fa.closed = vf.closedRows;
  fa.closed_pool = vf.closed;
  fa.pool_row_offsets = vf.pro;
  fa.pooled = fusedPooled;
  fa.tail = vf.tail;
  fa.k = kV;
  fa.gate = gV;
  fa.ape = apeV;
  fa.input_row_offsets = iroV;
  fa.cache_lengths = cacheV;
  fa.slot_idx = slotV;
  fa.num_requests = n;
  RingCloseArgs rc{};
  rc.pooled = vk.closedRows;
  rc.closed_pool = vk.closed;
  rc.tail = vk.tail;
  rc.k = kV;
  rc.gate = gV;
  rc.ape = apeV;
  rc.input_row_offsets = iroV;
  rc.cache_lengths = cacheV;
  rc.slot_idx = slotV;
  rc.num_requests = n;
  PoolOffsetsArgs po{};
  po.pool_row_offsets = vk.pro;
  po.input_row_offsets = iroV;
  po.cache_lengths = cacheV;
  CompressArgs cp{};
  cp.k = kV;
  cp.gate = gV;
  cp.ape = apeV;
  cp.input_row_offsets = iroV;
  cp.pool_row_offsets = vk.pro;
  cp.cache_lengths = cacheV;
  SeedTailArgs st{};
  st.tail = vk.tail;
  st.k = kV;
  st.gate = gV;
  st.input_row_offsets = iroV;
  st.cache_lengths = cacheV;
  st.slot_idx = slotV;
  st.num_requests = n;
  auto fusedStep = [&] { die(set->step(fa)); };
  auto kpoolStep = [&] {
    die(set->ringClose(rc));
    die(set->poolOffsets(po));
    cp.pooled =
        denseView(bufs[0].pooled.data(), {int64_t(bufs[0].pro[batch]), D});
    die(set->compress(cp));
    die(set->seedTail(st));
  };
  HandStep step;
  View handPooled = denseView(bufs[1].pooled.data(), {batch, D});
  auto handStep = [&] {
    std::string error;
    if (!step.run(hand, vh.closedRows, vh.closed, vh.tail, vh.pro, handPooled,
                  kV, gV, apeV, iroV, cacheV, slotV, n, &error)) {
      std::fprintf(stderr, "kpool-bench-cpu: %s\n", error.c_str());
      std::exit(1);
    }
  };
  auto referenceStep = [&] {
    reference::ringClose(geometry, vr.closedRows, vr.closed, vr.tail, kV, gV,
                         apeV, iroV, cacheV, slotV, n);
    reference::poolOffsets(geometry, vr.pro, iroV, cacheV);
    View out =
        denseView(bufs[2].pooled.data(), {int64_t(bufs[2].pro[batch]), D});
    reference::compress(geometry, out, kV, gV, apeV, iroV, vr.pro, cacheV);
    reference::seedTail(geometry, vr.tail, kV, gV, iroV, cacheV, slotV, n);
  };
  // Check one step of each against the reference's, from the same ring.
  referenceStep();
  handStep();
  kpoolStep();
  fusedStep();
  std::string problem;
  if (bufs[1].pro != bufs[2].pro)
    problem = "pool_row_offsets differ";
  else if (bufs[1].closed != bufs[2].closed)
    problem = "closed_pool differs";
  else if (bufs[1].tail != bufs[2].tail)
    problem = "the ring differs";
  else if (bufs[0].closed != bufs[2].closed || bufs[0].tail != bufs[2].tail)
    problem = "kpool's step differs from the reference's";
  else if (bufs[3].closed != bufs[0].closed || bufs[3].tail != bufs[0].tail ||
           bufs[3].pro != bufs[0].pro ||
           bufs[3].closedRows != bufs[0].closedRows ||
           !std::equal(bufs[0].pooled.begin(),
                       bufs[0].pooled.begin() + bufs[0].pro[batch] * D,
                       bufs[3].pooled.begin()))
    problem = "kpool.step differs from kpool's four ops";
  Errors err;
  float keys[kMaxCheckedK], gates[kMaxCheckedK], apes[kMaxCheckedK];
  for (int64_t b = 0; b < batch && problem.empty(); ++b) {
    int32_t id = bufs[2].closed[b];
    for (int64_t d = 0; d < D; ++d) {
      uint32_t bits = bufs[1].closedRows[b * D + d],
               refBits = bufs[2].closedRows[b * D + d];
      if (id < 0) {
        if (bits != refBits)
          problem = "a row that closes nothing is not zero";
        continue;
      }
      int64_t held = cache[b] % K;
      for (int64_t m = 0; m < K; ++m) {
        uint16_t kb, gb;
        if (m < held) {
          int64_t r = (int64_t(id) * K + m) % K;
          kb = tail0[((slots[b] * 2 + 0) * K + r) * D + d];
          gb = tail0[((slots[b] * 2 + 1) * K + r) * D + d];
        } else {
          kb = static_cast<uint16_t *>(kBuf.data())[(b + m - held) * D + d];
          gb = static_cast<uint16_t *>(gBuf.data())[(b + m - held) * D + d];
        }
        keys[m] = reference::fromBits(type, kb);
        gates[m] = reference::fromBits(type, gb);
        apes[m] = ape[m * D + d];
      }
      checkChannel(err, type, K, keys, gates, apes, bits, refBits, "ring_close",
                   b, d);
    }
  }
  if (problem.empty() && err.bad)
    problem = err.first;
  std::printf("  %5lld %-8s |", (long long)batch, closing ? "" : "no close");
  if (!problem.empty()) {
    std::printf(" FAIL: the hand-written step is wrong: %s\n", problem.c_str());
    return;
  }
  auto t = measureAdaptive({kpoolStep, handStep, referenceStep, fusedStep},
                           effort.rounds, effort.sampleSeconds,
                           effort.budgetSeconds);
  double spread = 0;
  for (auto &x : t)
    spread = std::max(spread, x.median / x.min - 1);
  std::printf(" %13.3f | %10.3f | %12.3f | %10.2f | %10.2f | %13.3f | %12.3f "
              "| %8.3f | %5.1f%%\n",
              t[0].median * 1e6, t[3].median * 1e6, t[1].median * 1e6,
              t[0].median / t[1].median, t[3].median / t[1].median,
              (t[3].median - t[1].median) * 1e6, t[2].median * 1e6,
              err.maxExact, spread * 100);
  if (batch == 1 && closing)
    *batch1Diff = (t[3].median - t[1].median) * 1e6;
  if (batch >= 32) {
    // kpool's step op by op (each validated, interleaved), to see where a
    // difference from the hand-written step goes.
    cp.pooled =
        denseView(bufs[0].pooled.data(), {int64_t(bufs[0].pro[batch]), D});
    auto ops = measureAdaptive(
        {[&] { die(set->ringClose(rc)); }, [&] { die(set->poolOffsets(po)); },
         [&] { die(set->compress(cp)); }, [&] { die(set->seedTail(st)); }},
        effort.rounds, effort.sampleSeconds, effort.budgetSeconds);
    std::printf("  %5s %-8s   kpool ops: ring_close %.3f us, pool_offsets "
                "%.3f us, compress %.3f us, seed_tail %.3f us\n",
                "", "", ops[0].median * 1e6, ops[1].median * 1e6,
                ops[2].median * 1e6, ops[3].median * 1e6);
  }
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  // One thread: before anything could load an OpenMP runtime.
  setenv("OMP_NUM_THREADS", "1", 1);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      opt.quick = true;
    else if (std::strcmp(argv[i], "--decode") == 0)
      opt.decodeOnly = true;
    else if (argv[i][0] >= '0' && argv[i][0] <= '9')
      opt.tokens.push_back(std::atoll(argv[i]));
    else {
      std::fprintf(stderr, "usage: kpool-bench-cpu [--quick] [--decode] [tokens...]\n");
      return 2;
    }
  }
  Effort effort = opt.quick ? Effort{3, 0.002, 0.05} : Effort{7, 0.02, 4.0};
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("kpool-bench-cpu%s: %s; load average %.2f %.2f %.2f\n",
              opt.quick ? " --quick" : "", cpuName().c_str(), load[0], load[1],
              load[2]);
  std::printf(
      "one thread: kernel sets compiled without OpenMP, "
      "OMP_NUM_THREADS=1; hand-written kernels: %s; buffers 64-byte "
      "aligned; times are medians of %d interleaved samples (at "
      "least 3 for calls over %.2g s in all), spread = worst median/min - 1\n",
      handWrittenIsa(), effort.rounds, effort.budgetSeconds);

  if (!runCorrectness(opt.quick)) {
    std::printf("the hand-written kernels are wrong: no figures\n");
    return 1;
  }
  std::mt19937 rng(7);

  std::vector<int64_t> sizes = opt.tokens;
  if (opt.decodeOnly)
    sizes.clear();
  else if (sizes.empty())
    sizes = opt.quick ? std::vector<int64_t>{4096, 65536}
                      : std::vector<int64_t>{1024,  4096,   16384,
                                             65536, 262144, 1048576};
  if (!opt.decodeOnly) {
    std::printf("\ncompress by size: bf16, head_dim 128, kpool 4, 8 requests "
                "with cached prefixes 0..4095 (MiB: what compress moves)\n");
    printCompressHeader("tokens");
    for (int64_t tokens : sizes)
      compressFigure(std::to_string(tokens), KPOOL_BF16, 128, 4, tokens, effort,
                     rng);

    std::printf("\ncompress by element type: head_dim 128, kpool 4\n");
    printCompressHeader("type tokens");
    for (int64_t tokens : opt.quick ? std::vector<int64_t>{4096}
                                    : std::vector<int64_t>{65536, 262144})
      for (ElementType t : {KPOOL_BF16, KPOOL_F16, KPOOL_F32})
        compressFigure(std::string(elementTypeName(t)) + " " +
                           std::to_string(tokens),
                       t, 128, 4, tokens, effort, rng);

    if (!opt.quick) {
      std::printf("\ncompress by configuration: bf16, 65536 tokens\n");
      printCompressHeader("head_dim kpool");
      for (int64_t D : {64, 128, 256})
        for (int64_t K : {1, 2, 4, 8})
          compressFigure("D" + std::to_string(D) + " K" + std::to_string(K),
                         KPOOL_BF16, D, K, 65536, effort, rng);
    }
  }

  std::printf(
      "\ndecode step: bf16, head_dim 128, kpool 4, one token per "
      "request, cached lengths 1000..100000, a pool closing for every "
      "4th request (none in the 'no close' row), ring window 4; kpool = "
      "ring_close + pool_offsets + compress + seed_tail through "
      "KernelSet (validated), step = the fused kpool.step (one validated "
      "call, one kernel; checked bit for bit against the four), hand = one "
      "validating pass + the same work\n");
  std::printf("  %5s %-8s | %13s | %10s | %12s | %10s | %10s | %13s | %12s | "
              "%8s | %s\n",
              "batch", "", "kpool ops us", "step us", "hand us", "ops/hand",
              "step/hand", "step-hand us", "reference us", "hand ulp",
              "spread");
  double diff = 0;
  decodeFigure(1, false, effort, rng, &diff);
  for (int64_t batch : opt.quick ? std::vector<int64_t>{1, 32, 256}
                                 : std::vector<int64_t>{1, 4, 32, 256, 1024})
    decodeFigure(batch, true, effort, rng, &diff);
  std::printf("  at batch 1 (a step that closes a pool) kpool.step costs "
              "%.3f us more than the hand-written step\n",
              diff);
  return 0;
}
