//===- ExtentChecks.h - run-time extents that contradict the op -*- C++ -*-===//
//
// A dynamic extent that contradicts a static one, the op's attributes or
// another operand (keys 8 wide under head_dim(4), offsets not one longer
// than cache_lengths, a ring window below kpool) is bad input
// (docs/semantics.md, "Bad input"): the op writes nothing but its outputs'
// defined "nothing" values and records the Extent finding, naming the
// operand (its id in the kernel table, kpool::abi::operandId) and the
// dimension (kpool/ABI/StatusWord.h). Each op lists its checks in the order
// host validation makes them, so that both report the same first
// contradiction.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EXTENTCHECKS_H
#define KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EXTENTCHECKS_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::kpool::lowering {

class Emitter;

/// The extents one op checks at run time, in order.
class ExtentChecks {
public:
  explicit ExtentChecks(Emitter &e) : e(e) {}

  /// Dimension `dim` of `memref`, the operand named `operand` in the kernel
  /// table (kpool/ABI/KernelABI.def), is `expected` (an attribute of the op
  /// or a static extent).
  void equal(Value memref, int64_t dim, const char *operand, int64_t expected);
  /// Dimension `dim` of `memref` is at least `least` (the ring window).
  void atLeast(Value memref, int64_t dim, const char *operand, int64_t least);
  /// Dimension `dim` of `memref` is dimension `refDim` of `ref` plus
  /// `delta`.
  void sameAs(Value memref, int64_t dim, const char *operand, Value ref,
              int64_t refDim, int64_t delta = 0);

  /// i1 that holds when every check holds, or null when none can fail at
  /// run time (every extent involved is static: the verifier checked it).
  Value allHold();

  /// Records the first check that fails in the op's status word (nothing
  /// when it has none). Emit it where allHold() is false.
  void recordFirstFailure();

  /// Emits `holds` where every check holds. Where one fails, emits a
  /// kernel of its own (`kpool_<op>_mismatch`) that writes only what the
  /// contract defines for the outputs even then: `nothing(i)` for each `i`
  /// below `rows()` (when given; e.g. closed_pool = -1), and records the
  /// finding (iteration 0). No such kernel when there is nothing to write
  /// and no status word.
  void guard(function_ref<void()> holds, function_ref<Value()> rows = nullptr,
             function_ref<void(Value)> nothing = nullptr);

  /// `memref` cast to the type whose dimensions checked against a static
  /// value are static, where allHold() holds (so that what follows sees the
  /// op's extents, as if the operand had them statically); `memref` itself
  /// when no such dimension is dynamic.
  Value refined(Value memref);

private:
  struct Check {
    Value memref;
    int64_t dim;
    /// The Extent finding's word for this check (operand and dimension).
    uint64_t word;
    /// The expected extent when static, else ShapedType::kDynamic.
    int64_t expected;
    /// Else dimension `refDim` of `ref` plus `delta`.
    Value ref;
    int64_t refDim = 0;
    int64_t delta = 0;
    bool atLeast = false;
  };
  /// Whether `c` can fail at run time.
  static bool isDynamic(const Check &c);
  /// The expected extent of `c` (index).
  Value expectedOf(const Check &c);
  /// i1: `c` fails.
  Value fails(const Check &c, Value actual, Value expected);

  Emitter &e;
  SmallVector<Check> checks;
  DenseMap<Value, Value> refinements;
};

} // namespace mlir::kpool::lowering

#endif // KPOOL_LIB_CONVERSION_KPOOLTOLINALG_EXTENTCHECKS_H
