//===- KPoolToLinalg.h - kpool to linalg conversion -------------*- C++ -*-===//

#ifndef KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
#define KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H

#include <cstdint>

namespace mlir {
class RewritePatternSet;

namespace kpool {
/// Adds the conversion patterns that lower the buffer form of the kpool ops
/// to linalg, scf, memref, arith and math (see `convert-kpool-to-linalg`,
/// which applies them with `applyPartialConversion`, the kpool dialect
/// illegal). A kpool op in tensor form matches no pattern. `scanStepOffsets`
/// selects kpool.step's offsets strategy (the pass's `step-offsets=scan`),
/// `prefetchPools` the prefetch distance of compress's rows (the pass's
/// `prefetch-pools`).
void populateKPoolToLinalgConversionPatterns(RewritePatternSet &patterns,
                                             bool scanStepOffsets = false,
                                             int64_t prefetchPools = 0);
} // namespace kpool
} // namespace mlir

#endif // KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
