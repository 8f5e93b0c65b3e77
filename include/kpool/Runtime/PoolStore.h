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

#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace kpool {

/// One pool produced by a step.
struct ProducedPool {
  uint32_t slot; ///< the request's ring slot
  int64_t pool;  ///< pool id (absolute positions [pool*K, (pool+1)*K))
  bool fromRing; ///< closed by ring_close (else built by compress)
};

/// Whether an engine that ran a call bringing positions [c, end) of a
/// request may continue it at `accepted` (c <= accepted <= end) with a ring
/// of `window` rows: the ring must still hold the members of the pool that
/// position `accepted` falls in, i.e. `accepted mod kpool == 0` or
/// `end - floor(accepted / kpool) * kpool <= window`. With a window of
/// `kpool + d - 1` rows every accepted length of a verify step of 1 + d
/// tokens passes. This is the check `PoolStore::accept` makes, for engines
/// that track lengths themselves.
bool ringHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                      int64_t end);

class PoolStore {
public:
  /// A store for requests in slots [0, maxSlots), using `kernels` and the
  /// position embedding `ape` ([kpool, head_dim] f32, copied). The ring
  /// keeps each slot's last `ringWindow` positions (`ringWindow >= kpool`;
  /// 0 or less means kpool; a positive window below kpool makes every step
  /// fail with the kernels' validation message, and the C and Python
  /// constructors reject it); a window wider than kpool lets `accept` roll
  /// back rejected draft tokens (see `ringHoldsPending`).
  /// Allocates the ring (maxSlots x 2 x window x head_dim elements) at
  /// once; throws std::bad_alloc when that fails. Prefer create().
  PoolStore(std::shared_ptr<KernelSet> kernels, int64_t maxSlots,
            const float *ape, int64_t ringWindow = 0);

  /// Like the constructor, but reports a bad `maxSlots` (below 1, above
  /// 2^31), a bad `ringWindow` (nonzero and below kpool or above 2^31), a
  /// ring whose byte size overflows and a failed allocation as
  /// an error in `status` and returns null; never throws.
  static std::unique_ptr<PoolStore> create(std::shared_ptr<KernelSet> kernels,
                                           int64_t maxSlots, const float *ape,
                                           Status &status,
                                           int64_t ringWindow = 0);

  /// Runs one call. `k` and `gate` hold this call's tokens ([rows,
  /// head_dim] of the kernels' element type); request b brings rows
  /// [inputRowOffsets[b], inputRowOffsets[b+1]) for ring slot `slots[b]`,
  /// continuing where that slot's earlier calls stopped. Appends what it
  /// produced to `produced` (if not null). On error nothing changes; a
  /// failed allocation is reported as an error, not thrown.
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

  /// Speculative decoding: of the tokens the slot's last step brought (or
  /// what an earlier `accept` left of them), keeps the first `accepted`.
  /// "The last step" is the last step the slot took part in, also one that
  /// brought it no tokens. Pools the step reported as produced with ids at
  /// or after floor(new length / kpool) are void afterwards.
  /// The slot's length becomes the step's start plus `accepted`, its pools
  /// at and after the first rejected position are forgotten, and the next
  /// step re-produces them from the tokens it brings. Fails, changing
  /// nothing, when `accepted` is outside [0, tokens still held from the last
  /// step] or when the ring no longer holds the members of the pool the new
  /// length falls in (a window too small for the drafts; the message names
  /// the slot and the window it would need).
  Status accept(uint32_t slot, int64_t accepted);

  /// The ring window R (rows per slot).
  int64_t ringWindow() const { return window; }

  const KernelSet &kernels() const { return *kernelSet; }

private:
  Status stepImpl(const View &k, const View &gate,
                  const std::vector<uint32_t> &inputRowOffsets,
                  const std::vector<uint32_t> &slots,
                  std::vector<ProducedPool> *produced);

  std::shared_ptr<KernelSet> kernelSet;
  int64_t maxSlots, window, rowBytes;
  std::vector<float> ape;
  struct FreeDeleter {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  /// calloc'ed: zero pages are mapped lazily, and a failure is a null
  /// pointer (reported), also under AddressSanitizer.
  std::unique_ptr<uint8_t[], FreeDeleter> ring;
  /// Per slot: its length; where its last step began; where the last call
  /// that wrote its ring ended.
  std::vector<uint32_t> seen, stepBegin, ringEnd;
  std::vector<std::vector<uint8_t>> store;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_POOLSTORE_H
