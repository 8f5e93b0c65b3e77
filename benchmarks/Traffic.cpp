//===- Traffic.cpp - memory-traffic baselines for the benchmark -----------===//

#include "Traffic.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define KPOOL_TRAFFIC_AVX2 1
#endif

using namespace kpool::bench;

AlignedBuffer::AlignedBuffer(size_t n) : bytes(n) {
  size_t rounded = std::max<size_t>(64, (n + 63) / 64 * 64);
  ptr = std::aligned_alloc(64, rounded);
  if (!ptr) {
    std::fprintf(stderr, "kpool-bench-cpu: out of memory (%zu bytes)\n", n);
    std::abort();
  }
  std::memset(ptr, 0, rounded);
}

AlignedBuffer::~AlignedBuffer() { std::free(ptr); }

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : ptr(std::exchange(other.ptr, nullptr)),
      bytes(std::exchange(other.bytes, 0)) {}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  std::swap(ptr, other.ptr);
  std::swap(bytes, other.bytes);
  return *this;
}

void kpool::bench::copyBytes(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

namespace {

uint32_t loadU32(const KPoolView &v, int64_t i) {
  return static_cast<const uint32_t *>(v.data)[i * v.strides[0]];
}

/// XOR of `rows` rows (row stride `stride` bytes) of `k` and of `gate`,
/// `rowBytes` each, into `out`.
void xorRowsScalar(const char *k, const char *gate, int64_t kStride,
                   int64_t gStride, int64_t rows, int64_t rowBytes, char *out) {
  int64_t off = 0;
  for (; off + 8 <= rowBytes; off += 8) {
    uint64_t acc = 0, x;
    for (int64_t m = 0; m < rows; ++m) {
      std::memcpy(&x, k + m * kStride + off, 8);
      acc ^= x;
      std::memcpy(&x, gate + m * gStride + off, 8);
      acc ^= x;
    }
    std::memcpy(out + off, &acc, 8);
  }
  for (; off < rowBytes; ++off) {
    char acc = 0;
    for (int64_t m = 0; m < rows; ++m)
      acc ^= k[m * kStride + off] ^ gate[m * gStride + off];
    out[off] = acc;
  }
}

#ifdef KPOOL_TRAFFIC_AVX2
__attribute__((target("avx2"))) void
xorRowsAvx2(const char *k, const char *gate, int64_t kStride, int64_t gStride,
            int64_t rows, int64_t rowBytes, char *out) {
  int64_t off = 0;
  for (; off + 32 <= rowBytes; off += 32) {
    __m256i acc = _mm256_setzero_si256();
    for (int64_t m = 0; m < rows; ++m) {
      acc = _mm256_xor_si256(
          acc, _mm256_loadu_si256(
                   reinterpret_cast<const __m256i *>(k + m * kStride + off)));
      acc = _mm256_xor_si256(
          acc, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(
                   gate + m * gStride + off)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + off), acc);
  }
  if (off < rowBytes)
    xorRowsScalar(k + off, gate + off, kStride, gStride, rows, rowBytes - off,
                  out + off);
}
#endif

using XorRowsFn = void (*)(const char *, const char *, int64_t, int64_t,
                           int64_t, int64_t, char *);

XorRowsFn pickXorRows() {
#ifdef KPOOL_TRAFFIC_AVX2
  if (__builtin_cpu_supports("avx2"))
    return xorRowsAvx2;
#endif
  return xorRowsScalar;
}

} // namespace

void kpool::bench::trafficFloor(int64_t esize, int64_t D, int64_t K,
                                const KPoolView &pooled, const KPoolView &k,
                                const KPoolView &gate, const KPoolView &iro,
                                const KPoolView &pro, const KPoolView &cache) {
  static const XorRowsFn xorRows = pickXorRows();
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = std::max<int64_t>(
      0, std::min({cache.sizes[0], iro.sizes[0] - 1, pro.sizes[0] - 1}));
  int64_t kStride = k.strides[0] * esize, gStride = gate.strides[0] * esize,
          oStride = pooled.strides[0] * esize, rowBytes = D * esize;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lo = loadU32(iro, b), hi = loadU32(iro, b + 1);
    int64_t tokens = (lo <= hi && hi <= numRows) ? hi - lo : 0;
    int64_t cached = loadU32(cache, b);
    int64_t first = (cached + K - 1) / K, last = (cached + tokens) / K;
    int64_t count = std::max<int64_t>(0, last - first);
    int64_t skip = first * K - cached;
    int64_t rowLo = loadU32(pro, b), rowHi = loadU32(pro, b + 1);
    count = std::min({count, rowHi - rowLo, pooled.sizes[0] - rowLo});
    const char *kRow =
        static_cast<const char *>(k.data) + (lo + skip) * kStride;
    const char *gRow =
        static_cast<const char *>(gate.data) + (lo + skip) * gStride;
    char *out = static_cast<char *>(pooled.data) + rowLo * oStride;
    for (int64_t j = 0; j < count; ++j)
      xorRows(kRow + j * K * kStride, gRow + j * K * gStride, kStride, gStride,
              K, rowBytes, out + j * oStride);
  }
}
