//===- Reference.cpp - a plain reference of the kpool ops -----------------===//
//
// Loops over requests, pools and channels, straight from the spec. Element
// addresses are computed from each view's strides on every access.
//
// Build note: compiled with -ffp-contract=off so that `A += e * k` is a
// rounded multiply then a rounded add, as the spec (and the kernels) do.
//
//===----------------------------------------------------------------------===//

#include "Reference/Reference.h"

#include "Reference/Float.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace kpool::reference;

//===----------------------------------------------------------------------===//
// Element access.
//===----------------------------------------------------------------------===//

namespace {

uint32_t loadU32(const KPoolView &v, int64_t i) {
  uint32_t x;
  std::memcpy(&x, elementAddress(v, 4, {i}), 4);
  return x;
}

void storeU32(const KPoolView &v, int64_t i, uint32_t x) {
  std::memcpy(elementAddress(v, 4, {i}), &x, 4);
}

uint32_t loadBits(const KPoolView &v, int64_t esize,
                  std::initializer_list<int64_t> idx) {
  char *p = elementAddress(v, esize, idx);
  if (esize == 2) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
  }
  uint32_t u;
  std::memcpy(&u, p, 4);
  return u;
}

void storeBits(const KPoolView &v, int64_t esize,
               std::initializer_list<int64_t> idx, uint32_t bits) {
  char *p = elementAddress(v, esize, idx);
  if (esize == 2) {
    uint16_t h = uint16_t(bits);
    std::memcpy(p, &h, 2);
  } else {
    std::memcpy(p, &bits, 4);
  }
}

float loadF32(const KPoolView &v, std::initializer_list<int64_t> idx) {
  return f32FromBits(loadBits(v, 4, idx));
}

int64_t clampMin0(int64_t x) { return x < 0 ? 0 : x; }

/// Number of requests the metadata describes: the minimum of the lengths,
/// never negative.
int64_t batchOf(std::initializer_list<int64_t> lengths) {
  return clampMin0(std::min(lengths));
}

/// One request's rows and cached length.
struct Request {
  int64_t start;  ///< s_b
  int64_t tokens; ///< n_b; 0 when the rows are reversed or reach past k
  int64_t cached; ///< c_b
};

Request loadRequest(const KPoolView &iro, const KPoolView &cache, int64_t b,
                    int64_t numRows) {
  int64_t lo = loadU32(iro, b), hi = loadU32(iro, b + 1);
  Request r;
  r.start = lo;
  r.tokens = (lo <= hi && hi <= numRows) ? hi - lo : 0;
  r.cached = loadU32(cache, b);
  return r;
}

bool isRank(const KPoolView &v, int64_t rank) { return v.rank == rank; }

bool keysOk(const Geometry &g, const KPoolView &v) {
  return isRank(v, 2) && v.sizes[1] == g.headDim;
}

bool apeOk(const Geometry &g, const KPoolView &v) {
  return isRank(v, 2) && v.sizes[0] == g.kpool && v.sizes[1] == g.headDim;
}

bool tailOk(const Geometry &g, const KPoolView &v) {
  return isRank(v, 4) && v.sizes[1] == 2 && v.sizes[2] >= g.kpool &&
         v.sizes[3] == g.headDim;
}

/// The K members of one pool, per channel, as f32.
struct Members {
  std::vector<const KPoolView *> keyView, gateView;  // per member
  std::vector<std::vector<int64_t>> keyIdx, gateIdx; // leading indices
};

float loadMember(const KPoolView &v, int64_t esize, KPoolElementType type,
                 const std::vector<int64_t> &lead, int64_t d) {
  uint32_t bits = lead.size() == 1
                      ? loadBits(v, esize, {lead[0], d})
                      : loadBits(v, esize, {lead[0], lead[1], lead[2], d});
  return fromBits(type, bits);
}

/// Writes the pooling function of `members` to row `row` of `pooled`.
void poolInto(const Geometry &g, const Members &mem, const KPoolView &ape,
              const KPoolView &pooled, int64_t row) {
  int64_t esize = elementSize(g.type);
  std::vector<float> keys(g.kpool), gates(g.kpool), apes(g.kpool);
  for (int64_t d = 0; d < g.headDim; ++d) {
    for (int64_t m = 0; m < g.kpool; ++m) {
      keys[m] = loadMember(*mem.keyView[m], esize, g.type, mem.keyIdx[m], d);
      gates[m] = loadMember(*mem.gateView[m], esize, g.type, mem.gateIdx[m], d);
      apes[m] = loadF32(ape, {m, d});
    }
    float out = poolChannel(g.kpool, keys.data(), gates.data(), apes.data(),
                            g.subnormalWeights);
    storeBits(pooled, esize, {row, d}, roundToBits(g.type, out));
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Numerics.
//===----------------------------------------------------------------------===//

int64_t kpool::reference::elementSize(KPoolElementType type) {
  return type == KPOOL_F32 ? 4 : 2;
}

uint32_t kpool::reference::roundToBits(KPoolElementType type, float x) {
  switch (type) {
  case KPOOL_BF16:
    return f32ToBf16(x);
  case KPOOL_F16:
    return f32ToF16(x);
  case KPOOL_F32:
    return f32Bits(x);
  }
  return 0;
}

float kpool::reference::fromBits(KPoolElementType type, uint32_t bits) {
  switch (type) {
  case KPOOL_BF16:
    return bf16ToF32(uint16_t(bits));
  case KPOOL_F16:
    return f16ToF32(uint16_t(bits));
  case KPOOL_F32:
    return f32FromBits(bits);
  }
  return 0.0f;
}

bool kpool::reference::flushesWeight(SubnormalWeights rule, float x) {
  // -126 ln 2 lies strictly between two f32 values: x < it exactly when
  // exp(x) < 2^-126.
  return rule == SubnormalWeights::Flush && double(x) < -126 * std::log(2.0);
}

float kpool::reference::poolChannel(int64_t kpool, const float *keys,
                                    const float *gates, const float *apes,
                                    SubnormalWeights rule) {
  std::vector<float> z(kpool);
  for (int64_t m = 0; m < kpool; ++m)
    z[m] = gates[m] + apes[m];
  // max, propagating NaN like arith.maximumf.
  float maxZ = z[0];
  for (int64_t m = 1; m < kpool; ++m)
    maxZ = (std::isnan(maxZ) || std::isnan(z[m])) ? NAN : std::max(maxZ, z[m]);
  float sum = 0.0f, acc = 0.0f;
  for (int64_t m = 0; m < kpool; ++m) {
    float x = z[m] - maxZ;
    float e = flushesWeight(rule, x) ? 0.0f : std::exp(x);
    float term = e * keys[m];
    sum = m == 0 ? e : sum + e;
    acc = m == 0 ? term : acc + term;
  }
  return acc / sum;
}

PoolRange kpool::reference::poolRange(int64_t kpool, int64_t cached,
                                      int64_t tokens) {
  PoolRange r;
  r.first = (cached + kpool - 1) / kpool;
  int64_t last = (cached + tokens) / kpool;
  r.count = last > r.first ? last - r.first : 0;
  r.skip = r.first * kpool - cached;
  return r;
}

//===----------------------------------------------------------------------===//
// The ops.
//===----------------------------------------------------------------------===//

void kpool::reference::compress(const Geometry &g, const KPoolView &pooled,
                                const KPoolView &k, const KPoolView &gate,
                                const KPoolView &ape, const KPoolView &iro,
                                const KPoolView &pro, const KPoolView &cache) {
  if (!keysOk(g, k) || !keysOk(g, gate) || !apeOk(g, ape) || !keysOk(g, pooled))
    return;
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = batchOf({cache.sizes[0], iro.sizes[0] - 1, pro.sizes[0] - 1});
  int64_t pooledRows = pooled.sizes[0];
  for (int64_t b = 0; b < batch; ++b) {
    Request r = loadRequest(iro, cache, b, numRows);
    PoolRange range = poolRange(g.kpool, r.cached, r.tokens);
    int64_t lo = loadU32(pro, b), hi = loadU32(pro, b + 1);
    for (int64_t j = 0; j < range.count; ++j) {
      int64_t row = lo + j;
      if (row >= hi || row >= pooledRows)
        break;
      Members mem;
      for (int64_t m = 0; m < g.kpool; ++m) {
        int64_t src = r.start + range.skip + j * g.kpool + m;
        mem.keyView.push_back(&k);
        mem.gateView.push_back(&gate);
        mem.keyIdx.push_back({src});
        mem.gateIdx.push_back({src});
      }
      poolInto(g, mem, ape, pooled, row);
    }
  }
}

void kpool::reference::seedTail(const Geometry &g, const KPoolView &tail,
                                const KPoolView &k, const KPoolView &gate,
                                const KPoolView &iro, const KPoolView &cache,
                                const KPoolView &slotIdx, int32_t numRequests) {
  if (!keysOk(g, k) || !keysOk(g, gate) || !tailOk(g, tail))
    return;
  int64_t esize = elementSize(g.type);
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = batchOf({cache.sizes[0], iro.sizes[0] - 1, slotIdx.sizes[0]});
  int64_t requests = std::min<int64_t>(clampMin0(numRequests), batch);
  int64_t maxSlots = tail.sizes[0];
  for (int64_t b = 0; b < requests; ++b) {
    Request r = loadRequest(iro, cache, b, numRows);
    int64_t slot = loadU32(slotIdx, b);
    if (slot >= maxSlots)
      continue;
    // The request's last R positions that this call brings.
    int64_t window = tail.sizes[2];
    int64_t end = r.cached + r.tokens;
    for (int64_t q = std::max(end - window, r.cached); q < end; ++q) {
      int64_t row = r.start + q - r.cached;
      int64_t m = q % window;
      for (int64_t d = 0; d < g.headDim; ++d) {
        storeBits(tail, esize, {slot, 0, m, d}, loadBits(k, esize, {row, d}));
        storeBits(tail, esize, {slot, 1, m, d},
                  loadBits(gate, esize, {row, d}));
      }
    }
  }
}

void kpool::reference::ringClose(const Geometry &g, const KPoolView &pooled,
                                 const KPoolView &closed, const KPoolView &tail,
                                 const KPoolView &k, const KPoolView &gate,
                                 const KPoolView &ape, const KPoolView &iro,
                                 const KPoolView &cache,
                                 const KPoolView &slotIdx,
                                 int32_t numRequests) {
  if (!keysOk(g, k) || !keysOk(g, gate) || !apeOk(g, ape) || !tailOk(g, tail) ||
      !keysOk(g, pooled))
    return;
  int64_t esize = elementSize(g.type);
  int64_t numRows = std::min(k.sizes[0], gate.sizes[0]);
  int64_t batch = batchOf({cache.sizes[0], iro.sizes[0] - 1, slotIdx.sizes[0]});
  int64_t requests = std::min<int64_t>(clampMin0(numRequests), batch);
  int64_t maxSlots = tail.sizes[0];
  int64_t pooledRows = pooled.sizes[0], closedRows = closed.sizes[0];
  for (int64_t b = 0; b < std::max(pooledRows, closedRows); ++b) {
    bool closes = false;
    int64_t id = 0, held = 0, slot = 0, start = 0;
    if (b < requests) {
      Request r = loadRequest(iro, cache, b, numRows);
      held = r.cached % g.kpool;
      id = r.cached / g.kpool;
      slot = loadU32(slotIdx, b);
      start = r.start;
      closes = held > 0 && r.tokens >= g.kpool - held && slot < maxSlots;
    }
    if (b < closedRows)
      storeU32(closed, b, closes ? uint32_t(id) : 0xffffffffu);
    if (b >= pooledRows)
      continue;
    if (!closes) {
      for (int64_t d = 0; d < g.headDim; ++d)
        storeBits(pooled, esize, {b, d}, roundToBits(g.type, 0.0f));
      continue;
    }
    Members mem;
    for (int64_t m = 0; m < g.kpool; ++m) {
      if (m < held) {
        // Position id*K + m sits in ring row (id*K + m) mod R.
        int64_t ringRow = (id * g.kpool + m) % tail.sizes[2];
        mem.keyView.push_back(&tail);
        mem.gateView.push_back(&tail);
        mem.keyIdx.push_back({slot, 0, ringRow});
        mem.gateIdx.push_back({slot, 1, ringRow});
      } else {
        int64_t row = start + m - held;
        mem.keyView.push_back(&k);
        mem.gateView.push_back(&gate);
        mem.keyIdx.push_back({row});
        mem.gateIdx.push_back({row});
      }
    }
    poolInto(g, mem, ape, pooled, b);
  }
}

void kpool::reference::poolOffsets(const Geometry &g, const KPoolView &pro,
                                   const KPoolView &iro,
                                   const KPoolView &cache) {
  int64_t batch = batchOf({cache.sizes[0], iro.sizes[0] - 1});
  int64_t length = pro.sizes[0];
  // No `k` here: any u32 end offset is below this, so only reversed rows are
  // caught.
  const int64_t noRowLimit = int64_t(1) << 32;
  int64_t acc = 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (b < length)
      storeU32(pro, b, uint32_t(acc));
    Request r = loadRequest(iro, cache, b, noRowLimit);
    acc += poolRange(g.kpool, r.cached, r.tokens).count;
  }
  if (batch < length)
    storeU32(pro, batch, uint32_t(acc));
}

uint32_t kpool::reference::elementBits(KPoolElementType type, const void *p) {
  if (type == KPOOL_F32) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void kpool::reference::setElementBits(KPoolElementType type, void *p,
                                      uint32_t bits) {
  if (type == KPOOL_F32) {
    std::memcpy(p, &bits, 4);
    return;
  }
  uint16_t v = static_cast<uint16_t>(bits);
  std::memcpy(p, &v, 2);
}

double kpool::reference::ulpOf(KPoolElementType type, double x) {
  int mantissa = type == KPOOL_F32 ? 23 : type == KPOOL_F16 ? 10 : 7;
  int minExponent = type == KPOOL_F16 ? -14 : -126;
  int exponent = x == 0 ? minExponent : std::max(std::ilogb(x), minExponent);
  return std::ldexp(1.0, exponent - mantissa);
}
