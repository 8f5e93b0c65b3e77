//===- kpool-emu-kernels.cpp - kpool's shipped PTX on the PTX executor ----===//
//
// The executor's test on kpool's real kernels: kpool-aot's CUDA kernels
// (--format=isa: the PTX text kpool ships, and kpool-aot's own host code that
// marshals the memref descriptors and picks the launch geometry) run on the
// executor through ExecutorMgpu, with every sanitizer check on.
//
//  (a) bf16, head_dim 128, kpool 4: pool_offsets bit for bit against the
//      reference, compress against the exact (double precision) pooling
//      function within the contract's 1 ulp of the magnitude S, on a ragged
//      batch (a prefill, a chunk ending inside a pool, a decode past
//      position 2^18, a request with no tokens);
//  (b) the same bits under every schedule: reversed and random block, warp
//      and lane-group orders;
//  (c) the adversarial approximate mode (ex2.approx and div.approx pushed
//      to their ISA bounds, three seeds): still within 1 ulp of S;
//  (d) the fused step writing the production pool cache (FP8 e4m3fn,
//      Hadamard, absmax) over three engine-style calls: closed_pool, the
//      pool offsets and the ring bit for bit against the reference, the
//      dense pools within 1 ulp of S, and every byte of the cache equal to
//      the reference's formulas applied to the executor's own dense pools;
//      again under a random order with adversarial approximations;
//  (e) zero findings (memcheck, racecheck, synccheck, initcheck) in all of
//      it;
//  (f) compress on k and gate of innermost stride 2 (kpool's strided
//      kernel) gives the dense call's bits;
//  (g) concurrent launches from four host threads give the single-thread
//      bits;
//  and the fused step without the cache through the same three calls, bit
//  for bit what ring_close, pool_offsets, compress and seed_tail give as
//  separate kernels.
//
// Prints a line per check and `N passed, M failed`; exits 1 on failure.
// `kpool-emu-kernels --bench [tokens [mode]]` measures the executor's speed on
// the production compress instead.
//
//===----------------------------------------------------------------------===//

#include "kpool_emu_bf16_d128_k4.h"
#include "kpool_emu_bf16_d128_k4_fp8_hadamard_absmax.h"
#ifdef KPOOL_EMU_F32
#include "kpool_emu_f32_d128_k4.h"
#endif

#include "ExecutorMgpu.h"
#include "Reference/Float.h"
#include "Reference/PoolCache.h"
#include "Reference/Reference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kpool;
using namespace kpool::emu;
using namespace kpool::emu::test;

namespace {

constexpr int64_t D = 128, K = 4;
int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed) += 1;
}

/// A dense row-major tensor in "device" memory (host memory the launches
/// may touch).
struct Tensor {
  std::unique_ptr<DeviceBuffer> buffer;
  KPoolView view{};
  int64_t esize = 0, count = 1;

  Tensor(int64_t esize, std::vector<int64_t> sizes) : esize(esize) {
    view.rank = int64_t(sizes.size());
    for (int64_t s : sizes)
      count *= s;
    int64_t stride = 1;
    for (int64_t d = view.rank - 1; d >= 0; --d) {
      view.sizes[d] = sizes[size_t(d)];
      view.strides[d] = stride;
      stride *= sizes[size_t(d)];
    }
    buffer = std::make_unique<DeviceBuffer>(
        size_t(std::max<int64_t>(count, 1) * esize));
    view.data = buffer->data();
  }
  template <class T> T *as() const { return static_cast<T *>(view.data); }
  size_t bytes() const { return size_t(count * esize); }
  std::vector<uint8_t> snapshot() const {
    auto *p = static_cast<const uint8_t *>(view.data);
    return std::vector<uint8_t>(p, p + bytes());
  }
  void restore(const std::vector<uint8_t> &s) const {
    std::memcpy(view.data, s.data(), s.size());
  }
};

/// A host copy of a tensor, for the reference.
struct HostCopy {
  std::vector<uint8_t> bytes;
  KPoolView view;
  explicit HostCopy(const Tensor &t) : bytes(t.snapshot()), view(t.view) {
    view.data = bytes.data();
  }
};

/// A member row of a pool: its key and gate rows.
struct Member {
  const uint8_t *key, *gate;
};

float element(KPoolElementType type, const uint8_t *row, int64_t d) {
  int64_t es = reference::elementSize(type);
  return reference::fromBits(type, reference::elementBits(type, row + d * es));
}

/// The pooling function of one pool and channel in double precision, the
/// magnitude S the contract's tolerance is measured in, and max |z|.
struct Exact {
  double value, magnitude, maxZ;
};
Exact exactPool(KPoolElementType type, const Member members[K],
                const float *ape, int64_t d) {
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
double boundError(KPoolElementType type, const uint8_t *row, int64_t d,
                  const Exact &e) {
  double ulps = std::fabs(double(element(type, row, d)) - e.value) /
                reference::ulpOf(type, e.magnitude);
  return type == KPOOL_F32 ? ulps / (4 + 6 * e.maxZ) : ulps;
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

struct Operands {
  KPoolElementType type;
  int64_t B, N, es;
  Tensor k, gate, ape, iro, cache, slot, status;
  Operands(KPoolElementType type, const Batch &b, std::mt19937 &rng,
           const Tensor *apeFrom = nullptr)
      : type(type), B(int64_t(b.cache.size())), N(b.rows()),
        es(reference::elementSize(type)), k(es, {N, D}), gate(es, {N, D}),
        ape(4, {K, D}), iro(4, {B + 1}), cache(4, {B}), slot(4, {B}),
        status(8, {1}) {
    std::uniform_real_distribution<float> key(-3, 3), g(-6, 6), a(-1, 1);
    for (int64_t i = 0; i < N * D; ++i) {
      reference::setElementBits(type, k.as<uint8_t>() + i * es,
                                reference::roundToBits(type, key(rng)));
      reference::setElementBits(type, gate.as<uint8_t>() + i * es,
                                reference::roundToBits(type, g(rng)));
    }
    for (int64_t i = 0; i < K * D; ++i)
      ape.as<float>()[i] = apeFrom ? apeFrom->as<float>()[i] : a(rng);
    uint32_t row = 0;
    for (int64_t r = 0; r < B; ++r) {
      iro.as<uint32_t>()[r] = row;
      row += b.tokens[size_t(r)];
      cache.as<uint32_t>()[r] = b.cache[size_t(r)];
      slot.as<uint32_t>()[r] = b.slots.empty() ? 0 : b.slots[size_t(r)];
    }
    iro.as<uint32_t>()[B] = row;
  }
  Member member(int64_t row) const {
    return {k.as<uint8_t>() + row * D * es, gate.as<uint8_t>() + row * D * es};
  }
};

std::string findingsSummary(size_t from) {
  const auto &f = launchLog().findings;
  std::string s;
  for (size_t i = from; i < f.size() && i < from + 3; ++i)
    s += "\n  " + f[i];
  return s;
}

//===----------------------------------------------------------------------===//
// (a)-(c): compress.
//===----------------------------------------------------------------------===//

/// Runs pool_offsets and compress; returns the pooled bits.
std::vector<uint8_t> runCompress(const Operands &op, Tensor &pro,
                                 Tensor &pooled) {
  std::memset(pooled.view.data, 0, pooled.bytes());
  uint64_t *status = op.status.as<uint64_t>();
  if (op.type == KPOOL_BF16) {
    kpool_bf16_d128_k4_cuda_pool_offsets(&pro.view, &op.iro.view,
                                         &op.cache.view, status, nullptr);
    kpool_bf16_d128_k4_cuda_compress(&pooled.view, &op.k.view, &op.gate.view,
                                     &op.ape.view, &op.iro.view, &pro.view,
                                     &op.cache.view, status, nullptr);
  } else {
#ifdef KPOOL_EMU_F32
    kpool_f32_d128_k4_cuda_pool_offsets(&pro.view, &op.iro.view, &op.cache.view,
                                        status, nullptr);
    kpool_f32_d128_k4_cuda_compress(&pooled.view, &op.k.view, &op.gate.view,
                                    &op.ape.view, &op.iro.view, &pro.view,
                                    &op.cache.view, status, nullptr);
#endif
  }
  return pooled.snapshot();
}

/// The largest error of every pool compress wrote, in units of the bound.
double compressError(const Batch &b, const Operands &op, const Tensor &pro,
                     const Tensor &pooled, int64_t &pools) {
  double worst = 0;
  pools = 0;
  for (int64_t r = 0; r < op.B; ++r) {
    reference::PoolRange range =
        reference::poolRange(K, b.cache[size_t(r)], b.tokens[size_t(r)]);
    int64_t start = op.iro.as<uint32_t>()[r];
    for (int64_t j = 0; j < range.count; ++j, ++pools) {
      Member members[K];
      for (int64_t m = 0; m < K; ++m)
        members[m] = op.member(start + range.skip + j * K + m);
      int64_t out = pro.as<uint32_t>()[r] + j;
      const uint8_t *row = pooled.as<uint8_t>() + out * D * op.es;
      for (int64_t d = 0; d < D; ++d)
        worst = std::max(worst, boundError(op.type, row, d,
                                           exactPool(op.type, members,
                                                     op.ape.as<float>(), d)));
    }
  }
  return worst;
}

void testCompress(KPoolElementType type) {
  const char *tn = type == KPOOL_BF16 ? "bf16" : "f32";
  const char *bound =
      type == KPOOL_BF16 ? "1 ulp of S" : "4 + 6 max|z| ulps of S";
  std::mt19937 rng(2024);
  Batch b;
  // A prefill, a chunk ending inside a pool, a single decode token, a long
  // continuation, a request with no tokens, a decode past 2^18, a prefill.
  b.cache = {0, 5, 3, 12, 7, 262141, 0};
  b.tokens = {37, 9, 1, 16, 0, 7, 100};
  Operands op(type, b, rng);
  Tensor pro(4, {op.B + 1});
  reference::Geometry g{type, D, K};
  HostCopy expectPro(pro);
  reference::poolOffsets(g, expectPro.view, op.iro.view, op.cache.view);
  int64_t P = reinterpret_cast<uint32_t *>(expectPro.bytes.data())[op.B];
  Tensor pooled(op.es, {P, D});

  size_t before = launchLog().findings.size();
  launchOptions() = Options();
  std::vector<uint8_t> nominal = runCompress(op, pro, pooled);
  std::string tag = std::string(" (") + tn + ", head_dim 128, kpool 4)";
  check(std::memcmp(pro.view.data, expectPro.bytes.data(), pro.bytes()) == 0,
        "(a) pool_offsets equals the reference bit for bit (" +
            std::to_string(P) + " pools)" + tag);
  int64_t pools;
  double err = compressError(b, op, pro, pooled, pools);
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "(a) compress: %lld pools x %lld channels within %s of the "
                "exact pooling (max %.3f of the bound)%s",
                (long long)pools, (long long)D, bound, err, tag.c_str());
  check(err <= 1.0 && pools == P, buf);
  check(*op.status.as<uint64_t>() == 0, "(a) the status word stays 0" + tag);

  struct Schedule {
    const char *name;
    Order order;
    uint64_t seed;
  } schedules[] = {{"reverse", Order::Reverse, 0},
                   {"random seed 1", Order::Random, 1},
                   {"random seed 7", Order::Random, 7}};
  for (const Schedule &s : schedules) {
    launchOptions().order = s.order;
    launchOptions().seed = s.seed;
    launchOptions().quantum = s.order == Order::Random ? 3 : 32;
    std::vector<uint8_t> bits = runCompress(op, pro, pooled);
    check(bits == nominal, std::string("(b) compress under the ") + s.name +
                               " schedule: the same bits" + tag);
  }
  for (uint64_t seed : {1, 2, 3}) {
    launchOptions() = Options();
    launchOptions().approx = Approx::Adversarial;
    launchOptions().approxSeed = seed;
    std::vector<uint8_t> bits = runCompress(op, pro, pooled);
    size_t differ = 0;
    for (size_t i = 0; i < bits.size(); i += size_t(op.es))
      differ += std::memcmp(&bits[i], &nominal[i], size_t(op.es)) != 0;
    double e = compressError(b, op, pro, pooled, pools);
    std::snprintf(buf, sizeof(buf),
                  "(c) adversarial approximations, seed %llu: %zu of %zu "
                  "values change, max %.3f of the bound%s",
                  (unsigned long long)seed, differ, bits.size() / size_t(op.es),
                  e, tag.c_str());
    check(e <= 1.0 && (type == KPOOL_BF16 || differ > 0), buf);
  }
  launchOptions() = Options();
  check(launchLog().findings.size() == before,
        "(e) compress: no findings" + tag + findingsSummary(before));
}

//===----------------------------------------------------------------------===//
// (f), (g): strided views and concurrent launches.
//===----------------------------------------------------------------------===//

void testStridedAndConcurrent() {
  launchOptions() = Options();
  std::mt19937 rng(31);
  Batch b;
  b.cache = {0, 6, 2};
  b.tokens = {40, 13, 27};
  Operands op(KPOOL_BF16, b, rng);
  Tensor pro(4, {op.B + 1});
  reference::Geometry g{KPOOL_BF16, D, K};
  HostCopy expectPro(pro);
  reference::poolOffsets(g, expectPro.view, op.iro.view, op.cache.view);
  int64_t P = reinterpret_cast<uint32_t *>(expectPro.bytes.data())[op.B];
  Tensor pooled(2, {P, D});
  size_t before = launchLog().findings.size();
  std::vector<uint8_t> dense = runCompress(op, pro, pooled);

  // k and gate with channels 2 elements apart (innermost stride 2): kpool's
  // general-stride kernel.
  Tensor kPad(2, {op.N, 2 * D}), gatePad(2, {op.N, 2 * D});
  for (int64_t i = 0; i < op.N * D; ++i) {
    kPad.as<uint16_t>()[2 * i] = op.k.as<uint16_t>()[i];
    gatePad.as<uint16_t>()[2 * i] = op.gate.as<uint16_t>()[i];
  }
  KPoolView kView = kPad.view, gateView = gatePad.view;
  kView.sizes[1] = gateView.sizes[1] = D;
  kView.strides[1] = gateView.strides[1] = 2;
  Tensor pooled2(2, {P, D});
  kpool_bf16_d128_k4_cuda_compress(
      &pooled2.view, &kView, &gateView, &op.ape.view, &op.iro.view, &pro.view,
      &op.cache.view, op.status.as<uint64_t>(), nullptr);
  bool strided = false;
  for (const auto &[name, counters] : launchLog().perKernel)
    strided |= name.find("compress_strided") != std::string::npos;
  check(strided && pooled2.snapshot() == dense,
        "(f) compress on k and gate with innermost stride 2 (the strided "
        "kernel): the dense call's bits");

  // Four host threads launching at once, each into its own output.
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Tensor>> outs, pros;
  for (int t = 0; t < kThreads; ++t) {
    outs.push_back(std::make_unique<Tensor>(2, std::vector<int64_t>{P, D}));
    pros.push_back(std::make_unique<Tensor>(4, std::vector<int64_t>{op.B + 1}));
  }
  std::vector<std::thread> threads;
  std::vector<std::vector<uint8_t>> results(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        results[t] = runCompress(op, *pros[t], *outs[t]);
    });
  for (std::thread &t : threads)
    t.join();
  bool same = true;
  for (const auto &r : results)
    same &= r == dense;
  check(same, "(g) 4 host threads launching compress concurrently (3 times "
              "each): every result has the single-thread bits");
  check(launchLog().findings.size() == before,
        "(e) strided and concurrent compress: no findings" +
            findingsSummary(before));
}

//===----------------------------------------------------------------------===//
// (d): the fused step with the FP8 pool cache.
//===----------------------------------------------------------------------===//

constexpr int64_t kPageSize = 16, kPagesPerRow = 4, kSlots = 4;

struct CacheState {
  int64_t B;
  Tensor keys, scales, table, tail;
  explicit CacheState(int64_t B)
      : B(B), keys(1, {B * kPagesPerRow, kPageSize, D}),
        scales(4, {B * kPagesPerRow, kPageSize}), table(4, {B, kPagesPerRow}),
        tail(2, {kSlots, 2, K, D}) {
    // Pages out of order.
    for (int64_t i = 0; i < B * kPagesPerRow; ++i)
      table.as<uint32_t>()[i] = uint32_t((i * 5 + 3) % (B * kPagesPerRow));
  }
};

/// One step call: runs the kernel and checks it against the reference.
void stepCall(const char *name, CacheState &cs, const Batch &b,
              std::mt19937 &rng, const Tensor &ape, bool withCache) {
  Operands op(KPOOL_BF16, b, rng, &ape);
  reference::Geometry g{KPOOL_BF16, D, K};
  reference::CacheFormat f{reference::CacheEntry::FP8,
                           reference::Rotate::Hadamard,
                           reference::Scale::Absmax};
  Tensor closed(2, {op.B, D}), closedPool(4, {op.B}), pro(4, {op.B + 1});
  HostCopy expectPro(pro);
  reference::poolOffsets(g, expectPro.view, op.iro.view, op.cache.view);
  int64_t P = reinterpret_cast<uint32_t *>(expectPro.bytes.data())[op.B];
  Tensor pooled(2, {std::max<int64_t>(P, 1), D});

  HostCopy tailBefore(cs.tail), keysBefore(cs.keys), scalesBefore(cs.scales);
  size_t before = launchLog().findings.size();
  if (withCache)
    kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_step_cache(
        &closed.view, &closedPool.view, &pro.view, &pooled.view, &cs.tail.view,
        &cs.keys.view, &cs.scales.view, &op.k.view, &op.gate.view, &ape.view,
        &op.iro.view, &op.cache.view, &op.slot.view, int32_t(op.B),
        &cs.table.view, op.status.as<uint64_t>(), nullptr);
  else
    kpool_bf16_d128_k4_cuda_step(
        &closed.view, &closedPool.view, &pro.view, &pooled.view, &cs.tail.view,
        &op.k.view, &op.gate.view, &ape.view, &op.iro.view, &op.cache.view,
        &op.slot.view, int32_t(op.B), op.status.as<uint64_t>(), nullptr);

  // The reference on host copies: ring_close, pool_offsets, compress,
  // seed_tail.
  HostCopy expClosed(closed), expClosedPool(closedPool), expTail(cs.tail);
  expTail.bytes = tailBefore.bytes;
  expTail.view.data = expTail.bytes.data();
  reference::ringClose(g, expClosed.view, expClosedPool.view, tailBefore.view,
                       op.k.view, op.gate.view, ape.view, op.iro.view,
                       op.cache.view, op.slot.view, int32_t(op.B));
  reference::seedTail(g, expTail.view, op.k.view, op.gate.view, op.iro.view,
                      op.cache.view, op.slot.view, int32_t(op.B));
  std::string tag = std::string("(d) ") + name + ": ";
  check(std::memcmp(pro.view.data, expectPro.bytes.data(), pro.bytes()) == 0,
        tag + "pool offsets bit for bit");
  check(std::memcmp(closedPool.view.data, expClosedPool.bytes.data(),
                    closedPool.bytes()) == 0,
        tag + "closed_pool bit for bit");
  check(cs.tail.snapshot() == expTail.bytes, tag + "the ring bit for bit");

  // Dense pools against the exact pooling function.
  double worst = 0;
  int64_t pools = 0;
  const uint8_t *tailBits = tailBefore.bytes.data();
  auto checkRow = [&](const uint8_t *row, const Member members[K]) {
    for (int64_t d = 0; d < D; ++d)
      worst = std::max(worst, boundError(KPOOL_BF16, row, d,
                                         exactPool(KPOOL_BF16, members,
                                                   ape.as<float>(), d)));
    ++pools;
  };
  for (int64_t r = 0; r < op.B; ++r) {
    int64_t c = b.cache[size_t(r)], n = b.tokens[size_t(r)];
    int64_t start = op.iro.as<uint32_t>()[r], s = b.slots[size_t(r)];
    Member members[K];
    int32_t p = closedPool.as<int32_t>()[r];
    if (p >= 0) {
      int64_t held = c % K;
      for (int64_t m = 0; m < K; ++m) {
        int64_t q = (p * K + m) % K; // the ring window R is K here
        members[m] = m < held ? Member{tailBits + ((s * 2 + 0) * K + q) * D * 2,
                                       tailBits + ((s * 2 + 1) * K + q) * D * 2}
                              : op.member(start + m - held);
      }
      checkRow(closed.as<uint8_t>() + r * D * 2, members);
    }
    reference::PoolRange range = reference::poolRange(K, c, n);
    for (int64_t j = 0; j < range.count; ++j) {
      for (int64_t m = 0; m < K; ++m)
        members[m] = op.member(start + range.skip + j * K + m);
      checkRow(pooled.as<uint8_t>() + (pro.as<uint32_t>()[r] + j) * D * 2,
               members);
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "%zu pools (closed and compressed) within 1 ulp of S (max "
                "%.3f ulp)",
                size_t(pools), worst);
  check(worst <= 1.0 && pools > 0, tag + buf);

  // The cache: the reference's formulas on the executor's own dense pools.
  if (!withCache) {
    check(cs.keys.snapshot() == keysBefore.bytes,
          tag + "no cache byte written by the plain step");
    // The same call through the four separate kernels (ring_close,
    // pool_offsets, compress, seed_tail) on the ring as it was: every pool
    // bit-identical whichever op built it (the contract, one backend).
    Tensor tail2(2, {kSlots, 2, K, D}), closed2(2, {op.B, D}),
        closedPool2(4, {op.B}), pro2(4, {op.B + 1}),
        pooled2(2, {std::max<int64_t>(P, 1), D});
    tail2.restore(tailBefore.bytes);
    uint64_t *status = op.status.as<uint64_t>();
    kpool_bf16_d128_k4_cuda_ring_close(
        &closed2.view, &closedPool2.view, &tail2.view, &op.k.view,
        &op.gate.view, &ape.view, &op.iro.view, &op.cache.view, &op.slot.view,
        int32_t(op.B), status, nullptr);
    kpool_bf16_d128_k4_cuda_pool_offsets(&pro2.view, &op.iro.view,
                                         &op.cache.view, status, nullptr);
    kpool_bf16_d128_k4_cuda_compress(&pooled2.view, &op.k.view, &op.gate.view,
                                     &ape.view, &op.iro.view, &pro2.view,
                                     &op.cache.view, status, nullptr);
    kpool_bf16_d128_k4_cuda_seed_tail(
        &tail2.view, &op.k.view, &op.gate.view, &op.iro.view, &op.cache.view,
        &op.slot.view, int32_t(op.B), status, nullptr);
    check(closed2.snapshot() == closed.snapshot() &&
              closedPool2.snapshot() == closedPool.snapshot() &&
              pro2.snapshot() == pro.snapshot() &&
              pooled2.snapshot() == pooled.snapshot() &&
              tail2.snapshot() == cs.tail.snapshot(),
          tag + "ring_close, pool_offsets, compress and seed_tail as "
                "separate kernels give the fused step's bits");
    check(*op.status.as<uint64_t>() == 0, tag + "the status word stays 0");
    check(launchLog().findings.size() == before,
          tag + "no findings" + findingsSummary(before));
    return;
  }
  HostCopy expKeys(cs.keys), expScales(cs.scales);
  expKeys.bytes = keysBefore.bytes;
  expKeys.view.data = expKeys.bytes.data();
  expScales.bytes = scalesBefore.bytes;
  expScales.view.data = expScales.bytes.data();
  reference::ringCloseCache(g, f, expKeys.view, expScales.view, cs.table.view,
                            closed.view, closedPool.view);
  reference::compressCache(g, f, expKeys.view, expScales.view, cs.table.view,
                           pooled.view, op.iro.view, pro.view, op.cache.view,
                           op.N);
  size_t changed = 0;
  std::vector<uint8_t> now = cs.keys.snapshot();
  for (size_t i = 0; i < now.size(); ++i)
    changed += now[i] != keysBefore.bytes[i];
  check(now == expKeys.bytes && cs.scales.snapshot() == expScales.bytes,
        tag +
            "every cache byte equals the reference's formulas on the "
            "executor's dense pools (" +
            std::to_string(changed) + " code bytes written)");
  check(*op.status.as<uint64_t>() == 0, tag + "the status word stays 0");
  check(launchLog().findings.size() == before,
        tag + "no findings" + findingsSummary(before));
}

void testStep(const char *label, const Options &options, bool withCache) {
  launchOptions() = options;
  std::mt19937 rng(77);
  CacheState cs(3);
  Tensor ape(4, {K, D});
  std::uniform_real_distribution<float> a(-1, 1);
  for (int64_t i = 0; i < K * D; ++i)
    ape.as<float>()[i] = a(rng);
  Batch call1, call2, call3;
  call1.slots = call2.slots = call3.slots = {2, 0, 3};
  call1.cache = {0, 0, 0};
  call1.tokens = {30, 3, 22}; // chunks ending inside pools
  call2.cache = {30, 3, 22};
  call2.tokens = {1, 2, 9}; // ring closes for every request
  call3.cache = {31, 5, 31};
  call3.tokens = {1, 1, 1}; // decode
  std::string n1 = std::string(label) + ", call 1 (prefill chunks)";
  std::string n2 = std::string(label) + ", call 2 (ring closes)";
  std::string n3 = std::string(label) + ", call 3 (decode)";
  stepCall(n1.c_str(), cs, call1, rng, ape, withCache);
  stepCall(n2.c_str(), cs, call2, rng, ape, withCache);
  stepCall(n3.c_str(), cs, call3, rng, ape, withCache);
  launchOptions() = Options();
}

} // namespace

/// CPU time of this thread: the machine may be shared.
double cpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

extern "C" void mgpuLaunchKernel(void *, intptr_t, intptr_t, intptr_t, intptr_t,
                                 intptr_t, intptr_t, int32_t, void *, void **,
                                 void **, size_t);

/// --bench: the executor's speed on kpool's production compress (bf16,
/// head_dim 128, kpool 4) over `tokens` prefill tokens, on this thread:
/// thread-instructions per second with every check off, with the default
/// checks, and with counters.
int bench(int64_t tokens, int only) {
  std::mt19937 rng(1);
  Batch b;
  for (int64_t r = 0; r < 8; ++r) {
    b.cache.push_back(uint32_t(r % 4));
    b.tokens.push_back(uint32_t(tokens / 8));
  }
  Operands op(KPOOL_BF16, b, rng);
  Tensor pro(4, {op.B + 1});
  reference::Geometry g{KPOOL_BF16, D, K};
  HostCopy expectPro(pro);
  reference::poolOffsets(g, expectPro.view, op.iro.view, op.cache.view);
  int64_t P = reinterpret_cast<uint32_t *>(expectPro.bytes.data())[op.B];
  Tensor pooled(2, {P, D});
  // The thread-instructions of one call, from a profiled run.
  launchOptions() = Options();
  launchOptions().profile = true;
  resetLaunchLog();
  runCompress(op, pro, pooled);
  const Counters &c = launchLog().counters;
  uint64_t threadInstructions = c.integer + c.integer64 + c.floating +
                                c.special + c.memory + c.control + c.sync;
  std::printf("emulated compress (bf16, head_dim 128, kpool 4): %lld tokens, "
              "%lld pools, %llu thread-instructions, %llu warp-instructions "
              "(%.1f active lanes each)\n",
              (long long)op.N, (long long)P,
              (unsigned long long)threadInstructions,
              (unsigned long long)c.warpInstructions,
              double(c.activeLanes) / double(c.warpInstructions));
  struct Mode {
    const char *name;
    Options options;
  } modes[3];
  modes[0].name = "no checks";
  modes[0].options.memcheck = modes[0].options.racecheck =
      modes[0].options.synccheck = modes[0].options.initcheck = false;
  modes[1].name = "all checks (default)";
  modes[2].name = "all checks and counters";
  modes[2].options.profile = true;
  for (Mode &m : modes) {
    if (only >= 0 && &m - modes != only)
      continue;
    launchOptions() = m.options;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = cpuSeconds();
      runCompress(op, pro, pooled);
      best = std::min(best, cpuSeconds() - t0);
    }
    std::printf("  %-26s %8.3f s of CPU per call, %7.1f million "
                "thread-instructions per second (one core)\n",
                m.name, best, double(threadInstructions) / best / 1e6);
  }
  // A converged integer/float loop: the interpreter's dispatch rate.
  static const char *loop = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry loop(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, 0;
  mov.f32 %f1, 0f3F800000;
LOOP:
  add.u32 %r2, %r2, %r3;
  xor.b32 %r4, %r2, 0x55;
  shl.b32 %r5, %r4, 3;
  mad.lo.u32 %r2, %r5, 7, %r4;
  fma.rn.f32 %f1, %f1, 0f3F7FFFFF, 0f3F800000;
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p1, %r3, %r1;
  @%p1 bra LOOP;
  mov.b32 %r6, %f1;
  add.u32 %r2, %r2, %r6;
  mov.u32 %r7, %ctaid.x;
  mad.lo.u32 %r7, %r7, 256, %tid.x;
  mul.wide.u32 %rd2, %r7, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
)";
  std::string error;
  std::unique_ptr<Module> module = loadModule(loop, error);
  DeviceBuffer out(16 * 256 * 4);
  uint64_t outAddress = reinterpret_cast<uint64_t>(out.data());
  uint32_t n = 2000;
  void *params[] = {&outAddress, &n};
  uint64_t loopInstructions = 16ull * 256 * (8ull * n + 13);
  launchOptions() = modes[0].options;
  double t0 = cpuSeconds();
  mgpuLaunchKernel(const_cast<Function *>(module->function("loop")), 16, 1, 1,
                   256, 1, 1, 0, nullptr, params, nullptr, 2);
  double s = cpuSeconds() - t0;
  std::printf("emulated integer/float loop (16 blocks x 256 threads, 8 "
              "instructions x %u iterations), no checks: %.3f s of CPU, "
              "%.1f million thread-instructions per second (one core)\n",
              n, s, double(loopInstructions) / s / 1e6);
  launchOptions() = Options();
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--bench")
    return bench(argc > 2 ? std::atoll(argv[2]) : 16384,
                 argc > 3 ? std::atoi(argv[3]) : -1);
  testCompress(KPOOL_BF16);
#ifdef KPOOL_EMU_F32
  testCompress(KPOOL_F32); // libdevice's exp: built with the CUDA toolkit
#endif
  testStridedAndConcurrent();
  testStep("step (no cache)", Options(), false);
  testStep("step_cache fp8", Options(), true);
  Options adversarial;
  adversarial.order = Order::Random;
  adversarial.seed = 5;
  adversarial.approx = Approx::Adversarial;
  adversarial.approxSeed = 9;
  testStep("step_cache fp8, random order, adversarial", adversarial, true);
  const LaunchLog &log = launchLog();
  check(log.failed == 0,
        std::to_string(log.launches) + " launches, all completed");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
