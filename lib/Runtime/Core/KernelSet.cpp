//===- KernelSet.cpp - kpool kernels on caller buffers --------------------===//
//
// The part of the runtime that needs no MLIR: operand validation, the calls
// into compiled kernels, and the registry and cache of kernel sets, with
// the compilers registered per target.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelSet.h"

#include "KernelObjects.h"
#include "Validation.h"

#include <cctype>
#include <map>
#include <mutex>
#include <tuple>

using namespace kpool;
using namespace kpool::detail;

View kpool::denseView(void *data, std::vector<int64_t> sizes) {
  View view{};
  view.data = data;
  view.rank = static_cast<int64_t>(sizes.size());
  int64_t stride = 1;
  for (int64_t i = view.rank - 1; i >= 0; --i) {
    view.sizes[i] = sizes[i];
    view.strides[i] = stride;
    stride *= sizes[i];
  }
  return view;
}

namespace kpool {

/// A configuration and its kernels.
class KernelSetImpl {
public:
  KernelConfig config;
  KernelBackend backend;

  Validator validator(const char *op) const {
    return Validator(op, {config.headDim, config.kpool});
  }

  /// How a call handles metadata: whether to read and check it, or the
  /// error a Check on device-resident operands is.
  Status metadataChecks(Validator &v, Validation validation,
                        bool &check) const {
    check = validation == Validation::Check ||
            (validation == Validation::Auto && !backend.deviceResident);
    if (check && backend.deviceResident)
      return v.error(
          "validation was requested, but this kernel set's metadata is "
          "device memory and a GPU call never reads it back (no host round "
          "trip): check host copies with KernelSet::check" +
          std::string(1, char(std::toupper(v.opName()[0]))) +
          camelTail(v.opName()) +
          " before uploading them, and call with Validation::Auto or Trust");
    return Status();
  }

  static std::string camelTail(const char *op) {
    std::string out;
    for (const char *c = op + 1; *c; ++c)
      if (*c == '_' && c[1])
        out += char(std::toupper(*++c));
      else
        out += *c;
    return out;
  }
};

} // namespace kpool

KernelSet::KernelSet(const KernelConfig &config, KernelBackend backend)
    : impl(new KernelSetImpl{config, std::move(backend)}) {}
KernelSet::~KernelSet() = default;

const KernelConfig &KernelSet::config() const { return impl->config; }

bool KernelSet::deviceResident() const { return impl->backend.deviceResident; }

Status KernelSet::prepare(Stream stream) const {
  if (!impl->backend.prepare)
    return Status();
  return impl->backend.prepare(stream.handle);
}

namespace {

/// Configurations that compile to the same kernels share a key: the CPU
/// code options mean nothing for the CUDA target.
using Key = std::tuple<int, int64_t, int64_t, int, bool, int64_t, bool, int>;
Key keyOf(const KernelConfig &c) {
  bool cpu = c.target == Target::CPU;
  bool all = !c.poolOffsetsOnly;
  bool cache = all && c.cache.entry != CacheEntry::None;
  int format = cache ? 1 + static_cast<int>(c.cache.entry) * 4 +
                           static_cast<int>(c.cache.rotate) * 2 +
                           (c.cache.entry == CacheEntry::FP8
                                ? static_cast<int>(c.cache.scale)
                                : 0)
                     : 0;
  return Key{all ? c.elementType : 0,
             all ? c.headDim : 0,
             c.kpool,
             static_cast<int>(c.target),
             cpu && c.openmp,
             cpu && all ? c.vectorSize : 0,
             c.poolOffsetsOnly,
             format};
}

/// One configuration's slot in the cache. Its mutex is held while the
/// configuration compiles, so that only its own callers wait.
struct Entry {
  std::mutex mutex;
  std::shared_ptr<KernelSet> set;
};

// Kernel sets live for the whole process. These maps are never destroyed:
// tearing JIT engines down during static destruction races with LLVM's own
// globals.
std::mutex &registryMutex() {
  static auto *m = new std::mutex;
  return *m;
}
std::map<Key, KernelBackend> &precompiled() {
  static auto *m = new std::map<Key, KernelBackend>;
  return *m;
}
std::map<Key, std::shared_ptr<Entry>> &cache() {
  static auto *m = new std::map<Key, std::shared_ptr<Entry>>;
  return *m;
}
std::map<Target, KernelCompiler> &compilers() {
  static auto *m = new std::map<Target, KernelCompiler>;
  return *m;
}

const char *targetName(Target target) {
  return target == Target::CPU ? "CPU" : "CUDA";
}

/// Why `config` has no kernels, and how to get some: `packs` says what
/// failed to load among the packs the runtime looks for, `jit` why there
/// was no compiler (empty when the caller asked for precompiled kernels).
Status noKernels(const KernelConfig &config, bool compilerAllowed,
                 const std::string &packs, const std::string &jit) {
  std::string what = std::string("no kernels for ") +
                     elementTypeName(config.elementType) + ", head_dim " +
                     std::to_string(config.headDim) + ", kpool " +
                     std::to_string(config.kpool);
  if (config.poolOffsetsOnly)
    what = "no pool_offsets kernel for kpool " + std::to_string(config.kpool);
  bool cuda = config.target == Target::CUDA;
  what += std::string(" on the ") + targetName(config.target) + " target";
  std::string spec = std::string(elementTypeName(config.elementType)) + ":" +
                     std::to_string(config.headDim) + ":" +
                     std::to_string(config.kpool);
  std::string why = ": none are registered (" + detail::loadedPacks() +
                    (packs.empty() ? "" : "; " + packs) + ")";
  if (compilerAllowed)
    why += ", and no compiler is available (" + jit + ")";
  std::string how =
      "; build a kernel pack with `kpool-aot --pack --target=" +
      std::string(cuda ? "cuda" : "cpu") + " --config=" + spec +
      " -o pack.o` (kpool_add_kernel_pack in CMake) and load it "
      "(kpoolLoadKernelPack, kpool.load_kernel_pack, "
      "kpool::loadKernelPack, or $KPOOL_KERNEL_PACKS), or register "
      "kpool-aot kernels (kpool_add_aot_kernels and their registration "
      "function)";
  how += compilerAllowed
             ? ", or install the JIT: libKPoolJit.so next to the runtime "
               "library, with LLVM/MLIR 22 (Debian: libmlir-22), or link "
               "KPoolRuntimeJit and call kpool::registerJitCompiler()"
             : ", or use KernelSet::get, which also JIT-compiles";
  return Status::error(what + why + how);
}

} // namespace

void kpool::registerKernelCompiler(Target target, KernelCompiler compiler) {
  std::lock_guard<std::mutex> lock(registryMutex());
  if (compiler)
    compilers()[target] = std::move(compiler);
  else
    compilers().erase(target);
}

void KernelSet::registerPrecompiled(const KernelConfig &config,
                                    KernelBackend backend) {
  std::lock_guard<std::mutex> lock(registryMutex());
  precompiled()[keyOf(config)] = std::move(backend);
}

namespace {

/// The cached kernel set of `config`, or a new one from its precompiled
/// kernels, or else from its target's registered compiler (when
/// `useCompiler`). Thread-safe; sets `status` on failure and returns null.
std::shared_ptr<KernelSet> getOrCreate(const KernelConfig &config,
                                       Status &status, bool useCompiler) {
  if (config.elementType != KPOOL_BF16 && config.elementType != KPOOL_F16 &&
      config.elementType != KPOOL_F32) {
    status = Status::error("unknown element type " +
                           std::to_string(int(config.elementType)) +
                           " (expected KPOOL_BF16, KPOOL_F16 or KPOOL_F32)");
    return nullptr;
  }
  if (config.headDim < 1 || config.kpool < 1) {
    status = Status::error("head_dim and kpool must be at least 1, got " +
                           std::to_string(config.headDim) + " and " +
                           std::to_string(config.kpool));
    return nullptr;
  }
  if (config.kpool > (int64_t(1) << 32)) {
    status = Status::error("kpool must be at most 2^32 (positions are below "
                           "2^33, so no larger pool can complete), got " +
                           std::to_string(config.kpool));
    return nullptr;
  }
  if (!config.poolOffsetsOnly && config.cache.entry != CacheEntry::None &&
      config.cache.rotate == CacheRotate::Hadamard &&
      (config.headDim & (config.headDim - 1)) != 0) {
    status = Status::error(
        "the pool-cache format rotates by hadamard, which needs a power-of-two "
        "head_dim, got " +
        std::to_string(config.headDim));
    return nullptr;
  }
  int64_t apeElements;
  if (!config.poolOffsetsOnly &&
      (__builtin_mul_overflow(config.kpool, config.headDim, &apeElements) ||
       apeElements > (int64_t(1) << 40))) {
    status =
        Status::error("kpool x head_dim = " + std::to_string(config.kpool) +
                      " x " + std::to_string(config.headDim) +
                      " is too large: 'ape' alone would exceed 2^40 elements");
    return nullptr;
  }
  Key key = keyOf(config);
  status = Status();
  // The registry lock only guards the maps; the entry's own lock is held
  // while its configuration compiles.
  std::shared_ptr<Entry> entry;
  KernelBackend backend;
  KernelCompiler compile;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    std::shared_ptr<Entry> &slot = cache()[key];
    if (!slot)
      slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> entryLock(entry->mutex);
  if (entry->set)
    return entry->set;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    if (auto it = precompiled().find(key); it != precompiled().end()) {
      backend = it->second;
      found = true;
    } else if (auto c = compilers().find(config.target);
               useCompiler && c != compilers().end()) {
      compile = c->second;
    }
  }
  if (!found && compile) {
    status = compile(config, backend);
  } else if (!found) {
    // Kernel packs next to the runtime, then the disk cache and the JIT.
    std::string packs = detail::loadDefaultPacks(config.target);
    {
      std::lock_guard<std::mutex> lock(registryMutex());
      if (auto it = precompiled().find(key); it != precompiled().end()) {
        backend = it->second;
        found = true;
      }
    }
    std::string jit;
    if (!found &&
        !(useCompiler && detail::compileKernels(config, backend, status, jit)))
      status = noKernels(config, useCompiler, packs, jit);
  }
  if (!status.ok())
    return nullptr;
  entry->set = std::make_shared<KernelSet>(config, std::move(backend));
  return entry->set;
}

} // namespace

std::shared_ptr<KernelSet> KernelSet::get(const KernelConfig &config,
                                          Status &status) {
  return getOrCreate(config, status, /*useCompiler=*/true);
}

std::shared_ptr<KernelSet> KernelSet::getPrecompiled(const KernelConfig &config,
                                                     Status &status) {
  return getOrCreate(config, status, /*useCompiler=*/false);
}

#define KPOOL_TRY(expr)                                                        \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_.ok())                                                              \
      return s_;                                                               \
  } while (false)

/// The batch (cache_lengths' length) and the lengths of the two offset
/// arrays (one more), checked by pool_offsets and compress.
static Status checkOffsets(Validator &v, const View &cache, const View &iro,
                           const View &pro, int64_t &batch) {
  KPOOL_TRY(v.batch("cache_lengths", cache, batch));
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  return v.length("pool_row_offsets", pro, batch + 1,
                  "one more than cache_lengths");
}

/// Shape checks of pool_offsets; with `check`, its metadata (host memory).
static Status checkPoolOffsetsOperands(Validator &v, const View &pro,
                                       const View &iro, const View &cache,
                                       bool check) {
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, cache, iro, pro, batch));
  KPOOL_TRY(v.shape("input_row_offsets", iro, {batch + 1}, "batch + 1"));
  KPOOL_TRY(v.shape("pool_row_offsets", pro, {batch + 1}, "batch + 1"));
  if (!check)
    return Status();
  RequestChecks r;
  r.iro = Metadata(iro);
  r.rowRequests = batch;
  r.rows = UINT32_MAX;
  return v.requests(r);
}

Status KernelSet::poolOffsets(const View &pro, const View &iro,
                              const View &cache, Stream stream,
                              Validation validation) const {
  Validator v = impl->validator("pool_offsets");
  if (!impl->backend.poolOffsets)
    return v.error("this kernel set has no pool_offsets kernel");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkPoolOffsetsOperands(v, pro, iro, cache, check));
  abi::invoke(impl->backend.poolOffsets, {pro, iro, cache, stream});
  return Status();
}

Status KernelSet::checkPoolOffsets(const View &pro, const View &iro,
                                   const View &cache) const {
  Validator v = impl->validator("pool_offsets");
  return checkPoolOffsetsOperands(v, pro, iro, cache, true);
}

/// Shape checks of compress; with `check`, its metadata (host memory).
static Status checkCompressOperands(const KernelSetImpl &impl, Validator &v,
                                    const View &pooled, const View &k,
                                    const View &gate, const View &ape,
                                    const View &iro, const View &pro,
                                    const View &cache, bool check) {
  const KernelConfig &c = impl.config;
  KPOOL_TRY(v.shape("k", k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", k, "gate", gate, 0));
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {-1, c.headDim}, "pools x head_dim"));
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, cache, iro, pro, batch));
  if (!check)
    return Status();
  RequestChecks r;
  r.iro = Metadata(iro);
  r.rowRequests = batch;
  r.rows = k.sizes[0];
  r.cache = Metadata(cache);
  r.pro = Metadata(pro);
  r.pooledRows = pooled.sizes[0];
  return v.requests(r);
}

Status KernelSet::compress(const View &pooled, const View &k, const View &gate,
                           const View &ape, const View &iro, const View &pro,
                           const View &cache, Stream stream,
                           Validation validation) const {
  Validator v = impl->validator("compress");
  if (!impl->backend.compress)
    return v.error("this kernel set has only the pool_offsets kernel");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkCompressOperands(*impl, v, pooled, k, gate, ape, iro,
                                  pro, cache, check));
  abi::invoke(impl->backend.compress,
              {pooled, k, gate, ape, iro, pro, cache, stream});
  return Status();
}

Status KernelSet::checkCompress(const View &pooled, const View &k,
                                const View &gate, const View &ape,
                                const View &iro, const View &pro,
                                const View &cache) const {
  Validator v = impl->validator("compress");
  return checkCompressOperands(*impl, v, pooled, k, gate, ape, iro, pro,
                               cache, true);
}

/// The metadata checks of seed_tail and ring_close: the rows and slots of
/// the first `numRequests` requests.
static RequestChecks ringChecks(const View &tail, const View &k,
                                const View &iro, const View &slots,
                                int32_t numRequests) {
  RequestChecks r;
  r.iro = Metadata(iro);
  r.rowRequests = numRequests;
  r.rows = k.sizes[0];
  r.slots = Metadata(slots);
  r.slotRequests = numRequests;
  r.maxSlots = tail.sizes[0];
  return r;
}

/// Shape checks shared by seed_tail and ring_close; with `check`, their
/// metadata (host memory).
static Status checkRing(Validator &v, const KernelConfig &c, const View &tail,
                        const View &k, const View &gate, const View &iro,
                        const View &cache, const View &slots,
                        int32_t numRequests, bool check) {
  KPOOL_TRY(v.shape("tail", tail, {-1, 2, -1, c.headDim},
                    "max_slots x 2 x window x head_dim"));
  if (tail.sizes[2] < c.kpool)
    return v.error("the ring window of 'tail' (dimension 2) is " +
                   std::to_string(tail.sizes[2]) +
                   ", it must be at least kpool = " + std::to_string(c.kpool));
  KPOOL_TRY(v.shape("k", k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", k, "gate", gate, 0));
  int64_t batch;
  KPOOL_TRY(v.batch("cache_lengths", cache, batch));
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.length("slot_idx", slots, batch, "one per request"));
  if (!check)
    return Status();
  KPOOL_TRY(v.numRequests(numRequests, batch));
  return v.requests(ringChecks(tail, k, iro, slots, numRequests));
}

Status KernelSet::seedTail(const View &tail, const View &k, const View &gate,
                           const View &iro, const View &cache,
                           const View &slots, int32_t numRequests,
                           Stream stream, Validation validation) const {
  Validator v = impl->validator("seed_tail");
  if (!impl->backend.seedTail)
    return v.error("this kernel set has only the pool_offsets kernel");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkRing(v, impl->config, tail, k, gate, iro, cache, slots,
                      numRequests, check));
  abi::invoke(impl->backend.seedTail,
              {tail, k, gate, iro, cache, slots, numRequests, stream});
  return Status();
}

Status KernelSet::checkSeedTail(const View &tail, const View &k,
                                const View &gate, const View &iro,
                                const View &cache, const View &slots,
                                int32_t numRequests) const {
  Validator v = impl->validator("seed_tail");
  return checkRing(v, impl->config, tail, k, gate, iro, cache, slots,
                   numRequests, true);
}

/// Shape checks of ring_close's own operands.
static Status checkRingCloseOutputs(Validator &v, const KernelConfig &c,
                                    const View &pooled, const View &closed,
                                    const View &ape, const View &cache) {
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {batch, c.headDim}, "batch x head_dim"));
  return v.shape("closed_pool", closed, {batch}, "batch");
}

Status KernelSet::ringClose(const View &pooled, const View &closed,
                            const View &tail, const View &k, const View &gate,
                            const View &ape, const View &iro, const View &cache,
                            const View &slots, int32_t numRequests,
                            Stream stream, Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("ring_close");
  if (!impl->backend.ringClose)
    return v.error("this kernel set has only the pool_offsets kernel");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      check));
  KPOOL_TRY(checkRingCloseOutputs(v, c, pooled, closed, ape, cache));
  abi::invoke(impl->backend.ringClose, {pooled, closed, tail, k, gate, ape, iro,
                                        cache, slots, numRequests, stream});
  return Status();
}

Status KernelSet::checkRingClose(const View &pooled, const View &closed,
                                 const View &tail, const View &k,
                                 const View &gate, const View &ape,
                                 const View &iro, const View &cache,
                                 const View &slots, int32_t numRequests) const {
  Validator v = impl->validator("ring_close");
  KPOOL_TRY(checkRing(v, impl->config, tail, k, gate, iro, cache, slots,
                      numRequests, true));
  return checkRingCloseOutputs(v, impl->config, pooled, closed, ape, cache);
}

/// The step's operands: ring_close's and seed_tail's shape checks, then
/// with `check` one pass over the metadata: every request's rows lie in
/// `k`, the live requests' slots are distinct and in the ring, and the
/// pools fit `pooled`.
static Status checkStepOperands(const KernelSetImpl &impl, Validator &v,
                                const View &closed, const View &closedPool,
                                const View &pro, const View &pooled,
                                const View &tail, const View &k,
                                const View &gate, const View &ape,
                                const View &iro, const View &cache,
                                const View &slots, int32_t numRequests,
                                bool check) {
  const KernelConfig &c = impl.config;
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      /*check=*/false));
  KPOOL_TRY(checkRingCloseOutputs(v, c, closed, closedPool, ape, cache));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("pool_row_offsets", pro, {batch + 1}, "batch + 1"));
  KPOOL_TRY(v.shape("pooled", pooled, {-1, c.headDim}, "pools x head_dim"));
  if (!check)
    return Status();
  KPOOL_TRY(v.numRequests(numRequests, batch));
  RequestChecks r = ringChecks(tail, k, iro, slots, numRequests);
  r.rowRequests = batch;
  r.cache = Metadata(cache);
  r.pooledRows = pooled.sizes[0];
  return v.requests(r);
}

Status KernelSet::step(const View &closed, const View &closedPool,
                       const View &pro, const View &pooled, const View &tail,
                       const View &k, const View &gate, const View &ape,
                       const View &iro, const View &cache, const View &slots,
                       int32_t numRequests, Stream stream,
                       Validation validation) const {
  Validator v = impl->validator("step");
  if (!impl->backend.step)
    return v.error("this kernel set has only the pool_offsets kernel");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkStepOperands(*impl, v, closed, closedPool, pro, pooled,
                              tail, k, gate, ape, iro, cache, slots,
                              numRequests, check));
  abi::invoke(impl->backend.step,
              {closed, closedPool, pro, pooled, tail, k, gate, ape, iro, cache,
               slots, numRequests, stream});
  return Status();
}

Status KernelSet::checkStep(const View &closed, const View &closedPool,
                            const View &pro, const View &pooled,
                            const View &tail, const View &k, const View &gate,
                            const View &ape, const View &iro, const View &cache,
                            const View &slots, int32_t numRequests) const {
  Validator v = impl->validator("step");
  return checkStepOperands(*impl, v, closed, closedPool, pro, pooled,
                           tail, k, gate, ape, iro, cache, slots, numRequests,
                           true);
}

//===----------------------------------------------------------------------===//
// The pool-cache kernels
//===----------------------------------------------------------------------===//

/// The error of a pool-cache call whose kernel `name` the set lacks.
static Status noCacheKernel(const KernelSetImpl &impl, Validator &v,
                            const char *name) {
  if (impl.config.cache.entry == CacheEntry::None)
    return v.error("this kernel set has no pool-cache kernels: create it "
                   "with a cache format (KernelConfig::cache)");
  return v.error(std::string("this kernel set has no ") + name + " kernel");
}

/// What every pool-cache call checks first: the set has the kernels, and
/// the cache operands' shapes.
static Status checkCacheOperands(const KernelSetImpl &impl, Validator &v,
                                 const View &keys, const View &scales,
                                 const View &table, int64_t batch) {
  const CacheFormat &f = impl.config.cache;
  if (f.entry == CacheEntry::None)
    return noCacheKernel(impl, v, "");
  return v.cacheShapes(keys, scales, table, batch, f.entry == CacheEntry::FP8);
}

/// The pools compress stores, as (request, pool id), from host metadata
/// whose rows were checked: request b's last completedPools(...) pools
/// before floor((c + n) / K).
static void compressPools(Metadata offsets, Metadata lengths, int64_t batch,
                          int64_t kpool,
                          std::vector<std::pair<int64_t, int64_t>> &pools) {
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = int64_t(offsets[b + 1]) - int64_t(offsets[b]);
    int64_t end = (int64_t(lengths[b]) + n) / kpool;
    int64_t count = int64_t(completedPools(lengths[b], n, kpool));
    for (int64_t j = 0; j < count; ++j)
      pools.push_back({b, end - count + j});
  }
}

/// The pools ring_close stores: each live request's pending pool when this
/// call completes it.
static void ringClosePools(Metadata offsets, Metadata lengths,
                           int32_t numRequests, int64_t kpool,
                           std::vector<std::pair<int64_t, int64_t>> &pools) {
  for (int64_t b = 0; b < numRequests; ++b) {
    int64_t held = int64_t(lengths[b]) % kpool;
    int64_t n = int64_t(offsets[b + 1]) - int64_t(offsets[b]);
    if (held > 0 && n >= kpool - held)
      pools.push_back({b, int64_t(lengths[b]) / kpool});
  }
}

/// The table check of a pool-cache call (host metadata, rows already
/// checked): the pools ring_close stores for its first `closeRequests`
/// requests (none when negative) and, with `compress`, compress's.
static Status checkStoredEntries(const KernelSetImpl &impl, Validator &v,
                                 const View &keys, const View &table,
                                 const View &iro, const View &cache,
                                 int32_t closeRequests, bool compress) {
  Metadata offsets(iro), lengths(cache);
  // This thread's buffer, reused: no allocation per call once warm.
  static thread_local std::vector<std::pair<int64_t, int64_t>> pools;
  pools.clear();
  int64_t kpool = impl.config.kpool;
  if (closeRequests >= 0)
    ringClosePools(offsets, lengths, closeRequests, kpool, pools);
  if (compress)
    compressPools(offsets, lengths, cache.sizes[0], kpool, pools);
  return v.cacheEntries(table, keys.sizes[0], keys.sizes[1], pools);
}

static Status checkCompressCacheOperands(
    const KernelSetImpl &impl, Validator &v,
    const View &pooled, const View &keys, const View &scales, const View &k,
    const View &gate, const View &ape, const View &iro, const View &pro,
    const View &cache, const View &table, bool check) {
  KPOOL_TRY(checkCompressOperands(impl, v, pooled, k, gate, ape, iro, pro,
                                  cache, check));
  KPOOL_TRY(checkCacheOperands(impl, v, keys, scales, table, cache.sizes[0]));
  if (!check)
    return Status();
  return checkStoredEntries(impl, v, keys, table, iro, cache,
                            /*closeRequests=*/-1, /*compress=*/true);
}

Status KernelSet::compressCache(const View &pooled, const View &keys,
                                const View &scales, const View &k,
                                const View &gate, const View &ape,
                                const View &iro, const View &pro,
                                const View &cache, const View &table,
                                Stream stream, Validation validation) const {
  Validator v = impl->validator("compress");
  if (!impl->backend.compressCache)
    return noCacheKernel(*impl, v, "compress_cache");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkCompressCacheOperands(*impl, v, pooled, keys, scales,
                                       k, gate, ape, iro, pro, cache, table,
                                       check));
  abi::invoke(impl->backend.compressCache, {pooled, keys, scales, k, gate, ape,
                                            iro, pro, cache, table, stream});
  return Status();
}

Status KernelSet::checkCompressCache(const View &pooled, const View &keys,
                                     const View &scales, const View &k,
                                     const View &gate, const View &ape,
                                     const View &iro, const View &pro,
                                     const View &cache,
                                     const View &table) const {
  Validator v = impl->validator("compress");
  return checkCompressCacheOperands(*impl, v, pooled, keys, scales, k,
                                    gate, ape, iro, pro, cache, table, true);
}

static Status checkRingCloseCacheOperands(
    const KernelSetImpl &impl, Validator &v,
    const View &pooled,
    const View &closed, const View &keys, const View &scales, const View &tail,
    const View &k, const View &gate, const View &ape, const View &iro,
    const View &cache, const View &slots, int32_t numRequests,
    const View &table, bool check) {
  const KernelConfig &c = impl.config;
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      check));
  KPOOL_TRY(checkRingCloseOutputs(v, c, pooled, closed, ape, cache));
  KPOOL_TRY(checkCacheOperands(impl, v, keys, scales, table, cache.sizes[0]));
  if (!check)
    return Status();
  return checkStoredEntries(impl, v, keys, table, iro, cache, numRequests,
                            /*compress=*/false);
}

Status KernelSet::ringCloseCache(const View &pooled, const View &closed,
                                 const View &keys, const View &scales,
                                 const View &tail, const View &k,
                                 const View &gate, const View &ape,
                                 const View &iro, const View &cache,
                                 const View &slots, int32_t numRequests,
                                 const View &table, Stream stream,
                                 Validation validation) const {
  Validator v = impl->validator("ring_close");
  if (!impl->backend.ringCloseCache)
    return noCacheKernel(*impl, v, "ring_close_cache");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkRingCloseCacheOperands(*impl, v, pooled, closed, keys,
                                        scales,
                                        tail, k, gate, ape, iro, cache, slots,
                                        numRequests, table, check));
  abi::invoke(impl->backend.ringCloseCache,
              {pooled, closed, keys, scales, tail, k, gate, ape, iro, cache,
               slots, numRequests, table, stream});
  return Status();
}

Status KernelSet::checkRingCloseCache(
    const View &pooled, const View &closed, const View &keys,
    const View &scales, const View &tail, const View &k, const View &gate,
    const View &ape, const View &iro, const View &cache, const View &slots,
    int32_t numRequests, const View &table) const {
  Validator v = impl->validator("ring_close");
  return checkRingCloseCacheOperands(*impl, v, pooled, closed, keys,
                                     scales,
                                     tail, k, gate, ape, iro, cache, slots,
                                     numRequests, table, true);
}

static Status checkStepCacheOperands(
    const KernelSetImpl &impl, Validator &v,
    const View &closed, const View &closedPool, const View &pro,
    const View &pooled, const View &tail, const View &keys,
    const View &scales, const View &k, const View &gate, const View &ape,
    const View &iro, const View &cache, const View &slots, int32_t numRequests,
    const View &table, bool check) {
  KPOOL_TRY(checkStepOperands(impl, v, closed, closedPool, pro, pooled,
                              tail, k, gate, ape, iro, cache, slots,
                              numRequests, check));
  KPOOL_TRY(checkCacheOperands(impl, v, keys, scales, table, cache.sizes[0]));
  if (!check)
    return Status();
  return checkStoredEntries(impl, v, keys, table, iro, cache, numRequests,
                            /*compress=*/true);
}

Status KernelSet::stepCache(const View &closed, const View &closedPool,
                            const View &pro, const View &pooled,
                            const View &tail, const View &keys,
                            const View &scales, const View &k,
                            const View &gate, const View &ape, const View &iro,
                            const View &cache, const View &slots,
                            int32_t numRequests, const View &table,
                            Stream stream, Validation validation) const {
  Validator v = impl->validator("step");
  if (!impl->backend.stepCache)
    return noCacheKernel(*impl, v, "step_cache");
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, validation, check));
  KPOOL_TRY(checkStepCacheOperands(*impl, v, closed, closedPool, pro,
                                   pooled, tail, keys, scales, k, gate, ape,
                                   iro, cache, slots, numRequests, table,
                                   check));
  abi::invoke(impl->backend.stepCache,
              {closed, closedPool, pro, pooled, tail, keys, scales, k, gate,
               ape, iro, cache, slots, numRequests, table, stream});
  return Status();
}

Status KernelSet::checkStepCache(const View &closed, const View &closedPool,
                                 const View &pro, const View &pooled,
                                 const View &tail, const View &keys,
                                 const View &scales, const View &k,
                                 const View &gate, const View &ape,
                                 const View &iro, const View &cache,
                                 const View &slots, int32_t numRequests,
                                 const View &table) const {
  Validator v = impl->validator("step");
  return checkStepCacheOperands(*impl, v, closed, closedPool, pro,
                                pooled, tail, keys, scales, k, gate, ape, iro,
                                cache, slots, numRequests, table, true);
}
