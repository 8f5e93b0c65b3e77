//===- kpool-gpu-contract.cpp - the CUDA kernels against the contract -----===//
//
// kpool's ahead-of-time CUDA kernels (production configurations: head_dim
// 128, kpool 4) checked against the contract itself (docs/semantics.md)
// rather than against the reference implementation: every pooled value
// against the pooling function evaluated in double precision, within the
// contract's bound (bf16 and f16: 1 ulp of the magnitude S = sum w |k| /
// sum w; f32: 4 + 6 max|z| ulps of S), on device buffers -- a GPU's, or the
// emulated CUDA driver's (test/lib/CudaEmu), which executes the same PTX
// through kpool's real CUDA layer.
//
//  (a) bf16, f16 and f32 on a ragged batch (a prefill, a chunk ending inside
//      a pool, a decode past position 2^18, a request with no tokens):
//      pool_offsets bit for bit against the reference, compress within the
//      contract's bound, the status word 0; a line "bits of compress
//      (<type>): <digest>" for comparisons across runs;
//  (d) the fused step without and with the production pool cache (FP8
//      e4m3fn, Hadamard, absmax) over three engine-style calls (prefill
//      chunks ending inside pools, every ring closing, decode): closed_pool,
//      the pool offsets and the ring bit for bit against the reference, the
//      dense pools (closed and compressed) within 1 ulp of S, every cache
//      byte equal to the reference's formulas applied to the kernels' own
//      dense pools, and without the cache ring_close, pool_offsets,
//      compress and seed_tail as separate kernels giving the fused step's
//      bits; the status word 0;
//  (f) compress on k and gate of innermost stride 2 (kpool's strided
//      kernels) gives the dense call's bits;
//  (g) four host threads launching compress concurrently, each on its own
//      stream, get the single-thread bits;
//  (e) through the emulated driver: every launch completed, none with a
//      sanitizer finding (a finding also makes the process exit with
//      status 86).
//
// The executor's schedule and approximate mode come from the environment
// (KPOOL_EMU_ORDER, KPOOL_EMU_APPROX, ...; docs/gpu.md), so the lit test
// (test/Integration/GPU/gpu-contract.test) runs this under several orders
// and adversarial seeds and compares the digests: the same bits under every
// order, within the bound in the adversarial mode.
//
// Prints a line per check, `N passed, M failed` and the digest of every
// device download; exits 1 on failure, 2 when there is no usable GPU.
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4.h"
#include "kpool_gpu_bf16_d128_k4_fp8_hadamard_absmax.h"
#include "kpool_gpu_f16_d128_k4.h"
#include "kpool_gpu_f32_d128_k4.h"

#include "GPU/GpuSupport.h"
#include "Reference/PoolCache.h"
#include "Support/ArgsByName.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kpool;
using namespace kpool::gpu;

namespace {

constexpr int64_t D = 128, K = 4;
int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  (ok ? passed : failed) += 1;
}

void die(const Status &s, const char *what) {
  if (s.ok())
    return;
  std::printf("FAIL: %s: %s\n", what, s.message().c_str());
  std::exit(1);
}

const char *typeName(ElementType t) {
  return t == KPOOL_BF16 ? "bf16" : t == KPOOL_F16 ? "f16" : "f32";
}

uint64_t fnv(const std::vector<uint8_t> &bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes)
    h = (h ^ b) * 0x100000001b3ull;
  return h;
}

/// Downloads `t` into its image.
void fetch(Tensor &t, void *stream = nullptr) { t.image = t.download(stream); }

/// A member row of a pool: its key and gate rows (host bytes).
struct Member {
  const uint8_t *key, *gate;
};

float element(ElementType type, const uint8_t *row, int64_t d) {
  int64_t es = reference::elementSize(type);
  return reference::fromBits(type, reference::elementBits(type, row + d * es));
}

/// The pooling function of one pool and channel in double precision, the
/// magnitude S the contract's tolerance is measured in, and max |z|.
struct Exact {
  double value, magnitude, maxZ;
};
Exact exactPool(ElementType type, const Member members[K], const float *ape,
                int64_t d) {
  double z[K], m = -INFINITY, maxZ = 0;
  for (int64_t i = 0; i < K; ++i) {
    z[i] = double(element(type, members[i].gate, d)) + double(ape[i * D + d]);
    m = std::max(m, z[i]);
    maxZ = std::max(maxZ, std::fabs(z[i]));
  }
  double Z = 0, A = 0, S = 0;
  for (int64_t i = 0; i < K; ++i) {
    double e = std::exp(z[i] - m), key = element(type, members[i].key, d);
    Z += e;
    A += e * key;
    S += e * std::fabs(key);
  }
  return {A / Z, S / Z, maxZ};
}

/// The error of a result in units of the contract's bound: bf16 and f16 at
/// most 1 ulp of S, f32 at most 4 + 6 max|z| ulps of S.
double boundError(ElementType type, const uint8_t *row, int64_t d,
                  const Exact &e) {
  double ulps = std::fabs(double(element(type, row, d)) - e.value) /
                reference::ulpOf(type, e.magnitude);
  return type == KPOOL_F32 ? ulps / (4 + 6 * e.maxZ) : ulps;
}

const char *boundName(ElementType type) {
  return type == KPOOL_F32 ? "4 + 6 max|z| ulps of S" : "1 ulp of S";
}

struct Batch {
  std::vector<uint32_t> cache, tokens, slots;
  int64_t rows() const {
    int64_t n = 0;
    for (uint32_t t : tokens)
      n += t;
    return n;
  }
};

/// A call's inputs: host images (the reference's operands) uploaded to the
/// device.
struct Inputs {
  ElementType type;
  int64_t B, N, es;
  Tensor k, gate, ape, iro, cache, slot, status;
  std::vector<float> apeValues;

  Inputs(ElementType type, const Batch &b, std::mt19937 &rng,
         const std::vector<float> *apeFrom = nullptr)
      : type(type), B(int64_t(b.cache.size())), N(b.rows()),
        es(reference::elementSize(type)), k(es, {N, D}), gate(es, {N, D}),
        ape(4, {K, D}), iro(4, {B + 1}), cache(4, {B}), slot(4, {B}),
        status(8, {1}) {
    std::uniform_real_distribution<float> key(-3, 3), g(-6, 6), a(-1, 1);
    for (int64_t i = 0; i < N * D; ++i) {
      reference::setElementBits(type, k.image.data() + i * es,
                                reference::roundToBits(type, key(rng)));
      reference::setElementBits(type, gate.image.data() + i * es,
                                reference::roundToBits(type, g(rng)));
    }
    apeValues.resize(K * D);
    for (int64_t i = 0; i < K * D; ++i)
      apeValues[i] = apeFrom ? (*apeFrom)[i] : a(rng);
    ape.image = bytesOf(apeValues);
    std::vector<uint32_t> offsets = {0}, cached, slots;
    for (int64_t r = 0; r < B; ++r) {
      offsets.push_back(offsets.back() + b.tokens[r]);
      cached.push_back(b.cache[r]);
      slots.push_back(b.slots.empty() ? 0 : b.slots[r]);
    }
    iro.image = bytesOf(offsets);
    cache.image = bytesOf(cached);
    slot.image = bytesOf(slots);
    for (Tensor *t : {&k, &gate, &ape, &iro, &cache, &slot, &status})
      t->upload();
  }
  uint32_t offset(int64_t r) const { return wordsOf(iro.image)[r]; }
  Member member(int64_t row) const {
    return {k.image.data() + row * D * es, gate.image.data() + row * D * es};
  }
  /// Kernel A's arguments: these inputs on the device, by their table
  /// names, and `outputs` (the call's own operands by name).
  template <typename A>
  A args(std::initializer_list<test::Named> outputs) const {
    A a = test::argsByName<A>({{"k", k.deviceView()},
                               {"gate", gate.deviceView()},
                               {"ape", ape.deviceView()},
                               {"input_row_offsets", iro.deviceView()},
                               {"cache_lengths", cache.deviceView()},
                               {"slot_idx", slot.deviceView()}},
                              int32_t(B));
    return test::with(a, outputs);
  }
  /// The call's context: `stream` and the device status word.
  Stream context(void *stream = nullptr) const {
    return Stream(stream, static_cast<uint64_t *>(status.deviceView().data));
  }
  uint64_t statusWord() {
    fetch(status);
    uint64_t w;
    std::memcpy(&w, status.image.data(), 8);
    return w;
  }
};

/// pool_row_offsets of a call, from the reference.
std::vector<uint32_t> expectedOffsets(Inputs &in) {
  std::vector<uint32_t> pro(in.B + 1);
  reference::poolOffsets({in.type, D, K}, denseView(pro.data(), {in.B + 1}),
                         in.iro.hostView(), in.cache.hostView());
  return pro;
}

//===----------------------------------------------------------------------===//
// (a): compress against the contract.
//===----------------------------------------------------------------------===//

/// The largest error of every pool compress wrote, in units of the bound.
double compressError(const Batch &b, const Inputs &in,
                     const std::vector<uint32_t> &pro,
                     const std::vector<uint8_t> &pooled, int64_t &pools) {
  double worst = 0;
  pools = 0;
  for (int64_t r = 0; r < in.B; ++r) {
    reference::PoolRange range =
        reference::poolRange(K, b.cache[r], b.tokens[r]);
    int64_t start = in.offset(r);
    for (int64_t j = 0; j < range.count; ++j, ++pools) {
      Member members[K];
      for (int64_t m = 0; m < K; ++m)
        members[m] = in.member(start + range.skip + j * K + m);
      const uint8_t *row = pooled.data() + (pro[r] + j) * D * in.es;
      for (int64_t d = 0; d < D; ++d)
        worst = std::max(worst, boundError(in.type, row, d,
                                           exactPool(in.type, members,
                                                     in.apeValues.data(), d)));
    }
  }
  return worst;
}

void testCompress(const KernelSet &kernels) {
  ElementType type = kernels.config().elementType;
  std::string tag =
      std::string(" (") + typeName(type) + ", head_dim 128, kpool 4)";
  std::mt19937 rng(2024);
  Batch b;
  // A prefill, a chunk ending inside a pool, a single decode token, a long
  // continuation, a request with no tokens, a decode past 2^18, a prefill.
  b.cache = {0, 5, 3, 12, 7, 262141, 0};
  b.tokens = {37, 9, 1, 16, 0, 7, 100};
  Inputs in(type, b, rng);
  std::vector<uint32_t> want = expectedOffsets(in);
  int64_t P = want.back();
  Tensor pro(4, {in.B + 1}), pooled(in.es, {P, D});
  pro.upload();
  pooled.upload();
  die(kernels.poolOffsets(
          in.args<PoolOffsetsArgs>({{"pool_row_offsets", pro.deviceView()}}),
          in.context(), Validation::Trust),
      "pool_offsets");
  die(kernels.compress(
          in.args<CompressArgs>({{"pooled", pooled.deviceView()},
                                 {"pool_row_offsets", pro.deviceView()}}),
          in.context(), Validation::Trust),
      "compress");
  fetch(pro);
  fetch(pooled);
  check(wordsOf(pro.image) == want,
        "(a) pool_offsets equals the reference bit for bit (" +
            std::to_string(P) + " pools)" + tag);
  int64_t pools;
  double err = compressError(b, in, want, pooled.image, pools);
  char buf[240];
  std::snprintf(buf, sizeof(buf),
                "(a) compress: %lld pools x %lld channels within %s of the "
                "exact pooling (max %.3f of the bound)%s",
                (long long)pools, (long long)D, boundName(type), err,
                tag.c_str());
  check(err <= 1.0 && pools == P, buf);
  check(in.statusWord() == 0, "(a) the status word stays 0" + tag);
  std::printf("bits of compress (%s): %016llx\n", typeName(type),
              (unsigned long long)fnv(pooled.image));
}

//===----------------------------------------------------------------------===//
// (f), (g): strided views and concurrent launches.
//===----------------------------------------------------------------------===//

void testStridedAndConcurrent(const KernelSet &kernels) {
  std::mt19937 rng(31);
  Batch b;
  b.cache = {0, 6, 2};
  b.tokens = {40, 13, 27};
  Inputs in(KPOOL_BF16, b, rng);
  std::vector<uint32_t> offsets = expectedOffsets(in);
  int64_t P = offsets.back();
  Tensor pro(4, {in.B + 1}), pooled(2, {P, D});
  pro.image = bytesOf(offsets);
  pro.upload();
  pooled.upload();
  auto compress = [&](const View &out, const View &k, const View &g,
                      void *stream) {
    die(kernels.compress(
            in.args<CompressArgs>({{"pooled", out},
                                   {"k", k},
                                   {"gate", g},
                                   {"pool_row_offsets", pro.deviceView()}}),
            in.context(stream), Validation::Trust),
        "compress");
  };
  compress(pooled.deviceView(), in.k.deviceView(), in.gate.deviceView(),
           nullptr);
  fetch(pooled);
  const std::vector<uint8_t> dense = pooled.image;

  // k and gate with channels 2 elements apart (innermost stride 2): kpool's
  // general-stride kernel.
  Tensor kPad(2, {in.N, D}, {2 * D, 2}), gatePad(2, {in.N, D}, {2 * D, 2}),
      pooled2(2, {P, D});
  kPad.fill(0x5a, in.k.image);
  gatePad.fill(0x5a, in.gate.image);
  for (Tensor *t : {&kPad, &gatePad, &pooled2})
    t->upload();
  int64_t stridedBefore = kernelLaunches("_compress_strided");
  compress(pooled2.deviceView(), kPad.deviceView(), gatePad.deviceView(),
           nullptr);
  fetch(pooled2);
  int64_t stridedAfter = kernelLaunches("_compress_strided");
  std::string which =
      stridedAfter < 0 ? " (which kernel ran is not known on a real driver)"
      : stridedAfter > stridedBefore ? " (the strided kernel ran)"
                                     : " (BUT the strided kernel did not run)";
  check(pooled2.image == dense &&
            (stridedAfter < 0 || stridedAfter > stridedBefore),
        "(f) compress on k and gate with innermost stride 2: the dense "
        "call's bits" +
            which);

  // Four host threads launching at once, each on its own stream into its
  // own output; results are copied back in the threads (no shared state),
  // compared here.
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<cuda::DeviceBuffer>> outs;
  for (int t = 0; t < kThreads; ++t)
    outs.push_back(std::make_unique<cuda::DeviceBuffer>(dense.size()));
  std::vector<std::vector<uint8_t>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      cuda::OwnedStream stream;
      View out = denseView(outs[t]->data(), {P, D});
      results[t].assign(dense.size(), 0);
      for (int rep = 0; rep < 3; ++rep) {
        compress(out, in.k.deviceView(), in.gate.deviceView(), stream.get());
        cuda::copy(results[t].data(), outs[t]->data(), dense.size(),
                   stream.get());
        if (results[t] != dense)
          return;
      }
    });
  for (std::thread &t : threads)
    t.join();
  bool same = true;
  for (const auto &r : results)
    same &= r == dense;
  check(same, "(g) 4 host threads launching compress concurrently on their "
              "own streams (3 times each): every result has the "
              "single-thread bits");
  check(in.statusWord() == 0, "(f), (g) the status word stays 0");
}

//===----------------------------------------------------------------------===//
// (d): the fused step, with and without the FP8 pool cache.
//===----------------------------------------------------------------------===//

constexpr int64_t kPageSize = 16, kPagesPerRow = 4, kSlots = 4;

/// What persists across calls: the ring and the paged cache.
struct CacheState {
  int64_t B;
  Tensor keys, scales, table, tail;
  explicit CacheState(int64_t B)
      : B(B), keys(1, {B * kPagesPerRow, kPageSize, D}),
        scales(4, {B * kPagesPerRow, kPageSize}), table(4, {B, kPagesPerRow}),
        tail(2, {kSlots, 2, K, D}) {
    // Pages out of order.
    std::vector<uint32_t> pages(B * kPagesPerRow);
    for (int64_t i = 0; i < B * kPagesPerRow; ++i)
      pages[i] = uint32_t((i * 5 + 3) % (B * kPagesPerRow));
    table.image = bytesOf(pages);
    for (Tensor *t : {&keys, &scales, &table, &tail})
      t->upload();
  }
};

/// One step call: runs the kernel and checks it against the reference.
void stepCall(const KernelSet &plain, const KernelSet &cached,
              const std::string &name, CacheState &cs, const Batch &b,
              std::mt19937 &rng, const std::vector<float> &ape,
              bool withCache) {
  const reference::Geometry g{KPOOL_BF16, D, K};
  const CacheFormat f{CacheEntry::FP8, CacheRotate::Hadamard,
                      CacheScale::Absmax};
  Inputs in(KPOOL_BF16, b, rng, &ape);
  std::vector<uint32_t> want = expectedOffsets(in);
  int64_t P = want.back();
  Tensor closed(2, {in.B, D}), closedPool(4, {in.B}), pro(4, {in.B + 1}),
      pooled(2, {std::max<int64_t>(P, 1), D});
  for (Tensor *t : {&closed, &closedPool, &pro, &pooled})
    t->upload();
  const std::vector<uint8_t> tailBefore = cs.tail.image,
                             keysBefore = cs.keys.image,
                             scalesBefore = cs.scales.image;
  const StepArgs step =
      in.args<StepArgs>({{"closed", closed.deviceView()},
                         {"closed_pool", closedPool.deviceView()},
                         {"pool_row_offsets", pro.deviceView()},
                         {"pooled", pooled.deviceView()},
                         {"tail", cs.tail.deviceView()}});
  if (withCache) {
    StepCacheArgs a = abi::withCache<StepCacheArgs>(step);
    a.cache_keys = cs.keys.deviceView();
    a.cache_scales = cs.scales.deviceView();
    a.block_table = cs.table.deviceView();
    die(cached.stepCache(a, in.context(), Validation::Trust), "step_cache");
  } else {
    die(plain.step(step, in.context(), Validation::Trust), "step");
  }
  for (Tensor *t :
       {&closed, &closedPool, &pro, &pooled, &cs.tail, &cs.keys, &cs.scales})
    fetch(*t);

  // The reference on host copies: ring_close and seed_tail from the ring as
  // it was.
  std::vector<uint8_t> expClosed(closed.image.size()),
      expClosedPool(closedPool.image.size()), expTail = tailBefore,
                                              ringBefore = tailBefore;
  reference::ringClose(g, denseView(expClosed.data(), {in.B, D}),
                       denseView(expClosedPool.data(), {in.B}),
                       denseView(ringBefore.data(), {kSlots, 2, K, D}),
                       in.k.hostView(), in.gate.hostView(), in.ape.hostView(),
                       in.iro.hostView(), in.cache.hostView(),
                       in.slot.hostView(), int32_t(in.B));
  reference::seedTail(g, denseView(expTail.data(), {kSlots, 2, K, D}),
                      in.k.hostView(), in.gate.hostView(), in.iro.hostView(),
                      in.cache.hostView(), in.slot.hostView(), int32_t(in.B));
  std::string tag = "(d) " + name + ": ";
  check(wordsOf(pro.image) == want, tag + "pool offsets bit for bit");
  check(closedPool.image == expClosedPool, tag + "closed_pool bit for bit");
  check(cs.tail.image == expTail, tag + "the ring bit for bit");

  // Dense pools against the exact pooling function.
  double worst = 0;
  int64_t pools = 0;
  auto checkRow = [&](const uint8_t *row, const Member members[K]) {
    for (int64_t d = 0; d < D; ++d)
      worst = std::max(
          worst, boundError(KPOOL_BF16, row, d,
                            exactPool(KPOOL_BF16, members, ape.data(), d)));
    ++pools;
  };
  std::vector<int32_t> ids(in.B);
  std::memcpy(ids.data(), closedPool.image.data(), 4 * in.B);
  for (int64_t r = 0; r < in.B; ++r) {
    int64_t c = b.cache[r], n = b.tokens[r];
    int64_t start = in.offset(r), s = b.slots[r];
    Member members[K];
    if (ids[r] >= 0) {
      int64_t held = c % K;
      for (int64_t m = 0; m < K; ++m) {
        int64_t q = (ids[r] * K + m) % K; // the ring window is K here
        members[m] =
            m < held ? Member{tailBefore.data() + ((s * 2 + 0) * K + q) * D * 2,
                              tailBefore.data() + ((s * 2 + 1) * K + q) * D * 2}
                     : in.member(start + m - held);
      }
      checkRow(closed.image.data() + r * D * 2, members);
    }
    reference::PoolRange range = reference::poolRange(K, c, n);
    for (int64_t j = 0; j < range.count; ++j) {
      for (int64_t m = 0; m < K; ++m)
        members[m] = in.member(start + range.skip + j * K + m);
      checkRow(pooled.image.data() + (want[r] + j) * D * 2, members);
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "%lld pools (closed and compressed) within 1 ulp of S (max "
                "%.3f of the bound)",
                (long long)pools, worst);
  check(worst <= 1.0 && pools > 0, tag + buf);

  if (!withCache) {
    check(cs.keys.image == keysBefore,
          tag + "no cache byte written by the plain step");
    // The same call through the four separate kernels (ring_close,
    // pool_offsets, compress, seed_tail) on the ring as it was: every pool
    // bit-identical whichever kernel built it.
    Tensor tail2(2, {kSlots, 2, K, D}), closed2(2, {in.B, D}),
        closedPool2(4, {in.B}), pro2(4, {in.B + 1}),
        pooled2(2, {std::max<int64_t>(P, 1), D});
    tail2.image = tailBefore;
    for (Tensor *t : {&tail2, &closed2, &closedPool2, &pro2, &pooled2})
      t->upload();
    Stream on = in.context();
    // ring_close's `pooled` is the step's `closed`.
    die(plain.ringClose(
            in.args<RingCloseArgs>({{"pooled", closed2.deviceView()},
                                    {"closed_pool", closedPool2.deviceView()},
                                    {"tail", tail2.deviceView()}}),
            on, Validation::Trust),
        "ring_close");
    die(plain.poolOffsets(
            in.args<PoolOffsetsArgs>({{"pool_row_offsets", pro2.deviceView()}}),
            on, Validation::Trust),
        "pool_offsets");
    die(plain.compress(
            in.args<CompressArgs>({{"pooled", pooled2.deviceView()},
                                   {"pool_row_offsets", pro2.deviceView()}}),
            on, Validation::Trust),
        "compress");
    die(plain.seedTail(in.args<SeedTailArgs>({{"tail", tail2.deviceView()}}),
                       on, Validation::Trust),
        "seed_tail");
    for (Tensor *t : {&tail2, &closed2, &closedPool2, &pro2, &pooled2})
      fetch(*t);
    check(closed2.image == closed.image &&
              closedPool2.image == closedPool.image &&
              pro2.image == pro.image && pooled2.image == pooled.image &&
              tail2.image == cs.tail.image,
          tag + "ring_close, pool_offsets, compress and seed_tail as "
                "separate kernels give the fused step's bits");
    check(in.statusWord() == 0, tag + "the status word stays 0");
    return;
  }
  // The cache: the reference's formulas on the kernels' own dense pools.
  std::vector<uint8_t> expKeys = keysBefore, expScales = scalesBefore;
  View keysView =
      denseView(expKeys.data(), {cs.B * kPagesPerRow, kPageSize, D});
  View scalesView =
      denseView(expScales.data(), {cs.B * kPagesPerRow, kPageSize});
  reference::ringCloseCache(g, f, keysView, scalesView, cs.table.hostView(),
                            closed.hostView(), closedPool.hostView());
  reference::compressCache(g, f, keysView, scalesView, cs.table.hostView(),
                           pooled.hostView(), in.iro.hostView(), pro.hostView(),
                           in.cache.hostView(), in.N);
  size_t changed = 0;
  for (size_t i = 0; i < cs.keys.image.size(); ++i)
    changed += cs.keys.image[i] != keysBefore[i];
  check(cs.keys.image == expKeys && cs.scales.image == expScales,
        tag +
            "every cache byte equals the reference's formulas on the "
            "kernels' dense pools (" +
            std::to_string(changed) + " code bytes written)");
  check(in.statusWord() == 0, tag + "the status word stays 0");
}

void testStep(const KernelSet &plain, const KernelSet &cached,
              const char *label, bool withCache) {
  std::mt19937 rng(77);
  CacheState cs(3);
  std::vector<float> ape(K * D);
  std::uniform_real_distribution<float> a(-1, 1);
  for (float &x : ape)
    x = a(rng);
  Batch call1, call2, call3;
  call1.slots = call2.slots = call3.slots = {2, 0, 3};
  call1.cache = {0, 0, 0};
  call1.tokens = {30, 3, 22}; // chunks ending inside pools
  call2.cache = {30, 3, 22};
  call2.tokens = {1, 2, 9}; // the ring closes for every request
  call3.cache = {31, 5, 31};
  call3.tokens = {1, 1, 1}; // decode
  stepCall(plain, cached, std::string(label) + ", call 1 (prefill chunks)", cs,
           call1, rng, ape, withCache);
  stepCall(plain, cached, std::string(label) + ", call 2 (ring closes)", cs,
           call2, rng, ape, withCache);
  stepCall(plain, cached, std::string(label) + ", call 3 (decode)", cs, call3,
           rng, ape, withCache);
}

} // namespace

int main() {
  std::printf("kpool-gpu-contract: %s\n", deviceDescription().c_str());
#define KPOOL_GPU_KERNELS(name)                                                \
  KernelSet name(kpool_##name##_cuda_config(), kpool_##name##_cuda_backend())
  KPOOL_GPU_KERNELS(bf16_d128_k4);
  KPOOL_GPU_KERNELS(f16_d128_k4);
  KPOOL_GPU_KERNELS(f32_d128_k4);
  KPOOL_GPU_KERNELS(bf16_d128_k4_fp8_hadamard_absmax);
#undef KPOOL_GPU_KERNELS
  testCompress(bf16_d128_k4);
  testCompress(f16_d128_k4);
  testCompress(f32_d128_k4);
  testStridedAndConcurrent(bf16_d128_k4);
  testStep(bf16_d128_k4, bf16_d128_k4_fp8_hadamard_absmax, "step (no cache)",
           false);
  testStep(bf16_d128_k4, bf16_d128_k4_fp8_hadamard_absmax, "step_cache fp8",
           true);
  int64_t launches, withFindings, failures;
  if (emulatedLaunches(launches, withFindings, failures))
    check(launches > 0 && withFindings == 0 && failures == 0,
          "(e) " + std::to_string(launches) +
              " launches through the emulated driver: " +
              std::to_string(failures) + " failed, " +
              std::to_string(withFindings) + " with sanitizer findings");
  std::printf("%d passed, %d failed\n", passed, failed);
  std::printf("digest of every device download: %016llx\n",
              (unsigned long long)downloadDigest());
  return failed ? 1 : 0;
}
