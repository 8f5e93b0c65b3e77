/*===- kpool-c/Stores.h - C API of the pool stores ----------------*- C -*-===*\
|*                                                                            *|
|* The two stores of the runtime (kpool/Runtime/PoolStore.h and               *|
|* PagedPoolStore.h) for C: each owns a tail ring of `maxSlots` slots and     *|
|* runs the fused step (ring_close, pool_offsets, compress, seed_tail) for a  *|
|* call of any shape. KPoolPoolStore keeps each slot's pooled keys as rows;   *|
|* KPoolPagedPoolStore stores them into a paged pool cache of the kernel      *|
|* set's cache format (docs/pool-cache.md). Errors as in kpool-c/Runtime.h:   *|
|* a KPoolError naming the op, the request, the slot and the field; nothing   *|
|* aborts, and a call that fails changes nothing in the store.                *|
|*                                                                            *|
|* Thread safety. Every call on a store takes the store's own lock: calls     *|
|* from several threads on one store are safe and run one at a time, and a    *|
|* step's produced pools come back through its own arguments, never another   *|
|* call's. kpool*StoreClose waits for a call running on another thread, then  *|
|* frees the store's ring and pools; every later call fails with "<op>: the   *|
|* store is closed" (queries return -1). kpool*StoreDestroy frees the handle  *|
|* itself: call it only when no other thread is in, or can enter, a call on   *|
|* the store (close first when another thread might still use it). Pointers   *|
|* a store hands out (kpoolPoolStoreGetPool, the paged store's buffer and     *|
|* views) stay valid until close, but what they point at changes under later  *|
|* steps, accepts and resets of the slot.                                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_STORES_H
#define KPOOL_C_STORES_H

#include "kpool-c/Runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// One pool produced by a step (both stores).
typedef struct KPoolProducedPool {
  uint32_t slot;    ///< the request's ring slot
  int32_t fromRing; ///< 1: closed by ring_close, 0: built by compress
  int64_t pool; ///< pool id: absolute positions [pool*kpool, (pool+1)*kpool)
} KPoolProducedPool;

/// The contract's rollback condition, for engines that track lengths
/// themselves: after a call that brought positions [c, end) of a request,
/// continuing it at `accepted` (c <= accepted <= end) with a ring of
/// `window` rows is valid iff `accepted mod kpool == 0` or
/// `end - floor(accepted / kpool) * kpool <= window`.
KPOOL_CAPI_EXPORTED bool kpoolRingHoldsPending(int64_t kpool, int64_t window,
                                               int64_t accepted, int64_t end);

/// The most pools one step can produce, what a step's `produced` buffer
/// must hold: floor(rows / kpool) + numRequests for `rows` rows of `k`
/// (each request's pools are those its tokens complete, plus the one the
/// ring closes); -1 for a kpool below 1 or negative counts.
KPOOL_CAPI_EXPORTED int64_t kpoolStoreMaxProduced(int64_t kpool, int64_t rows,
                                                  int64_t numRequests);

/*===----------------------------------------------------------------------===*
 * PoolStore: the pools as rows
 *===----------------------------------------------------------------------===*/

typedef struct KPoolPoolStore KPoolPoolStore;

/// A store for slots [0, maxSlots) running `kernels` (a CPU set), with the
/// position embedding `ape` ([kpool, head_dim] f32, dense, copied) and a
/// ring of `ringWindow` rows per slot (`ringWindow >= kpool`, or 0 for
/// kpool). A window of `kpool + d - 1` rows lets kpoolPoolStoreAccept roll
/// back any rejected suffix of a verify step of 1 + d tokens.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCreateWithWindow(const KPoolKernelSet *kernels, int64_t maxSlots,
                               int64_t ringWindow, const float *ape,
                               KPoolPoolStore **result);

/// kpoolPoolStoreCreateWithWindow with a window of kpool rows.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCreate(const KPoolKernelSet *kernels, int64_t maxSlots,
                     const float *ape, KPoolPoolStore **result);

/// Runs one call of `numRequests` requests: request b brings rows
/// [inputRowOffsets[b], inputRowOffsets[b+1]) of `k` and `gate` ([rows,
/// head_dim] views of the element type) for ring slot `slots[b]`,
/// continuing where that slot's earlier calls stopped; `inputRowOffsets`
/// has numRequests + 1 entries. Writes the pools this call produced to
/// `produced` (per request in id order: the ring's pool first, then
/// compress's) and their number to `*numProduced` (if not NULL). `produced`
/// is NULL (the records are not wanted) or has room for `capacity` records,
/// at least kpoolStoreMaxProduced(kpool, rows of k, numRequests); a smaller
/// buffer is an error before anything runs. On error nothing in the store
/// changes and `*numProduced` is 0; the checks, in order: the arguments,
/// the kernels' validation of the call (shapes, overlapping operands, then
/// request by request), then that no slot's length would pass 2^32 - 1.
KPOOL_CAPI_EXPORTED KPoolError *kpoolPoolStoreStep(
    KPoolPoolStore *store, const KPoolView *k, const KPoolView *gate,
    int64_t numRequests, const uint32_t *inputRowOffsets, const uint32_t *slots,
    KPoolProducedPool *produced, int64_t capacity, int64_t *numProduced);

/// Speculative decoding: keeps the first `accepted` of the tokens the slot's
/// last step brought (or that an earlier accept left), forgets the slot's
/// pools at and after the first rejected position (later steps re-produce
/// them) and sets its length to the step's start plus `accepted`. Fails,
/// changing nothing, when `accepted` is out of range or the ring no longer
/// holds the members of the pool the new length falls in -- checked against
/// how far the last step wrote the ring, also after earlier accepts (the
/// message names the slot and the window needed).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreAccept(KPoolPoolStore *store, uint32_t slot, int64_t accepted);

/// Forgets a slot's tokens and pools so that a new request can take it.
KPOOL_CAPI_EXPORTED KPoolError *kpoolPoolStoreReset(KPoolPoolStore *store,
                                                    uint32_t slot);

/// Waits for a call running on another thread, then frees the ring and the
/// pools; every later call fails ("<op>: the store is closed"). Idempotent;
/// NULL is allowed. The handle stays until kpoolPoolStoreDestroy.
KPOOL_CAPI_EXPORTED void kpoolPoolStoreClose(KPoolPoolStore *store);

/// Whether the store is closed (true for NULL).
KPOOL_CAPI_EXPORTED bool kpoolPoolStoreIsClosed(const KPoolPoolStore *store);

/// Closes the store (if open) and frees the handle; NULL is allowed. No
/// other thread may be in or enter a call on it.
KPOOL_CAPI_EXPORTED void kpoolPoolStoreDestroy(KPoolPoolStore *store);

/// max_slots; 0 for NULL.
KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetMaxSlots(const KPoolPoolStore *store);

/// The ring window (rows per slot); -1 for NULL.
KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetRingWindow(const KPoolPoolStore *store);

/// Tokens the slot has seen (its cache length for the next call); -1 for a
/// slot that is not below max_slots, a closed store or NULL.
KPOOL_CAPI_EXPORTED int64_t kpoolPoolStoreGetTokens(const KPoolPoolStore *store,
                                                    uint32_t slot);

/// Complete pools the slot has (ids 0 .. count-1); -1 as for GetTokens.
KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetNumPools(const KPoolPoolStore *store, uint32_t slot);

/// Pool `pool` of `slot`: head_dim dense elements of the element type, valid
/// until the slot's next step, accept or reset (or close); NULL when out of
/// range. Read it only while no other thread changes the slot
/// (kpoolPoolStoreCopyPools copies under the store's lock).
KPOOL_CAPI_EXPORTED const void *
kpoolPoolStoreGetPool(const KPoolPoolStore *store, uint32_t slot, int64_t pool);

/// Copies pools [first, first + count) of `slot` into the rows of `dst`
/// ([count, head_dim] view of the element type, any strides).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCopyPools(const KPoolPoolStore *store, uint32_t slot,
                        int64_t first, int64_t count, const KPoolView *dst);

/*===----------------------------------------------------------------------===*
 * PagedPoolStore: the pools in a paged pool cache
 *===----------------------------------------------------------------------===*/

typedef struct KPoolPagedPoolStore KPoolPagedPoolStore;

/// What a paged store is made of. Zero-initialize it, then set maxSlots,
/// pageSize and numPages; the other fields' zero values are the defaults.
typedef struct KPoolPagedPoolStoreOptions {
  /// Slots [0, maxSlots): in [1, 2^31].
  int64_t maxSlots;
  /// Entries per page: in [1, 2^31].
  int64_t pageSize;
  /// Pages in the cache: in [1, 2^31 - 1] (page ids fit the int32 block
  /// table with its -1 padding).
  int64_t numPages;
  /// Bytes from one page to the next: 0 for the page's own size (pageSize x
  /// head_dim entry bytes, then 4 x pageSize bytes of f32 scales for FP8);
  /// a larger stride pads the pages. It and the entry bytes must be
  /// multiples of 4 for FP8, of the element size otherwise.
  int64_t pageStride;
  /// Ring rows per slot: 0 for kpool, else in [kpool, 2^31].
  int64_t ringWindow;
  /// NULL, or numPages page ids (a permutation of [0, numPages)): the order
  /// the free list hands pages out. NULL: 0, 1, ..., numPages - 1.
  const int64_t *pageOrder;
  /// NULL (the store allocates the cache, zeroed, and frees it on close), or
  /// the caller's buffer of numPages x pageStride bytes, aligned as
  /// pageStride must be, used as it is and never freed by the store.
  void *cache;
} KPoolPagedPoolStoreOptions;

/// A store over `kernels` (a CPU kernel set created with a cache format:
/// the store's entries are in that format) with the position embedding
/// `ape` ([kpool, head_dim] f32, dense, copied). Bad options are reported
/// naming the option, its range and the value.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreCreate(const KPoolKernelSet *kernels, const float *ape,
                          const KPoolPagedPoolStoreOptions *options,
                          KPoolPagedPoolStore **result);

/// As kpoolPoolStoreStep, storing every pool the call completes in the
/// cache (one fused kernel); new pages come from the free list. After the
/// kernels' validation and the lengths, the pages are checked: the first
/// request whose pages the free list cannot give is named.
KPOOL_CAPI_EXPORTED KPoolError *kpoolPagedPoolStoreStep(
    KPoolPagedPoolStore *store, const KPoolView *k, const KPoolView *gate,
    int64_t numRequests, const uint32_t *inputRowOffsets, const uint32_t *slots,
    KPoolProducedPool *produced, int64_t capacity, int64_t *numProduced);

/// As kpoolPoolStoreAccept (the same checks and messages). The slot's pages
/// stay; its entries at and after the new length are void until the next
/// steps re-produce them into the same entries.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreAccept(KPoolPagedPoolStore *store, uint32_t slot,
                          int64_t accepted);

/// Forgets the slot's tokens, clears its ring rows and returns its pages to
/// the free list (the slot's first page is handed out first).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreRelease(KPoolPagedPoolStore *store, uint32_t slot);

/// As kpoolPoolStoreClose; a cache buffer the caller gave is left alone.
KPOOL_CAPI_EXPORTED void kpoolPagedPoolStoreClose(KPoolPagedPoolStore *store);

/// Whether the store is closed (true for NULL).
KPOOL_CAPI_EXPORTED bool
kpoolPagedPoolStoreIsClosed(const KPoolPagedPoolStore *store);

/// As kpoolPoolStoreDestroy.
KPOOL_CAPI_EXPORTED void kpoolPagedPoolStoreDestroy(KPoolPagedPoolStore *store);

/// Tokens the slot has seen; -1 for a slot not below max_slots, a closed
/// store or NULL.
KPOOL_CAPI_EXPORTED int64_t
kpoolPagedPoolStoreGetTokens(const KPoolPagedPoolStore *store, uint32_t slot);

/// Complete pools of the slot (entries 0 .. count-1 are valid); -1 as for
/// GetTokens.
KPOOL_CAPI_EXPORTED int64_t
kpoolPagedPoolStoreGetNumPools(const KPoolPagedPoolStore *store, uint32_t slot);

/// The slot's pages in block-table order (pool p is on page
/// pages[p / pageSize], row p mod pageSize): the first min(count,
/// capacity) of them into `pages` (NULL when capacity is 0), their number
/// into `*count`. numPages entries always suffice.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreGetPages(const KPoolPagedPoolStore *store, uint32_t slot,
                            uint32_t *pages, int64_t capacity, int64_t *count);

/// The free pages in the order steps will take them, as GetPages.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreGetFreePages(const KPoolPagedPoolStore *store,
                                uint32_t *pages, int64_t capacity,
                                int64_t *count);

/// Copies pool `pool`'s entry of `slot`: head_dim entry elements (FP8 codes,
/// or the element type) into `values` (`valuesBytes` bytes, at least
/// head_dim x entryBytes) and, for FP8, its scale into `*scale` (if not
/// NULL). An error for a bad slot, a pool that is not complete, or a buffer
/// too small.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreGetEntry(const KPoolPagedPoolStore *store, uint32_t slot,
                            int64_t pool, void *values, int64_t valuesBytes,
                            float *scale);

/// A paged store's layout (fixed at creation) and its cache.
typedef struct KPoolPagedPoolStoreLayout {
  int64_t maxSlots;
  int64_t ringWindow;
  int64_t pageSize;
  int64_t numPages;
  int64_t pageStride;
  /// Bytes per entry element: 1 (FP8) or the element type's size.
  int64_t entryBytes;
  /// The cache buffer, numPages x pageStride bytes; NULL after close when
  /// the store allocated it.
  void *buffer;
  int64_t bufferBytes;
  /// [numPages, pageSize, head_dim] entry elements over `buffer` (strides
  /// in elements).
  KPoolView cacheKeys;
  /// [numPages, pageSize] f32 scales over `buffer` for FP8; an empty view
  /// otherwise.
  KPoolView cacheScales;
} KPoolPagedPoolStoreLayout;

/// The store's layout into `*layout`; an error for NULL arguments.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPagedPoolStoreGetLayout(const KPoolPagedPoolStore *store,
                             KPoolPagedPoolStoreLayout *layout);

#ifdef __cplusplus
}
#endif

#endif /* KPOOL_C_STORES_H */
