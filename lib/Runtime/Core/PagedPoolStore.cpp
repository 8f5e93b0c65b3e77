//===- PagedPoolStore.cpp - a ring and a paged pool cache -----------------===//

#include "kpool/Runtime/PagedPoolStore.h"

#include "StoreCore.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

using namespace kpool;
using namespace kpool::detail;

namespace kpool {

class PagedPoolStoreImpl {
public:
  /// The cache's layout, checked by create().
  struct Layout {
    int64_t pageSize = 0, numPages = 0, pageStride = 0;
    int64_t entryBytes = 0, keysBytes = 0;
    bool fp8 = false;
  };

  PagedPoolStoreImpl(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
                     const float *ape, int64_t ringWindow, const Layout &layout,
                     const std::vector<int64_t> &order, uint8_t *cache)
      : core(std::move(kernels), maxSlots, ape, ringWindow), layout(layout),
        pages(maxSlots) {
    freeStack.reserve(layout.numPages);
    // A stack: the back is handed out first.
    for (int64_t i = layout.numPages - 1; i >= 0; --i)
      freeStack.push_back(
          static_cast<uint32_t>(order.empty() ? i : order[size_t(i)]));
    if (cache) {
      buffer = cache;
    } else {
      owned.reset(static_cast<uint8_t *>(
          std::calloc(size_t(layout.numPages * layout.pageStride), 1)));
      if (!owned)
        throw std::bad_alloc();
      buffer = owned.get();
    }
  }

  Status step(const View &k, const View &gate, const std::vector<uint32_t> &iro,
              const std::vector<uint32_t> &slots,
              std::vector<ProducedPool> *produced);

  View keysView() const;
  View scalesView() const;

  StoreCore core;
  Layout layout;
  uint8_t *buffer = nullptr;
  std::unique_ptr<uint8_t[], StoreCore::FreeDeleter> owned;
  /// Per slot, its pages in block-table order.
  std::vector<std::vector<uint32_t>> pages;
  std::vector<uint32_t> freeStack;
  /// A step's pages taken and block table, kept across steps.
  std::vector<uint32_t> taken, table, pagesAfter;
};

} // namespace kpool

PagedPoolStore::PagedPoolStore(std::unique_ptr<PagedPoolStoreImpl> impl)
    : impl(std::move(impl)) {}

PagedPoolStore::~PagedPoolStore() = default;

std::unique_ptr<PagedPoolStore>
PagedPoolStore::create(std::shared_ptr<KernelSet> kernels, const float *ape,
                       const PagedPoolStoreOptions &o, Status &status) {
  const char *op = "paged pool store";
  auto fail = [&](const std::string &message) {
    status = Status::error(std::string(op) + ": " + message);
    return nullptr;
  };
  int64_t ringBytes = 0;
  status = StoreCore::checkArguments(op, kernels.get(), o.maxSlots, ape,
                                     o.ringWindow, ringBytes);
  if (!status.ok())
    return nullptr;
  const KernelConfig &c = kernels->config();
  if (c.cache.entry == CacheEntry::None)
    return fail("the kernel set has no pool-cache kernels: create it with a "
                "cache format (KernelConfig::cache)");
  auto range = [&](const char *name, int64_t value, int64_t lo, int64_t hi,
                   const char *hiText) -> std::string {
    if (value >= lo && value <= hi)
      return "";
    return std::string(name) + " must be in [" + std::to_string(lo) + ", " +
           hiText + "], got " + std::to_string(value);
  };
  for (std::string e :
       {range("page_size", o.pageSize, 1, int64_t(1) << 31, "2^31"),
        range("num_pages", o.numPages, 1, (int64_t(1) << 31) - 1, "2^31 - 1")})
    if (!e.empty())
      return fail(e);

  PagedPoolStoreImpl::Layout l;
  l.pageSize = o.pageSize;
  l.numPages = o.numPages;
  l.fp8 = c.cache.entry == CacheEntry::FP8;
  l.entryBytes = l.fp8 ? 1 : elementTypeSize(c.elementType);
  int64_t pageBytes = 0;
  if (__builtin_mul_overflow(o.pageSize, c.headDim, &l.keysBytes) ||
      __builtin_mul_overflow(l.keysBytes, l.entryBytes, &l.keysBytes) ||
      __builtin_add_overflow(l.keysBytes, l.fp8 ? 4 * o.pageSize : 0,
                             &pageBytes))
    return fail("a page of " + std::to_string(o.pageSize) +
                " entries does not fit in 64-bit byte sizes");
  l.pageStride = o.pageStride ? o.pageStride : pageBytes;
  if (l.pageStride < pageBytes)
    return fail("page_stride must be 0 (the page's " +
                std::to_string(pageBytes) + " bytes) or at least " +
                std::to_string(pageBytes) + ", got " +
                std::to_string(o.pageStride));
  int64_t align = l.fp8 ? 4 : l.entryBytes;
  if (l.pageStride % align || l.keysBytes % align)
    return fail("page_stride " + std::to_string(l.pageStride) +
                " and the page's " + std::to_string(l.keysBytes) +
                " entry bytes must be multiples of " + std::to_string(align) +
                (l.fp8 ? " (the scales' alignment)" : " (the entry size)"));
  int64_t cacheBytes = 0;
  if (__builtin_mul_overflow(l.numPages, l.pageStride, &cacheBytes))
    return fail("a cache of " + std::to_string(l.numPages) + " pages of " +
                std::to_string(l.pageStride) +
                " bytes does not fit in 64-bit byte sizes");
  if (o.cache && reinterpret_cast<uintptr_t>(o.cache) % align)
    return fail("the cache buffer is not aligned to " + std::to_string(align) +
                " bytes");
  if (!o.pageOrder.empty()) {
    if (int64_t(o.pageOrder.size()) != l.numPages)
      return fail("page_order must be a permutation of the " +
                  std::to_string(l.numPages) + " page ids, got " +
                  std::to_string(o.pageOrder.size()) + " entries");
    std::vector<int64_t> seen(size_t(l.numPages), -1);
    for (size_t i = 0; i < o.pageOrder.size(); ++i) {
      int64_t p = o.pageOrder[i];
      std::string at =
          "page_order[" + std::to_string(i) + "] = " + std::to_string(p);
      if (p < 0 || p >= l.numPages)
        return fail(at + " is not a page id in [0, num_pages = " +
                    std::to_string(l.numPages) + ")");
      if (seen[size_t(p)] >= 0)
        return fail(at + " repeats page_order[" +
                    std::to_string(seen[size_t(p)]) +
                    "] (page_order must be a permutation of the page ids)");
      seen[size_t(p)] = int64_t(i);
    }
  }
  KernelConfig config = c;
  try {
    auto impl = std::make_unique<PagedPoolStoreImpl>(
        std::move(kernels), o.maxSlots, ape, o.ringWindow, l, o.pageOrder,
        static_cast<uint8_t *>(o.cache));
    return std::unique_ptr<PagedPoolStore>(new PagedPoolStore(std::move(impl)));
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return fail("could not allocate the ring of " + std::to_string(ringBytes) +
              " bytes and the cache of " + std::to_string(cacheBytes) +
              " bytes (max_slots " + std::to_string(o.maxSlots) +
              ", ring window " +
              std::to_string(o.ringWindow ? o.ringWindow : config.kpool) +
              ", head_dim " + std::to_string(config.headDim) + ", num_pages " +
              std::to_string(l.numPages) + ")");
}

View PagedPoolStoreImpl::keysView() const {
  View v{};
  if (!buffer)
    return denseView(nullptr, {0, layout.pageSize, core.config.headDim});
  v.data = buffer;
  v.rank = 3;
  v.sizes[0] = layout.numPages;
  v.sizes[1] = layout.pageSize;
  v.sizes[2] = core.config.headDim;
  v.strides[0] = layout.pageStride / layout.entryBytes;
  v.strides[1] = core.config.headDim;
  v.strides[2] = 1;
  return v;
}

View PagedPoolStoreImpl::scalesView() const {
  if (!layout.fp8 || !buffer)
    return denseView(nullptr, {0, layout.fp8 ? layout.pageSize : 0});
  View v{};
  v.data = buffer + layout.keysBytes;
  v.rank = 2;
  v.sizes[0] = layout.numPages;
  v.sizes[1] = layout.pageSize;
  v.strides[0] = layout.pageStride / 4;
  v.strides[1] = 1;
  return v;
}

Status PagedPoolStore::step(const View &k, const View &gate,
                            const std::vector<uint32_t> &iro,
                            const std::vector<uint32_t> &slots,
                            std::vector<ProducedPool> *produced) {
  return impl->core.locked(
      "step", [&] { return impl->step(k, gate, iro, slots, produced); });
}

Status PagedPoolStoreImpl::step(const View &k, const View &gate,
                                const std::vector<uint32_t> &iro,
                                const std::vector<uint32_t> &slots,
                                std::vector<ProducedPool> *produced) {
  StoreCore::Step &s = core.scratch;
  if (Status st = core.prepareStep(k, gate, iro, slots, s); !st.ok())
    return st;
  const int64_t K = core.config.kpool, P = layout.pageSize;
  const size_t batch = slots.size();

  // Pages: the slot's pools after the call need ceil(pools / P) pages; the
  // pages it has (kept across rollbacks) come first.
  pagesAfter.resize(batch);
  int64_t width = 1, wanted = 0, free = int64_t(freeStack.size());
  size_t newPools = 0;
  for (size_t b = 0; b < batch; ++b) {
    int64_t c = s.cache[b], pools = (c + s.tokens(b)) / K;
    int64_t need = (pools + P - 1) / P;
    int64_t have = int64_t(pages[slots[b]].size());
    int64_t extra = std::max<int64_t>(0, need - have);
    if (wanted + extra > free)
      return Status::error(
          "step: request " + std::to_string(b) + " (slot " +
          std::to_string(slots[b]) + "): its pools 0.." +
          std::to_string(pools - 1) + " need " + std::to_string(need) +
          " page(s) of " + std::to_string(P) + " entries, it has " +
          std::to_string(have) + ", so " + std::to_string(extra) +
          " new pages, but " + std::to_string(free - wanted) + " of the " +
          std::to_string(layout.numPages) + " pages are free" +
          (wanted ? " after the call's earlier requests take " +
                        std::to_string(wanted)
                  : std::string()));
    wanted += extra;
    pagesAfter[b] = uint32_t(std::max(need, have));
    width = std::max(width, need);
    newPools += size_t(pools - c / K);
  }

  // Everything that allocates, before anything changes.
  taken.clear();
  taken.reserve(size_t(wanted));
  for (size_t b = 0; b < batch; ++b)
    pages[slots[b]].reserve(pagesAfter[b]);
  table.assign(batch * size_t(width), UINT32_MAX);
  if (produced)
    produced->reserve(produced->size() + newPools);

  for (size_t b = 0; b < batch; ++b) {
    std::vector<uint32_t> &own = pages[slots[b]];
    while (own.size() < pagesAfter[b]) {
      own.push_back(freeStack.back());
      freeStack.pop_back();
      taken.push_back(slots[b]);
    }
    // Only the pages the call's pools use: a table as wide as the call
    // needs, not as the most pages a slot holds.
    std::copy_n(own.begin(), std::min<size_t>(own.size(), size_t(width)),
                table.begin() + b * size_t(width));
  }
  // The one kernel call: kpool.step with to_cache.
  StepCacheArgs a = abi::withCache<StepCacheArgs>(s.args);
  a.cache_keys = keysView();
  a.cache_scales = scalesView();
  a.block_table = denseView(table.data(), {int64_t(batch), width});
  Status st = core.kernelSet->stepCache(a);
  if (!st.ok()) {
    // Give the pages back, last taken first.
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
      freeStack.push_back(pages[*it].back());
      pages[*it].pop_back();
    }
    return st;
  }
  if (produced)
    for (size_t b = 0; b < batch; ++b)
      core.ledger.produced(slots[b], s.tokens(b), *produced);
  core.ledger.commitStep(iro, slots);
  return Status();
}

Status PagedPoolStore::accept(uint32_t slot, int64_t accepted) {
  return impl->core.locked(
      "accept", [&] { return impl->core.acceptSlot(slot, accepted); });
}

Status PagedPoolStore::release(uint32_t slot) {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  StoreCore &core = impl->core;
  if (core.closed)
    return core.closedError("release");
  if (Status s = core.ledger.checkSlot("release", slot); !s.ok())
    return s;
  std::vector<uint32_t> &own = impl->pages[slot];
  // The free stack has room for every page: it never reallocates.
  impl->freeStack.insert(impl->freeStack.end(), own.rbegin(), own.rend());
  own = std::vector<uint32_t>();
  core.ledger.reset(slot);
  core.clearRing(slot);
  return Status();
}

int64_t PagedPoolStore::tokens(uint32_t slot) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  return !core.closed && core.ledger.has(slot) ? core.ledger.length(slot) : -1;
}

int64_t PagedPoolStore::pools(uint32_t slot) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  return !core.closed && core.ledger.has(slot) ? core.ledger.pools(slot) : 0;
}

Status PagedPoolStore::pages(uint32_t slot, std::vector<uint32_t> &out) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  if (core.closed)
    return core.closedError("pages");
  if (Status s = core.ledger.checkSlot("pages", slot); !s.ok())
    return s;
  out = impl->pages[slot];
  return Status();
}

std::vector<uint32_t> PagedPoolStore::freePages() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return std::vector<uint32_t>(impl->freeStack.rbegin(),
                               impl->freeStack.rend());
}

Status PagedPoolStore::entry(uint32_t slot, int64_t pool, void *values,
                             float *scale) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  if (core.closed)
    return core.closedError("entry");
  if (Status s = core.ledger.checkSlot("entry", slot); !s.ok())
    return s;
  int64_t have = core.ledger.pools(slot);
  if (pool < 0 || pool >= have)
    return Status::error("entry: slot " + std::to_string(slot) + ": pool " +
                         std::to_string(pool) + " is not among its " +
                         std::to_string(have) + " complete pools");
  const PagedPoolStoreImpl::Layout &l = impl->layout;
  uint32_t page = impl->pages[slot][size_t(pool / l.pageSize)];
  int64_t row = pool % l.pageSize, D = core.config.headDim;
  const uint8_t *base = impl->buffer + int64_t(page) * l.pageStride;
  if (values)
    std::memcpy(values, base + row * D * l.entryBytes, D * l.entryBytes);
  if (scale && l.fp8)
    std::memcpy(scale, base + l.keysBytes + row * 4, 4);
  return Status();
}

Status PagedPoolStore::slotInfo(uint32_t slot, SlotInfo &info) const {
  return impl->core.locked("slot_info",
                           [&] { return impl->core.slotInfo(slot, info); });
}

uint8_t *PagedPoolStore::buffer() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->buffer;
}

int64_t PagedPoolStore::bufferBytes() const {
  return impl->layout.numPages * impl->layout.pageStride;
}

View PagedPoolStore::cacheKeys() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->keysView();
}

View PagedPoolStore::cacheScales() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->scalesView();
}

View PagedPoolStore::ring() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->core.ringView();
}

void PagedPoolStore::close() {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  PagedPoolStoreImpl &s = *impl;
  if (s.core.closed)
    return;
  s.core.closed = true;
  s.core.release();
  if (s.owned) {
    s.owned.reset();
    s.buffer = nullptr;
  }
  s.pages = std::vector<std::vector<uint32_t>>();
  s.freeStack = std::vector<uint32_t>();
  s.taken = s.table = s.pagesAfter = std::vector<uint32_t>();
}

bool PagedPoolStore::closed() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->core.closed;
}

int64_t PagedPoolStore::maxSlots() const { return impl->core.maxSlots; }
int64_t PagedPoolStore::ringWindow() const { return impl->core.window; }
int64_t PagedPoolStore::pageSize() const { return impl->layout.pageSize; }
int64_t PagedPoolStore::numPages() const { return impl->layout.numPages; }
int64_t PagedPoolStore::pageStride() const { return impl->layout.pageStride; }
int64_t PagedPoolStore::entryBytes() const { return impl->layout.entryBytes; }
const KernelSet &PagedPoolStore::kernels() const {
  return *impl->core.kernelSet;
}
