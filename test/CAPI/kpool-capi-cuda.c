/*===- kpool-capi-cuda.c - CUDA kernel sets from C, emulated -------------===*\
|*                                                                            *|
|* Kernel sets of the CUDA target through the runtime's C API, on the        *|
|* emulated CUDA driver (test/lib/CudaEmu: <build>/lib/cuda-emu first in     *|
|* LD_LIBRARY_PATH), which executes the kernels' PTX: the default pack's     *|
|* kernels (nothing compiled) and the JIT's (compiled in process), module    *|
|* loading in prepare, launches on the caller's stream, a step captured into *|
|* a CUDA graph and replayed, and kpool-aot's CUDA raw entry point rejecting *|
|* a wrong view through the status word. Every result is compared with the   *|
|* CPU kernel set of the same configuration. The emulated driver's           *|
|* introspection (CudaEmu/Introspection.h) counts loads and launches.        *|
|* `--neither` asks for a configuration in no pack with the JIT off, and     *|
|* prints the error.                                                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// clang-format off
/* REQUIRES: cuda-emu-executes
   RUN: env %cuda_emu_env kpool-capi-cuda-test 2> %t.err | FileCheck %s
   RUN: FileCheck %s --check-prefix=DRIVER < %t.err
   RUN: env %cuda_emu_env KPOOL_JIT_LIBRARY= KPOOL_KERNEL_PACKS= \
   RUN:   kpool-capi-cuda-test --neither | FileCheck %s --check-prefix=NEITHER

   CHECK: device: kpool emulated device
   CHECK: bf16 128 4 on CUDA: ok
   CHECK-NEXT: ok: from the default pack, nothing compiled or cached
   CHECK-NEXT: ok: no module loaded before prepare
   CHECK-NEXT: prepare: ok
   CHECK-NEXT: ok: prepare loads the modules
   CHECK-NEXT: pool_offsets: ok
   CHECK-NEXT: compress: ok
   CHECK-NEXT: ok: no module loaded after prepare
   CHECK-NEXT: ok: compress ran on the caller's stream
   CHECK-NEXT: ok: pool_row_offsets as on the CPU
   CHECK-NEXT: ok: pooled rows within 4 ulps of the CPU's (max {{[0-4]}})
   CHECK-NEXT: compress validated: compress: validation was requested, but this kernel set's metadata is device memory
   CHECK-NEXT: step (captured): ok
   CHECK-NEXT: ok: a captured step runs nothing
   CHECK-NEXT: graph kernel nodes: {{[1-9]}}
   CHECK-NEXT: ok: replayed: closed rows within 4 ulps of the CPU's (max {{[0-4]}})
   CHECK-NEXT: ok: replayed: closed_pool, pool_row_offsets, pooled rows and the ring as on the CPU (pooled max {{[0-4]}} ulps)
   CHECK-NEXT: ok: two replays ran the graph's kernels twice
   CHECK-NEXT: ok: status word 0
   CHECK: f16 128 4 fp8-hadamard-pow2 on CUDA: ok
   CHECK-NEXT: ok: from the default pack too
   CHECK: bf16 64 2 on CUDA: ok
   CHECK: ok: compiled by the JIT (or taken from its disk cache)
   CHECK-NEXT: JIT pool_offsets: ok
   CHECK-NEXT: JIT compress: ok
   CHECK-NEXT: ok: the JIT's compress kernel ran
   CHECK-NEXT: ok: JIT pooled rows within 4 ulps of the CPU's (max {{[0-4]}})
   CHECK: raw entry point: returned 0x110b, status 0x110b: 'k' dimension 1 contradicts
   CHECK-NEXT: ok: the wrong view is recorded on the stream, no compress launched
   CHECK: PASS (0 failures)

   The pack's GPU image carries a cubin, which the emulated driver refuses
   (it runs PTX), and PTX, which the CUDA layer loads instead; no sanitizer
   finding in any launch.
   DRIVER: cuda-emu: cuModuleLoadData: the image is a cubin: SASS only
   DRIVER-NOT: sanitizer finding

   NEITHER: neither: no kernels for bf16, head_dim 96, kpool 4 on the CUDA target: none are registered (no kernel pack is loaded), and no compiler is available (the JIT is off (KPOOL_JIT_LIBRARY is set and empty)); build a kernel pack with `kpool-aot --pack --target=cuda --config=bf16:96:4 -o pack.o`
*/
// clang-format on

#include "kpool_gpu_bf16_d128_k4.h"

#include "CudaEmu/Introspection.h"
#include "kpool-c/Packs.h"
#include "kpool-c/Runtime.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 128, K = 4, T = 9, B = 2, SLOTS = 4 };

static int failures = 0;
static void expect(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

static void report(const char *what, KPoolError *error) {
  printf("%s: %s\n", what, error ? kpoolErrorMessage(error) : "ok");
  kpoolErrorDestroy(error);
}

/* A call that must succeed (the CPU kernel set's): silent unless it fails. */
static void must(const char *what, KPoolError *error) {
  if (error) {
    printf("FAIL: %s: %s\n", what, kpoolErrorMessage(error));
    ++failures;
  }
  kpoolErrorDestroy(error);
}

static void check(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("FAIL: %s: %s\n", call, name);
    exit(1);
  }
}

/* The emulated driver's introspection, looked up on the loaded driver. */
static struct {
  __typeof__(kpoolEmuStreamLaunches) *streamLaunches;
  __typeof__(kpoolEmuModuleLoads) *moduleLoads;
  __typeof__(kpoolEmuLaunches) *launches;
  __typeof__(kpoolEmuKernelLaunches) *kernelLaunches;
} emu;

static int64_t streamLaunches(CUstream s) {
  int64_t n = -1;
  emu.streamLaunches(s, &n);
  return n;
}
static int64_t moduleLoads(void) {
  int64_t n = -1;
  emu.moduleLoads(&n, NULL, NULL);
  return n;
}
static int64_t allLaunches(void) {
  int64_t n = -1;
  emu.launches(&n, NULL, NULL);
  return n;
}
static int64_t kernelLaunches(const char *part) {
  int64_t n = -1;
  emu.kernelLaunches(part, &n);
  return n;
}

/* Deterministic operands: bf16 keys in [0.25, 2) (so that pooled rows are
   of the keys' magnitude and ulps of the result are meaningful), gates in
   [-4, 4), ape in [-2, 2). */
static uint32_t rngState = 12345;
static float uniform(float lo, float hi) {
  rngState = rngState * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)(rngState >> 8) / (float)(1u << 24);
}
static uint16_t bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static void fillBf16(uint16_t *p, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = bf16(uniform(lo, hi));
}

/* Largest distance in ulps between two arrays of positive bf16 values;
   a huge value when a sign or NaN differs. */
static int64_t maxUlps(const uint16_t *a, const uint16_t *b, int64_t n) {
  int64_t worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    if ((a[i] & 0x8000) || (b[i] & 0x8000) || (a[i] & 0x7f80) == 0x7f80)
      return a[i] == b[i] ? worst : 1 << 20;
    int64_t d = (int64_t)a[i] - (int64_t)b[i];
    if (d < 0)
      d = -d;
    if (d > worst)
      worst = d;
  }
  return worst;
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

/* An operand in host memory and its device copy. */
typedef struct {
  void *host;
  CUdeviceptr device;
  size_t bytes;
  int64_t rank, sizes[4];
} Operand;

static Operand operand(size_t elementSize, int64_t rank, const int64_t *sizes) {
  Operand o;
  size_t n = elementSize;
  memset(&o, 0, sizeof o);
  o.rank = rank;
  for (int64_t d = 0; d < rank; ++d) {
    o.sizes[d] = sizes[d];
    n *= (size_t)sizes[d];
  }
  o.bytes = n;
  o.host = calloc(1, n);
  check(cuMemAlloc(&o.device, n), "cuMemAlloc");
  check(cuMemsetD8(o.device, 0, n), "cuMemsetD8");
  return o;
}
static void upload(Operand *o) {
  check(cuMemcpyHtoD(o->device, o->host, o->bytes), "cuMemcpyHtoD");
}
/* Copies the device contents into `into` (o->bytes) after `stream`. */
static void download(const Operand *o, void *into, CUstream stream) {
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  check(cuMemcpyDtoH(into, o->device, o->bytes), "cuMemcpyDtoH");
}
static KPoolView hostView(Operand *o) {
  return view(o->host, o->rank, o->sizes);
}
static KPoolView deviceView(Operand *o) {
  return view((void *)(uintptr_t)o->device, o->rank, o->sizes);
}

/* A configuration of `target`. */
static KPoolKernelConfig config(int32_t target, KPoolElementType type,
                                int64_t headDim, int64_t kpool) {
  KPoolKernelConfig c = kpoolKernelConfigDefault();
  c.target = target;
  c.elementType = type;
  c.headDim = headDim;
  c.kpool = kpool;
  return c;
}
static KPoolError *create(int32_t target, KPoolElementType type,
                          int64_t headDim, int64_t kpool,
                          KPoolKernelSet **result) {
  KPoolKernelConfig c = config(target, type, headDim, kpool);
  return kpoolKernelSetCreate(&c, result);
}

/* Call options: on the device, the caller's stream and status word and no
   metadata validation (device memory is never read back); on the host,
   validated. */
static KPoolCallOptions onDevice(uint64_t *word, CUstream stream) {
  KPoolCallOptions o;
  memset(&o, 0, sizeof o);
  o.status = word;
  o.stream = stream;
  o.validation = KPOOL_VALIDATION_TRUST;
  return o;
}
static KPoolCallOptions onHost(void) {
  KPoolCallOptions o;
  memset(&o, 0, sizeof o);
  o.validation = KPOOL_VALIDATION_CHECK;
  return o;
}

/* The operands of pool_offsets, compress and step, as views of one kind
   (device or host). */
typedef struct {
  KPoolView pooled, k, gate, ape, iro, pro, cache, slots, tail, closed,
      closedPool;
} Views;

static KPoolPoolOffsetsArgs poolOffsetsArgs(const Views *v) {
  KPoolPoolOffsetsArgs a;
  memset(&a, 0, sizeof a);
  a.pool_row_offsets = v->pro;
  a.input_row_offsets = v->iro;
  a.cache_lengths = v->cache;
  return a;
}
static KPoolCompressArgs compressArgs(const Views *v) {
  KPoolCompressArgs a;
  memset(&a, 0, sizeof a);
  a.pooled = v->pooled;
  a.k = v->k;
  a.gate = v->gate;
  a.ape = v->ape;
  a.input_row_offsets = v->iro;
  a.pool_row_offsets = v->pro;
  a.cache_lengths = v->cache;
  return a;
}
static KPoolStepArgs stepArgs(const Views *v, int32_t numRequests) {
  KPoolStepArgs a;
  memset(&a, 0, sizeof a);
  a.closed = v->closed;
  a.closed_pool = v->closedPool;
  a.pool_row_offsets = v->pro;
  a.pooled = v->pooled;
  a.tail = v->tail;
  a.k = v->k;
  a.gate = v->gate;
  a.ape = v->ape;
  a.input_row_offsets = v->iro;
  a.cache_lengths = v->cache;
  a.slot_idx = v->slots;
  a.num_requests = numRequests;
  return a;
}

int main(int argc, char **argv) {
  KPoolKernelSet *set = NULL, *cpu = NULL;
  KPoolError *error;
  KPoolKernelCacheStatistics stats;
  if (argc > 1 && !strcmp(argv[1], "--neither")) {
    error = create(KPOOL_TARGET_CUDA, KPOOL_BF16, 96, 4, &set);
    report("neither", error);
    return set != NULL;
  }

  /* The driver the loader found must be the emulated one. */
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  emu.streamLaunches = driver ? dlsym(driver, "kpoolEmuStreamLaunches") : NULL;
  emu.moduleLoads = driver ? dlsym(driver, "kpoolEmuModuleLoads") : NULL;
  emu.launches = driver ? dlsym(driver, "kpoolEmuLaunches") : NULL;
  emu.kernelLaunches = driver ? dlsym(driver, "kpoolEmuKernelLaunches") : NULL;
  if (!emu.streamLaunches || !emu.moduleLoads || !emu.launches ||
      !emu.kernelLaunches) {
    printf("FAIL: run with the emulated CUDA driver first in "
           "LD_LIBRARY_PATH\n");
    return 1;
  }
  CUdevice device;
  CUcontext context;
  char name[128];
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  check(cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  printf("device: %s\n", name);
  check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUstream stream;
  check(cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");

  int64_t sPooled[2] = {T / K + B, D}, sK[2] = {T, D}, sApe[2] = {K, D},
          sB1[1] = {B + 1}, sB[1] = {B}, sTail[4] = {SLOTS, 2, K, D},
          sClosed[2] = {B, D}, sWord[1] = {1};
  Operand pooled = operand(2, 2, sPooled), k = operand(2, 2, sK),
          gate = operand(2, 2, sK), ape = operand(4, 2, sApe),
          iro = operand(4, 1, sB1), pro = operand(4, 1, sB1),
          cache = operand(4, 1, sB), slots = operand(4, 1, sB),
          tail = operand(2, 4, sTail), closed = operand(2, 2, sClosed),
          closedPool = operand(4, 1, sB), status = operand(8, 1, sWord);
  fillBf16(k.host, T * D, 0.25f, 2.f);
  fillBf16(gate.host, T * D, -4.f, 4.f);
  for (int64_t i = 0; i < K * D; ++i)
    ((float *)ape.host)[i] = uniform(-2.f, 2.f);
  fillBf16(tail.host, SLOTS * 2 * K * D, 0.25f, 2.f);
  /* Two requests of 5 and 4 tokens. For compress they start pools (cached
     0 and 4: one pool each); for the step they continue open pools (cached
     2 and 5: ring_close closes both from the ring and this call). */
  uint32_t iroValues[B + 1] = {0, 5, 9}, compressCache[B] = {0, 4},
                         stepCache[B] = {2, 5}, slotValues[B] = {3, 1};
  memcpy(iro.host, iroValues, sizeof iroValues);
  memcpy(cache.host, compressCache, sizeof compressCache);
  memcpy(slots.host, slotValues, sizeof slotValues);
  Operand *all[] = {&pooled, &k,     &gate, &ape,    &iro,        &pro,
                    &cache,  &slots, &tail, &closed, &closedPool, &status};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
    upload(all[i]);
  Views dev = {deviceView(&pooled), deviceView(&k),         deviceView(&gate),
               deviceView(&ape),    deviceView(&iro),       deviceView(&pro),
               deviceView(&cache),  deviceView(&slots),     deviceView(&tail),
               deviceView(&closed), deviceView(&closedPool)};
  uint64_t *word = (uint64_t *)(uintptr_t)status.device;
  KPoolCallOptions onGpu = onDevice(word, stream), host = onHost();
  static uint16_t gotRows[(T / K + B) * D], gotClosed[B * D],
      gotTail[SLOTS * 2 * K * D];
  uint32_t gotPro[B + 1], gotClosedPool[B];
  uint64_t gotWord = 0;
  int64_t ulps;

  /* The default pack: bf16, head_dim 128, kpool 4, no compilation. */
  error = create(KPOOL_TARGET_CUDA, KPOOL_BF16, D, K, &set);
  report("bf16 128 4 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  expect(set && stats.compiled == 0 && stats.hits == 0,
         "from the default pack, nothing compiled or cached");
  if (!set)
    return 1;
  expect(moduleLoads() == 0, "no module loaded before prepare");
  report("prepare", kpoolKernelSetPrepare(set, stream));
  int64_t loaded = moduleLoads();
  expect(loaded > 0, "prepare loads the modules");

  /* pool_offsets and compress, against the CPU kernel set. */
  int64_t before = streamLaunches(stream);
  KPoolPoolOffsetsArgs offsetsArgs = poolOffsetsArgs(&dev);
  KPoolCompressArgs compress = compressArgs(&dev);
  report("pool_offsets", kpoolPoolOffsets(set, &offsetsArgs, &onGpu));
  report("compress", kpoolCompress(set, &compress, &onGpu));
  download(&pooled, gotRows, stream);
  download(&pro, gotPro, stream);
  expect(moduleLoads() == loaded, "no module loaded after prepare");
  expect(streamLaunches(stream) >= before + 2 &&
             kernelLaunches("kpool_bf16_d128_k4_cuda_compress") > 0,
         "compress ran on the caller's stream");
  must("CPU kernel set", create(KPOOL_TARGET_CPU, KPOOL_BF16, D, K, &cpu));
  if (!cpu)
    return 1;
  Views hst = {hostView(&pooled), hostView(&k),         hostView(&gate),
               hostView(&ape),    hostView(&iro),       hostView(&pro),
               hostView(&cache),  hostView(&slots),     hostView(&tail),
               hostView(&closed), hostView(&closedPool)};
  KPoolPoolOffsetsArgs hostOffsets = poolOffsetsArgs(&hst);
  KPoolCompressArgs hostCompress = compressArgs(&hst);
  must("CPU pool_offsets", kpoolPoolOffsets(cpu, &hostOffsets, &host));
  must("CPU compress", kpoolCompress(cpu, &hostCompress, &host));
  expect(memcmp(gotPro, pro.host, sizeof gotPro) == 0,
         "pool_row_offsets as on the CPU");
  {
    uint32_t pools = ((uint32_t *)pro.host)[B];
    char what[96];
    ulps = maxUlps(gotRows, pooled.host, (int64_t)pools * D);
    snprintf(what, sizeof what,
             "pooled rows within 4 ulps of the CPU's (max %lld)",
             (long long)ulps);
    expect(pools == 2 && ulps <= 4, what);
  }
  {
    KPoolCallOptions validated = onGpu;
    validated.validation = KPOOL_VALIDATION_CHECK;
    report("compress validated", kpoolCompress(set, &compress, &validated));
  }

  /* Capture a step into a CUDA graph; replay it and compare with the CPU's
     step on the same inputs; replay it again. */
  memcpy(cache.host, stepCache, sizeof stepCache);
  upload(&cache);
  CUgraph graph;
  CUgraphExec exec;
  size_t nodes = 0;
  int64_t launched = allLaunches();
  check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
        "cuStreamBeginCapture");
  KPoolStepArgs step = stepArgs(&dev, B);
  report("step (captured)", kpoolStep(set, &step, &onGpu));
  check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  check(cuGraphGetNodes(graph, NULL, &nodes), "cuGraphGetNodes");
  expect(allLaunches() == launched, "a captured step runs nothing");
  printf("graph kernel nodes: %zu\n", nodes);
  int64_t graphKernels = kernelLaunches("");
  check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
  download(&closed, gotClosed, stream);
  download(&closedPool, gotClosedPool, stream);
  download(&pro, gotPro, stream);
  download(&pooled, gotRows, stream);
  download(&tail, gotTail, stream);
  KPoolStepArgs hostStep = stepArgs(&hst, B);
  must("CPU step", kpoolStep(cpu, &hostStep, &host));
  {
    char what[160];
    uint32_t pools = ((uint32_t *)pro.host)[B];
    ulps = maxUlps(gotClosed, closed.host, B * D);
    snprintf(what, sizeof what,
             "replayed: closed rows within 4 ulps of the CPU's (max %lld)",
             (long long)ulps);
    expect(ulps <= 4, what);
    ulps = maxUlps(gotRows, pooled.host, (int64_t)pools * D);
    snprintf(what, sizeof what,
             "replayed: closed_pool, pool_row_offsets, pooled rows and the "
             "ring as on the CPU (pooled max %lld ulps)",
             (long long)ulps);
    expect(memcmp(gotClosedPool, closedPool.host, sizeof gotClosedPool) == 0 &&
               memcmp(gotPro, pro.host, sizeof gotPro) == 0 && ulps <= 4 &&
               memcmp(gotTail, tail.host, tail.bytes) == 0,
           what);
  }
  int64_t perReplay = kernelLaunches("") - graphKernels;
  check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
  check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  expect(perReplay == (int64_t)nodes &&
             kernelLaunches("") - graphKernels == 2 * perReplay,
         "two replays ran the graph's kernels twice");
  download(&status, &gotWord, stream);
  expect(gotWord == 0, "status word 0");
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  kpoolKernelSetDestroy(set);
  kpoolKernelSetDestroy(cpu);

  /* A pool-cache format of the pack. */
  set = NULL;
  KPoolKernelCacheStatistics was;
  kpoolKernelCacheGetStatistics(&was, NULL);
  {
    KPoolKernelConfig fp8 = config(KPOOL_TARGET_CUDA, KPOOL_F16, D, K);
    fp8.cache.entry = KPOOL_CACHE_FP8;
    fp8.cache.rotate = KPOOL_ROTATE_HADAMARD;
    fp8.cache.scale = KPOOL_SCALE_POW2;
    error = kpoolKernelSetCreate(&fp8, &set);
  }
  report("f16 128 4 fp8-hadamard-pow2 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  expect(set && stats.compiled == was.compiled && stats.hits == was.hits,
         "from the default pack too");
  kpoolKernelSetDestroy(set);

  /* Another configuration: the JIT compiles it in process. */
  set = NULL;
  cpu = NULL;
  kpoolKernelCacheGetStatistics(&was, NULL);
  error = create(KPOOL_TARGET_CUDA, KPOOL_BF16, 64, 2, &set);
  report("bf16 64 2 on CUDA", error);
  kpoolKernelCacheGetStatistics(&stats, NULL);
  printf("cache: hits %lld, compiled %lld\n",
         (long long)(stats.hits - was.hits),
         (long long)(stats.compiled - was.compiled));
  expect(set && (stats.hits - was.hits) + (stats.compiled - was.compiled) == 1,
         "compiled by the JIT (or taken from its disk cache)");
  if (!set)
    return 1;
  {
    /* k and gate as [T, 64] over the first T * 64 elements; pools of 2
       (cached 0 and 1: 2 and 1 pools). */
    int64_t s64[2] = {T, 64}, sApe2[2] = {2, 64}, sP2[2] = {T / 2 + B, 64};
    uint32_t cache2[B] = {0, 1}, pro2[B + 1];
    memcpy(cache.host, cache2, sizeof cache2);
    upload(&cache);
    Views dev2 = dev, hst2 = hst;
    dev2.pooled = view(dev.pooled.data, 2, sP2);
    dev2.k = view(dev.k.data, 2, s64);
    dev2.gate = view(dev.gate.data, 2, s64);
    dev2.ape = view(dev.ape.data, 2, sApe2);
    hst2.pooled = view(pooled.host, 2, sP2);
    hst2.k = view(k.host, 2, s64);
    hst2.gate = view(gate.host, 2, s64);
    hst2.ape = view(ape.host, 2, sApe2);
    hst2.pro = view(pro2, 1, sB1);
    KPoolCallOptions noWord = onDevice(NULL, stream);
    KPoolPoolOffsetsArgs offsets2 = poolOffsetsArgs(&dev2),
                         hostOffsets2 = poolOffsetsArgs(&hst2);
    KPoolCompressArgs compress2 = compressArgs(&dev2),
                      hostCompress2 = compressArgs(&hst2);
    before = kernelLaunches("kpool_bf16_d64_k2_cuda_compress");
    report("JIT pool_offsets", kpoolPoolOffsets(set, &offsets2, &noWord));
    report("JIT compress", kpoolCompress(set, &compress2, &noWord));
    download(&pooled, gotRows, stream);
    expect(kernelLaunches("kpool_bf16_d64_k2_cuda_compress") > before,
           "the JIT's compress kernel ran");
    must("CPU 64 2", create(KPOOL_TARGET_CPU, KPOOL_BF16, 64, 2, &cpu));
    if (!cpu)
      return 1;
    must("CPU pool_offsets", kpoolPoolOffsets(cpu, &hostOffsets2, &host));
    must("CPU compress", kpoolCompress(cpu, &hostCompress2, &host));
    char what[96];
    ulps = maxUlps(gotRows, pooled.host, (int64_t)pro2[B] * 64);
    snprintf(what, sizeof what,
             "JIT pooled rows within 4 ulps of the CPU's (max %lld)",
             (long long)ulps);
    expect(pro2[B] == 3 && ulps <= 4, what);
    kpoolKernelSetDestroy(cpu);
  }
  kpoolKernelSetDestroy(set);

  /* kpool-aot's CUDA raw entry point: a wrong view records its finding in
     the (device) status word through libkpool_cuda_runtime, in stream
     order, and launches no compress kernel. */
  {
    int64_t bad[2] = {T, 2};
    KPoolCompressArgs wrong = compress;
    wrong.k = view(dev.k.data, 2, bad);
    uint64_t returned;
    KPoolError *decoded;
    upload(&status); /* zero */
    before = kernelLaunches("compress");
    int64_t recorded = kernelLaunches("kpool_record_status");
    returned = kpool_bf16_d128_k4_cuda_compress(&wrong, word, stream);
    download(&status, &gotWord, stream);
    decoded = kpoolStatusWordError(gotWord);
    printf("raw entry point: returned 0x%llx, status 0x%llx: %s\n",
           (unsigned long long)returned, (unsigned long long)gotWord,
           decoded ? kpoolErrorMessage(decoded) : "none");
    kpoolErrorDestroy(decoded);
    expect(returned != 0 && gotWord == returned &&
               kernelLaunches("compress") == before &&
               kernelLaunches("kpool_record_status") == recorded + 1,
           "the wrong view is recorded on the stream, no compress launched");
  }
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) {
    cuMemFree(all[i]->device);
    free(all[i]->host);
  }
  cuStreamDestroy(stream);
  printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
