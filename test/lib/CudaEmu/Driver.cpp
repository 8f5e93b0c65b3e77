//===- Driver.cpp - the emulated CUDA driver: init, device, contexts ------===//
//
// The libcuda.so.1 stand-in of <build>/lib/cuda-emu (docs/gpu.md, "The
// emulated CUDA driver"): CUDA driver API entry points with the toolkit's
// cuda.h signatures, so that kpool's CUDA layer (libkpool_cuda_runtime), the
// ahead-of-time CUDA kernels and the GPU executables run on it unchanged,
// selected by LD_LIBRARY_PATH. The kernels' PTX runs in the PTX executor
// (Executor.h). This file: initialization, the one device, contexts, error
// names, cuGetProcAddress, and the introspection calls of Introspection.h.
// Memory.cpp, Streams.cpp, Graphs.cpp and Modules.cpp hold the rest.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"
#include "CudaEmu/Introspection.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/sysinfo.h>
#include <unistd.h>

using namespace kpool::emu;
using namespace kpool::emu::driver;

namespace {

/// The process that ran cuInit (0: none yet). Read before taking the lock:
/// a child forked while another thread held it must not wait on it.
std::atomic<pid_t> initializedIn{0};

/// The depth of the calling thread's context stack. The primary context is
/// the only context, so every entry of the stack is it. (A count, not a
/// container: kpool's CUDA layer pushes and pops contexts from library
/// destructors, after thread-local objects are destroyed.)
thread_local int contextDepth = 0;
constexpr int kMaxContextDepth = 1 << 20;
/// The calling thread's capture interaction mode
/// (cuThreadExchangeStreamCaptureMode).
thread_local CUstreamCaptureMode threadCaptureMode =
    CU_STREAM_CAPTURE_MODE_GLOBAL;

constexpr const char *kDeviceName = "kpool emulated device";
constexpr int kDriverVersion = 13000;

/// Whether a call that captures forbid would be prohibited now (the rules
/// of cuThreadExchangeStreamCaptureMode).
bool prohibitedByCapture(const Driver &d) {
  if (threadCaptureMode == CU_STREAM_CAPTURE_MODE_RELAXED)
    return false;
  for (const auto &c : d.captures) {
    if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
        threadCaptureMode == CU_STREAM_CAPTURE_MODE_GLOBAL)
      return true;
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        c->thread == std::this_thread::get_id())
      return true;
  }
  return false;
}

} // namespace

Driver &driver::state() {
  static Driver *d = new Driver;
  return *d;
}

void driver::say(const std::string &text) {
  std::fprintf(stderr, "cuda-emu: %s\n", text.c_str());
  std::fflush(stderr);
}

Entry::Entry(const char *call, unsigned needs) : name(call) {
  Driver &d = state();
  if (needs & Init) {
    pid_t owner = initializedIn.load();
    pid_t self = getpid();
    if (owner && owner != self) {
      result = CUDA_ERROR_NOT_INITIALIZED;
      say(std::string(call) + " in process " + std::to_string(self) +
          ", forked after the CUDA driver was initialized in process " +
          std::to_string(owner) +
          ": a driver's state does not survive fork "
          "(CUDA_ERROR_NOT_INITIALIZED)");
      return;
    }
  }
  lock = std::unique_lock<std::recursive_mutex>(d.mutex);
  if ((needs & Init) && !d.initialized) {
    result = fail(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not been called");
    return;
  }
  if ((needs & (Context | Healthy) & ~Init) && d.contextError) {
    const char *errorName = nullptr;
    cuGetErrorName(d.contextError, &errorName);
    result = fail(d.contextError,
                  std::string(errorName) +
                      " from an earlier kernel launch: the context is "
                      "unusable, as on a device");
    return;
  }
  if ((needs & Context & ~Init) && contextDepth == 0) {
    result = fail(CUDA_ERROR_INVALID_CONTEXT, "no current context");
    return;
  }
  if ((needs & NotUnderCapture & ~Init) && prohibitedByCapture(d)) {
    std::string streams;
    for (auto &[handle, s] : d.streams)
      if (s->capture && !s->capture->invalidated) {
        s->capture->invalidated = true;
        streams += (streams.empty() ? "" : ", ") + describe(*s);
      }
    std::string hint;
    if (!std::strncmp(call, "cuModule", 8))
      hint = " (load modules before capturing: kpool's KernelSet::prepare)";
    result =
        fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
             "not allowed during a stream capture: a stream-ordered call "
             "must only enqueue (no synchronization, allocation, free, "
             "copy or module load)" +
                 hint + "; the capture of " +
                 (streams.empty() ? "the capturing stream" : streams) +
                 " is invalidated (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
    return;
  }
}

CUresult Entry::fail(CUresult code, const std::string &text) const {
  say(std::string(name) + ": " + text);
  return code;
}

bool driver::hasCurrentContext() { return contextDepth > 0; }

void driver::atExit() {
  Driver &d = state();
  if (initializedIn.load() != getpid())
    return; // a child forked after cuInit: not its driver
  std::unique_lock<std::recursive_mutex> lock(d.mutex, std::try_to_lock);
  // Work nobody waited for still runs: its findings count.
  if (lock.owns_lock() && !d.contextError)
    flushAll();
  writeProfileTotals();
  if (!d.findings)
    return;
  say(std::to_string(d.findings) + " sanitizer finding" +
      (d.findings == 1 ? "" : "s") + " in " +
      std::to_string(d.launchesWithFindings) + " of " +
      std::to_string(d.launches) + " kernel launches (reported above)");
  if (d.settings.onFinding != OnFinding::Exit)
    return;
  say("exiting with status " + std::to_string(kFindingsExitStatus) +
      " (KPOOL_EMU_ON_FINDING=report only reports)");
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(kFindingsExitStatus);
}

//===----------------------------------------------------------------------===//
// Initialization, version, errors
//===----------------------------------------------------------------------===//

extern "C" {

CUresult CUDAAPI cuInit(unsigned int flags) {
  pid_t owner = initializedIn.load();
  if (owner && owner != getpid())
    return Entry("cuInit", Entry::Init).status();
  Entry e("cuInit", Entry::None);
  Driver &d = state();
  if (flags != 0)
    return e.fail(CUDA_ERROR_INVALID_VALUE,
                  "flags must be 0, got " + std::to_string(flags));
  if (d.initialized)
    return CUDA_SUCCESS;
  std::string error;
  if (!readSettings(d.settings, error))
    return e.fail(CUDA_ERROR_INVALID_VALUE, error);
  auto *context = new CUctx_st;
  d.primary = context;
  d.legacy = std::make_shared<Stream>();
  d.legacy->context = context;
  d.initialized = true;
  initializedIn = getpid();
  std::atexit(atExit);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define KPOOL_CUDA_ERROR(code, text)                                           \
  case code:                                                                   \
    *name = #code;                                                             \
    return CUDA_SUCCESS;
#include "CudaEmu/Errors.def"
#undef KPOOL_CUDA_ERROR
  }
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define KPOOL_CUDA_ERROR(code, description)                                    \
  case code:                                                                   \
    *text = description;                                                       \
    return CUDA_SUCCESS;
#include "CudaEmu/Errors.def"
#undef KPOOL_CUDA_ERROR
  }
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  Entry e("cuDeviceGetCount", Entry::Init);
  if (e.failed())
    return e.status();
  if (!count)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "count is NULL");
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  Entry e("cuDeviceGet", Entry::Init);
  if (e.failed())
    return e.status();
  if (!device)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "device is NULL");
  if (ordinal != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "ordinal " + std::to_string(ordinal) +
                      ": the emulated driver has one device, 0");
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int length, CUdevice device) {
  Entry e("cuDeviceGetName", Entry::Init);
  if (e.failed())
    return e.status();
  if (!name || length <= 0)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "name is NULL or length <= 0");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  std::snprintf(name, size_t(length), "%s", kDeviceName);
  return CUDA_SUCCESS;
}

/// Host memory, which stands in for device memory.
static size_t hostMemory(bool available) {
  struct sysinfo info;
  if (sysinfo(&info) != 0)
    return 0;
  return size_t(available ? info.freeram : info.totalram) * info.mem_unit;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice device) {
  Entry e("cuDeviceTotalMem", Entry::Init);
  if (e.failed())
    return e.status();
  if (!bytes)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "bytes is NULL");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  *bytes = hostMemory(false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t *free, size_t *total) {
  Entry e("cuMemGetInfo", Entry::Context);
  if (e.failed())
    return e.status();
  if (!free || !total)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "free or total is NULL");
  *free = hostMemory(true);
  *total = hostMemory(false);
  return CUDA_SUCCESS;
}

/// An sm_90 device (an H100/H200's figures where a program might size work
/// by them); 0 for attributes of features the emulation does not have.
static int attributeValue(CUdevice_attribute attribute) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
    return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
    return 64;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
    return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
    return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
    return 49152;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
    return 65536;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
    return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    return 65536;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
    return 1980000;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
    return 512;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    return 132;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
  case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
    return 2619000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
    return 5120;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
    return 50 * 1024 * 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
    return 2048;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
    return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    return 9;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    return 0;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
    return 233472;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    return 232448;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
    return 32;
  case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
    return 1024;
  default:
    return 0;
  }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                      CUdevice device) {
  Entry e("cuDeviceGetAttribute", Entry::Init);
  if (e.failed())
    return e.status();
  if (!value)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "value is NULL");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  if (int(attribute) <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "attribute " +
                                                std::to_string(int(attribute)) +
                                                " is not a CUdevice_attribute");
  *value = attributeValue(attribute);
  return CUDA_SUCCESS;
}

// Deprecated in cuda.h, still exported by drivers.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor,
                                           CUdevice device) {
  Entry e("cuDeviceComputeCapability", Entry::Init);
  if (e.failed())
    return e.status();
  if (!major || !minor)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "major or minor is NULL");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  *major = 9;
  *minor = 0;
  return CUDA_SUCCESS;
}
#pragma clang diagnostic pop

//===----------------------------------------------------------------------===//
// Contexts: the primary context of device 0, and the thread's stack
//===----------------------------------------------------------------------===//

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  Entry e("cuDevicePrimaryCtxRetain", Entry::Init);
  if (e.failed())
    return e.status();
  if (!context)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "context is NULL");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  ++state().primaryRetains;
  *context = state().primary;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice device) {
  Entry e("cuDevicePrimaryCtxRelease", Entry::Init);
  if (e.failed())
    return e.status();
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  if (state().primaryRetains <= 0)
    return e.fail(CUDA_ERROR_INVALID_CONTEXT,
                  "the primary context is not retained");
  // The context and what it holds stay: the emulation never tears it down.
  --state().primaryRetains;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice device,
                                            unsigned int *flags, int *active) {
  Entry e("cuDevicePrimaryCtxGetState", Entry::Init);
  if (e.failed())
    return e.status();
  if (!flags || !active)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "flags or active is NULL");
  if (device != 0)
    return e.fail(CUDA_ERROR_INVALID_DEVICE,
                  "no device " + std::to_string(device));
  *flags = state().primary->flags;
  *active = state().primaryRetains > 0;
  return CUDA_SUCCESS;
}

/// Whether `context` is the (only) context.
static bool validContext(CUcontext context) {
  return context && context == state().primary;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *context) {
  Entry e("cuCtxGetCurrent", Entry::Init);
  if (e.failed())
    return e.status();
  if (!context)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "context is NULL");
  *context = contextDepth ? state().primary : nullptr;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  Entry e("cuCtxSetCurrent", Entry::Init);
  if (e.failed())
    return e.status();
  if (context && !validContext(context))
    return e.fail(CUDA_ERROR_INVALID_CONTEXT, "not a context");
  // Replaces the top of the stack (all of it is the primary context).
  if (!context)
    contextDepth = std::max(0, contextDepth - 1);
  else if (contextDepth == 0)
    contextDepth = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext context) {
  Entry e("cuCtxPushCurrent", Entry::Init);
  if (e.failed())
    return e.status();
  if (!validContext(context))
    return e.fail(CUDA_ERROR_INVALID_CONTEXT, "not a context");
  if (contextDepth == kMaxContextDepth)
    return e.fail(CUDA_ERROR_OUT_OF_MEMORY,
                  "the context stack holds 2^20 contexts already");
  ++contextDepth;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *context) {
  Entry e("cuCtxPopCurrent", Entry::Init);
  if (e.failed())
    return e.status();
  if (contextDepth == 0)
    return e.fail(CUDA_ERROR_INVALID_CONTEXT, "the context stack is empty");
  if (context)
    *context = state().primary;
  --contextDepth;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device) {
  Entry e("cuCtxGetDevice", Entry::Context);
  if (e.failed())
    return e.status();
  if (!device)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "device is NULL");
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext context, unsigned int *version) {
  Entry e("cuCtxGetApiVersion", Entry::Init);
  if (e.failed())
    return e.status();
  if (!version)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "version is NULL");
  if (context && !validContext(context))
    return e.fail(CUDA_ERROR_INVALID_CONTEXT, "not a context");
  *version = 12010;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  Entry e("cuCtxSynchronize", Entry::Context | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  return flushAll();
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  Entry e("cuCtxGetStreamPriorityRange", Entry::Context);
  if (e.failed())
    return e.status();
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  Entry e("cuThreadExchangeStreamCaptureMode", Entry::Init);
  if (e.failed())
    return e.status();
  if (!mode || int(*mode) < 0 || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "mode is NULL or not a mode");
  std::swap(*mode, threadCaptureMode);
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// cuGetProcAddress
//===----------------------------------------------------------------------===//

/// Every entry point, by the name a caller asks for (the name cuda.h
/// declares, which its #defines map to the versioned symbol exported).
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static const struct {
  const char *name;
  void *function;
} kEntryPoints[] = {
#define KPOOL_ENTRY(name) {#name, reinterpret_cast<void *>(&name)},
#include "CudaEmu/EntryPoints.def"
#undef KPOOL_ENTRY
};
#pragma clang diagnostic pop

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **function,
                                  int cudaVersion, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status) {
  if (!symbol || !function)
    return CUDA_ERROR_INVALID_VALUE;
  (void)flags; // The per-thread default stream variants are the same calls.
  *function = nullptr;
  for (const auto &entry : kEntryPoints) {
    if (std::strcmp(entry.name, symbol) != 0)
      continue;
    if (cudaVersion > kDriverVersion) {
      if (status)
        *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_ERROR_NOT_FOUND;
    }
    *function = entry.function;
    if (status)
      *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status)
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

//===----------------------------------------------------------------------===//
// Introspection (Introspection.h)
//===----------------------------------------------------------------------===//

CUresult kpoolEmuStreamLaunches(CUstream stream, int64_t *launches) {
  Entry e("kpoolEmuStreamLaunches", Entry::Init);
  if (e.failed())
    return e.status();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s || !launches)
    return CUDA_ERROR_INVALID_VALUE;
  *launches = s->launches;
  return CUDA_SUCCESS;
}

CUresult kpoolEmuStreamId(CUstream stream, int64_t *id) {
  Entry e("kpoolEmuStreamId", Entry::Init);
  if (e.failed())
    return e.status();
  std::shared_ptr<Stream> s = streamOf(stream);
  if (!s || !id)
    return CUDA_ERROR_INVALID_VALUE;
  *id = int64_t(s->id);
  return CUDA_SUCCESS;
}

CUresult kpoolEmuModuleLoads(int64_t *loads, int64_t *modules,
                             int64_t *mostLoadsOfOne) {
  Entry e("kpoolEmuModuleLoads", Entry::Init);
  if (e.failed())
    return e.status();
  Driver &d = state();
  int64_t most = 0;
  for (const auto &[name, n] : d.loadsByModule)
    most = std::max(most, n);
  if (loads)
    *loads = d.moduleLoads;
  if (modules)
    *modules = int64_t(d.loadsByModule.size());
  if (mostLoadsOfOne)
    *mostLoadsOfOne = most;
  return CUDA_SUCCESS;
}

CUresult kpoolEmuLaunches(int64_t *launches, int64_t *withFindings,
                          int64_t *failed) {
  Entry e("kpoolEmuLaunches", Entry::Init);
  if (e.failed())
    return e.status();
  Driver &d = state();
  if (launches)
    *launches = d.launches;
  if (withFindings)
    *withFindings = d.launchesWithFindings;
  if (failed)
    *failed = d.failedLaunches;
  return CUDA_SUCCESS;
}

CUresult kpoolEmuKernelLaunches(const char *part, int64_t *launches) {
  Entry e("kpoolEmuKernelLaunches", Entry::Init);
  if (e.failed())
    return e.status();
  if (!part || !launches)
    return CUDA_ERROR_INVALID_VALUE;
  int64_t n = 0;
  for (const auto &[name, count] : state().launchesByKernel)
    if (name.find(part) != std::string::npos)
      n += count;
  *launches = n;
  return CUDA_SUCCESS;
}

} // extern "C"
