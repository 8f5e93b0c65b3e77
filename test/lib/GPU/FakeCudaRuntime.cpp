//===- FakeCudaRuntime.cpp - host memory as device memory, for tests ------===//
//
// The CPU emulation build of the GPU executables (KPOOL_GPU_ON_CPU) links
// this instead of libkpool_cuda_runtime: the mgpu* functions that
// kpool/Runtime/CUDA.h uses, over host memory, with every allocation
// recorded, and kernel backends that check that each operand lies in such
// an allocation. Test-only code.
//
// Streams and capture. Each stream is its own object; a launch runs at once
// (a CPU stream is trivially in order) and is counted on the stream it was
// enqueued on. Between beginCapture and endCapture on a stream, launches on
// it are recorded, not run (as CUDA graph capture does), and any call a
// stream-ordered call must not make -- synchronize, allocate, free, copy,
// load a module -- aborts the program naming the call. A graph replays its
// launches, operands as captured, on the stream it is launched on.
//
// Processes. The first call that would touch the driver "initializes" it in
// the calling process; a call from a child forked after that aborts, as a
// real driver's state does not survive fork.
//
// GPU code. The host code of GPU kernels (kpool-aot's CUDA objects, kernel
// packs, the JIT's CUDA kernels) calls the module and launch functions of
// libkpool_cuda_runtime: here they record, check and count, and execute
// nothing (the kernels are PTX, which this emulation cannot run). A module
// is read as kpool's GPU image (kpool/ABI/CudaImage.h: its PTX must be
// there, and the cubin, if any, an ELF file), a kernel must be an `.entry`
// of its module's PTX, a launch's grid and block must be valid, and it runs
// on the stream given (captured there during a capture). Built also as a
// shared library named libkpool_cuda_runtime.so (test/lib/GPU), which a
// program or Python selects with LD_LIBRARY_PATH in place of the real one;
// the kpoolEmu* functions at the end let tests inspect it.
//
//===----------------------------------------------------------------------===//

#include "GPU/GpuSupport.h"

#include "kpool/ABI/CudaImage.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unistd.h>

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

//===----------------------------------------------------------------------===//
// Streams, capture, launches
//===----------------------------------------------------------------------===//

struct FakeStream {
  int id;
  int64_t launches = 0;
  std::shared_ptr<gpu::Graph> capturing;
};

} // namespace

struct kpool::gpu::Graph {
  std::vector<std::function<void()>> launches;
};

namespace {

std::mutex streamMutex;
FakeStream nullStream{0};
int nextStream = 1;
int capturesInFlight = 0;
bool modulesLoaded = false;
int64_t moduleLoads = 0;
pid_t initializedIn = 0;

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "emulated device: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Marks the driver initialized in this process; aborts in a child forked
/// after the parent initialized it. Caller holds streamMutex.
void touchDriver(const char *call) {
  pid_t self = getpid();
  if (!initializedIn)
    initializedIn = self;
  else if (initializedIn != self)
    fail(std::string(call) + " in process " + std::to_string(self) +
         ", forked after the CUDA driver was initialized in process " +
         std::to_string(initializedIn) +
         ": a driver's state does not survive fork");
}

/// Aborts when a call forbidden under capture comes while one is under way.
/// Caller holds streamMutex.
void forbiddenUnderCapture(const char *call) {
  touchDriver(call);
  if (capturesInFlight)
    fail(std::string(call) +
         " during a stream capture: a stream-ordered call must only enqueue "
         "(no synchronization, allocation, free, copy or module load)");
}

FakeStream &streamOf(void *handle) {
  return handle ? *static_cast<FakeStream *>(handle) : nullStream;
}

/// A launch of `run` on `stream`: recorded when the stream captures (the
/// modules must already be loaded: loading is forbidden there), else run.
void launch(void *stream, std::function<void()> run) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    touchDriver("a kernel launch");
    FakeStream &s = streamOf(stream);
    if (!modulesLoaded) {
      if (capturesInFlight)
        fail("a kernel launch during a stream capture loads the GPU modules "
             "(the first launch in a context does): call KernelSet::prepare "
             "before capturing");
      modulesLoaded = true;
      ++moduleLoads;
    }
    if (s.capturing) {
      s.capturing->launches.push_back(std::move(run));
      return;
    }
    ++s.launches;
  }
  run();
}

/// What a captured launch keeps of an argument: the descriptor behind a
/// pointer (the caller's is a temporary), or the value.
template <typename T> struct Kept {
  T value;
  explicit Kept(T v) : value(v) {}
  T get() { return value; }
};
template <int Rank> struct Kept<Descriptor<Rank> *> {
  Descriptor<Rank> value;
  explicit Kept(Descriptor<Rank> *d) : value(*d) {}
  Descriptor<Rank> *get() { return &value; }
};

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
    // The stream is the last argument (the last of KernelABI.def's two
    // context operands, after the status word).
    void *stream = std::get<sizeof...(A) - 1>(std::tie(args...));
    auto kept = std::make_shared<std::tuple<Kept<A>...>>(Kept<A>(args)...);
    launch(stream, [kept] {
      std::apply(
          [](Kept<A> &...k) {
            check(std::index_sequence_for<A...>(), k.get()...);
            (inner[Slot].*Member)(k.get()...);
          },
          *kept);
    });
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
  b.member = inner[Slot].member ? Checked<Slot, abi::KernelId::Name, Name##Fn, \
                                          &KernelBackend::member>::call        \
                                : nullptr;
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
  b.deviceResident = true;
  b.prepare = cuda::prepare;
  return b;
}

void gpu::beginCapture(void *stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  FakeStream &s = streamOf(stream);
  if (!stream)
    fail("beginCapture on the NULL stream (CUDA cannot capture it)");
  if (s.capturing)
    fail("beginCapture on stream " + std::to_string(s.id) +
         ", which is capturing already");
  s.capturing = std::make_shared<Graph>();
  ++capturesInFlight;
}

std::shared_ptr<gpu::Graph> gpu::endCapture(void *stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  FakeStream &s = streamOf(stream);
  if (!s.capturing)
    fail("endCapture on stream " + std::to_string(s.id) +
         ", which is not capturing");
  --capturesInFlight;
  return std::move(s.capturing);
}

void gpu::launchGraph(const Graph &graph, void *stream) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    touchDriver("a graph launch");
    FakeStream &s = streamOf(stream);
    if (s.capturing)
      fail("a graph launched into a capture (not emulated)");
    s.launches += int64_t(graph.launches.size());
  }
  for (const auto &run : graph.launches)
    run();
}

int64_t gpu::graphLaunches(const Graph &graph) {
  return int64_t(graph.launches.size());
}

int64_t gpu::launchCount(void *stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  return streamOf(stream).launches;
}

int gpu::streamId(void *stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  return streamOf(stream).id;
}

int64_t gpu::moduleLoadCount() {
  std::lock_guard<std::mutex> lock(streamMutex);
  return moduleLoads;
}

namespace {

//===----------------------------------------------------------------------===//
// Modules and launches of GPU code
//===----------------------------------------------------------------------===//

struct FakeModule {
  /// The `.entry` names of the module's PTX.
  std::set<std::string> entries;
  bool hasCubin = false;
};
struct FakeFunction {
  FakeModule *module;
  std::string name;
};

std::mutex moduleMutex;
int64_t gpuLaunches = 0;
std::map<std::string, int64_t> &launchesByKernel() {
  static auto *m = new std::map<std::string, int64_t>;
  return *m;
}
std::string &lastKernel() {
  static auto *s = new std::string;
  return *s;
}
int64_t modulesRegistered = 0, cubinModules = 0;

/// The `.entry` names of PTX text.
std::set<std::string> entriesOf(const char *ptx, size_t size) {
  std::set<std::string> names;
  std::string text(ptx, strnlen(ptx, size));
  for (size_t at = text.find(".entry"); at != std::string::npos;
       at = text.find(".entry", at + 6)) {
    size_t begin = at + 6;
    while (begin < text.size() && (text[begin] == ' ' || text[begin] == '\t'))
      ++begin;
    size_t end = begin;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) ||
            text[end] == '_' || text[end] == '$'))
      ++end;
    if (end > begin)
      names.insert(text.substr(begin, end - begin));
  }
  return names;
}

/// Reads a module image: kpool's CudaImage, or PTX text.
FakeModule *readModule(const void *data, size_t size, bool ptxText) {
  auto *module = new FakeModule;
  const char *bytes = static_cast<const char *>(data);
  if (ptxText) {
    module->entries = entriesOf(bytes, std::strlen(bytes));
  } else {
    KPoolCudaImageHeader header;
    if (size < sizeof header ||
        (std::memcpy(&header, data, sizeof header),
         std::memcmp(header.magic, KPOOL_CUDA_IMAGE_MAGIC, 8) != 0))
      fail("mgpuModuleLoad: the image is not kpool's GPU image "
           "(kpool/ABI/CudaImage.h): a plain cubin or fatbin carries no PTX "
           "this emulation could read");
    if (header.version != KPOOL_CUDA_IMAGE_VERSION || header.count == 0 ||
        sizeof header + header.count * sizeof(KPoolCudaImageEntry) > size)
      fail("mgpuModuleLoad: a malformed GPU image header");
    bool ptx = false;
    for (uint32_t i = 0; i < header.count; ++i) {
      KPoolCudaImageEntry e;
      std::memcpy(&e, bytes + sizeof header + i * sizeof e, sizeof e);
      if (e.offset > size || e.size > size - e.offset || e.offset % 16)
        fail("mgpuModuleLoad: a GPU image entry lies outside the image");
      const char *part = bytes + e.offset;
      if (e.kind == KPOOL_CUDA_IMAGE_PTX) {
        if (e.size == 0 || part[e.size - 1] != '\0' ||
            std::strstr(part, ".version") == nullptr)
          fail("mgpuModuleLoad: the GPU image's PTX is not NUL-terminated "
               "PTX text");
        module->entries = entriesOf(part, e.size);
        ptx = true;
      } else if (e.kind == KPOOL_CUDA_IMAGE_CUBIN) {
        if (e.size < 4 || std::memcmp(part,
                                      "\x7f"
                                      "ELF",
                                      4) != 0)
          fail("mgpuModuleLoad: the GPU image's cubin is not an ELF file");
        module->hasCubin = true;
      }
    }
    if (!ptx)
      fail("mgpuModuleLoad: the GPU image has no PTX to fall back to");
  }
  if (module->entries.empty())
    fail("mgpuModuleLoad: the module's PTX has no kernel (.entry)");
  std::lock_guard<std::mutex> lock(moduleMutex);
  ++modulesRegistered;
  cubinModules += module->hasCubin;
  return module;
}

} // namespace

extern "C" {

void *mgpuModuleLoad(void *data, size_t size) {
  // Recorded, as libkpool_cuda_runtime does: no driver call yet.
  return readModule(data, size, /*ptxText=*/false);
}

void *mgpuModuleLoadJIT(void *data, int) {
  return readModule(data, 0, /*ptxText=*/true);
}

void mgpuModuleUnload(void *) {}

void *mgpuModuleGetFunction(void *module, const char *name) {
  auto *m = static_cast<FakeModule *>(module);
  if (!m || !name || !m->entries.count(name))
    fail(std::string("mgpuModuleGetFunction: kernel '") + (name ? name : "") +
         "' is not an .entry of its module's PTX");
  return new FakeFunction{m, name};
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **, size_t) {
  auto *f = static_cast<FakeFunction *>(function);
  if (gridX < 1 || gridY < 1 || gridZ < 1 || gridX > INT32_MAX ||
      gridY > 65535 || gridZ > 65535 || blockX < 1 || blockY < 1 ||
      blockZ < 1 || blockX * blockY * blockZ > 1024 || smem < 0)
    fail("mgpuLaunchKernel: kernel '" + f->name + "': invalid geometry " +
         std::to_string(gridX) + "x" + std::to_string(gridY) + "x" +
         std::to_string(gridZ) + " blocks of " + std::to_string(blockX) + "x" +
         std::to_string(blockY) + "x" + std::to_string(blockZ));
  if (!params)
    fail("mgpuLaunchKernel: kernel '" + f->name + "' without parameters");
  std::string name = f->name;
  launch(stream, [name] {
    std::lock_guard<std::mutex> lock(moduleMutex);
    ++gpuLaunches;
    ++launchesByKernel()[name];
    lastKernel() = name;
  });
}

/// libkpool_cuda_runtime's status recorder (a one-thread kernel there):
/// "device" memory is host memory here, so the launch applies it.
void kpoolCudaRecordStatus(uint64_t *word, uint64_t value, void *stream) {
  if (!word || !value)
    return;
  launch(stream, [word, value] {
    std::lock_guard<std::mutex> lock(moduleMutex);
    ++gpuLaunches;
    ++launchesByKernel()["kpool_record_status"];
    lastKernel() = "kpool_record_status";
    if (*word == 0 || *word > value)
      *word = value;
  });
}

void mgpuSetDefaultDevice(int32_t) {}

void *mgpuEventCreate() {
  std::lock_guard<std::mutex> lock(streamMutex);
  touchDriver("mgpuEventCreate");
  return new int(0);
}
void mgpuEventDestroy(void *event) { delete static_cast<int *>(event); }
void mgpuEventSynchronize(void *) {
  std::lock_guard<std::mutex> lock(streamMutex);
  forbiddenUnderCapture("mgpuEventSynchronize");
}
void mgpuEventRecord(void *, void *) {}
void mgpuStreamWaitEvent(void *, void *) {}

void mgpuMemset32(void *dst, unsigned value, size_t count, void *) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    forbiddenUnderCapture("mgpuMemset32");
  }
  auto *p = static_cast<uint32_t *>(dst);
  for (size_t i = 0; i < count; ++i)
    p[i] = value;
}

void *mgpuStreamCreate() {
  std::lock_guard<std::mutex> lock(streamMutex);
  touchDriver("mgpuStreamCreate");
  return new FakeStream{nextStream++};
}
void mgpuStreamDestroy(void *stream) {
  std::lock_guard<std::mutex> lock(streamMutex);
  if (stream && streamOf(stream).capturing)
    fail("mgpuStreamDestroy of a capturing stream");
  delete static_cast<FakeStream *>(stream);
}
void mgpuStreamSynchronize(void *) {
  std::lock_guard<std::mutex> lock(streamMutex);
  forbiddenUnderCapture("mgpuStreamSynchronize");
}

int kpoolCudaPrepare(void *) {
  std::lock_guard<std::mutex> lock(streamMutex);
  forbiddenUnderCapture("kpoolCudaPrepare (a module load)");
  if (!modulesLoaded) {
    modulesLoaded = true;
    ++moduleLoads;
  }
  return 0;
}

void *mgpuMemAlloc(uint64_t sizeBytes, void *, bool) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    forbiddenUnderCapture("mgpuMemAlloc");
  }
  if (sizeBytes == 0)
    return nullptr;
  char *p = static_cast<char *>(std::malloc(sizeBytes));
  std::memset(p, 0xcd, sizeBytes); // device memory starts undefined
  std::lock_guard<std::mutex> lock(mutex);
  allocations()[p] = sizeBytes;
  return p;
}

void mgpuMemFree(void *ptr, void *) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    forbiddenUnderCapture("mgpuMemFree");
  }
  if (!ptr)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  allocations().erase(static_cast<const char *>(ptr));
  std::free(ptr);
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *) {
  {
    std::lock_guard<std::mutex> lock(streamMutex);
    forbiddenUnderCapture("mgpuMemcpy");
  }
  std::memmove(dst, src, sizeBytes);
}

//===----------------------------------------------------------------------===//
// The emulation's state, for tests (C, so that Python reaches it with ctypes)
//===----------------------------------------------------------------------===//

/// 1: this libkpool_cuda_runtime.so is the mgpu-level emulation.
int kpoolEmuIsEmulated(void) { return 1; }
/// GPU kernel launches run so far (eager, and those of graphs launched).
int64_t kpoolEmuKernelLaunches(void) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  return gpuLaunches;
}
/// Launches of kernels whose name contains `part`.
int64_t kpoolEmuKernelLaunchesOf(const char *part) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  int64_t n = 0;
  for (auto &[name, count] : launchesByKernel())
    if (name.find(part) != std::string::npos)
      n += count;
  return n;
}
/// The last kernel run.
const char *kpoolEmuLastKernel(void) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  static thread_local std::string copy;
  copy = lastKernel();
  return copy.c_str();
}
/// GPU modules registered (by host code's constructors) and, of those,
/// with a cubin.
int64_t kpoolEmuModulesRegistered(void) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  return modulesRegistered;
}
int64_t kpoolEmuCubinModules(void) {
  std::lock_guard<std::mutex> lock(moduleMutex);
  return cubinModules;
}
/// Module loads (once per process: prepare or the first launch).
int64_t kpoolEmuModuleLoads(void) { return gpu::moduleLoadCount(); }
/// Launches run on `stream` (eager and from graphs).
int64_t kpoolEmuStreamLaunches(void *stream) {
  return gpu::launchCount(stream);
}
/// Stream capture and graphs (gpu::beginCapture & co.).
void kpoolEmuBeginCapture(void *stream) { gpu::beginCapture(stream); }
void *kpoolEmuEndCapture(void *stream) {
  return new std::shared_ptr<gpu::Graph>(gpu::endCapture(stream));
}
void kpoolEmuLaunchGraph(void *graph, void *stream) {
  gpu::launchGraph(**static_cast<std::shared_ptr<gpu::Graph> *>(graph), stream);
}
int64_t kpoolEmuGraphLaunches(void *graph) {
  return gpu::graphLaunches(
      **static_cast<std::shared_ptr<gpu::Graph> *>(graph));
}
void kpoolEmuGraphDestroy(void *graph) {
  delete static_cast<std::shared_ptr<gpu::Graph> *>(graph);
}

} // extern "C"
