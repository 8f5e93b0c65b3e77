//===- OperandChecker.h - the kpool ops' operand checks ---------*- C++ -*-===//
//
// The verifiers' one checker: every static mistake of the contract's "Bad
// input" list reported with the op's location, naming the operand, the
// expected shape or type and the actual one. Used by KPoolOps.cpp only.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_DIALECT_KPOOL_IR_OPERANDCHECKER_H
#define KPOOL_LIB_DIALECT_KPOOL_IR_OPERANDCHECKER_H

#include "kpool/Dialect/KPool/IR/KPoolOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::kpool::detail {

/// Formats a shape as `[?, 128]`.
inline std::string formatShape(ArrayRef<int64_t> shape) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t dim) {
    if (ShapedType::isDynamic(dim))
      os << "?";
    else
      os << dim;
  });
  os << "]";
  return str;
}

/// Checks the operands of one kpool op and reports the first mistake with
/// the op's location. An expected dimension of `ShapedType::kDynamic` accepts
/// any size; an actual dynamic dimension is accepted against any expectation
/// (it is checked at run time by the host entry points and guarded by the
/// kernels).
class OperandChecker {
public:
  explicit OperandChecker(Operation *op) : op(op) {}

  ShapedType type(Value value) { return cast<ShapedType>(value.getType()); }

  /// Checks rank and shape against `expected`, with `what` describing the
  /// dimensions, e.g. "kpool x head_dim".
  LogicalResult checkShape(Value value, StringRef name,
                           ArrayRef<int64_t> expected, StringRef what) {
    ShapedType t = type(value);
    bool ok = t.getRank() == static_cast<int64_t>(expected.size());
    for (auto [actual, want] : llvm::zip(t.getShape(), expected)) {
      if (!ok)
        break;
      ok = ShapedType::isDynamic(actual) || ShapedType::isDynamic(want) ||
           actual == want;
    }
    if (ok)
      return success();
    return op->emitOpError() << "expected '" << name << "' to have shape "
                             << formatShape(expected) << " (" << what
                             << "), got " << formatShape(t.getShape());
  }

  LogicalResult checkFloatElement(Value value, StringRef name) {
    Type elt = type(value).getElementType();
    if (isSupportedElementType(elt))
      return success();
    return op->emitOpError()
           << "expected '" << name
           << "' element type to be bf16, f16 or f32, got " << elt;
  }

  LogicalResult checkElement(Value value, StringRef name, Type expected,
                             StringRef because) {
    Type elt = type(value).getElementType();
    if (elt == expected)
      return success();
    return op->emitOpError() << "expected '" << name << "' element type to be "
                             << expected << because << ", got " << elt;
  }

  LogicalResult checkMetadata(Value value, StringRef name) {
    ShapedType t = type(value);
    if (t.getRank() != 1)
      return op->emitOpError() << "expected '" << name
                               << "' to have rank 1, got rank " << t.getRank();
    if (!isMetadataElementType(t.getElementType()))
      return op->emitOpError()
             << "expected '" << name << "' element type to be i32 or ui32, got "
             << t.getElementType();
    return success();
  }

  /// A 1-D operand whose length is the batch size plus `delta`.
  struct BatchOperand {
    Value value;
    StringRef name;
    int64_t delta;
  };

  /// Checks that the static lengths of `operands` agree on one batch size,
  /// taken from the first static one, and returns it (or kDynamic).
  FailureOr<int64_t> checkBatch(ArrayRef<BatchOperand> operands) {
    const BatchOperand *base = nullptr;
    for (const BatchOperand &o : operands) {
      int64_t size = type(o.value).getDimSize(0);
      if (ShapedType::isDynamic(size))
        continue;
      if (size < o.delta) {
        op->emitOpError() << "expected '" << o.name << "' to have at least "
                          << o.delta << " element, got " << size;
        return failure();
      }
      if (!base) {
        base = &o;
        continue;
      }
      int64_t baseSize = type(base->value).getDimSize(0);
      // Both sizes are at least their delta, so the batch sizes do not
      // overflow; the expected length (up to 2^63) is printed unsigned.
      if (size - o.delta == baseSize - base->delta)
        continue;
      uint64_t expected = uint64_t(baseSize - base->delta) + o.delta;
      auto diag = op->emitOpError() << "expected '" << o.name << "' to have ";
      int64_t relation = o.delta - base->delta;
      if (relation == 1)
        diag << "one more element than";
      else if (relation == -1)
        diag << "one fewer element than";
      else
        diag << "as many elements as";
      diag << " '" << base->name << "' (" << expected << "), got " << size;
      return failure();
    }
    if (!base)
      return ShapedType::kDynamic;
    return type(base->value).getDimSize(0) - base->delta;
  }

  /// Keys and gates: `[tokens, head_dim]`, bf16/f16/f32, same type.
  LogicalResult checkKeysAndGates(Value k, Value gate, int64_t headDim) {
    if (failed(checkShape(k, "k", {ShapedType::kDynamic, headDim},
                          "tokens x head_dim")) ||
        failed(checkFloatElement(k, "k")) ||
        failed(checkShape(gate, "gate", {ShapedType::kDynamic, headDim},
                          "tokens x head_dim")))
      return failure();
    ShapedType kt = type(k), gt = type(gate);
    if (failed(checkElement(gate, "gate", kt.getElementType(),
                            " (the element type of 'k')")))
      return failure();
    int64_t kRows = kt.getDimSize(0), gRows = gt.getDimSize(0);
    if (!ShapedType::isDynamic(kRows) && !ShapedType::isDynamic(gRows) &&
        kRows != gRows)
      return op->emitOpError() << "expected 'gate' to have the shape of 'k' "
                               << formatShape(kt.getShape()) << ", got "
                               << formatShape(gt.getShape());
    return success();
  }

  /// compress's (and step's) `pooled`: `[pools, head_dim]` of the keys'
  /// element type.
  LogicalResult checkPooledRows(Value pooled, Value k, int64_t headDim) {
    if (failed(checkShape(pooled, "pooled", {ShapedType::kDynamic, headDim},
                          "pools x head_dim")))
      return failure();
    return checkElement(pooled, "pooled", type(k).getElementType(),
                        " (the element type of 'k')");
  }

  /// The tail ring: `[max_slots, 2, R, head_dim]` with a ring window
  /// `R >= kpool` (a dynamic `R` is checked at run time), of the keys'
  /// element type.
  LogicalResult checkTail(Value tail, Value k, int64_t kpool,
                          int64_t headDim) {
    if (failed(checkShape(tail, "tail",
                          {ShapedType::kDynamic, 2, ShapedType::kDynamic,
                           headDim},
                          "max_slots x 2 x window x head_dim")))
      return failure();
    int64_t window = type(tail).getDimSize(2);
    if (!ShapedType::isDynamic(window) && window < kpool)
      return op->emitOpError()
             << "expected the ring window of 'tail' (dimension 2) to be at "
                "least kpool = "
             << kpool << ", got " << window;
    return checkElement(tail, "tail", type(k).getElementType(),
                        " (the element type of 'k')");
  }

  LogicalResult checkApe(Value ape, int64_t kpool, int64_t headDim) {
    if (failed(checkShape(ape, "ape", {kpool, headDim}, "kpool x head_dim")))
      return failure();
    return checkElement(ape, "ape", Float32Type::get(op->getContext()), "");
  }

  /// Positive geometry attributes.
  LogicalResult checkPositive(StringRef name, int64_t value) {
    if (value >= 1)
      return success();
    return op->emitOpError()
           << "expected '" << name << "' to be at least 1, got " << value;
  }

  /// `kpool` in [1, 2^32]: positions are below 2^33 (32-bit cache lengths
  /// plus 32-bit offsets), so no larger pool can ever complete, and the
  /// 64-bit position arithmetic stays exact.
  LogicalResult checkKPool(int64_t value) {
    if (failed(checkPositive("kpool", value)))
      return failure();
    if (value <= (int64_t(1) << 32))
      return success();
    return op->emitOpError()
           << "expected 'kpool' to be at most 2^32 (positions are below "
              "2^33, so no larger pool can complete), got "
           << value;
  }

  /// `kpool` and `head_dim` of an op with keys.
  LogicalResult checkGeometry(int64_t kpool, int64_t headDim) {
    if (failed(checkKPool(kpool)))
      return failure();
    return checkPositive("head_dim", headDim);
  }

  /// What ring_close and seed_tail share: keys and gates, the tail ring and
  /// the per-request metadata (`input_row_offsets`, `cache_lengths`,
  /// `slot_idx`). Returns the batch size the metadata fixes (or kDynamic).
  FailureOr<int64_t> checkRingRequests(Value k, Value gate, Value tail,
                                       Value inputRowOffsets,
                                       Value cacheLengths, Value slotIdx,
                                       int64_t kpool, int64_t headDim) {
    if (failed(checkKeysAndGates(k, gate, headDim)) ||
        failed(checkTail(tail, k, kpool, headDim)) ||
        failed(checkMetadata(inputRowOffsets, "input_row_offsets")) ||
        failed(checkMetadata(cacheLengths, "cache_lengths")) ||
        failed(checkMetadata(slotIdx, "slot_idx")))
      return failure();
    return checkBatch({{cacheLengths, "cache_lengths", 0},
                       {inputRowOffsets, "input_row_offsets", 1},
                       {slotIdx, "slot_idx", 0}});
  }

  /// ring_close's outputs: `closed_pool` `[batch]` i32 or i64 and the closed rows
  /// (`name`) `[batch, head_dim]` of the keys' element type. With every
  /// metadata length dynamic, closed_pool's length fixes the batch.
  LogicalResult checkClosedOutputs(Value rows, StringRef name, Value closedPool,
                                   Value k, int64_t batch, int64_t headDim) {
    if (failed(checkShape(closedPool, "closed_pool", {batch}, "batch")))
      return failure();
    if (ShapedType::isDynamic(batch))
      batch = type(closedPool).getDimSize(0);
    Type ids = type(closedPool).getElementType();
    if (!ids.isSignlessInteger(32) && !ids.isSignlessInteger(64))
      return op->emitOpError()
             << "expected 'closed_pool' element type to be i32 or i64, got "
             << ids;
    if (failed(checkShape(rows, name, {batch, headDim}, "batch x head_dim")))
      return failure();
    return checkElement(rows, name, type(k).getElementType(),
                        " (the element type of 'k')");
  }

  /// ring_close's inputs (shared by kpool.step): the ring requests and
  /// `ape`. Returns the batch size the metadata fixes (or kDynamic).
  FailureOr<int64_t> checkRingCloseInputs(Value k, Value gate, Value tail,
                                          Value ape, Value inputRowOffsets,
                                          Value cacheLengths, Value slotIdx,
                                          int64_t kpool, int64_t headDim) {
    FailureOr<int64_t> batch =
        checkRingRequests(k, gate, tail, inputRowOffsets, cacheLengths,
                          slotIdx, kpool, headDim);
    if (failed(batch) || failed(checkApe(ape, kpool, headDim)))
      return failure();
    return batch;
  }

  /// All shaped operands are tensors (value form) or all are memrefs (buffer
  /// form); the value form returns one result per `outs` operand and the
  /// buffer form none.
  LogicalResult checkForm(ArrayRef<std::pair<Value, StringRef>> operands,
                          DestinationStyleOpInterface dps) {
    bool tensorForm = isa<RankedTensorType>(operands.front().first.getType());
    for (auto [value, name] : operands) {
      if (isa<RankedTensorType>(value.getType()) == tensorForm)
        continue;
      return op->emitOpError()
             << "expected all shaped operands to be "
             << (tensorForm ? "tensors" : "memrefs") << " like '"
             << operands.front().second << "', got '" << name << "' of type "
             << value.getType();
    }
    unsigned expected = tensorForm ? dps.getNumDpsInits() : 0;
    if (op->getNumResults() != expected)
      return op->emitOpError()
             << "expected " << expected << " result(s) in "
             << (tensorForm ? "tensor" : "memref") << " form (one per 'outs' "
             << "operand on tensors, none on memrefs), got "
             << op->getNumResults();
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      Type initType = dps.getDpsInitOperand(i)->get().getType();
      if (result.getType() != initType)
        return op->emitOpError() << "expected result #" << i
                                 << " to have the type of its 'outs' operand ("
                                 << initType << "), got " << result.getType();
    }
    return success();
  }


  /// The optional pool-cache destination of an op whose pools have `k`'s
  /// element type: `block_table` `[batch, pages per request]` i32/ui32,
  /// `cache_keys` `[pages, page_size, head_dim]` of the keys' element type
  /// or f8E4M3FN, `cache_scales` `[pages, page_size]` f32 exactly for FP8,
  /// `rotate` and `scale` only with a destination (`scale` only for FP8,
  /// `hadamard` only for a power-of-two `head_dim`).
  LogicalResult checkCache(Value blockTable, Value keys, Value scales,
                           std::optional<Rotate> rotate,
                           std::optional<Scale> scale, Value k,
                           int64_t headDim, int64_t batch) {
    if (!blockTable) {
      if (keys || scales)
        return op->emitOpError()
               << "expected a 'block_table' with '"
               << (keys ? "cache_keys" : "cache_scales")
               << "' (the pool-cache destination is block_table, "
                  "cache_keys and, for FP8, cache_scales)";
      if (rotate || scale)
        return op->emitOpError()
               << "expected '" << (rotate ? "rotate" : "scale")
               << "' only with a pool-cache destination ('to_cache')";
      return success();
    }
    if (!keys)
      return op->emitOpError() << "expected 'cache_keys' with a 'block_table' "
                                  "(the pool-cache destination)";
    ShapedType bt = type(blockTable);
    if (bt.getRank() != 2)
      return op->emitOpError() << "expected 'block_table' to have rank 2 "
                                  "(batch x pages per request), got rank "
                               << bt.getRank();
    if (!isMetadataElementType(bt.getElementType()))
      return op->emitOpError()
             << "expected 'block_table' element type to be i32 or ui32, got "
             << bt.getElementType();
    if (failed(checkShape(blockTable, "block_table",
                          {batch, ShapedType::kDynamic},
                          "batch x pages per request")) ||
        failed(checkShape(keys, "cache_keys",
                          {ShapedType::kDynamic, ShapedType::kDynamic,
                           headDim},
                          "pages x page_size x head_dim")))
      return failure();
    Type elt = type(k).getElementType();
    Type entry = type(keys).getElementType();
    bool fp8 = isa<Float8E4M3FNType>(entry);
    if (entry != elt && !fp8)
      return op->emitOpError()
             << "expected 'cache_keys' element type to be " << elt
             << " (the element type of 'k') or f8E4M3FN, got " << entry;
    if (fp8 && !scales)
      return op->emitOpError() << "expected 'cache_scales' with f8E4M3FN "
                                  "'cache_keys' (one f32 scale per entry)";
    if (!fp8 && scales)
      return op->emitOpError()
             << "expected no 'cache_scales' with " << entry
             << " 'cache_keys' (only FP8 entries have a scale)";
    if (!fp8 && scale)
      return op->emitOpError()
             << "expected no 'scale' with " << entry
             << " 'cache_keys' (only FP8 entries have a scale)";
    if (scales) {
      ShapedType kt = type(keys);
      if (failed(checkShape(scales, "cache_scales",
                            {kt.getDimSize(0), kt.getDimSize(1)},
                            "pages x page_size, as 'cache_keys'")) ||
          failed(checkElement(scales, "cache_scales",
                              Float32Type::get(op->getContext()), "")))
        return failure();
    }
    if (rotate == Rotate::hadamard && !llvm::isPowerOf2_64(headDim))
      return op->emitOpError()
             << "expected 'head_dim' to be a power of two for "
                "rotate(hadamard), got "
             << headDim;
    return success();
  }

  /// The optional status word: a 1-D buffer of 64-bit integers (any
  /// length; the kernels use element 0, and an empty one disables it).
  LogicalResult checkStatus(Value status) {
    if (!status)
      return success();
    ShapedType st = type(status);
    if (st.getRank() != 1)
      return op->emitOpError()
             << "expected 'status' to have rank 1 (the status word), got rank "
             << st.getRank();
    if (!st.getElementType().isInteger(64) ||
        st.getElementType().isSignedInteger())
      return op->emitOpError()
             << "expected 'status' element type to be i64 or ui64, got "
             << st.getElementType();
    return success();
  }

  /// checkForm over `operands` and the op's status word (when it has one),
  /// then checkStatus.
  LogicalResult checkForm(SmallVector<std::pair<Value, StringRef>> operands,
                          DestinationStyleOpInterface dps, Value status) {
    if (status)
      operands.push_back({status, "status"});
    if (failed(checkForm(operands, dps)))
      return failure();
    return checkStatus(status);
  }

  /// Appends the pool-cache operands that are present to `operands`.
  static void addCacheOperands(
      SmallVectorImpl<std::pair<Value, StringRef>> &operands, Value blockTable,
      Value keys, Value scales) {
    if (blockTable)
      operands.push_back({blockTable, "block_table"});
    if (keys)
      operands.push_back({keys, "cache_keys"});
    if (scales)
      operands.push_back({scales, "cache_scales"});
  }

private:
  Operation *op;
};

} // namespace mlir::kpool::detail

#endif // KPOOL_LIB_DIALECT_KPOOL_IR_OPERANDCHECKER_H
