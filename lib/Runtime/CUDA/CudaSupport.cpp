//===- CudaSupport.cpp - the mgpu layer's driver checks and contexts -----===//
//
// See CudaSupport.h.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

using namespace kpool::cuda_support;

namespace {

/// Names of the errors most likely here, for when the driver cannot name
/// them itself (the toolkit's stub libcuda.so answers every call with
/// CUDA_ERROR_STUB_LIBRARY, cuGetErrorName included).
const char *fallbackName(CUresult result) {
  switch (result) {
  case CUDA_ERROR_INVALID_VALUE:
    return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY (the toolkit's stub libcuda.so was "
           "loaded, not a driver)";
  case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE:
    return "CUDA_ERROR_INVALID_DEVICE";
  case CUDA_ERROR_INVALID_IMAGE:
    return "CUDA_ERROR_INVALID_IMAGE";
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case CUDA_ERROR_INVALID_PTX:
    return "CUDA_ERROR_INVALID_PTX";
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
  case CUDA_ERROR_NOT_FOUND:
    return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case CUDA_ERROR_LAUNCH_FAILED:
    return "CUDA_ERROR_LAUNCH_FAILED";
  default:
    return "unknown CUDA error";
  }
}

const char *errorName(CUresult result) {
  const char *name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    return fallbackName(result);
  return name;
}

const char *errorString(CUresult result) {
  const char *text = nullptr;
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    return "no description from the driver";
  return text;
}

/// The device `mgpuSetDefaultDevice` selected.
int32_t defaultDevice = 0;
std::mutex contextMutex;

} // namespace

/// Reports a failed driver call; aborts when `onError` says so.
bool kpool::cuda_support::check(CUresult result, const char *entry,
                                const char *call, OnError onError) {
  if (result == CUDA_SUCCESS)
    return true;
  std::fprintf(stderr, "kpool_cuda_runtime: %s: %s failed: %s (%d): %s%s\n",
               entry, call, errorName(result), static_cast<int>(result),
               errorString(result),
               onError == OnError::Abort ? "; aborting" : "");
  std::fflush(stderr);
  if (onError == OnError::Abort)
    std::abort();
  return false;
}

/// The primary context of the default device, retained on first use.
CUcontext kpool::cuda_support::primaryContext(const char *entry) {
  static std::vector<CUcontext> contexts;
  std::lock_guard<std::mutex> lock(contextMutex);
  static bool initialized = false;
  if (!initialized) {
    check(cuInit(0), entry, "cuInit(0)", OnError::Abort);
    initialized = true;
  }
  if (contexts.size() <= static_cast<size_t>(defaultDevice))
    contexts.resize(defaultDevice + 1, nullptr);
  CUcontext &context = contexts[defaultDevice];
  if (!context) {
    CUdevice device;
    check(cuDeviceGet(&device, defaultDevice), entry, "cuDeviceGet",
          OnError::Abort);
    // CUDA 13 changed cuCtxCreate; the primary context is also the one the
    // runtime API and other libraries in the process use.
    check(cuDevicePrimaryCtxRetain(&context, device), entry,
          "cuDevicePrimaryCtxRetain", OnError::Abort);
  }
  return context;
}

void kpool::cuda_support::setDefaultDevice(int32_t device) {
  std::lock_guard<std::mutex> lock(contextMutex);
  defaultDevice = device;
}

DescriptorView kpool::cuda_support::viewOf(int64_t rank, void *descriptor) {
  auto *fields = static_cast<char *>(descriptor);
  DescriptorView view;
  view.aligned = *reinterpret_cast<void **>(fields + sizeof(void *));
  view.offset = *reinterpret_cast<int64_t *>(fields + 2 * sizeof(void *));
  view.sizes =
      reinterpret_cast<const int64_t *>(fields + 2 * sizeof(void *) + 8);
  view.strides = view.sizes + rank;
  return view;
}

size_t kpool::cuda_support::spanBytes(int64_t rank, const DescriptorView &view,
                                      int64_t eltBytes) {
  int64_t last = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (view.sizes[d] <= 0)
      return 0;
    last += (view.sizes[d] - 1) * view.strides[d];
  }
  return static_cast<size_t>(last + 1) * static_cast<size_t>(eltBytes);
}
