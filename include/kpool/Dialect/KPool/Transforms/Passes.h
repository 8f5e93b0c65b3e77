//===- Passes.h - kpool dialect transforms ----------------------*- C++ -*-===//

#ifndef KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_H
#define KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kpool {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"

} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_H
