/*===- kpool-c/Runtime.h - C API of the kpool runtime -------------*- C -*-===*\
|*                                                                            *|
|* The kpool kernels, compiled once per (target, element type, head_dim,    *|
|* kpool) -- JIT-compiled for the CPU, or precompiled kernels registered in  *|
|* the process (kpool-aot) -- and run on caller-owned strided buffers        *|
|* (KPoolView), and the pool store that runs ring_close, compress and        *|
|* seed_tail for calls of any shape. The kernel ABI (every kernel's operands *|
|* in order) can be read at run time. This is what the Python package binds  *|
|* with ctypes.                                                               *|
|*                                                                            *|
|* Errors. No function here aborts on bad input. A function that can fail    *|
|* returns NULL on success or a KPoolError the caller must free with         *|
|* kpoolErrorDestroy; kpoolErrorMessage says what is wrong, naming the op,   *|
|* the request and the field, e.g.                                           *|
|*   "compress: request 2: input_row_offsets[3] = 70 reaches past the 64     *|
|*    rows of 'k'".                                                           *|
|* A call that fails writes none of its outputs.                             *|
|*                                                                            *|
|* Views. Every operand is a KPoolView (kpool-c/View.h): data pointer, rank, *|
|* sizes and strides counted in elements. Keys, gates, pooled keys and the   *|
|* ring have the kernel set's element type (bf16 and f16 as their 16-bit    *|
|* patterns), `ape` is f32, offsets, cache lengths and slots are uint32 and  *|
|* closed_pool is int32; the views carry no element type, so the caller     *|
|* must get these right.                                                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_RUNTIME_H
#define KPOOL_C_RUNTIME_H

#include "kpool-c/View.h"

#include <stdbool.h>
#include <stdint.h>

#ifndef KPOOL_CAPI_EXPORTED
#define KPOOL_CAPI_EXPORTED __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Errors
 *===----------------------------------------------------------------------===*/

/// An error: a message. Owned by the caller once returned.
typedef struct KPoolError KPoolError;

/// The error's message (valid until the error is destroyed).
KPOOL_CAPI_EXPORTED const char *kpoolErrorMessage(const KPoolError *error);

/// Frees `error`; NULL is allowed.
KPOOL_CAPI_EXPORTED void kpoolErrorDestroy(KPoolError *error);

/// "bf16", "f16", "f32", or NULL for a value that is not an element type.
KPOOL_CAPI_EXPORTED const char *kpoolElementTypeName(KPoolElementType type);

/*===----------------------------------------------------------------------===*
 * Kernel sets
 *===----------------------------------------------------------------------===*/

/// The kernels compiled for one configuration.
typedef struct KPoolKernelSet KPoolKernelSet;

/// Where the kernels run. Views are host memory for the CPU and device
/// memory for CUDA.
typedef enum KPoolTarget {
  KPOOL_TARGET_CPU = 0,
  KPOOL_TARGET_CUDA = 1,
} KPoolTarget;

/// Compiles the CPU kernels for keys of `elementType`, `headDim` channels
/// and `kpool` tokens per pool, or takes them from the process-wide cache
/// when an identical configuration was compiled (or precompiled kernels
/// were registered) before. `openmp` runs pooled rows and requests on
/// OpenMP threads; `vectorSize` is the number of channels per vector in the
/// pooled-row loops (16 is the default of the C++ API, 0 keeps them
/// scalar). On success stores a new handle in `*result`. The same as
/// kpoolKernelSetCreateForTarget with KPOOL_TARGET_CPU.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelSetCreate(KPoolElementType elementType, int64_t headDim,
                     int64_t kpool, bool openmp, int64_t vectorSize,
                     KPoolKernelSet **result);

/// Like kpoolKernelSetCreate, for `target`. Either target takes, in order,
/// kernels registered in the process (kpool-aot's registration functions,
/// kernel packs: kpoolLoadKernelPack and the packs installed next to the
/// runtime library), the disk cache of compiled kernels, then the JIT
/// (libKPoolJit.so, opened from next to the runtime library); a
/// configuration none of them provides fails with a message naming it and
/// saying how to get it (kpool-c/Packs.h). `openmp` and `vectorSize` mean
/// nothing for CUDA (pass false and 0).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelSetCreateForTarget(KPoolTarget target, KPoolElementType elementType,
                              int64_t headDim, int64_t kpool, bool openmp,
                              int64_t vectorSize, KPoolKernelSet **result);

/// A kernel set with only the pool_offsets kernel for `kpool` (it depends on
/// nothing else): one small kernel to compile, for callers that only need
/// the scan. kpoolPoolOffsets runs it; the other ops return an error. Its
/// element type reads as KPOOL_F32 and its head_dim as 1.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolOffsetsKernelCreate(int64_t kpool, KPoolKernelSet **result);

/// Releases the handle; NULL is allowed. Compiled code stays cached, and
/// pool stores made from the set keep working.
KPOOL_CAPI_EXPORTED void kpoolKernelSetDestroy(KPoolKernelSet *kernels);

/// The set's configuration; for a NULL set: -1 (not an element type), -1
/// and -1.
KPOOL_CAPI_EXPORTED KPoolElementType
kpoolKernelSetGetElementType(const KPoolKernelSet *kernels);
KPOOL_CAPI_EXPORTED int64_t
kpoolKernelSetGetHeadDim(const KPoolKernelSet *kernels);
KPOOL_CAPI_EXPORTED int64_t
kpoolKernelSetGetKPool(const KPoolKernelSet *kernels);
/// The set's target; -1 for a NULL set.
KPOOL_CAPI_EXPORTED int kpoolKernelSetGetTarget(const KPoolKernelSet *kernels);

// The ops, operands in the order of the C++ KernelSet (outputs first), then
// `stream`, the caller's stream (a CUstream as an opaque pointer): on the
// CUDA target a call only enqueues its launches there -- no
// synchronization, allocation, free, host-device copy or module load on
// its path -- so it can be captured into a CUDA graph; NULL is CUDA's NULL
// stream of the current context (the legacy default stream), enqueued on
// and never synchronized. CPU kernels ignore the stream and finish before
// the call returns. `status` is NULL or the call's status word, one
// uint64_t in the kernels' memory (device memory on the CUDA target) where
// the kernels record the first bad-metadata finding they meet, in stream
// order and without a host round trip; 0 means nothing was found, and a
// word that holds a code only changes to a smaller one, so an engine clears
// it once (e.g. cuMemsetD8Async(word, 0, 8, stream)) and reads it whenever
// it likes.
// kpoolStatusWordError decodes it. Shapes are always checked. With `validate` true the
// metadata values are checked on the host first (the request and field at
// fault are named); on the CUDA target the metadata is device memory, which
// a call never reads back, so `validate` true returns an error saying so:
// pass false there and check host copies with kpoolCheck* before uploading
// them. `validate` false on the CPU leaves only the kernels' own guards;
// that exists to test them.

/// kpool.compress: pooled[pool_row_offsets[b] + j] for each pool j made only
/// of request b's tokens in this call.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolCompress(const KPoolKernelSet *kernels, const KPoolView *pooled,
              const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
              const KPoolView *inputRowOffsets, const KPoolView *poolRowOffsets,
              const KPoolView *cacheLengths, uint64_t *status, void *stream, bool validate);

/// kpool.seed_tail: stores each request's last R positions that this call
/// brings in its ring slot of `tail` ([max_slots, 2, R, head_dim] with the
/// ring window R >= kpool; read-write), position q in ring row q mod R.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolSeedTail(const KPoolKernelSet *kernels, const KPoolView *tail,
              const KPoolView *k, const KPoolView *gate,
              const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
              const KPoolView *slotIdx, int32_t numRequests, uint64_t *status, void *stream, bool validate);

/// kpool.ring_close: closes the pool the ring holds open for each request;
/// writes every row of `pooled` [B, head_dim] and `closedPool` [B].
KPOOL_CAPI_EXPORTED KPoolError *
kpoolRingClose(const KPoolKernelSet *kernels, const KPoolView *pooled,
               const KPoolView *closedPool, const KPoolView *tail,
               const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
               const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
               const KPoolView *slotIdx, int32_t numRequests, uint64_t *status, void *stream, bool validate);

/// kpool.pool_offsets: the exclusive prefix sum of the per-request counts of
/// pools made only of this call's tokens ([B+1]).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolOffsets(const KPoolKernelSet *kernels, const KPoolView *poolRowOffsets,
                 const KPoolView *inputRowOffsets,
                 const KPoolView *cacheLengths, uint64_t *status, void *stream, bool validate);

/// What a status word records: `(request << 8) | finding` (request 0 for
/// KPOOL_STATUS_NUM_REQUESTS), the smallest over the findings the kernels'
/// guards meet; 0 is nothing found (docs/semantics.md, "The status word").
typedef enum KPoolStatusFinding {
  KPOOL_STATUS_ROWS_REVERSED = 1,       ///< input_row_offsets[b+1] < [b]
  KPOOL_STATUS_ROWS_PAST_K = 2,         ///< input_row_offsets[b+1] > rows of k
  KPOOL_STATUS_SLOT_OUT_OF_RANGE = 3,   ///< slot_idx[b] >= max_slots
  KPOOL_STATUS_POOL_RANGE_MISMATCH = 4, ///< pool_row_offsets range != pools
  KPOOL_STATUS_POOL_ROWS_PAST_OUTPUT = 5,   ///< pool_row_offsets[b+1] > rows
  KPOOL_STATUS_POOLED_CAPACITY = 6,         ///< step: pools past the capacity
  KPOOL_STATUS_TABLE_PAST_WIDTH = 7,        ///< page index >= table width
  KPOOL_STATUS_TABLE_PADDING = 8,           ///< block_table entry -1
  KPOOL_STATUS_TABLE_PAGE_OUT_OF_RANGE = 9, ///< page >= the cache's pages
  KPOOL_STATUS_NUM_REQUESTS = 10,           ///< num_requests outside [0, B]
  /// An operand's extent contradicts the op: its word carries the operand
  /// and dimension in place of the request (kpoolStatusWordError names them)
  KPOOL_STATUS_EXTENT = 11,
} KPoolStatusFinding;

/// The error a status word holds: NULL for 0 (nothing found), else the
/// request and field the kernels found at fault, e.g. "request 3:
/// slot_idx[3] is not below max_slots (the ring's slots) (found by the
/// kernels; status word 0x303)". Destroy it with kpoolErrorDestroy.
KPOOL_CAPI_EXPORTED KPoolError *kpoolStatusWordError(uint64_t word);

/// Loads what `kernels` need in the context of `stream` (the GPU modules)
/// so that no later call loads anything: an engine calls it once before
/// capturing calls into a CUDA graph. Not stream-ordered; never call it
/// during a capture. Nothing to do on the CPU.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelSetPrepare(const KPoolKernelSet *kernels, void *stream);

/// Host-side validation as an explicit call, for metadata in host memory (a
/// GPU engine's host copies of what it will upload): the checks `validate`
/// makes on the CPU, with the same messages; the other views are read only
/// for their shapes (they may be device memory). Launches nothing.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolCheckCompress(const KPoolKernelSet *kernels, const KPoolView *pooled,
                   const KPoolView *k, const KPoolView *gate,
                   const KPoolView *ape, const KPoolView *inputRowOffsets,
                   const KPoolView *poolRowOffsets,
                   const KPoolView *cacheLengths);
KPOOL_CAPI_EXPORTED KPoolError *
kpoolCheckSeedTail(const KPoolKernelSet *kernels, const KPoolView *tail,
                   const KPoolView *k, const KPoolView *gate,
                   const KPoolView *inputRowOffsets,
                   const KPoolView *cacheLengths, const KPoolView *slotIdx,
                   int32_t numRequests);
KPOOL_CAPI_EXPORTED KPoolError *kpoolCheckRingClose(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *closedPool, const KPoolView *tail, const KPoolView *k,
    const KPoolView *gate, const KPoolView *ape,
    const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
    const KPoolView *slotIdx, int32_t numRequests);
KPOOL_CAPI_EXPORTED KPoolError *
kpoolCheckPoolOffsets(const KPoolKernelSet *kernels,
                      const KPoolView *poolRowOffsets,
                      const KPoolView *inputRowOffsets,
                      const KPoolView *cacheLengths);
KPOOL_CAPI_EXPORTED KPoolError *
kpoolCheckStep(const KPoolKernelSet *kernels, const KPoolView *closed,
               const KPoolView *closedPool, const KPoolView *poolRowOffsets,
               const KPoolView *pooled, const KPoolView *tail,
               const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
               const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
               const KPoolView *slotIdx, int32_t numRequests);

/// kpool.step, the fused serving step: what kpoolRingClose, kpoolPoolOffsets,
/// kpoolCompress and kpoolSeedTail compute in that order, in one kernel.
/// `closed` [B, head_dim] and `closedPool` [B] are ring_close's outputs,
/// `poolRowOffsets` [B+1] pool_offsets', `pooled` [P, head_dim] compress's
/// (P a capacity: a call of T tokens completes at most floor(T / kpool) + B
/// pools) and `tail` the ring, read and written.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolStep(const KPoolKernelSet *kernels, const KPoolView *closed,
          const KPoolView *closedPool, const KPoolView *poolRowOffsets,
          const KPoolView *pooled, const KPoolView *tail, const KPoolView *k,
          const KPoolView *gate, const KPoolView *ape,
          const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
          const KPoolView *slotIdx, int32_t numRequests, uint64_t *status, void *stream,
          bool validate);

/*===----------------------------------------------------------------------===*
 * The pool cache (docs/pool-cache.md)
 *===----------------------------------------------------------------------===*/

/// What the pool-cache kernels store per pool.
typedef enum KPoolCacheEntry {
  KPOOL_CACHE_NONE = 0,    ///< no pool-cache kernels
  KPOOL_CACHE_ELEMENT = 1, ///< entries of the element type
  KPOOL_CACHE_FP8 = 2,     ///< e4m3fn codes (bytes) with one f32 scale each
} KPoolCacheEntry;

/// The rotation before a pool enters the cache.
typedef enum KPoolCacheRotate {
  KPOOL_ROTATE_NONE = 0,
  KPOOL_ROTATE_HADAMARD = 1, ///< head_dim must be a power of two
} KPoolCacheRotate;

/// How an FP8 entry's scale is chosen.
typedef enum KPoolCacheScale {
  KPOOL_SCALE_ABSMAX = 0, ///< max |y| / 448 (floored at 1e-4 / 448)
  KPOOL_SCALE_POW2 = 1,   ///< the smallest power of two at or above that
} KPoolCacheScale;

/// Like kpoolKernelSetCreateForTarget, with the pool-cache kernels of one
/// format (kpoolCompressCache, kpoolRingCloseCache, kpoolStepCache) besides
/// the others. `scale` only matters for KPOOL_CACHE_FP8.
KPOOL_CAPI_EXPORTED KPoolError *kpoolKernelSetCreateWithCache(
    KPoolTarget target, KPoolElementType elementType, int64_t headDim,
    int64_t kpool, bool openmp, int64_t vectorSize, KPoolCacheEntry entry,
    KPoolCacheRotate rotate, KPoolCacheScale scale, KPoolKernelSet **result);

/// The pool-cache kernels: their op (kpoolCompress, kpoolRingClose,
/// kpoolStep) with every pool it produces also stored, in the same kernel,
/// into entry (blockTable[b, p / page_size], p mod page_size) of
/// `cacheKeys` [N, page_size, head_dim] (element type, or uint8 FP8 codes)
/// and, for FP8, of `cacheScales` [N, page_size] float (any view, unused,
/// for element entries). `blockTable` [B, pages per request] is uint32
/// (-1 padding). With `validate`, every pool the call stores must have a
/// page in the table below N, and no two pools may store into one entry;
/// the error names the request and the table entry. Operands are in the
/// kernel ABI's order (kpoolKernelAbiGetKernel).
KPOOL_CAPI_EXPORTED KPoolError *kpoolCompressCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *cacheKeys, const KPoolView *cacheScales,
    const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
    const KPoolView *inputRowOffsets, const KPoolView *poolRowOffsets,
    const KPoolView *cacheLengths, const KPoolView *blockTable, uint64_t *status, void *stream,
    bool validate);
KPOOL_CAPI_EXPORTED KPoolError *kpoolRingCloseCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *closedPool, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *tail, const KPoolView *k,
    const KPoolView *gate, const KPoolView *ape,
    const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
    const KPoolView *slotIdx, int32_t numRequests, const KPoolView *blockTable,
    uint64_t *status, void *stream, bool validate);
KPOOL_CAPI_EXPORTED KPoolError *kpoolStepCache(
    const KPoolKernelSet *kernels, const KPoolView *closed,
    const KPoolView *closedPool, const KPoolView *poolRowOffsets,
    const KPoolView *pooled, const KPoolView *tail, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *k, const KPoolView *gate,
    const KPoolView *ape, const KPoolView *inputRowOffsets,
    const KPoolView *cacheLengths, const KPoolView *slotIdx,
    int32_t numRequests, const KPoolView *blockTable, uint64_t *status, void *stream,
    bool validate);

/// The checks `validate` makes, on host copies of the metadata (the other
/// views only for their shapes); launch nothing.
KPOOL_CAPI_EXPORTED KPoolError *kpoolCheckCompressCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *cacheKeys, const KPoolView *cacheScales,
    const KPoolView *k, const KPoolView *gate, const KPoolView *ape,
    const KPoolView *inputRowOffsets, const KPoolView *poolRowOffsets,
    const KPoolView *cacheLengths, const KPoolView *blockTable);
KPOOL_CAPI_EXPORTED KPoolError *kpoolCheckRingCloseCache(
    const KPoolKernelSet *kernels, const KPoolView *pooled,
    const KPoolView *closedPool, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *tail, const KPoolView *k,
    const KPoolView *gate, const KPoolView *ape,
    const KPoolView *inputRowOffsets, const KPoolView *cacheLengths,
    const KPoolView *slotIdx, int32_t numRequests,
    const KPoolView *blockTable);
KPOOL_CAPI_EXPORTED KPoolError *kpoolCheckStepCache(
    const KPoolKernelSet *kernels, const KPoolView *closed,
    const KPoolView *closedPool, const KPoolView *poolRowOffsets,
    const KPoolView *pooled, const KPoolView *tail, const KPoolView *cacheKeys,
    const KPoolView *cacheScales, const KPoolView *k, const KPoolView *gate,
    const KPoolView *ape, const KPoolView *inputRowOffsets,
    const KPoolView *cacheLengths, const KPoolView *slotIdx,
    int32_t numRequests, const KPoolView *blockTable);

/*===----------------------------------------------------------------------===*
 * The kernel ABI
 *===----------------------------------------------------------------------===*/

/// How a kernel uses an operand.
typedef enum KPoolOperandRole {
  KPOOL_OPERAND_OUTPUT = 0, ///< a view the kernel writes
  KPOOL_OPERAND_INPUT = 1,  ///< a view the kernel reads
  KPOOL_OPERAND_SCALAR = 2, ///< a value (int32_t for KPOOL_KIND_I32)
  KPOOL_OPERAND_CONTEXT = 3, ///< the per-call context: the status word
                             ///< (uint64_t *) and the caller's stream
} KPoolOperandRole;

/// What an operand's elements are.
typedef enum KPoolOperandKind {
  KPOOL_KIND_ELEMENT = 0, ///< the kernel set's element type
  KPOOL_KIND_U32 = 1,     ///< metadata: 32-bit unsigned
  KPOOL_KIND_I32 = 2,
  KPOOL_KIND_F32 = 3,
  KPOOL_KIND_STREAM = 4, ///< a CUstream as void * (KPOOL_OPERAND_CONTEXT)
  KPOOL_KIND_CACHE_ENTRY = 5, ///< the pool-cache entry's element: the
                              ///< element type, or FP8 e4m3fn bytes
  KPOOL_KIND_U64 = 6, ///< the status word, as uint64_t * (KPOOL_OPERAND_CONTEXT)
} KPoolOperandKind;

/// One operand of a kernel.
typedef struct KPoolOperandInfo {
  const char *name; ///< e.g. "input_row_offsets"
  int32_t role;     ///< a KPoolOperandRole
  int32_t rank;     ///< 0 for a scalar
  int32_t kind;     ///< a KPoolOperandKind
  /// "d0xd1x...": '?' any extent, 'D' head_dim, 'K' kpool or a number.
  const char *shape;
} KPoolOperandInfo;

/// One kernel: the C function that runs it takes the kernel set, then one
/// argument per operand in this order (const KPoolView * for views, the
/// value for scalars, uint64_t * for the status word and void * for the
/// stream, always last), then `bool
/// validate`, and returns a KPoolError *.
typedef struct KPoolKernelInfo {
  const char *name;         ///< the op, e.g. "compress" (kpool.compress)
  const char *capiFunction; ///< e.g. "kpoolCompress"
  int64_t numOperands;
  const KPoolOperandInfo *operands;
} KPoolKernelInfo;

/// How many kernels there are.
KPOOL_CAPI_EXPORTED int64_t kpoolKernelAbiGetNumKernels(void);

/// Kernel `index` (0 <= index < kpoolKernelAbiGetNumKernels()), or NULL.
/// Static storage: valid for the life of the process.
KPOOL_CAPI_EXPORTED const KPoolKernelInfo *
kpoolKernelAbiGetKernel(int64_t index);

/*===----------------------------------------------------------------------===*
 * Pool stores
 *===----------------------------------------------------------------------===*/

/// Owns a tail ring of `maxSlots` slots and, per slot, the pooled keys
/// produced so far; runs ring_close, compress and seed_tail in that order
/// for each call. Not thread-safe.
typedef struct KPoolPoolStore KPoolPoolStore;

/// One pool produced by a step.
typedef struct KPoolProducedPool {
  uint32_t slot;    ///< the request's ring slot
  int32_t fromRing; ///< 1: closed by ring_close, 0: built by compress
  int64_t pool; ///< pool id: absolute positions [pool*kpool, (pool+1)*kpool)
} KPoolProducedPool;

/// A store for slots [0, maxSlots) running `kernels`, with the position
/// embedding `ape` ([kpool, head_dim] f32, dense, copied).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCreate(const KPoolKernelSet *kernels, int64_t maxSlots,
                     const float *ape, KPoolPoolStore **result);

/// Like kpoolPoolStoreCreate, with a ring of `ringWindow` rows per slot
/// (`ringWindow >= kpool`, or 0 for kpool). A window of `kpool + d - 1`
/// rows lets kpoolPoolStoreAccept roll back any rejected suffix of a verify
/// step of 1 + d tokens.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCreateWithWindow(const KPoolKernelSet *kernels, int64_t maxSlots,
                               int64_t ringWindow, const float *ape,
                               KPoolPoolStore **result);

/// The contract's rollback condition, for engines that track lengths
/// themselves: after a call that brought positions [c, end) of a request,
/// continuing it at `accepted` (c <= accepted <= end) with a ring of
/// `window` rows is valid iff `accepted mod kpool == 0` or
/// `end - floor(accepted / kpool) * kpool <= window`.
KPOOL_CAPI_EXPORTED bool kpoolRingHoldsPending(int64_t kpool, int64_t window,
                                               int64_t accepted, int64_t end);

/// The ring window (rows per slot); -1 for NULL.
KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetRingWindow(const KPoolPoolStore *store);

/// Speculative decoding: keeps the first `accepted` of the tokens the slot's
/// last step brought (or that an earlier accept left), forgets the slot's
/// pools at and after the first rejected position (later steps re-produce
/// them) and sets its length to the step's start plus `accepted`. Fails,
/// changing nothing, when `accepted` is out of range or the ring window is
/// too small to hold the pending pool's members at the new length (the
/// message names the slot and the window needed).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreAccept(KPoolPoolStore *store, uint32_t slot, int64_t accepted);

/// Frees the store; NULL is allowed.
KPOOL_CAPI_EXPORTED void kpoolPoolStoreDestroy(KPoolPoolStore *store);

/// Runs one call of `numRequests` requests: request b brings rows
/// [inputRowOffsets[b], inputRowOffsets[b+1]) of `k` and `gate` ([rows,
/// head_dim] views of the element type) for ring slot `slots[b]`, continuing
/// where that slot's earlier calls stopped. `inputRowOffsets` has
/// numRequests + 1 entries. Stores the number of pools produced in
/// `*numProduced` (if not NULL); kpoolPoolStoreGetProduced lists them. On
/// error nothing in the store changes.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreStep(KPoolPoolStore *store, const KPoolView *k,
                   const KPoolView *gate, int64_t numRequests,
                   const uint32_t *inputRowOffsets, const uint32_t *slots,
                   int64_t *numProduced);

/// The pools the last successful step produced, in order (per request: the
/// ring's pool first, then compress's in id order). Stores the count in
/// `*count`. Valid until the next step or the store's destruction.
KPOOL_CAPI_EXPORTED const KPoolProducedPool *
kpoolPoolStoreGetProduced(const KPoolPoolStore *store, int64_t *count);

KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetMaxSlots(const KPoolPoolStore *store);

/// Tokens the slot has seen (its cache length for the next call); -1 for a
/// slot that is not below max_slots.
KPOOL_CAPI_EXPORTED int64_t kpoolPoolStoreGetTokens(const KPoolPoolStore *store,
                                                    uint32_t slot);

/// Complete pools the slot has (ids 0 .. count-1); -1 for a bad slot.
KPOOL_CAPI_EXPORTED int64_t
kpoolPoolStoreGetNumPools(const KPoolPoolStore *store, uint32_t slot);

/// Pool `pool` of `slot`: head_dim dense elements of the element type, valid
/// until the next step, reset or destruction; NULL when out of range.
KPOOL_CAPI_EXPORTED const void *
kpoolPoolStoreGetPool(const KPoolPoolStore *store, uint32_t slot, int64_t pool);

/// Copies pools [first, first + count) of `slot` into rows of `dst`
/// ([count, head_dim] view of the element type, any strides).
KPOOL_CAPI_EXPORTED KPoolError *
kpoolPoolStoreCopyPools(const KPoolPoolStore *store, uint32_t slot,
                        int64_t first, int64_t count, const KPoolView *dst);

/// Forgets a slot's tokens and pools so that a new request can take it.
KPOOL_CAPI_EXPORTED KPoolError *kpoolPoolStoreReset(KPoolPoolStore *store,
                                                    uint32_t slot);

#ifdef __cplusplus
}
#endif

/* Kernel packs, the kernel cache and the version. */
#include "kpool-c/Packs.h"

#endif /* KPOOL_C_RUNTIME_H */
