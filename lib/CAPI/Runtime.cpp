//===- Runtime.cpp - C API of the kpool runtime ---------------------------===//
//
// Thin wrappers over kpool::KernelSet and kpool::PoolStore. Everything the
// C++ API would assert on or index blindly (null pointers, ranks past
// KPOOL_MAX_RANK, out-of-range slots, unknown element types) is checked here
// first and reported as a KPoolError.
//
//===----------------------------------------------------------------------===//

#include "kpool-c/Runtime.h"

#include "kpool/Dialect/KPool/IR/StatusWord.h"
#include "kpool/Runtime/KernelABI.h"
#include "kpool/Runtime/KernelSet.h"
#include "kpool/Runtime/PoolStore.h"

#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

struct KPoolError {
  std::string message;
};

struct KPoolKernelSet {
  std::shared_ptr<kpool::KernelSet> kernels;
};

struct KPoolPoolStore {
  std::unique_ptr<kpool::PoolStore> store;
  int64_t maxSlots;
  std::vector<KPoolProducedPool> produced;
};

static KPoolError *makeError(std::string message) {
  return new KPoolError{std::move(message)};
}

static KPoolError *wrap(const kpool::Status &status) {
  return status.ok() ? nullptr : makeError(status.message());
}

/// Runs `body`, turning an allocation failure (the only exception the
/// runtime lets escape) into an error: nothing thrown crosses the C API.
template <typename Body> static KPoolError *guard(const char *op, Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return makeError(std::string(op) + ": out of memory");
}

const char *kpoolErrorMessage(const KPoolError *error) {
  return error ? error->message.c_str() : "";
}

void kpoolErrorDestroy(KPoolError *error) { delete error; }

static bool isElementType(int type) {
  return type == KPOOL_BF16 || type == KPOOL_F16 || type == KPOOL_F32;
}

/// The value a C caller passed as a KPoolElementType. C allows any int
/// there; in C++ a value outside the enumerators' range is undefined, so it
/// is read as the int it is (UBSan's enum check found 7 read as the enum).
static int rawElementType(const KPoolElementType &type) {
  int raw;
  static_assert(sizeof(raw) == sizeof(type), "enum is int-sized");
  std::memcpy(&raw, &type, sizeof raw);
  return raw;
}

const char *kpoolElementTypeName(KPoolElementType type) {
  int raw = rawElementType(type);
  return isElementType(raw)
             ? kpool::elementTypeName(static_cast<KPoolElementType>(raw))
             : nullptr;
}

//===----------------------------------------------------------------------===//
// Kernel sets
//===----------------------------------------------------------------------===//

/// The (cached or newly compiled) kernels of `config` as a C handle.
static KPoolError *getKernelSet(const char *what,
                                const kpool::KernelConfig &config,
                                KPoolKernelSet **result) {
  kpool::Status status;
  // Kernels not registered or cached are compiled by the JIT, which the
  // runtime loads on demand (libKPoolJit.so, kpool-c/Packs.h).
  std::shared_ptr<kpool::KernelSet> kernels =
      kpool::KernelSet::get(config, status);
  if (!kernels)
    return makeError(status.ok() ? std::string(what) + ": compilation failed"
                                 : status.message());
  *result = new KPoolKernelSet{std::move(kernels)};
  return nullptr;
}

/// The value a C caller passed as a KPoolTarget (any int, as for element
/// types).
static int rawTarget(const KPoolTarget &target) {
  int raw;
  static_assert(sizeof(raw) == sizeof(target), "enum is int-sized");
  std::memcpy(&raw, &target, sizeof raw);
  return raw;
}

static KPoolError *kpoolKernelSetCreateImpl(int target, int elementType,
                                            int64_t headDim, int64_t kpool,
                                            bool openmp, int64_t vectorSize,
                                            KPoolKernelSet **result,
                                            kpool::CacheFormat cache = {}) {
  if (!result)
    return makeError("kernel set: the result pointer is null");
  *result = nullptr;
  if (target != KPOOL_TARGET_CPU && target != KPOOL_TARGET_CUDA)
    return makeError("kernel set: target " + std::to_string(target) +
                     " is not one of KPOOL_TARGET_CPU, KPOOL_TARGET_CUDA");
  if (!isElementType(elementType))
    return makeError("kernel set: element type " + std::to_string(elementType) +
                     " is not one of KPOOL_BF16, KPOOL_F16, KPOOL_F32");
  if (headDim < 1 || kpool < 1)
    return makeError("kernel set: head_dim and kpool must be at least 1, got " +
                     std::to_string(headDim) + " and " + std::to_string(kpool));
  if (vectorSize < 0)
    return makeError("kernel set: vector_size must not be negative, got " +
                     std::to_string(vectorSize));
  kpool::KernelConfig config;
  config.elementType = static_cast<KPoolElementType>(elementType);
  config.headDim = headDim;
  config.kpool = kpool;
  config.target =
      target == KPOOL_TARGET_CUDA ? kpool::Target::CUDA : kpool::Target::CPU;
  config.openmp = openmp;
  config.vectorSize = vectorSize;
  config.cache = cache;
  return getKernelSet("kernel set", config, result);
}

/// The value a C caller passed for an enum parameter.
template <typename E> static int rawEnum(const E &value) {
  int raw;
  static_assert(sizeof(raw) == sizeof(value), "enum is int-sized");
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

KPoolError *kpoolKernelSetCreateWithCache(
    KPoolTarget target, KPoolElementType elementType, int64_t headDim,
    int64_t kpool, bool openmp, int64_t vectorSize, KPoolCacheEntry entry,
    KPoolCacheRotate rotate, KPoolCacheScale scale, KPoolKernelSet **result) {
  return guard("kernel set", [&]() -> KPoolError * {
    int e = rawEnum(entry), r = rawEnum(rotate), sc = rawEnum(scale);
    if (result)
      *result = nullptr;
    if (e < KPOOL_CACHE_NONE || e > KPOOL_CACHE_FP8)
      return makeError("kernel set: cache entry " + std::to_string(e) +
                       " is not one of KPOOL_CACHE_NONE, KPOOL_CACHE_ELEMENT, "
                       "KPOOL_CACHE_FP8");
    if (r != KPOOL_ROTATE_NONE && r != KPOOL_ROTATE_HADAMARD)
      return makeError("kernel set: rotation " + std::to_string(r) +
                       " is not one of KPOOL_ROTATE_NONE, "
                       "KPOOL_ROTATE_HADAMARD");
    if (sc != KPOOL_SCALE_ABSMAX && sc != KPOOL_SCALE_POW2)
      return makeError("kernel set: scale " + std::to_string(sc) +
                       " is not one of KPOOL_SCALE_ABSMAX, KPOOL_SCALE_POW2");
    kpool::CacheFormat cache;
    cache.entry = static_cast<kpool::CacheEntry>(e);
    cache.rotate = static_cast<kpool::CacheRotate>(r);
    cache.scale = static_cast<kpool::CacheScale>(sc);
    return kpoolKernelSetCreateImpl(rawTarget(target),
                                    rawElementType(elementType), headDim, kpool,
                                    openmp, vectorSize, result, cache);
  });
}

KPoolError *kpoolKernelSetCreate(KPoolElementType elementType, int64_t headDim,
                                 int64_t kpool, bool openmp, int64_t vectorSize,
                                 KPoolKernelSet **result) {
  return guard("kernel set", [&] {
    return kpoolKernelSetCreateImpl(KPOOL_TARGET_CPU,
                                    rawElementType(elementType), headDim, kpool,
                                    openmp, vectorSize, result);
  });
}

KPoolError *kpoolKernelSetCreateForTarget(KPoolTarget target,
                                          KPoolElementType elementType,
                                          int64_t headDim, int64_t kpool,
                                          bool openmp, int64_t vectorSize,
                                          KPoolKernelSet **result) {
  return guard("kernel set", [&] {
    return kpoolKernelSetCreateImpl(rawTarget(target),
                                    rawElementType(elementType), headDim, kpool,
                                    openmp, vectorSize, result);
  });
}

static KPoolError *kpoolPoolOffsetsKernelCreateImpl(int64_t kpool,
                                                    KPoolKernelSet **result) {
  if (!result)
    return makeError("pool_offsets kernel: the result pointer is null");
  *result = nullptr;
  if (kpool < 1)
    return makeError("pool_offsets kernel: kpool must be at least 1, got " +
                     std::to_string(kpool));
  kpool::KernelConfig config;
  config.elementType = KPOOL_F32;
  config.headDim = 1;
  config.kpool = kpool;
  config.poolOffsetsOnly = true;
  return getKernelSet("pool_offsets kernel", config, result);
}

KPoolError *kpoolPoolOffsetsKernelCreate(int64_t kpool,
                                         KPoolKernelSet **result) {
  return guard("pool_offsets kernel",
               [&] { return kpoolPoolOffsetsKernelCreateImpl(kpool, result); });
}

void kpoolKernelSetDestroy(KPoolKernelSet *kernels) { delete kernels; }

static bool live(const KPoolKernelSet *kernels) {
  return kernels && kernels->kernels;
}
KPoolElementType kpoolKernelSetGetElementType(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().elementType
                       : static_cast<KPoolElementType>(-1);
}
int64_t kpoolKernelSetGetHeadDim(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().headDim : -1;
}
int64_t kpoolKernelSetGetKPool(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().kpool : -1;
}
int kpoolKernelSetGetTarget(const KPoolKernelSet *kernels) {
  if (!live(kernels))
    return -1;
  return kernels->kernels->config().target == kpool::Target::CUDA
             ? KPOOL_TARGET_CUDA
             : KPOOL_TARGET_CPU;
}

/// Checks what the C++ validator takes for granted: the operand exists and
/// its rank fits a KPoolView.
static KPoolError *checkView(const char *op, const char *name,
                             const KPoolView *view) {
  if (!view)
    return makeError(std::string(op) + ": '" + name + "' is a null view");
  if (view->rank < 0 || view->rank > KPOOL_MAX_RANK)
    return makeError(std::string(op) + ": '" + name + "' has rank " +
                     std::to_string(view->rank) + ", views have at most " +
                     std::to_string(KPOOL_MAX_RANK) + " dimensions");
  return nullptr;
}

#define KPOOL_CHECK(expr)                                                      \
  do {                                                                         \
    if (KPoolError *e_ = (expr))                                               \
      return e_;                                                               \
  } while (false)

static KPoolError *checkKernels(const char *op, const KPoolKernelSet *k) {
  if (!k || !k->kernels)
    return makeError(std::string(op) + ": the kernel set is null");
  return nullptr;
}

static kpool::Validation validation(bool validate) {
  return validate ? kpool::Validation::Check : kpool::Validation::Trust;
}

/// Runs kernel `id` of `kernels` through `call` once the kernel set and
/// every view operand (`views`, in the kernel ABI's order) are checked.
template <typename Call>
static KPoolError *
runKernel(kpool::abi::KernelId id, const KPoolKernelSet *kernels,
          std::initializer_list<const KPoolView *> views, Call &&call) {
  const kpool::abi::Kernel &kernel = kpool::abi::kernel(id);
  return guard(kernel.name, [&]() -> KPoolError * {
    KPOOL_CHECK(checkKernels(kernel.name, kernels));
    const KPoolView *const *view = views.begin();
    for (int i = 0; i < kernel.numOperands; ++i)
      if (kernel.operands[i].role != kpool::abi::Role::Scalar &&
          kernel.operands[i].role != kpool::abi::Role::Context)
        KPOOL_CHECK(checkView(kernel.name, kernel.operands[i].name, *view++));
    return wrap(call(*kernels->kernels));
  });
}

KPoolError *kpoolCompress(const KPoolKernelSet *kernels,
                          const KPoolView *pooled, const KPoolView *k,
                          const KPoolView *gate, const KPoolView *ape,
                          const KPoolView *iro, const KPoolView *pro,
                          const KPoolView *cache, uint64_t *status, void *stream,
                          bool validate) {
  return runKernel(kpool::abi::KernelId::Compress, kernels,
                   {pooled, k, gate, ape, iro, pro, cache},
                   [&](const kpool::KernelSet &set) {
                     return set.compress(*pooled, *k, *gate, *ape, *iro, *pro,
                                         *cache, kpool::Stream(stream, status),
                                         validation(validate));
                   });
}

KPoolError *kpoolSeedTail(const KPoolKernelSet *kernels, const KPoolView *tail,
                          const KPoolView *k, const KPoolView *gate,
                          const KPoolView *iro, const KPoolView *cache,
                          const KPoolView *slots, int32_t numRequests,
                          uint64_t *status, void *stream, bool validate) {
  return runKernel(kpool::abi::KernelId::SeedTail, kernels,
                   {tail, k, gate, iro, cache, slots},
                   [&](const kpool::KernelSet &set) {
                     return set.seedTail(*tail, *k, *gate, *iro, *cache, *slots,
                                         numRequests, kpool::Stream(stream, status),
                                         validation(validate));
                   });
}

KPoolError *kpoolRingClose(const KPoolKernelSet *kernels,
                           const KPoolView *pooled, const KPoolView *closed,
                           const KPoolView *tail, const KPoolView *k,
                           const KPoolView *gate, const KPoolView *ape,
                           const KPoolView *iro, const KPoolView *cache,
                           const KPoolView *slots, int32_t numRequests,
                           uint64_t *status, void *stream, bool validate) {
  return runKernel(kpool::abi::KernelId::RingClose, kernels,
                   {pooled, closed, tail, k, gate, ape, iro, cache, slots},
                   [&](const kpool::KernelSet &set) {
                     return set.ringClose(*pooled, *closed, *tail, *k, *gate,
                                          *ape, *iro, *cache, *slots,
                                          numRequests, kpool::Stream(stream, status),
                                          validation(validate));
                   });
}

KPoolError *kpoolStep(const KPoolKernelSet *kernels, const KPoolView *closed,
                      const KPoolView *closedPool, const KPoolView *pro,
                      const KPoolView *pooled, const KPoolView *tail,
                      const KPoolView *k, const KPoolView *gate,
                      const KPoolView *ape, const KPoolView *iro,
                      const KPoolView *cache, const KPoolView *slots,
                      int32_t numRequests, uint64_t *status, void *stream, bool validate) {
  return runKernel(
      kpool::abi::KernelId::Step, kernels,
      {closed, closedPool, pro, pooled, tail, k, gate, ape, iro, cache, slots},
      [&](const kpool::KernelSet &set) {
        return set.step(*closed, *closedPool, *pro, *pooled, *tail, *k, *gate,
                        *ape, *iro, *cache, *slots, numRequests,
                        kpool::Stream(stream, status), validation(validate));
      });
}

KPoolError *kpoolCheckStep(const KPoolKernelSet *kernels,
                           const KPoolView *closed,
                           const KPoolView *closedPool, const KPoolView *pro,
                           const KPoolView *pooled, const KPoolView *tail,
                           const KPoolView *k, const KPoolView *gate,
                           const KPoolView *ape, const KPoolView *iro,
                           const KPoolView *cache, const KPoolView *slots,
                           int32_t numRequests) {
  return runKernel(
      kpool::abi::KernelId::Step, kernels,
      {closed, closedPool, pro, pooled, tail, k, gate, ape, iro, cache, slots},
      [&](const kpool::KernelSet &set) {
        return set.checkStep(*closed, *closedPool, *pro, *pooled, *tail, *k,
                             *gate, *ape, *iro, *cache, *slots, numRequests);
      });
}

KPoolError *kpoolCompressCache(const KPoolKernelSet *kernels,
                               const KPoolView *pooled,
                               const KPoolView *cacheKeys,
                               const KPoolView *cacheScales,
                               const KPoolView *k, const KPoolView *gate,
                               const KPoolView *ape, const KPoolView *iro,
                               const KPoolView *pro, const KPoolView *cache,
                               const KPoolView *blockTable, uint64_t *status, void *stream,
                               bool validate) {
  return runKernel(kpool::abi::KernelId::CompressCache, kernels,
                   {pooled, cacheKeys, cacheScales, k, gate, ape, iro, pro,
                    cache, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.compressCache(
                         *pooled, *cacheKeys, *cacheScales, *k, *gate, *ape,
                         *iro, *pro, *cache, *blockTable,
                         kpool::Stream(stream, status), validation(validate));
                   });
}

KPoolError *kpoolRingCloseCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *closed, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *tail, const KPoolView *k,
    const KPoolView *gate, const KPoolView *ape, const KPoolView *iro,
    const KPoolView *cache, const KPoolView *slots, int32_t numRequests,
    const KPoolView *blockTable, uint64_t *status, void *stream, bool validate) {
  return runKernel(kpool::abi::KernelId::RingCloseCache, kernels,
                   {pooled, closed, cacheKeys, cacheScales, tail, k, gate, ape,
                    iro, cache, slots, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.ringCloseCache(
                         *pooled, *closed, *cacheKeys, *cacheScales, *tail, *k,
                         *gate, *ape, *iro, *cache, *slots, numRequests,
                         *blockTable, kpool::Stream(stream, status),
                         validation(validate));
                   });
}

KPoolError *kpoolStepCache(
    const KPoolKernelSet *kernels, const KPoolView *closed,
    const KPoolView *closedPool, const KPoolView *pro, const KPoolView *pooled,
    const KPoolView *tail, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *k, const KPoolView *gate,
    const KPoolView *ape, const KPoolView *iro, const KPoolView *cache,
    const KPoolView *slots, int32_t numRequests, const KPoolView *blockTable,
    uint64_t *status, void *stream, bool validate) {
  return runKernel(kpool::abi::KernelId::StepCache, kernels,
                   {closed, closedPool, pro, pooled, tail, cacheKeys,
                    cacheScales, k, gate, ape, iro, cache, slots, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.stepCache(
                         *closed, *closedPool, *pro, *pooled, *tail,
                         *cacheKeys, *cacheScales, *k, *gate, *ape, *iro,
                         *cache, *slots, numRequests, *blockTable,
                         kpool::Stream(stream, status), validation(validate));
                   });
}

KPoolError *kpoolCheckCompressCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *cacheKeys, const KPoolView *cacheScales,
    const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
    const KPoolView *iro, const KPoolView *pro, const KPoolView *cache,
    const KPoolView *blockTable) {
  return runKernel(kpool::abi::KernelId::CompressCache, kernels,
                   {pooled, cacheKeys, cacheScales, k, gate, ape, iro, pro,
                    cache, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.checkCompressCache(*pooled, *cacheKeys,
                                                   *cacheScales, *k, *gate,
                                                   *ape, *iro, *pro, *cache,
                                                   *blockTable);
                   });
}

KPoolError *kpoolCheckRingCloseCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *closed, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *tail, const KPoolView *k,
    const KPoolView *gate, const KPoolView *ape, const KPoolView *iro,
    const KPoolView *cache, const KPoolView *slots, int32_t numRequests,
    const KPoolView *blockTable) {
  return runKernel(kpool::abi::KernelId::RingCloseCache, kernels,
                   {pooled, closed, cacheKeys, cacheScales, tail, k, gate, ape,
                    iro, cache, slots, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.checkRingCloseCache(
                         *pooled, *closed, *cacheKeys, *cacheScales, *tail, *k,
                         *gate, *ape, *iro, *cache, *slots, numRequests,
                         *blockTable);
                   });
}

KPoolError *kpoolCheckStepCache(
    const KPoolKernelSet *kernels, const KPoolView *closed,
    const KPoolView *closedPool, const KPoolView *pro, const KPoolView *pooled,
    const KPoolView *tail, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *k, const KPoolView *gate,
    const KPoolView *ape, const KPoolView *iro, const KPoolView *cache,
    const KPoolView *slots, int32_t numRequests, const KPoolView *blockTable) {
  return runKernel(kpool::abi::KernelId::StepCache, kernels,
                   {closed, closedPool, pro, pooled, tail, cacheKeys,
                    cacheScales, k, gate, ape, iro, cache, slots, blockTable},
                   [&](const kpool::KernelSet &set) {
                     return set.checkStepCache(
                         *closed, *closedPool, *pro, *pooled, *tail,
                         *cacheKeys, *cacheScales, *k, *gate, *ape, *iro,
                         *cache, *slots, numRequests, *blockTable);
                   });
}

// The C names of StatusWord.h's findings, code for code, and no finding
// without one.
#define KPOOL_STATUS_C_CODE(name, code, field, what) +1
static_assert(0 KPOOL_STATUS_FINDINGS(KPOOL_STATUS_C_CODE) == 11,
              "a finding without a KPOOL_STATUS_* name in kpool-c/Runtime.h");
#undef KPOOL_STATUS_C_CODE
static_assert(KPOOL_STATUS_ROWS_REVERSED == int(kpool::status::Finding::RowsReversed));
static_assert(KPOOL_STATUS_ROWS_PAST_K == int(kpool::status::Finding::RowsPastK));
static_assert(KPOOL_STATUS_SLOT_OUT_OF_RANGE == int(kpool::status::Finding::SlotOutOfRange));
static_assert(KPOOL_STATUS_POOL_RANGE_MISMATCH == int(kpool::status::Finding::PoolRangeMismatch));
static_assert(KPOOL_STATUS_POOL_ROWS_PAST_OUTPUT == int(kpool::status::Finding::PoolRowsPastOutput));
static_assert(KPOOL_STATUS_POOLED_CAPACITY == int(kpool::status::Finding::PooledCapacity));
static_assert(KPOOL_STATUS_TABLE_PAST_WIDTH == int(kpool::status::Finding::TablePastWidth));
static_assert(KPOOL_STATUS_TABLE_PADDING == int(kpool::status::Finding::TablePadding));
static_assert(KPOOL_STATUS_TABLE_PAGE_OUT_OF_RANGE == int(kpool::status::Finding::TablePageOutOfRange));
static_assert(KPOOL_STATUS_NUM_REQUESTS == int(kpool::status::Finding::NumRequests));
static_assert(KPOOL_STATUS_EXTENT == int(kpool::status::Finding::Extent));

KPoolError *kpoolStatusWordError(uint64_t word) {
  return wrap(kpool::statusWordError(word));
}

KPoolError *kpoolPoolOffsets(const KPoolKernelSet *kernels,
                             const KPoolView *pro, const KPoolView *iro,
                             const KPoolView *cache, uint64_t *status, void *stream,
                             bool validate) {
  return runKernel(kpool::abi::KernelId::PoolOffsets, kernels,
                   {pro, iro, cache}, [&](const kpool::KernelSet &set) {
                     return set.poolOffsets(*pro, *iro, *cache,
                                            kpool::Stream(stream, status),
                                            validation(validate));
                   });
}

KPoolError *kpoolKernelSetPrepare(const KPoolKernelSet *kernels,
                                  void *stream) {
  return guard("prepare", [&]() -> KPoolError * {
    KPOOL_CHECK(checkKernels("prepare", kernels));
    return wrap(kernels->kernels->prepare(kpool::Stream(stream)));
  });
}

KPoolError *kpoolCheckCompress(const KPoolKernelSet *kernels,
                               const KPoolView *pooled, const KPoolView *k,
                               const KPoolView *gate, const KPoolView *ape,
                               const KPoolView *iro, const KPoolView *pro,
                               const KPoolView *cache) {
  return runKernel(kpool::abi::KernelId::Compress, kernels,
                   {pooled, k, gate, ape, iro, pro, cache},
                   [&](const kpool::KernelSet &set) {
                     return set.checkCompress(*pooled, *k, *gate, *ape, *iro,
                                              *pro, *cache);
                   });
}

KPoolError *kpoolCheckSeedTail(const KPoolKernelSet *kernels,
                               const KPoolView *tail, const KPoolView *k,
                               const KPoolView *gate, const KPoolView *iro,
                               const KPoolView *cache, const KPoolView *slots,
                               int32_t numRequests) {
  return runKernel(kpool::abi::KernelId::SeedTail, kernels,
                   {tail, k, gate, iro, cache, slots},
                   [&](const kpool::KernelSet &set) {
                     return set.checkSeedTail(*tail, *k, *gate, *iro, *cache,
                                              *slots, numRequests);
                   });
}

KPoolError *kpoolCheckRingClose(const KPoolKernelSet *kernels,
                                const KPoolView *pooled,
                                const KPoolView *closed, const KPoolView *tail,
                                const KPoolView *k, const KPoolView *gate,
                                const KPoolView *ape, const KPoolView *iro,
                                const KPoolView *cache, const KPoolView *slots,
                                int32_t numRequests) {
  return runKernel(kpool::abi::KernelId::RingClose, kernels,
                   {pooled, closed, tail, k, gate, ape, iro, cache, slots},
                   [&](const kpool::KernelSet &set) {
                     return set.checkRingClose(*pooled, *closed, *tail, *k,
                                               *gate, *ape, *iro, *cache,
                                               *slots, numRequests);
                   });
}

KPoolError *kpoolCheckPoolOffsets(const KPoolKernelSet *kernels,
                                  const KPoolView *pro, const KPoolView *iro,
                                  const KPoolView *cache) {
  return runKernel(kpool::abi::KernelId::PoolOffsets, kernels,
                   {pro, iro, cache}, [&](const kpool::KernelSet &set) {
                     return set.checkPoolOffsets(*pro, *iro, *cache);
                   });
}

//===----------------------------------------------------------------------===//
// The kernel ABI
//===----------------------------------------------------------------------===//

namespace {
/// The kernel ABI table in the C API's types, built once.
struct AbiTable {
  std::vector<KPoolOperandInfo> operands;
  std::vector<KPoolKernelInfo> kernels;
  AbiTable() {
    size_t total = 0;
    for (const kpool::abi::Kernel &k : kpool::abi::kernels)
      total += k.numOperands;
    operands.reserve(total); // stable addresses for the kernels' pointers
    for (const kpool::abi::Kernel &k : kpool::abi::kernels) {
      const KPoolOperandInfo *first = operands.data() + operands.size();
      for (int i = 0; i < k.numOperands; ++i) {
        const kpool::abi::Operand &o = k.operands[i];
        operands.push_back({o.name, static_cast<int32_t>(o.role), o.rank,
                            static_cast<int32_t>(o.kind), o.shape});
      }
      kernels.push_back({k.name, k.capiFunction, k.numOperands, first});
    }
  }
};
// The C enums are the C++ ones.
static_assert(int(kpool::abi::Role::Output) == KPOOL_OPERAND_OUTPUT &&
              int(kpool::abi::Role::Input) == KPOOL_OPERAND_INPUT &&
              int(kpool::abi::Role::Scalar) == KPOOL_OPERAND_SCALAR &&
              int(kpool::abi::Role::Context) == KPOOL_OPERAND_CONTEXT);
static_assert(int(kpool::abi::Kind::Element) == KPOOL_KIND_ELEMENT &&
              int(kpool::abi::Kind::U32) == KPOOL_KIND_U32 &&
              int(kpool::abi::Kind::I32) == KPOOL_KIND_I32 &&
              int(kpool::abi::Kind::F32) == KPOOL_KIND_F32 &&
              int(kpool::abi::Kind::Stream) == KPOOL_KIND_STREAM &&
              int(kpool::abi::Kind::CacheEntry) == KPOOL_KIND_CACHE_ENTRY &&
              int(kpool::abi::Kind::U64) == KPOOL_KIND_U64);

const AbiTable &abiTable() {
  static const AbiTable *table = new AbiTable;
  return *table;
}
} // namespace

int64_t kpoolKernelAbiGetNumKernels(void) { return kpool::abi::numKernels; }

const KPoolKernelInfo *kpoolKernelAbiGetKernel(int64_t index) {
  if (index < 0 || index >= kpool::abi::numKernels)
    return nullptr;
  return &abiTable().kernels[index];
}

//===----------------------------------------------------------------------===//
// Pool stores
//===----------------------------------------------------------------------===//

KPoolError *kpoolPoolStoreCreate(const KPoolKernelSet *kernels,
                                 int64_t maxSlots, const float *ape,
                                 KPoolPoolStore **result) {
  return kpoolPoolStoreCreateWithWindow(kernels, maxSlots, 0, ape, result);
}

static KPoolError *
kpoolPoolStoreCreateWithWindowImpl(const KPoolKernelSet *kernels,
                                   int64_t maxSlots, int64_t ringWindow,
                                   const float *ape, KPoolPoolStore **result) {
  const char *op = "pool store";
  if (!result)
    return makeError("pool store: the result pointer is null");
  *result = nullptr;
  KPOOL_CHECK(checkKernels(op, kernels));
  kpool::Status status;
  std::unique_ptr<kpool::PoolStore> created = kpool::PoolStore::create(
      kernels->kernels, maxSlots, ape, status, ringWindow);
  if (!created)
    return wrap(status);
  auto store =
      std::unique_ptr<KPoolPoolStore>(new (std::nothrow) KPoolPoolStore);
  if (!store)
    return makeError("pool store: out of memory");
  store->store = std::move(created);
  store->maxSlots = maxSlots;
  *result = store.release();
  return nullptr;
}

KPoolError *kpoolPoolStoreCreateWithWindow(const KPoolKernelSet *kernels,
                                           int64_t maxSlots, int64_t ringWindow,
                                           const float *ape,
                                           KPoolPoolStore **result) {
  return guard("pool store", [&] {
    return kpoolPoolStoreCreateWithWindowImpl(kernels, maxSlots, ringWindow,
                                              ape, result);
  });
}

void kpoolPoolStoreDestroy(KPoolPoolStore *store) { delete store; }

static KPoolError *
kpoolPoolStoreStepImpl(KPoolPoolStore *store, const KPoolView *k,
                       const KPoolView *gate, int64_t numRequests,
                       const uint32_t *iro, const uint32_t *slots,
                       int64_t *numProduced) {
  const char *op = "step";
  if (numProduced)
    *numProduced = 0;
  if (!store)
    return makeError("step: the pool store is null");
  KPOOL_CHECK(checkView(op, "k", k));
  KPOOL_CHECK(checkView(op, "gate", gate));
  if (numRequests < 0 || numRequests > INT32_MAX)
    return makeError("step: the number of requests must be in [0, 2^31), "
                     "got " +
                     std::to_string(numRequests));
  if (!iro)
    return makeError("step: 'input_row_offsets' is null");
  if (numRequests > 0 && !slots)
    return makeError("step: 'slot_idx' is null");
  std::vector<uint32_t> offsets(iro, iro + numRequests + 1);
  std::vector<uint32_t> slotValues(slots, slots + numRequests);
  std::vector<kpool::ProducedPool> produced;
  if (KPoolError *e =
          wrap(store->store->step(*k, *gate, offsets, slotValues, &produced)))
    return e;
  store->produced.clear();
  for (const kpool::ProducedPool &p : produced)
    store->produced.push_back({p.slot, p.fromRing ? 1 : 0, p.pool});
  if (numProduced)
    *numProduced = static_cast<int64_t>(produced.size());
  return nullptr;
}

KPoolError *kpoolPoolStoreStep(KPoolPoolStore *store, const KPoolView *k,
                               const KPoolView *gate, int64_t numRequests,
                               const uint32_t *iro, const uint32_t *slots,
                               int64_t *numProduced) {
  return guard("step", [&] {
    return kpoolPoolStoreStepImpl(store, k, gate, numRequests, iro, slots,
                                  numProduced);
  });
}

const KPoolProducedPool *kpoolPoolStoreGetProduced(const KPoolPoolStore *store,
                                                   int64_t *count) {
  if (count)
    *count = store ? static_cast<int64_t>(store->produced.size()) : 0;
  return store ? store->produced.data() : nullptr;
}

int64_t kpoolPoolStoreGetMaxSlots(const KPoolPoolStore *store) {
  return store ? store->maxSlots : 0;
}

static bool validSlot(const KPoolPoolStore *store, uint32_t slot) {
  return store && static_cast<int64_t>(slot) < store->maxSlots;
}

int64_t kpoolPoolStoreGetTokens(const KPoolPoolStore *store, uint32_t slot) {
  return validSlot(store, slot) ? store->store->tokens(slot) : -1;
}

int64_t kpoolPoolStoreGetNumPools(const KPoolPoolStore *store, uint32_t slot) {
  return validSlot(store, slot) ? store->store->pools(slot) : -1;
}

const void *kpoolPoolStoreGetPool(const KPoolPoolStore *store, uint32_t slot,
                                  int64_t pool) {
  return validSlot(store, slot) ? store->store->pool(slot, pool) : nullptr;
}

static std::string slotError(const char *op, const KPoolPoolStore *store,
                             uint32_t slot) {
  return std::string(op) + ": slot " + std::to_string(slot) +
         " is not below max_slots = " + std::to_string(store->maxSlots);
}

static KPoolError *kpoolPoolStoreCopyPoolsImpl(const KPoolPoolStore *store,
                                               uint32_t slot, int64_t first,
                                               int64_t count,
                                               const KPoolView *dst) {
  const char *op = "copy_pools";
  if (!store)
    return makeError("copy_pools: the pool store is null");
  if (!validSlot(store, slot))
    return makeError(slotError(op, store, slot));
  KPOOL_CHECK(checkView(op, "dst", dst));
  int64_t have = store->store->pools(slot);
  if (first < 0 || count < 0 || first > have || count > have - first)
    return makeError("copy_pools: pools [" + std::to_string(first) + ", " +
                     std::to_string(first) + " + " + std::to_string(count) +
                     ") are not all among the " + std::to_string(have) +
                     " pools of slot " + std::to_string(slot));
  const kpool::KernelConfig &c = store->store->kernels().config();
  if (dst->rank != 2 || dst->sizes[0] != count || dst->sizes[1] != c.headDim)
    return makeError("copy_pools: 'dst' must have shape [" +
                     std::to_string(count) + ", " + std::to_string(c.headDim) +
                     "] (count x head_dim)");
  if (count > 0 && !dst->data)
    return makeError("copy_pools: 'dst' has no data pointer");
  int64_t size = kpool::elementTypeSize(c.elementType);
  auto *out = static_cast<char *>(dst->data);
  for (int64_t i = 0; i < count; ++i) {
    const auto *row =
        static_cast<const char *>(store->store->pool(slot, first + i));
    for (int64_t d = 0; d < c.headDim; ++d)
      std::memcpy(out + (i * dst->strides[0] + d * dst->strides[1]) * size,
                  row + d * size, size);
  }
  return nullptr;
}

KPoolError *kpoolPoolStoreCopyPools(const KPoolPoolStore *store, uint32_t slot,
                                    int64_t first, int64_t count,
                                    const KPoolView *dst) {
  return guard("copy_pools", [&] {
    return kpoolPoolStoreCopyPoolsImpl(store, slot, first, count, dst);
  });
}

bool kpoolRingHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                           int64_t end) {
  return kpool >= 1 && kpool::ringHoldsPending(kpool, window, accepted, end);
}

int64_t kpoolPoolStoreGetRingWindow(const KPoolPoolStore *store) {
  return store ? store->store->ringWindow() : -1;
}

KPoolError *kpoolPoolStoreAccept(KPoolPoolStore *store, uint32_t slot,
                                 int64_t accepted) {
  if (!store)
    return makeError("accept: the pool store is null");
  return wrap(store->store->accept(slot, accepted));
}

KPoolError *kpoolPoolStoreReset(KPoolPoolStore *store, uint32_t slot) {
  if (!store)
    return makeError("reset: the pool store is null");
  if (!validSlot(store, slot))
    return makeError(slotError("reset", store, slot));
  store->store->reset(slot);
  return nullptr;
}
