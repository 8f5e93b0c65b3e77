//===- HandWritten.h - hand-written C++ kpool kernels ----------*- C++ -*-===//
//
// The benchmark's "as fast as we can write it" peer of the JIT kernels: the
// contract's compress (docs/semantics.md), and a whole decode step with a
// one-pass metadata check, in plain C++ with AVX2/FMA/F16C intrinsics.
//
// The vector code is compiled for AVX2+FMA+F16C with function target
// attributes (the rest of the file, and every other file, stays baseline
// x86-64) and is chosen at run time with __builtin_cpu_supports; anything
// else runs a scalar fallback of the same arithmetic. Both follow the
// contract's order of evaluation: z = f32(g) + ape, M = max z,
// e = exp(z - M), Z and A summed in member order with separate roundings of
// e * k and of each sum, one division, one rounding to T. Only exp differs
// from the reference's std::exp: round-to-nearest range reduction, a
// degree-6 minimax polynomial (Horner, FMA) and a scale by exponent bits,
// with subnormal results (exp(x) < 2^-126) computed, not flushed.
//
// Operands are KPoolViews in the runtime's order (outputs first); every
// guard of the contract's "Bad input" section that compress has is kept
// (per request: reversed rows or rows past k's, rows past pooled's or past
// pool_row_offsets[b+1] are not written). Any inner stride works; unit inner
// strides take the vector path.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_BENCHMARKS_HANDWRITTEN_H
#define KPOOL_BENCHMARKS_HANDWRITTEN_H

#include "kpool/ABI/View.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kpool::bench {

struct HandGeometry {
  KPoolElementType type = KPOOL_BF16;
  int64_t headDim = 128;
  int64_t kpool = 4;
};

/// "avx2+fma+f16c" when the vector kernels run on this CPU, else "scalar".
const char *handWrittenIsa();

/// Forces the scalar fallback (true) or restores the best available path.
void setHandWrittenScalar(bool scalar);

/// kpool.compress.
void handCompress(const HandGeometry &g, const KPoolView &pooled,
                  const KPoolView &k, const KPoolView &gate,
                  const KPoolView &ape, const KPoolView &inputRowOffsets,
                  const KPoolView &poolRowOffsets,
                  const KPoolView &cacheLengths);

/// One call of a serving step, hand-written: a single pass over the
/// metadata validates it (shapes, num_requests in [0, B], rows in order and
/// inside k, slots below max_slots and distinct among the live requests, the
/// pools fitting `pooled`) while computing pool_row_offsets; then, per
/// request, ring_close, compress and seed_tail (fusing them per request is
/// exact because validated slots are distinct: a request's ring_close reads
/// only its own slot, before its own seed_tail writes it). A call that
/// fails validation writes nothing and returns false with a message.
class HandStep {
public:
  bool run(const HandGeometry &g, const KPoolView &closedRows,
           const KPoolView &closedPool, const KPoolView &tail,
           const KPoolView &poolRowOffsets, const KPoolView &pooled,
           const KPoolView &k, const KPoolView &gate, const KPoolView &ape,
           const KPoolView &inputRowOffsets, const KPoolView &cacheLengths,
           const KPoolView &slotIdx, int32_t numRequests, std::string *error);

private:
  std::vector<uint32_t> seen_;    // per slot: the epoch that last used it
  std::vector<uint32_t> offsets_; // pool_row_offsets, published at the end
  uint32_t epoch_ = 0;
};

/// The exp the hand-written kernels use, scalar form, for x <= 0 or NaN
/// (what z - max z can be); exposed for the accuracy report.
float handExp(float x);
/// The same through the kernels' current path (AVX2 or scalar), 8 lanes
/// at a time, each group of 8 taking the form the kernels would give it.
void handExpArray(const float *x, float *out, int64_t n);

} // namespace kpool::bench

#endif // KPOOL_BENCHMARKS_HANDWRITTEN_H
