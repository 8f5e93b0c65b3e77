//===- CudaRuntimeWrappers.cpp - mgpu* entry points over the CUDA driver --===//
//
// The functions that host code lowered by `kpool-lower-to-nvvm` (through
// gpu-to-llvm and the gpu.binary/gpu.launch_func translation) calls: module
// loading, kernel launch, streams, events, device memory and host
// registration. Load this library into mlir-runner (-shared-libs) or link it
// into an ahead-of-time build; it needs only the CUDA driver (libcuda.so.1)
// at run time.
//
// Launches run in the context of their stream (the caller's: a kernel
// launched on a stream of device 1 runs on device 1); memory, stream and
// event calls run in the primary context of one device
// (mgpuSetDefaultDevice, default 0), made current around each call, so the
// host code may call from any thread. The ABI (argument types and order) is
// the one the MLIR 22 GPU lowering emits; see the declarations below.
//
// GPU images: kpool's compiler embeds a kpool/ABI/CudaImage.h image (a cubin
// for one architecture, when ptxas was found, and the PTX); such a module
// loads its cubin and, when the driver rejects it (another architecture, a
// driver that runs PTX only), its PTX, which the driver JIT-compiles. Other
// images (a plain cubin or fatbin from gpu-module-to-binary, or PTX through
// mgpuModuleLoadJIT) load as they are.
//
// Modules load lazily. The lowered host code "loads" its GPU modules in
// static constructors; here that only records the image, so nothing touches
// CUDA before the first call that needs it (a process may fork first, and
// the device is the caller's, not one chosen before main). A module loads
// in a context on the first launch there, or in kpoolCudaPrepare, which an
// engine calls before capturing launches into a graph.
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

#include "kpool/ABI/CudaImage.h"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
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

namespace {
// Lazily loaded modules and their kernels (see the header comment). Never
// destroyed: launches may come from other threads during exit.
struct LazyFunction;
struct LazyModule {
  const void *data;
  bool jit;
  int optLevel;
  std::vector<std::pair<CUcontext, CUmodule>> loaded;
  std::vector<LazyFunction *> functions;
  /// A CudaImage's cubin and PTX (copied, aligned); empty otherwise.
  std::string cubin, ptx;
  bool image = false;
};
struct LazyFunction {
  LazyModule *module;
  std::string name;
  std::vector<std::pair<CUcontext, CUfunction>> resolved;
};
std::mutex moduleMutex;
std::vector<LazyModule *> &lazyModules() {
  static auto *modules = new std::vector<LazyModule *>;
  return *modules;
}

bool readImage(LazyModule &module, const void *data, size_t size);

/// A new module of `data` (`size` bytes, when known: a CudaImage is read
/// then), recorded for kpoolCudaPrepare.
LazyModule *lazyModule(const void *data, bool jit, int optLevel,
                       size_t size = 0) {
  auto *module = new LazyModule{data, jit, optLevel, {}, {}, {}, {}, false};
  if (size)
    readImage(*module, data, size);
  std::lock_guard<std::mutex> lock(moduleMutex);
  lazyModules().push_back(module);
  return module;
}

/// Reads a CudaImage of `size` bytes into `module`; false when `data` is
/// not one (or is malformed: then it loads as a plain image and the driver
/// judges it).
bool readImage(LazyModule &module, const void *data, size_t size) {
  KPoolCudaImageHeader header;
  if (size < sizeof header)
    return false;
  std::memcpy(&header, data, sizeof header);
  if (std::memcmp(header.magic, KPOOL_CUDA_IMAGE_MAGIC, 8) != 0 ||
      header.version != KPOOL_CUDA_IMAGE_VERSION || header.count > 16 ||
      sizeof header + header.count * sizeof(KPoolCudaImageEntry) > size)
    return false;
  const char *bytes = static_cast<const char *>(data);
  for (uint32_t i = 0; i < header.count; ++i) {
    KPoolCudaImageEntry entry;
    std::memcpy(&entry, bytes + sizeof header + i * sizeof entry, sizeof entry);
    if (entry.offset > size || entry.size > size - entry.offset)
      return false;
    std::string part(bytes + entry.offset, entry.size);
    if (entry.kind == KPOOL_CUDA_IMAGE_CUBIN && module.cubin.empty())
      module.cubin = std::move(part);
    else if (entry.kind == KPOOL_CUDA_IMAGE_PTX && module.ptx.empty())
      module.ptx = std::move(part);
  }
  if (module.ptx.empty() && module.cubin.empty())
    return false;
  if (!module.ptx.empty() && module.ptx.back() != '\0')
    module.ptx.push_back('\0');
  module.image = true;
  return true;
}

/// Whether a failed load of a cubin means "not for this driver or device",
/// so that its PTX may be tried.
bool rejectsCubin(CUresult r) {
  return r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
         r == CUDA_ERROR_INVALID_SOURCE || r == CUDA_ERROR_NOT_SUPPORTED ||
         r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
         r == CUDA_ERROR_INVALID_PTX ||
         r == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
}

/// Loads NUL-terminated `ptx` with the driver's JIT at `optLevel`, printing
/// its error log on failure.
CUresult loadPtx(CUmodule *module, const char *ptx, int optLevel) {
  constexpr unsigned kLogSize = 8192;
  static thread_local char errorLog[kLogSize];
  errorLog[0] = '\0';
  CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {reinterpret_cast<void *>(static_cast<intptr_t>(optLevel)),
                    errorLog,
                    reinterpret_cast<void *>(static_cast<uintptr_t>(kLogSize))};
  CUresult r = cuModuleLoadDataEx(module, ptx, 3, options, values);
  if (r != CUDA_SUCCESS && errorLog[0])
    std::fprintf(stderr, "kpool_cuda_runtime: PTX JIT log:\n%s\n", errorLog);
  return r;
}

/// The context a launch on `stream` runs in: the stream's, or for the NULL
/// stream the current context, else the default device's primary one.
CUcontext contextOf(CUstream stream, const char *entry) {
  CUcontext primary = primaryContext(entry); // initializes the driver
  CUcontext context = nullptr;
  if (stream)
    check(cuStreamGetCtx(stream, &context), entry, "cuStreamGetCtx",
          OnError::Abort);
  else if (cuCtxGetCurrent(&context) != CUDA_SUCCESS)
    context = nullptr;
  return context ? context : primary;
}

/// The module loaded in `context`, loading it there first if needed
/// (caller holds no lock). A failed load aborts unless `result` is given.
CUmodule loadIn(LazyModule &module, CUcontext context, const char *entry,
                CUresult *result = nullptr) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  for (auto &[c, m] : module.loaded)
    if (c == context)
      return m;
  OnError onError = result ? OnError::Continue : OnError::Abort;
  check(cuCtxPushCurrent(context), entry, "cuCtxPushCurrent", OnError::Abort);
  CUmodule loaded = nullptr;
  CUresult r;
  const char *call = module.jit ? "cuModuleLoadDataEx" : "cuModuleLoadData";
  if (module.image) {
    // The cubin first; its PTX when the driver rejects the cubin.
    r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    call = "cuModuleLoadData (cubin)";
    if (!module.cubin.empty())
      r = cuModuleLoadData(&loaded, module.cubin.data());
    if (r != CUDA_SUCCESS && rejectsCubin(r) && !module.ptx.empty()) {
      r = loadPtx(&loaded, module.ptx.data(), 4);
      call = "cuModuleLoadDataEx (PTX)";
    }
  } else if (!module.jit) {
    r = cuModuleLoadData(&loaded, module.data);
  } else {
    r = loadPtx(&loaded, static_cast<const char *>(module.data),
                module.optLevel);
  }
  CUcontext popped;
  cuCtxPopCurrent(&popped);
  if (result)
    *result = r;
  if (!check(r, entry, call, onError))
    return nullptr;
  module.loaded.emplace_back(context, loaded);
  return loaded;
}

/// `function` in `context`: looked up once per context.
CUfunction resolve(LazyFunction *function, CUcontext context,
                   const char *entry) {
  {
    std::lock_guard<std::mutex> lock(moduleMutex);
    for (auto &[c, f] : function->resolved)
      if (c == context)
        return f;
  }
  CUmodule module = loadIn(*function->module, context, entry);
  check(cuCtxPushCurrent(context), entry, "cuCtxPushCurrent", OnError::Abort);
  CUfunction resolved = nullptr;
  CUresult result =
      cuModuleGetFunction(&resolved, module, function->name.c_str());
  CUcontext popped;
  cuCtxPopCurrent(&popped);
  if (result != CUDA_SUCCESS)
    std::fprintf(stderr, "kpool_cuda_runtime: kernel '%s' not found\n",
                 function->name.c_str());
  check(result, entry, "cuModuleGetFunction", OnError::Abort);
  std::lock_guard<std::mutex> lock(moduleMutex);
  function->resolved.emplace_back(context, resolved);
  return resolved;
}
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

/// Records a cubin, fatbin or kpool CudaImage of `size` bytes (format bin,
/// fatbin, or kpool's ptx+cubin), to load on first use; touches no CUDA.
KPOOL_CUDA_EXPORT CUmodule mgpuModuleLoad(void *data, size_t size) {
  // cubin and fatbin images carry their size; a CudaImage is read now.
  return reinterpret_cast<CUmodule>(lazyModule(data, /*jit=*/false, 0, size));
}

/// Records a NUL-terminated PTX image (format isa), to JIT-compile at
/// optimization level `optLevel` (0-4) on first use.
KPOOL_CUDA_EXPORT CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  return reinterpret_cast<CUmodule>(lazyModule(data, /*jit=*/true, optLevel));
}

KPOOL_CUDA_EXPORT void mgpuModuleUnload(CUmodule module) {
  if (!module)
    return;
  auto *lazy = reinterpret_cast<LazyModule *>(module);
  std::vector<std::pair<CUcontext, CUmodule>> loaded;
  {
    std::lock_guard<std::mutex> lock(moduleMutex);
    auto &all = lazyModules();
    all.erase(std::remove(all.begin(), all.end(), lazy), all.end());
    loaded.swap(lazy->loaded);
    // Functions stay allocated: a late launch through one fails cleanly in
    // the driver rather than reading freed memory.
  }
  for (auto &[context, cuModule] : loaded) {
    if (!KPOOL_CUDA_REPORT(cuCtxPushCurrent(context)))
      continue;
    KPOOL_CUDA_REPORT(cuModuleUnload(cuModule));
    CUcontext popped;
    KPOOL_CUDA_REPORT(cuCtxPopCurrent(&popped));
  }
}

/// A handle to kernel `name` of `module`, resolved per context at launch;
/// touches no CUDA.
KPOOL_CUDA_EXPORT CUfunction mgpuModuleGetFunction(CUmodule module,
                                                   const char *name) {
  auto *lazy = reinterpret_cast<LazyModule *>(module);
  std::lock_guard<std::mutex> lock(moduleMutex);
  for (LazyFunction *f : lazy->functions)
    if (f->name == name)
      return reinterpret_cast<CUfunction>(f);
  auto *f = new LazyFunction{lazy, name ? name : "", {}};
  lazy->functions.push_back(f);
  return reinterpret_cast<CUfunction>(f);
}

/// Launches `function` on `stream` with the kernel parameters `params`
/// (`paramsCount` pointers to the argument values), in the stream's
/// context; only enqueues.
KPOOL_CUDA_EXPORT void mgpuLaunchKernel(CUfunction function, intptr_t gridX,
                                        intptr_t gridY, intptr_t gridZ,
                                        intptr_t blockX, intptr_t blockY,
                                        intptr_t blockZ, int32_t smem,
                                        CUstream stream, void **params,
                                        void **extra, size_t paramsCount) {
  (void)paramsCount;
  CUcontext context = contextOf(stream, __func__);
  CUfunction resolved =
      resolve(reinterpret_cast<LazyFunction *>(function), context, __func__);
  KPOOL_CUDA_CHECK(cuCtxPushCurrent(context));
  if (smem > 0) {
    // Opt in to more than the default 48 KiB of dynamic shared memory.
    KPOOL_CUDA_CHECK(cuFuncSetAttribute(
        resolved, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  }
  KPOOL_CUDA_CHECK(cuLaunchKernel(resolved, gridX, gridY, gridZ, blockX,
                                  blockY, blockZ, smem, stream, params, extra));
  CUcontext popped;
  KPOOL_CUDA_REPORT(cuCtxPopCurrent(&popped));
}

} // extern "C"

namespace {
/// A kernel that records `value` in a status word the way kpool's kernels
/// do: the word keeps the smallest nonzero value it is given.
const char kRecordStatusPtx[] = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kpool_record_status(.param .u64 word, .param .u64 value)
{
  .reg .pred %p<3>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [word];
  ld.param.u64 %rd2, [value];
  cvta.to.global.u64 %rd1, %rd1;
  ld.volatile.global.u64 %rd3, [%rd1];
$retry:
  setp.ne.u64 %p1, %rd3, 0;
  setp.le.u64 %p2, %rd3, %rd2;
  and.pred %p1, %p1, %p2;
  @%p1 bra $done;
  atom.global.cas.b64 %rd4, [%rd1], %rd3, %rd2;
  setp.ne.u64 %p1, %rd4, %rd3;
  mov.u64 %rd3, %rd4;
  @%p1 bra $retry;
$done:
  ret;
}
)";
/// Registered when the library loads (no CUDA call), so that
/// kpoolCudaPrepare loads it with the kernels' modules.
LazyModule *const recorder =
    lazyModule(kRecordStatusPtx, /*jit=*/true, /*optLevel=*/4);
} // namespace

extern "C" {
/// Records `value` in the status word `word` (device memory; NULL: none),
/// keeping the smallest nonzero value, in stream order on `stream`: how
/// kpool-aot's CUDA entry points record a finding they make before
/// launching anything (an operand's extent).
KPOOL_CUDA_EXPORT void kpoolCudaRecordStatus(uint64_t *word, uint64_t value,
                                             CUstream stream);
}

void kpoolCudaRecordStatus(uint64_t *word, uint64_t value, CUstream stream) {
  if (!word || !value)
    return;
  CUfunction function = mgpuModuleGetFunction(
      reinterpret_cast<CUmodule>(recorder), "kpool_record_status");
  void *params[] = {&word, &value};
  mgpuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr, 2);
}

extern "C" {

/// Loads every recorded module in the context of `stream` (see the header
/// comment); 0 or the CUresult of the first load that failed.
KPOOL_CUDA_EXPORT int kpoolCudaPrepare(CUstream stream) {
  CUcontext context = contextOf(stream, __func__);
  std::vector<LazyModule *> all;
  {
    std::lock_guard<std::mutex> lock(moduleMutex);
    all = lazyModules();
  }
  for (LazyModule *module : all) {
    CUresult result = CUDA_SUCCESS;
    loadIn(*module, context, __func__, &result);
    if (result != CUDA_SUCCESS)
      return static_cast<int>(result);
  }
  return 0;
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
