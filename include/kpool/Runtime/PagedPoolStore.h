//===- PagedPoolStore.h - a ring and a paged pool cache ---------*- C++ -*-===//
//
// The pooled keys of every slot in the production pool cache
// (docs/pool-cache.md): a tail ring per slot, as in PoolStore, but every
// pool goes straight into a paged cache, optionally rotated by the
// Walsh-Hadamard transform and quantized to FP8 (e4m3fn) with one f32 scale
// per pool; each step is one fused kernel (kpool.step with to_cache) that
// pools, rounds, rotates, quantizes and stores. The cache format is the
// kernel set's (KernelConfig::cache).
//
// The cache is one byte buffer of `numPages` pages of `pageStride` bytes:
// pageSize * head_dim entry elements (uint8 codes for FP8, the element type
// for Element entries) then, for FP8, pageSize f32 scales (the
// DeepSeek/vLLM indexer page); cacheKeys() and cacheScales() are strided
// views of it. A slot's pools get pages from a free list as they need them,
// in the order the list gives them (pageOrder sets it); release() returns a
// slot's pages. After `accept` the pages stay and the next steps re-produce
// the rolled-back entries into the same entries (the contract: no rollback
// operation).
//
// Thread safety, close() and the pointers it hands out: as PoolStore
// (PoolStore.h). The cache buffer is the caller's when given in the options
// (it must outlive the store); otherwise the store's, freed by close().
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_PAGEDPOOLSTORE_H
#define KPOOL_RUNTIME_PAGEDPOOLSTORE_H

#include "kpool/Runtime/PoolStore.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace kpool {

struct PagedPoolStoreOptions {
  /// Slots [0, maxSlots): in [1, 2^31].
  int64_t maxSlots = 0;
  /// Entries per page: in [1, 2^31].
  int64_t pageSize = 0;
  /// Pages in the cache: in [1, 2^31 - 1] (page ids fit the int32 block
  /// table with its -1 padding).
  int64_t numPages = 0;
  /// Bytes from one page to the next: 0 for the page's own size
  /// (pageSize * head_dim entry bytes, plus 4 * pageSize for FP8 scales);
  /// a larger stride pads the pages. It and the entry bytes must be
  /// multiples of the scales' alignment (4) for FP8, of the element size
  /// otherwise.
  int64_t pageStride = 0;
  /// The order the free list hands out pages: a permutation of [0,
  /// numPages); empty for 0, 1, ..., numPages - 1.
  std::vector<int64_t> pageOrder;
  /// Ring rows per slot: 0 for kpool, else in [kpool, 2^31] (kpool + d - 1
  /// rolls back any rejected suffix of a verify step of 1 + d tokens).
  int64_t ringWindow = 0;
  /// The caller's cache buffer of numPages * pageStride bytes, aligned as
  /// pageStride must be, kept as it is (not cleared); null: the store
  /// allocates one, zeroed.
  void *cache = nullptr;
};

class PagedPoolStoreImpl;

class PagedPoolStore {
public:
  /// A store over `kernels` (a kernel set with a cache format, host
  /// operands) with the position embedding `ape` ([kpool, head_dim] f32,
  /// copied). Reports bad options (naming the option, its range and the
  /// value) and failed allocations in `status` and returns null; never
  /// throws.
  static std::unique_ptr<PagedPoolStore>
  create(std::shared_ptr<KernelSet> kernels, const float *ape,
         const PagedPoolStoreOptions &options, Status &status);
  ~PagedPoolStore();
  PagedPoolStore(const PagedPoolStore &) = delete;
  PagedPoolStore &operator=(const PagedPoolStore &) = delete;

  /// Runs one call, as PoolStore::step, storing every pool it completes in
  /// the cache; appends the pools it stored to `produced` (if not null), per
  /// request in id order. New pages come from the free list first. On error
  /// nothing changes; the checks, in order: the kernels' validation of the
  /// call (shapes, then per request: rows, slots, duplicates), the lengths
  /// (2^32 - 1), then the pages: the first request whose pages the free
  /// list cannot give is named, with the pages it needs and those free.
  Status step(const View &k, const View &gate,
              const std::vector<uint32_t> &inputRowOffsets,
              const std::vector<uint32_t> &slots,
              std::vector<ProducedPool> *produced = nullptr);

  /// Speculative decoding, as PoolStore::accept (the same checks and
  /// messages). The slot's pages stay; entries of pools at or after the new
  /// length are void until the next steps re-produce them.
  Status accept(uint32_t slot, int64_t accepted);

  /// Forgets the slot's tokens, clears its ring rows and returns its pages
  /// to the free list (the slot's first page is handed out first).
  Status release(uint32_t slot);

  /// Tokens the slot has seen; -1 for a slot outside [0, max_slots).
  int64_t tokens(uint32_t slot) const;
  /// Complete pools of the slot (entries 0 .. count-1 are valid); 0 for a
  /// slot outside [0, max_slots).
  int64_t pools(uint32_t slot) const;
  /// The slot's pages, in block-table order (pool p is on page
  /// pages[p / pageSize], row p mod pageSize).
  Status pages(uint32_t slot, std::vector<uint32_t> &out) const;
  /// The free pages, in the order steps will take them.
  std::vector<uint32_t> freePages() const;
  /// Copies pool `pool`'s entry: head_dim entry elements (entryBytes()
  /// each) to `values` and, for FP8, its scale to `*scale` (if not null).
  /// An error for a bad slot or a pool that is not complete.
  Status entry(uint32_t slot, int64_t pool, void *values, float *scale) const;
  /// The slot's bookkeeping (an error for a bad slot).
  Status slotInfo(uint32_t slot, SlotInfo &info) const;

  /// The cache buffer (numPages * pageStride bytes); null after close()
  /// when the store owned it.
  uint8_t *buffer() const;
  int64_t bufferBytes() const;
  /// [numPages, pageSize, head_dim] entry elements (strides in elements)
  /// over buffer().
  View cacheKeys() const;
  /// [numPages, pageSize] f32 scales over buffer() (FP8), else an empty
  /// view.
  View cacheScales() const;
  /// The ring, [max_slots, 2, window, head_dim] of the element type.
  View ring() const;

  /// As PoolStore::close; the caller's cache buffer is left alone.
  void close();
  bool closed() const;

  int64_t maxSlots() const;
  int64_t ringWindow() const;
  int64_t pageSize() const;
  int64_t numPages() const;
  int64_t pageStride() const;
  /// Bytes per entry element: 1 (FP8) or the element type's size.
  int64_t entryBytes() const;
  const KernelSet &kernels() const;

private:
  explicit PagedPoolStore(std::unique_ptr<PagedPoolStoreImpl> impl);
  std::unique_ptr<PagedPoolStoreImpl> impl;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_PAGEDPOOLSTORE_H
