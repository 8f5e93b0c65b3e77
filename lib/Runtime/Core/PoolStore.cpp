//===- PoolStore.cpp - a ring and pooled-key store for requests -----------===//

#include "kpool/Runtime/PoolStore.h"

#include "StoreCore.h"

#include <cassert>
#include <cstring>
#include <new>
#include <stdexcept>

using namespace kpool;
using namespace kpool::detail;

namespace kpool {

class PoolStoreImpl {
public:
  PoolStoreImpl(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
                const float *ape, int64_t ringWindow)
      : core(std::move(kernels), maxSlots, ape, ringWindow), store(maxSlots) {}

  Status step(const View &k, const View &gate, const std::vector<uint32_t> &iro,
              const std::vector<uint32_t> &slots,
              std::vector<ProducedPool> *produced);

  StoreCore core;
  /// Per slot, its pools' rows (pools(slot) x head_dim elements).
  std::vector<std::vector<uint8_t>> store;
};

} // namespace kpool

PoolStore::PoolStore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
                     const float *ape, int64_t ringWindow)
    : impl(std::make_unique<PoolStoreImpl>(std::move(kernels), maxSlots, ape,
                                           ringWindow)) {}

PoolStore::~PoolStore() = default;

std::unique_ptr<PoolStore> PoolStore::create(std::shared_ptr<KernelSet> kernels,
                                             int64_t maxSlots, const float *ape,
                                             Status &status,
                                             int64_t ringWindow) {
  const char *op = "pool store";
  int64_t ringBytes = 0;
  status = StoreCore::checkArguments(op, kernels.get(), maxSlots, ape,
                                     ringWindow, ringBytes);
  if (!status.ok())
    return nullptr;
  KernelConfig config = kernels->config();
  try {
    return std::make_unique<PoolStore>(std::move(kernels), maxSlots, ape,
                                       ringWindow);
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  status =
      StoreCore::allocationError(op, config, maxSlots, ringWindow, ringBytes);
  return nullptr;
}

Status PoolStore::step(const View &k, const View &gate,
                       const std::vector<uint32_t> &iro,
                       const std::vector<uint32_t> &slots,
                       std::vector<ProducedPool> *produced) {
  return impl->core.locked(
      "step", [&] { return impl->step(k, gate, iro, slots, produced); });
}

Status PoolStoreImpl::step(const View &k, const View &gate,
                           const std::vector<uint32_t> &iro,
                           const std::vector<uint32_t> &slots,
                           std::vector<ProducedPool> *produced) {
  StoreCore::Step &s = core.scratch;
  if (Status st = core.prepareStep(k, gate, iro, slots, s); !st.ok())
    return st;
  const int64_t K = core.config.kpool, rowBytes = core.rowBytes;
  size_t batch = slots.size();

  // Everything that allocates, before the kernel changes the ring: an
  // allocation that fails (thrown, reported by step()) changes nothing.
  size_t newPools = 0;
  for (size_t b = 0; b < batch; ++b) {
    int64_t c = s.cache[b], count = (c + s.tokens(b)) / K - c / K;
    std::vector<uint8_t> &pools = store[slots[b]];
    pools.reserve(pools.size() + count * rowBytes);
    newPools += count;
  }
  if (produced)
    produced->reserve(produced->size() + newPools);

  // The one kernel call: ring_close, pool_offsets, compress and seed_tail
  // (kpool.step).
  if (Status st = core.kernelSet->step(s.args); !st.ok())
    return st;

  // Pools complete in id order: the ring's pool first, then compress's.
  for (size_t b = 0; b < batch; ++b) {
    std::vector<uint8_t> &pools = store[slots[b]];
    const uint8_t *closedRow = s.closedRows.data.get() + b * rowBytes;
    if (s.closed[b] >= 0)
      pools.insert(pools.end(), closedRow, closedRow + rowBytes);
    const uint8_t *pooled = s.pooled.data.get();
    pools.insert(pools.end(), pooled + int64_t(s.pro[b]) * rowBytes,
                 pooled + int64_t(s.pro[b + 1]) * rowBytes);
    if (produced)
      core.ledger.produced(slots[b], s.tokens(b), *produced);
  }
  core.ledger.commitStep(iro, slots);
  for (size_t b = 0; b < batch; ++b)
    assert(int64_t(store[slots[b]].size()) ==
               core.ledger.pools(slots[b]) * rowBytes &&
           "the kernels' pools and the ledger's count disagree");
  return Status();
}

Status PoolStore::accept(uint32_t slot, int64_t accepted) {
  return impl->core.locked("accept", [&] {
    StoreCore &core = impl->core;
    if (Status s = core.acceptSlot(slot, accepted); !s.ok())
      return s;
    // Shrinking never allocates.
    impl->store[slot].resize(core.ledger.pools(slot) * core.rowBytes);
    return Status();
  });
}

Status PoolStore::reset(uint32_t slot) {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  StoreCore &core = impl->core;
  if (core.closed)
    return core.closedError("reset");
  if (Status s = core.ledger.checkSlot("reset", slot); !s.ok())
    return s;
  core.ledger.reset(slot);
  core.clearRing(slot);
  impl->store[slot] = std::vector<uint8_t>();
  return Status();
}

int64_t PoolStore::tokens(uint32_t slot) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  return !core.closed && core.ledger.has(slot) ? core.ledger.length(slot) : -1;
}

int64_t PoolStore::pools(uint32_t slot) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  return !core.closed && core.ledger.has(slot) ? core.ledger.pools(slot) : 0;
}

const void *PoolStore::pool(uint32_t slot, int64_t pool) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  if (core.closed || !core.ledger.has(slot) || pool < 0 ||
      pool >= core.ledger.pools(slot))
    return nullptr;
  return impl->store[slot].data() + pool * core.rowBytes;
}

Status PoolStore::copyPools(uint32_t slot, int64_t first, int64_t count,
                            const View &dst) const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  const StoreCore &core = impl->core;
  const char *op = "copy_pools";
  if (core.closed)
    return core.closedError(op);
  if (Status s = core.ledger.checkSlot(op, slot); !s.ok())
    return s;
  int64_t have = core.ledger.pools(slot);
  if (first < 0 || count < 0 || first > have || count > have - first)
    return Status::error("copy_pools: pools [" + std::to_string(first) + ", " +
                         std::to_string(first) + " + " + std::to_string(count) +
                         ") are not all among the " + std::to_string(have) +
                         " pools of slot " + std::to_string(slot));
  const int64_t D = core.config.headDim;
  if (dst.rank != 2 || dst.sizes[0] != count || dst.sizes[1] != D)
    return Status::error("copy_pools: 'dst' must have shape [" +
                         std::to_string(count) + ", " + std::to_string(D) +
                         "] (count x head_dim)");
  if (count > 0 && !dst.data)
    return Status::error("copy_pools: 'dst' has no data pointer");
  int64_t size = elementTypeSize(core.config.elementType);
  auto *out = static_cast<uint8_t *>(dst.data);
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t *row = impl->store[slot].data() + (first + i) * core.rowBytes;
    for (int64_t d = 0; d < D; ++d)
      std::memcpy(out + (i * dst.strides[0] + d * dst.strides[1]) * size,
                  row + d * size, size);
  }
  return Status();
}

Status PoolStore::slotInfo(uint32_t slot, SlotInfo &info) const {
  return impl->core.locked("slot_info",
                           [&] { return impl->core.slotInfo(slot, info); });
}

View PoolStore::ring() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->core.ringView();
}

void PoolStore::close() {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  if (impl->core.closed)
    return;
  impl->core.closed = true;
  impl->core.release();
  impl->store = std::vector<std::vector<uint8_t>>();
}

bool PoolStore::closed() const {
  std::lock_guard<std::mutex> lock(impl->core.mutex);
  return impl->core.closed;
}

int64_t PoolStore::maxSlots() const { return impl->core.maxSlots; }

int64_t PoolStore::ringWindow() const { return impl->core.window; }

const KernelSet &PoolStore::kernels() const { return *impl->core.kernelSet; }
