//===- OperandChecks.cpp - host validation of each kernel's operands ------===//
//
// Each op's rules, written once on the fields of its argument structs (a
// `*_cache` kernel's struct has the fields of its op's plus the cache
// group's, so the same template checks both), the table's rule for every
// view, and the overlap rule for every operand the table says is written.
//
//===----------------------------------------------------------------------===//

#include "OperandChecks.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace kpool;
using namespace kpool::detail;

namespace {

/// The batch (cache_lengths' length) and the lengths of the two offset
/// arrays (one more), checked by pool_offsets and compress.
Status checkOffsets(Validator &v, const View &cache, const View &iro,
                    const View &pro, int64_t &batch) {
  KPOOL_TRY(v.batch("cache_lengths", cache, batch));
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  return v.length("pool_row_offsets", pro, batch + 1,
                  "one more than cache_lengths");
}

/// pool_offsets: its offsets; with `check`, its metadata.
template <class A>
Status checkPoolOffsets(const KernelConfig &, Validator &v, const A &a,
                        bool check) {
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, a.cache_lengths, a.input_row_offsets,
                         a.pool_row_offsets, batch));
  KPOOL_TRY(v.shape("input_row_offsets", a.input_row_offsets, {batch + 1},
                    "batch + 1"));
  KPOOL_TRY(v.shape("pool_row_offsets", a.pool_row_offsets, {batch + 1},
                    "batch + 1"));
  if (!check)
    return Status();
  RequestChecks r;
  r.iro = Metadata(a.input_row_offsets);
  r.rowRequests = batch;
  r.rows = UINT32_MAX;
  return v.requests(r);
}

/// compress (and compress_cache): its shapes; with `check`, its metadata.
template <class A>
Status checkCompress(const KernelConfig &c, Validator &v, const A &a,
                     bool check) {
  KPOOL_TRY(v.shape("k", a.k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", a.gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", a.k, "gate", a.gate, 0));
  KPOOL_TRY(v.shape("ape", a.ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(
      v.shape("pooled", a.pooled, {-1, c.headDim}, "pools x head_dim"));
  int64_t batch;
  KPOOL_TRY(checkOffsets(v, a.cache_lengths, a.input_row_offsets,
                         a.pool_row_offsets, batch));
  if (!check)
    return Status();
  RequestChecks r;
  r.iro = Metadata(a.input_row_offsets);
  r.rowRequests = batch;
  r.rows = a.k.sizes[0];
  r.cache = Metadata(a.cache_lengths);
  r.pro = Metadata(a.pool_row_offsets);
  r.pooledRows = a.pooled.sizes[0];
  return v.requests(r);
}

/// The metadata checks of the ops with a ring: the rows and slots of the
/// first `num_requests` requests.
template <class A> RequestChecks ringChecks(const A &a) {
  RequestChecks r;
  r.iro = Metadata(a.input_row_offsets);
  r.rowRequests = a.num_requests;
  r.rows = a.k.sizes[0];
  r.slots = Metadata(a.slot_idx);
  r.slotRequests = a.num_requests;
  r.maxSlots = a.tail.sizes[0];
  return r;
}

/// seed_tail, and the ring operands of ring_close and step: their shapes;
/// with `check`, their metadata.
template <class A>
Status checkRing(const KernelConfig &c, Validator &v, const A &a,
                 bool check) {
  KPOOL_TRY(v.shape("tail", a.tail, {-1, 2, -1, c.headDim},
                    "max_slots x 2 x window x head_dim"));
  KPOOL_TRY(v.ringWindow(a.tail));
  KPOOL_TRY(v.shape("k", a.k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", a.gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", a.k, "gate", a.gate, 0));
  int64_t batch;
  KPOOL_TRY(v.batch("cache_lengths", a.cache_lengths, batch));
  KPOOL_TRY(v.length("input_row_offsets", a.input_row_offsets, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.length("slot_idx", a.slot_idx, batch, "one per request"));
  if (!check)
    return Status();
  KPOOL_TRY(v.numRequests(a.num_requests, batch));
  return v.requests(ringChecks(a));
}

/// ring_close's own outputs and `ape` (ring_close and step).
Status checkRingCloseOutputs(const KernelConfig &c, Validator &v,
                             const View &pooled, const View &closed,
                             const View &ape, const View &cache) {
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {batch, c.headDim}, "batch x head_dim"));
  return v.shape("closed_pool", closed, {batch}, "batch");
}

template <class A>
Status checkRingClose(const KernelConfig &c, Validator &v, const A &a,
                      bool check) {
  KPOOL_TRY(checkRing(c, v, a, check));
  return checkRingCloseOutputs(c, v, a.pooled, a.closed_pool, a.ape,
                               a.cache_lengths);
}

/// The step: ring_close's and seed_tail's shape checks, then with `check`
/// one pass over the metadata: every request's rows lie in `k`, the live
/// requests' slots are distinct and in the ring, and the pools fit
/// `pooled`.
template <class A>
Status checkStep(const KernelConfig &c, Validator &v, const A &a,
                 bool check) {
  KPOOL_TRY(checkRing(c, v, a, /*check=*/false));
  KPOOL_TRY(checkRingCloseOutputs(c, v, a.closed, a.closed_pool, a.ape,
                                  a.cache_lengths));
  int64_t batch = a.cache_lengths.sizes[0];
  KPOOL_TRY(v.shape("pool_row_offsets", a.pool_row_offsets, {batch + 1},
                    "batch + 1"));
  KPOOL_TRY(
      v.shape("pooled", a.pooled, {-1, c.headDim}, "pools x head_dim"));
  if (!check)
    return Status();
  KPOOL_TRY(v.numRequests(a.num_requests, batch));
  RequestChecks r = ringChecks(a);
  r.rowRequests = batch;
  r.cache = Metadata(a.cache_lengths);
  r.pooledRows = a.pooled.sizes[0];
  return v.requests(r);
}

//===----------------------------------------------------------------------===//
// The pool-cache group
//===----------------------------------------------------------------------===//

/// The pools compress stores, as (request, pool id), from host metadata
/// whose rows were checked: request b's last completedPools(...) pools
/// before floor((c + n) / K).
void compressPools(Metadata offsets, Metadata lengths, int64_t batch,
                   int64_t kpool,
                   std::vector<std::pair<int64_t, int64_t>> &pools) {
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = int64_t(offsets[b + 1]) - int64_t(offsets[b]);
    int64_t end = (int64_t(lengths[b]) + n) / kpool;
    int64_t count = int64_t(completedPools(lengths[b], n, kpool));
    for (int64_t j = 0; j < count; ++j)
      pools.push_back({b, end - count + j});
  }
}

/// The pools ring_close stores: each live request's pending pool when this
/// call completes it.
void ringClosePools(Metadata offsets, Metadata lengths, int32_t numRequests,
                    int64_t kpool,
                    std::vector<std::pair<int64_t, int64_t>> &pools) {
  for (int64_t b = 0; b < numRequests; ++b) {
    int64_t held = int64_t(lengths[b]) % kpool;
    int64_t n = int64_t(offsets[b + 1]) - int64_t(offsets[b]);
    if (held > 0 && n >= kpool - held)
      pools.push_back({b, int64_t(lengths[b]) / kpool});
  }
}

/// What the cache group adds to a call: the cache operands' shapes (the
/// set must have a format); with `check` (host metadata, rows already
/// checked) the table entries of the pools ring_close stores for its first
/// `closeRequests` requests (none when negative) and, with `compress`,
/// compress's.
template <class A>
Status checkCacheGroup(const KernelConfig &c, Validator &v, const A &a,
                       bool check, int32_t closeRequests, bool compress) {
  if (c.cache.entry == CacheEntry::None)
    return v.error("this kernel set has no pool-cache kernels: create it "
                   "with a cache format (KernelConfig::cache)");
  KPOOL_TRY(v.cacheShapes(a.cache_keys, a.cache_scales, a.block_table,
                          a.cache_lengths.sizes[0],
                          c.cache.entry == CacheEntry::FP8));
  if (!check)
    return Status();
  Metadata offsets(a.input_row_offsets), lengths(a.cache_lengths);
  // This thread's buffer, reused: no allocation per call once warm.
  static thread_local std::vector<std::pair<int64_t, int64_t>> pools;
  pools.clear();
  if (closeRequests >= 0)
    ringClosePools(offsets, lengths, closeRequests, c.kpool, pools);
  if (compress)
    compressPools(offsets, lengths, a.cache_lengths.sizes[0], c.kpool, pools);
  return v.cacheEntries(a.block_table, a.cache_keys.sizes[0],
                        a.cache_keys.sizes[1], pools);
}

template <class A> const A &as(const void *args) {
  return *static_cast<const A *>(args);
}

/// The op's own rules for kernel `id`.
Status checkOp(const KernelConfig &c, Validator &v, abi::KernelId id,
               const void *args, bool check) {
  using abi::KernelId;
  switch (id) {
  case KernelId::Compress:
    return checkCompress(c, v, as<CompressArgs>(args), check);
  case KernelId::SeedTail:
    return checkRing(c, v, as<SeedTailArgs>(args), check);
  case KernelId::RingClose:
    return checkRingClose(c, v, as<RingCloseArgs>(args), check);
  case KernelId::PoolOffsets:
    return checkPoolOffsets(c, v, as<PoolOffsetsArgs>(args), check);
  case KernelId::Step:
    return checkStep(c, v, as<StepArgs>(args), check);
  case KernelId::CompressCache: {
    const auto &a = as<CompressCacheArgs>(args);
    KPOOL_TRY(checkCompress(c, v, a, check));
    return checkCacheGroup(c, v, a, check, /*closeRequests=*/-1,
                           /*compress=*/true);
  }
  case KernelId::RingCloseCache: {
    const auto &a = as<RingCloseCacheArgs>(args);
    KPOOL_TRY(checkRingClose(c, v, a, check));
    return checkCacheGroup(c, v, a, check, a.num_requests,
                           /*compress=*/false);
  }
  case KernelId::StepCache: {
    const auto &a = as<StepCacheArgs>(args);
    KPOOL_TRY(checkStep(c, v, a, check));
    return checkCacheGroup(c, v, a, check, a.num_requests,
                           /*compress=*/true);
  }
  }
  return v.error("kernel " + std::to_string(int(id)) +
                 " is not in the kernel ABI table");
}

/// The table's rule for every view of kernel `id`: its rank and the
/// extents its shape string fixes. The cache scales of a format without
/// them are not read, so any view passes.
Status checkTable(const KernelConfig &c, Validator &v, abi::KernelId id,
                  const void *args) {
  const abi::Kernel &kernel = abi::kernel(id);
  const char *base = static_cast<const char *>(args);
  for (int i = 0; i < kernel.numOperands; ++i) {
    const abi::Operand &o = kernel.operands[i];
    if (o.role != abi::Role::Output && o.role != abi::Role::Input)
      continue;
    if (o.kind == abi::Kind::CacheScale && c.cache.entry != CacheEntry::FP8)
      continue;
    KPOOL_TRY(v.tableShape(o.name,
                           *reinterpret_cast<const View *>(base + o.offset),
                           o.shape));
  }
  return Status();
}

//===----------------------------------------------------------------------===//
// Overlapping operands
//===----------------------------------------------------------------------===//

/// One operand as the overlap check sees it: the bytes of its elements,
/// with every stride made non-negative (`base` is its lowest byte).
/// Addresses and spans are 128-bit, a span saturated at 2^80 bytes (no view
/// in a 64-bit address space reaches that far), so nothing overflows.
struct Extent {
  const char *name = nullptr;
  bool written = false;
  int64_t rank = 0;
  int64_t sizes[KPOOL_MAX_RANK] = {};
  __int128 strides[KPOOL_MAX_RANK] = {}; ///< in bytes, >= 0
  __int128 spans[KPOOL_MAX_RANK] = {};   ///< (size - 1) * stride, saturated
  __int128 base = 0, last = 0;           ///< the lowest and highest byte
  int64_t elementSize = 1;

  /// `view` of `elementSize`-byte elements; false when it is empty.
  bool set(const View &view, int64_t size) {
    for (int64_t d = 0; d < view.rank; ++d)
      if (view.sizes[d] <= 0)
        return false;
    const __int128 limit = __int128(1) << 80;
    rank = view.rank;
    elementSize = size;
    base = __int128(reinterpret_cast<uintptr_t>(view.data));
    for (int64_t d = 0; d < rank; ++d) {
      sizes[d] = view.sizes[d];
      __int128 stride = __int128(view.strides[d]) * size;
      strides[d] = stride < 0 ? -stride : stride;
      spans[d] = strides[d] * (sizes[d] - 1);
      spans[d] = spans[d] > limit ? limit : spans[d];
      if (stride < 0)
        base -= spans[d];
    }
    last = base + slab(-1);
    return true;
  }

  /// The bytes of index 0 of dimension `p` lie in [base, base + slab(p)]
  /// (of every element for p = -1); those of index i, i * strides[p] on.
  __int128 slab(int64_t p) const {
    __int128 s = elementSize - 1;
    for (int64_t d = 0; d < rank; ++d)
      if (d != p)
        s += spans[d];
    return s;
  }
};

/// floor(a / b) and ceil(a / b) for b > 0.
__int128 floorDiv(__int128 a, __int128 b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__int128 ceilDiv(__int128 a, __int128 b) { return -floorDiv(-a, b); }

/// Whether `a` and `b` may share a byte. They do not when their byte
/// ranges are disjoint, or when a dimension of each with the same byte
/// stride S steps through slabs that interleave without touching (the keys
/// and the scales of the pages of one cache; two column blocks of one
/// matrix). Sound: views that share a byte are always reported.
bool mayOverlap(const Extent &a, const Extent &b) {
  if (a.last < b.base || b.last < a.base)
    return false;
  for (int64_t p = 0; p < a.rank; ++p)
    for (int64_t q = 0; q < b.rank; ++q) {
      __int128 period = a.strides[p];
      if (period <= 0 || b.strides[q] != period ||
          a.spans[p] >= (__int128(1) << 80) ||
          b.spans[q] >= (__int128(1) << 80))
        continue;
      // Slab i of a, [a.base + i S, + la], meets slab j of b iff k = i - j
      // has k S in [d - la, d + lb], with d = b.base - a.base.
      __int128 la = a.slab(p), lb = b.slab(q), d = b.base - a.base;
      __int128 low = ceilDiv(d - la, period), high = floorDiv(d + lb, period);
      if (low < 1 - b.sizes[q])
        low = 1 - b.sizes[q];
      if (high > a.sizes[p] - 1)
        high = a.sizes[p] - 1;
      if (low > high)
        return false;
    }
  return true;
}

/// "'name' (bytes 0x...-0x...)", or the status word's.
std::string describe(const Extent &e) {
  char range[64];
  std::snprintf(range, sizeof range, " (bytes 0x%llx..0x%llx)",
                static_cast<unsigned long long>(e.base),
                static_cast<unsigned long long>(e.last));
  return (std::strcmp(e.name, "status") ? "'" + std::string(e.name) + "'"
                                        : std::string("the status word")) +
         range;
}

/// Contract revision 3, "Overlapping operands": no operand the kernel
/// writes (the table's outputs, and the status word) overlaps another
/// operand of the call; inputs may overlap each other. Empty views overlap
/// nothing; the cache scales of a format without them are neither read nor
/// written, so they are skipped. The first pair in the table's order is
/// named.
Status checkOverlap(const KernelConfig &c, Validator &v, abi::KernelId id,
                    const void *args, const uint64_t *status) {
  const abi::Kernel &kernel = abi::kernel(id);
  const char *bytes = static_cast<const char *>(args);
  int64_t elementSize =
      c.poolOffsetsOnly ? 4 : int64_t(elementTypeSize(c.elementType));
  int64_t entrySize = c.cache.entry == CacheEntry::FP8 ? 1 : elementSize;
  constexpr int maxOperands = 32;
  Extent extents[maxOperands];
  int count = 0;
  for (int i = 0; i < kernel.numOperands && count < maxOperands; ++i) {
    const abi::Operand &o = kernel.operands[i];
    Extent &e = extents[count];
    e.name = o.name;
    bool present;
    if (o.role == abi::Role::Context && o.kind == abi::Kind::U64) {
      View word{};
      word.data = const_cast<uint64_t *>(status);
      word.rank = 1;
      word.sizes[0] = status ? 1 : 0;
      word.strides[0] = 1;
      e.written = true;
      present = e.set(word, 8);
    } else if (o.role == abi::Role::Output || o.role == abi::Role::Input) {
      if (o.kind == abi::Kind::CacheScale && c.cache.entry != CacheEntry::FP8)
        continue;
      e.written = o.role == abi::Role::Output;
      present = e.set(*reinterpret_cast<const View *>(bytes + o.offset),
                      abi::kindSize(o.kind, elementSize, entrySize));
    } else {
      continue;
    }
    count += present;
  }
  for (int i = 0; i < count; ++i)
    for (int j = i + 1; j < count; ++j) {
      const Extent &a = extents[i], &b = extents[j];
      if ((!a.written && !b.written) || !mayOverlap(a, b))
        continue;
      const Extent &w = a.written ? a : b, &r = a.written ? b : a;
      return v.error(describe(w) + ", which the op writes, overlaps " +
                     describe(r) +
                     "; an operand the op writes may not overlap another "
                     "operand of the call");
    }
  return Status();
}

} // namespace

Status kpool::detail::checkOperands(const KernelConfig &config, Validator &v,
                                    abi::KernelId id, const void *args,
                                    bool check, const uint64_t *status) {
  KPOOL_TRY(checkOp(config, v, id, args, check));
  KPOOL_TRY(checkTable(config, v, id, args));
  return checkOverlap(config, v, id, args, status);
}
