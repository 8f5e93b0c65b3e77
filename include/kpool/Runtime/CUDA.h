//===- CUDA.h - device memory helpers for the CUDA target -------*- C++ -*-===//
//
// Header-only helpers over the mgpu* functions of libkpool_cuda_runtime (the
// wrapper the GPU-lowered host code calls), for code that runs precompiled
// CUDA kernels: the kernel backend's prepare (module loading ahead of a
// graph capture), and device buffers and copies for tests, benchmarks and
// examples (set-up code, never on a kernel call's path). Link
// libkpool_cuda_runtime.
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
/// Loads every GPU module image of the process (the ahead-of-time kernels'
/// embedded binaries) in the context of `stream` (null: the current
/// context, else the default device's primary context). Returns 0, or the
/// CUresult of the load that failed. Not stream-ordered: call it before a
/// graph capture, never during one.
int kpoolCudaPrepare(void *stream);
}

namespace kpool::cuda {

/// KernelBackend::prepare of the CUDA kernels.
inline Status prepare(void *stream) {
  int result = kpoolCudaPrepare(stream);
  if (result != 0)
    return Status::error("loading the GPU modules failed with CUDA error " +
                         std::to_string(result));
  return Status();
}

/// Copies `bytes` between host and device (either direction) on `stream`
/// and waits for the stream: work enqueued there before is ordered first.
/// Null `stream`: CUDA's NULL stream.
inline void copy(void *dst, const void *src, size_t bytes,
                 void *stream = nullptr) {
  if (!bytes)
    return;
  mgpuMemcpy(dst, const_cast<void *>(src), bytes, stream);
  mgpuStreamSynchronize(stream);
}

/// A stream of its own, destroyed on destruction.
class OwnedStream {
public:
  OwnedStream() : handle(mgpuStreamCreate()) {}
  OwnedStream(const OwnedStream &) = delete;
  OwnedStream &operator=(const OwnedStream &) = delete;
  ~OwnedStream() { mgpuStreamDestroy(handle); }
  void *get() const { return handle; }
  Stream stream() const { return Stream(handle); }
  void synchronize() const { mgpuStreamSynchronize(handle); }

private:
  void *handle;
};

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
  /// Copies on `stream` after the work enqueued there, and waits.
  void upload(const void *host, void *stream = nullptr) {
    copy(ptr, host, bytes, stream);
  }
  void download(void *host, void *stream = nullptr) const {
    copy(host, ptr, bytes, stream);
  }

private:
  size_t bytes;
  void *ptr;
};

} // namespace kpool::cuda

#endif // KPOOL_RUNTIME_CUDA_H
