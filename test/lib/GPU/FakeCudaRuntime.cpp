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

/// Aborts unless the memref `d` (element size `es`) is empty or lies in
/// one allocation.
template <int Rank>
void requireDevice(const char *op, const char *operand,
                   const Descriptor<Rank> *d, int64_t es) {
  int64_t last = 0;
  for (int i = 0; i < Rank; ++i) {
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
/// Scalars are passed by value: nothing to check.
template <typename T>
void requireDevice(const char *, const char *, T, int64_t) {}

constexpr int kSlots = 8;
KernelBackend inner[kSlots];
int64_t elementSize[kSlots];
int used = 0;

/// Kernel `Id` of slot `Slot`, through `Member` of KernelBackend: checks
/// each operand against the kernel ABI's description (name, element kind),
/// then calls the CPU kernel.
template <int Slot, abi::KernelId Id, typename Fn, Fn KernelBackend::*Member>
struct Checked;
template <int Slot, abi::KernelId Id, typename... A,
          void (*KernelBackend::*Member)(A...)>
struct Checked<Slot, Id, void (*)(A...), Member> {
  static void call(A... args) {
    check(std::index_sequence_for<A...>(), args...);
    (inner[Slot].*Member)(args...);
  }
  template <size_t... I>
  static void check(std::index_sequence<I...>, A... args) {
    const abi::Kernel &kernel = abi::kernel(Id);
    static_assert(sizeof...(A) > 0);
    (requireDevice(kernel.name, kernel.operands[I].name, args,
                   abi::kindSize(kernel.operands[I].kind, elementSize[Slot])),
     ...);
  }
};

template <int Slot> KernelBackend make() {
  KernelBackend b = inner[Slot];
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  b.member = Checked<Slot, abi::KernelId::Name, Name##Fn,                      \
                     &KernelBackend::member>::call;
#include "kpool/Runtime/KernelABI.def"
  return b;
}

template <int... I>
KernelBackend wrap(int slot, std::integer_sequence<int, I...>) {
  KernelBackend out;
  ((slot == I ? (out = make<I>(), 0) : 0), ...);
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
