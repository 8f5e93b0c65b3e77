/*===- kpool-capi-cuda.c - CUDA kernel sets from C, emulated -------------===*\
|*                                                                            *|
|* Kernel sets of the CUDA target through the runtime's C API, on the        *|
|* mgpu-level emulation (test/lib/GPU/FakeCudaRuntime.cpp as                 *|
|* libkpool_cuda_runtime.so, first in LD_LIBRARY_PATH): the default pack's   *|
|* kernels (no compilation) and the JIT's (compiled in process), their GPU   *|
|* images (PTX with the kernels named, and a cubin), module loading in       *|
|* prepare, launches on the caller's stream, capture and replay, and the     *|
|* CUDA raw entry points' extent check recorded in a status word. The        *|
|* emulation executes no PTX: what the kernels compute is checked where PTX  *|
|* runs (the tests gated by cuda-emu). `--neither` asks for a configuration  *|
|* no pack with the JIT off, and prints the error.                           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// clang-format off
/* REQUIRES: cuda-layer
   RUN: env LD_LIBRARY_PATH=%kpool_mgpu_emu kpool-capi-cuda-test | FileCheck %s
   RUN: env LD_LIBRARY_PATH=%kpool_mgpu_emu KPOOL_JIT_LIBRARY= \
   RUN:   KPOOL_KERNEL_PACKS= kpool-capi-cuda-test --neither \
   RUN:   | FileCheck %s --check-prefix=NEITHER

   CHECK: bf16 128 4 on CUDA: ok
   CHECK-NEXT: ok: from the default pack, nothing compiled or cached
   CHECK-NEXT: ok: the pack's GPU modules are registered (PTX, kernels named)
   CHECK: ok: no module loaded before prepare
   CHECK-NEXT: prepare: ok
   CHECK-NEXT: ok: prepare loads the modules
   CHECK-NEXT: compress: ok
   CHECK-NEXT: ok: compress launched on the caller's stream
   CHECK-NEXT: last kernel: kpool_bf16_d128_k4_cuda_compress_memref_{{.*}}
   CHECK-NEXT: compress validated: compress: validation was requested, but this kernel set's metadata is device memory
   CHECK: step (captured): ok
   CHECK-NEXT: ok: a captured step runs nothing
   CHECK-NEXT: graph launches: {{[1-9]}}
   CHECK-NEXT: ok: two replays run the step's launches twice
   CHECK: f16 128 4 fp8-hadamard-pow2 on CUDA: ok
   CHECK-NEXT: ok: from the default pack too
   CHECK: bf16 64 2 on CUDA: ok
   CHECK: ok: compiled by the JIT (or taken from its disk cache)
   CHECK-NEXT: JIT compress: ok
   CHECK-NEXT: ok: the JIT's compress kernel ran
   CHECK: raw entry point: returned 0x110b, status 0x110b: 'k''s extent in dimension 1 contradicts
   CHECK-NEXT: ok: the wrong view is recorded, no compress launched
   CHECK: PASS (0 failures)

   NEITHER: neither: no kernels for bf16, head_dim 96, kpool 4 on the CUDA target: none are registered (no kernel pack is loaded), and no compiler is available (the JIT is off (KPOOL_JIT_LIBRARY is set and empty)); build a kernel pack with `kpool-aot --pack --target=cuda --config=bf16:96:4 -o pack.o`
*/
// clang-format on

#include "kpool_gpu_bf16_d128_k4.h"

#include "kpool-c/Packs.h"
#include "kpool-c/Runtime.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The emulation's functions (mgpu* and its test interface). */
static void *emu;
#define EMU(ret, name, ...)                                                    \
  ret (*name)(__VA_ARGS__) = (ret(*)(__VA_ARGS__))dlsym(emu, #name)

static int failures = 0;
static void expect(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

static KPoolView view(void *data, int64_t rank, const int64_t *sizes) {
  KPoolView v;
  int64_t stride = 1, d;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.rank = rank;
  for (d = rank - 1; d >= 0; --d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = stride;
    stride *= sizes[d];
  }
  return v;
}

static void report(const char *what, KPoolError *error) {
  printf("%s: %s\n", what, error ? kpoolErrorMessage(error) : "ok");
  kpoolErrorDestroy(error);
}

int main(int argc, char **argv) {
  KPoolKernelSet *set = NULL;
  KPoolError *error;
  KPoolKernelCacheStatistics stats;
  if (argc > 1 && !strcmp(argv[1], "--neither")) {
    error = kpoolKernelSetCreateForTarget(KPOOL_TARGET_CUDA, KPOOL_BF16, 96, 4,
                                          0, 0, &set);
    report("neither", error);
    return set != NULL;
  }
  emu = dlopen("libkpool_cuda_runtime.so", RTLD_NOW);
  if (!emu || !dlsym(emu, "kpoolEmuIsEmulated")) {
    printf("FAIL: run with the emulation first in LD_LIBRARY_PATH\n");
    return 1;
  }
  EMU(void *, mgpuStreamCreate, void);
  EMU(void *, mgpuMemAlloc, uint64_t, void *, _Bool);
  EMU(int64_t, kpoolEmuKernelLaunches, void);
  EMU(int64_t, kpoolEmuKernelLaunchesOf, const char *);
  EMU(const char *, kpoolEmuLastKernel, void);
  EMU(int64_t, kpoolEmuModulesRegistered, void);
  EMU(int64_t, kpoolEmuCubinModules, void);
  EMU(int64_t, kpoolEmuModuleLoads, void);
  EMU(int64_t, kpoolEmuStreamLaunches, void *);
  EMU(void, kpoolEmuBeginCapture, void *);
  EMU(void *, kpoolEmuEndCapture, void *);
  EMU(void, kpoolEmuLaunchGraph, void *, void *);
  EMU(int64_t, kpoolEmuGraphLaunches, void *);

  enum { D = 128, K = 4, T = 9, B = 2, SLOTS = 4 };
  void *stream = mgpuStreamCreate();
  int64_t modulesAtStart = kpoolEmuModulesRegistered();
  int64_t sPooled[2] = {T / K + B, D}, sK[2] = {T, D}, sApe[2] = {K, D},
          sB1[1] = {B + 1}, sB[1] = {B}, sTail[4] = {SLOTS, 2, K, D},
          sClosed[2] = {B, D};
  void *pooled = mgpuMemAlloc(sizeof(uint16_t) * (T / K + B) * D, NULL, 0);
  void *k = mgpuMemAlloc(sizeof(uint16_t) * T * D, NULL, 0);
  void *gate = mgpuMemAlloc(sizeof(uint16_t) * T * D, NULL, 0);
  void *ape = mgpuMemAlloc(sizeof(float) * K * D, NULL, 0);
  void *iro = mgpuMemAlloc(4 * (B + 1), NULL, 0);
  void *pro = mgpuMemAlloc(4 * (B + 1), NULL, 0);
  void *cache = mgpuMemAlloc(4 * B, NULL, 0);
  void *slots = mgpuMemAlloc(4 * B, NULL, 0);
  void *tail = mgpuMemAlloc(sizeof(uint16_t) * SLOTS * 2 * K * D, NULL, 0);
  void *closed = mgpuMemAlloc(sizeof(uint16_t) * B * D, NULL, 0);
  void *closedPool = mgpuMemAlloc(4 * B, NULL, 0);
  uint64_t *status = mgpuMemAlloc(8, NULL, 0);
  KPoolView vPooled = view(pooled, 2, sPooled), vK = view(k, 2, sK),
            vGate = view(gate, 2, sK), vApe = view(ape, 2, sApe),
            vIro = view(iro, 1, sB1), vPro = view(pro, 1, sB1),
            vCache = view(cache, 1, sB), vSlots = view(slots, 1, sB),
            vTail = view(tail, 4, sTail), vClosed = view(closed, 2, sClosed),
            vClosedPool = view(closedPool, 1, sB);

  /* The default pack: bf16, head_dim 128, kpool 4, no compilation. */
  error = kpoolKernelSetCreateForTarget(KPOOL_TARGET_CUDA, KPOOL_BF16, D, K, 0,
                                        0, &set);
  report("bf16 128 4 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  expect(set && stats.compiled == 0 && stats.hits == 0,
         "from the default pack, nothing compiled or cached");
  expect(kpoolEmuModulesRegistered() > modulesAtStart,
         "the pack's GPU modules are registered (PTX, kernels named)");
  printf("GPU modules with a cubin: %lld of %lld\n",
         (long long)kpoolEmuCubinModules(),
         (long long)kpoolEmuModulesRegistered());
  expect(kpoolEmuModuleLoads() == 0, "no module loaded before prepare");
  report("prepare", kpoolKernelSetPrepare(set, stream));
  expect(kpoolEmuModuleLoads() == 1, "prepare loads the modules");

  int64_t before = kpoolEmuStreamLaunches(stream);
  report("compress", kpoolCompress(set, &vPooled, &vK, &vGate, &vApe, &vIro,
                                   &vPro, &vCache, status, stream, 0));
  expect(kpoolEmuStreamLaunches(stream) > before,
         "compress launched on the caller's stream");
  printf("last kernel: %s\n", kpoolEmuLastKernel());
  report("compress validated",
         kpoolCompress(set, &vPooled, &vK, &vGate, &vApe, &vIro, &vPro, &vCache,
                       status, stream, 1));

  /* Capture a step, replay it twice. */
  kpoolEmuBeginCapture(stream);
  before = kpoolEmuKernelLaunches();
  report("step (captured)",
         kpoolStep(set, &vClosed, &vClosedPool, &vPro, &vPooled, &vTail, &vK,
                   &vGate, &vApe, &vIro, &vCache, &vSlots, B, status, stream,
                   0));
  void *graph = kpoolEmuEndCapture(stream);
  expect(kpoolEmuKernelLaunches() == before, "a captured step runs nothing");
  printf("graph launches: %lld\n", (long long)kpoolEmuGraphLaunches(graph));
  before = kpoolEmuKernelLaunchesOf("step");
  kpoolEmuLaunchGraph(graph, stream);
  kpoolEmuLaunchGraph(graph, stream);
  expect(kpoolEmuKernelLaunchesOf("step") ==
             before + 2 * kpoolEmuGraphLaunches(graph),
         "two replays run the step's launches twice");
  kpoolKernelSetDestroy(set);

  /* A pool-cache format of the pack. */
  set = NULL;
  error = kpoolKernelSetCreateWithCache(
      KPOOL_TARGET_CUDA, KPOOL_F16, D, K, 0, 0, KPOOL_CACHE_FP8,
      KPOOL_ROTATE_HADAMARD, KPOOL_SCALE_POW2, &set);
  report("f16 128 4 fp8-hadamard-pow2 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  expect(set && stats.compiled == 0, "from the default pack too");
  kpoolKernelSetDestroy(set);

  /* Another configuration: the JIT compiles it in process. */
  set = NULL;
  error = kpoolKernelSetCreateForTarget(KPOOL_TARGET_CUDA, KPOOL_BF16, 64, 2, 0,
                                        0, &set);
  report("bf16 64 2 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  printf("cache: hits %lld, compiled %lld\n", (long long)stats.hits,
         (long long)stats.compiled);
  expect(set && stats.hits + stats.compiled == 1,
         "compiled by the JIT (or taken from its disk cache)");
  {
    int64_t s64[2] = {T, 64}, sApe2[2] = {2, 64}, sP2[2] = {T / 2 + B, 64};
    KPoolView p2 = view(pooled, 2, sP2), k2 = view(k, 2, s64),
              g2 = view(gate, 2, s64), a2 = view(ape, 2, sApe2);
    before = kpoolEmuKernelLaunchesOf("kpool_bf16_d64_k2_cuda_compress");
    report("JIT compress", kpoolCompress(set, &p2, &k2, &g2, &a2, &vIro, &vPro,
                                         &vCache, NULL, stream, 0));
    expect(kpoolEmuKernelLaunchesOf("kpool_bf16_d64_k2_cuda_compress") > before,
           "the JIT's compress kernel ran");
  }
  kpoolKernelSetDestroy(set);

  /* kpool-aot's CUDA raw entry point: a wrong view records its finding in
     the (device) status word through libkpool_cuda_runtime, on the stream,
     and launches no kernel. */
  {
    int64_t bad[2] = {T, 2};
    KPoolView vBad = view(k, 2, bad);
    uint64_t word;
    KPoolError *decoded;
    *status = 0;
    before = kpoolEmuKernelLaunchesOf("compress");
    word = kpool_bf16_d128_k4_cuda_compress(
        &vPooled, &vBad, &vGate, &vApe, &vIro, &vPro, &vCache, status, stream);
    decoded = kpoolStatusWordError(*status);
    printf("raw entry point: returned 0x%llx, status 0x%llx: %s\n",
           (unsigned long long)word, (unsigned long long)*status,
           decoded ? kpoolErrorMessage(decoded) : "none");
    kpoolErrorDestroy(decoded);
    expect(word != 0 && *status == word &&
               kpoolEmuKernelLaunchesOf("compress") == before,
           "the wrong view is recorded, no compress launched");
  }
  printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
