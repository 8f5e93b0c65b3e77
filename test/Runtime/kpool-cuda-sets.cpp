//===- kpool-cuda-sets.cpp - CUDA kernel sets from C++, emulated ----------===//
//
// KernelSet::get for the CUDA target from C++, on the emulated CUDA driver
// (test/lib/CudaEmu, <build>/lib/cuda-emu first in LD_LIBRARY_PATH), which
// executes the kernels' PTX: a configuration of the default pack (loaded by
// the core from next to the program's lib/), one compiled by the JIT this
// program links (registerJitCompiler), getPrecompiled's error for the
// latter, prepare, and pool_offsets and compress on the caller's stream,
// each result compared with the CPU kernel set of the same configuration.
//
//===----------------------------------------------------------------------===//

#include "Reference/Reference.h"
#include "kpool/Runtime/CUDA.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelCache.h"
#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <random>
#include <string>
#include <vector>

using namespace kpool;

static int failures = 0;
static void expect(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  failures += !ok;
}

/// The emulated driver's kpoolEmuKernelLaunches (CudaEmu/Introspection.h).
using KernelLaunchesFn = int (*)(const char *, int64_t *);
static KernelLaunchesFn kernelLaunchesFn;
static int64_t kernelLaunches(const char *part) {
  int64_t n = -1;
  kernelLaunchesFn(part, &n);
  return n;
}

/// Host operands of one compress call and their device copies.
struct Operands {
  int64_t D, K, T = 9, B = 2;
  ElementType type;
  std::vector<uint8_t> k, gate, pooled;
  std::vector<float> ape;
  std::vector<uint32_t> iro = {0, 5, 9}, pro, cache = {0, 3};

  Operands(ElementType type, int64_t D, int64_t K) : D(D), K(K), type(type) {
    std::mt19937 rng(unsigned(D * 7 + K));
    std::uniform_real_distribution<float> key(0.25f, 2.f), gateValue(-4, 4),
        apeValue(-2, 2);
    int64_t esize = reference::elementSize(type);
    k.resize(T * D * esize);
    gate.resize(T * D * esize);
    for (int64_t i = 0; i < T * D; ++i) {
      reference::setElementBits(type, &k[i * esize],
                                reference::roundToBits(type, key(rng)));
      reference::setElementBits(type, &gate[i * esize],
                                reference::roundToBits(type, gateValue(rng)));
    }
    ape.resize(K * D);
    for (float &a : ape)
      a = apeValue(rng);
    pooled.assign((T / K + B) * D * esize, 0);
    pro.assign(B + 1, 0);
  }

  /// Runs pool_offsets and compress with `set` on host memory (CPU) or on
  /// device copies (CUDA, on `stream`); the results land in pro and pooled.
  Status run(const KernelSet &set, void *stream) {
    if (!set.deviceResident())
      return call(set, k.data(), gate.data(), ape.data(), iro.data(),
                  pro.data(), cache.data(), pooled.data(), Stream());
    cuda::DeviceBuffer dk(k.size()), dgate(gate.size()), dape(ape.size() * 4),
        diro(iro.size() * 4), dpro(pro.size() * 4), dcache(cache.size() * 4),
        dpooled(pooled.size());
    cuda::copy(dk.data(), k.data(), k.size(), stream);
    cuda::copy(dgate.data(), gate.data(), gate.size(), stream);
    cuda::copy(dape.data(), ape.data(), ape.size() * 4, stream);
    cuda::copy(diro.data(), iro.data(), iro.size() * 4, stream);
    cuda::copy(dcache.data(), cache.data(), cache.size() * 4, stream);
    Status s = call(set, dk.data(), dgate.data(), dape.data(), diro.data(),
                    dpro.data(), dcache.data(), dpooled.data(), Stream(stream));
    cuda::copy(pro.data(), dpro.data(), pro.size() * 4, stream);
    cuda::copy(pooled.data(), dpooled.data(), pooled.size(), stream);
    return s;
  }

  Status call(const KernelSet &set, void *k, void *gate, void *ape, void *iro,
              void *pro, void *cache, void *pooled, Stream stream) {
    Validation v = set.deviceResident() ? Validation::Trust : Validation::Check;
    PoolOffsetsArgs offsets{};
    offsets.pool_row_offsets = denseView(pro, {B + 1});
    offsets.input_row_offsets = denseView(iro, {B + 1});
    offsets.cache_lengths = denseView(cache, {B});
    Status s = set.poolOffsets(offsets, stream, v);
    if (!s.ok())
      return s;
    CompressArgs a{};
    a.pooled = denseView(pooled, {T / K + B, D});
    a.k = denseView(k, {T, D});
    a.gate = denseView(gate, {T, D});
    a.ape = denseView(ape, {K, D});
    a.input_row_offsets = denseView(iro, {B + 1});
    a.pool_row_offsets = denseView(pro, {B + 1});
    a.cache_lengths = denseView(cache, {B});
    return set.compress(a, stream, v);
  }
};

/// Runs compress for `config` on `gpu` and on the CPU kernel set of the
/// same configuration, and compares: pool_row_offsets equal, pooled rows
/// within 4 ulps (positive keys: the distance of their bits).
static void compareWithCpu(const KernelConfig &config, const KernelSet &gpu,
                           void *stream, const char *kernel) {
  KernelConfig cpuConfig = config;
  cpuConfig.target = Target::CPU;
  Status status;
  std::shared_ptr<KernelSet> cpu = KernelSet::get(cpuConfig, status);
  if (!cpu) {
    expect(false, "CPU kernel set: " + status.message());
    return;
  }
  Operands onGpu(config.elementType, config.headDim, config.kpool),
      onCpu(config.elementType, config.headDim, config.kpool);
  int64_t before = kernelLaunches(kernel);
  Status s = onGpu.run(gpu, stream);
  std::printf("compress: %s\n", s.ok() ? "ok" : s.message().c_str());
  expect(kernelLaunches(kernel) > before,
         std::string(kernel) + " ran on the stream");
  s = onCpu.run(*cpu, nullptr);
  if (!s.ok())
    expect(false, "CPU compress: " + s.message());
  int64_t esize = reference::elementSize(config.elementType);
  int64_t worst = 0, rows = onCpu.pro[onCpu.B];
  for (int64_t i = 0; i < rows * config.headDim; ++i) {
    int64_t a = reference::elementBits(config.elementType,
                                       &onGpu.pooled[i * esize]),
            b = reference::elementBits(config.elementType,
                                       &onCpu.pooled[i * esize]);
    worst = std::max(worst, a > b ? a - b : b - a);
  }
  expect(onGpu.pro == onCpu.pro && rows > 0,
         "pool_row_offsets as on the CPU (" + std::to_string(rows) + " pools)");
  expect(worst <= 4, "pooled rows within 4 ulps of the CPU's (max " +
                         std::to_string(worst) + ")");
}

int main() {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW);
  kernelLaunchesFn = driver ? reinterpret_cast<KernelLaunchesFn>(
                                  dlsym(driver, "kpoolEmuKernelLaunches"))
                            : nullptr;
  if (!kernelLaunchesFn) {
    std::printf("FAIL: run with the emulated CUDA driver first in "
                "LD_LIBRARY_PATH\n");
    return 1;
  }
  registerJitCompiler();

  KernelConfig config;
  config.elementType = KPOOL_BF16;
  config.headDim = 128;
  config.kpool = 4;
  config.target = Target::CUDA;
  Status status;
  std::shared_ptr<KernelSet> packed = KernelSet::getPrecompiled(config, status);
  std::printf("pack: %s\n", status.ok() ? "ok" : status.message().c_str());
  expect(packed && packed->deviceResident(),
         "bf16 128 4: precompiled, from the default pack");
  cuda::OwnedStream stream;
  if (packed) {
    expect(packed->prepare(stream.stream()).ok(), "prepare");
    compareWithCpu(config, *packed, stream.get(),
                   "kpool_bf16_d128_k4_cuda_compress");
  }

  config.elementType = KPOOL_F16;
  config.headDim = 32;
  config.kpool = 3;
  std::shared_ptr<KernelSet> missing =
      KernelSet::getPrecompiled(config, status);
  std::printf("precompiled f16 32 3: %s\n", status.message().c_str());
  expect(!missing, "f16 32 3 is in no pack");
  cache::Statistics before = cache::statistics();
  std::shared_ptr<KernelSet> jit = KernelSet::get(config, status);
  std::printf("get f16 32 3: %s\n",
              status.ok() ? "ok" : status.message().c_str());
  cache::Statistics after = cache::statistics();
  expect(jit &&
             (after.hits - before.hits) + (after.compiled - before.compiled) ==
                 1,
         "f16 32 3: compiled by the JIT (or from its disk cache)");
  if (!jit)
    return 1;
  expect(jit->prepare(stream.stream()).ok(), "prepare");
  compareWithCpu(config, *jit, stream.get(), "kpool_f16_d32_k3_cuda_compress");

  // A wrong shape is refused before anything is launched (the views'
  // addresses are never read).
  std::vector<uint16_t> host(64 * 32);
  void *p = host.data();
  CompressArgs wrong{};
  wrong.pooled = denseView(p, {5, 32});
  wrong.k = denseView(p, {7, 2});
  wrong.gate = denseView(p, {7, 32});
  wrong.ape = denseView(p, {3, 32});
  wrong.input_row_offsets = denseView(p, {3});
  wrong.pool_row_offsets = denseView(p, {3});
  wrong.cache_lengths = denseView(p, {2});
  Status shapes = jit->compress(wrong, stream.stream(), Validation::Trust);
  std::printf("wrong k: %s\n", shapes.message().c_str());
  std::printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
