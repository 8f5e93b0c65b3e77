//===- kpool-cuda-emu-test.cpp - tests of the emulated CUDA driver --------===//
//
// Drives the CUDA driver API directly, as kpool's CUDA layer and any other
// program would, and prints one PASS/FAIL line per check; lit runs it
// against the emulated driver (test/lib/CudaEmu) with LD_LIBRARY_PATH. Built
// against the toolkit's stub libcuda.so, like libkpool_cuda_runtime.
//
//   kpool-cuda-emu-test <case> [files...]
//
// Cases: basics, memory, streams, capture <ptx>, fork-after-init,
// fork-before-init, modules <ptx> <fatbin> <fatbin-plain> <fatbin-lz4>
// <cubin>, load <image>, launch <ptx>, overrun <ptx>, sticky <ptx>,
// threads <ptx>. The kernels are test/CudaEmu/Inputs/kernels.ptx.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  failures += !ok;
}

const char *name(CUresult r) {
  const char *n = nullptr;
  return cuGetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
}

/// Expects `got` to be `want`, naming the call.
void expectResult(CUresult got, CUresult want, const std::string &call) {
  expect(got == want,
         call + " returns " + name(got) +
             (got == want ? "" : std::string(", want ") + name(want)));
}

[[noreturn]] void die(const std::string &what) {
  std::printf("FAIL: %s\n", what.c_str());
  std::exit(1);
}

void must(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS)
    die(std::string(call) + " failed: " + name(r));
}

std::string readFile(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    die(std::string("cannot read ") + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// cuInit and the primary context, made current.
CUcontext init() {
  must(cuInit(0), "cuInit");
  CUdevice device;
  must(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context;
  must(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  must(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  return context;
}

CUmodule loadPtx(const std::string &ptx) {
  CUmodule module;
  must(cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
  return module;
}

std::vector<uint32_t> download(CUdeviceptr p, size_t n) {
  std::vector<uint32_t> v(n);
  must(cuMemcpyDtoH(v.data(), p, n * 4), "cuMemcpyDtoH");
  return v;
}

bool all(const std::vector<uint32_t> &v, uint32_t value) {
  for (uint32_t x : v)
    if (x != value)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Cases
//===----------------------------------------------------------------------===//

int basics() {
  int version = 0;
  expect(cuDriverGetVersion(&version) == CUDA_SUCCESS && version == 13000,
         "cuDriverGetVersion works before cuInit: " + std::to_string(version));
  CUdeviceptr p;
  expectResult(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED,
               "cuMemAlloc before cuInit");
  must(cuInit(0), "cuInit");
  int count = 0;
  must(cuDeviceGetCount(&count), "cuDeviceGetCount");
  CUdevice device;
  must(cuDeviceGet(&device, 0), "cuDeviceGet");
  expectResult(cuDeviceGet(&device, 1), CUDA_ERROR_INVALID_DEVICE,
               "cuDeviceGet of device 1");
  char text[64];
  must(cuDeviceGetName(text, sizeof(text), 0), "cuDeviceGetName");
  int major = 0, minor = 0, warp = 0, threads = 0;
  must(cuDeviceGetAttribute(&major,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
       "cuDeviceGetAttribute");
  must(cuDeviceGetAttribute(&minor,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
       "cuDeviceGetAttribute");
  must(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
       "cuDeviceGetAttribute");
  must(cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                            0),
       "cuDeviceGetAttribute");
  expect(
      count == 1 && major == 9 && minor == 0 && warp == 32 && threads == 1024,
      std::string("one device, '") + text + "', sm_" + std::to_string(major) +
          std::to_string(minor) + ", warp " + std::to_string(warp) + ", " +
          std::to_string(threads) + " threads per block");
  const char *n = nullptr, *s = nullptr;
  cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &n);
  cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s);
  expect(n && s && !std::strcmp(n, "CUDA_ERROR_ILLEGAL_ADDRESS"),
         std::string("error 700 is ") + (n ? n : "?") + ": " + (s ? s : "?"));
  expectResult(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT,
               "cuMemAlloc without a current context");
  CUcontext context, current = nullptr, popped = nullptr;
  must(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  must(cuCtxPushCurrent(context), "cuCtxPushCurrent");
  must(cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  must(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  expect(current == context && popped == context,
         "the primary context is pushed, current and popped");
  expectResult(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT,
               "cuCtxPopCurrent of an empty stack");
  // cuGetProcAddress: the versioned entry point cuda.h maps the name to.
  void *viaProc = nullptr;
  CUdriverProcAddressQueryResult status;
  must(cuGetProcAddress("cuMemAlloc", &viaProc, 13000, 0, &status),
       "cuGetProcAddress");
  void *direct = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  expect(viaProc && viaProc == direct && status == CU_GET_PROC_ADDRESS_SUCCESS,
         "cuGetProcAddress(\"cuMemAlloc\") is cuMemAlloc_v2");
  expectResult(cuGetProcAddress("cuNoSuchCall", &viaProc, 13000, 0, &status),
               CUDA_ERROR_NOT_FOUND, "cuGetProcAddress of an unknown name");
  return failures ? 1 : 0;
}

int memory() {
  init();
  CUdeviceptr p = 0;
  must(cuMemAlloc(&p, 100), "cuMemAlloc");
  expect(p % 256 == 0, "allocations are 256-byte aligned");
  must(cuMemsetD32(p, 0x01020304, 25), "cuMemsetD32");
  expect(all(download(p, 25), 0x01020304), "cuMemsetD32 and cuMemcpyDtoH");
  std::vector<uint32_t> up(25);
  for (uint32_t i = 0; i < 25; ++i)
    up[i] = i * 3;
  must(cuMemcpyHtoD(p, up.data(), 100), "cuMemcpyHtoD");
  expect(download(p, 25) == up, "cuMemcpyHtoD then DtoH round trip");
  expectResult(cuMemcpyHtoD(p + 4, up.data(), 100), CUDA_ERROR_INVALID_VALUE,
               "a copy that runs past the allocation");
  expectResult(cuMemsetD32(p + 2, 0, 1), CUDA_ERROR_INVALID_VALUE,
               "cuMemsetD32 at an address not 4-byte aligned");
  CUdeviceptr base = 0;
  size_t size = 0;
  must(cuMemGetAddressRange(&base, &size, p + 40), "cuMemGetAddressRange");
  expect(base == p && size == 100, "cuMemGetAddressRange of an inner address");
  unsigned type = 0;
  must(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
       "cuPointerGetAttribute");
  expect(type == CU_MEMORYTYPE_DEVICE, "device memory is of type DEVICE");

  // The guard page after the allocation: a write there faults.
  pid_t child = fork();
  if (child == 0) {
    volatile char *c = reinterpret_cast<char *>(p);
    c[4096] = 1;
    _exit(0);
  }
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  expect(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGSEGV,
         "a write one page past the allocation faults (guard page)");

  std::vector<uint32_t> host(64, 7);
  must(cuMemHostRegister(host.data(), 256, CU_MEMHOSTREGISTER_PORTABLE),
       "cuMemHostRegister");
  expectResult(cuMemHostRegister(host.data() + 8, 16, 0),
               CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
               "registering an overlapping range");
  must(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                             CUdeviceptr(host.data())),
       "cuPointerGetAttribute");
  expect(type == CU_MEMORYTYPE_HOST, "registered memory is of type HOST");
  must(cuMemcpyDtoD(p, CUdeviceptr(host.data()), 100), "cuMemcpyDtoD");
  expect(all(download(p, 25), 7), "a copy from registered host memory");
  must(cuMemHostUnregister(host.data()), "cuMemHostUnregister");
  expectResult(cuMemHostUnregister(host.data()),
               CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "unregistering twice");

  CUdeviceptr managed = 0;
  must(cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL),
       "cuMemAllocManaged");
  reinterpret_cast<uint32_t *>(managed)[3] = 42;
  must(cuMemcpyDtoD(p, managed + 12, 4), "cuMemcpyDtoD");
  expect(download(p, 1)[0] == 42, "managed memory is host-accessible");
  must(cuMemFree(managed), "cuMemFree");
  must(cuMemFree(p), "cuMemFree");
  expectResult(cuMemFree(p), CUDA_ERROR_INVALID_VALUE, "cuMemFree twice");
  expectResult(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0");
  return failures ? 1 : 0;
}

int streams() {
  init();
  CUdeviceptr x, y;
  must(cuMemAlloc(&x, 64), "cuMemAlloc");
  must(cuMemAlloc(&y, 64), "cuMemAlloc");
  must(cuMemsetD32(x, 0, 16), "cuMemsetD32");
  must(cuMemsetD32(y, 0, 16), "cuMemsetD32");
  CUstream a, b, blocking;
  must(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  must(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  must(cuStreamCreateWithPriority(&blocking, CU_STREAM_DEFAULT, -3),
       "cuStreamCreateWithPriority");
  CUevent done, start, stop;
  must(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  must(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  must(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");

  // Work runs when something waits for it.
  must(cuEventRecord(start, a), "cuEventRecord");
  must(cuMemsetD32Async(x, 7, 16, a), "cuMemsetD32Async");
  must(cuEventRecord(done, a), "cuEventRecord");
  must(cuEventRecord(stop, a), "cuEventRecord");
  expect(reinterpret_cast<uint32_t *>(x)[0] == 0,
         "an enqueued memset has not run before anything waits for it");
  float ms = -1;
  expectResult(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_NOT_READY,
               "cuEventElapsedTime before the events ran");
  // b waits for a's event, then copies x to y.
  must(cuStreamWaitEvent(b, done, 0), "cuStreamWaitEvent");
  must(cuMemcpyDtoDAsync(y, x, 64, b), "cuMemcpyDtoDAsync");
  must(cuStreamSynchronize(b), "cuStreamSynchronize");
  expect(all(download(y, 16), 7),
         "stream b's copy ran after stream a's memset (cuStreamWaitEvent)");
  must(cuEventSynchronize(stop), "cuEventSynchronize");
  must(cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  expect(ms >= 0, "cuEventElapsedTime after cuEventSynchronize");
  expectResult(cuEventElapsedTime(&ms, start, done), CUDA_ERROR_INVALID_HANDLE,
               "cuEventElapsedTime of a CU_EVENT_DISABLE_TIMING event");

  // The legacy stream waits for blocking streams, not for non-blocking ones.
  must(cuMemsetD32Async(x, 1, 16, blocking), "cuMemsetD32Async");
  expect(all(download(x, 16), 1),
         "a synchronous copy (legacy stream) waits for a blocking stream");
  must(cuMemsetD32Async(x, 2, 16, a), "cuMemsetD32Async");
  expect(all(download(x, 16), 1),
         "it does not wait for a non-blocking stream's memset");
  must(cuStreamQuery(a), "cuStreamQuery");
  expect(all(download(x, 16), 2), "cuStreamQuery completes the stream's work");

  // Copies to pageable host memory complete before the call returns.
  std::vector<uint32_t> host(16, 0);
  must(cuMemcpyDtoHAsync(host.data(), x, 64, a), "cuMemcpyDtoHAsync");
  expect(all(host, 2), "an async copy to pageable memory is done on return");
  // Copies from pageable memory read it when enqueued.
  std::vector<uint32_t> src(16, 5);
  must(cuMemcpyHtoDAsync(y, src.data(), 64, a), "cuMemcpyHtoDAsync");
  src.assign(16, 6);
  must(cuStreamSynchronize(a), "cuStreamSynchronize");
  expect(all(download(y, 16), 5),
         "an async copy from pageable memory copies what it held then");

  CUcontext context = nullptr;
  must(cuStreamGetCtx(a, &context), "cuStreamGetCtx");
  expect(context != nullptr, "cuStreamGetCtx");
  unsigned flags = 0;
  int priority = 0;
  must(cuStreamGetFlags(a, &flags), "cuStreamGetFlags");
  must(cuStreamGetPriority(blocking, &priority), "cuStreamGetPriority");
  expect(flags == CU_STREAM_NON_BLOCKING && priority == -3,
         "stream flags and priority");
  must(cuStreamDestroy(a), "cuStreamDestroy");
  expectResult(cuStreamSynchronize(a), CUDA_ERROR_INVALID_HANDLE,
               "a destroyed stream");
  must(cuStreamDestroy(b), "cuStreamDestroy");
  must(cuStreamDestroy(blocking), "cuStreamDestroy");
  for (CUevent e : {done, start, stop})
    must(cuEventDestroy(e), "cuEventDestroy");
  must(cuCtxSynchronize(), "cuCtxSynchronize");
  return failures ? 1 : 0;
}

/// Each call a capture forbids fails with CUDA_ERROR_STREAM_CAPTURE_
/// UNSUPPORTED, and the capture ends invalidated.
void forbidden(CUstream s, const char *what,
               const std::function<CUresult()> &call) {
  must(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
       "cuStreamBeginCapture");
  expectResult(call(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
               std::string(what) + " during a capture");
  CUstreamCaptureStatus status;
  must(cuStreamIsCapturing(s, &status), "cuStreamIsCapturing");
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  CUresult end = cuStreamEndCapture(s, &graph);
  expect(status == CU_STREAM_CAPTURE_STATUS_INVALIDATED &&
             end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && !graph,
         std::string("  and the capture ends invalidated (") + name(end) + ")");
}

int capture(const char *ptxPath, bool executes) {
  init();
  std::string ptx = readFile(ptxPath);
  CUmodule module = loadPtx(ptx);
  CUfunction add;
  must(cuModuleGetFunction(&add, module, "kpool_emu_test_add"),
       "cuModuleGetFunction");
  CUdeviceptr data;
  must(cuMemAlloc(&data, 256 * 4), "cuMemAlloc");
  must(cuMemsetD32(data, 10, 256), "cuMemsetD32");
  CUstream s, other;
  must(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  must(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  uint32_t n = 256, value = 1;
  void *params[] = {&data, &n, &value};
  must(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
       "cuStreamBeginCapture");
  expectResult(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
               CUDA_ERROR_ILLEGAL_STATE, "cuStreamBeginCapture twice");
  must(cuLaunchKernel(add, 2, 1, 1, 128, 1, 1, 0, s, params, nullptr),
       "cuLaunchKernel");
  value = 2; // the first node keeps 1: parameters are copied at capture
  must(cuLaunchKernel(add, 2, 1, 1, 128, 1, 1, 0, s, params, nullptr),
       "cuLaunchKernel");
  CUstreamCaptureStatus status;
  cuuint64_t id = 0;
  size_t deps = 0;
  must(
      cuStreamGetCaptureInfo(s, &status, &id, nullptr, nullptr, nullptr, &deps),
      "cuStreamGetCaptureInfo");
  expect(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && id > 0 && deps == 1,
         "cuStreamGetCaptureInfo: active, one dependency (the last node)");
  CUgraph graph;
  must(cuStreamEndCapture(s, &graph), "cuStreamEndCapture");
  size_t nodes = 0;
  must(cuGraphGetNodes(graph, nullptr, &nodes), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodeList(nodes);
  must(cuGraphGetNodes(graph, nodeList.data(), &nodes), "cuGraphGetNodes");
  CUgraphNodeType type;
  must(cuGraphNodeGetType(nodeList[0], &type), "cuGraphNodeGetType");
  expect(nodes == 2 && type == CU_GRAPH_NODE_TYPE_KERNEL,
         "the capture holds 2 kernel nodes");
  must(cuStreamSynchronize(s), "cuStreamSynchronize");
  expect(download(data, 256)[0] == 10, "nothing ran while capturing");

  // The calls a capture forbids, by name (each prints its name).
  CUdeviceptr p = 0;
  std::vector<uint32_t> host(4);
  CUevent event;
  must(cuEventCreate(&event, 0), "cuEventCreate");
  must(cuEventRecord(event, other), "cuEventRecord");
  forbidden(s, "cuStreamSynchronize", [&] { return cuStreamSynchronize(s); });
  forbidden(s, "cuStreamSynchronize of another stream",
            [&] { return cuStreamSynchronize(other); });
  forbidden(s, "cuCtxSynchronize", [&] { return cuCtxSynchronize(); });
  forbidden(s, "cuEventSynchronize", [&] { return cuEventSynchronize(event); });
  forbidden(s, "cuMemAlloc", [&] { return cuMemAlloc(&p, 64); });
  forbidden(s, "cuMemFree", [&] { return cuMemFree(data); });
  forbidden(s, "cuMemcpyAsync", [&] {
    return cuMemcpyAsync(CUdeviceptr(host.data()), data, 16, s);
  });
  forbidden(s, "cuMemsetD32Async",
            [&] { return cuMemsetD32Async(data, 0, 4, s); });
  forbidden(s, "cuMemHostRegister",
            [&] { return cuMemHostRegister(host.data(), 16, 0); });
  forbidden(s, "cuModuleLoadData", [&] {
    CUmodule m;
    return cuModuleLoadData(&m, ptx.c_str());
  });

  // Capture modes: relaxed forbids nothing; thread-local only on its thread.
  must(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED),
       "cuStreamBeginCapture");
  CUresult relaxed = cuMemAlloc(&p, 64);
  CUgraph empty;
  must(cuStreamEndCapture(s, &empty), "cuStreamEndCapture");
  expect(relaxed == CUDA_SUCCESS, "cuMemAlloc during a relaxed capture");
  must(cuMemFree(p), "cuMemFree");
  must(cuGraphDestroy(empty), "cuGraphDestroy");
  must(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
       "cuStreamBeginCapture");
  CUresult elsewhere = CUDA_ERROR_UNKNOWN, wrongThread = CUDA_ERROR_UNKNOWN;
  CUcontext context;
  cuCtxGetCurrent(&context);
  std::thread([&] {
    cuCtxSetCurrent(context);
    CUdeviceptr q;
    elsewhere = cuMemAlloc(&q, 64);
    if (elsewhere == CUDA_SUCCESS)
      cuMemFree(q);
    CUgraph g;
    wrongThread = cuStreamEndCapture(s, &g);
  }).join();
  expectResult(elsewhere, CUDA_SUCCESS,
               "cuMemAlloc on another thread during a thread-local capture");
  expectResult(wrongThread, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
               "cuStreamEndCapture from another thread");
  expectResult(cuMemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
               "cuMemAlloc on the capturing thread (thread-local mode)");
  CUgraph invalid;
  cuStreamEndCapture(s, &invalid);
  expectResult(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
               CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
               "capturing the legacy stream");

  // Replays: the nodes as captured (value 1, then 2), on the stream given.
  CUgraphExec exec;
  must(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  for (int replay = 0; replay < 3; ++replay)
    must(cuGraphLaunch(exec, other), "cuGraphLaunch");
  CUresult synced = cuStreamSynchronize(other);
  if (executes) {
    expectResult(synced, CUDA_SUCCESS, "3 replays on another stream");
    expect(all(download(data, 256), 10 + 3 * (1 + 2)),
           "each replay adds the captured values 1 and 2 (19)");
  } else {
    expectResult(synced, CUDA_ERROR_LAUNCH_FAILED,
                 "a replay without the PTX executor");
  }
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  return failures ? 1 : 0;
}

int forkAfterInit() {
  init();
  CUdeviceptr p;
  must(cuMemAlloc(&p, 64), "cuMemAlloc");
  pid_t child = fork();
  if (child == 0) {
    CUdeviceptr q;
    CUresult r = cuMemAlloc(&q, 64);
    std::fflush(stdout);
    _exit(int(r));
  }
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  expect(WIFEXITED(wstatus) &&
             WEXITSTATUS(wstatus) == CUDA_ERROR_NOT_INITIALIZED,
         "a child forked after cuInit gets CUDA_ERROR_NOT_INITIALIZED");
  must(cuMemFree(p), "cuMemFree");
  expect(true, "the parent still can");
  return failures ? 1 : 0;
}

int forkBeforeInit() {
  pid_t child = fork();
  if (child == 0) {
    init();
    CUdeviceptr q;
    CUresult r = cuMemAlloc(&q, 64);
    if (r == CUDA_SUCCESS)
      r = cuMemFree(q);
    _exit(int(r));
  }
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  expect(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0,
         "a child forked before the first CUDA call uses the driver");
  init();
  CUdeviceptr p;
  must(cuMemAlloc(&p, 64), "cuMemAlloc");
  expect(true, "and so does the parent");
  return failures ? 1 : 0;
}

/// Loads `path`'s bytes as a module image; prints the result and, when it
/// loaded, whether it has kpool_emu_test_add.
int load(const char *path) {
  init();
  std::string image = readFile(path);
  image.push_back('\0');
  char log[1024] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log)))};
  CUmodule module;
  CUresult r = cuModuleLoadDataEx(&module, image.data(), 2, options, values);
  std::printf("load %s: %s\n", path, name(r));
  if (r != CUDA_SUCCESS) {
    std::printf("log: %s\n", log);
    return 1;
  }
  CUfunction f;
  expectResult(cuModuleGetFunction(&f, module, "kpool_emu_test_add"),
               CUDA_SUCCESS, "cuModuleGetFunction(kpool_emu_test_add)");
  expectResult(cuModuleGetFunction(&f, module, "no_such_kernel"),
               CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction(no_such_kernel)");
  int ptxVersion = 0;
  must(cuFuncGetAttribute(&ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION, f),
       "cuFuncGetAttribute");
  must(cuModuleUnload(module), "cuModuleUnload");
  expectResult(cuModuleUnload(module), CUDA_ERROR_INVALID_HANDLE,
               "cuModuleUnload twice");
  return failures ? 1 : 0;
}

void launchAdd(CUfunction add, CUdeviceptr data, uint32_t n, uint32_t value,
               CUstream stream) {
  void *params[] = {&data, &n, &value};
  must(cuLaunchKernel(add, (n + 127) / 128, 1, 1, 128, 1, 1, 0, stream, params,
                      nullptr),
       "cuLaunchKernel");
}

int launch(const char *ptxPath) {
  init();
  CUmodule module = loadPtx(readFile(ptxPath));
  CUfunction add;
  must(cuModuleGetFunction(&add, module, "kpool_emu_test_add"),
       "cuModuleGetFunction");
  const uint32_t n = 1000;
  CUdeviceptr data;
  must(cuMemAlloc(&data, n * 4), "cuMemAlloc");
  must(cuMemsetD32(data, 5, n), "cuMemsetD32");
  launchAdd(add, data, n, 3, nullptr);
  must(cuCtxSynchronize(), "cuCtxSynchronize");
  expect(all(download(data, n), 8), "1000 threads in 8 blocks add 3");
  // The parameters as one buffer (extra).
  struct {
    CUdeviceptr data;
    uint32_t n, value;
  } packed = {data, n, 4};
  size_t size = sizeof(packed);
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed,
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  must(cuLaunchKernel(add, 8, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra),
       "cuLaunchKernel");
  expect(all(download(data, n), 12), "parameters through extra");
  void *params[] = {&data, &packed.n, &packed.value};
  expectResult(
      cuLaunchKernel(add, 1, 1, 1, 2048, 1, 1, 0, nullptr, params, nullptr),
      CUDA_ERROR_INVALID_VALUE, "a block of 2048 threads");
  expectResult(cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 64 * 1024, nullptr,
                              params, nullptr),
               CUDA_ERROR_INVALID_VALUE,
               "64 KiB of dynamic shared memory without the attribute");
  must(cuFuncSetAttribute(add, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                          64 * 1024),
       "cuFuncSetAttribute");
  expectResult(cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 64 * 1024, nullptr,
                              params, nullptr),
               CUDA_SUCCESS, "and with it");
  must(cuCtxSynchronize(), "cuCtxSynchronize");
  return failures ? 1 : 0;
}

int overrun(const char *ptxPath) {
  init();
  CUmodule module = loadPtx(readFile(ptxPath));
  CUfunction f;
  must(cuModuleGetFunction(&f, module, "kpool_emu_test_overrun"),
       "cuModuleGetFunction");
  CUdeviceptr data;
  must(cuMemAlloc(&data, 64 * 4), "cuMemAlloc");
  uint32_t n = 64;
  void *params[] = {&data, &n};
  must(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr),
       "cuLaunchKernel");
  CUresult r = cuCtxSynchronize();
  std::printf("cuCtxSynchronize after the overrun: %s\n", name(r));
  return 0; // the driver's exit status says whether it was caught
}

int sticky(const char *ptxPath) {
  init();
  CUmodule module = loadPtx(readFile(ptxPath));
  CUfunction trap;
  must(cuModuleGetFunction(&trap, module, "kpool_emu_test_trap"),
       "cuModuleGetFunction");
  CUstream s;
  must(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  expectResult(cuLaunchKernel(trap, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr),
               CUDA_SUCCESS, "cuLaunchKernel only enqueues");
  expectResult(cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED,
               "the failed launch at the next synchronization");
  CUdeviceptr p;
  expectResult(cuMemAlloc(&p, 64), CUDA_ERROR_LAUNCH_FAILED,
               "and from every later call (a sticky error)");
  return failures ? 1 : 0;
}

int threads(const char *ptxPath, bool executes) {
  CUcontext context = init();
  CUmodule module = loadPtx(readFile(ptxPath));
  CUfunction add;
  must(cuModuleGetFunction(&add, module, "kpool_emu_test_add"),
       "cuModuleGetFunction");
  std::atomic<int> good{0};
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < 4; ++t)
    workers.emplace_back([&, t] {
      cuCtxSetCurrent(context);
      CUstream s;
      CUdeviceptr data;
      const uint32_t n = 300;
      if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
          cuMemAlloc(&data, n * 4))
        return;
      bool ok = true;
      for (int round = 0; round < 20 && ok; ++round) {
        ok = cuMemsetD32Async(data, t * 100 + round, n, s) == CUDA_SUCCESS;
        if (executes)
          launchAdd(add, data, n, 1, s);
        std::vector<uint32_t> back(n);
        ok = ok &&
             cuMemcpyDtoHAsync(back.data(), data, n * 4, s) == CUDA_SUCCESS;
        ok = ok && all(back, t * 100 + round + (executes ? 1 : 0));
      }
      ok = ok && cuMemFree(data) == CUDA_SUCCESS &&
           cuStreamDestroy(s) == CUDA_SUCCESS;
      good += ok;
    });
  for (std::thread &w : workers)
    w.join();
  expect(good == 4, "4 threads, each its own stream: 20 rounds of memset" +
                        std::string(executes ? ", launch" : "") +
                        " and copy back (" + std::to_string(good) + " of 4)");
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <case> [files...]\n", argv[0]);
    return 2;
  }
  std::string c = argv[1];
  bool executes = false;
  for (int i = 2; i < argc; ++i)
    if (!std::strcmp(argv[i], "--executes"))
      executes = true;
  auto file = [&](int i) {
    if (i >= argc)
      die("case " + c + " needs a file argument");
    return argv[i];
  };
  if (c == "basics")
    return basics();
  if (c == "memory")
    return memory();
  if (c == "streams")
    return streams();
  if (c == "capture")
    return capture(file(2), executes);
  if (c == "fork-after-init")
    return forkAfterInit();
  if (c == "fork-before-init")
    return forkBeforeInit();
  if (c == "load")
    return load(file(2));
  if (c == "launch")
    return launch(file(2));
  if (c == "overrun")
    return overrun(file(2));
  if (c == "sticky")
    return sticky(file(2));
  if (c == "threads")
    return threads(file(2), executes);
  std::fprintf(stderr, "%s: unknown case '%s'\n", argv[0], c.c_str());
  return 2;
}
