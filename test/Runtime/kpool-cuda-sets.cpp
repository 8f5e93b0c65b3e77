//===- kpool-cuda-sets.cpp - CUDA kernel sets from C++, emulated ----------===//
//
// KernelSet::get for the CUDA target from C++, on the mgpu-level emulation
// (libkpool_cuda_runtime.so of test/lib/GPU first in LD_LIBRARY_PATH): a
// configuration of the default pack (loaded by the core from next to the
// program's lib/), one compiled by the JIT this program links
// (registerJitCompiler), getPrecompiled's error for the latter, prepare and
// a call on the caller's stream. The emulation runs no PTX; launches are
// counted.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelCache.h"
#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <cstdio>
#include <dlfcn.h>
#include <vector>

using namespace kpool;

static int failures = 0;
static void expect(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

int main() {
  void *emu = dlopen("libkpool_cuda_runtime.so", RTLD_NOW);
  if (!emu || !dlsym(emu, "kpoolEmuIsEmulated")) {
    std::printf("FAIL: run with the emulation first in LD_LIBRARY_PATH\n");
    return 1;
  }
  auto streamCreate =
      reinterpret_cast<void *(*)()>(dlsym(emu, "mgpuStreamCreate"));
  auto launches = reinterpret_cast<int64_t (*)(const char *)>(
      dlsym(emu, "kpoolEmuKernelLaunchesOf"));
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

  config.elementType = KPOOL_F16;
  config.headDim = 32;
  config.kpool = 3;
  std::shared_ptr<KernelSet> missing =
      KernelSet::getPrecompiled(config, status);
  std::printf("precompiled f16 32 3: %s\n", status.message().c_str());
  expect(!missing, "f16 32 3 is in no pack");
  std::shared_ptr<KernelSet> jit = KernelSet::get(config, status);
  std::printf("get f16 32 3: %s\n",
              status.ok() ? "ok" : status.message().c_str());
  cache::Statistics stats = cache::statistics();
  expect(jit && stats.hits + stats.compiled == 1,
         "f16 32 3: compiled by the JIT (or from its disk cache)");
  if (!jit)
    return 1;

  void *stream = streamCreate();
  Status prepared = jit->prepare(Stream(stream));
  expect(prepared.ok(), "prepare");
  const int64_t D = 32, K = 3, T = 7, B = 2;
  std::vector<uint16_t> pooled((T / K + B) * D), k(T * D), gate(T * D);
  std::vector<float> ape(K * D);
  std::vector<uint32_t> iro = {0, 3, 7}, pro(B + 1), lengths(B);
  int64_t before = launches("kpool_f16_d32_k3_cuda_compress");
  Status called = jit->compress(
      denseView(pooled.data(), {T / K + B, D}), denseView(k.data(), {T, D}),
      denseView(gate.data(), {T, D}), denseView(ape.data(), {K, D}),
      denseView(iro.data(), {B + 1}), denseView(pro.data(), {B + 1}),
      denseView(lengths.data(), {B}), Stream(stream));
  std::printf("compress: %s\n", called.ok() ? "ok" : called.message().c_str());
  expect(launches("kpool_f16_d32_k3_cuda_compress") > before,
         "the JIT's compress kernel was launched on the stream");
  Status shapes = jit->compress(
      denseView(pooled.data(), {T / K + B, D}), denseView(k.data(), {T, 2}),
      denseView(gate.data(), {T, D}), denseView(ape.data(), {K, D}),
      denseView(iro.data(), {B + 1}), denseView(pro.data(), {B + 1}),
      denseView(lengths.data(), {B}), Stream(stream));
  std::printf("wrong k: %s\n", shapes.message().c_str());
  std::printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
