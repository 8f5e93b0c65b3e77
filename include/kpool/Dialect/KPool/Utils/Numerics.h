//===- Numerics.h - numeric choices every kpool backend shares --*- C++ -*-===//
//
// The choices that decide the bits or the shape of a pooled row's code on
// every backend: how `exp` is computed when it is not left to a library, and
// how many channels one vector access covers. The CPU (kpool-vectorize-pool-
// rows) and the GPU (kpool-map-to-gpu) take them from here, so they cannot
// drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_UTILS_NUMERICS_H
#define KPOOL_DIALECT_KPOOL_UTILS_NUMERICS_H

#include <cstdint>

namespace mlir {
class RewritePatternSet;

namespace kpool {

/// Adds the patterns that rewrite `math.exp` (on scalars and vectors alike)
/// into kpool's own polynomial approximation for f32 (round-to-nearest range
/// reduction, a degree-6 polynomial with FMA, 2^n from the exponent bits;
/// see Numerics.cpp for its domain, x <= 88.3, -inf and NaN, which covers
/// the pooled rows' x = z - max z; every result below 2^-126, i.e. every x
/// below -126 ln 2, is flushed to +0, and no other), and MLIR's for other
/// element types. The
/// expansion is elementwise, so a vector lane and a scalar channel compute
/// the same bits, on the CPU and in a GPU kernel. Apply them to the exps of
/// the pooled rows only (e.g. with `applyOpPatternsGreedily` and
/// `ExistingAndNewOps`).
void populateExpApproximationPatterns(RewritePatternSet &patterns);

/// Adds the CPU rewrites of a pooled row's other arithmetic, all exact for
/// the pooling function: `arith.maximumf` as `a > b ? a : b` (the result
/// differs only when some z is NaN, and then the pool is NaN either way),
/// `acc + e * k` as one FMA (the contract's tolerance is against the exact
/// value; every op and schedule goes through the same rewrite), and the
/// f32 -> bf16 truncation as integer rounding to nearest even with the NaN
/// select on 32-bit lanes (a NaN stays NaN, quietened, sign and top payload
/// kept, like the reference). Apply them
/// to the ops of the pooled rows only, before the exp expansion.
void populatePoolingArithmeticPatterns(RewritePatternSet &patterns);

/// Channels per vector access in the channel loop of a pooled row (or a
/// fill or copy of one): the widest power of two that is at most `maxWidth`
/// and divides `channels`, so that no access needs a mask and every access
/// of `width * sizeof(T)` bytes can be aligned to its size. 1 (scalar) when
/// `maxWidth < 2` or `channels` is odd or not positive.
int64_t poolRowVectorWidth(int64_t channels, int64_t maxWidth);

} // namespace kpool
} // namespace mlir

#endif // KPOOL_DIALECT_KPOOL_UTILS_NUMERICS_H
