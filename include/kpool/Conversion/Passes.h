//===- Passes.h - kpool conversion passes -----------------------*- C++ -*-===//

#ifndef KPOOL_CONVERSION_PASSES_H
#define KPOOL_CONVERSION_PASSES_H

#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kpool {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kpool/Conversion/Passes.h.inc"

} // namespace mlir::kpool

#endif // KPOOL_CONVERSION_PASSES_H
