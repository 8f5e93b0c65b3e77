//===- kpool-bench-cache.cpp - the fused pool-cache write on the CPU ------===//
//
// A benchmark, not a test: prints figures. The production configuration
// (bf16, head_dim 128, kpool 4) writing a paged FP8 cache with the
// Hadamard rotation and absmax scales (docs/pool-cache.md), three ways,
// timed side by side in interleaved rounds (Measure.h), one thread:
//
//   dense     KernelSet::compress: the dense pooled rows only (what an
//             engine had before the pool cache);
//   fused     KernelSet::compressCache: the same kernel also rotates,
//             quantizes and stores every pool into its page (one pass);
//   separate  compress, then a hand-written quantize-and-scatter pass over
//             the dense rows (AVX2 where the CPU has it): the engines'
//             original two-launch form. Its second pass is also timed
//             alone (scatter).
//   dense-t, fused-t  the two kernels with Validation::Trust: the kernels
//             alone, without host validation of the metadata and the block
//             table (what a GPU call does).
//
// The fused and separate caches are compared byte for byte before anything
// is timed (the same formulas on the same dense rows): a difference prints
// FAIL and no figures. Bytes are what each variant must move at least:
// compress reads every member row of k and gate once (2 * kpool * head_dim
// elements per pool) and writes the pooled row; the cache adds head_dim
// code bytes and a 4-byte scale per pool; the separate pass also reads the
// pooled rows back. GB/s divide those bytes by the time.
//
// The decode step (batch 256, one token per request, every request closing
// a pool): KernelSet::stepCache against step plus the same scatter of the
// closed rows.
//
// Usage: kpool-bench-cache [--quick] [tokens]
//
//===----------------------------------------------------------------------===//

#include "Measure.h"

#include "Reference/Float.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelSet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kpool;
using namespace kpool::bench;

namespace {

constexpr int64_t D = 128, K = 4, kPageSize = 64;
constexpr int64_t kPageBytes = kPageSize * (D + 4);

void die(const Status &s) {
  if (s.ok())
    return;
  std::fprintf(stderr, "kpool-bench-cache: %s\n", s.message().c_str());
  std::exit(1);
}

std::shared_ptr<KernelSet> kernels(bool cache) {
  KernelConfig c;
  c.elementType = KPOOL_BF16;
  c.headDim = D;
  c.kpool = K;
  if (cache) {
    c.cache.entry = CacheEntry::FP8;
    c.cache.rotate = CacheRotate::Hadamard;
    c.cache.scale = CacheScale::Absmax;
  }
  Status s;
  registerJitCompiler();
  auto set = KernelSet::get(c, s);
  die(s);
  return set;
}

//===----------------------------------------------------------------------===//
// The separate quantize-and-scatter pass: what an engine's second kernel
// does with the dense rows (docs/semantics.md, "The pool cache").
//===----------------------------------------------------------------------===//

/// Where each dense row goes: the byte offsets of its codes and its scale
/// in the cache buffer (the engine's slot mapping, computed on the host).
struct Destination {
  int64_t codes, scale;
};

float bf16ToF32(uint16_t h) { return reference::bf16ToF32(h); }

/// The e4m3fn code of a clamped finite f32, nearest even, sign kept: the
/// same integer arithmetic as kpool's software conversion, written out.
inline uint8_t e4m3(float q) {
  uint32_t bits;
  std::memcpy(&bits, &q, 4);
  uint32_t sign = (bits >> 24) & 0x80, mag = bits & 0x7fffffff;
  float magF;
  std::memcpy(&magF, &mag, 4);
  uint32_t code;
  if (mag < 0x3c800000u) { // below 2^-6: steps of 2^-9
    float t = magF * 512.0f + 8388608.0f;
    uint32_t tb;
    std::memcpy(&tb, &t, 4);
    code = tb - 0x4b000000u;
  } else {
    uint32_t r = mag + 0x7ffffu + ((mag >> 20) & 1);
    code = (r >> 20) - ((127 - 7) << 3);
  }
  return static_cast<uint8_t>(sign | code);
}

/// One dense bf16 row into its entry: FWHT, scale and round to bf16, absmax,
/// pow2-free absmax scale, codes.
#define KPOOL_SCATTER_BODY                                                     \
  for (int64_t r = 0; r < rows; ++r) {                                         \
    const uint16_t *src = pooled + r * D;                                      \
    float x[D];                                                                \
    for (int64_t d = 0; d < D; ++d)                                            \
      x[d] = bf16ToF32(src[d]);                                                \
    for (int64_t h = 1; h < D; h *= 2)                                         \
      for (int64_t i = 0; i < D; i += 2 * h)                                   \
        for (int64_t j = i; j < i + h; ++j) {                                  \
          float a = x[j], b = x[j + h];                                        \
          x[j] = a + b;                                                        \
          x[j + h] = a - b;                                                    \
        }                                                                      \
    const float c = static_cast<float>(1.0 / std::sqrt(double(D)));          \
    float m = 0.f;                                                             \
    for (int64_t d = 0; d < D; ++d) {                                          \
      x[d] = bf16ToF32(reference::f32ToBf16(x[d] * c));                       \
      m = std::max(m, std::fabs(x[d]));                                        \
    }                                                                          \
    float s = std::max(m, 1e-4f) * (1.0f / 448.0f);                           \
    uint8_t *codes = cache + dest[r].codes;                                    \
    for (int64_t d = 0; d < D; ++d)                                            \
      codes[d] = e4m3(std::min(std::max(x[d] / s, -448.f), 448.f));            \
    std::memcpy(cache + dest[r].scale, &s, 4);                                 \
  }

__attribute__((target("avx2,fma"))) void
scatterAvx2(const uint16_t *pooled, int64_t rows, const Destination *dest,
            uint8_t *cache) {
  KPOOL_SCATTER_BODY
}

void scatterGeneric(const uint16_t *pooled, int64_t rows,
                    const Destination *dest, uint8_t *cache) {
  KPOOL_SCATTER_BODY
}

bool haveAvx2() { return __builtin_cpu_supports("avx2"); }

void scatter(const uint16_t *pooled, int64_t rows, const Destination *dest,
             uint8_t *cache) {
  if (haveAvx2())
    scatterAvx2(pooled, rows, dest, cache);
  else
    scatterGeneric(pooled, rows, dest, cache);
}

//===----------------------------------------------------------------------===//
// A call's buffers.
//===----------------------------------------------------------------------===//

/// The paged cache: one buffer of pages of kPageSize entries, codes then
/// scales, and its two strided views.
struct Cache {
  std::vector<uint8_t> bytes;
  View keys{}, scales{};
  int64_t pages;

  explicit Cache(int64_t pages) : bytes(pages * kPageBytes, 0), pages(pages) {
    keys = denseView(bytes.data(), {pages, kPageSize, D});
    keys.strides[0] = kPageBytes;
    scales = denseView(bytes.data() + kPageSize * D, {pages, kPageSize});
    scales.strides[0] = kPageBytes / 4;
  }
};

/// Requests of `tokens[b]` tokens with cache lengths `cached[b]`: the
/// metadata, a block table with pages out of order, and each pool's
/// destination.
struct Call {
  std::vector<uint16_t> k, gate;
  std::vector<float> ape;
  std::vector<uint32_t> iro, cache, slots, table, pro;
  int64_t batch, width, pools = 0, pagesNeeded = 0;
  std::vector<Destination> compressDest, closeDest;

  Call(const std::vector<int64_t> &tokens, const std::vector<int64_t> &cached,
       std::mt19937 &rng) {
    batch = static_cast<int64_t>(tokens.size());
    iro.push_back(0);
    for (int64_t n : tokens)
      iro.push_back(iro.back() + static_cast<uint32_t>(n));
    for (int64_t c : cached)
      cache.push_back(static_cast<uint32_t>(c));
    for (int64_t b = 0; b < batch; ++b)
      slots.push_back(static_cast<uint32_t>(b));
    int64_t rows = iro.back();
    std::normal_distribution<float> dist(0.f, 1.f);
    k.resize(rows * D);
    gate.resize(rows * D);
    for (auto &x : k)
      x = reference::f32ToBf16(dist(rng));
    for (auto &x : gate)
      x = reference::f32ToBf16(4 * dist(rng));
    ape.resize(K * D);
    for (auto &x : ape)
      x = dist(rng);
    // Pages: enough for every request's pools so far, handed out in a
    // shuffled order.
    width = 1;
    std::vector<int64_t> last(batch);
    for (int64_t b = 0; b < batch; ++b) {
      last[b] = (cached[b] + tokens[b]) / K;
      width = std::max(width, (last[b] + kPageSize - 1) / kPageSize);
    }
    pagesNeeded = batch * width;
    std::vector<uint32_t> order(pagesNeeded);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    table = order;
    // Pools: compress's (ceil(c/K) .. floor((c+n)/K) - 1) and ring_close's
    // (floor(c/K) when it completes).
    pro.push_back(0);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t c = cached[b], end = last[b];
      int64_t first = (c + K - 1) / K;
      for (int64_t p = first; p < end; ++p)
        compressDest.push_back(destination(b, p));
      pro.push_back(pro.back() + static_cast<uint32_t>(std::max<int64_t>(
                                     0, end - first)));
      if (c % K && c + tokens[b] >= (c / K + 1) * K)
        closeDest.push_back(destination(b, c / K));
      else
        closeDest.push_back({-1, -1});
    }
    pools = pro.back();
  }

  Destination destination(int64_t b, int64_t p) const {
    int64_t page = table[b * width + p / kPageSize], row = p % kPageSize;
    return {page * kPageBytes + row * D,
            page * kPageBytes + kPageSize * D + row * 4};
  }

  View kView() { return denseView(k.data(), {int64_t(k.size()) / D, D}); }
  View gateView() {
    return denseView(gate.data(), {int64_t(gate.size()) / D, D});
  }
  View apeView() { return denseView(ape.data(), {K, D}); }
  View iroView() { return denseView(iro.data(), {batch + 1}); }
  View cacheView() { return denseView(cache.data(), {batch}); }
  View slotsView() { return denseView(slots.data(), {batch}); }
  View proView() { return denseView(pro.data(), {batch + 1}); }
  View tableView() { return denseView(table.data(), {batch, width}); }
};

struct Row {
  const char *name;
  double bytesPerPool;
};

void print(const char *what, int64_t pools, const std::vector<Row> &rows,
           const std::vector<Timing> &t) {
  double fastest = t[0].median;
  for (const Timing &x : t)
    fastest = std::min(fastest, x.median);
  for (size_t i = 0; i < rows.size(); ++i) {
    double ns = t[i].median / double(std::max<int64_t>(pools, 1)) * 1e9;
    double gbs = rows[i].bytesPerPool * double(pools) / t[i].median / 1e9;
    std::printf("  %-10s %-9s %9.1f ns/pool  %6.2f GB/s of %4.0f B/pool  "
                "%5.2fx  spread %.0f%%\n",
                what, rows[i].name, ns, gbs, rows[i].bytesPerPool,
                t[i].median / fastest,
                100.0 * (t[i].median / t[i].min - 1));
  }
}

} // namespace

int main(int argc, char **argv) {
  setenv("OMP_NUM_THREADS", "1", 1);
  bool quick = false;
  int64_t tokens = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (argv[i][0] >= '0' && argv[i][0] <= '9')
      tokens = std::atoll(argv[i]);
    else {
      std::fprintf(stderr, "usage: kpool-bench-cache [--quick] [tokens]\n");
      return 2;
    }
  }
  if (!tokens)
    tokens = quick ? 8192 : 65536;
  int rounds = quick ? 3 : 9;
  double sample = quick ? 0.005 : 0.05, budget = quick ? 0.05 : 3.0;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("kpool-bench-cache%s: %s; load average %.2f %.2f %.2f; one "
              "thread; scatter pass %s; bf16, head_dim %lld, kpool %lld, FP8 "
              "e4m3fn + hadamard + absmax, page_size %lld, pages of %lld "
              "bytes out of order; medians of interleaved rounds\n",
              quick ? " --quick" : "", cpuName().c_str(), load[0], load[1],
              load[2], haveAvx2() ? "AVX2" : "generic x86-64",
              (long long)D, (long long)K, (long long)kPageSize,
              (long long)kPageBytes);
  auto dense = kernels(false);
  auto fused = kernels(true);
  std::mt19937 rng(11);

  // Prefill: 16 ragged requests from position 0.
  {
    std::vector<int64_t> n, c;
    int64_t left = tokens;
    for (int b = 0; b < 16; ++b) {
      int64_t t = b == 15 ? left : tokens / 16 + (b % 3) * 8 - 8;
      t = std::clamp<int64_t>(t, 0, left);
      n.push_back(t);
      c.push_back(0);
      left -= t;
    }
    Call call(n, c, rng);
    Cache fusedCache(call.pagesNeeded), separateCache(call.pagesNeeded);
    std::vector<uint16_t> pooledA(call.pools * D), pooledB(call.pools * D);
    View pa = denseView(pooledA.data(), {call.pools, D});
    View pb = denseView(pooledB.data(), {call.pools, D});
    CompressArgs ca{};
    ca.pooled = pa;
    ca.k = call.kView();
    ca.gate = call.gateView();
    ca.ape = call.apeView();
    ca.input_row_offsets = call.iroView();
    ca.pool_row_offsets = call.proView();
    ca.cache_lengths = call.cacheView();
    CompressCacheArgs cb{};
    cb.pooled = pb;
    cb.cache_keys = fusedCache.keys;
    cb.cache_scales = fusedCache.scales;
    cb.k = call.kView();
    cb.gate = call.gateView();
    cb.ape = call.apeView();
    cb.input_row_offsets = call.iroView();
    cb.pool_row_offsets = call.proView();
    cb.cache_lengths = call.cacheView();
    cb.block_table = call.tableView();
    auto runDense = [&] { die(dense->compress(ca)); };
    auto runFused = [&] { die(fused->compressCache(cb)); };
    auto runScatter = [&] {
      scatter(pooledA.data(), call.pools, call.compressDest.data(),
              separateCache.bytes.data());
    };
    // The kernels alone (Validation::Trust): what a GPU call does, and the
    // share of the time that host validation takes.
    auto runDenseTrust = [&] {
      die(dense->compress(ca, Validation::Trust));
    };
    auto runFusedTrust = [&] {
      die(fused->compressCache(cb, Validation::Trust));
    };
    auto runSeparate = [&] {
      runDense();
      runScatter();
    };
    runFused();
    runSeparate();
    if (pooledA != pooledB || fusedCache.bytes != separateCache.bytes) {
      std::printf("FAIL: the fused and separate caches differ; no figures\n");
      return 1;
    }
    std::printf("prefill: %lld tokens, %lld pools; fused and separate cache "
                "bytes identical\n",
                (long long)tokens, (long long)call.pools);
    double read = 2.0 * K * D * 2, pooledBytes = D * 2, entry = D + 4;
    std::vector<Row> rows = {{"dense", read + pooledBytes},
                             {"fused", read + pooledBytes + entry},
                             {"separate", read + 2 * pooledBytes + entry},
                             {"scatter", pooledBytes + entry},
                             {"dense-t", read + pooledBytes},
                             {"fused-t", read + pooledBytes + entry}};
    auto t = measureAdaptive({runDense, runFused, runSeparate, runScatter,
                              runDenseTrust, runFusedTrust},
                             rounds, sample, budget);
    print("prefill", call.pools, rows, t);
  }

  // Decode: 256 requests, one token each, every one closing a pool.
  {
    int64_t batch = 256;
    std::vector<int64_t> n(batch, 1), c(batch);
    for (int64_t b = 0; b < batch; ++b)
      c[b] = 4 * (100 + b) + 3;
    Call call(n, c, rng);
    Cache fusedCache(call.pagesNeeded), separateCache(call.pagesNeeded);
    std::vector<uint16_t> tailA(batch * 2 * K * D), tailB(batch * 2 * K * D);
    for (size_t i = 0; i < tailA.size(); ++i)
      tailA[i] = tailB[i] = reference::f32ToBf16(float(i % 13) * 0.25f - 1.f);
    std::vector<uint16_t> closedA(batch * D), closedB(batch * D);
    std::vector<int32_t> idsA(batch), idsB(batch);
    std::vector<uint32_t> proA(batch + 1), proB(batch + 1);
    std::vector<uint16_t> pooledA(batch * D), pooledB(batch * D);
    auto tailView = [&](std::vector<uint16_t> &t) {
      return denseView(t.data(), {batch, 2, K, D});
    };
    // The ring is re-read every step (the same pools close each time:
    // cache lengths do not advance), so the figures are of one step.
    StepArgs sa{};
    sa.closed = denseView(closedA.data(), {batch, D});
    sa.closed_pool = denseView(idsA.data(), {batch});
    sa.pool_row_offsets = denseView(proA.data(), {batch + 1});
    sa.pooled = denseView(pooledA.data(), {batch, D});
    sa.tail = tailView(tailA);
    sa.k = call.kView();
    sa.gate = call.gateView();
    sa.ape = call.apeView();
    sa.input_row_offsets = call.iroView();
    sa.cache_lengths = call.cacheView();
    sa.slot_idx = call.slotsView();
    sa.num_requests = int32_t(batch);
    StepCacheArgs sb{};
    sb.closed = denseView(closedB.data(), {batch, D});
    sb.closed_pool = denseView(idsB.data(), {batch});
    sb.pool_row_offsets = denseView(proB.data(), {batch + 1});
    sb.pooled = denseView(pooledB.data(), {batch, D});
    sb.tail = tailView(tailB);
    sb.cache_keys = fusedCache.keys;
    sb.cache_scales = fusedCache.scales;
    sb.k = call.kView();
    sb.gate = call.gateView();
    sb.ape = call.apeView();
    sb.input_row_offsets = call.iroView();
    sb.cache_lengths = call.cacheView();
    sb.slot_idx = call.slotsView();
    sb.num_requests = int32_t(batch);
    sb.block_table = call.tableView();
    auto runDense = [&] { die(dense->step(sa)); };
    auto runFused = [&] { die(fused->stepCache(sb)); };
    auto runScatter = [&] {
      scatter(closedA.data(), batch, call.closeDest.data(),
              separateCache.bytes.data());
    };
    auto runSeparate = [&] {
      runDense();
      runScatter();
    };
    runFused();
    runSeparate();
    if (closedA != closedB || fusedCache.bytes != separateCache.bytes) {
      std::printf("FAIL: the fused and separate decode caches differ; no "
                  "figures\n");
      return 1;
    }
    std::printf("decode: batch %lld, one token each, every request closes a "
                "pool; fused and separate cache bytes identical\n",
                (long long)batch);
    // Per pool: K - 1 ring rows of key and gate, one new row of each, the
    // closed row written, the new token's ring rows written (seed_tail).
    double step = 2.0 * K * D * 2 + D * 2 + 2.0 * D * 2, entry = D + 4;
    std::vector<Row> rows = {{"step", step},
                             {"fused", step + entry},
                             {"separate", step + D * 2 + entry},
                             {"scatter", D * 2 + entry}};
    auto t = measureAdaptive({runDense, runFused, runSeparate, runScatter},
                             rounds, sample, budget);
    print("decode", batch, rows, t);
  }
  return 0;
}
