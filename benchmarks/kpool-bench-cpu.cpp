//===- kpool-bench-cpu.cpp - CPU throughput of the kpool kernels ----------===//
//
// A benchmark, not a test: prints figures, checks nothing but that the runs
// succeed. Everything is measured side by side in one run (the machines are
// shared and noisy): each candidate is timed in interleaved rounds and the
// median is reported, with ratios to the baselines:
//   - memcpy of the bytes compress moves (k + gate read, pooled written):
//     the memory-bandwidth bound;
//   - the plain reference implementation (test/lib/Reference), -O3.
//
//===----------------------------------------------------------------------===//

#include "Measure.h"
#include "Reference/Reference.h"
#include "kpool/Runtime/Jit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kpool;
using kpool::bench::measure;

namespace {

void die(const Status &s) {
  if (s.ok())
    return;
  std::fprintf(stderr, "kpool-bench-cpu: %s\n", s.message().c_str());
  std::exit(1);
}

std::shared_ptr<KernelSet> kernels(ElementType type, int64_t D, int64_t K,
                                   bool openmp) {
  KernelConfig c;
  c.elementType = type;
  c.headDim = D;
  c.kpool = K;
  c.openmp = openmp;
  Status s;
  kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  auto set = KernelSet::get(c, s);
  die(s);
  return set;
}

} // namespace

int main(int argc, char **argv) {
  int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 65536;
  const ElementType type = KPOOL_BF16;
  const int64_t D = 128, K = 4, esize = elementTypeSize(type);
  const reference::Geometry geometry{type, D, K};
  auto serial = kernels(type, D, K, /*openmp=*/false);
  auto parallel = kernels(type, D, K, /*openmp=*/true);

  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 2.f);
  auto randomRows = [&](int64_t rows) {
    std::vector<uint16_t> v(rows * D);
    for (auto &x : v)
      x = static_cast<uint16_t>(reference::roundToBits(type, dist(rng)));
    return v;
  };
  std::vector<float> ape(K * D);
  for (float &a : ape)
    a = dist(rng);
  View apeView = denseView(ape.data(), {K, D});

  //===--------------------------------------------------------------------===//
  // Prefill: `tokens` tokens in 8 requests, no cached prefix.
  //===--------------------------------------------------------------------===//
  {
    const int64_t batch = 8;
    std::vector<uint32_t> iro(batch + 1), cache(batch, 0), pro(batch + 1);
    for (int64_t b = 0; b <= batch; ++b)
      iro[b] = uint32_t(tokens * b / batch);
    for (int64_t b = 0; b <= batch; ++b)
      pro[b] = b == 0 ? 0 : pro[b - 1] + (iro[b] - iro[b - 1]) / K;
    int64_t pools = pro[batch];
    auto k = randomRows(tokens), g = randomRows(tokens);
    std::vector<uint16_t> pooled(pools * D), pooledRef(pools * D);
    View kV = denseView(k.data(), {tokens, D}),
         gV = denseView(g.data(), {tokens, D});
    View iroV = denseView(iro.data(), {batch + 1}),
         proV = denseView(pro.data(), {batch + 1}),
         cacheV = denseView(cache.data(), {batch});
    View outV = denseView(pooled.data(), {pools, D}),
         refV = denseView(pooledRef.data(), {pools, D});

    int64_t bytes = (2 * tokens + pools) * D * esize;
    std::vector<uint8_t> src(bytes, 1), dst(bytes);
    auto t = measure(
        {[&] { std::memcpy(dst.data(), src.data(), bytes); },
         [&] {
           die(serial->compress(outV, kV, gV, apeView, iroV, proV, cacheV));
         },
         [&] {
           die(parallel->compress(outV, kV, gV, apeView, iroV, proV, cacheV));
         },
         [&] {
           reference::compress(geometry, refV, kV, gV, apeView, iroV, proV,
                               cacheV);
         }},
        /*rounds=*/7, /*reps=*/3);
    auto gbps = [&](double s) { return bytes / s / 1e9; };
    std::printf(
        "compress prefill: %lld tokens, %lld pools, bf16, head_dim %lld, "
        "kpool %lld, %.1f MiB moved (k + gate read, pooled written)\n",
        (long long)tokens, (long long)pools, (long long)D, (long long)K,
        bytes / 1048576.0);
    std::printf("  memcpy (bandwidth bound)   %8.3f ms  %6.2f GB/s\n",
                t[0] * 1e3, gbps(t[0]));
    std::printf("  kpool, 1 thread            %8.3f ms  %6.2f GB/s  "
                "%.2fx memcpy time, %.1fx faster than reference\n",
                t[1] * 1e3, gbps(t[1]), t[1] / t[0], t[3] / t[1]);
    std::printf("  kpool, OpenMP              %8.3f ms  %6.2f GB/s  "
                "%.2fx memcpy time, %.1fx faster than reference\n",
                t[2] * 1e3, gbps(t[2]), t[2] / t[0], t[3] / t[2]);
    std::printf("  reference -O3              %8.3f ms  %6.2f GB/s\n",
                t[3] * 1e3, gbps(t[3]));
  }

  //===--------------------------------------------------------------------===//
  // Decode: one token per request, a full step (ring_close, pool_offsets,
  // compress, seed_tail) per call, with host validation.
  //===--------------------------------------------------------------------===//
  std::printf("decode step (ring_close + pool_offsets + compress + seed_tail, "
              "one token per request, validated):\n");
  for (int64_t batch : {1, 8, 32, 256}) {
    std::uniform_int_distribution<uint32_t> lengths(1000, 100000);
    std::vector<uint32_t> iro(batch + 1), cache(batch), slots(batch),
        pro(batch + 1);
    for (int64_t b = 0; b <= batch; ++b)
      iro[b] = uint32_t(b);
    for (int64_t b = 0; b < batch; ++b) {
      cache[b] = lengths(rng);
      slots[b] = uint32_t(batch - 1 - b);
    }
    auto k = randomRows(batch), g = randomRows(batch);
    auto tail = randomRows(batch * 2 * K);
    std::vector<uint16_t> closedRows(batch * D), pooled(batch * D);
    std::vector<int32_t> closed(batch);
    View kV = denseView(k.data(), {batch, D}),
         gV = denseView(g.data(), {batch, D});
    View tailV = denseView(tail.data(), {batch, 2, K, D});
    View iroV = denseView(iro.data(), {batch + 1}),
         cacheV = denseView(cache.data(), {batch}),
         slotV = denseView(slots.data(), {batch}),
         proV = denseView(pro.data(), {batch + 1});
    View closedRowsV = denseView(closedRows.data(), {batch, D}),
         closedV = denseView(closed.data(), {batch});
    int32_t n = int32_t(batch);
    auto kernelStep = [&] {
      die(serial->ringClose(closedRowsV, closedV, tailV, kV, gV, apeView, iroV,
                            cacheV, slotV, n));
      die(serial->poolOffsets(proV, iroV, cacheV));
      View outV = denseView(pooled.data(), {int64_t(pro[batch]), D});
      die(serial->compress(outV, kV, gV, apeView, iroV, proV, cacheV));
      die(serial->seedTail(tailV, kV, gV, iroV, cacheV, slotV, n));
    };
    auto referenceStep = [&] {
      reference::ringClose(geometry, closedRowsV, closedV, tailV, kV, gV,
                           apeView, iroV, cacheV, slotV, n);
      reference::poolOffsets(geometry, proV, iroV, cacheV);
      View outV = denseView(pooled.data(), {int64_t(pro[batch]), D});
      reference::compress(geometry, outV, kV, gV, apeView, iroV, proV, cacheV);
      reference::seedTail(geometry, tailV, kV, gV, iroV, cacheV, slotV, n);
    };
    auto t = measure({kernelStep, referenceStep}, /*rounds=*/7, /*reps=*/50);
    std::printf("  batch %4lld: kpool %8.2f us/call   reference -O3 %8.2f "
                "us/call\n",
                (long long)batch, t[0] * 1e6, t[1] * 1e6);
  }
  return 0;
}
