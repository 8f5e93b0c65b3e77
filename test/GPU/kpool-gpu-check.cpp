//===- kpool-gpu-check.cpp - differential tests of the CUDA kernels -------===//
//
// Self-checking tests of the ahead-of-time CUDA kernels (kpool-aot
// --target=cuda) on device buffers -- a GPU's, or the emulated CUDA
// driver's (test/lib/CudaEmu), which executes the same PTX -- for
// bf16/f16/f32 at head_dim 128 kpool 4, bf16 head_dim 64 kpool 3, bf16
// head_dim 8 kpool 1 and f16 head_dim 32 kpool 2. Per configuration:
//
//  (a) a ragged mixed call -- a prefill, a speculative decode past position
//      2^18 (pool ids past 2^16), a single-token decode, a chunked-prefill
//      continuation, a request with no tokens and a batch-padding row; ring
//      slots 3, 0, 5, 1, 4 of 6; non-zero ape and large gates -- through
//      all four ops against the reference (test/lib/Reference):
//      pool_offsets, closed_pool and the ring bit for bit, pooled keys
//      within toleranceUlp() in ulp of the largest member key; empty calls
//      (no requests, num_requests = 0) likewise;
//  (b) on the device, bit for bit: a chunked schedule (chunk boundaries
//      inside pools, then decode of 1 and 3 tokens) produces every pool
//      exactly once, equal to a one-shot compress of the whole sequence,
//      the pools ring_close closed from ring members included;
//  (c) strided views (padded k/gate/pooled rows, a padded ring slot,
//      strided metadata, a base that defeats vector accesses, innermost
//      stride 2: the general-stride kernels) give the dense results bit for
//      bit;
//  (d) bad metadata with Validation::Trust (an out-of-range slot, reversed
//      and overlong offsets, too few pooled rows, num_requests < 0 and > B):
//      guards around every buffer and padding unchanged, inputs unchanged,
//      results equal to the reference (other requests' slots and rows
//      untouched), the calls' status word holding a finding that names a
//      request (it stays 0 in (a));
//  (e) host validation of the metadata's host copies (KernelSet::
//      checkCompress & co., before the upload) rejects bad metadata with a
//      message naming the request and the field, and nothing is launched;
//      a call with Validation::Check on device-resident metadata is an
//      error saying so (a GPU call never reads metadata back);
//  (f) speculative decoding: random verify schedules (1 + d tokens, junk
//      drafts, random acceptance) with a ring window R >= K + d - 1 and
//      rollback by accepted length, every other one through the fused
//      kpool.step; every pool bit-identical to a one-shot compress of the
//      accepted sequence;
//  (g) subnormal weights (docs/semantics.md, "Subnormal weights"): compress
//      on pools with a member 80 to 106 below the max whose key is as large
//      as T allows (3e38 in bf16 and f32; issue 24's finding), against the
//      exact pooling function under the rule of the kernels this build
//      runs (kSubnormalWeights: the GPU keeps every subnormal weight, the
//      CPU kernels of the emulation build flush every one), in ulps of the
//      magnitude S: the contract's bound (1 ulp for bf16/f16, 4 + 6 max|z|
//      for f32) plus, for each kept subnormal weight, two and a half units
//      of 2^-149 times its key (ex2.approx.f32's 2 ulp from the correctly
//      rounded result, which is itself half a unit from the exact one, on
//      the subnormal grid; the emulator's adversarial mode reaches it), with
//      the ulp taken at S plus that allowance (where the result is rounded).
//
// Prints one line per case (PASS/FAIL, with its measurements; --verbose
// adds a line per check), `N passed, M failed` and a digest of every
// device download; exits 1 on failure, 2 when there is no usable GPU.
// --config=<name>[,<name>...] (e.g. bf16_d128_k4) runs some configurations
// only; --speculative=<n> sets case (f)'s schedules per configuration
// (2000; the emulated suite runs fewer).
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4.h"
#include "kpool_gpu_bf16_d64_k3.h"
#include "kpool_gpu_bf16_d8_k1.h"
#include "kpool_gpu_f16_d128_k4.h"
#include "kpool_gpu_f16_d32_k2.h"
#include "kpool_gpu_f32_d128_k4.h"

#include "GPU/GpuSupport.h"
#include "Support/ArgsByName.h"
#include "Reference/VerifySchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace kpool;
using namespace kpool::gpu;

namespace {

int passed = 0, failed = 0;
bool verbose = false;

/// A case: its checks are gathered and printed as one line when it ends,
/// `PASS: <name>: <n> checks; <notes>` or `FAIL: <name>: <failed checks>`;
/// with --verbose every check follows on its own line.
class Case {
public:
  explicit Case(std::string name) : name(std::move(name)) {}
  Case(const Case &) = delete;
  ~Case() {
    std::string failures;
    for (auto &[ok, what] : checks)
      if (!ok)
        failures += (failures.empty() ? "" : "; ") + what;
    bool ok = failures.empty();
    std::string notesText;
    for (const std::string &n : notes)
      notesText += "; " + n;
    if (ok)
      std::printf("PASS: %s: %zu checks%s\n", name.c_str(), checks.size(),
                  notesText.c_str());
    else
      std::printf("FAIL: %s: %s%s\n", name.c_str(), failures.c_str(),
                  notesText.c_str());
    if (verbose)
      for (auto &[ok, what] : checks)
        std::printf("    %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    std::fflush(stdout);
    (ok ? passed : failed)++;
  }
  void check(bool ok, const std::string &what) { checks.push_back({ok, what}); }
  void note(const std::string &text) { notes.push_back(text); }

private:
  std::string name;
  std::vector<std::pair<bool, std::string>> checks;
  std::vector<std::string> notes;
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 1e6 ? "%.2f" : "%.3g", v);
  return buf;
}

/// The operands of one call, logical and dense (layouts are applied when
/// the call runs).
struct CallData {
  int64_t B = 0, rows = 0, maxSlots = 6;
  int32_t numRequests = 0;
  std::vector<uint32_t> iro, cache, slots;
  std::vector<uint8_t> k, g, ring;
  std::vector<float> ape;
};

/// How the operands are laid out in memory.
struct Layout {
  const char *name = "dense";
  int64_t rowPad = 0;     ///< extra elements per k/gate row
  int64_t pooledPad = 0;  ///< extra elements per pooled row
  int64_t slotPad = 0;    ///< extra elements per ring slot
  int64_t inner = 1;      ///< innermost stride of k, gate, pooled, the ring
  int64_t metaStride = 1; ///< stride of metadata views
  int64_t guard = 16;     ///< elements before and after every buffer
};

enum Op : unsigned {
  RingClose = 1,
  PoolOffsets = 2,
  Compress = 4,
  SeedTail = 8,
  AllOps = 15
};

/// What a call left behind, as dense logical contents.
struct Outputs {
  Status status;
  std::vector<uint32_t> pro, closed;
  std::vector<uint8_t> closedRows, pooled, ring;
  bool canaries = true;  ///< guards, padding and every input unchanged
  bool untouched = true; ///< no output changed at all
  uint64_t statusWord = 0; ///< the calls' status word (device runs)
};

/// Runs the `ops` of one call on the device (kernels) or on the host
/// (kernels null: the reference). compress reads `proIn` if given, else
/// what pool_offsets wrote; pooled has `pooledRows` rows.
Outputs run(const KernelConfig &config, const KernelSet *kernels,
            const CallData &d, const Layout &l, Validation validation,
            unsigned ops, int64_t pooledRows,
            const std::vector<uint32_t> *proIn = nullptr) {
  const int64_t D = config.headDim, K = config.kpool, G = l.guard,
                es = elementTypeSize(config.elementType), ms = l.metaStride;
  const reference::Geometry geometry{config.elementType, D, K,
                                     kSubnormalWeights};
  const int64_t I = l.inner;
  Tensor k(es, {d.rows, D}, {D * I + l.rowPad, I}, G),
      g(es, {d.rows, D}, {D * I + l.rowPad, I}, G), ape(4, {K, D}, {}, G),
      iro(4, {d.B + 1}, {ms}, G), cache(4, {d.B}, {ms}, G),
      slots(4, {d.B}, {ms}, G), proOut(4, {d.B + 1}, {ms}, G),
      proGiven(4, {d.B + 1}, {ms}, G), closed(4, {d.B}, {ms}, G),
      closedRows(es, {d.B, D}, {D * I + l.pooledPad, I}, G),
      pooled(es, {pooledRows, D}, {D * I + l.pooledPad, I}, G),
      ring(es, {d.maxSlots, 2, K, D},
           {2 * K * D * I + l.slotPad, K * D * I, D * I, I}, G);
  std::mt19937 rng(99);
  k.fillRandom(rng, d.k);
  g.fillRandom(rng, d.g);
  ape.fillRandom(rng, bytesOf(d.ape));
  iro.fillRandom(rng, bytesOf(d.iro));
  cache.fillRandom(rng, bytesOf(d.cache));
  slots.fillRandom(rng, bytesOf(d.slots));
  proGiven.fillRandom(rng, proIn ? bytesOf(*proIn) : bytesOf(d.iro));
  ring.fillRandom(rng, d.ring);
  // Outputs start as canaries everywhere: 0x7f7f is a huge finite bf16
  // and f32, a NaN in f16; no result is one.
  for (Tensor *t : {&proOut, &closed, &closedRows, &pooled})
    t->fill(0x7f);
  Tensor &pro = proIn ? proGiven : proOut;

  std::vector<Tensor *> inputs = {&k,     &g,     &ape,     &iro,
                                  &cache, &slots, &proGiven};
  std::vector<Tensor *> outputs = {&proOut, &closed, &closedRows, &pooled,
                                   &ring};
  std::vector<std::vector<uint8_t>> before;
  for (Tensor *t : inputs)
    before.push_back(t->image);
  for (Tensor *t : outputs)
    before.push_back(t->image);

  Outputs out;
  auto step = [&](Status s) {
    if (out.status.ok() && !s.ok())
      out.status = s;
  };
  if (kernels) {
    // Each op's arguments from the call's operands by their table names, on
    // the host copies (to check) or on the device; ring_close's `pooled` is
    // `closedRows`, and compress takes `compressPro` as its
    // pool_row_offsets.
    auto args = [&](auto proto, bool host, Tensor &compressPro) {
      using A = decltype(proto);
      auto v = [&](Tensor &t) { return host ? t.hostView() : t.deviceView(); };
      A a = test::argsByName<A>({{"closed_pool", v(closed)},
                                 {"pool_row_offsets", v(proOut)},
                                 {"pooled", v(pooled)},
                                 {"tail", v(ring)},
                                 {"k", v(k)},
                                 {"gate", v(g)},
                                 {"ape", v(ape)},
                                 {"input_row_offsets", v(iro)},
                                 {"cache_lengths", v(cache)},
                                 {"slot_idx", v(slots)}},
                                d.numRequests);
      if (std::is_same_v<A, RingCloseArgs>)
        a = test::with(a, {{"pooled", v(closedRows)}});
      if (std::is_same_v<A, CompressArgs>)
        a = test::with(a, {{"pool_row_offsets", v(compressPro)}});
      return a;
    };
    auto ringCloseArgs = [&](bool host) {
      return args(RingCloseArgs{}, host, pro);
    };
    auto poolOffsetsArgs = [&](bool host) {
      return args(PoolOffsetsArgs{}, host, pro);
    };
    auto compressArgs = [&](bool host, Tensor &compressPro) {
      return args(CompressArgs{}, host, compressPro);
    };
    auto seedTailArgs = [&](bool host) {
      return args(SeedTailArgs{}, host, pro);
    };
    // Check: validate the host copies before anything goes up, as a GPU
    // engine does (a GPU call reads no metadata back); compress's
    // pool_row_offsets, when pool_offsets computes them, are checked as
    // the reference computes them.
    if (validation == Validation::Check) {
      Tensor proHost(4, {d.B + 1}, {ms}, G);
      std::vector<uint32_t> expected(d.B + 1);
      reference::poolOffsets(geometry, denseView(expected.data(), {d.B + 1}),
                             iro.hostView(), cache.hostView());
      proHost.fill(0, bytesOf(proIn ? *proIn : expected));
      if (ops & RingClose)
        step(kernels->check(ringCloseArgs(true)));
      if (ops & PoolOffsets)
        step(kernels->check(poolOffsetsArgs(true)));
      if (ops & Compress)
        step(kernels->check(compressArgs(true, proHost)));
      if (ops & SeedTail)
        step(kernels->check(seedTailArgs(true)));
      validation = Validation::Auto;
      if (!out.status.ok()) {
        out.untouched = true;
        return out;
      }
    }
    cuda::OwnedStream stream;
    // Every call records its smallest bad-metadata finding in one status
    // word (docs/semantics.md, "The status word").
    Tensor status(8, {1});
    status.upload(stream.get());
    Stream on(stream.get(), static_cast<uint64_t *>(status.deviceView().data));
    for (Tensor *t : inputs)
      t->upload(stream.get());
    for (Tensor *t : outputs)
      t->upload(stream.get());
    if (ops & RingClose)
      step(kernels->ringClose(ringCloseArgs(false), on, validation));
    if (ops & PoolOffsets)
      step(kernels->poolOffsets(poolOffsetsArgs(false), on, validation));
    if (ops & Compress)
      step(kernels->compress(compressArgs(false, pro), on, validation));
    if (ops & SeedTail)
      step(kernels->seedTail(seedTailArgs(false), on, validation));
    for (Tensor *t : inputs)
      t->image = t->download(stream.get());
    for (Tensor *t : outputs)
      t->image = t->download(stream.get());
    std::vector<uint8_t> word = status.download(stream.get());
    std::memcpy(&out.statusWord, word.data(), 8);
  } else {
    if (ops & RingClose)
      reference::ringClose(geometry, closedRows.hostView(), closed.hostView(),
                           ring.hostView(), k.hostView(), g.hostView(),
                           ape.hostView(), iro.hostView(), cache.hostView(),
                           slots.hostView(), d.numRequests);
    if (ops & PoolOffsets)
      reference::poolOffsets(geometry, proOut.hostView(), iro.hostView(),
                             cache.hostView());
    if (ops & Compress)
      reference::compress(geometry, pooled.hostView(), k.hostView(),
                          g.hostView(), ape.hostView(), iro.hostView(),
                          pro.hostView(), cache.hostView());
    if (ops & SeedTail)
      reference::seedTail(geometry, ring.hostView(), k.hostView(), g.hostView(),
                          iro.hostView(), cache.hostView(), slots.hostView(),
                          d.numRequests);
  }
  size_t i = 0;
  for (Tensor *t : inputs)
    out.canaries &= t->image == before[i++];
  for (Tensor *t : outputs) {
    out.canaries &= t->outsideUnchanged(before[i], t->image);
    out.untouched &= t->image == before[i++];
  }
  out.pro = wordsOf(proOut.dense());
  out.closed = wordsOf(closed.dense());
  out.closedRows = closedRows.dense();
  out.pooled = pooled.dense();
  out.ring = ring.dense();
  return out;
}

/// Random ape, keys, gates and ring contents for `d`'s geometry: keys
/// normal(0, 1), gates normal(0, 6) and ape normal(0, 2), so that the
/// softmax discriminates and a misplaced ape shows.
void randomize(const KernelConfig &config, CallData &d, std::mt19937 &rng) {
  const int64_t D = config.headDim, K = config.kpool;
  const ElementType t = config.elementType;
  d.k = randomElements(t, d.rows * D, rng, 1.f);
  d.g = randomElements(t, d.rows * D, rng, 6.f);
  d.ring.clear();
  for (int64_t s = 0; s < d.maxSlots; ++s)
    for (float sigma : {1.f, 6.f}) {
      std::vector<uint8_t> half = randomElements(t, K * D, rng, sigma);
      d.ring.insert(d.ring.end(), half.begin(), half.end());
    }
  std::normal_distribution<float> apeDist(0.f, 2.f);
  d.ape.resize(K * D);
  for (float &a : d.ape)
    a = apeDist(rng);
}

/// The ragged mixed call of case (a): valid metadata.
CallData raggedCall(const KernelConfig &config, unsigned seed) {
  CallData d;
  // prefill, speculative decode past 2^18, decode, chunked prefill
  // continuation, no tokens, batch padding (num_requests = 5). Requests 1
  // and 3 hold ring members for every kpool of 2 to 4: two pools closed
  // from the ring.
  std::vector<uint32_t> tokens = {37, 3, 1, 19, 0, 0};
  d.cache = {0, 300001, 6, 11, 5, 9};
  d.slots = {3, 0, 5, 1, 4, 2};
  d.B = 6;
  d.numRequests = 5;
  d.iro = {0};
  for (uint32_t n : tokens)
    d.iro.push_back(d.iro.back() + n);
  d.rows = d.iro.back();
  std::mt19937 rng(seed);
  randomize(config, d, rng);
  return d;
}

/// Per pooled row and channel, the largest |member key|, for valid
/// metadata: ring_close's rows (members from the ring and from k) and
/// compress's rows.
void memberScales(const KernelConfig &config, const CallData &d,
                  const std::vector<uint32_t> &pro,
                  std::vector<double> &closedScales,
                  std::vector<double> &pooledScales) {
  const int64_t D = config.headDim, K = config.kpool;
  const int64_t es = elementTypeSize(config.elementType);
  const ElementType t = config.elementType;
  for (int64_t b = 0; b < d.B; ++b) {
    int64_t c = d.cache[b], n = int64_t(d.iro[b + 1]) - d.iro[b];
    int64_t held = c % K;
    std::vector<const uint8_t *> members;
    if (b < d.numRequests && held > 0 && n >= K - held)
      for (int64_t m = 0; m < K; ++m)
        members.push_back(m < held
                              ? &d.ring[((d.slots[b] * 2 + 0) * K + m) * D * es]
                              : &d.k[(d.iro[b] + m - held) * D * es]);
    if (members.empty())
      closedScales.insert(closedScales.end(), D, 0.0);
    else
      appendScales(t, D, members, closedScales);
  }
  pooledScales.assign(int64_t(pro.back()) * D, 0.0);
  for (int64_t b = 0; b < d.B; ++b) {
    reference::PoolRange r =
        reference::poolRange(K, d.cache[b], int64_t(d.iro[b + 1]) - d.iro[b]);
    for (int64_t j = 0; j < r.count; ++j) {
      std::vector<const uint8_t *> members;
      for (int64_t m = 0; m < K; ++m)
        members.push_back(&d.k[(d.iro[b] + r.skip + j * K + m) * D * es]);
      std::vector<double> s;
      appendScales(t, D, members, s);
      std::copy(s.begin(), s.end(), pooledScales.begin() + (pro[b] + j) * D);
    }
  }
}

/// Per pooled row and channel, the largest |key| of the whole call (k and
/// the ring's keys): the scale for calls whose metadata is bad.
std::vector<double> callScales(const KernelConfig &config, const CallData &d,
                               int64_t rows) {
  const int64_t D = config.headDim, K = config.kpool;
  const int64_t es = elementTypeSize(config.elementType);
  std::vector<const uint8_t *> keys;
  for (int64_t r = 0; r < d.rows; ++r)
    keys.push_back(&d.k[r * D * es]);
  for (int64_t s = 0; s < d.maxSlots; ++s)
    for (int64_t m = 0; m < K; ++m)
      keys.push_back(&d.ring[(s * 2 * K + m) * D * es]);
  std::vector<double> one, all;
  appendScales(config.elementType, D, keys, one);
  for (int64_t r = 0; r < rows; ++r)
    all.insert(all.end(), one.begin(), one.end());
  return all;
}

/// Compares a device call with the reference: the exact outputs bit for
/// bit, pooled rows within tolerance (unwritten rows keep their canaries:
/// a canary against a value is far out of tolerance).
void compareWithReference(Case &c, const KernelConfig &config,
                          const Outputs &gpu, const Outputs &ref,
                          const std::vector<double> &closedScales,
                          const std::vector<double> &pooledScales) {
  const ElementType t = config.elementType;
  const double tol = toleranceUlp(t);
  c.check(gpu.status.ok(),
          "the kernels ran" + (gpu.status.ok()
                                   ? std::string()
                                   : " (" + gpu.status.message() + ")"));
  c.check(gpu.pro == ref.pro, "pool_offsets equal the reference");
  int64_t closedCount = 0;
  for (uint32_t v : ref.closed)
    closedCount += int32_t(v) >= 0;
  c.check(gpu.closed == ref.closed,
          "ring_close closed_pool equals the reference");
  double e1 = maxUlpError(t, config.headDim, gpu.closedRows, ref.closedRows,
                          closedScales);
  c.check(e1 <= tol, "ring_close pooled rows within " + fmt(tol) +
                         " ulp of the reference (max " + fmt(e1) + ")");
  int64_t rows = ref.pooled.size() / elementTypeSize(t) / config.headDim;
  double e2 =
      maxUlpError(t, config.headDim, gpu.pooled, ref.pooled, pooledScales);
  c.check(e2 <= tol, "compress pooled rows within " + fmt(tol) +
                         " ulp of the reference (max " + fmt(e2) + ")");
  c.check(gpu.ring == ref.ring, "seed_tail ring equals the reference");
  c.check(gpu.canaries,
          "guards and padding around outputs intact, inputs unchanged");
  c.note(std::to_string(closedCount) + " closed by ring_close, max " + fmt(e1) +
         " ulp; " + std::to_string(rows) + " pooled rows, max " + fmt(e2) +
         " ulp");
}

std::string describe(const KernelConfig &c) {
  return std::string(elementTypeName(c.elementType)) + " d" +
         std::to_string(c.headDim) + " k" + std::to_string(c.kpool);
}

//===----------------------------------------------------------------------===//
// (a) ragged call and empty calls against the reference
//===----------------------------------------------------------------------===//

void caseRagged(const KernelSet &kernels) {
  const KernelConfig &config = kernels.config();
  CallData d = raggedCall(config, 11);
  std::vector<uint32_t> pro(d.B + 1);
  reference::poolOffsets({config.elementType, config.headDim, config.kpool},
                         denseView(pro.data(), {d.B + 1}),
                         denseView(d.iro.data(), {d.B + 1}),
                         denseView(d.cache.data(), {d.B}));
  Layout dense;
  Outputs gpu =
      run(config, &kernels, d, dense, Validation::Check, AllOps, pro.back());
  Outputs ref =
      run(config, nullptr, d, dense, Validation::Check, AllOps, pro.back());
  std::vector<double> closedScales, pooledScales;
  memberScales(config, d, pro, closedScales, pooledScales);
  {
    Case c(describe(config) + ": (a) ragged call, all four ops vs reference");
    compareWithReference(c, config, gpu, ref, closedScales, pooledScales);
    c.check(gpu.statusWord == 0, "the status word stays 0");
    if (config.kpool > 1) {
      int64_t closedCount = 0;
      for (uint32_t v : gpu.closed)
        closedCount += int32_t(v) >= 0;
      c.check(closedCount >= 2 && gpu.ring != d.ring,
              "the call closes pools from the ring and seeds it");
    }
  }

  // Empty calls: no requests at all, and requests with num_requests = 0.
  CallData none;
  none.iro = {0};
  std::mt19937 rng(5);
  randomize(config, none, rng);
  Outputs g0 = run(config, &kernels, none, dense, Validation::Check, AllOps, 0);
  Outputs r0 = run(config, nullptr, none, dense, Validation::Check, AllOps, 0);
  {
    Case c(describe(config) + ": (a) no requests");
    compareWithReference(c, config, g0, r0, {}, {});
  }
  CallData zero = d;
  zero.numRequests = 0;
  Outputs gz =
      run(config, &kernels, zero, dense, Validation::Check, AllOps, pro.back());
  Outputs rz =
      run(config, nullptr, zero, dense, Validation::Check, AllOps, pro.back());
  std::vector<double> cs, ps;
  memberScales(config, zero, pro, cs, ps);
  Case c(describe(config) + ": (a) num_requests = 0");
  compareWithReference(c, config, gz, rz, cs, ps);
}

//===----------------------------------------------------------------------===//
// (b) a chunked schedule against one-shot compression, on the device
//===----------------------------------------------------------------------===//

void caseSchedule(const KernelSet &kernels, bool fused) {
  const KernelConfig &config = kernels.config();
  const int64_t chunk = 7, decodeCalls = 6;
  Case c(describe(config) + ": (b) chunked schedule (chunk " +
         std::to_string(chunk) + ", then decode 3/1 tokens" +
         (fused ? ", each call one fused kpool.step" : "") + ") vs one-shot");
  const std::vector<int64_t> prompts = {37, 130, 5, 66};
  std::vector<int64_t> lengths;
  for (int64_t p : prompts)
    lengths.push_back(p + 2 * decodeCalls);
  std::mt19937 rng(23);
  std::vector<Sequence> seqs = randomSequences(
      config.elementType, config.headDim, {3, 0, 5, 1}, lengths, rng);
  std::normal_distribution<float> apeDist(0.f, 2.f);
  std::vector<float> ape(config.kpool * config.headDim);
  for (float &a : ape)
    a = apeDist(rng);
  DeviceSchedule schedule(kernels, seqs, 6, ape);
  schedule.fused = fused;
  Status status;
  int64_t calls = 0;
  for (std::vector<int64_t> counts;
       status.ok() &&
       !(counts = reference::nextPrefillCall(
             prompts, [&](size_t r) { return schedule.done(r); }, chunk))
            .empty();
       ++calls)
    status = schedule.step(counts, nullptr, nullptr);
  for (int64_t c = 0; c < decodeCalls && status.ok(); ++c, ++calls)
    status = schedule.step(std::vector<int64_t>(seqs.size(), c % 2 ? 1 : 3),
                           nullptr, nullptr);
  c.check(status.ok(), "the schedule ran (" + std::to_string(calls) + " calls" +
                           (status.ok() ? "" : ": " + status.message()) + ")");
  if (!status.ok())
    return;
  DeviceSchedule::Report r = schedule.checkAgainstOneShot("  ");
  c.check(r.ringDiffer == 0 && (config.kpool == 1 || r.fromRing > 0),
          "pools ring_close closed from ring members are bit-identical to "
          "one-shot compress");
  c.check(r.missing == 0 && r.duplicated == 0 && r.differ == 0 &&
              r.checked == r.produced,
          "every pool produced exactly once, bit-identical to one-shot "
          "compress");
  c.check(r.maxUlp <= toleranceUlp(config.elementType),
          "pools within " + fmt(toleranceUlp(config.elementType)) +
              " ulp of the reference (max " + fmt(r.maxUlp) + ")");
  c.note(std::to_string(calls) + " calls, " + std::to_string(r.checked) +
         " pools (" + std::to_string(r.fromRing) +
         " closed from the ring), max " + fmt(r.maxUlp) + " ulp vs reference");
}

//===----------------------------------------------------------------------===//
// (f) speculative decoding: random verify schedules with rollback
//===----------------------------------------------------------------------===//

/// `count` random verify schedules (test/lib/Reference/VerifySchedule.h):
/// verify steps of 1 + d tokens (d = 1..7) whose rejected drafts are junk,
/// mixed with decode and chunked prefill, a ring window R >= K + d - 1 on
/// the device; after every rollback and in the end each request's pools
/// are bit-identical to a one-shot compress of its accepted sequence.
void caseSpeculative(const KernelSet &kernels, int64_t count) {
  const KernelConfig &config = kernels.config();
  const int64_t K = config.kpool, D = config.headDim;
  Case c(describe(config) + ": (f) " + std::to_string(count) +
         " random verify schedules, R >= K + d - 1, vs one-shot of the "
         "accepted sequence");
  reference::SplitMix pick(0x5bec + K * 131 + D +
                           uint64_t(config.elementType) * 7919);
  std::mt19937 rng(29);
  std::normal_distribution<float> apeDist(0.f, 2.f);
  int64_t ok = 0, steps = 0, verifies = 0, pools = 0, fusedSchedules = 0;
  std::string firstFailure;
  for (int64_t i = 0; i < count; ++i) {
    int64_t d = pick.range(1, 7);
    int64_t window = K + d - 1 + (pick.unit() < 0.3 ? pick.range(1, 5) : 0);
    reference::VerifySchedule plan =
        reference::randomVerifySchedule(pick, K, d, window);
    std::vector<Sequence> seqs = randomSequences(
        config.elementType, D, plan.slots, plan.lengths, rng);
    std::vector<float> ape(K * D);
    for (float &a : ape)
      a = apeDist(rng);
    DeviceSchedule schedule(kernels, seqs, 6, ape, window);
    // Every other schedule runs each call as one fused kpool.step on the
    // same ring window.
    schedule.fused = i % 2 == 1;
    fusedSchedules += schedule.fused;
    Status status;
    for (const auto &step : plan.steps) {
      std::vector<int64_t> counts(seqs.size(), -1), accepted(seqs.size(), -1);
      for (const reference::VerifyEntry &e : step) {
        counts[e.request] = e.count;
        if (e.verify) {
          accepted[e.request] = e.accepted;
          ++verifies;
        }
      }
      status = schedule.step(counts, nullptr, nullptr, &accepted);
      ++steps;
      if (!status.ok())
        break;
    }
    DeviceSchedule::Report r;
    if (status.ok())
      r = schedule.checkAgainstOneShot(firstFailure.empty() ? "  " : "");
    bool good = status.ok() && r.missing == 0 && r.duplicated == 0 &&
                r.differ == 0 && r.checked == r.produced;
    for (size_t q = 0; good && q < seqs.size(); ++q)
      good = schedule.done(q) == plan.lengths[q];
    pools += r.checked;
    if (good) {
      ++ok;
    } else if (firstFailure.empty()) {
      firstFailure = "schedule " + std::to_string(i) + " (" +
                     plan.describe() + ")" +
                     (status.ok() ? "" : ": " + status.message());
    }
  }
  c.check(ok == count, "every schedule's pools bit-identical to one-shot "
                       "compress of its accepted sequence, each pool "
                       "produced once after rollback" +
                           (firstFailure.empty() ? ""
                                                 : "; first failure: " +
                                                       firstFailure));
  c.note(std::to_string(ok) + " of " + std::to_string(count) +
         " schedules exact (" + std::to_string(fusedSchedules) +
         " of them through the fused kpool.step), " + std::to_string(steps) +
         " calls, " + std::to_string(verifies) + " verify steps rolled back, " +
         std::to_string(pools) + " pools checked");
}

//===----------------------------------------------------------------------===//
// (c) strided views against dense ones, on the device
//===----------------------------------------------------------------------===//

void caseStrided(const KernelSet &kernels) {
  const KernelConfig &config = kernels.config();
  CallData d = raggedCall(config, 13);
  std::vector<uint32_t> pro(d.B + 1);
  reference::poolOffsets({config.elementType, config.headDim, config.kpool},
                         denseView(pro.data(), {d.B + 1}),
                         denseView(d.iro.data(), {d.B + 1}),
                         denseView(d.cache.data(), {d.B}));
  Outputs dense =
      run(config, &kernels, d, Layout(), Validation::Check, AllOps, pro.back());
  Layout padded;
  padded.name = "padded k/gate/pooled rows (+5/+3), ring slot (+7)";
  padded.rowPad = 5;
  padded.pooledPad = 3;
  padded.slotPad = 7;
  Layout metadata;
  metadata.name = "metadata with stride 2";
  metadata.metaStride = 2;
  Layout misaligned;
  misaligned.name = "every base one element past alignment";
  misaligned.guard = 1;
  Layout inner;
  inner.name = "k, gate, pooled and ring rows with innermost stride 2 (the "
               "general-stride kernels)";
  inner.inner = 2;
  for (const Layout &l : {padded, metadata, misaligned, inner}) {
    int64_t stridedBefore = kernelLaunches("_strided");
    Outputs s =
        run(config, &kernels, d, l, Validation::Check, AllOps, pro.back());
    int64_t strided = kernelLaunches("_strided") - stridedBefore;
    bool same = s.status.ok() && dense.status.ok() && s.pro == dense.pro &&
                s.closed == dense.closed && s.closedRows == dense.closedRows &&
                s.pooled == dense.pooled && s.ring == dense.ring;
    Case c(describe(config) + ": (c) " + l.name + " vs dense");
    c.check(same, "all four ops equal the dense results bit for bit" +
                      (s.status.ok() ? std::string()
                                     : " (" + s.status.message() + ")"));
    c.check(s.canaries, "padding and guards intact, inputs unchanged");
    // Through the emulated driver: which kernels ran. kpool's
    // general-stride kernels (ring_close, compress, seed_tail; pool_offsets
    // has one kernel) take views whose innermost stride is not 1.
    if (stridedBefore >= 0) {
      bool want = l.inner != 1;
      c.check(want ? strided == 3 : strided == 0,
              std::string(want ? "ring_close, compress and seed_tail ran "
                                 "their general-stride kernels"
                               : "no general-stride kernel ran") +
                  " (" + std::to_string(strided) + " launches)");
    }
  }
}

//===----------------------------------------------------------------------===//
// (d) bad metadata, kernels' guards only
//===----------------------------------------------------------------------===//

void caseBadMetadata(const KernelSet &kernels) {
  const KernelConfig &config = kernels.config();
  const reference::Geometry geometry{config.elementType, config.headDim,
                                     config.kpool};
  // Requests: 0 valid; 1 slot 9 of 6; 2 rows reversed; 3 rows past k's 20;
  // 4 reversed; 5 valid, its last pool past pooled's rows. Request 0 is
  // given one pooled row fewer than it completes.
  CallData d;
  d.B = 6;
  d.iro = {0, 7, 12, 9, 30, 12, 20};
  d.cache = {0, 5, 300001, 3, 1, 6};
  d.slots = {3, 9, 0, 5, 1, 2};
  d.rows = 20;
  std::mt19937 rng(17);
  randomize(config, d, rng);
  std::vector<uint32_t> pro(d.B + 1);
  reference::poolOffsets(geometry, denseView(pro.data(), {d.B + 1}),
                         denseView(d.iro.data(), {d.B + 1}),
                         denseView(d.cache.data(), {d.B}));
  std::vector<uint32_t> badPro = pro;
  if (badPro[1] > badPro[0])
    --badPro[1];
  int64_t pooledRows = std::max<int64_t>(0, int64_t(pro.back()) - 2);
  Layout l;
  l.name = "bad metadata";
  l.rowPad = 3;
  l.slotPad = 5;
  for (int32_t numRequests : {int32_t(d.B), int32_t(-3), int32_t(d.B + 5)}) {
    d.numRequests = numRequests;
    Case c(describe(config) +
           ": (d) bad slot, reversed/overlong rows, too few pooled rows, "
           "num_requests " +
           std::to_string(numRequests) + ", no validation, vs reference");
    Outputs gpu = run(config, &kernels, d, l, Validation::Trust, AllOps,
                      pooledRows, &badPro);
    Outputs ref = run(config, nullptr, d, l, Validation::Trust, AllOps,
                      pooledRows, &badPro);
    std::vector<double> scales =
        callScales(config, d, std::max(d.B, pooledRows));
    compareWithReference(c, config, gpu, ref, scales, scales);
    Status word = statusWordError(gpu.statusWord);
    c.check(!word.ok() && word.message().find("request ") != std::string::npos,
            "the status word records a finding naming a request");
    c.note("status word: \"" + word.message() + "\"");
  }
}

//===----------------------------------------------------------------------===//
// (e) validation of device-resident metadata
//===----------------------------------------------------------------------===//

void caseValidation(const KernelSet &kernels) {
  const KernelConfig &config = kernels.config();
  CallData good = raggedCall(config, 19);
  std::vector<uint32_t> pro(good.B + 1);
  reference::poolOffsets({config.elementType, config.headDim, config.kpool},
                         denseView(pro.data(), {good.B + 1}),
                         denseView(good.iro.data(), {good.B + 1}),
                         denseView(good.cache.data(), {good.B}));
  const int64_t P = pro.back();
  struct Bad {
    const char *what;
    Op op;
    std::function<void(CallData &, std::vector<uint32_t> &, int64_t &)> mutate;
    std::vector<std::string> expect;
  };
  const uint32_t reversedEnd = good.iro[2] - 1;
  std::vector<Bad> cases = {
      {"pool_offsets, rows of request 2 reversed",
       PoolOffsets,
       [&](CallData &d, auto &, auto &) { d.iro[3] = reversedEnd; },
       {"pool_offsets", "request 2", "input_row_offsets[3]"}},
      {"compress, rows of request 5 past k",
       Compress,
       [&](CallData &d, auto &, auto &) { d.iro[6] = d.rows + 10; },
       {"compress", "request 5", "input_row_offsets[6]", "rows of 'k'"}},
      {"compress, pool_row_offsets count of request 3 off by one",
       Compress,
       [&](CallData &, auto &p, auto &rows) {
         for (size_t b = 4; b < p.size(); ++b)
           ++p[b];
         ++rows;
       },
       {"compress", "request 3", "pool_row_offsets[4]"}},
      {"compress, pooled one row short",
       Compress,
       [&](CallData &, auto &, auto &rows) { --rows; },
       {"compress", "pool_row_offsets[6]", "'pooled'"}},
      {"ring_close, slot of request 1 out of range",
       RingClose,
       [&](CallData &d, auto &, auto &) { d.slots[1] = 9; },
       {"ring_close", "request 1", "slot_idx[1] = 9", "max_slots"}},
      {"ring_close, rows of request 2 reversed",
       RingClose,
       [&](CallData &d, auto &, auto &) { d.iro[3] = reversedEnd; },
       {"ring_close", "request 2", "input_row_offsets[3]"}},
      {"ring_close, num_requests = -1",
       RingClose,
       [&](CallData &d, auto &, auto &) { d.numRequests = -1; },
       {"ring_close", "num_requests = -1"}},
      {"seed_tail, request 3 in request 0's slot",
       SeedTail,
       [&](CallData &d, auto &, auto &) { d.slots[3] = d.slots[0]; },
       {"seed_tail", "request 3", "slot_idx[3]", "request 0"}},
      {"seed_tail, num_requests = B + 1",
       SeedTail,
       [&](CallData &d, auto &, auto &) { d.numRequests = int32_t(d.B) + 1; },
       {"seed_tail", "num_requests = 7"}},
  };
  {
    // A call asking for validation of device-resident metadata.
    Tensor iro(4, {good.B + 1}), cache(4, {good.B}), pro(4, {good.B + 1});
    iro.fill(0, bytesOf(good.iro));
    cache.fill(0, bytesOf(good.cache));
    for (Tensor *t : {&iro, &cache, &pro})
      t->upload();
    PoolOffsetsArgs a{};
    a.pool_row_offsets = pro.deviceView();
    a.input_row_offsets = iro.deviceView();
    a.cache_lengths = cache.deviceView();
    Status s = kernels.poolOffsets(a, Validation::Check);
    Case result(describe(config) +
                ": (e) Check on device-resident metadata is an error");
    result.check(!s.ok() &&
                     s.message().find("device memory") != std::string::npos &&
                     s.message().find("KernelSet::check") != std::string::npos,
                 "the error says the metadata is device memory");
    result.note(s.ok() ? "no error" : "\"" + s.message() + "\"");
  }
  for (const Bad &c : cases) {
    CallData d = good;
    std::vector<uint32_t> p = pro;
    int64_t rows = P;
    c.mutate(d, p, rows);
    Outputs out =
        run(config, &kernels, d, Layout(), Validation::Check, c.op, rows, &p);
    bool named = !out.status.ok();
    for (const std::string &s : c.expect)
      named &= out.status.message().find(s) != std::string::npos;
    Case result(describe(config) + ": (e) Check rejects " + c.what);
    result.check(!out.status.ok(), "the call is rejected");
    result.check(named, "the message names the request and the field");
    result.check(out.untouched && out.canaries, "nothing was launched");
    result.note(out.status.ok() ? "no error"
                                : "\"" + out.status.message() + "\"");
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// (g) subnormal weights against the exact function under the kernels' rule
//===----------------------------------------------------------------------===//

void caseSubnormal(const KernelSet &kernels) {
  const KernelConfig &config = kernels.config();
  const int64_t D = config.headDim, K = config.kpool, pools = 64;
  const ElementType t = config.elementType;
  if (K < 2)
    return; // a single member weighs exactly 1
  const bool keep = kSubnormalWeights == reference::SubnormalWeights::Keep;
  Case c(describe(config) + ": (g) subnormal weights " +
         (keep ? "kept" : "flushed") +
         ", gaps of 80..106 with keys up to 3e38, vs exact");
  const int64_t es = elementTypeSize(t);
  const double huge = t == KPOOL_F16 ? 65504.0 : 3e38;
  CallData d;
  d.B = 1;
  d.rows = pools * K;
  d.numRequests = 1;
  d.iro = {0, uint32_t(d.rows)};
  d.cache = {0};
  d.slots = {0};
  std::mt19937 rng(17);
  randomize(config, d, rng);
  std::uniform_real_distribution<double> gateDist(-5, 5);
  for (int64_t m = 0; m < K; ++m) // channel 0: ape 0, z = the gates
    d.ape[m * D] = 0;
  auto setElement = [&](std::vector<uint8_t> &v, int64_t i, double x) {
    uint32_t bits = reference::roundToBits(t, float(x));
    std::memcpy(&v[i * es], &bits, es);
  };
  for (int64_t j = 0; j < pools; ++j)
    for (int64_t ch = 0; ch < D; ++ch) {
      int64_t i = j * D + ch;
      double gap = 80 + 26.0 * double(i) / double(pools * D);
      int64_t a = i % K, b = (a + 1 + (i / K) % (K - 1)) % K;
      double ka = i % 3 == 0 ? 1.0 : i % 3 == 1 ? 0.0 : -0.5;
      double kb = (i / 3) % 3 == 0 ? huge : (i / 3) % 3 == 1 ? -huge : 1.0;
      if (i == 0) // issue 24's finding: key 3e38, z 88 below the other's
        a = 0, b = 1, gap = 88, ka = 1, kb = huge;
      double ga = i == 0 ? 0 : gateDist(rng);
      for (int64_t m = 0; m < K; ++m) {
        double shift = d.ape[a * D + ch] - d.ape[m * D + ch];
        double g = m == a ? ga : ga + shift - (m == b ? gap : 120);
        setElement(d.g, (j * K + m) * D + ch, g);
        setElement(d.k, (j * K + m) * D + ch, m == a ? ka : m == b ? kb : 1.0);
      }
    }
  std::vector<uint32_t> pro = {0, uint32_t(pools)};
  Outputs gpu = run(config, &kernels, d, Layout(), Validation::Check, Compress,
                    pools, &pro);
  c.check(gpu.status.ok(), "compress ran" + (gpu.status.ok()
                                                 ? std::string()
                                                 : " (" +
                                                       gpu.status.message() +
                                                       ")"));
  double worst = 0;
  int64_t bad = 0, subnormal = 0;
  std::string first;
  for (int64_t j = 0; j < pools; ++j)
    for (int64_t ch = 0; ch < D; ++ch) {
      double z[64], k[64], maxZ = -INFINITY, maxAbsZ = 0;
      for (int64_t m = 0; m < K; ++m) {
        int64_t e = (j * K + m) * D + ch;
        float g = float(loadValue(t, &d.g[e * es]));
        z[m] = double(g + d.ape[m * D + ch]); // the f32 sum of the spec
        k[m] = loadValue(t, &d.k[e * es]);
        maxZ = std::max(maxZ, z[m]);
        maxAbsZ = std::max(maxAbsZ, std::fabs(z[m]));
      }
      double Z = 0, A = 0, S = 0, grid = 0;
      for (int64_t m = 0; m < K; ++m) {
        double w = std::exp(z[m] - maxZ);
        subnormal += w >= 0x1p-150 && w < 0x1p-126;
        if (reference::flushesWeight(kSubnormalWeights,
                                     float(z[m]) - float(maxZ)))
          w = 0;
        else if (w < 0x1p-126)
          grid += 2.5 * 0x1p-149 * std::fabs(k[m]);
        Z += w;
        A += w * k[m];
        S += w * std::fabs(k[m]);
      }
      double exact = A / Z, mag = S / Z;
      double bound = t == KPOOL_F32 ? 4 + 6 * maxAbsZ : 1.0;
      // The result is rounded at the magnitude the kept weights' grid error
      // can carry it to (a weight of 0.54 units pushed to 3 makes the
      // value 5.5 times S), not only at S.
      double allowed = bound * ulpOf(t, mag + grid / Z) + grid / Z;
      double got = loadValue(t, &gpu.pooled[(j * D + ch) * es]);
      double err = std::fabs(got - exact);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err / allowed);
      if (j == 0 && ch == 0)
        c.note("finding's case: " + fmt(got) + ", exact " + fmt(exact));
      if (!(err <= allowed) && bad++ == 0)
        first = "pool " + std::to_string(j) + " channel " +
                std::to_string(ch) + ": " + std::to_string(got) +
                " vs exact " + std::to_string(exact) + " (S " +
                std::to_string(mag) + ")";
    }
  c.check(bad == 0, "every pooled value within the bound of the exact one" +
                        (bad ? " (" + std::to_string(bad) + " not; first " +
                                   first + ")"
                             : std::string()));
  c.check(gpu.canaries, "guards intact, inputs unchanged");
  c.note(std::to_string(subnormal) + " subnormal weights; worst error " +
         fmt(worst) + " of the bound");
}

int main(int argc, char **argv) {
  int64_t speculative = 2000;
  std::string only;
  auto usage = [&] {
    std::fprintf(stderr,
                 "usage: %s [--verbose] [--speculative=<schedules per "
                 "configuration>] [--config=<name>[,<name>...]]\n",
                 argv[0]);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--verbose" || arg == "-v") {
      verbose = true;
    } else if (arg.rfind("--speculative=", 0) == 0) {
      speculative = std::atoll(arg.c_str() + 14);
    } else if (arg.rfind("--config=", 0) == 0) {
      only = "," + arg.substr(9) + ",";
    } else {
      return usage();
    }
  }
  struct Config {
    const char *name;
    KernelConfig config;
    KernelBackend backend;
    bool validation; ///< also run case (e)
  };
#define KPOOL_GPU_CONFIG(name, validation)                                     \
  Config{#name, kpool_##name##_cuda_config(), kpool_##name##_cuda_backend(),   \
         validation}
  std::vector<Config> all = {KPOOL_GPU_CONFIG(bf16_d128_k4, true),
                             KPOOL_GPU_CONFIG(f16_d128_k4, false),
                             KPOOL_GPU_CONFIG(f32_d128_k4, false),
                             KPOOL_GPU_CONFIG(bf16_d64_k3, true),
                             KPOOL_GPU_CONFIG(bf16_d8_k1, false),
                             KPOOL_GPU_CONFIG(f16_d32_k2, false)};
#undef KPOOL_GPU_CONFIG
  std::vector<Config> chosen;
  for (Config &c : all)
    if (only.empty() ||
        only.find("," + std::string(c.name) + ",") != std::string::npos)
      chosen.push_back(std::move(c));
  if (chosen.empty() ||
      (!only.empty() && std::count(only.begin(), only.end(), ',') !=
                            int64_t(chosen.size()) + 1)) {
    std::fprintf(stderr, "%s: --config names one of", argv[0]);
    for (const char *n : {"bf16_d128_k4", "f16_d128_k4", "f32_d128_k4",
                          "bf16_d64_k3", "bf16_d8_k1", "f16_d32_k2"})
      std::fprintf(stderr, " %s", n);
    std::fprintf(stderr, "\n");
    return usage();
  }
  std::printf("kpool-gpu-check: %s\n", deviceDescription().c_str());
  std::printf("tolerance vs the reference: bf16/f16 %s, f32 %s ulp of the "
              "largest member key\n",
              fmt(toleranceUlp(KPOOL_BF16)).c_str(),
              fmt(toleranceUlp(KPOOL_F32)).c_str());
  for (Config &c : chosen) {
    KernelSet kernels(c.config, std::move(c.backend));
    caseRagged(kernels);
    caseSchedule(kernels, /*fused=*/false);
    caseSchedule(kernels, /*fused=*/true);
    caseStrided(kernels);
    caseBadMetadata(kernels);
    caseSpeculative(kernels, speculative);
    if (c.validation)
      caseValidation(kernels);
    caseSubnormal(kernels);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  std::printf("digest of every device download: %016llx\n",
              (unsigned long long)downloadDigest());
  return failed ? 1 : 0;
}
