//===- StoreCore.h - what PoolStore and PagedPoolStore share ----*- C++ -*-===//
//
// The kernels, the position embedding, the tail ring, the slot ledger, the
// store's lock and closed flag, and the operands of a step, built and
// checked the same way for both stores. The stores add where pools go.
//
// Every member is used under `mutex` (the stores take it in each public
// method).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_STORECORE_H
#define KPOOL_LIB_RUNTIME_STORECORE_H

#include "SlotLedger.h"

#include "kpool/Runtime/KernelSet.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace kpool::detail {

class StoreCore {
public:
  /// Checks the arguments both stores take (`op` names the store, e.g.
  /// "pool store") and sets `ringBytes`: a kernel set and `ape` that are
  /// not null, host operands, max_slots in [1, 2^31], ring_window 0 or in
  /// [kpool, 2^31], a ring whose byte size fits 64 bits.
  static Status checkArguments(const char *op, const KernelSet *kernels,
                               int64_t maxSlots, const float *ape,
                               int64_t ringWindow, int64_t &ringBytes);
  /// The error for a ring that could not be allocated.
  static Status allocationError(const char *op, const KernelConfig &c,
                                int64_t maxSlots, int64_t ringWindow,
                                int64_t ringBytes);

  /// Allocates the ring (zeroed); throws std::bad_alloc when that fails.
  /// `ringWindow` 0 or less is kpool.
  StoreCore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
            const float *ape, int64_t ringWindow);

  Status closedError(const char *op) const {
    return Status::error(std::string(op) + ": the store is closed");
  }

  /// Runs `body` (a store method's work) under the store's lock: on a
  /// closed store the closed error instead, and an allocation that fails
  /// inside it as "<op>: out of memory" (the bodies allocate before they
  /// change anything).
  template <typename Body> Status locked(const char *op, Body &&body) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (closed)
      return closedError(op);
    try {
      return body();
    } catch (const std::bad_alloc &) {
    } catch (const std::length_error &) {
    }
    return Status::error(std::string(op) + ": out of memory");
  }

  /// accept's check and commit on the ledger (both stores); the caller
  /// holds the lock.
  Status acceptSlot(uint32_t slot, int64_t accepted) {
    int64_t length;
    if (Status s = ledger.checkAccept(slot, accepted, length); !s.ok())
      return s;
    ledger.commitAccept(slot, length);
    return Status();
  }
  /// slot_info (both stores); the caller holds the lock.
  Status slotInfo(uint32_t slot, SlotInfo &info) const {
    if (Status s = ledger.checkSlot("slot_info", slot); !s.ok())
      return s;
    info = ledger.info(slot);
    return Status();
  }

  /// The ring as the kernels take it; no data once released.
  View ringView() const;
  /// Zeroes the slot's ring rows (a released slot looks like a new one).
  void clearRing(uint32_t slot);
  /// Frees the ring, the ledger and the scratch (close()).
  void release();

  struct FreeDeleter {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  /// Uninitialized bytes that only grow (the kernels write what is read).
  struct Scratch {
    std::unique_ptr<uint8_t[], FreeDeleter> data;
    size_t size = 0;
    /// False when the allocation fails.
    bool reserve(size_t bytes);
  };

  /// The operands of one step, kept across steps so that a warm store
  /// allocates little.
  struct Step {
    std::vector<uint32_t> iro, slots, cache, pro;
    std::vector<int32_t> closed;
    Scratch closedRows, pooled;
    int64_t capacity = 0;
    /// The fused step's operands over the vectors above, the ring, `ape`
    /// and the call's `k` and `gate`.
    StepArgs args{};
    /// Tokens request b brings.
    int64_t tokens(size_t b) const { return int64_t(iro[b + 1]) - iro[b]; }
  };

  /// Builds `step` for a call and checks it, changing nothing: the
  /// kernels' validation of the fused step on these operands (shapes, then
  /// request by request: rows, slots, duplicates; messages naming the
  /// request and the field), then the lengths (SlotLedger::checkGrowth);
  /// only then allocates the outputs (a call refused for its size
  /// allocates nothing for it).
  Status prepareStep(const View &k, const View &gate,
                     const std::vector<uint32_t> &inputRowOffsets,
                     const std::vector<uint32_t> &slots, Step &step);

  std::shared_ptr<KernelSet> kernelSet;
  KernelConfig config;
  int64_t maxSlots = 0, window = 0, rowBytes = 0;
  std::vector<float> ape;
  /// calloc'ed: zero pages are mapped lazily, and a failure is a null
  /// pointer (reported), also under AddressSanitizer.
  std::unique_ptr<uint8_t[], FreeDeleter> ring;
  SlotLedger ledger;
  Step scratch;
  mutable std::mutex mutex;
  bool closed = false;
};

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_STORECORE_H
