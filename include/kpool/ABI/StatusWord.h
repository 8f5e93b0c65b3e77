/*===- kpool/ABI/StatusWord.h - the device status word ------------*- C -*-===*\
|*                                                                            *|
|* The format of the optional `status` operand of every kpool op (one 64-bit *|
|* word, docs/semantics.md "The status word"): where a kernel's guard finds  *|
|* bad metadata it records `(request << 8) | finding`, keeping the smallest  *|
|* nonzero value, so that the word a call leaves is the same whatever the    *|
|* order its threads ran in. 0 is "nothing found". The lowering              *|
|* (convert-kpool-to-linalg) records the findings and the runtime decodes    *|
|* them (kpool::statusWordError, kpoolStatusWordError); this header is the   *|
|* one list of both. C-compatible (the C enum KPoolStatusFinding is          *|
|* generated from the list), with a C++ section (namespace kpool::status).   *|
|* Part of the ABI leaf: no MLIR, no CUDA.                                   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_ABI_STATUSWORD_H
#define KPOOL_ABI_STATUSWORD_H

#include <stdint.h>

/// What a guard found, in the order a request's findings rank (a smaller
/// code wins within one request): X(Name, C_NAME, code, field, what). The
/// fields are the ones host validation names for the same mistake; `what`
/// is the message, with "[b]" and "[b+1]" standing for the request's
/// indices.
#define KPOOL_STATUS_FINDINGS(X)                                               \
  X(RowsReversed, ROWS_REVERSED, 1, "input_row_offsets",                       \
    "input_row_offsets[b+1] is below input_row_offsets[b] (rows reversed)")    \
  X(RowsPastK, ROWS_PAST_K, 2, "input_row_offsets",                            \
    "input_row_offsets[b+1] reaches past the rows of 'k'")                     \
  X(SlotOutOfRange, SLOT_OUT_OF_RANGE, 3, "slot_idx",                          \
    "slot_idx[b] is not below max_slots (the ring's slots)")                   \
  X(PoolRangeMismatch, POOL_RANGE_MISMATCH, 4, "pool_row_offsets",             \
    "pool_row_offsets[b+1] - pool_row_offsets[b] is not the number of pools "  \
    "the request completes")                                                   \
  X(PoolRowsPastOutput, POOL_ROWS_PAST_OUTPUT, 5, "pool_row_offsets",          \
    "pool_row_offsets[b+1] is past the rows of 'pooled'")                      \
  X(PooledCapacity, POOLED_CAPACITY, 6, "pooled",                              \
    "the request's pools reach past the rows of 'pooled' (its capacity)")      \
  X(TablePastWidth, TABLE_PAST_WIDTH, 7, "block_table",                        \
    "a pool's page index (pool / page_size) is past the table's pages per "    \
    "request")                                                                 \
  X(TablePadding, TABLE_PADDING, 8, "block_table",                             \
    "a pool goes to a block_table entry that is -1 (padding)")                 \
  X(TablePageOutOfRange, TABLE_PAGE_OUT_OF_RANGE, 9, "block_table",            \
    "a pool goes to a page that is not below the cache's pages")               \
  X(NumRequests, NUM_REQUESTS, 10, "num_requests",                             \
    "num_requests is outside [0, B] (the batch size)")                         \
  X(Extent, EXTENT, 11, "extents",                                             \
    "an operand's extent contradicts the op or the kernels' configuration")

#ifdef __cplusplus
extern "C" {
#endif

/// What a status word records: `(request << KPOOL_STATUS_FINDING_BITS) |
/// finding` (request 0 for KPOOL_STATUS_NUM_REQUESTS; the operand and the
/// dimension for KPOOL_STATUS_EXTENT, below), the smallest over the
/// findings the kernels' guards meet; 0 is nothing found.
typedef enum KPoolStatusFinding {
#define KPOOL_STATUS_C_ENUM(Name, C_NAME, code, field, what)                   \
  KPOOL_STATUS_##C_NAME = code,
  KPOOL_STATUS_FINDINGS(KPOOL_STATUS_C_ENUM)
#undef KPOOL_STATUS_C_ENUM
} KPoolStatusFinding;

/// Bits of the word below the request index.
#define KPOOL_STATUS_FINDING_BITS 8

/// KPOOL_STATUS_EXTENT's word carries, in place of a request, the operand
/// at fault and its dimension: `((operand << 4 | dim) << 8) | 11`. The
/// operand is its id, the position of its name among the distinct operand
/// names of kpool/ABI/KernelABI.def in order of first appearance
/// (kpool::abi::operandId); `dim` is the dimension (0-3), or
/// KPOOL_STATUS_EXTENT_DATA (the view has elements but no data pointer) or
/// KPOOL_STATUS_EXTENT_RANK (the view has the wrong rank, or is null).
#define KPOOL_STATUS_EXTENT_DIM_BITS 4
#define KPOOL_STATUS_EXTENT_DATA 14
#define KPOOL_STATUS_EXTENT_RANK 15

#ifdef __cplusplus
}

namespace kpool::status {

enum class Finding : uint8_t {
#define KPOOL_STATUS_ENUM(Name, C_NAME, code, field, what)                     \
  Name = KPOOL_STATUS_##C_NAME,
  KPOOL_STATUS_FINDINGS(KPOOL_STATUS_ENUM)
#undef KPOOL_STATUS_ENUM
};

/// Bits of the word below the request index.
inline constexpr int kFindingBits = KPOOL_STATUS_FINDING_BITS;

/// The word recording `finding` for request `request` (0 for the call-level
/// num_requests finding).
constexpr uint64_t encode(uint64_t request, Finding finding) {
  return (request << kFindingBits) | uint64_t(finding);
}
constexpr uint64_t requestOf(uint64_t word) { return word >> kFindingBits; }
constexpr uint8_t findingOf(uint64_t word) {
  return uint8_t(word & ((1u << kFindingBits) - 1));
}

/// The extent finding's dimension codes (KPOOL_STATUS_EXTENT_*).
inline constexpr unsigned kExtentData = KPOOL_STATUS_EXTENT_DATA;
inline constexpr unsigned kExtentRank = KPOOL_STATUS_EXTENT_RANK;
/// The word recording an extent finding: operand id `operand`
/// (kpool::abi::operandId), dimension `dim` (0-3, kExtentData or
/// kExtentRank).
constexpr uint64_t encodeExtent(uint64_t operand, unsigned dim) {
  return (((operand << KPOOL_STATUS_EXTENT_DIM_BITS) | (dim & 15u))
          << kFindingBits) |
         uint64_t(Finding::Extent);
}
constexpr uint64_t extentOperandOf(uint64_t word) {
  return requestOf(word) >> KPOOL_STATUS_EXTENT_DIM_BITS;
}
constexpr unsigned extentDimOf(uint64_t word) {
  return unsigned(requestOf(word) & 15u);
}

/// What a finding names and means: the field and the message ("[b]" and
/// "[b+1]" standing for the request's indices); nulls for a code that is
/// not a finding.
struct FindingInfo {
  const char *field = nullptr;
  const char *what = nullptr;
};
constexpr FindingInfo info(uint8_t finding) {
  switch (finding) {
#define KPOOL_STATUS_INFO(Name, C_NAME, code, field, what)                     \
  case code:                                                                   \
    return FindingInfo{field, what};
    KPOOL_STATUS_FINDINGS(KPOOL_STATUS_INFO)
#undef KPOOL_STATUS_INFO
  }
  return FindingInfo{};
}

/// The field a finding names, or null for a code that is not a finding.
constexpr const char *fieldOf(uint8_t finding) { return info(finding).field; }

/// What a finding means, or null for a code that is not a finding.
constexpr const char *describe(uint8_t finding) { return info(finding).what; }

} // namespace kpool::status

#endif // __cplusplus

#endif /* KPOOL_ABI_STATUSWORD_H */
