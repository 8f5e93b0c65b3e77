//===- GpuSupport.cpp - shared code of the GPU executables ----------------===//

#include "GPU/GpuSupport.h"

#include "Reference/Float.h"
#include "Support/ArgsByName.h"
#include "kpool/Runtime/PoolStore.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <cuda.h> // the driver check opens it with dlopen; graphs link it
#include <dlfcn.h>

using namespace kpool;
using namespace kpool::gpu;

//===----------------------------------------------------------------------===//
// The driver check
//===----------------------------------------------------------------------===//

namespace {

std::string &description() {
  static std::string s;
  return s;
}

/// The emulated driver's introspection calls (test/lib/CudaEmu/
/// Introspection.h), null on a real driver.
struct Emulated {
  CUresult (*streamLaunches)(CUstream, int64_t *) = nullptr;
  CUresult (*streamId)(CUstream, int64_t *) = nullptr;
  CUresult (*moduleLoads)(int64_t *, int64_t *, int64_t *) = nullptr;
  CUresult (*launches)(int64_t *, int64_t *, int64_t *) = nullptr;
  CUresult (*kernelLaunches)(const char *, int64_t *) = nullptr;
} emulated;

const char *resultName(int result) {
  switch (result) {
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY: the CUDA toolkit's stub libcuda.so was "
           "loaded, not a driver";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE: the driver sees no CUDA device";
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: driver and kernel module "
           "versions differ";
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_INVALID_DEVICE:
    return "CUDA_ERROR_INVALID_DEVICE";
  default:
    return "see cuda.h";
  }
}

[[noreturn]] void noDevice(const std::string &why) {
  std::fprintf(stderr,
               "%s: no usable CUDA device: %s\n%s: these are the GPU "
               "executables of kpool; they need an NVIDIA GPU (sm_90) and its "
               "driver (libcuda.so.1)\n",
               program_invocation_short_name, why.c_str(),
               program_invocation_short_name);
  std::fflush(stderr);
  std::_Exit(2);
}

/// Runs on the first deviceDescription(), before the first kernel call
/// (whose first launch loads the GPU modules and aborts when the driver
/// fails): a missing device is reported there, once, and plainly. (Without
/// libcuda.so.1 at all the dynamic loader already stops the program, naming
/// the library.) Not a constructor: nothing touches CUDA before main.
void checkDriver() {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    noDevice(std::string("cannot load libcuda.so.1: ") + dlerror());
  auto sym = [&](const char *name) {
    void *f = dlsym(lib, name);
    if (!f)
      noDevice(std::string("libcuda.so.1 has no ") + name);
    return f;
  };
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(sym("cuInit"));
  auto count = reinterpret_cast<CUresult (*)(int *)>(sym("cuDeviceGetCount"));
  auto get =
      reinterpret_cast<CUresult (*)(CUdevice *, int)>(sym("cuDeviceGet"));
  auto name = reinterpret_cast<CUresult (*)(char *, int, CUdevice)>(
      sym("cuDeviceGetName"));
  auto attr =
      reinterpret_cast<CUresult (*)(int *, CUdevice_attribute, CUdevice)>(
          sym("cuDeviceGetAttribute"));
  auto version =
      reinterpret_cast<CUresult (*)(int *)>(sym("cuDriverGetVersion"));
  emulated.streamLaunches = reinterpret_cast<decltype(emulated.streamLaunches)>(
      dlsym(lib, "kpoolEmuStreamLaunches"));
  emulated.streamId = reinterpret_cast<decltype(emulated.streamId)>(
      dlsym(lib, "kpoolEmuStreamId"));
  emulated.moduleLoads = reinterpret_cast<decltype(emulated.moduleLoads)>(
      dlsym(lib, "kpoolEmuModuleLoads"));
  emulated.launches = reinterpret_cast<decltype(emulated.launches)>(
      dlsym(lib, "kpoolEmuLaunches"));
  emulated.kernelLaunches = reinterpret_cast<decltype(emulated.kernelLaunches)>(
      dlsym(lib, "kpoolEmuKernelLaunches"));
  auto check = [](CUresult r, const char *call) {
    if (r != CUDA_SUCCESS)
      noDevice(std::string(call) + " failed with " + std::to_string(r) + " (" +
               resultName(r) + ")");
  };
  check(init(0), "cuInit");
  int devices = 0;
  check(count(&devices), "cuDeviceGetCount");
  if (devices < 1)
    noDevice("the driver reports no CUDA device");
  CUdevice device;
  check(get(&device, 0), "cuDeviceGet");
  char buf[256] = {0};
  check(name(buf, sizeof(buf) - 1, device), "cuDeviceGetName");
  int major = 0, minor = 0, sms = 0, driver = 0;
  check(attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute");
  check(attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute");
  check(attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "cuDeviceGetAttribute");
  check(version(&driver), "cuDriverGetVersion");
  description() = std::string(buf) + " (sm_" + std::to_string(major) +
                  std::to_string(minor) + "), " + std::to_string(sms) +
                  " SMs, driver " + std::to_string(driver / 1000) + "." +
                  std::to_string(driver % 1000 / 10);
  // The kernels are compiled for sm_90 only.
  if (major != 9 || minor != 0)
    noDevice("device 0 is " + description() +
             "; the kernels are compiled for sm_90");
}

} // namespace

const std::string &gpu::deviceDescription() {
  static bool checked = (checkDriver(), true);
  (void)checked;
  return description();
}

bool gpu::emulatedDriver() {
  deviceDescription();
  return emulated.streamLaunches && emulated.streamId && emulated.moduleLoads;
}

int64_t gpu::launchCount(void *stream) {
  int64_t n = -1;
  if (emulatedDriver() && emulated.streamLaunches(static_cast<CUstream>(stream),
                                                  &n) != CUDA_SUCCESS)
    n = -1;
  return n;
}

int64_t gpu::streamId(void *stream) {
  int64_t id = -1;
  if (emulatedDriver() &&
      emulated.streamId(static_cast<CUstream>(stream), &id) != CUDA_SUCCESS)
    id = -1;
  return id;
}

bool gpu::moduleLoads(int64_t &loads, int64_t &modules, int64_t &mostOfOne) {
  return emulatedDriver() &&
         emulated.moduleLoads(&loads, &modules, &mostOfOne) == CUDA_SUCCESS;
}

bool gpu::emulatedLaunches(int64_t &launches, int64_t &withFindings,
                           int64_t &failed) {
  return emulatedDriver() && emulated.launches &&
         emulated.launches(&launches, &withFindings, &failed) == CUDA_SUCCESS;
}

int64_t gpu::kernelLaunches(const std::string &part) {
  int64_t n = -1;
  if (!emulatedDriver() || !emulated.kernelLaunches ||
      emulated.kernelLaunches(part.c_str(), &n) != CUDA_SUCCESS)
    n = -1;
  return n;
}

namespace {
uint64_t digest = 0xcbf29ce484222325ull;
} // namespace

uint64_t gpu::downloadDigest() { return digest; }

//===----------------------------------------------------------------------===//
// Streams and graphs on the device
//===----------------------------------------------------------------------===//

namespace {
void cudaCheck(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return;
  const char *name = nullptr;
  cuGetErrorName(result, &name);
  std::fprintf(stderr, "%s: %s failed: %s\n", program_invocation_short_name,
               call, name ? name : "unknown CUDA error");
  std::fflush(stderr);
  std::abort();
}

/// Makes the primary context of device 0 -- the one kpool's CUDA layer
/// uses -- current for the lifetime of the object: the driver calls below
/// that create an event or instantiate a graph need a current context,
/// which kpool_cuda_runtime only holds during its own calls.
class CurrentContext {
public:
  CurrentContext() {
    deviceDescription();
    static CUcontext primary = [] {
      CUdevice device;
      CUcontext context = nullptr;
      cudaCheck(cuDeviceGet(&device, 0), "cuDeviceGet");
      cudaCheck(cuDevicePrimaryCtxRetain(&context, device),
                "cuDevicePrimaryCtxRetain");
      return context;
    }();
    cudaCheck(cuCtxPushCurrent(primary), "cuCtxPushCurrent");
  }
  ~CurrentContext() {
    CUcontext popped;
    cuCtxPopCurrent(&popped);
  }
};
} // namespace

struct kpool::gpu::Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  int64_t kernels = 0;
  ~Graph() {
    CurrentContext current;
    if (exec)
      cuGraphExecDestroy(exec);
    if (graph)
      cuGraphDestroy(graph);
  }
};

void gpu::beginCapture(void *stream) {
  CurrentContext current;
  cudaCheck(cuStreamBeginCapture(static_cast<CUstream>(stream),
                                 CU_STREAM_CAPTURE_MODE_GLOBAL),
            "cuStreamBeginCapture");
}

std::shared_ptr<Graph> gpu::endCapture(void *stream) {
  CurrentContext current;
  auto g = std::make_shared<Graph>();
  cudaCheck(cuStreamEndCapture(static_cast<CUstream>(stream), &g->graph),
            "cuStreamEndCapture");
  size_t nodes = 0;
  cudaCheck(cuGraphGetNodes(g->graph, nullptr, &nodes), "cuGraphGetNodes");
  std::vector<CUgraphNode> all(nodes);
  if (nodes)
    cudaCheck(cuGraphGetNodes(g->graph, all.data(), &nodes), "cuGraphGetNodes");
  for (CUgraphNode n : all) {
    CUgraphNodeType type;
    cudaCheck(cuGraphNodeGetType(n, &type), "cuGraphNodeGetType");
    g->kernels += type == CU_GRAPH_NODE_TYPE_KERNEL;
  }
  cudaCheck(cuGraphInstantiate(&g->exec, g->graph, 0), "cuGraphInstantiate");
  return g;
}

void gpu::launchGraph(const Graph &graph, void *stream) {
  CurrentContext current;
  cudaCheck(cuGraphLaunch(graph.exec, static_cast<CUstream>(stream)),
            "cuGraphLaunch");
}

int64_t gpu::graphLaunches(const Graph &graph) { return graph.kernels; }

StreamTimer::StreamTimer(void *stream) : stream(stream) {
  CurrentContext current;
  CUevent a, b;
  cudaCheck(cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  cudaCheck(cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  begin = a;
  end = b;
}
StreamTimer::~StreamTimer() {
  CurrentContext current;
  cuEventDestroy(static_cast<CUevent>(begin));
  cuEventDestroy(static_cast<CUevent>(end));
}
void StreamTimer::start() {
  CurrentContext current;
  cudaCheck(cuEventRecord(static_cast<CUevent>(begin),
                          static_cast<CUstream>(stream)),
            "cuEventRecord");
}
double StreamTimer::stop() {
  CurrentContext current;
  cudaCheck(cuEventRecord(static_cast<CUevent>(end),
                          static_cast<CUstream>(stream)),
            "cuEventRecord");
  cudaCheck(cuEventSynchronize(static_cast<CUevent>(end)),
            "cuEventSynchronize");
  float ms = 0;
  cudaCheck(cuEventElapsedTime(&ms, static_cast<CUevent>(begin),
                               static_cast<CUevent>(end)),
            "cuEventElapsedTime");
  return ms;
}

//===----------------------------------------------------------------------===//
// Elements
//===----------------------------------------------------------------------===//

double gpu::loadValue(ElementType type, const void *p) {
  return reference::fromBits(type, loadBits(type, p));
}

std::vector<uint8_t> gpu::randomElements(ElementType type, int64_t n,
                                         std::mt19937 &rng, float sigma) {
  std::normal_distribution<float> dist(0.f, sigma);
  int64_t es = elementTypeSize(type);
  std::vector<uint8_t> v(n * es);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = reference::roundToBits(type, dist(rng));
    std::memcpy(&v[i * es], &bits, es);
  }
  return v;
}

double gpu::toleranceUlp(ElementType type) { return type == KPOOL_F32 ? 8 : 2; }

std::vector<uint8_t> gpu::bytesOf(const std::vector<uint32_t> &values) {
  std::vector<uint8_t> b(values.size() * 4);
  if (!b.empty())
    std::memcpy(b.data(), values.data(), b.size());
  return b;
}

std::vector<uint8_t> gpu::bytesOf(const std::vector<float> &values) {
  std::vector<uint8_t> b(values.size() * 4);
  if (!b.empty())
    std::memcpy(b.data(), values.data(), b.size());
  return b;
}

std::vector<uint32_t> gpu::wordsOf(const std::vector<uint8_t> &bytes) {
  std::vector<uint32_t> w(bytes.size() / 4);
  if (!w.empty())
    std::memcpy(w.data(), bytes.data(), w.size() * 4);
  return w;
}

double gpu::maxUlpError(ElementType type, int64_t D,
                        const std::vector<uint8_t> &got,
                        const std::vector<uint8_t> &want,
                        const std::vector<double> &scales) {
  int64_t es = elementTypeSize(type);
  int64_t n = std::min<int64_t>(got.size(), want.size()) / es;
  double worst = got.size() == want.size() ? 0 : INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (loadBits(type, &got[i * es]) == loadBits(type, &want[i * es]))
      continue;
    double a = loadValue(type, &got[i * es]),
           b = loadValue(type, &want[i * es]);
    double scale = i < int64_t(scales.size()) ? scales[i] : 0;
    double err = std::fabs(a - b) / ulpOf(type, scale);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  (void)D;
  return worst;
}

void gpu::appendScales(ElementType type, int64_t D,
                       const std::vector<const uint8_t *> &members,
                       std::vector<double> &scales) {
  int64_t es = elementTypeSize(type);
  for (int64_t d = 0; d < D; ++d) {
    double s = 0;
    for (const uint8_t *m : members)
      s = std::max(s, std::fabs(loadValue(type, m + d * es)));
    scales.push_back(s);
  }
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

Tensor::Tensor(int64_t elementSize, std::vector<int64_t> sizes,
               std::vector<int64_t> strides, int64_t guard)
    : esize(elementSize), guard(guard), shape(std::move(sizes)),
      stride(std::move(strides)) {
  if (stride.empty()) {
    stride.assign(shape.size(), 1);
    for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
      stride[i] = stride[i + 1] * shape[i + 1];
  }
  span = elements() > 0 ? 1 : 0;
  for (size_t i = 0; i < shape.size() && span; ++i)
    span += (shape[i] - 1) * stride[i];
  image.assign((2 * guard + span) * esize, 0);
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> Tensor::elementOffsets() const {
  std::vector<int64_t> offsets;
  int64_t n = elements();
  offsets.reserve(n);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = guard;
    for (size_t i = 0; i < shape.size(); ++i)
      off += index[i] * stride[i];
    offsets.push_back(off);
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
      if (++index[i] < shape[i])
        break;
      index[i] = 0;
    }
  }
  return offsets;
}

void Tensor::fill(uint8_t byte, const std::vector<uint8_t> &dense) {
  std::fill(image.begin(), image.end(), byte);
  if (dense.empty())
    return;
  std::vector<int64_t> offsets = elementOffsets();
  for (size_t e = 0; e < offsets.size(); ++e)
    std::memcpy(&image[offsets[e] * esize], &dense[e * esize], esize);
}

void Tensor::fillRandom(std::mt19937 &rng, const std::vector<uint8_t> &dense) {
  for (uint8_t &b : image)
    b = uint8_t(rng());
  if (dense.empty())
    return;
  std::vector<int64_t> offsets = elementOffsets();
  for (size_t e = 0; e < offsets.size(); ++e)
    std::memcpy(&image[offsets[e] * esize], &dense[e * esize], esize);
}

std::vector<uint8_t> Tensor::dense(const std::vector<uint8_t> *img) const {
  const std::vector<uint8_t> &from = img ? *img : image;
  std::vector<int64_t> offsets = elementOffsets();
  std::vector<uint8_t> out(offsets.size() * esize);
  for (size_t e = 0; e < offsets.size(); ++e)
    std::memcpy(&out[e * esize], &from[offsets[e] * esize], esize);
  return out;
}

bool Tensor::outsideUnchanged(const std::vector<uint8_t> &before,
                              const std::vector<uint8_t> &img) const {
  if (before.size() != img.size())
    return false;
  std::vector<bool> inside(before.size() / esize, false);
  for (int64_t off : elementOffsets())
    inside[off] = true;
  for (size_t e = 0; e < inside.size(); ++e)
    if (!inside[e] &&
        std::memcmp(&before[e * esize], &img[e * esize], esize) != 0)
      return false;
  return true;
}

View Tensor::viewAt(void *base) const {
  View v{};
  v.data = base ? static_cast<uint8_t *>(base) + guard * esize : nullptr;
  v.rank = int64_t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    v.sizes[i] = shape[i];
    v.strides[i] = stride[i];
  }
  return v;
}

View Tensor::hostView() {
  return viewAt(image.empty() ? nullptr : image.data());
}

View Tensor::deviceView() const {
  return viewAt(device ? device->data() : nullptr);
}

void Tensor::upload(void *stream) {
  if (!device)
    device = std::make_unique<cuda::DeviceBuffer>(image.size());
  device->upload(image.data(), stream);
}

std::vector<uint8_t> Tensor::download(void *stream) const {
  std::vector<uint8_t> img(image.size());
  if (device)
    device->download(img.data(), stream);
  for (uint8_t b : img)
    digest = (digest ^ b) * 0x100000001b3ull;
  return img;
}

//===----------------------------------------------------------------------===//
// DeviceSchedule
//===----------------------------------------------------------------------===//

std::vector<Sequence> gpu::randomSequences(ElementType type, int64_t D,
                                           const std::vector<uint32_t> &slots,
                                           const std::vector<int64_t> &lengths,
                                           std::mt19937 &rng) {
  std::vector<Sequence> seqs;
  for (size_t r = 0; r < slots.size(); ++r) {
    Sequence s;
    s.slot = slots[r];
    s.length = lengths[r];
    s.keys = randomElements(type, s.length * D, rng, 1.f);
    s.gates = randomElements(type, s.length * D, rng, 4.f);
    seqs.push_back(std::move(s));
  }
  return seqs;
}

DeviceSchedule::DeviceSchedule(const KernelSet &kernels,
                               const std::vector<Sequence> &seqs,
                               int64_t maxSlots, const std::vector<float> &ape,
                               int64_t ringWindow, void *stream)
    : kernels(kernels), seqs(seqs), stream(stream), config(kernels.config()),
      esize(elementTypeSize(config.elementType)), ape(ape),
      window(ringWindow > 0 ? ringWindow : config.kpool),
      apeT(4, {config.kpool, config.headDim}),
      ring(esize, {maxSlots, 2, window, config.headDim}),
      seen(seqs.size(), 0), produced(seqs.size()) {
  apeT.fill(0, bytesOf(ape));
  apeT.upload(stream);
  ring.fill(0);
  ring.upload(stream);
  for (size_t r = 0; r < seqs.size(); ++r)
    produced[r].resize(seqs[r].length / config.kpool);
}

Status DeviceSchedule::step(const std::vector<int64_t> &counts, int64_t *pools,
                            int64_t *closedFromRing,
                            const std::vector<int64_t> *accepted) {
  const int64_t D = config.headDim, K = config.kpool;
  std::vector<uint32_t> iro = {0}, cache, slots;
  std::vector<size_t> members; // request of each batch row
  std::vector<uint8_t> k, g;
  for (size_t r = 0; r < seqs.size(); ++r) {
    if (counts[r] < 0)
      continue;
    const Sequence &s = seqs[r];
    int64_t real = counts[r];
    if (accepted && (*accepted)[r] >= 0)
      real = std::min(real, (*accepted)[r]);
    if (seen[r] + real > s.length)
      return Status::error("request " + std::to_string(r) + " has only " +
                           std::to_string(s.length) + " tokens");
    auto rows = [&](const std::vector<uint8_t> &v) {
      return std::make_pair(v.begin() + seen[r] * D * esize,
                            v.begin() + (seen[r] + real) * D * esize);
    };
    auto [k0, k1] = rows(s.keys);
    auto [g0, g1] = rows(s.gates);
    k.insert(k.end(), k0, k1);
    g.insert(g.end(), g0, g1);
    // Rejected drafts: junk the accepted sequence never has.
    std::vector<uint8_t> junkK = randomElements(
        config.elementType, (counts[r] - real) * D, junk, 1.0);
    std::vector<uint8_t> junkG = randomElements(
        config.elementType, (counts[r] - real) * D, junk, 4.0);
    k.insert(k.end(), junkK.begin(), junkK.end());
    g.insert(g.end(), junkG.begin(), junkG.end());
    int64_t reach = (seen[r] + counts[r]) / K;
    if (reach > int64_t(produced[r].size()))
      produced[r].resize(reach);
    iro.push_back(iro.back() + uint32_t(counts[r]));
    cache.push_back(uint32_t(seen[r]));
    slots.push_back(s.slot);
    members.push_back(r);
  }
  const int64_t B = int64_t(members.size()), rows = iro.back();
  // Capacity-shaped: a request's pools made only of this call's tokens are
  // at most its tokens / kpool, so no call needs pool_row_offsets back.
  Tensor kT(esize, {rows, D}), gT(esize, {rows, D}), iroT(4, {B + 1}),
      cacheT(4, {B}), slotT(4, {B}), proT(4, {B + 1}), closedT(4, {B}),
      closedRows(esize, {B, D}), pooledT(esize, {rows / K, D});
  kT.fill(0, k);
  gT.fill(0, g);
  iroT.fill(0, bytesOf(iro));
  cacheT.fill(0, bytesOf(cache));
  slotT.fill(0, bytesOf(slots));
  // The host copies are validated before they go up (a GPU call reads no
  // metadata back); compress's pool_row_offsets are the ones pool_offsets
  // computes, checked here against their host count.
  std::vector<uint32_t> proHost(B + 1, 0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t c = cache[b], n = iro[b + 1] - iro[b];
    int64_t first = (c + K - 1) / K, last = (c + n) / K;
    proHost[b + 1] = proHost[b] + uint32_t(last > first ? last - first : 0);
  }
  Tensor proHostT(4, {B + 1});
  proHostT.fill(0, bytesOf(proHost));
  // Each op's arguments from the call's operands by their table names, on
  // the host copies (to check) or on the device; ring_close's `pooled` is
  // the step's `closed`, and compress checks the host count of its
  // pool_row_offsets.
  auto args = [&](auto proto, bool host) {
    using A = decltype(proto);
    auto v = [&](Tensor &t) { return host ? t.hostView() : t.deviceView(); };
    A a = test::argsByName<A>({{"closed", v(closedRows)},
                               {"closed_pool", v(closedT)},
                               {"pool_row_offsets", v(proT)},
                               {"pooled", v(pooledT)},
                               {"tail", v(ring)},
                               {"k", v(kT)},
                               {"gate", v(gT)},
                               {"ape", v(apeT)},
                               {"input_row_offsets", v(iroT)},
                               {"cache_lengths", v(cacheT)},
                               {"slot_idx", v(slotT)}},
                              int32_t(B));
    if (std::is_same_v<A, RingCloseArgs>)
      a = test::with(a, {{"pooled", v(closedRows)}});
    if (std::is_same_v<A, CompressArgs> && host)
      a = test::with(a, {{"pool_row_offsets", proHostT.hostView()}});
    return a;
  };
  auto stepArgs = [&](bool host) { return args(StepArgs{}, host); };
  auto ringCloseArgs = [&](bool host) { return args(RingCloseArgs{}, host); };
  auto poolOffsetsArgs = [&](bool host) {
    return args(PoolOffsetsArgs{}, host);
  };
  auto compressArgs = [&](bool host) { return args(CompressArgs{}, host); };
  auto seedTailArgs = [&](bool host) { return args(SeedTailArgs{}, host); };
  Status s;
  if (fused)
    s = kernels.check(stepArgs(true));
  if (!fused)
    s = kernels.check(ringCloseArgs(true));
  if (s.ok() && !fused)
    s = kernels.check(poolOffsetsArgs(true));
  if (s.ok() && !fused)
    s = kernels.check(compressArgs(true));
  if (s.ok() && !fused)
    s = kernels.check(seedTailArgs(true));
  if (!s.ok())
    return s;
  for (Tensor *t : {&kT, &gT, &iroT, &cacheT, &slotT, &proT, &closedT,
                    &closedRows, &pooledT})
    t->upload(stream);

  // ring_close reads the ring before seed_tail overwrites it. The four
  // calls only enqueue on the stream.
  Stream on(stream);
  if (fused)
    s = kernels.step(stepArgs(false), on);
  if (!s.ok())
    return s;
  if (!fused) {
    s = kernels.ringClose(ringCloseArgs(false), on);
    if (!s.ok())
      return s;
    s = kernels.poolOffsets(poolOffsetsArgs(false), on);
    if (!s.ok())
      return s;
    s = kernels.compress(compressArgs(false), on);
    if (!s.ok())
      return s;
    s = kernels.seedTail(seedTailArgs(false), on);
    if (!s.ok())
      return s;
  }

  std::vector<uint8_t> proImage = proT.download(stream);
  std::vector<uint32_t> pro = wordsOf(proT.dense(&proImage));
  std::vector<uint32_t> closed = wordsOf(closedT.download(stream));
  std::vector<uint8_t> closedBytes = closedRows.download(stream),
                       pooled = pooledT.download(stream);
  int64_t made = 0, fromRing = 0;
  auto record = [&](size_t r, int64_t pool, const uint8_t *row, bool byRing) {
    ++made;
    ++totalProduced;
    if (pool < 0 || pool >= int64_t(produced[r].size())) {
      std::printf("request %zu: pool %lld produced, which its %lld tokens do "
                  "not have\n",
                  r, (long long)pool, (long long)seqs[r].length);
      return;
    }
    Produced &p = produced[r][pool];
    p.bytes.assign(row, row + D * esize);
    p.fromRing = byRing;
    ++p.times;
  };
  for (int64_t b = 0; b < B; ++b) {
    size_t r = members[b];
    if (int32_t(closed[b]) >= 0) {
      record(r, int32_t(closed[b]), &closedBytes[b * D * esize], true);
      ++fromRing;
    }
    int64_t first = (int64_t(cache[b]) + K - 1) / K;
    for (uint32_t row = pro[b]; row < pro[b + 1]; ++row)
      record(r, first + (row - pro[b]), &pooled[row * D * esize], false);
    int64_t begin = seen[r], end = begin + counts[r];
    seen[r] = end;
    if (!accepted || (*accepted)[r] < 0)
      continue;
    // Roll back to the accepted length: forget the pools at and after the
    // first rejected position; later calls produce them again.
    int64_t length = begin + (*accepted)[r];
    if (!ringHoldsPending(K, window, length, end))
      return Status::error(
          "request " + std::to_string(r) + ": a ring window of " +
          std::to_string(window) + " cannot roll back to length " +
          std::to_string(length) + " after a call that ended at " +
          std::to_string(end));
    seen[r] = length;
    for (int64_t p = length / K; p < int64_t(produced[r].size()); ++p) {
      Produced &forgotten = produced[r][p];
      totalProduced -= forgotten.times;
      if (forgotten.fromRing)
        totalFromRing -= forgotten.times;
      forgotten = Produced();
    }
  }
  totalFromRing += fromRing;
  if (pools)
    *pools = made;
  if (closedFromRing)
    *closedFromRing = fromRing;
  return Status();
}

DeviceSchedule::Report
DeviceSchedule::checkAgainstOneShot(const std::string &prefix) const {
  const int64_t D = config.headDim, K = config.kpool;
  const reference::Geometry geometry{config.elementType, D, K,
                                     kSubnormalWeights};
  Report report;
  report.produced = totalProduced;
  report.fromRing = totalFromRing;
  for (size_t r = 0; r < seqs.size(); ++r) {
    const Sequence &seq = seqs[r];
    int64_t n = seen[r], pools = n / K;
    Tensor kT(esize, {n, D}), gT(esize, {n, D}), iroT(4, {2}), cacheT(4, {1}),
        proT(4, {2}), oneShot(esize, {pools, D});
    Tensor apeHost(4, {K, D}), ref(esize, {pools, D});
    kT.fill(0, std::vector<uint8_t>(seq.keys.begin(),
                                    seq.keys.begin() + n * D * esize));
    gT.fill(0, std::vector<uint8_t>(seq.gates.begin(),
                                    seq.gates.begin() + n * D * esize));
    iroT.fill(0, bytesOf(std::vector<uint32_t>{0, uint32_t(n)}));
    cacheT.fill(0, bytesOf(std::vector<uint32_t>{0}));
    proT.fill(0, bytesOf(std::vector<uint32_t>{0, uint32_t(pools)}));
    apeHost.fill(0, bytesOf(ape));
    for (Tensor *t : {&kT, &gT, &iroT, &cacheT, &proT, &oneShot})
      t->upload(stream);
    CompressArgs c{};
    c.pooled = oneShot.deviceView();
    c.k = kT.deviceView();
    c.gate = gT.deviceView();
    c.ape = apeT.deviceView();
    c.input_row_offsets = iroT.deviceView();
    c.pool_row_offsets = proT.deviceView();
    c.cache_lengths = cacheT.deviceView();
    Status s = kernels.compress(c, Stream(stream));
    if (!s.ok()) {
      std::printf("%sone-shot compress of request %zu: %s\n", prefix.c_str(), r,
                  s.message().c_str());
      report.differ += pools;
      continue;
    }
    std::vector<uint8_t> wholeImage = oneShot.download(stream);
    std::vector<uint8_t> whole = oneShot.dense(&wholeImage);
    reference::compress(geometry, ref.hostView(), kT.hostView(), gT.hostView(),
                        apeHost.hostView(), iroT.hostView(), proT.hostView(),
                        cacheT.hostView());
    std::vector<uint8_t> want = ref.dense();
    for (int64_t p = 0; p < int64_t(produced[r].size()); ++p) {
      const Produced &got = produced[r][p];
      if (p >= pools) {
        if (got.times)
          std::printf("%srequest %zu (slot %u): pool %lld produced before "
                      "its tokens arrived\n",
                      prefix.c_str(), r, seq.slot, (long long)p);
        report.duplicated += got.times;
        continue;
      }
      if (got.times == 0) {
        ++report.missing;
        std::printf("%srequest %zu (slot %u): pool %lld never produced\n",
                    prefix.c_str(), r, seq.slot, (long long)p);
        continue;
      }
      ++report.checked;
      if (got.times > 1) {
        report.duplicated += got.times - 1;
        std::printf("%srequest %zu (slot %u): pool %lld produced %d times\n",
                    prefix.c_str(), r, seq.slot, (long long)p, got.times);
      }
      const uint8_t *row = &whole[p * D * esize];
      if (std::memcmp(got.bytes.data(), row, D * esize) != 0) {
        ++report.differ;
        report.ringDiffer += got.fromRing;
        std::printf("%srequest %zu (slot %u): pool %lld (%s) differs from "
                    "one-shot compression\n",
                    prefix.c_str(), r, seq.slot, (long long)p,
                    got.fromRing ? "ring_close" : "compress");
      }
      std::vector<const uint8_t *> memberRows;
      for (int64_t m = 0; m < K; ++m)
        memberRows.push_back(&seq.keys[(p * K + m) * D * esize]);
      std::vector<double> scales;
      appendScales(config.elementType, D, memberRows, scales);
      report.maxUlp = std::max(
          report.maxUlp,
          maxUlpError(config.elementType, D, got.bytes,
                      std::vector<uint8_t>(want.begin() + p * D * esize,
                                           want.begin() + (p + 1) * D * esize),
                      scales));
    }
  }
  return report;
}
