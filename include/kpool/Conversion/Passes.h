//===- Passes.h - kpool conversion passes -----------------------*- C++ -*-===//
//
// Every conversion of kpool (convert-kpool-to-linalg, kpool-map-to-gpu);
// each header declares its own pass and options, as upstream's conversions
// do.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_CONVERSION_PASSES_H
#define KPOOL_CONVERSION_PASSES_H

#include "kpool/Conversion/KPoolToGPU/KPoolToGPU.h"
#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kpool {

#define GEN_PASS_REGISTRATION
#include "kpool/Conversion/Passes.h.inc"

} // namespace mlir::kpool

#endif // KPOOL_CONVERSION_PASSES_H
