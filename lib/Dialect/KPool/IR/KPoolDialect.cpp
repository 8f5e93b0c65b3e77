//===- KPoolDialect.cpp - kpool dialect -----------------------------------===//

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::kpool;

#include "kpool/Dialect/KPool/IR/KPoolOpsDialect.cpp.inc"
#include "kpool/Dialect/KPool/IR/KPoolEnums.cpp.inc"

void KPoolDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kpool/Dialect/KPool/IR/KPoolOps.cpp.inc"
      >();
}

/// Checks the pass-contract attributes (`discardableAttrs` in
/// KPoolDialect.td): their type, and that they sit on the ops the passes
/// look for them on.
LogicalResult KPoolDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == KernelAttrHelper::getNameStr()) {
    auto kernel = dyn_cast<StringAttr>(attr.getValue());
    if (!kernel || kernel.empty())
      return op->emitError()
             << "expected '" << name
             << "' to be a non-empty string attribute (the kernel name), got "
             << attr.getValue();
    if (!isa<scf::ParallelOp>(op))
      return op->emitError() << "expected '" << name
                             << "' to be on an 'scf.parallel', got it on '"
                             << op->getName() << "'";
    return success();
  }
  if (name == PoolRowAttrHelper::getNameStr() ||
      name == PoolRowLoopAttrHelper::getNameStr()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "expected '" << name
                             << "' to be a unit attribute, got "
                             << attr.getValue();
    if (!isa<linalg::GenericOp>(op))
      return op->emitError() << "expected '" << name
                             << "' to be on a 'linalg.generic', got it on '"
                             << op->getName() << "'";
    return success();
  }
  return op->emitError() << "'" << name
                         << "' is not an attribute of the kpool dialect "
                            "(expected kpool.kernel, kpool.pool_row or "
                            "kpool.pool_row_loop)";
}
