//===- kpool-profile-gpu.cpp - kernel runs for a profiler -----------------===//
//
// A benchmark driver, not a test: runs each kernel of the GPU profile once
// on fixed inputs and says what it ran, for a profiler to count -- the
// emulated CUDA driver's counters (KPOOL_EMU_PROFILE; see
// benchmarks/gpu-emulated-profile.sh, which runs this) or, on a GPU, a
// tool such as ncu. The ahead-of-time CUDA kernels, bf16, head_dim 128,
// kpool 4, on device buffers:
//
//   compress prefill     kpool's compress (pool_row_offsets precomputed)
//   handwritten prefill  benchmarks/cuda/handwritten-compress.cu's PTX
//                        (--handwritten=FILE, from nvcc -ptx), loaded with
//                        cuModuleLoadData and launched on the same buffers
//   step prefill         the fused kpool.step
//   step_cache prefill   the fused step writing the production pool cache
//                        (paged FP8 e4m3fn, Hadamard, absmax)
//   step decode, step_cache decode   the same on a decode batch
//
// Prefill: --prefill=T tokens (4096) in --requests=R requests (4), no
// cached prefix. Decode: --decode=B requests (256) of one token each, cache
// lengths 1000 + 3b (every remainder mod kpool: a quarter close a pool from
// the ring).
//
// Per run one line:
//   run <name>: launches <first>..<last>, tokens <N>, pools <P>, useful
//   bytes loaded <L>, stored <S>
// launches: the emulated driver's launch numbers (the "launch" field of
// KPOOL_EMU_PROFILE's records), "-" on a real driver. Useful bytes: the k
// and gate rows of the pools' members (compress) or of every token of the
// call (the step, which also seeds the ring) read once, the pooled rows
// the call produces (compressed and closed from the ring) written once,
// and for the cache form each pool's cache entry (head_dim FP8 codes and an
// f32 scale) written once; not ape, the metadata or the ring.
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4.h"
#include "kpool_gpu_bf16_d128_k4_fp8_hadamard_absmax.h"

#include "GPU/GpuSupport.h"

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace kpool;
using namespace kpool::gpu;

namespace {

constexpr int64_t D = 128, K = 4, es = 2;

void die(const Status &s, const char *what) {
  if (s.ok())
    return;
  std::fprintf(stderr, "kpool-profile-gpu: %s: %s\n", what,
               s.message().c_str());
  std::exit(1);
}

void check(CUresult r, const char *call) {
  if (r == CUDA_SUCCESS)
    return;
  const char *name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "kpool-profile-gpu: %s failed: %s\n", call,
               name ? name : "?");
  std::exit(1);
}

int64_t executedLaunches() {
  int64_t launches, withFindings, failed;
  return emulatedLaunches(launches, withFindings, failed) ? launches : -1;
}

/// Prints a run's line; `before` is executedLaunches() before it, taken
/// after the work before it finished.
void report(const char *name, int64_t before, int64_t tokens, int64_t pools,
            int64_t loaded, int64_t stored) {
  mgpuStreamSynchronize(nullptr);
  int64_t after = executedLaunches();
  std::string launches =
      after < 0 ? std::string("-")
                : std::to_string(before + 1) + ".." + std::to_string(after);
  std::printf("run %s: launches %s, tokens %lld, pools %lld, useful bytes "
              "loaded %lld, stored %lld\n",
              name, launches.c_str(), (long long)tokens, (long long)pools,
              (long long)loaded, (long long)stored);
  std::fflush(stdout);
}

struct Device {
  std::unique_ptr<cuda::DeviceBuffer> buffer;
  template <typename T> explicit Device(const std::vector<T> &host) {
    buffer = std::make_unique<cuda::DeviceBuffer>(
        std::max<size_t>(host.size() * sizeof(T), 1));
    if (!host.empty())
      buffer->upload(host.data());
  }
  explicit Device(size_t bytes)
      : buffer(
            std::make_unique<cuda::DeviceBuffer>(std::max<size_t>(bytes, 1))) {}
  void *data() const { return buffer->data(); }
  View view(std::vector<int64_t> sizes) const {
    return denseView(buffer->data(), std::move(sizes));
  }
  template <typename T> std::vector<T> get(size_t n) const {
    std::vector<T> v(n);
    if (n)
      cuda::copy(v.data(), buffer->data(), n * sizeof(T));
    return v;
  }
};

/// The paged FP8 cache of a call: pages of 64 entries (codes, then f32
/// scales, in one allocation), request b's pool p on page
/// table[b][p / 64], pages numbered b * width + i.
struct PagedCache {
  static constexpr int64_t kPageSize = 64;
  int64_t width, pages, pageBytes = kPageSize * (D + 4);
  std::unique_ptr<Device> bytes, table;
  PagedCache(int64_t B, int64_t maxPool) {
    width = maxPool / kPageSize + 1;
    pages = B * width;
    std::vector<uint32_t> t(B * width);
    for (int64_t i = 0; i < B * width; ++i)
      t[i] = uint32_t(i);
    table = std::make_unique<Device>(t);
    bytes = std::make_unique<Device>(size_t(pages * pageBytes));
  }
  View codes() const {
    View v = denseView(bytes->data(), {pages, kPageSize, D});
    v.strides[0] = pageBytes;
    return v;
  }
  View scales() const {
    View v = denseView(static_cast<char *>(bytes->data()) + kPageSize * D,
                       {pages, kPageSize});
    v.strides[0] = pageBytes / 4;
    return v;
  }
  View tableView(int64_t B) const { return table->view({B, width}); }
};

/// One step call (with or without the cache) on a batch; reports it.
void stepRun(const char *name, const KernelSet &kernels, bool cached,
             const std::vector<uint32_t> &iro,
             const std::vector<uint32_t> &cache,
             const std::vector<uint32_t> &slots, const Device &k,
             const Device &g, const Device &ape,
             const std::vector<uint8_t> &ring) {
  const int64_t B = int64_t(cache.size()), N = iro.back();
  const int64_t capacity = N / K + B;
  Device iroD(iro), cacheD(cache), slotD(slots), ringD(ring),
      closed(size_t(B * D * es)), closedPool(size_t(B * 4)),
      pro(size_t((B + 1) * 4)), pooled(size_t(capacity * D * es));
  int64_t maxPool = 0;
  for (int64_t b = 0; b < B; ++b)
    maxPool = std::max<int64_t>(maxPool, (cache[b] + iro[b + 1] - iro[b]) / K);
  PagedCache paged(B, maxPool);
  mgpuStreamSynchronize(nullptr);
  int64_t before = executedLaunches();
  StepArgs a{};
  a.closed = closed.view({B, D});
  a.closed_pool = closedPool.view({B});
  a.pool_row_offsets = pro.view({B + 1});
  a.pooled = pooled.view({capacity, D});
  a.tail = ringD.view({B, 2, K, D});
  a.k = k.view({N, D});
  a.gate = g.view({N, D});
  a.ape = ape.view({K, D});
  a.input_row_offsets = iroD.view({B + 1});
  a.cache_lengths = cacheD.view({B});
  a.slot_idx = slotD.view({B});
  a.num_requests = int32_t(B);
  if (cached) {
    StepCacheArgs c = abi::withCache<StepCacheArgs>(a);
    c.cache_keys = paged.codes();
    c.cache_scales = paged.scales();
    c.block_table = paged.tableView(B);
    die(kernels.stepCache(c, Validation::Trust), name);
  } else {
    die(kernels.step(a, Validation::Trust), name);
  }
  std::vector<uint32_t> offsets = pro.get<uint32_t>(B + 1);
  std::vector<int32_t> ids = closedPool.get<int32_t>(B);
  int64_t pools = offsets[B];
  for (int32_t id : ids)
    pools += id >= 0;
  int64_t loaded = N * D * es * 2;
  int64_t stored = pools * D * es + (cached ? pools * (D + 4) : 0);
  report(name, before, N, pools, loaded, stored);
}

} // namespace

int main(int argc, char **argv) {
  int64_t prefill = 4096, requests = 4, decode = 256;
  std::string handwritten;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char *v = value("--prefill="))
      prefill = std::atoll(v);
    else if (const char *v = value("--requests="))
      requests = std::atoll(v);
    else if (const char *v = value("--decode="))
      decode = std::atoll(v);
    else if (const char *v = value("--handwritten="))
      handwritten = v;
    else {
      std::fprintf(stderr,
                   "usage: %s [--prefill=TOKENS] [--requests=R] "
                   "[--decode=B] [--handwritten=FILE.ptx]\n",
                   argv[0]);
      return 2;
    }
  }
  if (prefill < K || requests < 1 || requests > prefill || decode < 1 ||
      prefill / requests % K) {
    std::fprintf(stderr, "kpool-profile-gpu: --prefill must be at least "
                         "kpool (4), --requests at most that with a multiple "
                         "of 4 tokens per request, --decode at least 1\n");
    return 2;
  }
  std::printf("kpool-profile-gpu: %s\n", deviceDescription().c_str());
  KernelSet kernels(kpool_bf16_d128_k4_cuda_config(),
                    kpool_bf16_d128_k4_cuda_backend());
  KernelSet cacheKernels(kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_config(),
                         kpool_bf16_d128_k4_fp8_hadamard_absmax_cuda_backend());
  // Load every module first: a first launch loads them, not counted in any
  // run (the emulated driver counts launches, not loads).
  die(kernels.prepare(Stream()), "prepare");
  die(cacheKernels.prepare(Stream()), "prepare");

  std::mt19937 rng(7);
  std::vector<float> apeValues(K * D);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (float &a : apeValues)
    a = dist(rng);
  Device ape(apeValues);

  //===--------------------------------------------------------------------===//
  // Prefill.
  //===--------------------------------------------------------------------===//
  {
    const int64_t N = prefill, B = requests;
    std::vector<uint8_t> kRows = randomElements(KPOOL_BF16, N * D, rng, 1.f),
                         gRows = randomElements(KPOOL_BF16, N * D, rng, 4.f);
    Device k(kRows), g(gRows);
    std::vector<uint32_t> iro(B + 1), cache(B, 0), slots(B), pro(B + 1, 0);
    for (int64_t b = 0; b <= B; ++b)
      iro[b] = uint32_t(N * b / B);
    for (int64_t b = 0; b < B; ++b) {
      slots[b] = uint32_t(b);
      pro[b + 1] = pro[b] + (iro[b + 1] - iro[b]) / K;
    }
    const int64_t P = pro[B];
    Device iroD(iro), cacheD(cache), proD(pro), pooled(size_t(P * D * es));
    // Tokens in complete pools: all of them here (multiples of kpool).
    const int64_t loaded = P * K * D * es * 2, stored = P * D * es;

    mgpuStreamSynchronize(nullptr);
    int64_t before = executedLaunches();
    CompressArgs c{};
    c.pooled = pooled.view({P, D});
    c.k = k.view({N, D});
    c.gate = g.view({N, D});
    c.ape = ape.view({K, D});
    c.input_row_offsets = iroD.view({B + 1});
    c.pool_row_offsets = proD.view({B + 1});
    c.cache_lengths = cacheD.view({B});
    die(kernels.compress(c, Validation::Trust), "compress");
    report("compress prefill", before, N, P, loaded, stored);

    if (!handwritten.empty()) {
      std::ifstream in(handwritten);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        std::fprintf(stderr, "kpool-profile-gpu: cannot read '%s'\n",
                     handwritten.c_str());
        return 1;
      }
      std::string ptx = text.str();
      CUdevice device;
      CUcontext context;
      check(cuDeviceGet(&device, 0), "cuDeviceGet");
      check(cuDevicePrimaryCtxRetain(&context, device),
            "cuDevicePrimaryCtxRetain");
      check(cuCtxPushCurrent(context), "cuCtxPushCurrent");
      CUmodule module;
      CUfunction function;
      check(cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
      check(cuModuleGetFunction(&function, module,
                                "handwritten_compress_bf16_d128_k4"),
            "cuModuleGetFunction");
      CUdeviceptr pooledP = CUdeviceptr(pooled.data()),
                  kP = CUdeviceptr(k.data()), gP = CUdeviceptr(g.data()),
                  apeP = CUdeviceptr(ape.data()),
                  iroP = CUdeviceptr(iroD.data()),
                  proP = CUdeviceptr(proD.data()),
                  cacheP = CUdeviceptr(cacheD.data());
      uint32_t rows = uint32_t(P), stride = uint32_t(D), tokens = uint32_t(N),
               batch = uint32_t(B);
      void *params[] = {&pooledP, &rows,   &stride, &kP,   &stride,
                        &gP,      &stride, &tokens, &apeP, &iroP,
                        &proP,    &cacheP, &batch};
      // 16 lanes a pooled row, 16 rows a block of 256, at most 1024 blocks
      // (kpool's compress has the same geometry).
      unsigned blocks = unsigned(
          std::min<int64_t>(std::max<int64_t>((P + 15) / 16, 1), 1024));
      mgpuStreamSynchronize(nullptr);
      before = executedLaunches();
      check(cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, nullptr,
                           params, nullptr),
            "cuLaunchKernel");
      check(cuCtxSynchronize(), "cuCtxSynchronize");
      report("handwritten prefill", before, N, P, loaded, stored);
      check(cuModuleUnload(module), "cuModuleUnload");
      check(cuCtxPopCurrent(&context), "cuCtxPopCurrent");
      check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
    }

    std::vector<uint8_t> ring =
        randomElements(KPOOL_BF16, B * 2 * K * D, rng, 2.f);
    stepRun("step prefill", kernels, false, iro, cache, slots, k, g, ape, ring);
    stepRun("step_cache prefill", cacheKernels, true, iro, cache, slots, k, g,
            ape, ring);
  }

  //===--------------------------------------------------------------------===//
  // Decode: one token per request.
  //===--------------------------------------------------------------------===//
  {
    const int64_t B = decode;
    std::vector<uint32_t> iro(B + 1), cache(B), slots(B);
    for (int64_t b = 0; b <= B; ++b)
      iro[b] = uint32_t(b);
    for (int64_t b = 0; b < B; ++b) {
      cache[b] = uint32_t(1000 + 3 * b);
      slots[b] = uint32_t(B - 1 - b);
    }
    Device k(randomElements(KPOOL_BF16, B * D, rng, 1.f)),
        g(randomElements(KPOOL_BF16, B * D, rng, 4.f));
    std::vector<uint8_t> ring =
        randomElements(KPOOL_BF16, B * 2 * K * D, rng, 2.f);
    stepRun("step decode", kernels, false, iro, cache, slots, k, g, ape, ring);
    stepRun("step_cache decode", cacheKernels, true, iro, cache, slots, k, g,
            ape, ring);
  }
  return 0;
}
