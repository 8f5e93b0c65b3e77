//===- SlotLedger.h - the slot bookkeeping of the pool stores ---*- C++ -*-===//
//
// What PoolStore and PagedPoolStore know about each ring slot, and the rules
// that follow from it, in one place: a slot's length, the positions its last
// step brought, how far that step wrote the ring, which pools a step
// produces, when a step would make a length wrap, and when `accept` may roll
// a slot back. The stores keep only what differs: where pools go (a list of
// rows, or entries in a paged cache).
//
// What the ring holds (docs/semantics.md, "seed_tail", "Speculative
// decoding"). A call that brings positions [c, e) of a slot writes the last
// min(R, e - c) of them into rows q mod R; nothing else touches the slot's
// ring. Continuing the slot at length L needs the ring to hold the pending
// pool's members [floor(L / K) * K, L) with the data the call (or an earlier
// one) wrote for those positions.
//
// Invariant: between calls, the ring holds the pending members of the slot's
// current length. A step from c keeps it: it reads those members (ring_close)
// and then holds its own last positions, which cover the new pending pool.
//
// The rule for `accept` (the contract's rollback condition): after the
// slot's last step brought [c, e), continuing at L with c <= L <= e is valid
// iff
//
//     L mod K == 0   or   e - floor(L / K) * K <= R.
//
// `e` is where that step stopped writing the ring, not the slot's length:
// an earlier `accept` shortens the length but does not unwrite the ring, so
// a second `accept` is checked against the same `e` (ringEnd below). Why the
// rule is exact, with m = floor(L/K) * K (so c - K < m <= L): members
// [m, c) were held before the step (the invariant at c, as m >=
// floor(c/K) * K). The step writes positions [max(c, e - R), e), each into
// row q' mod R; it overwrites a member q < c iff some q + jR (j >= 1) is
// among them, i.e. iff q + R < e (q + R >= m + K > c), so it overwrites
// none iff e - m <= R. Members in [c, L) were written by the step iff they
// are among its last R positions, i.e. iff m >= e - R: the same condition.
// Positions at or past L that the step wrote (rejected drafts) stay in the
// ring; they are never read before the next step overwrites them (a step
// from L reads only [m, L)). The property test checks the rule against a
// simulated ring.
//
// A step that brings a slot no tokens is its last step too: c = e = L, so
// nothing can be rolled back past it (its pending members are held by the
// invariant). `reset` starts the slot over.
//
// Not thread-safe: the stores call it under their own lock.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_SLOTLEDGER_H
#define KPOOL_LIB_RUNTIME_SLOTLEDGER_H

#include "kpool/Runtime/PoolStore.h"
#include "kpool/Runtime/Status.h"

#include <cstdint>
#include <vector>

namespace kpool::detail {

class SlotLedger {
public:
  SlotLedger(int64_t maxSlots, int64_t kpool, int64_t window);

  int64_t maxSlots() const { return static_cast<int64_t>(slots.size()); }
  int64_t kpool() const { return K; }
  int64_t window() const { return R; }

  bool has(uint32_t slot) const { return slot < slots.size(); }
  /// Success for a slot below max_slots, else "<op>: slot S is not below
  /// max_slots = M".
  Status checkSlot(const char *op, uint32_t slot) const;

  /// The slot's length (tokens kept; the next step's cache length).
  int64_t length(uint32_t slot) const { return slots[slot].length; }
  /// Complete pools of the slot: ids 0 .. pools - 1.
  int64_t pools(uint32_t slot) const { return slots[slot].length / K; }
  SlotInfo info(uint32_t slot) const;

  /// The cache lengths of a step's requests; 0 for a slot not below
  /// max_slots (the kernels' validation reports it, naming the request).
  void cacheLengths(const std::vector<uint32_t> &slotIdx,
                    std::vector<uint32_t> &out) const;

  /// For a step whose metadata the kernels' validation accepted (offsets
  /// ordered, slots distinct and below max_slots): refuses it, naming the
  /// first request, when a slot's length would pass 2^32 - 1 (cache
  /// lengths are 32-bit; nothing may wrap).
  Status checkGrowth(const std::vector<uint32_t> &inputRowOffsets,
                     const std::vector<uint32_t> &slotIdx) const;

  /// The pools request `b` of a checked step produces, in id order:
  /// [floor(c / K), floor((c + n) / K)), the first from the ring when c is
  /// inside a pool.
  void produced(uint32_t slot, int64_t tokens,
                std::vector<ProducedPool> &out) const;

  /// Records a step that ran (after checkGrowth): each request's slot
  /// grows by its tokens; its last step is now this one.
  void commitStep(const std::vector<uint32_t> &inputRowOffsets,
                  const std::vector<uint32_t> &slotIdx);

  /// Whether the slot may keep `accepted` of the tokens its last step
  /// brought (what earlier accepts left of them), by the rule above; on
  /// success `length` is the new length. The errors name the op, the slot
  /// and, for a ring too small, the positions and the window needed.
  Status checkAccept(uint32_t slot, int64_t accepted, int64_t &length) const;
  /// Sets the length checkAccept returned (the step's range and ringEnd
  /// stay: a later accept is checked against the same step).
  void commitAccept(uint32_t slot, int64_t length);

  /// Starts the slot over (length 0, no last step).
  void reset(uint32_t slot) { slots[slot] = Slot(); }

private:
  struct Slot {
    /// Tokens kept.
    uint32_t length = 0;
    /// The positions the slot's last step brought, [stepBegin, ringEnd):
    /// ringEnd is how far that step wrote the ring.
    uint32_t stepBegin = 0;
    uint32_t ringEnd = 0;
  };
  std::vector<Slot> slots;
  int64_t K, R;
};

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_SLOTLEDGER_H
