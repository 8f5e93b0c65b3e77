//===- PoolStore.cpp - a ring and pooled-key store for requests -----------===//

#include "kpool/Runtime/PoolStore.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

using namespace kpool;

bool kpool::ringHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                             int64_t end) {
  return accepted % kpool == 0 || end - accepted / kpool * kpool <= window;
}

PoolStore::PoolStore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
                     const float *apeData, int64_t ringWindow)
    : kernelSet(std::move(kernels)), maxSlots(maxSlots) {
  const KernelConfig &c = kernelSet->config();
  window = ringWindow > 0 ? ringWindow : c.kpool;
  rowBytes = c.headDim * elementTypeSize(c.elementType);
  ape.assign(apeData, apeData + c.kpool * c.headDim);
  // The ring first: it is the allocation that can be huge.
  size_t ringBytes = size_t(maxSlots) * 2 * window * rowBytes;
  ring.reset(static_cast<uint8_t *>(std::calloc(ringBytes ? ringBytes : 1, 1)));
  if (!ring)
    throw std::bad_alloc();
  seen.assign(maxSlots, 0);
  stepBegin.assign(maxSlots, 0);
  ringEnd.assign(maxSlots, 0);
  store.resize(maxSlots);
}

std::unique_ptr<PoolStore> PoolStore::create(std::shared_ptr<KernelSet> kernels,
                                             int64_t maxSlots, const float *ape,
                                             Status &status,
                                             int64_t ringWindow) {
  status = Status();
  if (!kernels) {
    status = Status::error("pool store: the kernel set is null");
    return nullptr;
  }
  if (!ape) {
    status = Status::error("pool store: 'ape' is null");
    return nullptr;
  }
  // Slots are uint32 and every slot has a pool list.
  if (maxSlots < 1 || maxSlots > (int64_t(1) << 31)) {
    status = Status::error("pool store: max_slots must be in [1, 2^31], got " +
                           std::to_string(maxSlots));
    return nullptr;
  }
  const KernelConfig &c = kernels->config();
  if (ringWindow != 0 &&
      (ringWindow < c.kpool || ringWindow > (int64_t(1) << 31))) {
    status = Status::error("pool store: ring_window must be 0 (kpool) or in "
                           "[kpool = " +
                           std::to_string(c.kpool) + ", 2^31], got " +
                           std::to_string(ringWindow));
    return nullptr;
  }
  int64_t window = ringWindow > 0 ? ringWindow : c.kpool;
  int64_t ringBytes = 0;
  if (__builtin_mul_overflow(maxSlots, 2 * window, &ringBytes) ||
      __builtin_mul_overflow(ringBytes, c.headDim, &ringBytes) ||
      __builtin_mul_overflow(ringBytes, elementTypeSize(c.elementType),
                             &ringBytes)) {
    status = Status::error("pool store: a ring of " + std::to_string(maxSlots) +
                           " x 2 x " + std::to_string(window) + " x " +
                           std::to_string(c.headDim) + " " +
                           elementTypeName(c.elementType) +
                           " elements does not fit in 64-bit byte sizes");
    return nullptr;
  }
  try {
    return std::make_unique<PoolStore>(std::move(kernels), maxSlots, ape,
                                       ringWindow);
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  status = Status::error("pool store: could not allocate the ring of " +
                         std::to_string(ringBytes) + " bytes (max_slots " +
                         std::to_string(maxSlots) + ", ring window " +
                         std::to_string(window) + ", head_dim " +
                         std::to_string(c.headDim) + ")");
  return nullptr;
}

int64_t PoolStore::tokens(uint32_t slot) const {
  return slot < maxSlots ? int64_t(seen[slot]) : -1;
}

int64_t PoolStore::pools(uint32_t slot) const {
  if (slot >= maxSlots)
    return 0;
  return static_cast<int64_t>(store[slot].size()) / rowBytes;
}

const void *PoolStore::pool(uint32_t slot, int64_t pool) const {
  if (pool < 0 || pool >= pools(slot))
    return nullptr;
  return store[slot].data() + pool * rowBytes;
}

void PoolStore::reset(uint32_t slot) {
  if (slot >= maxSlots)
    return;
  seen[slot] = stepBegin[slot] = ringEnd[slot] = 0;
  store[slot].clear();
}

Status PoolStore::accept(uint32_t slot, int64_t accepted) {
  std::string where = "accept: slot " + std::to_string(slot) + ": ";
  if (slot >= maxSlots)
    return Status::error(where +
                         "not below max_slots = " + std::to_string(maxSlots));
  int64_t begin = stepBegin[slot], held = int64_t(seen[slot]) - begin;
  if (accepted < 0 || accepted > held)
    return Status::error(where + "accepted = " + std::to_string(accepted) +
                         " is outside [0, " + std::to_string(held) +
                         "] (the tokens held from its last step, positions [" +
                         std::to_string(begin) + ", " +
                         std::to_string(begin + held) + "))");
  const int64_t K = kernelSet->config().kpool;
  int64_t length = begin + accepted, end = ringEnd[slot];
  if (!ringHoldsPending(K, window, length, end)) {
    int64_t first = length / K * K;
    return Status::error(
        where + "keeping " + std::to_string(accepted) + " token(s) (length " +
        std::to_string(length) + ") needs positions " + std::to_string(first) +
        ".." + std::to_string(length - 1) + " of pool " +
        std::to_string(length / K) +
        " in the ring, but its last call wrote up to position " +
        std::to_string(end - 1) + " and a window of " + std::to_string(window) +
        " rows keeps only positions " + std::to_string(end - window) +
        " and later; a ring window of at least " + std::to_string(end - first) +
        " rows would hold them");
  }
  seen[slot] = static_cast<uint32_t>(length);
  store[slot].resize((length / K) * rowBytes);
  return Status();
}

Status PoolStore::step(const View &k, const View &gate,
                       const std::vector<uint32_t> &iro,
                       const std::vector<uint32_t> &slotsIn,
                       std::vector<ProducedPool> *produced) {
  try {
    return stepImpl(k, gate, iro, slotsIn, produced);
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return Status::error("step: out of memory");
}

Status PoolStore::stepImpl(const View &k, const View &gate,
                           const std::vector<uint32_t> &iro,
                           const std::vector<uint32_t> &slotsIn,
                           std::vector<ProducedPool> *produced) {
  const KernelConfig &c = kernelSet->config();
  int64_t batch = static_cast<int64_t>(slotsIn.size());
  if (static_cast<int64_t>(iro.size()) != batch + 1)
    return Status::error("step: input_row_offsets must have one more entry "
                         "than slots (" +
                         std::to_string(batch + 1) + "), got " +
                         std::to_string(iro.size()));
  std::vector<uint32_t> slots(slotsIn), cache(batch), pro(batch + 1);
  for (int64_t b = 0; b < batch; ++b) {
    if (slots[b] >= maxSlots)
      return Status::error(
          "step: request " + std::to_string(b) + ": slot_idx[" +
          std::to_string(b) + "] = " + std::to_string(slots[b]) +
          " is not below max_slots = " + std::to_string(maxSlots));
    cache[b] = seen[slots[b]];
    if (int64_t(cache[b]) + int64_t(iro[b + 1]) - int64_t(iro[b]) >
        int64_t(UINT32_MAX))
      return Status::error("step: request " + std::to_string(b) + " (slot " +
                           std::to_string(slots[b]) +
                           "): its length would pass 2^32 - 1 tokens (cache "
                           "lengths are unsigned 32-bit)");
  }
  View iroView = denseView(const_cast<uint32_t *>(iro.data()), {batch + 1});
  View cacheView = denseView(cache.data(), {batch});
  View slotView = denseView(slots.data(), {batch});
  View proView = denseView(pro.data(), {batch + 1});
  View apeView = denseView(ape.data(), {c.kpool, c.headDim});
  View ringView = denseView(ring.get(), {maxSlots, 2, window, c.headDim});
  int32_t numRequests = static_cast<int32_t>(batch);

  // Everything the step allocates, before the kernel changes the ring: an
  // allocation that fails (thrown, reported by step()) changes nothing. A
  // request of n tokens completes at most floor(n / K) + 1 pools of this
  // call's tokens, plus the one the ring closes.
  // Only valid metadata reaches the kernel (the step validates it first),
  // so the rows of `k` bound every request's tokens: a call of T rows
  // completes at most floor(T / K) + B pools.
  int64_t capacity = 0, kRows = k.sizes[0] > 0 ? k.sizes[0] : 0;
  for (int64_t b = 0; b < batch; ++b)
    capacity += std::clamp<int64_t>(int64_t(iro[b + 1]) - int64_t(iro[b]), 0,
                                    kRows) /
                    c.kpool +
                1;
  capacity = std::min(capacity, kRows / c.kpool + batch);
  std::vector<uint8_t> closedRows(batch * rowBytes);
  std::vector<int32_t> closed(batch);
  std::vector<uint8_t> pooled(capacity * rowBytes);
  int64_t newPools = 0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t count =
        2 + std::clamp<int64_t>(int64_t(iro[b + 1]) - int64_t(iro[b]), 0,
                                kRows) /
                c.kpool;
    std::vector<uint8_t> &pools = store[slots[b]];
    pools.reserve(pools.size() + count * rowBytes);
    newPools += count;
  }
  if (produced)
    produced->reserve(produced->size() + newPools);

  // One kernel: ring_close, pool_offsets, compress, seed_tail (kpool.step).
  StepArgs a{};
  a.closed = denseView(closedRows.data(), {batch, c.headDim});
  a.closed_pool = denseView(closed.data(), {batch});
  a.pool_row_offsets = proView;
  a.pooled = denseView(pooled.data(), {capacity, c.headDim});
  a.tail = ringView;
  a.k = k;
  a.gate = gate;
  a.ape = apeView;
  a.input_row_offsets = iroView;
  a.cache_lengths = cacheView;
  a.slot_idx = slotView;
  a.num_requests = numRequests;
  if (Status s = kernelSet->step(a); !s.ok())
    return s;

  // Pools complete in id order: the ring's pool first, then compress's.
  for (int64_t b = 0; b < batch; ++b) {
    uint32_t slot = slots[b];
    std::vector<uint8_t> &pools = store[slot];
    auto append = [&](const uint8_t *row, bool fromRing) {
      if (produced)
        produced->push_back(
            {slot, static_cast<int64_t>(pools.size()) / rowBytes, fromRing});
      pools.insert(pools.end(), row, row + rowBytes);
    };
    if (closed[b] >= 0)
      append(closedRows.data() + b * rowBytes, /*fromRing=*/true);
    for (uint32_t r = pro[b]; r < pro[b + 1]; ++r)
      append(pooled.data() + int64_t(r) * rowBytes, /*fromRing=*/false);
    stepBegin[slot] = seen[slot];
    seen[slot] += iro[b + 1] - iro[b];
    ringEnd[slot] = seen[slot];
  }
  return Status();
}
