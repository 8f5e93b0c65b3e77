//===- StoreCore.cpp - what PoolStore and PagedPoolStore share ------------===//

#include "StoreCore.h"

#include <algorithm>
#include <cstring>
#include <new>

using namespace kpool;
using namespace kpool::detail;

Status StoreCore::checkArguments(const char *op, const KernelSet *kernels,
                                 int64_t maxSlots, const float *ape,
                                 int64_t ringWindow, int64_t &ringBytes) {
  std::string where = std::string(op) + ": ";
  if (!kernels)
    return Status::error(where + "the kernel set is null");
  if (!ape)
    return Status::error(where + "'ape' is null");
  if (kernels->config().poolOffsetsOnly)
    return Status::error(where + "the kernel set has only the pool_offsets "
                                 "kernel; the store runs the fused step");
  if (kernels->deviceResident())
    return Status::error(where + "the kernel set's operands are device memory "
                                 "(the CUDA target); the store keeps its ring "
                                 "in host memory and needs a CPU kernel set");
  // Slots are uint32 and every slot has a ledger entry.
  if (maxSlots < 1 || maxSlots > (int64_t(1) << 31))
    return Status::error(where + "max_slots must be in [1, 2^31], got " +
                         std::to_string(maxSlots));
  const KernelConfig &c = kernels->config();
  if (ringWindow != 0 &&
      (ringWindow < c.kpool || ringWindow > (int64_t(1) << 31)))
    return Status::error(
        where + "ring_window must be 0 (kpool) or in [kpool = " +
        std::to_string(c.kpool) + ", 2^31], got " + std::to_string(ringWindow));
  int64_t window = ringWindow > 0 ? ringWindow : c.kpool;
  if (__builtin_mul_overflow(maxSlots, 2 * window, &ringBytes) ||
      __builtin_mul_overflow(ringBytes, c.headDim, &ringBytes) ||
      __builtin_mul_overflow(ringBytes, elementTypeSize(c.elementType),
                             &ringBytes))
    return Status::error(where + "a ring of " + std::to_string(maxSlots) +
                         " x 2 x " + std::to_string(window) + " x " +
                         std::to_string(c.headDim) + " " +
                         elementTypeName(c.elementType) +
                         " elements does not fit in 64-bit byte sizes");
  return Status();
}

Status StoreCore::allocationError(const char *op, const KernelConfig &c,
                                  int64_t maxSlots, int64_t ringWindow,
                                  int64_t ringBytes) {
  return Status::error(std::string(op) + ": could not allocate the ring of " +
                       std::to_string(ringBytes) + " bytes (max_slots " +
                       std::to_string(maxSlots) + ", ring window " +
                       std::to_string(ringWindow > 0 ? ringWindow : c.kpool) +
                       ", head_dim " + std::to_string(c.headDim) + ")");
}

StoreCore::StoreCore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
                     const float *apeData, int64_t ringWindow)
    : kernelSet(std::move(kernels)), config(kernelSet->config()),
      maxSlots(maxSlots), window(ringWindow > 0 ? ringWindow : config.kpool),
      rowBytes(config.headDim * elementTypeSize(config.elementType)),
      ledger(0, config.kpool, window) {
  ape.assign(apeData, apeData + config.kpool * config.headDim);
  // The ring first: it is the allocation that can be huge.
  size_t ringBytes = size_t(maxSlots) * 2 * window * rowBytes;
  ring.reset(static_cast<uint8_t *>(std::calloc(ringBytes ? ringBytes : 1, 1)));
  if (!ring)
    throw std::bad_alloc();
  ledger = SlotLedger(maxSlots, config.kpool, window);
}

View StoreCore::ringView() const {
  return denseView(ring.get(),
                   {ring ? maxSlots : 0, 2, window, config.headDim});
}

void StoreCore::clearRing(uint32_t slot) {
  size_t slotBytes = size_t(2) * window * rowBytes;
  std::memset(ring.get() + slot * slotBytes, 0, slotBytes);
}

void StoreCore::release() {
  ring.reset();
  ledger = SlotLedger(0, config.kpool, window);
  scratch = Step();
  ape = std::vector<float>();
}

Status StoreCore::prepareStep(const View &k, const View &gate,
                              const std::vector<uint32_t> &iro,
                              const std::vector<uint32_t> &slots, Step &s) {
  const KernelConfig &c = config;
  int64_t batch = static_cast<int64_t>(slots.size());
  if (static_cast<int64_t>(iro.size()) != batch + 1)
    return Status::error("step: input_row_offsets must have one more entry "
                         "than slots (" +
                         std::to_string(batch + 1) + "), got " +
                         std::to_string(iro.size()));
  if (batch > INT32_MAX)
    return Status::error("step: " + std::to_string(batch) +
                         " requests; a call has at most 2^31 - 1");
  s.iro = iro;
  s.slots = slots;
  ledger.cacheLengths(slots, s.cache);
  s.pro.assign(batch + 1, 0);
  s.closed.assign(batch, -1);
  // The rows of `k` bound every request's tokens once validated, so a call
  // of T rows completes at most floor(T / K) + B pools of its own tokens
  // (plus one per request from the ring, which goes to `closed`). The
  // metadata is not validated yet: clamp what it says.
  int64_t capacity = 0, kRows = k.rank >= 1 && k.sizes[0] > 0 ? k.sizes[0] : 0;
  const int64_t bound = kRows / c.kpool + batch;
  for (int64_t b = 0; b < batch && capacity < bound; ++b)
    capacity += std::clamp<int64_t>(s.tokens(b), 0, kRows) / c.kpool + 1;
  s.capacity = std::min(capacity, bound);

  StepArgs &a = s.args;
  a = StepArgs{};
  a.k = k;
  a.gate = gate;
  a.input_row_offsets = denseView(s.iro.data(), {batch + 1});
  a.slot_idx = denseView(s.slots.data(), {batch});
  a.cache_lengths = denseView(s.cache.data(), {batch});
  a.pool_row_offsets = denseView(s.pro.data(), {batch + 1});
  a.closed_pool = denseView(s.closed.data(), {batch});
  a.ape = denseView(ape.data(), {c.kpool, c.headDim});
  a.tail = ringView();
  a.num_requests = static_cast<int32_t>(batch);
  // Validation reads shapes and metadata, never the outputs' data: it runs
  // before the outputs are allocated, on placeholder views of their shapes
  // whose strides are 0, so that each covers one element of its own
  // placeholder and overlaps no other operand (validation rejects written
  // operands that overlap).
  alignas(8) static uint8_t placeholders[2][8];
  a.closed = denseView(placeholders[0], {batch, c.headDim});
  a.pooled = denseView(placeholders[1], {s.capacity, c.headDim});
  for (View *v : {&a.closed, &a.pooled})
    v->strides[0] = v->strides[1] = 0;
  // The one check both stores make before anything changes (the paged
  // store before it takes pages): the fused step's host validation.
  if (Status st = kernelSet->check(a); !st.ok())
    return st;
  if (Status st = ledger.checkGrowth(iro, slots); !st.ok())
    return st;
  size_t closedBytes = size_t(batch * rowBytes),
         pooledBytes = size_t(s.capacity * rowBytes);
  if (!s.closedRows.reserve(closedBytes) || !s.pooled.reserve(pooledBytes))
    return Status::error("step: out of memory (" +
                         std::to_string(closedBytes + pooledBytes) +
                         " bytes for the step's pooled rows)");
  a.closed = denseView(s.closedRows.data.get(), {batch, c.headDim});
  a.pooled = denseView(s.pooled.data.get(), {s.capacity, c.headDim});
  return Status();
}

bool StoreCore::Scratch::reserve(size_t bytes) {
  if (bytes <= size)
    return true;
  data.reset(static_cast<uint8_t *>(std::malloc(bytes)));
  size = data ? bytes : 0;
  return bool(data);
}
