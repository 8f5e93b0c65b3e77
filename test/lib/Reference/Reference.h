//===- Reference.h - a plain reference of the kpool ops ---------*- C++ -*-===//
//
// An independent, deliberately simple implementation of
// docs/semantics.md on the same strided `KPoolView` operands as the
// runtime (sizes and strides in elements; metadata uint32, closed_pool int32,
// ape f32, keys/gates/pooled/tail of the element type with bf16/f16 stored as
// uint16 bit patterns). Test-only: it is the oracle of the differential test.
//
// Every runtime guard of the spec is implemented:
//  - the batch a kernel reads is the minimum of the per-request metadata
//    lengths (len(cache_lengths), len(input_row_offsets) - 1, and
//    len(slot_idx) or len(pool_row_offsets) - 1 where the op has them), never
//    negative, so short metadata is never read out of bounds;
//  - a request whose rows are reversed or reach past `k`'s (and `gate`'s) rows
//    brings no tokens (pool_offsets, which has no `k`, only catches reversed
//    rows);
//  - a slot not below max_slots neither reads nor writes the ring and closes
//    nothing;
//  - compress writes pool j of request b to row pool_row_offsets[b] + j only
//    when that row is below pool_row_offsets[b+1] and below pooled's rows;
//  - num_requests is clamped to [0, B];
//  - ring_close writes every row of pooled and closed_pool: rows that close
//    nothing (including b >= B and b >= num_requests) get zeros and -1.
// Operands come in the runtime's order: outputs first, then the op's inputs.
// Operands whose static geometry is wrong (a last dimension that is not
// head_dim, an ape that is not [kpool, head_dim], a tail that is not
// [S, 2, R, head_dim] with R >= kpool) make an op do nothing, like the
// kernels.
//
// For non-monotonic pool_row_offsets two requests can both own a row; the
// spec does not say which write wins and the differential test does not use
// such offsets (here the later request's write wins).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_REFERENCE_REFERENCE_H
#define KPOOL_TEST_REFERENCE_REFERENCE_H

#include "kpool/ABI/View.h"

#include <cstdint>
#include <initializer_list>

namespace kpool::reference {

/// What a backend does with a softmax weight e = exp(x) below the smallest
/// normal f32, 2^-126 (docs/semantics.md, "Subnormal weights"): flush every
/// one to zero, i.e. every weight whose f32 argument x = z_m - M is below
/// -126 ln 2, or keep every one.
enum class SubnormalWeights { Flush, Keep };
/// The CPU kernels flush (kpool's exp; also the GPU's approximate-exp
/// option); the GPU kernels' default exp (ex2.approx.f32, libdevice's
/// __nv_expf) keeps.
constexpr SubnormalWeights kCpuSubnormalWeights = SubnormalWeights::Flush;
constexpr SubnormalWeights kGpuSubnormalWeights = SubnormalWeights::Keep;

/// Whether `rule` makes the weight exp(x) of the f32 argument `x` zero.
bool flushesWeight(SubnormalWeights rule, float x);

struct Geometry {
  KPoolElementType type = KPOOL_BF16;
  int64_t headDim = 128;
  int64_t kpool = 4;
  /// The rule of the backend the reference models (the CPU's by default).
  SubnormalWeights subnormalWeights = kCpuSubnormalWeights;
};

/// Byte address of element `idx` (one index per dimension) of `v`, whose
/// elements are `esize` bytes (strides count elements).
inline char *elementAddress(const KPoolView &v, int64_t esize,
                            std::initializer_list<int64_t> idx) {
  int64_t linear = 0, d = 0;
  for (int64_t i : idx)
    linear += i * v.strides[d++];
  return static_cast<char *>(v.data) + linear * esize;
}

/// Bytes per element of `type`.
int64_t elementSize(KPoolElementType type);

/// T(x) as raw bits (uint16 for bf16/f16, uint32 for f32), rounding once to
/// nearest even.
uint32_t roundToBits(KPoolElementType type, float x);
/// f32(x) of raw bits of `type`.
float fromBits(KPoolElementType type, uint32_t bits);

/// Raw bits of the element of `type` at `p` (uint16 for bf16/f16).
uint32_t elementBits(KPoolElementType type, const void *p);
/// Stores raw bits of `type` at `p`.
void setElementBits(KPoolElementType type, void *p, uint32_t bits);
/// One unit in the last place of `type` at the magnitude of `x`: the unit
/// tests and tools measure kernel-vs-reference errors in (ulp of the
/// largest member key of a pool's channel).
double ulpOf(KPoolElementType type, double x);

/// The spec's pooling function for one channel, before the final rounding:
/// z_m = g_m + ape_m, M = max z, e_m = exp(z_m - M) (std::exp, which keeps
/// subnormal results; zero where `rule` flushes the weight), Z and A summed
/// in member order, returns A / Z (f32). `keys`, `gates`, `apes` hold
/// `kpool` values.
float poolChannel(int64_t kpool, const float *keys, const float *gates,
                  const float *apes,
                  SubnormalWeights rule = kCpuSubnormalWeights);

/// kpool.compress.
void compress(const Geometry &g, const KPoolView &pooled, const KPoolView &k,
              const KPoolView &gate, const KPoolView &ape,
              const KPoolView &inputRowOffsets, const KPoolView &poolRowOffsets,
              const KPoolView &cacheLengths);

/// kpool.seed_tail.
void seedTail(const Geometry &g, const KPoolView &tail, const KPoolView &k,
              const KPoolView &gate, const KPoolView &inputRowOffsets,
              const KPoolView &cacheLengths, const KPoolView &slotIdx,
              int32_t numRequests);

/// kpool.ring_close.
void ringClose(const Geometry &g, const KPoolView &pooled,
               const KPoolView &closedPool, const KPoolView &tail,
               const KPoolView &k, const KPoolView &gate, const KPoolView &ape,
               const KPoolView &inputRowOffsets, const KPoolView &cacheLengths,
               const KPoolView &slotIdx, int32_t numRequests);

/// kpool.pool_offsets: pool_row_offsets[b] for b <= B (where the output has
/// that entry) is the sum of the full-pool counts of requests < b, as
/// truncated to 32 bits.
void poolOffsets(const Geometry &g, const KPoolView &poolRowOffsets,
                 const KPoolView &inputRowOffsets,
                 const KPoolView &cacheLengths);

/// The per-request metadata arithmetic, exposed for the test's own
/// bookkeeping (e.g. which pools a call produces).
struct PoolRange {
  int64_t first; ///< ceil(c / K)
  int64_t count; ///< max(0, floor((c + n) / K) - first)
  int64_t skip;  ///< first * K - c
};
PoolRange poolRange(int64_t kpool, int64_t cached, int64_t tokens);

} // namespace kpool::reference

#endif // KPOOL_TEST_REFERENCE_REFERENCE_H
