//===- PoolStore.cpp - C API of the pool stores ---------------------------===//
//
// Thin wrappers over kpool::PoolStore and kpool::PagedPoolStore
// (kpool-c/Stores.h): what the C++ API takes for granted and a C caller may
// get wrong (null pointers, ranks past KPOOL_MAX_RANK, negative counts, a
// produced buffer too small) is reported here; everything else, the lock
// and close() included, is the C++ stores'. A handle holds nothing but its
// store, so two threads' calls share no state here.
//
//===----------------------------------------------------------------------===//

#include "Handles.h"

#include "kpool-c/Stores.h"
#include "kpool/Runtime/PagedPoolStore.h"
#include "kpool/Runtime/PoolStore.h"

#include <algorithm>
#include <vector>

using namespace kpool::capi;

struct KPoolPoolStore {
  std::unique_ptr<kpool::PoolStore> store;
};

struct KPoolPagedPoolStore {
  std::unique_ptr<kpool::PagedPoolStore> store;
};

bool kpoolRingHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                           int64_t end) {
  return kpool >= 1 && kpool::ringHoldsPending(kpool, window, accepted, end);
}

int64_t kpoolStoreMaxProduced(int64_t kpool, int64_t rows,
                              int64_t numRequests) {
  if (kpool < 1 || rows < 0 || numRequests < 0)
    return -1;
  int64_t bound;
  if (__builtin_add_overflow(rows / kpool, numRequests, &bound))
    return INT64_MAX;
  return bound;
}

namespace {

/// The arguments of a step, checked for what the C++ stores take for
/// granted, and copied into the vectors they take.
struct StepArguments {
  std::vector<uint32_t> offsets, slots;
  std::vector<kpool::ProducedPool> produced;
};

KPoolError *checkStep(const kpool::KernelConfig &config, const KPoolView *k,
                      const KPoolView *gate, int64_t numRequests,
                      const uint32_t *iro, const uint32_t *slots,
                      const KPoolProducedPool *produced, int64_t capacity,
                      StepArguments &a) {
  const char *op = "step";
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
  if (capacity < 0)
    return makeError("step: the capacity of 'produced' must be at least 0, "
                     "got " +
                     std::to_string(capacity));
  if (produced) {
    int64_t rows = k->rank >= 1 ? std::max<int64_t>(k->sizes[0], 0) : 0;
    int64_t most = kpoolStoreMaxProduced(config.kpool, rows, numRequests);
    if (capacity < most)
      return makeError(
          "step: 'produced' has room for " + std::to_string(capacity) +
          " records, a call of " + std::to_string(rows) + " rows of 'k' and " +
          std::to_string(numRequests) + " requests may produce " +
          std::to_string(most) +
          " (floor(rows / kpool) + requests: kpoolStoreMaxProduced)");
  }
  a.offsets.assign(iro, iro + numRequests + 1);
  a.slots.assign(slots, slots + numRequests);
  return nullptr;
}

/// One step of either store.
template <typename Store>
KPoolError *step(Store *store, const KPoolView *k, const KPoolView *gate,
                 int64_t numRequests, const uint32_t *iro,
                 const uint32_t *slots, KPoolProducedPool *produced,
                 int64_t capacity, int64_t *numProduced) {
  if (numProduced)
    *numProduced = 0;
  if (!store || !store->store)
    return makeError("step: the pool store is null");
  StepArguments a;
  KPOOL_CHECK(checkStep(store->store->kernels().config(), k, gate, numRequests,
                        iro, slots, produced, capacity, a));
  KPOOL_CHECK(
      wrap(store->store->step(*k, *gate, a.offsets, a.slots, &a.produced)));
  if (produced)
    for (size_t i = 0; i < a.produced.size(); ++i)
      produced[i] = {a.produced[i].slot, a.produced[i].fromRing ? 1 : 0,
                     a.produced[i].pool};
  if (numProduced)
    *numProduced = static_cast<int64_t>(a.produced.size());
  return nullptr;
}

/// The slot's bookkeeping, or false: a null store, a bad slot, a closed
/// store (or no memory for the message that says which).
template <typename Store>
bool slotInfo(const Store *store, uint32_t slot, kpool::SlotInfo &info) {
  try {
    return store && store->store && store->store->slotInfo(slot, info).ok();
  } catch (const std::bad_alloc &) {
    return false;
  }
}

KPoolError *nullStore(const char *op) {
  return makeError(std::string(op) + ": the pool store is null");
}

} // namespace

//===----------------------------------------------------------------------===//
// PoolStore
//===----------------------------------------------------------------------===//

KPoolError *kpoolPoolStoreCreate(const KPoolKernelSet *kernels,
                                 int64_t maxSlots, const float *ape,
                                 KPoolPoolStore **result) {
  return kpoolPoolStoreCreateWithWindow(kernels, maxSlots, 0, ape, result);
}

KPoolError *kpoolPoolStoreCreateWithWindow(const KPoolKernelSet *kernels,
                                           int64_t maxSlots, int64_t ringWindow,
                                           const float *ape,
                                           KPoolPoolStore **result) {
  return guard("pool store", [&]() -> KPoolError * {
    if (!result)
      return makeError("pool store: the result pointer is null");
    *result = nullptr;
    KPOOL_CHECK(checkKernels("pool store", kernels));
    kpool::Status status;
    std::unique_ptr<kpool::PoolStore> created = kpool::PoolStore::create(
        kernels->kernels, maxSlots, ape, status, ringWindow);
    if (!created)
      return wrap(status);
    *result = new KPoolPoolStore{std::move(created)};
    return nullptr;
  });
}

KPoolError *kpoolPoolStoreStep(KPoolPoolStore *store, const KPoolView *k,
                               const KPoolView *gate, int64_t numRequests,
                               const uint32_t *iro, const uint32_t *slots,
                               KPoolProducedPool *produced, int64_t capacity,
                               int64_t *numProduced) {
  return guard("step", [&] {
    return step(store, k, gate, numRequests, iro, slots, produced, capacity,
                numProduced);
  });
}

KPoolError *kpoolPoolStoreAccept(KPoolPoolStore *store, uint32_t slot,
                                 int64_t accepted) {
  return guard("accept", [&] {
    return store ? wrap(store->store->accept(slot, accepted))
                 : nullStore("accept");
  });
}

KPoolError *kpoolPoolStoreReset(KPoolPoolStore *store, uint32_t slot) {
  return guard("reset", [&] {
    return store ? wrap(store->store->reset(slot)) : nullStore("reset");
  });
}

void kpoolPoolStoreClose(KPoolPoolStore *store) {
  if (store)
    store->store->close();
}

bool kpoolPoolStoreIsClosed(const KPoolPoolStore *store) {
  return !store || store->store->closed();
}

void kpoolPoolStoreDestroy(KPoolPoolStore *store) { delete store; }

int64_t kpoolPoolStoreGetMaxSlots(const KPoolPoolStore *store) {
  return store ? store->store->maxSlots() : 0;
}

int64_t kpoolPoolStoreGetRingWindow(const KPoolPoolStore *store) {
  return store ? store->store->ringWindow() : -1;
}

int64_t kpoolPoolStoreGetTokens(const KPoolPoolStore *store, uint32_t slot) {
  kpool::SlotInfo info;
  return slotInfo(store, slot, info) ? info.tokens : -1;
}

int64_t kpoolPoolStoreGetNumPools(const KPoolPoolStore *store, uint32_t slot) {
  kpool::SlotInfo info;
  return slotInfo(store, slot, info)
             ? info.tokens / store->store->kernels().config().kpool
             : -1;
}

const void *kpoolPoolStoreGetPool(const KPoolPoolStore *store, uint32_t slot,
                                  int64_t pool) {
  return store ? store->store->pool(slot, pool) : nullptr;
}

KPoolError *kpoolPoolStoreCopyPools(const KPoolPoolStore *store, uint32_t slot,
                                    int64_t first, int64_t count,
                                    const KPoolView *dst) {
  return guard("copy_pools", [&]() -> KPoolError * {
    if (!store)
      return nullStore("copy_pools");
    KPOOL_CHECK(checkView("copy_pools", "dst", dst));
    return wrap(store->store->copyPools(slot, first, count, *dst));
  });
}

//===----------------------------------------------------------------------===//
// PagedPoolStore
//===----------------------------------------------------------------------===//

KPoolError *kpoolPagedPoolStoreCreate(const KPoolKernelSet *kernels,
                                      const float *ape,
                                      const KPoolPagedPoolStoreOptions *options,
                                      KPoolPagedPoolStore **result) {
  const char *op = "paged pool store";
  return guard(op, [&]() -> KPoolError * {
    if (!result)
      return makeError("paged pool store: the result pointer is null");
    *result = nullptr;
    KPOOL_CHECK(checkKernels(op, kernels));
    if (!options)
      return makeError("paged pool store: the options are null");
    kpool::PagedPoolStoreOptions o;
    o.maxSlots = options->maxSlots;
    o.pageSize = options->pageSize;
    o.numPages = options->numPages;
    o.pageStride = options->pageStride;
    o.ringWindow = options->ringWindow;
    o.cache = options->cache;
    // numPages entries are read only when that count is valid (the C++
    // store rejects the others first).
    if (options->pageOrder && options->numPages >= 1 &&
        options->numPages < (int64_t(1) << 31))
      o.pageOrder.assign(options->pageOrder,
                         options->pageOrder + options->numPages);
    kpool::Status status;
    std::unique_ptr<kpool::PagedPoolStore> created =
        kpool::PagedPoolStore::create(kernels->kernels, ape, o, status);
    if (!created)
      return wrap(status);
    *result = new KPoolPagedPoolStore{std::move(created)};
    return nullptr;
  });
}

KPoolError *kpoolPagedPoolStoreStep(KPoolPagedPoolStore *store,
                                    const KPoolView *k, const KPoolView *gate,
                                    int64_t numRequests, const uint32_t *iro,
                                    const uint32_t *slots,
                                    KPoolProducedPool *produced,
                                    int64_t capacity, int64_t *numProduced) {
  return guard("step", [&] {
    return step(store, k, gate, numRequests, iro, slots, produced, capacity,
                numProduced);
  });
}

KPoolError *kpoolPagedPoolStoreAccept(KPoolPagedPoolStore *store, uint32_t slot,
                                      int64_t accepted) {
  return guard("accept", [&] {
    return store ? wrap(store->store->accept(slot, accepted))
                 : nullStore("accept");
  });
}

KPoolError *kpoolPagedPoolStoreRelease(KPoolPagedPoolStore *store,
                                       uint32_t slot) {
  return guard("release", [&] {
    return store ? wrap(store->store->release(slot)) : nullStore("release");
  });
}

void kpoolPagedPoolStoreClose(KPoolPagedPoolStore *store) {
  if (store)
    store->store->close();
}

bool kpoolPagedPoolStoreIsClosed(const KPoolPagedPoolStore *store) {
  return !store || store->store->closed();
}

void kpoolPagedPoolStoreDestroy(KPoolPagedPoolStore *store) { delete store; }

int64_t kpoolPagedPoolStoreGetTokens(const KPoolPagedPoolStore *store,
                                     uint32_t slot) {
  kpool::SlotInfo info;
  return slotInfo(store, slot, info) ? info.tokens : -1;
}

int64_t kpoolPagedPoolStoreGetNumPools(const KPoolPagedPoolStore *store,
                                       uint32_t slot) {
  kpool::SlotInfo info;
  return slotInfo(store, slot, info)
             ? info.tokens / store->store->kernels().config().kpool
             : -1;
}

/// Copies `ids` into the caller's `out` (room for `capacity`).
static KPoolError *copyPages(const char *op, const std::vector<uint32_t> &ids,
                             uint32_t *out, int64_t capacity, int64_t *count) {
  if (capacity < 0 || (capacity > 0 && !out))
    return makeError(std::string(op) +
                     ": 'pages' must be NULL with capacity "
                     "0, or hold capacity >= 0 entries; got capacity " +
                     std::to_string(capacity));
  if (count)
    *count = static_cast<int64_t>(ids.size());
  std::copy_n(ids.begin(), std::min<int64_t>(capacity, ids.size()), out);
  return nullptr;
}

KPoolError *kpoolPagedPoolStoreGetPages(const KPoolPagedPoolStore *store,
                                        uint32_t slot, uint32_t *pages,
                                        int64_t capacity, int64_t *count) {
  return guard("pages", [&]() -> KPoolError * {
    if (count)
      *count = 0;
    if (!store)
      return nullStore("pages");
    std::vector<uint32_t> ids;
    KPOOL_CHECK(wrap(store->store->pages(slot, ids)));
    return copyPages("pages", ids, pages, capacity, count);
  });
}

KPoolError *kpoolPagedPoolStoreGetFreePages(const KPoolPagedPoolStore *store,
                                            uint32_t *pages, int64_t capacity,
                                            int64_t *count) {
  return guard("free_pages", [&]() -> KPoolError * {
    if (count)
      *count = 0;
    if (!store)
      return nullStore("free_pages");
    if (store->store->closed())
      return makeError("free_pages: the store is closed");
    return copyPages("free_pages", store->store->freePages(), pages, capacity,
                     count);
  });
}

KPoolError *kpoolPagedPoolStoreGetEntry(const KPoolPagedPoolStore *store,
                                        uint32_t slot, int64_t pool,
                                        void *values, int64_t valuesBytes,
                                        float *scale) {
  return guard("entry", [&]() -> KPoolError * {
    if (!store)
      return nullStore("entry");
    const kpool::PagedPoolStore &s = *store->store;
    int64_t need = s.kernels().config().headDim * s.entryBytes();
    if (values && valuesBytes < need)
      return makeError("entry: 'values' has " + std::to_string(valuesBytes) +
                       " bytes, an entry has " + std::to_string(need) +
                       " (head_dim x entry bytes)");
    return wrap(s.entry(slot, pool, values, scale));
  });
}

KPoolError *kpoolPagedPoolStoreGetLayout(const KPoolPagedPoolStore *store,
                                         KPoolPagedPoolStoreLayout *layout) {
  if (!store)
    return nullStore("layout");
  if (!layout)
    return makeError("layout: the result pointer is null");
  const kpool::PagedPoolStore &s = *store->store;
  layout->maxSlots = s.maxSlots();
  layout->ringWindow = s.ringWindow();
  layout->pageSize = s.pageSize();
  layout->numPages = s.numPages();
  layout->pageStride = s.pageStride();
  layout->entryBytes = s.entryBytes();
  layout->buffer = s.buffer();
  layout->bufferBytes = s.bufferBytes();
  layout->cacheKeys = s.cacheKeys();
  layout->cacheScales = s.cacheScales();
  return nullptr;
}
