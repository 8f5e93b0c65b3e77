//===- StatusWord.h - the device status word of the kpool ops ---*- C++ -*-===//
//
// The format of the optional `status` operand of every kpool op (one 64-bit
// word, docs/semantics.md "The status word"): where a kernel's guard finds
// bad metadata it records `(request << 8) | finding`, keeping the smallest
// nonzero value, so that the word a call leaves is the same whatever the
// order its threads ran in. 0 is "nothing found". The lowering
// (convert-kpool-to-linalg) records the findings and the runtime decodes
// them (kpool::statusWordError); this header is the one list of both, with
// no dependency on MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_IR_STATUSWORD_H
#define KPOOL_DIALECT_KPOOL_IR_STATUSWORD_H

#include <cstdint>

namespace kpool::status {

/// What a guard found, in the order a request's findings rank (a smaller
/// code wins within one request). The names are the fields host validation
/// names for the same mistake.
#define KPOOL_STATUS_FINDINGS(X)                                               \
  X(RowsReversed, 1, "input_row_offsets",                                      \
    "input_row_offsets[b+1] is below input_row_offsets[b] (rows reversed)")    \
  X(RowsPastK, 2, "input_row_offsets",                                         \
    "input_row_offsets[b+1] reaches past the rows of 'k'")                     \
  X(SlotOutOfRange, 3, "slot_idx",                                             \
    "slot_idx[b] is not below max_slots (the ring's slots)")                   \
  X(PoolRangeMismatch, 4, "pool_row_offsets",                                  \
    "pool_row_offsets[b+1] - pool_row_offsets[b] is not the number of pools "  \
    "the request completes")                                                   \
  X(PoolRowsPastOutput, 5, "pool_row_offsets",                                 \
    "pool_row_offsets[b+1] is past the rows of 'pooled'")                      \
  X(PooledCapacity, 6, "pooled",                                               \
    "the request's pools reach past the rows of 'pooled' (its capacity)")      \
  X(TablePastWidth, 7, "block_table",                                          \
    "a pool's page index (pool / page_size) is past the table's pages per "    \
    "request")                                                                 \
  X(TablePadding, 8, "block_table",                                            \
    "a pool goes to a block_table entry that is -1 (padding)")                 \
  X(TablePageOutOfRange, 9, "block_table",                                     \
    "a pool goes to a page that is not below the cache's pages")               \
  X(NumRequests, 10, "num_requests",                                           \
    "num_requests is outside [0, B] (the batch size)")                         \
  X(Extent, 11, "extents",                                                     \
    "an operand's extent contradicts the op or the kernels' configuration")

enum class Finding : uint8_t {
#define KPOOL_STATUS_ENUM(name, code, field, what) name = code,
  KPOOL_STATUS_FINDINGS(KPOOL_STATUS_ENUM)
#undef KPOOL_STATUS_ENUM
};

/// Bits of the word below the request index.
inline constexpr int kFindingBits = 8;

/// The word recording `finding` for request `request` (0 for the call-level
/// num_requests finding).
constexpr uint64_t encode(uint64_t request, Finding finding) {
  return (request << kFindingBits) | uint64_t(finding);
}
constexpr uint64_t requestOf(uint64_t word) { return word >> kFindingBits; }
constexpr uint8_t findingOf(uint64_t word) {
  return uint8_t(word & ((1u << kFindingBits) - 1));
}

/// The extent finding (PROVISIONAL: written against the definition that is
/// being added to the kernels' own checks; to be reconciled with it). Its
/// word carries, in place of a request, the operand's id (its position
/// among the distinct operand names of KernelABI.def, kpool/Runtime/
/// KernelExtents.h operandId) and the dimension at fault (0-3; 14: a null
/// data pointer; 15: the rank): ((operand << 4 | dim) << 8) | 11.
inline constexpr unsigned kExtentRank = 15;
inline constexpr unsigned kExtentData = 14;
constexpr uint64_t encodeExtent(uint64_t operand, unsigned dim) {
  return (((operand << 4) | (dim & 15u)) << kFindingBits) |
         uint64_t(Finding::Extent);
}
constexpr uint64_t extentOperandOf(uint64_t word) {
  return requestOf(word) >> 4;
}
constexpr unsigned extentDimOf(uint64_t word) {
  return unsigned(requestOf(word) & 15u);
}

/// The field a finding names, or null for a code that is not a finding.
constexpr const char *fieldOf(uint8_t finding) {
  switch (finding) {
#define KPOOL_STATUS_FIELD(name, code, field, what)                            \
  case code:                                                                   \
    return field;
    KPOOL_STATUS_FINDINGS(KPOOL_STATUS_FIELD)
#undef KPOOL_STATUS_FIELD
  }
  return nullptr;
}

/// What a finding means, or null for a code that is not a finding.
constexpr const char *describe(uint8_t finding) {
  switch (finding) {
#define KPOOL_STATUS_WHAT(name, code, field, what)                             \
  case code:                                                                   \
    return what;
    KPOOL_STATUS_FINDINGS(KPOOL_STATUS_WHAT)
#undef KPOOL_STATUS_WHAT
  }
  return nullptr;
}

} // namespace kpool::status

#endif // KPOOL_DIALECT_KPOOL_IR_STATUSWORD_H
