//===- KPoolDialect.h - kpool dialect ---------------------------*- C++ -*-===//
//
// The kpool dialect: pooled-key cache kernels of a sparse-attention indexer.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_H
#define KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "kpool/Dialect/KPool/IR/KPoolOpsDialect.h.inc"

#endif // KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_H
