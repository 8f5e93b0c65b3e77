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
#include <string>

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
  X(Extent, 11, "extent",                                                      \
    "an operand's extent contradicts the op (the operand and dimension are "   \
    "in the word: see ExtentFinding)")

enum class Finding : uint8_t {
#define KPOOL_STATUS_ENUM(name, code, field, what) name = code,
  KPOOL_STATUS_FINDINGS(KPOOL_STATUS_ENUM)
#undef KPOOL_STATUS_ENUM
};

/// Bits of the word below the request index.
inline constexpr int kFindingBits = 8;

//===----------------------------------------------------------------------===//
// The Extent finding: a run-time extent that contradicts the op
//===----------------------------------------------------------------------===//

/// The operands an Extent finding can name (the names are the ops'
/// operand names, as the verifier and host validation spell them).
#define KPOOL_STATUS_OPERANDS(X)                                               \
  X(K, 1, "k")                                                                 \
  X(Gate, 2, "gate")                                                           \
  X(Ape, 3, "ape")                                                             \
  X(InputRowOffsets, 4, "input_row_offsets")                                   \
  X(PoolRowOffsets, 5, "pool_row_offsets")                                     \
  X(CacheLengths, 6, "cache_lengths")                                          \
  X(SlotIdx, 7, "slot_idx")                                                    \
  X(Tail, 8, "tail")                                                           \
  X(Pooled, 9, "pooled")                                                       \
  X(Closed, 10, "closed")                                                      \
  X(ClosedPool, 11, "closed_pool")                                             \
  X(CacheKeys, 12, "cache_keys")

enum class Operand : uint8_t {
#define KPOOL_STATUS_OPERAND_ENUM(name, id, spelling) name = id,
  KPOOL_STATUS_OPERANDS(KPOOL_STATUS_OPERAND_ENUM)
#undef KPOOL_STATUS_OPERAND_ENUM
};

/// What an extent must be, and the words that say why. `RingWindow` is a
/// lower bound (at least kpool); every other expectation is an equality.
#define KPOOL_STATUS_EXPECTATIONS(X)                                           \
  X(HeadDim, 1, "head_dim")                                                    \
  X(KPool, 2, "kpool")                                                         \
  X(KeysAndGates, 3, "keys and gates")                                         \
  X(RingWindow, 4, "kpool")                                                    \
  X(TokenRows, 5, "the rows of 'k'")                                           \
  X(Batch, 6, "one per request")                                               \
  X(BatchPlusOne, 7, "one more than cache_lengths")

enum class Expectation : uint8_t {
#define KPOOL_STATUS_EXPECTATION_ENUM(name, id, words) name = id,
  KPOOL_STATUS_EXPECTATIONS(KPOOL_STATUS_EXPECTATION_ENUM)
#undef KPOOL_STATUS_EXPECTATION_ENUM
};

/// The layout of an Extent word above the finding's 8 bits (no request:
/// a contradicting extent is the call's, not a request's):
///   bits  8-15  the operand (Operand)
///   bits 16-19  the dimension
///   bits 20-23  the expectation (Expectation)
///   bits 24-43  the run-time extent, saturated at kExtentMax
///   bits 44-63  the expected extent, saturated at kExtentMax
struct ExtentFinding {
  Operand operand;
  uint8_t dim;
  Expectation expectation;
  uint64_t actual;
  uint64_t expected;
};
inline constexpr int kExtentOperandShift = 8;
inline constexpr int kExtentDimShift = 16;
inline constexpr int kExtentExpectationShift = 20;
inline constexpr int kExtentActualShift = 24;
inline constexpr int kExtentExpectedShift = 44;
/// Extents at or above this are recorded as this ("or more").
inline constexpr uint64_t kExtentMax = (uint64_t(1) << 20) - 1;

constexpr uint64_t saturateExtent(uint64_t extent) {
  return extent < kExtentMax ? extent : kExtentMax;
}

/// The word recording `f` (its extents saturated).
constexpr uint64_t encodeExtent(const ExtentFinding &f) {
  return uint64_t(f.operand) << kExtentOperandShift |
         uint64_t(f.dim & 0xf) << kExtentDimShift |
         uint64_t(f.expectation) << kExtentExpectationShift |
         saturateExtent(f.actual) << kExtentActualShift |
         saturateExtent(f.expected) << kExtentExpectedShift |
         uint64_t(Finding::Extent);
}

constexpr ExtentFinding decodeExtent(uint64_t word) {
  return {Operand((word >> kExtentOperandShift) & 0xff),
          uint8_t((word >> kExtentDimShift) & 0xf),
          Expectation((word >> kExtentExpectationShift) & 0xf),
          (word >> kExtentActualShift) & kExtentMax,
          (word >> kExtentExpectedShift) & kExtentMax};
}

/// The name of operand `id`, or null for an id that is not an operand.
constexpr const char *operandName(uint8_t id) {
  switch (id) {
#define KPOOL_STATUS_OPERAND_NAME(name, code, spelling)                        \
  case code:                                                                   \
    return spelling;
    KPOOL_STATUS_OPERANDS(KPOOL_STATUS_OPERAND_NAME)
#undef KPOOL_STATUS_OPERAND_NAME
  }
  return nullptr;
}

/// The words of expectation `id`, or null for an id that is not one.
constexpr const char *expectationWords(uint8_t id) {
  switch (id) {
#define KPOOL_STATUS_EXPECTATION_WORDS(name, code, words)                      \
  case code:                                                                   \
    return words;
    KPOOL_STATUS_EXPECTATIONS(KPOOL_STATUS_EXPECTATION_WORDS)
#undef KPOOL_STATUS_EXPECTATION_WORDS
  }
  return nullptr;
}

/// The message of a contradicting extent, the same words from the kernels'
/// status word (kpool::statusWordError) and from host validation:
/// "'k' dimension 1 is 8 at run time, expected 4 (head_dim)", or
/// "... expected at least 4 (kpool)" for the ring window. An extent at
/// kExtentMax from a status word prints as "1048575 or more".
inline std::string extentMessage(const char *operand, unsigned dim,
                                 uint64_t actual, uint64_t expected,
                                 Expectation expectation,
                                 bool saturated = false) {
  auto number = [&](uint64_t v) {
    return std::to_string(v) +
           (saturated && v >= kExtentMax ? std::string(" or more") : "");
  };
  const char *words = expectationWords(uint8_t(expectation));
  return "'" + std::string(operand) + "' dimension " + std::to_string(dim) +
         " is " + number(actual) + " at run time, expected " +
         (expectation == Expectation::RingWindow ? "at least " : "") +
         number(expected) + " (" + (words ? words : "?") + ")";
}

/// The word recording `finding` for request `request` (0 for the call-level
/// num_requests finding).
constexpr uint64_t encode(uint64_t request, Finding finding) {
  return (request << kFindingBits) | uint64_t(finding);
}
constexpr uint64_t requestOf(uint64_t word) { return word >> kFindingBits; }
constexpr uint8_t findingOf(uint64_t word) {
  return uint8_t(word & ((1u << kFindingBits) - 1));
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
