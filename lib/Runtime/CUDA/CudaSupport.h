//===- CudaSupport.h - the mgpu layer's driver checks and contexts -*- C++
//-*-===//
//
// What every mgpu* entry point of CudaRuntimeWrappers.cpp shares: how a
// failed driver call is reported (and when it aborts, as upstream's mgpu
// layer does), the primary context of the default device, and the memref
// descriptors the lowered host code passes. Private to lib/Runtime/CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_CUDA_CUDASUPPORT_H
#define KPOOL_LIB_RUNTIME_CUDA_CUDASUPPORT_H

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#if defined(_WIN32)
#define KPOOL_CUDA_EXPORT __declspec(dllexport)
#else
#define KPOOL_CUDA_EXPORT __attribute__((visibility("default")))
#endif

namespace kpool::cuda_support {

enum class OnError { Abort, Continue };

/// Reports a failed driver call; aborts when `onError` says so.
bool check(CUresult result, const char *entry, const char *call,
           OnError onError);

#define KPOOL_CUDA_CHECK(expr) check((expr), __func__, #expr, OnError::Abort)
#define KPOOL_CUDA_REPORT(expr)                                                \
  check((expr), __func__, #expr, OnError::Continue)

/// The primary context of the default device, retained on first use (the
/// driver is initialized by the first call).
CUcontext primaryContext(const char *entry);

/// Selects the device of later calls (mgpuSetDefaultDevice).
void setDefaultDevice(int32_t device);

/// Makes the primary context current for the lifetime of the object.
class ScopedContext {
public:
  explicit ScopedContext(const char *entry) : entry(entry) {
    check(cuCtxPushCurrent(primaryContext(entry)), entry, "cuCtxPushCurrent",
          OnError::Abort);
  }
  ~ScopedContext() {
    CUcontext popped;
    check(cuCtxPopCurrent(&popped), entry, "cuCtxPopCurrent",
          OnError::Continue);
  }

private:
  const char *entry;
};

#define KPOOL_CUDA_CONTEXT() ScopedContext scopedContext(__func__)

/// One driver call in the primary context, as the entry point's whole body:
/// aborts on failure (KPOOL_CUDA_CHECK) or only reports it
/// (KPOOL_CUDA_REPORT).
#define KPOOL_CUDA_CALL(KIND, expr)                                            \
  do {                                                                         \
    KPOOL_CUDA_CONTEXT();                                                      \
    KPOOL_CUDA_##KIND(expr);                                                   \
  } while (false)

/// A ranked memref descriptor as the LLVM lowering lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct DescriptorView {
  void *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

DescriptorView viewOf(int64_t rank, void *descriptor);

/// The bytes from the first to one past the last element of a view with
/// non-negative strides; 0 when the view is empty.
size_t spanBytes(int64_t rank, const DescriptorView &view, int64_t eltBytes);

} // namespace kpool::cuda_support

#endif // KPOOL_LIB_RUNTIME_CUDA_CUDASUPPORT_H
