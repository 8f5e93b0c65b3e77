//===- Emitter.h - IR emission for one lowered kpool op ---------*- C++ -*-===//
//
// The builder every lowering of convert-kpool-to-linalg emits with: views of
// rows and ring rows, guards, the kernel loop and the pooling function. Its
// state is the op it lowers (geometry, kernel name, the pass's choices, the
// status word and the pool-cache destination), set once in its constructor;
// the status word's findings and the cache's entries are emitted by its
// members `status` (StatusRecorder.h) and `cache` (CacheStore.h).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EMITTER_H
#define KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EMITTER_H

#include "CacheStore.h"
#include "StatusRecorder.h"

#include "kpool/Dialect/KPool/Utils/Metadata.h"
#include "kpool/Dialect/KPool/Utils/Pooling.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

#include <string>

namespace mlir::kpool::lowering {

/// What the kernel of one op is: the op's geometry, its name and the
/// lowering's choices for it.
struct KernelSpec {
  int64_t kpool = 1;
  int64_t headDim = 1;
  /// The op's name without the dialect: its loop is tagged `kpool_<name>`.
  std::string name;
  /// Pools ahead whose member rows compress's rows prefetch (0: none).
  int64_t prefetchPools = 0;
  /// Pools of at most this many members are unrolled, larger ones use the
  /// member loop (`unroll-members`; the same bits either way).
  int64_t unrollMembers = kMaxUnrolledMembers;
};

/// Emits the IR of one op's lowering at the insertion point of `b`.
class Emitter : public MetadataBuilder {
public:
  /// `statusWord` (a 1-D i64 or ui64 memref) and `cacheDest.table` may be
  /// null: the op has no status word, no pool cache.
  Emitter(OpBuilder &b, Location loc, const KernelSpec &spec, Value statusWord,
          const CacheDest &cacheDest);
  Emitter(const Emitter &) = delete;
  Emitter &operator=(const Emitter &) = delete;

  OpBuilder &b;
  const Location loc;
  const int64_t kpool;
  const int64_t headDim;

  /// The op's pool-cache destination: where each pool is also stored.
  CacheStore cache;
  /// The op's status word: where the guards record what they find.
  StatusRecorder status;

  //===--- Values and conditions ------------------------------------------===//

  Value dim(Value memref, int64_t d);
  Value cmp(arith::CmpIPredicate pred, Value lhs, Value rhs);
  Value i1(bool v);
  /// `lhs && rhs` where either may be null (always true).
  Value both(Value lhs, Value rhs);

  /// Static innermost stride of `type`, or ShapedType::kDynamic.
  static int64_t innermostStride(MemRefType type);

  //===--- Views ----------------------------------------------------------===//

  /// The 1-D view of `headDim` elements at `leading` (all but the last
  /// dimension are dropped). Its layout is `strided<[1], offset: ?>` when the
  /// source's innermost stride is statically 1 (the vectorizable case) and
  /// fully dynamic otherwise, so that views of different operands share a
  /// type.
  Value channelView(Value memref, ArrayRef<OpFoldResult> leading);
  /// Row `row` (i64) of a 2-D memref.
  Value rowView(Value memref, Value row);
  /// Ring row `tail[slot, which, row, :]` (`slot` and `row` i64).
  Value ringView(Value tail, Value slot, int64_t which, Value row);
  /// `select` between two channel views, casting both to the fully dynamic
  /// layout when their layouts differ.
  Value selectView(Value cond, Value lhs, Value rhs);

  /// Emits `fn` twice under `scf.if`: once with `memrefs` cast to a layout
  /// whose innermost stride is statically 1 (taken when that holds at run
  /// time, the common case that vectorizes into contiguous loads) and once
  /// with the operands as they are (any strides). Emits `fn` once when no
  /// operand has a dynamic innermost stride.
  void versionOnUnitStride(ArrayRef<Value> memrefs,
                           function_ref<void(ArrayRef<Value>)> fn);
  /// versionOnUnitStride over `memrefs` and the pool cache's keys (when the
  /// op has a cache): `fn` sees the version of `memrefs`, and the cache
  /// stores through the version of its keys meanwhile.
  void versionWithCache(ArrayRef<Value> memrefs,
                        function_ref<void(ArrayRef<Value>)> fn);

  //===--- Control flow ---------------------------------------------------===//

  /// Runs `fn` under `scf.if cond` (or directly when `cond` is null).
  void ifThen(Value cond, function_ref<void()> fn);
  /// `thenFn` under `scf.if cond`, `elseFn` in its else branch; only
  /// `thenFn` when `cond` is null (nothing to check).
  void ifThenOtherwise(Value cond, function_ref<void()> thenFn,
                       function_ref<void()> elseFn);
  void ifThenElse(Value cond, function_ref<void()> thenFn,
                  function_ref<void()> elseFn);

  /// `scf.parallel` over `[0, ub)`; `fn` gets the index induction variable.
  /// The loop is tagged with the kernel it becomes (`kpool.kernel`):
  /// `kpool_<op>`, then `_<variant>` when given, then `_strided` for the
  /// general-stride copy.
  void parallelFor(Value ub, function_ref<void(Value)> fn,
                   StringRef variant = {});

  //===--- Rows -----------------------------------------------------------===//

  /// Runs the pooling function of the given members into `outRow`.
  void poolRow(ArrayRef<Value> keys, ArrayRef<Value> gates, Value ape,
               Value outRow);
  /// The pooling function into `outRow` in the loop form (any kpool, IR
  /// independent of it); `member(m)` (m an i64) gives member m's key and
  /// gate rows.
  void poolRowLoop(function_ref<std::pair<Value, Value>(Value)> member,
                   Value ape, Value outRow);
  /// Whether pools are unrolled (kpool at most `unroll-members`).
  bool unrolledPools() const { return kpool <= unrollMembers; }
  /// Fills `outRow` with zeros.
  Value zeroRow(Value outRow);

  /// Prefetches, when the spec asks for it, the key and gate rows of the
  /// pool `prefetchPools` pools after the one whose members start at row
  /// `first` (i64) of `k` and `gate` (`numRows` i64 rows, at least one):
  /// every cache line of each member row, the row clamped to the last one
  /// (a prefetch has no effect on results). Pools of more than
  /// kMaxUnrolledMembers members are not prefetched (the code would grow
  /// with kpool).
  void prefetchMembers(Value k, Value gate, Value first, Value numRows);

  //===--- Batches --------------------------------------------------------===//

  /// A 1-D operand whose length is the batch size plus `delta` (as in the
  /// verifier): `cache_lengths` and `slot_idx` (0), offsets (1).
  struct BatchOperand {
    Value memref;
    int64_t delta;
  };
  /// The batch size the metadata supports: the smallest length minus delta
  /// of `operands`, at least 0.
  Value batchSize(ArrayRef<BatchOperand> operands);
  /// The rows of `k` and `gate` both have (i64).
  Value tokenRows(Value k, Value gate);
  /// A row count no 32-bit offset reaches (i64 2^32): loadRequest's bound
  /// where an op has no `k` (pool_offsets counts every request's tokens).
  Value noRowLimit();

private:
  std::string kernelName;
  int64_t prefetchPools;
  int64_t unrollMembers;
  /// Set while the general-stride copy of versionOnUnitStride is emitted.
  bool generalStrides = false;
};

} // namespace mlir::kpool::lowering

#endif // KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EMITTER_H
