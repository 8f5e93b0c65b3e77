//===- StoreTestSupport.h - what the store tests share ----------*- C++ -*-===//
//
// Helpers of kpool-stores (regressions and ports) and kpool-store-property
// (the property test): kernel sets with a cache format, random token rows,
// the oracle (the backend's one-shot compress of a token stream, and the
// reference's pool-cache formulas applied to its dense pools: the contract
// says a cache entry is the formula applied to the backend's own dense pool,
// and that dense pool is bit-identical to one-shot compression on one
// backend), and a full snapshot of a store's state. Test-only.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_RUNTIME_STORETESTSUPPORT_H
#define KPOOL_TEST_RUNTIME_STORETESTSUPPORT_H

#include "Reference/PoolCache.h"
#include "Reference/Reference.h"
#include "Reference/VerifySchedule.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/PagedPoolStore.h"
#include "kpool/Runtime/PoolStore.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kpool::storetest {

namespace ref = kpool::reference;
using Rng = ref::TestRng;

inline std::string formatName(const CacheFormat &f) {
  std::string s = f.entry == CacheEntry::FP8 ? "fp8" : "element";
  s += f.rotate == CacheRotate::Hadamard ? "/hadamard" : "/none";
  if (f.entry == CacheEntry::FP8)
    s += f.scale == CacheScale::Pow2 ? "/pow2" : "/absmax";
  return s;
}

inline std::string configName(const KernelConfig &c) {
  return std::string(elementTypeName(c.elementType)) + " D" +
         std::to_string(c.headDim) + " K" + std::to_string(c.kpool) + " " +
         formatName(c.cache);
}

/// The CPU kernel set of (type, D, K) with pool-cache format `f`, JIT
/// compiled on first use (both stores run on it: PoolStore the plain fused
/// step, PagedPoolStore its cache variant).
inline std::shared_ptr<KernelSet> cacheKernels(ElementType type, int64_t D,
                                               int64_t K, CacheFormat f,
                                               std::string &error) {
  registerJitCompiler();
  KernelConfig kc;
  kc.elementType = type;
  kc.headDim = D;
  kc.kpool = K;
  kc.cache = f;
  Status s;
  auto set = KernelSet::get(kc, s);
  if (!set)
    error = "KernelSet::get(" + configName(kc) + "): " + s.message();
  return set;
}

/// `rows` random rows of raw element bytes, values uniform in
/// [-scale, scale), rounded to the element type.
inline std::vector<uint8_t> randomRows(Rng &rng, ElementType type, int64_t D,
                                       int64_t rows, double scale) {
  int64_t esize = elementTypeSize(type);
  std::vector<uint8_t> out(static_cast<size_t>(rows * D * esize));
  for (int64_t i = 0; i < rows * D; ++i)
    ref::setElementBits(
        type, &out[size_t(i * esize)],
        ref::roundToBits(type, float(rng.uniform(-scale, scale))));
  return out;
}

/// Keys and gates of a request's tokens, row after row.
struct Tokens {
  std::vector<uint8_t> k, g;
  int64_t rowBytes = 0;
  int64_t size() const { return rowBytes ? int64_t(k.size()) / rowBytes : 0; }
  void append(const uint8_t *keys, const uint8_t *gates, int64_t n) {
    k.insert(k.end(), keys, keys + n * rowBytes);
    g.insert(g.end(), gates, gates + n * rowBytes);
  }
  void truncate(int64_t n) {
    k.resize(size_t(n * rowBytes));
    g.resize(size_t(n * rowBytes));
  }
};

/// One call's rows and metadata, built request by request from token
/// streams.
struct Call {
  int64_t rowBytes;
  std::vector<uint8_t> k, g;
  std::vector<uint32_t> iro = {0}, slots;
  explicit Call(int64_t rowBytes) : rowBytes(rowBytes) {}
  void add(uint32_t slot, const uint8_t *keys, const uint8_t *gates,
           int64_t n) {
    k.insert(k.end(), keys, keys + n * rowBytes);
    g.insert(g.end(), gates, gates + n * rowBytes);
    iro.push_back(iro.back() + uint32_t(n));
    slots.push_back(slot);
  }
  void add(uint32_t slot, const Tokens &t, int64_t from, int64_t n) {
    add(slot, t.k.data() + from * rowBytes, t.g.data() + from * rowBytes, n);
  }
  View kView(int64_t D) {
    k.reserve(k.size() + size_t(rowBytes));
    return denseView(k.data(), {int64_t(k.size()) / rowBytes, D});
  }
  View gView(int64_t D) {
    g.reserve(g.size() + size_t(rowBytes));
    return denseView(g.data(), {int64_t(g.size()) / rowBytes, D});
  }
  template <typename Store>
  Status run(Store &store, int64_t D,
             std::vector<ProducedPool> *produced = nullptr) {
    return store.step(kView(D), gView(D), iro, slots, produced);
  }
};

/// The backend's one-shot compress of the first `n` tokens of `t`: n / K
/// dense pools, row after row, in `pools`.
inline Status oneShot(const KernelSet &ks, const std::vector<float> &ape,
                      const Tokens &t, int64_t n, std::vector<uint8_t> &pools) {
  const KernelConfig &c = ks.config();
  int64_t count = n / c.kpool, rowBytes = t.rowBytes;
  pools.assign(size_t(std::max<int64_t>(count, 1) * rowBytes), 0);
  std::vector<uint8_t> k(t.k.begin(), t.k.begin() + n * rowBytes),
      g(t.g.begin(), t.g.begin() + n * rowBytes);
  k.resize(size_t(std::max<int64_t>(n, 1) * rowBytes));
  g.resize(size_t(std::max<int64_t>(n, 1) * rowBytes));
  std::vector<uint32_t> iro = {0, uint32_t(n)}, pro = {0, uint32_t(count)},
                        cache = {0};
  std::vector<float> a = ape;
  CompressArgs args{};
  args.pooled = denseView(pools.data(), {count, c.headDim});
  args.k = denseView(k.data(), {n, c.headDim});
  args.gate = denseView(g.data(), {n, c.headDim});
  args.ape = denseView(a.data(), {c.kpool, c.headDim});
  args.input_row_offsets = denseView(iro.data(), {2});
  args.pool_row_offsets = denseView(pro.data(), {2});
  args.cache_lengths = denseView(cache.data(), {1});
  Status s = ks.compress(args);
  pools.resize(size_t(count * rowBytes));
  return s;
}

/// The reference's cache entry of the dense pool row `dense`: D entry
/// elements as bytes (1 byte each for FP8, else the element type's) and,
/// for FP8, the scale's bits (else 0).
struct Entry {
  std::vector<uint8_t> bytes;
  uint32_t scaleBits = 0;
  bool operator==(const Entry &o) const {
    return bytes == o.bytes && scaleBits == o.scaleBits;
  }
};
inline Entry referenceEntry(const KernelConfig &c, const uint8_t *dense) {
  const int64_t D = c.headDim, esize = elementTypeSize(c.elementType);
  bool fp8 = c.cache.entry == CacheEntry::FP8;
  std::vector<float> x(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d)
    x[size_t(d)] = ref::fromBits(
        c.elementType, ref::elementBits(c.elementType, dense + d * esize));
  std::vector<uint32_t> bits(static_cast<size_t>(D));
  float scale = 0;
  ref::cacheEntry(c.elementType, D, c.cache, x.data(), bits.data(), &scale);
  Entry e;
  int64_t eb = fp8 ? 1 : esize;
  e.bytes.resize(size_t(D * eb));
  for (int64_t d = 0; d < D; ++d) {
    if (fp8)
      e.bytes[size_t(d)] = uint8_t(bits[size_t(d)]);
    else
      ref::setElementBits(c.elementType, &e.bytes[size_t(d * eb)],
                          bits[size_t(d)]);
  }
  if (fp8)
    std::memcpy(&e.scaleBits, &scale, 4);
  return e;
}

/// A stored entry of a paged store, as Entry.
inline Status storedEntry(const PagedPoolStore &s, uint32_t slot, int64_t pool,
                          Entry &e) {
  const KernelConfig &c = s.kernels().config();
  e.bytes.assign(size_t(c.headDim * s.entryBytes()), 0);
  float scale = 0;
  Status st = s.entry(slot, pool, e.bytes.data(), &scale);
  e.scaleBits = 0;
  if (c.cache.entry == CacheEntry::FP8)
    std::memcpy(&e.scaleBits, &scale, 4);
  return st;
}

/// Everything a store holds, for "a failed call changes nothing": per slot
/// its bookkeeping and pools (PoolStore) or pages (PagedPoolStore), the
/// whole ring, and for the paged store the free list and the whole cache
/// buffer.
struct Snapshot {
  std::vector<SlotInfo> info;
  std::vector<std::vector<uint8_t>> pools;
  std::vector<std::vector<uint32_t>> pages;
  std::vector<uint32_t> freePages;
  std::vector<uint8_t> ring, cache;

  bool operator==(const Snapshot &o) const {
    auto same = [](const SlotInfo &a, const SlotInfo &b) {
      return a.tokens == b.tokens && a.stepBegin == b.stepBegin &&
             a.stepEnd == b.stepEnd;
    };
    return std::equal(info.begin(), info.end(), o.info.begin(), o.info.end(),
                      same) &&
           pools == o.pools && pages == o.pages && freePages == o.freePages &&
           ring == o.ring && cache == o.cache;
  }
  /// What differs, for a failure message.
  std::string diff(const Snapshot &o) const {
    for (size_t s = 0; s < info.size() && s < o.info.size(); ++s)
      if (info[s].tokens != o.info[s].tokens ||
          info[s].stepBegin != o.info[s].stepBegin ||
          info[s].stepEnd != o.info[s].stepEnd)
        return "slot " + std::to_string(s) + "'s bookkeeping";
    if (pools != o.pools)
      return "pools";
    if (pages != o.pages)
      return "pages";
    if (freePages != o.freePages)
      return "the free list";
    if (ring != o.ring)
      return "the ring";
    if (cache != o.cache)
      return "the cache buffer";
    return "nothing";
  }
};

inline std::vector<uint8_t> ringBytes(const View &ring, int64_t esize) {
  int64_t n = 1;
  for (int64_t d = 0; d < ring.rank; ++d)
    n *= ring.sizes[d];
  const auto *p = static_cast<const uint8_t *>(ring.data);
  return p ? std::vector<uint8_t>(p, p + n * esize) : std::vector<uint8_t>();
}

/// The snapshot of `slots` of a PoolStore (all slots when empty).
inline Snapshot snapshot(const PoolStore &s, std::vector<uint32_t> slots = {}) {
  Snapshot out;
  if (slots.empty())
    for (int64_t i = 0; i < s.maxSlots(); ++i)
      slots.push_back(uint32_t(i));
  const KernelConfig &c = s.kernels().config();
  int64_t esize = elementTypeSize(c.elementType), rowBytes = c.headDim * esize;
  for (uint32_t slot : slots) {
    SlotInfo info;
    (void)s.slotInfo(slot, info);
    out.info.push_back(info);
    std::vector<uint8_t> pools(size_t(s.pools(slot) * rowBytes));
    for (int64_t p = 0; p < s.pools(slot); ++p)
      std::memcpy(&pools[size_t(p * rowBytes)], s.pool(slot, p),
                  size_t(rowBytes));
    out.pools.push_back(std::move(pools));
    // The slot's ring rows.
    View ring = s.ring();
    int64_t slotBytes = 2 * ring.sizes[2] * rowBytes;
    const auto *r = static_cast<const uint8_t *>(ring.data) + slot * slotBytes;
    out.ring.insert(out.ring.end(), r, r + slotBytes);
  }
  return out;
}

/// The snapshot of a PagedPoolStore: `slots` (all when empty); the free
/// list and the cache buffer only with `whole` (other threads may change
/// them).
inline Snapshot snapshot(const PagedPoolStore &s,
                         std::vector<uint32_t> slots = {}, bool whole = true) {
  Snapshot out;
  if (slots.empty())
    for (int64_t i = 0; i < s.maxSlots(); ++i)
      slots.push_back(uint32_t(i));
  const KernelConfig &c = s.kernels().config();
  int64_t rowBytes = c.headDim * elementTypeSize(c.elementType);
  for (uint32_t slot : slots) {
    SlotInfo info;
    (void)s.slotInfo(slot, info);
    out.info.push_back(info);
    std::vector<uint32_t> pages;
    (void)s.pages(slot, pages);
    out.pages.push_back(pages);
    // The slot's valid entries.
    std::vector<uint8_t> entries;
    for (int64_t p = 0; p < s.pools(slot); ++p) {
      Entry e;
      (void)storedEntry(s, slot, p, e);
      entries.insert(entries.end(), e.bytes.begin(), e.bytes.end());
      entries.insert(entries.end(), (const uint8_t *)&e.scaleBits,
                     (const uint8_t *)&e.scaleBits + 4);
    }
    out.pools.push_back(std::move(entries));
    View ring = s.ring();
    int64_t slotBytes = 2 * ring.sizes[2] * rowBytes;
    const auto *r = static_cast<const uint8_t *>(ring.data) + slot * slotBytes;
    out.ring.insert(out.ring.end(), r, r + slotBytes);
  }
  if (whole) {
    out.freePages = s.freePages();
    out.cache.assign(s.buffer(), s.buffer() + s.bufferBytes());
  }
  return out;
}

} // namespace kpool::storetest

#endif // KPOOL_TEST_RUNTIME_STORETESTSUPPORT_H
