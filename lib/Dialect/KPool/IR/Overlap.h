//===- Overlap.h - operands of one kpool op that must not overlap -*- C++
//-*-===//
//
// Revision 3 of the contract: no operand that an op writes may overlap any
// other operand of the same call (docs/semantics.md, "Overlapping
// operands"). The verifier rejects what it can see in buffer form; host
// validation compares address ranges at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_DIALECT_KPOOL_IR_OVERLAP_H
#define KPOOL_LIB_DIALECT_KPOOL_IR_OVERLAP_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::kpool {

/// Rejects a kpool op in buffer form (a destination-style op) when one of
/// its `outs` operands provably shares an element with another operand:
/// the same buffer (one SSA value, possibly through `memref.cast`), a
/// buffer and a `memref.subview` of it with static, non-zero sizes, or two
/// subviews of one buffer with static offsets, sizes and strides that pick
/// a common element. `names[i]` names operand `i`. The tensor form has no
/// buffers: one-shot bufferization copies where one tensor feeds a written
/// operand and another operand.
LogicalResult verifyNoOverlappingOperands(Operation *op,
                                          ArrayRef<StringRef> names);

/// The names of `op`'s operands, one per operand, from the names of its ODS
/// operand groups in declaration order (an absent optional group takes
/// none).
template <typename OpTy>
SmallVector<StringRef> operandNames(OpTy op, ArrayRef<StringRef> groups) {
  SmallVector<StringRef> names(op->getNumOperands());
  for (unsigned g = 0; g < groups.size(); ++g) {
    auto [start, length] = op.getODSOperandIndexAndLength(g);
    for (unsigned i = start; i < start + length; ++i)
      names[i] = groups[g];
  }
  return names;
}

} // namespace mlir::kpool

#endif // KPOOL_LIB_DIALECT_KPOOL_IR_OVERLAP_H
