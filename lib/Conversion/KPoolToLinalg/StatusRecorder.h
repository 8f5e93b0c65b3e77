//===- StatusRecorder.h - emitting the status word's findings ---*- C++ -*-===//
//
// The IR that records a guard's finding in an op's status word
// (kpool/ABI/StatusWord.h): one `memref.generic_atomic_rmw`
// that keeps the word's smallest nonzero code, so the word a call leaves does
// not depend on the order its threads ran in.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOLINALG_STATUSRECORDER_H
#define KPOOL_LIB_CONVERSION_KPOOLTOLINALG_STATUSRECORDER_H

#include "kpool/ABI/StatusWord.h"
#include "mlir/IR/Value.h"

#include <utility>

namespace mlir::kpool::lowering {

class Emitter;

/// Records findings in the status word of the op an Emitter lowers. With no
/// status word, every method emits nothing (and `present()` is false).
class StatusRecorder {
public:
  /// `word`: the op's status word (a 1-D i64 or ui64 memref), or null.
  StatusRecorder(Emitter &e, Value word);

  /// Whether the op has a status word.
  bool present() const { return bool(word); }

  /// A finding: `finding` when `cond` (i1) holds.
  using Check = std::pair<Value, ::kpool::status::Finding>;

  /// Runs `fn` (which computes checks and records them) only when the op
  /// has a status word and the word has an element: a call without one
  /// pays a branch, not the checks.
  void guard(function_ref<void()> fn);

  /// Records, for request `request` (index or i64), the first of `checks`
  /// whose condition holds (the smallest code: the list is in code order).
  /// Call it under guard.
  void record(Value request, ArrayRef<Check> checks);

  /// Records `code` (i64, a whole word: see StatusWord.h) when it is not 0.
  /// Call it under guard.
  void recordCode(Value code);

  /// The findings of request `bIdx`'s rows `[iro[b], iro[b+1])` against
  /// `numRows` rows of `k` (i64; 2^32 when there is no `k`).
  SmallVector<Check> rowChecks(Value iro, Value bIdx, Value numRows);

  /// Records the num_requests finding (request 0) when `numRequests` (the
  /// op's i32) is outside `[0, batch]`.
  void recordNumRequests(Value numRequests, Value batch);

  /// A parallel loop bound `ub` (index), at least 1 with a status word: the
  /// call-level findings are recorded by iteration 0 even when there is
  /// nothing else to do.
  Value withStatusIteration(Value ub);

private:
  /// Keeps `code` (i64, nonzero) in the word when it is smaller than the
  /// word's nonzero value.
  void keepSmallest(Value code);

  Emitter &e;
  Value word;
};

} // namespace mlir::kpool::lowering

#endif // KPOOL_LIB_CONVERSION_KPOOLTOLINALG_STATUSRECORDER_H
