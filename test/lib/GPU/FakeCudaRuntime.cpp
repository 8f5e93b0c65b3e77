//===- FakeCudaRuntime.cpp - host memory as device memory, for tests ------===//
//
// The CPU emulation build of the GPU executables (KPOOL_GPU_ON_CPU) links
// this instead of libkpool_cuda_runtime: the mgpu* functions that
// kpool/Runtime/CUDA.h uses, over host memory, with every allocation
// recorded, and kernel backends that check that each operand lies in such
// an allocation. Test-only code.
//
//===----------------------------------------------------------------------===//

#include "GPU/GpuSupport.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace kpool;

namespace {

std::mutex mutex;
/// Live allocations: start -> bytes.
std::map<const char *, size_t> &allocations() {
  static auto *m = new std::map<const char *, size_t>;
  return *m;
}

/// Whether [p, p + bytes) lies in one live allocation.
bool isDevice(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  const char *c = static_cast<const char *>(p);
  auto it = allocations().upper_bound(c);
  if (it == allocations().begin())
    return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second;
}

/// Aborts unless the memref `d` (rank `Rank`, element size `es`) is empty
/// or lies in one allocation.
template <typename Desc>
void requireDevice(const char *op, const char *operand, const Desc *d,
                   int64_t es, int rank) {
  int64_t last = 0;
  for (int i = 0; i < rank; ++i) {
    if (d->sizes[i] <= 0)
      return;
    last += (d->sizes[i] - 1) * d->strides[i];
  }
  const char *first = static_cast<const char *>(d->aligned) + d->offset * es;
  if (isDevice(first, (last + 1) * es))
    return;
  std::fprintf(stderr,
               "emulated device: %s: operand '%s' at %p is not (wholly) in "
               "device memory\n",
               op, operand, static_cast<const void *>(first));
  std::abort();
}

constexpr int kSlots = 8;
KernelBackend inner[kSlots];
int64_t elementSize[kSlots];
int used = 0;

template <int I> struct Checked {
  static void compress(Desc2 *pooled, Desc2 *k, Desc2 *gate, Desc2 *ape,
                       Desc1 *iro, Desc1 *pro, Desc1 *cache) {
    int64_t es = elementSize[I];
    requireDevice("compress", "pooled", pooled, es, 2);
    requireDevice("compress", "k", k, es, 2);
    requireDevice("compress", "gate", gate, es, 2);
    requireDevice("compress", "ape", ape, 4, 2);
    requireDevice("compress", "input_row_offsets", iro, 4, 1);
    requireDevice("compress", "pool_row_offsets", pro, 4, 1);
    requireDevice("compress", "cache_lengths", cache, 4, 1);
    inner[I].compress(pooled, k, gate, ape, iro, pro, cache);
  }
  static void seedTail(Desc4 *tail, Desc2 *k, Desc2 *gate, Desc1 *iro,
                       Desc1 *cache, Desc1 *slots, int32_t numRequests) {
    int64_t es = elementSize[I];
    requireDevice("seed_tail", "tail", tail, es, 4);
    requireDevice("seed_tail", "k", k, es, 2);
    requireDevice("seed_tail", "gate", gate, es, 2);
    requireDevice("seed_tail", "input_row_offsets", iro, 4, 1);
    requireDevice("seed_tail", "cache_lengths", cache, 4, 1);
    requireDevice("seed_tail", "slot_idx", slots, 4, 1);
    inner[I].seedTail(tail, k, gate, iro, cache, slots, numRequests);
  }
  static void ringClose(Desc2 *pooled, Desc1 *closed, Desc4 *tail, Desc2 *k,
                        Desc2 *gate, Desc2 *ape, Desc1 *iro, Desc1 *cache,
                        Desc1 *slots, int32_t numRequests) {
    int64_t es = elementSize[I];
    requireDevice("ring_close", "pooled", pooled, es, 2);
    requireDevice("ring_close", "closed_pool", closed, 4, 1);
    requireDevice("ring_close", "tail", tail, es, 4);
    requireDevice("ring_close", "k", k, es, 2);
    requireDevice("ring_close", "gate", gate, es, 2);
    requireDevice("ring_close", "ape", ape, 4, 2);
    requireDevice("ring_close", "input_row_offsets", iro, 4, 1);
    requireDevice("ring_close", "cache_lengths", cache, 4, 1);
    requireDevice("ring_close", "slot_idx", slots, 4, 1);
    inner[I].ringClose(pooled, closed, tail, k, gate, ape, iro, cache, slots,
                       numRequests);
  }
  static void poolOffsets(Desc1 *pro, Desc1 *iro, Desc1 *cache) {
    requireDevice("pool_offsets", "pool_row_offsets", pro, 4, 1);
    requireDevice("pool_offsets", "input_row_offsets", iro, 4, 1);
    requireDevice("pool_offsets", "cache_lengths", cache, 4, 1);
    inner[I].poolOffsets(pro, iro, cache);
  }
  static KernelBackend make() {
    KernelBackend b = inner[I];
    b.compress = compress;
    b.seedTail = seedTail;
    b.ringClose = ringClose;
    b.poolOffsets = poolOffsets;
    return b;
  }
};

template <int... I>
KernelBackend wrap(int slot, std::integer_sequence<int, I...>) {
  KernelBackend out;
  ((slot == I ? (out = Checked<I>::make(), 0) : 0), ...);
  return out;
}

} // namespace

KernelBackend gpu::onEmulatedDevice(const KernelConfig &config,
                                    KernelBackend cpu) {
  if (used == kSlots) {
    std::fprintf(stderr, "emulated device: more than %d kernel sets\n", kSlots);
    std::abort();
  }
  int slot = used++;
  inner[slot] = cpu;
  elementSize[slot] = elementTypeSize(config.elementType);
  KernelBackend b = wrap(slot, std::make_integer_sequence<int, kSlots>());
  b.readMetadata = cuda::readMetadata;
  b.allocateScratch = cuda::allocateScratch;
  b.freeScratch = cuda::freeScratch;
  return b;
}

extern "C" {

void *mgpuStreamCreate() {
  static int stream;
  return &stream;
}
void mgpuStreamDestroy(void *) {}
void mgpuStreamSynchronize(void *) {}

void *mgpuMemAlloc(uint64_t sizeBytes, void *, bool) {
  if (sizeBytes == 0)
    return nullptr;
  char *p = static_cast<char *>(std::malloc(sizeBytes));
  std::memset(p, 0xcd, sizeBytes); // device memory starts undefined
  std::lock_guard<std::mutex> lock(mutex);
  allocations()[p] = sizeBytes;
  return p;
}

void mgpuMemFree(void *ptr, void *) {
  if (!ptr)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  allocations().erase(static_cast<const char *>(ptr));
  std::free(ptr);
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *) {
  std::memmove(dst, src, sizeBytes);
}

} // extern "C"
