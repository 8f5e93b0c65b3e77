//===- PoolCache.h - a plain reference of the pool cache --------*- C++ -*-===//
//
// An independent, deliberately simple implementation of the pool cache of
// docs/semantics.md ("The pool cache"): where a pool goes in the paged
// `cache_keys`/`cache_scales` (through `block_table`), and what it holds
// (the dense pooled value, optionally Hadamard-rotated, stored as the element
// type or as FP8 E4M3FN codes with one absmax or power-of-two scale).
//
// The cache writers take the dense output as computed by reference::compress
// and reference::ringClose and place each pool those ops produce: the value
// of a cache entry is a function of the dense row's bits alone. Views are the
// runtime's strided `KPoolView`s (sizes and strides in elements):
//  - cacheKeys    [N, page_size, D]: uint8 codes (FP8) or the element type
//                 (bf16/f16 as uint16 bit patterns, f32);
//  - cacheScales  [N, page_size] f32 (FP8 only; untouched otherwise);
//  - blockTable   [B, W] read as uint32 (an i32 -1 padding is 0xffffffff).
// Test-only, written to be obviously right, not fast. Compiled with
// -ffp-contract=off: every product and sum is rounded to f32 on its own.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_REFERENCE_POOLCACHE_H
#define KPOOL_TEST_REFERENCE_POOLCACHE_H

#include "Reference/Reference.h"

#include "kpool/ABI/CacheFormat.h"
#include "kpool/ABI/View.h"

#include <cstdint>

namespace kpool::reference {

// The cache format is the ABI leaf's (kpool::CacheFormat); the reference
// takes entry Element or FP8.

/// The E4M3FN code of `x`, rounded to nearest, ties to the even code. `x` is
/// assumed finite and already clamped to [-448, 448] (larger magnitudes give
/// 448's code, NaN gives 0x7f with the sign). The sign is kept: -0 and
/// negatives that round to zero give 0x80. Found by searching the 127
/// non-negative finite code values, independently of any bit trick.
uint8_t e4m3fnEncode(float x);
/// The value of an E4M3FN code (exact in f32); 0x7f and 0xff are NaN.
float e4m3fnDecode(uint8_t code);

/// The cache entry of one pool. `x` holds the D values f32(T(pool)) (the
/// dense output's bits, widened). With CacheRotate::Hadamard (D a power of two;
/// the ops reject other D) y is the staged f32 fast Walsh-Hadamard transform
/// of x, stages h = 1, 2, ..., D/2, then y_d = f32(T(f32(y_d * c))) with
/// c = f32(1/sqrt(D)); with CacheRotate::None y = x.
///  - CacheEntry::Element: entryBits[d] = T(y_d) as raw bits (uint16 for
///    bf16/f16); `*scale` is not written.
///  - CacheEntry::FP8: a = max(max_d |y_d|, f32(1e-4)), s_abs = a * f32(1/448)
///    (one f32 product), s = s_abs (CacheScale::Absmax) or the smallest power of two
///    >= s_abs (CacheScale::Pow2); entryBits[d] = e4m3fn(clamp(f32(y_d / s), -448, 448))
///    (a code in [0, 255]) and `*scale` = s.
/// Non-finite x or y give unspecified codes and scale (nothing outside the
/// D entries and `*scale` is written).
void cacheEntry(KPoolElementType type, int64_t headDim, const CacheFormat &f,
                const float *x, uint32_t *entryBits, float *scale);

/// Stores one entry (g.headDim values of `entryBits`, and `scale` for FP8)
/// as pool `poolId` of batch row `batchRow`: page = blockTable[batchRow,
/// poolId / page_size] (uint32), row = poolId % page_size, page_size =
/// cacheKeys.sizes[1]. Writes nothing when batchRow is not below
/// blockTable's rows, poolId / page_size not below its width, page not below
/// cacheKeys.sizes[0], or (FP8) page or row not below cacheScales' extents;
/// nor when a view's rank (or cacheKeys' last extent) is not the expected
/// one, page_size < 1, or poolId < 0.
void storeCache(const Geometry &g, const CacheFormat &f,
                const KPoolView &cacheKeys, const KPoolView &cacheScales,
                const KPoolView &blockTable, int64_t batchRow, int64_t poolId,
                const uint32_t *entryBits, float scale);

/// The cache writes of kpool.compress: every pool that reference::compress
/// writes into the dense `pooled` (with the same guards; `numTokenRows` is
/// the row count of `k` and `gate`, i.e. the min of the two) goes, computed
/// from its dense row, to pool id first + j of its batch row. Call it after
/// reference::compress on the same operands. A dense row claimed by two
/// requests (overlapping pool_row_offsets) holds one of their pools only;
/// here both requests store that row's value (the differential test does not
/// use such offsets).
void compressCache(const Geometry &g, const CacheFormat &f,
                   const KPoolView &cacheKeys, const KPoolView &cacheScales,
                   const KPoolView &blockTable, const KPoolView &pooled,
                   const KPoolView &inputRowOffsets,
                   const KPoolView &poolRowOffsets,
                   const KPoolView &cacheLengths, int64_t numTokenRows);

/// The cache writes of kpool.ring_close: for every batch row b below both
/// pooled's and closedPool's rows with closedPool[b] >= 0 (int32), the entry
/// of dense row b goes to pool id closedPool[b] of batch row b. Call it
/// after reference::ringClose.
void ringCloseCache(const Geometry &g, const CacheFormat &f,
                    const KPoolView &cacheKeys, const KPoolView &cacheScales,
                    const KPoolView &blockTable, const KPoolView &pooled,
                    const KPoolView &closedPool);

} // namespace kpool::reference

#endif // KPOOL_TEST_REFERENCE_POOLCACHE_H
