//===- CUDA.h - device memory helpers for the CUDA target -------*- C++ -*-===//
//
// Header-only helpers over the mgpu* functions of libkpool_cuda_runtime (the
// wrapper the GPU-lowered host code calls), for code that runs precompiled
// CUDA kernels: reading metadata back for host-side validation, and device
// buffers for tests, benchmarks and examples. Link libkpool_cuda_runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_CUDA_H
#define KPOOL_RUNTIME_CUDA_H

#include "kpool/Runtime/KernelSet.h"

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" {
void *mgpuStreamCreate();
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
}

namespace kpool::cuda {

/// Copies `bytes` between host and device (either direction) and waits.
inline void copy(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return;
  void *stream = mgpuStreamCreate();
  mgpuMemcpy(dst, const_cast<void *>(src), bytes, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
}

/// KernelBackend::readMetadata for device-resident metadata: copies the
/// span the 1-D view covers and gathers its elements on the host.
inline Status readMetadata(const View &view, std::vector<uint32_t> &out) {
  int64_t n = view.sizes[0], stride = view.strides[0];
  out.assign(n, 0);
  if (n == 0)
    return Status();
  if (stride < 1)
    return Status::error("metadata views on the GPU need a positive stride, "
                         "got " +
                         std::to_string(stride));
  std::vector<uint32_t> span((n - 1) * stride + 1);
  copy(span.data(), view.data, span.size() * sizeof(uint32_t));
  for (int64_t i = 0; i < n; ++i)
    out[i] = span[i * stride];
  return Status();
}

/// KernelBackend::allocateScratch / freeScratch: device memory.
inline void *allocateScratch(size_t bytes) {
  return mgpuMemAlloc(bytes, nullptr, false);
}
inline void freeScratch(void *ptr) { mgpuMemFree(ptr, nullptr); }

/// Device memory of `bytes` bytes, freed on destruction.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes)
      : bytes(bytes), ptr(mgpuMemAlloc(bytes, nullptr, false)) {}
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { mgpuMemFree(ptr, nullptr); }

  void *data() const { return ptr; }
  size_t size() const { return bytes; }
  void upload(const void *host) { copy(ptr, host, bytes); }
  void download(void *host) const { copy(host, ptr, bytes); }

private:
  size_t bytes;
  void *ptr;
};

} // namespace kpool::cuda

#endif // KPOOL_RUNTIME_CUDA_H
