//===- KPoolOps.h - kpool operations ----------------------------*- C++ -*-===//

#ifndef KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_H
#define KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_H

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kpool/Dialect/KPool/IR/KPoolEnums.h.inc"

namespace mlir::kpool {
/// The memory effects of a kernel op `op`: it reads every memref operand
/// but the `outs` it overwrites whole (readsInit), and writes its memref
/// `outs`.
void getKernelOpEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects);

/// What every kernel op (compress, seed_tail, ring_close, pool_offsets,
/// step) shares: its MemoryEffectOpInterface and, for its
/// DestinationStyleOpInterface, the range of its `outs`.
template <typename ConcreteType>
class KernelOpTrait : public OpTrait::TraitBase<ConcreteType, KernelOpTrait> {
public:
  void getEffects(
      SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
          &effects) {
    getKernelOpEffects(this->getOperation(), effects);
  }

  /// The operands from `first` to the last one: the op's `outs`, whose
  /// first operand is `first` (the optional cache outputs and the status
  /// word come after the required `outs`).
  MutableOperandRange getInitsFrom(OpOperand &first) {
    Operation *op = this->getOperation();
    unsigned begin = first.getOperandNumber();
    return MutableOperandRange(op, begin, op->getNumOperands() - begin);
  }
};
} // namespace mlir::kpool

#define GET_OP_CLASSES
#include "kpool/Dialect/KPool/IR/KPoolOps.h.inc"

namespace mlir::kpool {
/// Returns true for the element types the kernels support: bf16, f16, f32.
bool isSupportedElementType(Type type);
/// Whether `op` (a kpool op) reads its `outs` operand `init`, i.e. keeps
/// elements it does not write: every init but ring_close's outputs and
/// step's `closed`, `closed_pool` and `pool_row_offsets`, which are
/// overwritten whole (a pool cache keeps the entries no pool goes to). The
/// ops' memory effects and their bufferization both follow it.
bool readsInit(Operation *op, OpOperand &init);
/// Returns true for the element types accepted for offsets, cache lengths
/// and slots: 32-bit signless or unsigned integers (read as unsigned).
bool isMetadataElementType(Type type);
/// Whether `op` (a kpool op in buffer form) has a written operand that
/// provably overlaps another of its operands: what its verifier rejects
/// (docs/semantics.md, "Overlapping operands"), without a diagnostic, for
/// passes that must not create such an op.
bool hasOverlappingOperands(Operation *op);
} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_H
