//===- KPoolDialect.cpp - kpool dialect -----------------------------------===//

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"

using namespace mlir;
using namespace mlir::kpool;

#include "kpool/Dialect/KPool/IR/KPoolOpsDialect.cpp.inc"

void KPoolDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kpool/Dialect/KPool/IR/KPoolOps.cpp.inc"
      >();
}
