//===- Memory.cpp - the emulated CUDA driver: memory and copies -----------===//
//
// "Device" memory is host memory: each allocation is its own mapping with a
// PROT_NONE guard page before and after it (an access that runs off an
// allocation by a page faults even with the executor's checks off), filled
// with 0xcd, and recorded in the memory map the executor checks every
// access against. Registered host memory is recorded too. With unified
// addressing a pointer's kind decides what a copy does: copies to pageable
// host memory complete before the call returns and copies from it read the
// source when enqueued (as CUDA's staging does); other copies and memsets
// are stream-ordered operations.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace kpool::emu;
using namespace kpool::emu::driver;

//===----------------------------------------------------------------------===//
// The memory map
//===----------------------------------------------------------------------===//

const Memory::Range *Memory::rangeOf(uint64_t address) const {
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), address,
      [](uint64_t a, const Range &r) { return a < r.allocation.base; });
  if (it == ranges.begin())
    return nullptr;
  --it;
  const Allocation &a = it->allocation;
  return address - a.base < a.bytes ? &*it : nullptr;
}

const Allocation *Memory::find(uint64_t address, uint64_t bytes) const {
  const Range *r = rangeOf(address);
  if (!r)
    return nullptr;
  const Allocation &a = r->allocation;
  // address - base < size, so the subtraction does not wrap.
  return bytes <= a.bytes - (address - a.base) ? &a : nullptr;
}

void Memory::insert(Range r) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), r,
                             [](const Range &x, const Range &y) {
                               return x.allocation.base < y.allocation.base;
                             });
  ranges.insert(it, r);
}

void *Memory::allocate(size_t bytes, Kind kind) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  if (bytes > (size_t(1) << 48))
    return nullptr;
  size_t body = (bytes + page - 1) / page * page;
  size_t total = body + 2 * page;
  void *mapping =
      mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    return nullptr;
  char *data = static_cast<char *>(mapping) + page;
  if (mprotect(data, body, PROT_READ | PROT_WRITE) != 0) {
    munmap(mapping, total);
    return nullptr;
  }
  std::memset(data, 0xcd, bytes);
  insert({{uint64_t(reinterpret_cast<uintptr_t>(data)), bytes},
          kind,
          mapping,
          total});
  return data;
}

bool Memory::release(uint64_t address) {
  for (auto it = ranges.begin(); it != ranges.end(); ++it) {
    if (it->allocation.base != address || it->kind == Kind::Registered)
      continue;
    munmap(it->mapping, it->mappingBytes);
    ranges.erase(it);
    return true;
  }
  return false;
}

CUresult Memory::registerHost(void *p, size_t bytes) {
  uint64_t base = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (base + bytes < base)
    return CUDA_ERROR_INVALID_VALUE;
  for (const Range &r : ranges) {
    const Allocation &a = r.allocation;
    if (base < a.base + a.bytes && a.base < base + bytes)
      return r.kind == Kind::Registered
                 ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                 : CUDA_ERROR_INVALID_VALUE;
  }
  insert({{base, bytes}, Kind::Registered});
  return CUDA_SUCCESS;
}

CUresult Memory::unregisterHost(void *p) {
  uint64_t base = uint64_t(reinterpret_cast<uintptr_t>(p));
  for (auto it = ranges.begin(); it != ranges.end(); ++it)
    if (it->kind == Kind::Registered && it->allocation.base == base) {
      ranges.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

//===----------------------------------------------------------------------===//
// Allocation
//===----------------------------------------------------------------------===//

namespace {

std::string hex(uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)value);
  return buf;
}

CUresult allocate(Entry &e, CUdeviceptr *p, size_t bytes, Memory::Kind kind) {
  if (!p)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "dptr is NULL");
  if (bytes == 0)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "bytesize is 0");
  void *data = state().memory.allocate(bytes, kind);
  if (!data)
    return e.fail(CUDA_ERROR_OUT_OF_MEMORY,
                  "cannot map " + std::to_string(bytes) + " bytes");
  *p = CUdeviceptr(reinterpret_cast<uintptr_t>(data));
  return CUDA_SUCCESS;
}

/// How a copy touches `p` for `bytes`: device (driver or registered
/// memory, wholly inside one range), pageable host memory, or invalid (it
/// starts in a range and runs past its end).
enum class Side { Device, Pageable, Invalid };
Side sideOf(uint64_t p, size_t bytes) {
  const Memory::Range *r = state().memory.rangeOf(p);
  if (!r)
    return state().memory.find(p + bytes - 1, 1) ? Side::Invalid
                                                 : Side::Pageable;
  return state().memory.find(p, bytes) ? Side::Device : Side::Invalid;
}

/// A copy of `bytes` from `src` to `dst` on `stream` (null: synchronous, on
/// the legacy stream, returning when done).
CUresult copy(Entry &e, uint64_t dst, uint64_t src, size_t bytes,
              CUstream handle, bool synchronous) {
  if (bytes == 0)
    return CUDA_SUCCESS;
  if (!dst || !src)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "a NULL pointer");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> stream = streamFor(e, handle, &r);
  if (!stream)
    return r;
  if ((r = notCapturing(e, *stream)))
    return r;
  Side to = sideOf(dst, bytes), from = sideOf(src, bytes);
  for (auto [side, p, what] :
       {std::tuple(to, dst, "destination"), std::tuple(from, src, "source")})
    if (side == Side::Invalid)
      return e.fail(CUDA_ERROR_INVALID_VALUE,
                    std::string("the ") + what + " [" + hex(p) + ", +" +
                        std::to_string(bytes) +
                        ") runs past the end of its allocation");
  Op op;
  op.kind = Op::Kind::Copy;
  op.dst = reinterpret_cast<void *>(uintptr_t(dst));
  op.src = reinterpret_cast<const void *>(uintptr_t(src));
  op.bytes = bytes;
  if (from == Side::Pageable) {
    const auto *s = static_cast<const uint8_t *>(op.src);
    op.snapshot.assign(s, s + bytes);
  }
  uint64_t seq = enqueue(stream, std::move(op));
  if (synchronous || to == Side::Pageable)
    return flush(*stream, seq);
  return CUDA_SUCCESS;
}

CUresult setMemory(Entry &e, uint64_t dst, uint32_t value, unsigned elementSize,
                   size_t count, CUstream handle, bool synchronous) {
  if (count == 0)
    return CUDA_SUCCESS;
  if (dst % elementSize)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "dstDevice " + hex(dst) + " is not " +
                      std::to_string(elementSize) + "-byte aligned");
  if (count > (size_t(1) << 48) ||
      sideOf(dst, count * elementSize) != Side::Device)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "[" + hex(dst) + ", +" + std::to_string(count * elementSize) +
                      ") is not within one device allocation");
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Stream> stream = streamFor(e, handle, &r);
  if (!stream)
    return r;
  if ((r = notCapturing(e, *stream)))
    return r;
  Op op;
  op.kind = Op::Kind::Set;
  op.dst = reinterpret_cast<void *>(uintptr_t(dst));
  op.value = value;
  op.elementSize = elementSize;
  op.count = count;
  uint64_t seq = enqueue(stream, std::move(op));
  return synchronous ? flush(*stream, seq) : CUDA_SUCCESS;
}

constexpr unsigned kAllocating = Entry::Context | Entry::NotUnderCapture;

} // namespace

extern "C" {

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  Entry e("cuMemAlloc", kAllocating);
  if (e.failed())
    return e.status();
  return allocate(e, dptr, bytesize, Memory::Kind::Device);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                   unsigned int flags) {
  Entry e("cuMemAllocManaged", kAllocating);
  if (e.failed())
    return e.status();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "flags must be CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST");
  return allocate(e, dptr, bytesize, Memory::Kind::Managed);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  Entry e("cuMemFree", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  if (!dptr)
    return CUDA_SUCCESS;
  // Implicitly synchronizes, as on a device: nothing pending may use it.
  if (CUresult r = flushAll())
    return r;
  if (!state().memory.release(dptr))
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  hex(dptr) + " is not the start of a live allocation");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *base, size_t *size,
                                      CUdeviceptr dptr) {
  Entry e("cuMemGetAddressRange", Entry::Healthy);
  if (e.failed())
    return e.status();
  const Memory::Range *r = state().memory.rangeOf(dptr);
  if (!r || r->kind == Memory::Kind::Registered)
    return e.fail(CUDA_ERROR_NOT_FOUND,
                  hex(dptr) + " is not in a device allocation");
  if (base)
    *base = r->allocation.base;
  if (size)
    *size = r->allocation.bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize,
                                   unsigned int flags) {
  Entry e("cuMemHostRegister", kAllocating);
  if (e.failed())
    return e.status();
  constexpr unsigned known =
      CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
      CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (!p || bytesize == 0 || (flags & ~known))
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "p is NULL, bytesize 0 or flags unknown");
  CUresult r = state().memory.registerHost(p, bytesize);
  if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    return r; // The caller decides whether that matters; no message.
  if (r)
    return e.fail(r, "[" + hex(uint64_t(uintptr_t(p))) + ", +" +
                         std::to_string(bytesize) +
                         ") overlaps a device allocation");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void *p) {
  Entry e("cuMemHostUnregister", kAllocating);
  if (e.failed())
    return e.status();
  if (CUresult r = flushAll())
    return r;
  CUresult r = state().memory.unregisterHost(p);
  if (r)
    return e.fail(r, hex(uint64_t(uintptr_t(p))) +
                         " does not start a registered range");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                       CUpointer_attribute attribute,
                                       CUdeviceptr ptr) {
  Entry e("cuPointerGetAttribute", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!data)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "data is NULL");
  const Memory::Range *r = state().memory.rangeOf(ptr);
  if (!r)
    return CUDA_ERROR_INVALID_VALUE; // unregistered host memory: as CUDA
  bool device = r->kind != Memory::Kind::Registered;
  switch (attribute) {
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    *static_cast<CUcontext *>(data) = state().primary;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *static_cast<unsigned *>(data) =
        device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    *static_cast<CUdeviceptr *>(data) = ptr;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    if (r->kind == Memory::Kind::Device)
      return CUDA_ERROR_INVALID_VALUE;
    *static_cast<void **>(data) = reinterpret_cast<void *>(uintptr_t(ptr));
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    *static_cast<bool *>(data) = r->kind == Memory::Kind::Managed;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *static_cast<int *>(data) = 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    *static_cast<CUdeviceptr *>(data) = r->allocation.base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    *static_cast<size_t *>(data) = r->allocation.bytes;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *static_cast<bool *>(data) = true;
    return CUDA_SUCCESS;
  default:
    return e.fail(CUDA_ERROR_INVALID_VALUE, "attribute " +
                                                std::to_string(int(attribute)) +
                                                " is not emulated");
  }
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

constexpr unsigned kCopying = Entry::Healthy | Entry::NotUnderCapture;

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  Entry e("cuMemcpy", kCopying);
  return e.failed() ? e.status() : copy(e, dst, src, bytes, nullptr, true);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                               CUstream stream) {
  Entry e("cuMemcpyAsync", kCopying);
  return e.failed() ? e.status() : copy(e, dst, src, bytes, stream, false);
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  Entry e("cuMemcpyHtoD", kCopying);
  return e.failed()
             ? e.status()
             : copy(e, dst, uint64_t(uintptr_t(src)), bytes, nullptr, true);
}

CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  Entry e("cuMemcpyDtoH", kCopying);
  return e.failed()
             ? e.status()
             : copy(e, uint64_t(uintptr_t(dst)), src, bytes, nullptr, true);
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  Entry e("cuMemcpyDtoD", kCopying);
  return e.failed() ? e.status() : copy(e, dst, src, bytes, nullptr, true);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src,
                                   size_t bytes, CUstream stream) {
  Entry e("cuMemcpyHtoDAsync", kCopying);
  return e.failed()
             ? e.status()
             : copy(e, dst, uint64_t(uintptr_t(src)), bytes, stream, false);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  Entry e("cuMemcpyDtoHAsync", kCopying);
  return e.failed()
             ? e.status()
             : copy(e, uint64_t(uintptr_t(dst)), src, bytes, stream, false);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream) {
  Entry e("cuMemcpyDtoDAsync", kCopying);
  return e.failed() ? e.status() : copy(e, dst, src, bytes, stream, false);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  Entry e("cuMemsetD8", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 1, n, nullptr, true);
}

CUresult CUDAAPI cuMemsetD16(CUdeviceptr dst, unsigned short value, size_t n) {
  Entry e("cuMemsetD16", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 2, n, nullptr, true);
}

CUresult CUDAAPI cuMemsetD32(CUdeviceptr dst, unsigned int value, size_t n) {
  Entry e("cuMemsetD32", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 4, n, nullptr, true);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n,
                                 CUstream stream) {
  Entry e("cuMemsetD8Async", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 1, n, stream, false);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short value,
                                  size_t n, CUstream stream) {
  Entry e("cuMemsetD16Async", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 2, n, stream, false);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n,
                                  CUstream stream) {
  Entry e("cuMemsetD32Async", kCopying);
  return e.failed() ? e.status()
                    : setMemory(e, dst, value, 4, n, stream, false);
}

} // extern "C"
