//===- PoolStore.h - a ring and pooled-key store for requests ---*- C++ -*-===//
//
// What a serving engine writes by hand around the three kernels: it owns the
// tail ring and, per ring slot, the pooled keys produced so far, and runs
// ring_close, compress and seed_tail (one fused kpool.step) for a call of
// any shape (chunked prefill, decode, mixed). The C API and the Python
// package expose it as well. PagedPoolStore (PagedPoolStore.h) is the same
// store with the pools in a paged pool cache; both keep their slots' lengths
// with one piece of bookkeeping and return the same ProducedPool records.
//
// Thread safety: every public method of a store takes the store's own lock,
// so calls from several threads on one store are safe and run one at a
// time; a step's produced pools come back through its own `produced`
// argument, never another call's. Pointers a store hands out (pool(),
// ring()) stay valid until close() or destruction, but what they point at
// changes under later calls: read them only while no other thread steps,
// accepts or resets the slot (copyPools copies under the lock). close()
// waits for a call running on another thread, then frees the store's memory;
// every later call fails with "<op>: the store is closed" (accessors return
// their "no such slot" value). Destroying a store while another thread is
// inside one of its calls is a use after free, as for any C++ object; a
// wrapper that cannot rule it out (C, Python) calls close() first.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_POOLSTORE_H
#define KPOOL_RUNTIME_POOLSTORE_H

#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kpool {

/// One pool produced by a step (PoolStore and PagedPoolStore).
struct ProducedPool {
  uint32_t slot; ///< the request's ring slot
  int64_t pool;  ///< pool id (absolute positions [pool*K, (pool+1)*K))
  bool fromRing; ///< closed by ring_close (else built by compress)
};

/// What a store knows of one slot.
struct SlotInfo {
  /// Tokens kept: the slot's length, the next step's cache length.
  int64_t tokens = 0;
  /// The positions the slot's last step brought, [stepBegin, stepEnd);
  /// stepEnd is also how far that step wrote the ring (an `accept` lowers
  /// `tokens`, never stepEnd). `accept` keeps at most tokens - stepBegin.
  int64_t stepBegin = 0;
  int64_t stepEnd = 0;
};

/// Whether an engine that ran a call bringing positions [c, end) of a
/// request may continue it at `accepted` (c <= accepted <= end) with a ring
/// of `window` rows: the ring must still hold the members of the pool that
/// position `accepted` falls in, i.e. `accepted mod kpool == 0` or
/// `end - floor(accepted / kpool) * kpool <= window`. With a window of
/// `kpool + d - 1` rows every accepted length of a verify step of 1 + d
/// tokens passes. `end` is where that call stopped writing the ring, also
/// after an earlier rollback of the same call. This is the check the
/// stores' `accept` makes, for engines that track lengths themselves.
bool ringHoldsPending(int64_t kpool, int64_t window, int64_t accepted,
                      int64_t end);

class PoolStoreImpl;

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
  ~PoolStore();
  PoolStore(const PoolStore &) = delete;
  PoolStore &operator=(const PoolStore &) = delete;

  /// Like the constructor, but reports a null kernel set or `ape`, a kernel
  /// set whose operands are device memory (the ring is host memory), a bad
  /// `maxSlots` (below 1, above 2^31), a bad `ringWindow` (nonzero and
  /// below kpool or above 2^31), a ring whose byte size overflows and a
  /// failed allocation as an error in `status` and returns null; never
  /// throws.
  static std::unique_ptr<PoolStore> create(std::shared_ptr<KernelSet> kernels,
                                           int64_t maxSlots, const float *ape,
                                           Status &status,
                                           int64_t ringWindow = 0);

  /// Runs one call. `k` and `gate` hold this call's tokens ([rows,
  /// head_dim] of the kernels' element type); request b brings rows
  /// [inputRowOffsets[b], inputRowOffsets[b+1]) for ring slot `slots[b]`,
  /// continuing where that slot's earlier calls stopped. Appends what it
  /// produced to `produced` (if not null): per request, in id order, pools
  /// [floor(c / K), floor((c + n) / K)). On error nothing changes (nothing
  /// is appended either); the checks, in order: the kernels' validation of
  /// the call (shapes, then request by request: rows, slots, with messages
  /// naming the request and the field), then that no slot's length would
  /// pass 2^32 - 1. A failed allocation is reported as an error, not thrown.
  Status step(const View &k, const View &gate,
              const std::vector<uint32_t> &inputRowOffsets,
              const std::vector<uint32_t> &slots,
              std::vector<ProducedPool> *produced = nullptr);

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
  /// length falls in: checked against how far the last step wrote the ring,
  /// also after earlier accepts (a window too small for the drafts; the
  /// message names the slot and the window it would need).
  Status accept(uint32_t slot, int64_t accepted);

  /// Forgets a slot's tokens and pools (and clears its ring rows) so a new
  /// request can take it. An error for a slot outside [0, max_slots).
  Status reset(uint32_t slot);

  /// Tokens the slot has seen (its cache length for the next call); -1 for
  /// a slot outside [0, max_slots).
  int64_t tokens(uint32_t slot) const;
  /// Pools the slot has (all complete pools, ids 0 .. count-1); 0 for a
  /// slot outside [0, max_slots).
  int64_t pools(uint32_t slot) const;
  /// Pointer to pool `pool` of `slot`: head_dim elements of the element
  /// type, valid until the slot's next step, accept or reset (or close);
  /// null when the slot or the pool does not exist.
  const void *pool(uint32_t slot, int64_t pool) const;
  /// Copies pools [first, first + count) of `slot` into the rows of `dst`
  /// ([count, head_dim] of the element type, any strides), under the lock.
  Status copyPools(uint32_t slot, int64_t first, int64_t count,
                   const View &dst) const;
  /// The slot's bookkeeping (an error for a bad slot).
  Status slotInfo(uint32_t slot, SlotInfo &info) const;

  /// The ring, [max_slots, 2, window, head_dim] of the element type (keys,
  /// then gates); no data after close().
  View ring() const;

  /// Waits for a call running on another thread, frees the ring and the
  /// pools; later calls fail. Idempotent.
  void close();
  bool closed() const;

  int64_t maxSlots() const;
  /// The ring window R (rows per slot).
  int64_t ringWindow() const;
  const KernelSet &kernels() const;

private:
  std::unique_ptr<PoolStoreImpl> impl;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_POOLSTORE_H
