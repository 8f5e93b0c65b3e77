//===- KernelSet.cpp - kpool kernels on caller buffers --------------------===//
//
// The part of the runtime that needs no MLIR: operand validation, the calls
// into compiled kernels, and the registry and cache of kernel sets, with
// the compilers registered per target.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelSet.h"

#include "Validation.h"

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

  /// Metadata in host memory (the CPU target).
  static Status readHost(const View &view, std::vector<uint32_t> &out) {
    out.resize(view.sizes[0]);
    const auto *data = static_cast<const uint32_t *>(view.data);
    for (int64_t i = 0; i < view.sizes[0]; ++i)
      out[i] = data[i * view.strides[0]];
    return Status();
  }

  Validator validator(const char *op) const {
    return Validator(op, {config.headDim, config.kpool},
                     backend.readMetadata ? backend.readMetadata : readHost);
  }

  /// Runs the pool_offsets kernel on `iro` and `cache` into host `out`
  /// (through target scratch memory when the backend has some).
  Status expectedPoolOffsets(const KernelSet &set, const View &iro,
                             const View &cache,
                             std::vector<uint32_t> &out) const {
    int64_t length = static_cast<int64_t>(out.size());
    if (!backend.allocateScratch)
      return set.poolOffsets(denseView(out.data(), {length}), iro, cache,
                             Validation::Trust);
    void *scratch = backend.allocateScratch(length * sizeof(uint32_t));
    if (!scratch)
      return Status::error("could not allocate " +
                           std::to_string(length * sizeof(uint32_t)) +
                           " bytes of target memory for validation");
    View scratchView = denseView(scratch, {length});
    Status status = set.poolOffsets(scratchView, iro, cache, Validation::Trust);
    if (status.ok())
      status = backend.readMetadata(scratchView, out);
    backend.freeScratch(scratch);
    return status;
  }
};

} // namespace kpool

KernelSet::KernelSet(const KernelConfig &config, KernelBackend backend)
    : impl(new KernelSetImpl{config, std::move(backend)}) {}
KernelSet::~KernelSet() = default;

const KernelConfig &KernelSet::config() const { return impl->config; }

namespace {

/// Configurations that compile to the same kernels share a key: the CPU
/// code options mean nothing for the CUDA target.
using Key = std::tuple<int, int64_t, int64_t, int, bool, int64_t, bool>;
Key keyOf(const KernelConfig &c) {
  bool cpu = c.target == Target::CPU;
  bool all = !c.poolOffsetsOnly;
  return Key{all ? c.elementType : 0,
             all ? c.headDim : 0,
             c.kpool,
             static_cast<int>(c.target),
             cpu && c.openmp,
             cpu && all ? c.vectorSize : 0,
             c.poolOffsetsOnly};
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

/// Why `config` has no kernels, and how to get some.
Status noKernels(const KernelConfig &config, bool compilerAllowed) {
  std::string what = std::string("no precompiled kernels for ") +
                     elementTypeName(config.elementType) + ", head_dim " +
                     std::to_string(config.headDim) + ", kpool " +
                     std::to_string(config.kpool) + " on the " +
                     targetName(config.target) + " target";
  if (config.poolOffsetsOnly)
    what = "no precompiled pool_offsets kernel for kpool " +
           std::to_string(config.kpool) + " on the " +
           targetName(config.target) + " target";
  std::string how = config.target == Target::CUDA
                        ? "build them with kpool-aot --target=cuda "
                          "(kpool_add_aot_kernels) and call their "
                          "registration function"
                        : "build them with kpool-aot (kpool_add_aot_kernels) "
                          "and call their registration function";
  if (config.target == Target::CPU)
    how += compilerAllowed ? ", or link KPoolRuntimeJit and call "
                             "kpool::registerJitCompiler() to JIT them"
                           : ", or use KernelSet::get with a registered "
                             "compiler (kpool::registerJitCompiler())";
  return Status::error(what + ": " + how);
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
  if (!found && compile)
    status = compile(config, backend);
  else if (!found)
    status = noKernels(config, useCompiler);
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

Status KernelSet::poolOffsets(const View &pro, const View &iro,
                              const View &cache, Validation validation) const {
  Validator v = impl->validator("pool_offsets");
  if (!impl->backend.poolOffsets)
    return v.error("this kernel set has no pool_offsets kernel");
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, cache, iro, pro, batch));
  KPOOL_TRY(v.shape("input_row_offsets", iro, {batch + 1}, "batch + 1"));
  KPOOL_TRY(v.shape("pool_row_offsets", pro, {batch + 1}, "batch + 1"));
  if (validation == Validation::Check) {
    std::vector<uint32_t> offsets;
    KPOOL_TRY(v.load(iro, offsets));
    KPOOL_TRY(v.rows(offsets, batch, UINT32_MAX));
  }
  abi::invoke(impl->backend.poolOffsets, {pro, iro, cache});
  return Status();
}

Status KernelSet::compress(const View &pooled, const View &k, const View &gate,
                           const View &ape, const View &iro, const View &pro,
                           const View &cache, Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("compress");
  if (!impl->backend.compress)
    return v.error("this kernel set has only the pool_offsets kernel");
  KPOOL_TRY(v.shape("k", k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", k, "gate", gate, 0));
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {-1, c.headDim}, "pools x head_dim"));
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, cache, iro, pro, batch));
  if (validation == Validation::Check) {
    std::vector<uint32_t> offsets, pools, lengths;
    KPOOL_TRY(v.load(iro, offsets));
    KPOOL_TRY(v.load(pro, pools));
    KPOOL_TRY(v.load(cache, lengths));
    KPOOL_TRY(v.rows(offsets, batch, k.sizes[0]));
    // The expected counts come from the pool_offsets kernel, so the
    // metadata arithmetic has one implementation. It writes the target's
    // memory: device scratch, read back, for device-resident metadata.
    std::vector<uint32_t> expected(batch + 1);
    KPOOL_TRY(impl->expectedPoolOffsets(*this, iro, cache, expected));
    KPOOL_TRY(v.poolRows(pools, expected, offsets, lengths, pooled.sizes[0]));
  }
  abi::invoke(impl->backend.compress, {pooled, k, gate, ape, iro, pro, cache});
  return Status();
}

/// Shape and metadata checks shared by seed_tail and ring_close.
static Status checkRing(Validator &v, const KernelConfig &c, const View &tail,
                        const View &k, const View &gate, const View &iro,
                        const View &cache, const View &slots,
                        int32_t numRequests, Validation validation) {
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
  if (validation == Validation::Trust)
    return Status();
  KPOOL_TRY(v.numRequests(numRequests, batch));
  std::vector<uint32_t> offsets, slotValues;
  KPOOL_TRY(v.load(iro, offsets));
  KPOOL_TRY(v.load(slots, slotValues));
  KPOOL_TRY(v.rows(offsets, numRequests, k.sizes[0]));
  return v.slots(slotValues, numRequests, tail.sizes[0]);
}

Status KernelSet::seedTail(const View &tail, const View &k, const View &gate,
                           const View &iro, const View &cache,
                           const View &slots, int32_t numRequests,
                           Validation validation) const {
  Validator v = impl->validator("seed_tail");
  if (!impl->backend.seedTail)
    return v.error("this kernel set has only the pool_offsets kernel");
  KPOOL_TRY(checkRing(v, impl->config, tail, k, gate, iro, cache, slots,
                      numRequests, validation));
  abi::invoke(impl->backend.seedTail,
              {tail, k, gate, iro, cache, slots, numRequests});
  return Status();
}

Status KernelSet::ringClose(const View &pooled, const View &closed,
                            const View &tail, const View &k, const View &gate,
                            const View &ape, const View &iro, const View &cache,
                            const View &slots, int32_t numRequests,
                            Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("ring_close");
  if (!impl->backend.ringClose)
    return v.error("this kernel set has only the pool_offsets kernel");
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      validation));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {batch, c.headDim}, "batch x head_dim"));
  KPOOL_TRY(v.shape("closed_pool", closed, {batch}, "batch"));
  abi::invoke(impl->backend.ringClose, {pooled, closed, tail, k, gate, ape, iro,
                                        cache, slots, numRequests});
  return Status();
}

Status KernelSet::step(const View &closed, const View &closedPool,
                       const View &pro, const View &pooled, const View &tail,
                       const View &k, const View &gate, const View &ape,
                       const View &iro, const View &cache, const View &slots,
                       int32_t numRequests, Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("step");
  if (!impl->backend.step)
    return v.error("this kernel set has only the pool_offsets kernel");
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      validation));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("closed", closed, {batch, c.headDim}, "batch x head_dim"));
  KPOOL_TRY(v.shape("closed_pool", closedPool, {batch}, "batch"));
  KPOOL_TRY(v.shape("pool_row_offsets", pro, {batch + 1}, "batch + 1"));
  KPOOL_TRY(v.shape("pooled", pooled, {-1, c.headDim}, "pools x head_dim"));
  if (validation == Validation::Check) {
    // checkRing checked the rows of the first num_requests requests; the
    // pools of every request must fit the pooled rows. The counts come from
    // the pool_offsets kernel (one implementation of the arithmetic).
    std::vector<uint32_t> offsets;
    KPOOL_TRY(v.load(iro, offsets));
    KPOOL_TRY(v.rows(offsets, batch, k.sizes[0]));
    std::vector<uint32_t> expected(batch + 1);
    KPOOL_TRY(impl->expectedPoolOffsets(*this, iro, cache, expected));
    if (expected[batch] > pooled.sizes[0])
      return v.error("the call completes " + std::to_string(expected[batch]) +
                     " pool(s), past the " + std::to_string(pooled.sizes[0]) +
                     " rows of 'pooled'");
  }
  abi::invoke(impl->backend.step, {closed, closedPool, pro, pooled, tail, k,
                                   gate, ape, iro, cache, slots, numRequests});
  return Status();
}
