//===- PoolStore.h - a ring and pooled-key store for requests ---*- C++ -*-===//
//
// What a serving engine writes by hand around the three kernels: it owns the
// tail ring and, per ring slot, the pooled keys produced so far, and runs
// ring_close, compress and seed_tail in that order for a call of any shape
// (chunked prefill, decode, mixed). The C API and the Python package expose
// it as well.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_POOLSTORE_H
#define KPOOL_RUNTIME_POOLSTORE_H

#include "kpool/Runtime/Runtime.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kpool {

/// One pool produced by a step.
struct ProducedPool {
  uint32_t slot; ///< the request's ring slot
  int64_t pool;  ///< pool id (absolute positions [pool*K, (pool+1)*K))
  bool fromRing; ///< closed by ring_close (else built by compress)
};

class PoolStore {
public:
  /// A store for requests in slots [0, maxSlots), using `kernels` and the
  /// position embedding `ape` ([kpool, head_dim] f32, copied).
  PoolStore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
            const float *ape);

  /// Runs one call. `k` and `gate` hold this call's tokens ([rows,
  /// head_dim] of the kernels' element type); request b brings rows
  /// [inputRowOffsets[b], inputRowOffsets[b+1]) for ring slot `slots[b]`,
  /// continuing where that slot's earlier calls stopped. Appends what it
  /// produced to `produced` (if not null). On error nothing changes.
  Status step(const View &k, const View &gate,
              const std::vector<uint32_t> &inputRowOffsets,
              const std::vector<uint32_t> &slots,
              std::vector<ProducedPool> *produced = nullptr);

  /// Tokens the slot has seen (its cache length for the next call); -1 for
  /// a slot outside [0, max_slots).
  int64_t tokens(uint32_t slot) const;
  /// Pools the slot has (all complete pools, ids 0 .. count-1); 0 for a
  /// slot outside [0, max_slots).
  int64_t pools(uint32_t slot) const;
  /// Pointer to pool `pool` of `slot`: head_dim elements of the element
  /// type; null when the slot or the pool does not exist.
  const void *pool(uint32_t slot, int64_t pool) const;
  /// Forgets a slot's tokens and pools so a new request can take it
  /// (nothing for a slot outside [0, max_slots)).
  void reset(uint32_t slot);

  const KernelSet &kernels() const { return *kernelSet; }

private:
  std::shared_ptr<KernelSet> kernelSet;
  int64_t maxSlots, rowBytes;
  std::vector<float> ape;
  std::vector<uint8_t> ring;
  std::vector<uint32_t> seen;
  std::vector<std::vector<uint8_t>> store;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_POOLSTORE_H
