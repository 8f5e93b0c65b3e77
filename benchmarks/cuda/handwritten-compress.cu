// A hand-written CUDA compress of the contract's semantics (docs/semantics.md,
// "compress"), as a careful engineer would write it for the production
// geometry: the baseline of the static GPU report
// (benchmarks/gpu-static-report.sh), which compiles it with `nvcc -ptx` and
// counts its per-pool path next to kpool's generated kernel.
//
// Design: 16-byte accesses (8 bf16 channels per lane, D/8 lanes per pooled
// row), a grid-stride loop over pooled rows so that `ape` (pre-scaled by
// log2 e) stays in registers across pools, one 32-bit binary search over
// pool_row_offsets per row, 32-bit row arithmetic after the bounds checks,
// read-only non-aliasing inputs, exp2 with log2 e folded into the inputs and
// an approximate division (the cross-backend tolerance of the contract
// allows both; it is not bit-identical to kpool's kernels, which use
// libdevice's expf and IEEE division).
//
// Guards: every access is bounds-checked (rows past `k`, reversed offsets,
// rows past the output); the request lookup assumes pool_row_offsets is
// non-decreasing, which host validation guarantees (kpool's kernels also
// find the right claimant when it is not).

#include <cuda_bf16.h>
#include <cstdint>

namespace {

constexpr float kLog2e = 1.4426950408889634f;

template <int D, int K>
__device__ __forceinline__ void
compressBf16(__nv_bfloat16 *__restrict__ pooled, uint32_t pooledRows,
                 uint32_t pooledStride, const __nv_bfloat16 *__restrict__ k,
                 uint32_t kStride, const __nv_bfloat16 *__restrict__ gate,
                 uint32_t gateStride, uint32_t tokens,
                 const float *__restrict__ ape,
                 const uint32_t *__restrict__ iro,
                 const uint32_t *__restrict__ pro,
                 const uint32_t *__restrict__ cache, uint32_t batch) {
  constexpr int C = 8;         // channels per lane: 16 bytes of bf16
  constexpr int L = D / C;     // lanes per pooled row
  static_assert(D % C == 0, "D must be a multiple of 8");
  const uint32_t lane = threadIdx.x % L;
  const uint32_t group = (blockIdx.x * blockDim.x + threadIdx.x) / L;
  const uint32_t groups = gridDim.x * blockDim.x / L;

  // ape * log2 e, once per thread for all its pools.
  float a[K][C];
#pragma unroll
  for (int m = 0; m < K; ++m) {
    const float4 *p = reinterpret_cast<const float4 *>(ape + m * D + lane * C);
    float4 lo = __ldg(p), hi = __ldg(p + 1);
    a[m][0] = lo.x * kLog2e; a[m][1] = lo.y * kLog2e;
    a[m][2] = lo.z * kLog2e; a[m][3] = lo.w * kLog2e;
    a[m][4] = hi.x * kLog2e; a[m][5] = hi.y * kLog2e;
    a[m][6] = hi.z * kLog2e; a[m][7] = hi.w * kLog2e;
  }

  const uint32_t total = min(__ldg(pro + batch), pooledRows);
  for (uint32_t row = group; row < total; row += groups) {
    // The request whose range holds `row`: the last b with pro[b] <= row.
    uint32_t lo = 0, hi = batch;
    while (hi - lo > 1) {
      uint32_t mid = (lo + hi) / 2;
      if (__ldg(pro + mid) <= row) lo = mid; else hi = mid;
    }
    const uint32_t b = lo;
    const uint32_t s = __ldg(iro + b), e = __ldg(iro + b + 1);
    if (e < s || e > tokens)
      continue; // reversed or past k: no tokens
    const uint64_t c = __ldg(cache + b);
    const uint64_t first = (c + K - 1) / K, last = (c + (e - s)) / K;
    const uint32_t j = row - __ldg(pro + b);
    if (last <= first || j >= last - first)
      continue;
    // Below `tokens` (< 2^32) by the checks above: 32-bit from here on.
    const uint32_t base = s + uint32_t(first * K - c) + j * K;

    uint4 kv[K], gv[K];
#pragma unroll
    for (int m = 0; m < K; ++m) {
      kv[m] = __ldg(reinterpret_cast<const uint4 *>(
          k + size_t(base + m) * kStride + lane * C));
      gv[m] = __ldg(reinterpret_cast<const uint4 *>(
          gate + size_t(base + m) * gateStride + lane * C));
    }
    uint32_t out[C / 2];
#pragma unroll
    for (int h = 0; h < C / 2; ++h) {
      float r[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int ch = 2 * h + half;
        float z[K], M = -INFINITY;
#pragma unroll
        for (int m = 0; m < K; ++m) {
          uint32_t gw = (&gv[m].x)[h];
          float g = __uint_as_float(half ? gw & 0xffff0000u : gw << 16);
          z[m] = fmaf(g, kLog2e, a[m][ch]);
          M = fmaxf(M, z[m]);
        }
        float Z = 0.f, A = 0.f;
#pragma unroll
        for (int m = 0; m < K; ++m) {
          uint32_t kw = (&kv[m].x)[h];
          float kk = __uint_as_float(half ? kw & 0xffff0000u : kw << 16);
          float w = exp2f(z[m] - M);
          Z += w;
          A = fmaf(w, kk, A);
        }
        r[half] = __fdividef(A, Z);
      }
      __nv_bfloat162 v = __floats2bfloat162_rn(r[0], r[1]);
      out[h] = *reinterpret_cast<uint32_t *>(&v);
    }
    *reinterpret_cast<uint4 *>(pooled + size_t(row) * pooledStride +
                               lane * C) =
        make_uint4(out[0], out[1], out[2], out[3]);
  }
}

} // namespace

// The production configuration, with C linkage so that its PTX entry name
// is plain.
extern "C" __global__ void __launch_bounds__(256)
    handwritten_compress_bf16_d128_k4(
        __nv_bfloat16 *__restrict__ pooled, uint32_t pooledRows,
        uint32_t pooledStride, const __nv_bfloat16 *__restrict__ k,
        uint32_t kStride, const __nv_bfloat16 *__restrict__ gate,
        uint32_t gateStride, uint32_t tokens, const float *__restrict__ ape,
        const uint32_t *__restrict__ iro, const uint32_t *__restrict__ pro,
        const uint32_t *__restrict__ cache, uint32_t batch) {
  compressBf16<128, 4>(pooled, pooledRows, pooledStride, k, kStride, gate,
                       gateStride, tokens, ape, iro, pro, cache, batch);
}
