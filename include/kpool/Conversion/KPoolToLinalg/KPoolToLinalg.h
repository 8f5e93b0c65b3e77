//===- KPoolToLinalg.h - kpool to linalg conversion -------------*- C++ -*-===//

#ifndef KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
#define KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H

#include "mlir/Pass/Pass.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;

namespace kpool {

#define GEN_PASS_DECL_CONVERTKPOOLTOLINALGPASS
#include "kpool/Conversion/Passes.h.inc"

/// The CPU-oriented choices of the lowering (the options of
/// `convert-kpool-to-linalg`; the defaults suit every backend).
struct KPoolToLinalgOptions {
  /// `step-offsets=scan`: kpool.step scans its offsets before the loop.
  bool scanStepOffsets = false;
  /// `prefetch-pools`: the prefetch distance of compress's rows.
  int64_t prefetchPools = 0;
  /// `rows-per-iteration`: pooled rows per parallel iteration.
  int64_t rowsPerIteration = 1;
  /// `unroll-members`: pools of at most this many members are unrolled,
  /// larger ones use the member loop (at most kMaxUnrolledMembers, 16).
  int64_t unrollMembers = 16;
};

/// Adds the conversion patterns that lower the buffer form of the kpool ops
/// to linalg, scf, memref, arith and math (see `convert-kpool-to-linalg`,
/// which applies them with `applyPartialConversion`, the kpool dialect
/// illegal). A kpool op in tensor form matches no pattern.
void populateKPoolToLinalgConversionPatterns(
    RewritePatternSet &patterns, const KPoolToLinalgOptions &options = {});
} // namespace kpool
} // namespace mlir

#endif // KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
