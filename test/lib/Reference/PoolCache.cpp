//===- PoolCache.cpp - a plain reference of the pool cache ----------------===//
//
// Straight from the spec's "The pool cache". Element addresses are computed
// from each view's strides on every access.
//
// Build note: compiled with -ffp-contract=off so that every f32 product and
// sum (the Hadamard stages, y * c, a * (1/448)) is rounded on its own.
//
//===----------------------------------------------------------------------===//

#include "Reference/PoolCache.h"

#include "Reference/Float.h"
#include "Reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

using namespace kpool;
using namespace kpool::reference;

namespace {

uint32_t loadU32(const KPoolView &v, std::initializer_list<int64_t> idx) {
  uint32_t x;
  std::memcpy(&x, elementAddress(v, 4, idx), 4);
  return x;
}

int64_t clampMin0(int64_t x) { return x < 0 ? 0 : x; }

int64_t batchOf(std::initializer_list<int64_t> lengths) {
  return clampMin0(std::min(lengths));
}

bool denseOk(const Geometry &g, const KPoolView &v) {
  return v.rank == 2 && v.sizes[1] == g.headDim;
}

/// The dense row `row` of `pooled`, widened to f32.
std::vector<float> denseRow(const Geometry &g, const KPoolView &pooled,
                            int64_t row) {
  int64_t esize = elementSize(g.type);
  std::vector<float> x(g.headDim);
  for (int64_t d = 0; d < g.headDim; ++d)
    x[d] = fromBits(g.type, elementBits(g.type, elementAddress(pooled, esize,
                                                        {row, d})));
  return x;
}

/// Computes the entry of dense row `row` and stores it at (batchRow, poolId).
void placeRow(const Geometry &g, const CacheFormat &f,
              const KPoolView &cacheKeys, const KPoolView &cacheScales,
              const KPoolView &blockTable, const KPoolView &pooled,
              int64_t row, int64_t batchRow, int64_t poolId) {
  std::vector<float> x = denseRow(g, pooled, row);
  std::vector<uint32_t> bits(g.headDim);
  float scale = 0.0f;
  cacheEntry(g.type, g.headDim, f, x.data(), bits.data(), &scale);
  storeCache(g, f, cacheKeys, cacheScales, blockTable, batchRow, poolId,
             bits.data(), scale);
}

} // namespace

//===----------------------------------------------------------------------===//
// E4M3FN: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no
// infinities; S.1111.111 is NaN; largest finite 0x7e = 1.75 * 2^8 = 448.
//===----------------------------------------------------------------------===//

float kpool::reference::e4m3fnDecode(uint8_t code) {
  bool negative = (code & 0x80u) != 0;
  int exponent = (code >> 3) & 0xf;
  int mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7)
    return negative ? -NAN : NAN;
  double magnitude =
      exponent == 0 ? std::ldexp(double(mantissa), -9) // subnormal: m * 2^-9
                    : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return float(negative ? -magnitude : magnitude);
}

uint8_t kpool::reference::e4m3fnEncode(float x) {
  uint8_t sign = std::signbit(x) ? 0x80u : 0x00u;
  if (std::isnan(x))
    return uint8_t(sign | 0x7fu);
  double a = std::fabs(double(x));
  // The non-negative finite codes 0 .. 0x7e have increasing values; find the
  // two that enclose |x| and take the nearer, the even code on a tie. The
  // midpoint of two codes' values is exact in double, so are the compares.
  for (int code = 0; code < 0x7e; ++code) {
    double lo = e4m3fnDecode(uint8_t(code));
    double hi = e4m3fnDecode(uint8_t(code + 1));
    if (a > hi)
      continue;
    double mid = (lo + hi) / 2;
    int nearest;
    if (a < mid)
      nearest = code;
    else if (a > mid)
      nearest = code + 1;
    else
      nearest = code % 2 == 0 ? code : code + 1;
    return uint8_t(sign | nearest);
  }
  return uint8_t(sign | 0x7eu); // |x| >= 448 (the caller clamps)
}

//===----------------------------------------------------------------------===//
// The entry of one pool.
//===----------------------------------------------------------------------===//

void kpool::reference::cacheEntry(KPoolElementType type, int64_t headDim,
                                  const CacheFormat &f, const float *x,
                                  uint32_t *entryBits, float *scale) {
  std::vector<float> y(x, x + headDim);
  if (f.rotate == CacheRotate::Hadamard) {
    // Stages h = 1, 2, ..., D/2; pair (i, i + h) for i mod 2h < h.
    for (int64_t h = 1; h < headDim; h *= 2) {
      for (int64_t i = 0; i + h < headDim; ++i) {
        if (i % (2 * h) >= h)
          continue;
        float u = y[i], v = y[i + h];
        y[i] = u + v;
        y[i + h] = u - v;
      }
    }
    const float c = float(1.0 / std::sqrt(double(headDim)));
    for (int64_t d = 0; d < headDim; ++d) {
      float product = y[d] * c;
      y[d] = fromBits(type, roundToBits(type, product));
    }
  }

  if (f.entry == CacheEntry::Element) {
    for (int64_t d = 0; d < headDim; ++d)
      entryBits[d] = roundToBits(type, y[d]);
    return;
  }

  float a = 1e-4f;
  for (int64_t d = 0; d < headDim; ++d)
    a = std::max(a, std::fabs(y[d]));
  const float inv448 = 1.0f / 448.0f;
  float s = a * inv448;
  if (f.scale == CacheScale::Pow2) {
    // s = m * 2^e with m in [0.5, 1): s itself when m == 0.5, else 2^e.
    int e = 0;
    float m = std::frexp(s, &e);
    if (m != 0.5f)
      s = std::ldexp(1.0f, e);
  }
  for (int64_t d = 0; d < headDim; ++d) {
    float q = y[d] / s;
    q = std::min(std::max(q, -448.0f), 448.0f);
    entryBits[d] = e4m3fnEncode(q);
  }
  *scale = s;
}

//===----------------------------------------------------------------------===//
// Placement.
//===----------------------------------------------------------------------===//

void kpool::reference::storeCache(const Geometry &g, const CacheFormat &f,
                                  const KPoolView &cacheKeys,
                                  const KPoolView &cacheScales,
                                  const KPoolView &blockTable, int64_t batchRow,
                                  int64_t poolId, const uint32_t *entryBits,
                                  float scale) {
  bool fp8 = f.entry == CacheEntry::FP8;
  if (cacheKeys.rank != 3 || cacheKeys.sizes[2] != g.headDim ||
      blockTable.rank != 2 || (fp8 && cacheScales.rank != 2))
    return;
  int64_t pageSize = cacheKeys.sizes[1];
  if (pageSize < 1 || poolId < 0 || batchRow < 0)
    return;
  int64_t pageIndex = poolId / pageSize, row = poolId % pageSize;
  if (batchRow >= blockTable.sizes[0] || pageIndex >= blockTable.sizes[1])
    return;
  int64_t page = loadU32(blockTable, {batchRow, pageIndex});
  if (page >= cacheKeys.sizes[0])
    return;
  if (fp8 && (page >= cacheScales.sizes[0] || row >= cacheScales.sizes[1]))
    return;

  if (!fp8) {
    int64_t esize = elementSize(g.type);
    for (int64_t d = 0; d < g.headDim; ++d)
      setElementBits(g.type, elementAddress(cacheKeys, esize, {page, row, d}),
                     entryBits[d]);
    return;
  }
  for (int64_t d = 0; d < g.headDim; ++d) {
    uint8_t code = uint8_t(entryBits[d]);
    std::memcpy(elementAddress(cacheKeys, 1, {page, row, d}), &code, 1);
  }
  std::memcpy(elementAddress(cacheScales, 4, {page, row}), &scale, 4);
}

//===----------------------------------------------------------------------===//
// The ops' cache writes.
//===----------------------------------------------------------------------===//

void kpool::reference::compressCache(
    const Geometry &g, const CacheFormat &f, const KPoolView &cacheKeys,
    const KPoolView &cacheScales, const KPoolView &blockTable,
    const KPoolView &pooled, const KPoolView &iro, const KPoolView &pro,
    const KPoolView &cache, int64_t numTokenRows) {
  if (!denseOk(g, pooled))
    return;
  int64_t batch = batchOf({cache.sizes[0], iro.sizes[0] - 1, pro.sizes[0] - 1});
  int64_t pooledRows = pooled.sizes[0];
  for (int64_t b = 0; b < batch; ++b) {
    // As reference::compress: reversed rows or rows past k bring no tokens.
    int64_t start = loadU32(iro, {b}), end = loadU32(iro, {b + 1});
    int64_t tokens = (start <= end && end <= numTokenRows) ? end - start : 0;
    int64_t cached = loadU32(cache, {b});
    PoolRange range = poolRange(g.kpool, cached, tokens);
    int64_t lo = loadU32(pro, {b}), hi = loadU32(pro, {b + 1});
    for (int64_t j = 0; j < range.count; ++j) {
      int64_t row = lo + j;
      if (row >= hi || row >= pooledRows)
        break;
      placeRow(g, f, cacheKeys, cacheScales, blockTable, pooled, row, b,
               range.first + j);
    }
  }
}

void kpool::reference::ringCloseCache(const Geometry &g, const CacheFormat &f,
                                      const KPoolView &cacheKeys,
                                      const KPoolView &cacheScales,
                                      const KPoolView &blockTable,
                                      const KPoolView &pooled,
                                      const KPoolView &closedPool) {
  if (!denseOk(g, pooled) || closedPool.rank != 1)
    return;
  int64_t rows = std::min(pooled.sizes[0], closedPool.sizes[0]);
  for (int64_t b = 0; b < rows; ++b) {
    int32_t id = int32_t(loadU32(closedPool, {b}));
    if (id < 0)
      continue;
    placeRow(g, f, cacheKeys, cacheScales, blockTable, pooled, b, b, id);
  }
}
