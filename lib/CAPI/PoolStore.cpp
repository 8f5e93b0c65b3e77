//===- PoolStore.cpp - C API of the pool store ----------------------------===//
//
// Thin wrappers over kpool::PoolStore.
//
//===----------------------------------------------------------------------===//

#include "Handles.h"

#include "kpool/Runtime/PoolStore.h"

#include <cstring>
#include <vector>

using namespace kpool::capi;

struct KPoolPoolStore {
  std::unique_ptr<kpool::PoolStore> store;
  int64_t maxSlots;
  std::vector<KPoolProducedPool> produced;
};

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
