//===- CudaRuntimeWrappers.cpp - mgpu* entry points over the CUDA driver --===//
//
// The functions that host code lowered by `kpool-lower-to-nvvm` (through
// gpu-to-llvm and the gpu.binary/gpu.launch_func translation) calls: module
// loading, kernel launch, streams, events, device memory and host
// registration. Load this library into mlir-runner (-shared-libs) or link it
// into an ahead-of-time build; it needs only the CUDA driver (libcuda.so.1)
// at run time.
//
// All calls run in the primary context of one device (mgpuSetDefaultDevice,
// default 0), made current around each call, so the host code may call from
// any thread. The ABI (argument types and order) is the one the MLIR 22 GPU
// lowering emits; see the declarations below.
//
// Errors: a failing driver call prints the entry point, the driver call and
// the CUDA error name and description to stderr. When the failure leaves no
// valid result to continue with (a module that did not load, a launch, an
// allocation, a copy, a synchronization) the process then aborts: the
// lowered host code has no error path, and continuing would produce wrong
// results without a trace. Teardown failures (unload, destroy, free) are
// reported and execution continues.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#if defined(_WIN32)
#define KPOOL_CUDA_EXPORT __declspec(dllexport)
#else
#define KPOOL_CUDA_EXPORT __attribute__((visibility("default")))
#endif

namespace {

enum class OnError { Abort, Continue };

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

/// Reports a failed driver call; aborts when `onError` says so.
bool check(CUresult result, const char *entry, const char *call,
           OnError onError) {
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

#define KPOOL_CUDA_CHECK(expr) check((expr), __func__, #expr, OnError::Abort)
#define KPOOL_CUDA_REPORT(expr)                                                \
  check((expr), __func__, #expr, OnError::Continue)

/// The device `mgpuSetDefaultDevice` selected.
int32_t defaultDevice = 0;
std::mutex contextMutex;

/// The primary context of the default device, retained on first use.
CUcontext primaryContext(const char *entry) {
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

DescriptorView viewOf(int64_t rank, void *descriptor) {
  auto *fields = static_cast<char *>(descriptor);
  DescriptorView view;
  view.aligned = *reinterpret_cast<void **>(fields + sizeof(void *));
  view.offset = *reinterpret_cast<int64_t *>(fields + 2 * sizeof(void *));
  view.sizes =
      reinterpret_cast<const int64_t *>(fields + 2 * sizeof(void *) + 8);
  view.strides = view.sizes + rank;
  return view;
}

/// The bytes from the first to one past the last element of a view with
/// non-negative strides; 0 when the view is empty.
size_t spanBytes(int64_t rank, const DescriptorView &view, int64_t eltBytes) {
  int64_t last = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (view.sizes[d] <= 0)
      return 0;
    last += (view.sizes[d] - 1) * view.strides[d];
  }
  return static_cast<size_t>(last + 1) * static_cast<size_t>(eltBytes);
}

} // namespace

namespace {
// The lowered host code creates, synchronizes and destroys a stream around
// every kernel call. Creating and destroying CUDA streams costs microseconds
// each, a large part of a decode step, so destroyed streams are kept (a few
// per context) and handed out again: a reused stream only orders new work
// after work already finished.
std::mutex streamMutex;
std::map<CUcontext, std::vector<CUstream>> idleStreams;
constexpr size_t kMaxIdleStreams = 8;
} // namespace

extern "C" {

//===----------------------------------------------------------------------===//
// Device selection
//===----------------------------------------------------------------------===//

/// Selects the device of later calls (before the first call that uses it).
KPOOL_CUDA_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  std::lock_guard<std::mutex> lock(contextMutex);
  defaultDevice = device;
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

/// Loads a cubin or fatbin image of `size` bytes (format bin or fatbin).
KPOOL_CUDA_EXPORT CUmodule mgpuModuleLoad(void *data, size_t size) {
  (void)size; // cubin and fatbin images carry their size.
  KPOOL_CUDA_CONTEXT();
  CUmodule module = nullptr;
  KPOOL_CUDA_CHECK(cuModuleLoadData(&module, data));
  return module;
}

/// Loads a NUL-terminated PTX image (format isa), JIT-compiling it at
/// optimization level `optLevel` (0-4).
KPOOL_CUDA_EXPORT CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  KPOOL_CUDA_CONTEXT();
  constexpr unsigned kLogSize = 8192;
  static thread_local char errorLog[kLogSize];
  errorLog[0] = '\0';
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {reinterpret_cast<void *>(static_cast<intptr_t>(optLevel)),
                    errorLog,
                    reinterpret_cast<void *>(static_cast<uintptr_t>(kLogSize))};
  CUmodule module = nullptr;
  CUresult result = cuModuleLoadDataEx(&module, data, 3, options, values);
  if (result != CUDA_SUCCESS && errorLog[0])
    std::fprintf(stderr, "kpool_cuda_runtime: PTX JIT log:\n%s\n", errorLog);
  KPOOL_CUDA_CHECK(result);
  return module;
}

KPOOL_CUDA_EXPORT void mgpuModuleUnload(CUmodule module) {
  if (!module)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_REPORT(cuModuleUnload(module));
}

KPOOL_CUDA_EXPORT CUfunction mgpuModuleGetFunction(CUmodule module,
                                                   const char *name) {
  KPOOL_CUDA_CONTEXT();
  CUfunction function = nullptr;
  CUresult result = cuModuleGetFunction(&function, module, name);
  if (result != CUDA_SUCCESS)
    std::fprintf(stderr, "kpool_cuda_runtime: kernel '%s' not found\n",
                 name ? name : "(null)");
  KPOOL_CUDA_CHECK(result);
  return function;
}

/// Launches `function` on `stream` with the kernel parameters `params`
/// (`paramsCount` pointers to the argument values).
KPOOL_CUDA_EXPORT void mgpuLaunchKernel(CUfunction function, intptr_t gridX,
                                        intptr_t gridY, intptr_t gridZ,
                                        intptr_t blockX, intptr_t blockY,
                                        intptr_t blockZ, int32_t smem,
                                        CUstream stream, void **params,
                                        void **extra, size_t paramsCount) {
  (void)paramsCount;
  KPOOL_CUDA_CONTEXT();
  if (smem > 0) {
    // Opt in to more than the default 48 KiB of dynamic shared memory.
    KPOOL_CUDA_CHECK(cuFuncSetAttribute(
        function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  }
  KPOOL_CUDA_CHECK(cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                                  blockZ, smem, stream, params, extra));
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

KPOOL_CUDA_EXPORT CUstream mgpuStreamCreate() {
  KPOOL_CUDA_CONTEXT();
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    std::vector<CUstream> &idle = idleStreams[primaryContext(__func__)];
    if (!idle.empty()) {
      CUstream stream = idle.back();
      idle.pop_back();
      return stream;
    }
  }
  CUstream stream = nullptr;
  KPOOL_CUDA_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  return stream;
}

KPOOL_CUDA_EXPORT void mgpuStreamDestroy(CUstream stream) {
  KPOOL_CUDA_CONTEXT();
  CUcontext owner = nullptr;
  if (stream && cuStreamGetCtx(stream, &owner) == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(streamMutex);
    std::vector<CUstream> &idle = idleStreams[owner];
    if (idle.size() < kMaxIdleStreams) {
      idle.push_back(stream);
      return;
    }
  }
  KPOOL_CUDA_REPORT(cuStreamDestroy(stream));
}

/// Waits for all work on `stream`; a kernel fault surfaces here.
KPOOL_CUDA_EXPORT void mgpuStreamSynchronize(CUstream stream) {
  KPOOL_CUDA_CALL(CHECK, cuStreamSynchronize(stream));
}

KPOOL_CUDA_EXPORT void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  KPOOL_CUDA_CALL(CHECK, cuStreamWaitEvent(stream, event, /*flags=*/0));
}

KPOOL_CUDA_EXPORT CUevent mgpuEventCreate() {
  KPOOL_CUDA_CONTEXT();
  CUevent event = nullptr;
  KPOOL_CUDA_CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  return event;
}

KPOOL_CUDA_EXPORT void mgpuEventDestroy(CUevent event) {
  KPOOL_CUDA_CALL(REPORT, cuEventDestroy(event));
}

KPOOL_CUDA_EXPORT void mgpuEventSynchronize(CUevent event) {
  KPOOL_CUDA_CALL(CHECK, cuEventSynchronize(event));
}

KPOOL_CUDA_EXPORT void mgpuEventRecord(CUevent event, CUstream stream) {
  KPOOL_CUDA_CALL(CHECK, cuEventRecord(event, stream));
}

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

/// Allocates `sizeBytes` of device memory, or of managed memory (visible to
/// host and device) when `isHostShared`. Returns null for 0 bytes.
KPOOL_CUDA_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream,
                                     bool isHostShared) {
  (void)stream; // The allocation is synchronous; the stream orders nothing.
  if (sizeBytes == 0)
    return nullptr;
  KPOOL_CUDA_CONTEXT();
  CUdeviceptr ptr = 0;
  if (isHostShared)
    KPOOL_CUDA_CHECK(cuMemAllocManaged(&ptr, sizeBytes, CU_MEM_ATTACH_GLOBAL));
  else
    KPOOL_CUDA_CHECK(cuMemAlloc(&ptr, sizeBytes));
  return reinterpret_cast<void *>(ptr);
}

KPOOL_CUDA_EXPORT void mgpuMemFree(void *ptr, CUstream stream) {
  (void)stream;
  if (!ptr)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_REPORT(cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)));
}

/// Copies `sizeBytes` on `stream`; unified addressing tells the direction.
KPOOL_CUDA_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                                  CUstream stream) {
  if (sizeBytes == 0)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_CHECK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                 reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                                 stream));
}

/// Sets `count` 32-bit words at `dst` to `value` on `stream`.
KPOOL_CUDA_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count,
                                    CUstream stream) {
  if (count == 0)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_CHECK(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value,
                                    count, stream));
}

/// Sets `count` 16-bit words at `dst` to `value` on `stream`.
KPOOL_CUDA_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                    size_t count, CUstream stream) {
  if (count == 0)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_CHECK(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value,
                                    count, stream));
}

//===----------------------------------------------------------------------===//
// Host memory registration (gpu.host_register / gpu.host_unregister)
//===----------------------------------------------------------------------===//

/// Page-locks `sizeBytes` at `ptr` and maps them for the device; with
/// unified addressing kernels then use the host pointer itself.
KPOOL_CUDA_EXPORT void mgpuMemHostRegister(void *ptr, uint64_t sizeBytes) {
  if (!ptr || sizeBytes == 0)
    return;
  KPOOL_CUDA_CONTEXT();
  CUresult result =
      cuMemHostRegister(ptr, sizeBytes, CU_MEMHOSTREGISTER_PORTABLE);
  // A range that overlaps an earlier registration is usable as it is.
  if (result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    std::fprintf(stderr,
                 "kpool_cuda_runtime: %s: %p (%llu bytes) is already "
                 "registered; using the existing registration\n",
                 __func__, ptr, static_cast<unsigned long long>(sizeBytes));
    return;
  }
  KPOOL_CUDA_CHECK(result);
}

KPOOL_CUDA_EXPORT void mgpuMemHostUnregister(void *ptr) {
  if (!ptr)
    return;
  KPOOL_CUDA_CONTEXT();
  KPOOL_CUDA_REPORT(cuMemHostUnregister(ptr));
}

/// Registers the elements a ranked memref view covers. `descriptor` points
/// to the view's descriptor, `elementSizeBytes` is its element size.
KPOOL_CUDA_EXPORT void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                                 int64_t elementSizeBytes) {
  DescriptorView view = viewOf(rank, descriptor);
  size_t bytes = spanBytes(rank, view, elementSizeBytes);
  auto *first =
      static_cast<char *>(view.aligned) + view.offset * elementSizeBytes;
  mgpuMemHostRegister(first, bytes);
}

KPOOL_CUDA_EXPORT void mgpuMemHostUnregisterMemRef(int64_t rank,
                                                   void *descriptor,
                                                   int64_t elementSizeBytes) {
  DescriptorView view = viewOf(rank, descriptor);
  if (spanBytes(rank, view, elementSizeBytes) == 0)
    return;
  auto *first =
      static_cast<char *>(view.aligned) + view.offset * elementSizeBytes;
  mgpuMemHostUnregister(first);
}

} // extern "C"
