//===- kpool-bench-gpu.cpp - GPU throughput of the kpool kernels ----------===//
//
// A benchmark, not a test: prints figures, checks only that the runs
// succeed and that a sample of the pools matches the reference. The
// ahead-of-time CUDA kernels (bf16, head_dim 128, kpool 4) run on device
// buffers.
//
// Every kpool call only enqueues on the caller's stream (kpool-aot's host
// code launches on the entry point's stream argument and never waits); each
// timed call here is followed by a synchronization of that stream, so the
// times are host wall-clock times around whole calls, launch and
// synchronization included; the per-call floor is measured and printed so
// that it can be subtracted. (scripts/device-check.sh also times captured
// steps with CUDA events: kpool-gpu-capture.) Candidates are timed in interleaved
// rounds and the median is reported:
//   - compress at prefill size against a device-to-device copy of the same
//     byte count, timed the same way (stream, cuMemcpyAsync, synchronize,
//     destroy through mgpuMemcpy);
//   - the per-call floor: a stream created, synchronized and destroyed with
//     no work, and compress of one pool;
//   - a decode step (ring_close + pool_offsets + compress + seed_tail, one
//     token per request) at batch 1, 32, 256 and 1024, with and without the
//     shape checks, against the fused step (kpool.step: one launch), whose
//     outputs are first checked bit for bit against the four calls', and
//     against the fused step writing the production pool cache (a paged
//     FP8 Hadamard cache, one page per request; kpool.step with to_cache),
//     whose dense outputs are checked bit for bit against the plain step's
//     (kpool-gpu-cache-check checks its cache bytes).
//
//   kpool-bench-gpu [--check] [tokens (default 1048576)] [requests (default
//   64)]
//
// --check runs the checks only, at decode batches 1, 32 and 256, without
// timing anything: what the lit suite runs through the emulated CUDA driver
// (test/Integration/GPU/bench-gpu.test).
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4.h"
#include "kpool_gpu_bf16_d128_k4_fp8_hadamard_absmax.h"

#include "GPU/GpuSupport.h"
#include "Measure.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

using namespace kpool;
using kpool::bench::measure;
using namespace kpool::gpu;

namespace {

void die(const Status &s) {
  if (s.ok())
    return;
  std::fprintf(stderr, "kpool-bench-gpu: %s\n", s.message().c_str());
  std::exit(1);
}

/// Device memory holding `host`.
template <typename T>
std::unique_ptr<cuda::DeviceBuffer> toDevice(const std::vector<T> &host) {
  auto buf = std::make_unique<cuda::DeviceBuffer>(host.size() * sizeof(T));
  buf->upload(host.data());
  return buf;
}

View view(const cuda::DeviceBuffer &buf, std::vector<int64_t> sizes) {
  return denseView(buf.data(), std::move(sizes));
}

} // namespace

int main(int argc, char **argv) {
  const bool checkOnly = argc > 1 && std::strcmp(argv[1], "--check") == 0;
  if (checkOnly) {
    --argc;
    ++argv;
  }
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 1 << 20;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 64;
  if (tokens < 1 || batch < 1 || batch > tokens) {
    std::fprintf(stderr, "usage: %s [--check] [tokens] [requests <= tokens]\n",
                 argv[0]);
    return 2;
  }
  KernelSet kernels(kpool_bf16_d128_k4_cuda_config(),
                    kpool_bf16_d128_k4_cuda_backend());
  KernelSet cacheKernels(kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_config(),
                         kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_backend());
  const ElementType type = KPOOL_BF16;
  const int64_t D = 128, K = 4, es = 2;
  const reference::Geometry geometry{type, D, K};
  std::printf("kpool-bench-gpu: %s\n", deviceDescription().c_str());
  std::printf("every call is synchronous (stream created, kernel launched, "
              "stream synchronized and destroyed per call); times are host "
              "wall-clock medians of interleaved rounds, whole calls\n");

  std::mt19937 rng(7);
  // Random rows, tiled: the contents do not change the memory traffic.
  const int64_t tile = std::min<int64_t>(tokens, 4096);
  std::vector<uint8_t> kTile = randomElements(type, tile * D, rng, 1.f),
                       gTile = randomElements(type, tile * D, rng, 4.f);
  std::vector<float> ape(K * D);
  {
    std::normal_distribution<float> dist(0.f, 2.f);
    for (float &a : ape)
      a = dist(rng);
  }
  auto apeD = toDevice(ape);
  View apeV = view(*apeD, {K, D});

  //===--------------------------------------------------------------------===//
  // Prefill: `tokens` tokens in `batch` requests, no cached prefix.
  //===--------------------------------------------------------------------===//
  {
    std::vector<uint32_t> iro(batch + 1), cache(batch, 0), pro(batch + 1, 0);
    for (int64_t b = 0; b <= batch; ++b)
      iro[b] = uint32_t(tokens * b / batch);
    for (int64_t b = 0; b < batch; ++b)
      pro[b + 1] = pro[b] + (iro[b + 1] - iro[b]) / K;
    const int64_t pools = pro[batch];
    std::vector<uint8_t> k(tokens * D * es), g(tokens * D * es);
    for (int64_t r = 0; r < tokens; r += tile) {
      int64_t n = std::min(tile, tokens - r);
      std::memcpy(&k[r * D * es], kTile.data(), n * D * es);
      std::memcpy(&g[r * D * es], gTile.data(), n * D * es);
    }
    auto kD = toDevice(k), gD = toDevice(g), iroD = toDevice(iro),
         cacheD = toDevice(cache), proD = toDevice(pro);
    cuda::DeviceBuffer pooledD(std::max<int64_t>(pools, 1) * D * es);
    View kV = view(*kD, {tokens, D}), gV = view(*gD, {tokens, D}),
         iroV = view(*iroD, {batch + 1}), cacheV = view(*cacheD, {batch}),
         proV = view(*proD, {batch + 1}), pooledV = view(pooledD, {pools, D});
    const int64_t bytes = (2 * tokens + pools) * D * es;
    cuda::DeviceBuffer src(bytes), dst(bytes);

    CompressArgs c{};
    c.pooled = pooledV;
    c.k = kV;
    c.gate = gV;
    c.ape = apeV;
    c.input_row_offsets = iroV;
    c.pool_row_offsets = proV;
    c.cache_lengths = cacheV;
    // A sample of the results against the reference: request 0's pools.
    die(kernels.compress(c));
    {
      int64_t n0 = iro[1], p0 = pro[1];
      std::vector<uint8_t> got(p0 * D * es), want(p0 * D * es);
      cuda::copy(got.data(), pooledD.data(), got.size());
      std::vector<uint32_t> iro0 = {0, uint32_t(n0)}, pro0 = {0, uint32_t(p0)},
                            cache0 = {0};
      reference::compress(
          geometry, denseView(want.data(), {p0, D}),
          denseView(k.data(), {n0, D}), denseView(g.data(), {n0, D}),
          denseView(ape.data(), {K, D}), denseView(iro0.data(), {2}),
          denseView(pro0.data(), {2}), denseView(cache0.data(), {1}));
      std::vector<double> scales;
      for (int64_t p = 0; p < p0; ++p) {
        std::vector<const uint8_t *> members;
        for (int64_t m = 0; m < K; ++m)
          members.push_back(&k[(p * K + m) * D * es]);
        appendScales(type, D, members, scales);
      }
      double err = maxUlpError(type, D, got, want, scales);
      std::printf("sample check: request 0's %lld pools vs the reference: max "
                  "%.2f ulp of the largest member key (tolerance %.0f)%s\n",
                  (long long)p0, err, toleranceUlp(type),
                  err <= toleranceUlp(type) ? "" : "  MISMATCH");
      if (err > toleranceUlp(type))
        return 1;
    }

    if (!checkOnly) {
      auto t = measure(
          {[&] { cuda::copy(dst.data(), src.data(), bytes); },
           [&] {
             die(kernels.compress(c, Validation::Trust));
             mgpuStreamSynchronize(nullptr);
           },
           [&] {
             die(kernels.compress(c));
             mgpuStreamSynchronize(nullptr);
           }},
          /*rounds=*/9, /*reps=*/10);
      // Both rates count bytes read plus bytes written: compress reads k and
      // gate and writes pooled (`bytes`); the copy reads and writes `bytes`.
      double copyRate = 2.0 * bytes / t[0];
      std::printf("compress prefill: %lld tokens in %lld requests, %lld pools, "
                  "bf16, head_dim %lld, kpool %lld: %.1f MiB moved (k + gate "
                  "read, pooled written)\n",
                  (long long)tokens, (long long)batch, (long long)pools,
                  (long long)D, (long long)K, bytes / 1048576.0);
      std::printf("  %-40s %9.3f ms %8.1f GB/s read+written\n",
                  "device-to-device copy of the same bytes", t[0] * 1e3,
                  copyRate / 1e9);
      const char *names[] = {nullptr, "compress, no validation",
                             "compress, Validation::Auto"};
      for (int i = 1; i <= 2; ++i)
        std::printf("  %-40s %9.3f ms %8.1f GB/s read+written: %.2f of the "
                    "copy's rate (copy time / compress time %.2f)\n",
                    names[i], t[i] * 1e3, bytes / t[i] / 1e9,
                    (bytes / t[i]) / copyRate, t[0] / t[i]);
    }
  }

  //===--------------------------------------------------------------------===//
  // The per-call floor.
  //===--------------------------------------------------------------------===//
  if (!checkOnly) {
    std::vector<uint32_t> iro = {0, uint32_t(K)}, cache = {0}, pro = {0, 1};
    std::vector<uint8_t> k(kTile.begin(), kTile.begin() + K * D * es),
        g(gTile.begin(), gTile.begin() + K * D * es);
    auto kD = toDevice(k), gD = toDevice(g), iroD = toDevice(iro),
         cacheD = toDevice(cache), proD = toDevice(pro);
    cuda::DeviceBuffer pooledD(D * es);
    CompressArgs c{};
    c.pooled = view(pooledD, {1, D});
    c.k = view(*kD, {K, D});
    c.gate = view(*gD, {K, D});
    c.ape = apeV;
    c.input_row_offsets = view(*iroD, {2});
    c.pool_row_offsets = view(*proD, {2});
    c.cache_lengths = view(*cacheD, {1});
    auto t = measure(
        {[&] {
           void *stream = mgpuStreamCreate();
           mgpuStreamSynchronize(stream);
           mgpuStreamDestroy(stream);
         },
         [&] {
           die(kernels.compress(c, Validation::Trust));
           mgpuStreamSynchronize(nullptr);
         }},
        /*rounds=*/9, /*reps=*/200);
    std::printf("per-call floor: stream create + synchronize + destroy, no "
                "work %7.2f us; compress of one pool %7.2f us\n",
                t[0] * 1e6, t[1] * 1e6);
  }

  //===--------------------------------------------------------------------===//
  // Decode steps: one token per request.
  //===--------------------------------------------------------------------===//
  std::printf("decode step (ring_close + pool_offsets + compress + seed_tail, "
              "1 token per request, metadata already on the device), and the "
              "fused kpool.step:\n");
  const std::vector<int64_t> batches =
      checkOnly ? std::vector<int64_t>{1, 32, 256}
                : std::vector<int64_t>{1, 32, 256, 1024};
  for (int64_t B : batches) {
    std::vector<uint32_t> iro(B + 1), cache(B), slots(B);
    for (int64_t b = 0; b <= B; ++b)
      iro[b] = uint32_t(b);
    for (int64_t b = 0; b < B; ++b) {
      cache[b] = uint32_t(1000 + 3 * b); // every remainder mod kpool
      slots[b] = uint32_t(B - 1 - b);
    }
    std::vector<uint8_t> k(kTile.begin(), kTile.begin() + B * D * es),
        g(gTile.begin(), gTile.begin() + B * D * es);
    std::vector<uint8_t> ring = randomElements(type, B * 2 * K * D, rng, 2.f);
    auto kD = toDevice(k), gD = toDevice(g), iroD = toDevice(iro),
         cacheD = toDevice(cache), slotD = toDevice(slots),
         ringD = toDevice(ring);
    cuda::DeviceBuffer proD((B + 1) * 4), closedD(B * 4),
        closedRowsD(B * D * es), pooledD(B * D * es);
    View kV = view(*kD, {B, D}), gV = view(*gD, {B, D}),
         iroV = view(*iroD, {B + 1}), cacheV = view(*cacheD, {B}),
         slotV = view(*slotD, {B}), ringV = view(*ringD, {B, 2, K, D}),
         proV = view(proD, {B + 1}), closedV = view(closedD, {B}),
         closedRowsV = view(closedRowsD, {B, D}),
         pooledV = view(pooledD, {B, D});
    RingCloseArgs rc{};
    rc.pooled = closedRowsV;
    rc.closed_pool = closedV;
    rc.tail = ringV;
    rc.k = kV;
    rc.gate = gV;
    rc.ape = apeV;
    rc.input_row_offsets = iroV;
    rc.cache_lengths = cacheV;
    rc.slot_idx = slotV;
    rc.num_requests = int32_t(B);
    PoolOffsetsArgs po{};
    po.pool_row_offsets = proV;
    po.input_row_offsets = iroV;
    po.cache_lengths = cacheV;
    CompressArgs cp{};
    cp.pooled = pooledV;
    cp.k = kV;
    cp.gate = gV;
    cp.ape = apeV;
    cp.input_row_offsets = iroV;
    cp.pool_row_offsets = proV;
    cp.cache_lengths = cacheV;
    SeedTailArgs st{};
    st.tail = ringV;
    st.k = kV;
    st.gate = gV;
    st.input_row_offsets = iroV;
    st.cache_lengths = cacheV;
    st.slot_idx = slotV;
    st.num_requests = int32_t(B);
    auto step = [&](Validation v) {
      die(kernels.ringClose(rc, v));
      die(kernels.poolOffsets(po, v));
      die(kernels.compress(cp, v));
      die(kernels.seedTail(st, v));
      mgpuStreamSynchronize(nullptr);
    };
    // The fused step on its own ring copy and outputs: pooled rows are a
    // capacity (floor(B / kpool) + B for one token per request).
    auto fRingD = toDevice(ring);
    const int64_t capacity = B / K + B;
    cuda::DeviceBuffer fProD((B + 1) * 4), fClosedD(B * 4),
        fClosedRowsD(B * D * es), fPooledD(capacity * D * es);
    View fRingV = view(*fRingD, {B, 2, K, D}), fProV = view(fProD, {B + 1}),
         fClosedV = view(fClosedD, {B}),
         fClosedRowsV = view(fClosedRowsD, {B, D}),
         fPooledV = view(fPooledD, {capacity, D});
    StepArgs fa{};
    fa.closed = fClosedRowsV;
    fa.closed_pool = fClosedV;
    fa.pool_row_offsets = fProV;
    fa.pooled = fPooledV;
    fa.tail = fRingV;
    fa.k = kV;
    fa.gate = gV;
    fa.ape = apeV;
    fa.input_row_offsets = iroV;
    fa.cache_lengths = cacheV;
    fa.slot_idx = slotV;
    fa.num_requests = int32_t(B);
    auto fused = [&] {
      die(kernels.step(fa, Validation::Trust));
      mgpuStreamSynchronize(nullptr);
    };
    // The fused step with the pool cache: page_size 64, request b's pool
    // p (p < 1024) on page b at table index p / 64, -1 elsewhere; codes
    // then scales in one allocation, pages of 64 * 132 bytes.
    auto cRingD = toDevice(ring);
    constexpr int64_t kPageSize = 64, kWidth = 1024 / kPageSize;
    const int64_t pageBytes = kPageSize * (D + 4);
    std::vector<uint32_t> table(B * kWidth, uint32_t(-1));
    for (int64_t b = 0; b < B; ++b)
      table[b * kWidth + (cache[b] / K) / kPageSize] = uint32_t(b);
    auto tableD = toDevice(table);
    cuda::DeviceBuffer cacheBytesD(B * pageBytes), cProD((B + 1) * 4),
        cClosedD(B * 4), cClosedRowsD(B * D * es),
        cPooledD(capacity * D * es);
    View codesV = denseView(cacheBytesD.data(), {B, kPageSize, D});
    codesV.strides[0] = pageBytes;
    View scalesV = denseView(static_cast<char *>(cacheBytesD.data()) +
                                 kPageSize * D,
                             {B, kPageSize});
    scalesV.strides[0] = pageBytes / 4;
    View cRingV = view(*cRingD, {B, 2, K, D}), cProV = view(cProD, {B + 1}),
         cClosedV = view(cClosedD, {B}),
         cClosedRowsV = view(cClosedRowsD, {B, D}),
         cPooledV = view(cPooledD, {capacity, D}),
         tableV = view(*tableD, {B, kWidth});
    StepCacheArgs ca{};
    ca.closed = cClosedRowsV;
    ca.closed_pool = cClosedV;
    ca.pool_row_offsets = cProV;
    ca.pooled = cPooledV;
    ca.tail = cRingV;
    ca.cache_keys = codesV;
    ca.cache_scales = scalesV;
    ca.k = kV;
    ca.gate = gV;
    ca.ape = apeV;
    ca.input_row_offsets = iroV;
    ca.cache_lengths = cacheV;
    ca.slot_idx = slotV;
    ca.num_requests = int32_t(B);
    ca.block_table = tableV;
    auto cached = [&] {
      die(cacheKernels.stepCache(ca, Validation::Trust));
      mgpuStreamSynchronize(nullptr);
    };
    // One call each from the same ring: the outputs agree bit for bit.
    step(Validation::Trust);
    fused();
    cached();
    {
      std::vector<uint8_t> a(B * D * es), b(B * D * es);
      cuda::copy(a.data(), fClosedRowsD.data(), a.size());
      cuda::copy(b.data(), cClosedRowsD.data(), b.size());
      if (a != b) {
        std::fprintf(stderr, "kpool-bench-gpu: batch %lld: the fused step "
                             "with the pool cache differs from the plain "
                             "step\n",
                     (long long)B);
        return 1;
      }
    }
    {
      std::vector<uint8_t> a(B * D * es), b(B * D * es);
      std::vector<uint32_t> pa(B + 1), pb(B + 1);
      cuda::copy(a.data(), closedRowsD.data(), a.size());
      cuda::copy(b.data(), fClosedRowsD.data(), b.size());
      cuda::copy(pa.data(), proD.data(), pa.size() * 4);
      cuda::copy(pb.data(), fProD.data(), pb.size() * 4);
      bool same = a == b && pa == pb;
      std::vector<uint8_t> pooledA(pa[B] * D * es), pooledB(pa[B] * D * es);
      if (same && pa[B] > 0) {
        cuda::copy(pooledA.data(), pooledD.data(), pooledA.size());
        cuda::copy(pooledB.data(), fPooledD.data(), pooledB.size());
        same = pooledA == pooledB;
      }
      if (!same) {
        std::fprintf(stderr, "kpool-bench-gpu: batch %lld: the fused step "
                             "differs from the four calls\n",
                     (long long)B);
        return 1;
      }
    }
    if (checkOnly) {
      std::printf("  batch %4lld: the fused step equals the four calls bit "
                  "for bit, and the cached step's dense outputs the plain "
                  "step's\n",
                  (long long)B);
      continue;
    }
    // A GPU call never validates device-resident metadata (that would be a
    // host round trip): Auto checks shapes only.
    auto t = measure({[&] { step(Validation::Trust); },
                      [&] { step(Validation::Auto); }, fused, cached},
                     /*rounds=*/9, /*reps=*/50);
    std::printf("  batch %4lld: %8.2f us per step, Trust; %8.2f us "
                "Auto (shapes checked); fused kpool.step %8.2f us (one "
                "launch, same bits); with the FP8 Hadamard pool cache "
                "%8.2f us\n",
                (long long)B, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, t[3] * 1e6);
  }
  return 0;
}
