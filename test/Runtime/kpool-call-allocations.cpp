//===- kpool-call-allocations.cpp - no heap allocation on the call path ---===//
//
// A serving engine calls kpool once per step and op; a validated call must
// not allocate (issue 14: "no allocation per call"). This program replaces
// malloc, calloc and realloc (operator new goes through malloc) with
// counting wrappers around glibc's, JIT-compiles a CPU kernel set, warms
// each entry point up with one call, and then counts the heap allocations
// of many validated calls of every op on a ragged decode batch, fused step
// included, and of the pool-cache entry points (FP8, Hadamard, paged). It
// prints one line per entry point and exits 1 if any
// allocated. A call that fails validation builds its message and may
// allocate; the program checks that such calls still report their errors
// (a duplicate slot only when nothing else is wrong).
//
// Usage: kpool-call-allocations [calls-per-entry-point]
//
//===----------------------------------------------------------------------===//

#include "Support/ArgsByName.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelSet.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void count() {
  if (counting.load(std::memory_order_relaxed))
    allocations.fetch_add(1, std::memory_order_relaxed);
}
} // namespace

extern "C" void *malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
extern "C" void *calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
extern "C" void *realloc(void *p, size_t size) {
  count();
  return __libc_realloc(p, size);
}

using namespace kpool;

int main(int argc, char **argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 200;
  KernelConfig config;
  config.elementType = KPOOL_F32;
  config.headDim = 16;
  config.kpool = 4;
  config.openmp = false;
  registerJitCompiler();
  Status status;
  auto set = KernelSet::get(config, status);
  if (!set) {
    std::printf("FAIL: no kernel set: %s\n", status.message().c_str());
    return 1;
  }
  // A ragged decode-and-prefill batch: request b has b % 3 tokens (two
  // prefill requests of 9 and 13), cached lengths that close pools in this
  // call for some of them, slots in reverse order.
  const int64_t B = 24, D = 16, K = 4;
  std::vector<uint32_t> iro(B + 1), cache(B), slots(B);
  for (int64_t b = 0; b < B; ++b) {
    uint32_t n = b == 5 ? 9 : b == 17 ? 13 : uint32_t(b % 3);
    iro[b + 1] = iro[b] + n;
    cache[b] = uint32_t(97 * b + b % K);
    slots[b] = uint32_t(B - 1 - b);
  }
  const int64_t T = iro[B];
  std::vector<float> k(T * D), gate(T * D), ape(K * D);
  for (int64_t i = 0; i < T * D; ++i) {
    k[i] = float(i % 7) - 3.f;
    gate[i] = float(i % 5) * 0.5f;
  }
  for (int64_t i = 0; i < K * D; ++i)
    ape[i] = float(i % 3) * 0.25f;
  const int64_t R = K, capacity = T / K + B;
  std::vector<float> tail(B * 2 * R * D, 1.f), closedRows(B * D),
      pooled(capacity * D);
  std::vector<int32_t> closed(B);
  std::vector<uint32_t> pro(B + 1);
  View kV = denseView(k.data(), {T, D}), gV = denseView(gate.data(), {T, D}),
       apeV = denseView(ape.data(), {K, D}),
       iroV = denseView(iro.data(), {B + 1}),
       cacheV = denseView(cache.data(), {B}),
       slotV = denseView(slots.data(), {B}),
       tailV = denseView(tail.data(), {B, 2, R, D}),
       closedRowsV = denseView(closedRows.data(), {B, D}),
       closedV = denseView(closed.data(), {B}),
       proV = denseView(pro.data(), {B + 1}),
       capacityV = denseView(pooled.data(), {capacity, D});
  const int32_t live = int32_t(B);
  // Every op's arguments, built once from the call's operands by their
  // table names (each op's own outputs on top).
  std::initializer_list<test::Named> operands = {
      {"tail", tailV},
      {"k", kV},
      {"gate", gV},
      {"ape", apeV},
      {"input_row_offsets", iroV},
      {"pool_row_offsets", proV},
      {"cache_lengths", cacheV},
      {"slot_idx", slotV},
      {"closed", closedRowsV},
      {"closed_pool", closedV}};
  PoolOffsetsArgs po = test::argsByName<PoolOffsetsArgs>(operands);
  // pool_offsets first, so that compress gets its exact output rows.
  if (!set->poolOffsets(po).ok()) {
    std::printf("FAIL: pool_offsets\n");
    return 1;
  }
  View pooledV = denseView(pooled.data(), {int64_t(pro[B]), D});
  CompressArgs cp =
      test::with(test::argsByName<CompressArgs>(operands), {{"pooled", pooledV}});
  RingCloseArgs rc = test::with(test::argsByName<RingCloseArgs>(operands, live),
                                {{"pooled", closedRowsV}});
  SeedTailArgs st = test::argsByName<SeedTailArgs>(operands, live);
  StepArgs sp = test::with(test::argsByName<StepArgs>(operands, live),
                           {{"pooled", capacityV}});

  struct EntryPoint {
    const char *name;
    std::function<Status()> call;
  };
  std::vector<EntryPoint> entryPoints = {
      {"pool_offsets", [&] { return set->poolOffsets(po); }},
      {"compress", [&] { return set->compress(cp); }},
      {"ring_close", [&] { return set->ringClose(rc); }},
      {"seed_tail", [&] { return set->seedTail(st); }},
      {"step", [&] { return set->step(sp); }},
  };
  // The production pool cache (FP8 with the Hadamard rotation) on a second
  // set: every request owns its own pages of a paged cache.
  KernelConfig cacheConfig = config;
  cacheConfig.cache.entry = CacheEntry::FP8;
  cacheConfig.cache.rotate = CacheRotate::Hadamard;
  auto cacheSet = KernelSet::get(cacheConfig, status);
  if (!cacheSet) {
    std::printf("FAIL: no pool-cache kernel set: %s\n",
                status.message().c_str());
    return 1;
  }
  const int64_t pageSize = 16, W = (cache[B - 1] + 16) / pageSize + 1,
                N = B * W;
  std::vector<uint8_t> cacheKeys(N * pageSize * D);
  std::vector<float> cacheScales(N * pageSize);
  std::vector<uint32_t> table(B * W);
  for (int64_t i = 0; i < B * W; ++i)
    table[i] = uint32_t(B * W - 1 - i);
  View keysV = denseView(cacheKeys.data(), {N, pageSize, D}),
       scalesV = denseView(cacheScales.data(), {N, pageSize}),
       tableV = denseView(table.data(), {B, W});
  std::initializer_list<test::Named> cacheGroup = {
      {"cache_keys", keysV}, {"cache_scales", scalesV}, {"block_table", tableV}};
  CompressCacheArgs cpc = test::with(
      test::with(test::argsByName<CompressCacheArgs>(operands), cacheGroup),
      {{"pooled", pooledV}});
  RingCloseCacheArgs rcc = test::with(
      test::with(test::argsByName<RingCloseCacheArgs>(operands, live),
                 cacheGroup),
      {{"pooled", closedRowsV}});
  StepCacheArgs spc = test::with(
      test::with(test::argsByName<StepCacheArgs>(operands, live), cacheGroup),
      {{"pooled", capacityV}});
  entryPoints.push_back({"compress (pool cache)",
                         [&] { return cacheSet->compressCache(cpc); }});
  entryPoints.push_back({"ring_close (pool cache)",
                         [&] { return cacheSet->ringCloseCache(rcc); }});
  entryPoints.push_back({"step (pool cache)",
                         [&] { return cacheSet->stepCache(spc); }});
  bool ok = true;
  for (EntryPoint &e : entryPoints) {
    Status warm = e.call(); // the first call may set up per-thread state
    if (!warm.ok()) {
      std::printf("FAIL: %s: %s\n", e.name, warm.message().c_str());
      ok = false;
      continue;
    }
    allocations = 0;
    counting = true;
    bool allOk = true;
    for (long i = 0; i < calls; ++i)
      allOk &= e.call().ok();
    counting = false;
    long n = allocations.load();
    bool pass = allOk && n == 0;
    ok &= pass;
    std::printf("%s: %s: %ld validated calls, %ld heap allocations\n",
                pass ? "PASS" : "FAIL", e.name, calls, n);
  }
  // A bad slot still gets its message.
  slots[3] = slots[4];
  Status bad = set->seedTail(st);
  bool reported = !bad.ok() && bad.message().find("also the slot of request") !=
                                   std::string::npos;
  std::printf("%s: a duplicate slot is still reported: %s\n",
              reported ? "PASS" : "FAIL", bad.message().c_str());
  ok &= reported;
  // With a later request's slot out of the ring too, that is the error:
  // the duplicate, which no kernel guard sees, comes only last.
  slots[9] = uint32_t(B + 5);
  bad = set->seedTail(st);
  bool last = !bad.ok() &&
              bad.message().find("is not below max_slots") != std::string::npos;
  std::printf("%s: a duplicate slot comes after other faults: %s\n",
              last ? "PASS" : "FAIL", bad.message().c_str());
  ok &= last;
  return ok ? 0 : 1;
}
