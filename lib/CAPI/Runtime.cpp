//===- Runtime.cpp - C API of the kpool runtime ---------------------------===//
//
// Thin wrappers over kpool::KernelSet and kpool::PoolStore. Everything the
// C++ API would assert on or index blindly (null pointers, ranks past
// KPOOL_MAX_RANK, out-of-range slots, unknown element types) is checked here
// first and reported as a KPoolError.
//
//===----------------------------------------------------------------------===//

#include "kpool-c/Runtime.h"

#include "kpool/Runtime/PoolStore.h"
#include "kpool/Runtime/Runtime.h"

#include <cstring>
#include <memory>
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

const char *kpoolErrorMessage(const KPoolError *error) {
  return error ? error->message.c_str() : "";
}

void kpoolErrorDestroy(KPoolError *error) { delete error; }

static bool isElementType(int type) {
  return type == KPOOL_BF16 || type == KPOOL_F16 || type == KPOOL_F32;
}

const char *kpoolElementTypeName(KPoolElementType type) {
  return isElementType(type) ? kpool::elementTypeName(type) : nullptr;
}

//===----------------------------------------------------------------------===//
// Kernel sets
//===----------------------------------------------------------------------===//

KPoolError *kpoolKernelSetCreate(KPoolElementType elementType, int64_t headDim,
                                 int64_t kpool, bool openmp, int64_t vectorSize,
                                 KPoolKernelSet **result) {
  if (!result)
    return makeError("kernel set: the result pointer is null");
  *result = nullptr;
  if (!isElementType(elementType))
    return makeError("kernel set: element type " +
                     std::to_string(static_cast<int>(elementType)) +
                     " is not one of KPOOL_BF16, KPOOL_F16, KPOOL_F32");
  if (headDim < 1 || kpool < 1)
    return makeError("kernel set: head_dim and kpool must be at least 1, got " +
                     std::to_string(headDim) + " and " + std::to_string(kpool));
  if (vectorSize < 0)
    return makeError("kernel set: vector_size must not be negative, got " +
                     std::to_string(vectorSize));
  kpool::KernelConfig config;
  config.elementType = elementType;
  config.headDim = headDim;
  config.kpool = kpool;
  config.openmp = openmp;
  config.vectorSize = vectorSize;
  kpool::Status status;
  std::shared_ptr<kpool::KernelSet> kernels =
      kpool::KernelSet::get(config, status);
  if (!kernels)
    return makeError(status.ok() ? "kernel set: compilation failed"
                                 : status.message());
  *result = new KPoolKernelSet{std::move(kernels)};
  return nullptr;
}

void kpoolKernelSetDestroy(KPoolKernelSet *kernels) { delete kernels; }

KPoolElementType kpoolKernelSetGetElementType(const KPoolKernelSet *kernels) {
  return kernels->kernels->config().elementType;
}
int64_t kpoolKernelSetGetHeadDim(const KPoolKernelSet *kernels) {
  return kernels->kernels->config().headDim;
}
int64_t kpoolKernelSetGetKPool(const KPoolKernelSet *kernels) {
  return kernels->kernels->config().kpool;
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

KPoolError *kpoolCompress(const KPoolKernelSet *kernels,
                          const KPoolView *pooled, const KPoolView *k,
                          const KPoolView *gate, const KPoolView *ape,
                          const KPoolView *iro, const KPoolView *pro,
                          const KPoolView *cache, bool validate) {
  const char *op = "compress";
  KPOOL_CHECK(checkKernels(op, kernels));
  KPOOL_CHECK(checkView(op, "pooled", pooled));
  KPOOL_CHECK(checkView(op, "k", k));
  KPOOL_CHECK(checkView(op, "gate", gate));
  KPOOL_CHECK(checkView(op, "ape", ape));
  KPOOL_CHECK(checkView(op, "input_row_offsets", iro));
  KPOOL_CHECK(checkView(op, "pool_row_offsets", pro));
  KPOOL_CHECK(checkView(op, "cache_lengths", cache));
  return wrap(kernels->kernels->compress(*pooled, *k, *gate, *ape, *iro, *pro,
                                         *cache, validation(validate)));
}

KPoolError *kpoolSeedTail(const KPoolKernelSet *kernels, const KPoolView *tail,
                          const KPoolView *k, const KPoolView *gate,
                          const KPoolView *iro, const KPoolView *cache,
                          const KPoolView *slots, int32_t numRequests,
                          bool validate) {
  const char *op = "seed_tail";
  KPOOL_CHECK(checkKernels(op, kernels));
  KPOOL_CHECK(checkView(op, "tail", tail));
  KPOOL_CHECK(checkView(op, "k", k));
  KPOOL_CHECK(checkView(op, "gate", gate));
  KPOOL_CHECK(checkView(op, "input_row_offsets", iro));
  KPOOL_CHECK(checkView(op, "cache_lengths", cache));
  KPOOL_CHECK(checkView(op, "slot_idx", slots));
  return wrap(kernels->kernels->seedTail(*tail, *k, *gate, *iro, *cache, *slots,
                                         numRequests, validation(validate)));
}

KPoolError *kpoolRingClose(const KPoolKernelSet *kernels,
                           const KPoolView *pooled, const KPoolView *closed,
                           const KPoolView *tail, const KPoolView *k,
                           const KPoolView *gate, const KPoolView *ape,
                           const KPoolView *iro, const KPoolView *cache,
                           const KPoolView *slots, int32_t numRequests,
                           bool validate) {
  const char *op = "ring_close";
  KPOOL_CHECK(checkKernels(op, kernels));
  KPOOL_CHECK(checkView(op, "pooled", pooled));
  KPOOL_CHECK(checkView(op, "closed_pool", closed));
  KPOOL_CHECK(checkView(op, "tail", tail));
  KPOOL_CHECK(checkView(op, "k", k));
  KPOOL_CHECK(checkView(op, "gate", gate));
  KPOOL_CHECK(checkView(op, "ape", ape));
  KPOOL_CHECK(checkView(op, "input_row_offsets", iro));
  KPOOL_CHECK(checkView(op, "cache_lengths", cache));
  KPOOL_CHECK(checkView(op, "slot_idx", slots));
  return wrap(kernels->kernels->ringClose(*pooled, *closed, *tail, *k, *gate,
                                          *ape, *iro, *cache, *slots,
                                          numRequests, validation(validate)));
}

KPoolError *kpoolPoolOffsets(const KPoolKernelSet *kernels,
                             const KPoolView *pro, const KPoolView *iro,
                             const KPoolView *cache, bool validate) {
  const char *op = "pool_offsets";
  KPOOL_CHECK(checkKernels(op, kernels));
  KPOOL_CHECK(checkView(op, "pool_row_offsets", pro));
  KPOOL_CHECK(checkView(op, "input_row_offsets", iro));
  KPOOL_CHECK(checkView(op, "cache_lengths", cache));
  return wrap(
      kernels->kernels->poolOffsets(*pro, *iro, *cache, validation(validate)));
}

//===----------------------------------------------------------------------===//
// Pool stores
//===----------------------------------------------------------------------===//

KPoolError *kpoolPoolStoreCreate(const KPoolKernelSet *kernels,
                                 int64_t maxSlots, const float *ape,
                                 KPoolPoolStore **result) {
  return kpoolPoolStoreCreateWithWindow(kernels, maxSlots, 0, ape, result);
}

KPoolError *kpoolPoolStoreCreateWithWindow(const KPoolKernelSet *kernels,
                                           int64_t maxSlots,
                                           int64_t ringWindow,
                                           const float *ape,
                                           KPoolPoolStore **result) {
  const char *op = "pool store";
  if (!result)
    return makeError("pool store: the result pointer is null");
  *result = nullptr;
  KPOOL_CHECK(checkKernels(op, kernels));
  // Slots are uint32 and the ring is one allocation; keep it sane.
  if (maxSlots < 1 || maxSlots > (int64_t(1) << 31))
    return makeError("pool store: max_slots must be in [1, 2^31], got " +
                     std::to_string(maxSlots));
  int64_t kpool = kernels->kernels->config().kpool;
  if (ringWindow != 0 && (ringWindow < kpool || ringWindow > (int64_t(1) << 31)))
    return makeError("pool store: ring_window must be 0 (kpool) or in [kpool "
                     "= " + std::to_string(kpool) + ", 2^31], got " +
                     std::to_string(ringWindow));
  if (!ape)
    return makeError("pool store: 'ape' is null");
  auto store = std::make_unique<KPoolPoolStore>();
  store->store = std::make_unique<kpool::PoolStore>(kernels->kernels, maxSlots,
                                                    ape, ringWindow);
  store->maxSlots = maxSlots;
  *result = store.release();
  return nullptr;
}

void kpoolPoolStoreDestroy(KPoolPoolStore *store) { delete store; }

KPoolError *kpoolPoolStoreStep(KPoolPoolStore *store, const KPoolView *k,
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

KPoolError *kpoolPoolStoreCopyPools(const KPoolPoolStore *store, uint32_t slot,
                                    int64_t first, int64_t count,
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
