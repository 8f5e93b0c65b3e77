//===- kpool-cache-differential.cpp - pool-cache kernels vs the reference -===//
//
// Runs the JIT-compiled pool-cache kernels (compressCache, ringCloseCache,
// stepCache) on random ragged calls and compares them with the plain kernels
// of the same set and with the C++ reference of the pool cache
// (test/lib/Reference/PoolCache.h):
//  - valid calls (Validation::Check accepts them): ragged batches of 0..6
//    requests, token counts including 0 and 1, cache lengths past 2^16,
//    non-identity slots, padding rows past num_requests, block tables whose
//    pages are out of order (pages shared by requests on disjoint rows, table
//    entries no pool uses holding -1, garbage or live pages), and one byte
//    buffer per cache holding both strided views (codes, then scales, then a
//    page padding; a canary byte everywhere first). The cache kernels' dense
//    outputs must be bit-identical to the plain kernels' on the same inputs,
//    and every byte of the cache buffer must equal reference::ringCloseCache
//    and reference::compressCache applied to the kernel's own dense rows (the
//    contract: the formula on the backend's dense value), placed by
//    reference::storeCache, with the canary everywhere else;
//  - bad block tables (-1 entries, pages at or past N, tables narrower than
//    the pools need, garbage page ids): under Validation::Trust the kernels'
//    guards must write exactly what the reference's guarded storeCache writes
//    (nothing for those entries), byte for byte; under Validation::Check each
//    op whose pools meet a bad entry (or, also, two requests writing one
//    entry) is rejected with a message that starts with the op's name and
//    names the request, and writes nothing; the ops whose pools meet none run
//    and are checked like valid calls.
//
// Prints one example rejection message of each kind and
// `cache differential: N calls, M entries, K mismatches`; exits 1 on any
// mismatch, printing the first few (config, call, op, where, got, want).
// Usage: kpool-cache-differential [-v] [-n calls-per-config]
//
//===----------------------------------------------------------------------===//

#include "Reference/Float.h"
#include "Reference/PoolCache.h"
#include "Reference/Reference.h"
#include "Reference/VerifySchedule.h"
#include "Support/ArgsByName.h"
#include "Support/Differential.h"
#include "kpool/Runtime/Jit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace kpool;
namespace ref = kpool::reference;

namespace {

//===----------------------------------------------------------------------===//
// Random numbers (as kpool-differential: splitmix64, no std distributions).
//===----------------------------------------------------------------------===//

using Rng = ref::TestRng;

//===----------------------------------------------------------------------===//
// Configurations.
//===----------------------------------------------------------------------===//

/// A configuration with its pool-cache format.
struct Config : test::Config {
  CacheFormat format;

  bool fp8() const { return format.entry == CacheEntry::FP8; }
  /// Bytes of one entry's keys in the cache.
  int64_t entryBytes() const { return fp8() ? D : D * esize(); }
  std::string name() const {
    std::string s = test::Config::name() + " " +
                    cacheEntryName(format.entry) + " " +
                    cacheRotateName(format.rotate);
    if (fp8())
      s += std::string(" ") + cacheScaleName(format.scale);
    return s;
  }
};

// Dense operands: row-major views between canaries (test::Buffer).
using Buf = test::Buffer;

//===----------------------------------------------------------------------===//
// The cache: one byte buffer, pages of entry bytes then (FP8) scales then a
// padding, with cache_keys and cache_scales as two strided views of it.
//===----------------------------------------------------------------------===//

struct CacheLayout {
  int64_t N = 1, pageSize = 1, D = 0, esize = 1; // esize of cache_keys
  bool fp8 = true;
  int64_t base = 0;   // bytes before page 0
  int64_t stride = 0; // bytes per page (S)
  int64_t total = 0;  // bytes of the buffer
  uint8_t canary = 0;

  int64_t keyBytes() const { return pageSize * D * esize; }

  std::vector<uint8_t> fresh() const {
    return std::vector<uint8_t>(size_t(total), canary);
  }
  View keys(std::vector<uint8_t> &buf) const {
    View v{};
    v.data = buf.data() + base;
    v.rank = 3;
    v.sizes[0] = N;
    v.sizes[1] = pageSize;
    v.sizes[2] = D;
    v.strides[0] = stride / esize;
    v.strides[1] = D;
    v.strides[2] = 1;
    return v;
  }
  View scales(std::vector<uint8_t> &buf) const {
    View v{};
    v.rank = 2;
    if (!fp8)
      return v; // any rank-2 view: entries of the element type
    v.data = buf.data() + base + keyBytes();
    v.sizes[0] = N;
    v.sizes[1] = pageSize;
    v.strides[0] = stride / 4;
    v.strides[1] = 1;
    return v;
  }
  /// Where byte `o` of the buffer is, in words.
  std::string where(int64_t o) const {
    std::ostringstream os;
    if (o < base)
      return "byte " + std::to_string(o) + " before the pages";
    int64_t r = o - base, page = r / stride, in = r % stride;
    if (page >= N)
      return "byte " + std::to_string(r - N * stride) + " after the pages";
    os << "page " << page << ", ";
    if (in < keyBytes()) {
      int64_t rowBytes = D * esize;
      os << "row " << in / rowBytes << ", channel " << (in % rowBytes) / esize;
      if (esize > 1)
        os << " byte " << in % esize;
    } else if (fp8 && in < keyBytes() + 4 * pageSize) {
      os << "row " << (in - keyBytes()) / 4 << ", scale byte "
         << (in - keyBytes()) % 4;
    } else {
      os << "page padding byte " << in - keyBytes() - (fp8 ? 4 * pageSize : 0);
    }
    return os.str();
  }
};

//===----------------------------------------------------------------------===//
// Mismatches and statistics.
//===----------------------------------------------------------------------===//

struct Stats {
  int64_t calls = 0, validCalls = 0, trustCalls = 0, checkCalls = 0;
  int64_t entries = 0;    // entries the reference wrote and the test compared
  int64_t rejections = 0; // Check rejections verified
  int64_t cacheBytes = 0; // cache bytes compared
  int64_t mismatches = 0;
  // What the random calls covered (printed with -v).
  int64_t emptyBatches = 0, pastTwo16 = 0, pastTwo20 = 0, sharedPages = 0,
          wideRings = 0, paddingRows = 0;
  std::vector<std::string> first;
  // One example message per kind of bad entry.
  std::map<std::string, std::string> examples;
};
Stats stats;
bool gVerbose = false;

/// Counts `count` mismatches, described by `msg` (kept among the first few).
void mismatch(const std::string &msg, int64_t count = 1) {
  stats.mismatches += count;
  if (stats.first.size() < 12)
    stats.first.push_back(msg);
}

std::string hex(uint64_t x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)x);
  return buf;
}

//===----------------------------------------------------------------------===//
// One call: its metadata and data, and the pools it stores.
//===----------------------------------------------------------------------===//

struct Pool {
  int64_t b, p;
};

enum class Bad { None, Padding, PastN, Narrow, Garbage, Duplicate };

const char *badName(Bad b) {
  switch (b) {
  case Bad::None:
    return "valid";
  case Bad::Padding:
    return "-1 entries";
  case Bad::PastN:
    return "pages >= N";
  case Bad::Narrow:
    return "narrow table";
  case Bad::Garbage:
    return "garbage page ids";
  case Bad::Duplicate:
    return "two requests, one entry";
  }
  return "?";
}

/// What the host validation's message says for a kind of bad entry.
const char *badWords(Bad b) {
  switch (b) {
  case Bad::Padding:
    return "-1 (padding)";
  case Bad::PastN:
  case Bad::Garbage:
    return "is not below the cache's";
  case Bad::Narrow:
    return "past the table's";
  case Bad::Duplicate:
    return "also writes";
  case Bad::None:
    break;
  }
  return "";
}

struct Call {
  int64_t B = 0;
  std::vector<int64_t> tokens;
  std::vector<uint32_t> iro, lengths, slots;
  int32_t numRequests = 0;
  int64_t rows = 0;
  std::vector<uint32_t> k, gate, ape, tail;
  int64_t maxSlots = 0, window = 0;
  int64_t extraPooled = 0;
  // Block table: B x fullWidth entries, viewed as B x width.
  int64_t fullWidth = 0, width = 0;
  std::vector<uint32_t> table;
  CacheLayout cache;
  Bad bad = Bad::None;

  View tableView() const {
    View v{};
    v.data = const_cast<uint32_t *>(table.data());
    v.rank = 2;
    v.sizes[0] = B;
    v.sizes[1] = width;
    v.strides[0] = fullWidth;
    v.strides[1] = 1;
    return v;
  }
  uint32_t entry(int64_t b, int64_t index) const {
    return table[b * fullWidth + index];
  }
};

/// ring_close's pools: each live request's pending pool when the call
/// completes it.
std::vector<Pool> ringClosePools(const Config &cfg, const Call &c) {
  std::vector<Pool> out;
  for (int64_t b = 0; b < c.numRequests; ++b) {
    int64_t held = int64_t(c.lengths[b]) % cfg.K;
    if (held > 0 && c.tokens[b] >= cfg.K - held)
      out.push_back({b, int64_t(c.lengths[b]) / cfg.K});
  }
  return out;
}

/// compress's pools (every batch row; compress has no num_requests).
std::vector<Pool> compressPools(const Config &cfg, const Call &c) {
  std::vector<Pool> out;
  for (int64_t b = 0; b < c.B; ++b) {
    ref::PoolRange r = ref::poolRange(cfg.K, c.lengths[b], c.tokens[b]);
    for (int64_t j = 0; j < r.count; ++j)
      out.push_back({b, r.first + j});
  }
  return out;
}

std::vector<Pool> stepPools(const Config &cfg, const Call &c) {
  std::vector<Pool> out = ringClosePools(cfg, c);
  for (Pool p : compressPools(cfg, c))
    out.push_back(p);
  return out;
}

/// Whether the kernels' guards let pool `p` be stored (the placement guards
/// of docs/pool-cache.md, "What is written").
bool placed(const Call &c, Pool p) {
  int64_t index = p.p / c.cache.pageSize;
  return index < c.width && c.entry(p.b, index) < uint64_t(c.cache.N);
}

/// The kinds of bad entries the pools of one op meet (what host validation
/// must reject); empty when the op's pools are all fine.
std::set<Bad> problems(const Call &c, const std::vector<Pool> &pools) {
  std::set<Bad> out;
  std::map<std::pair<uint64_t, int64_t>, int64_t> owner;
  for (Pool p : pools) {
    int64_t index = p.p / c.cache.pageSize;
    if (index >= c.width) {
      out.insert(Bad::Narrow);
      continue;
    }
    uint32_t page = c.entry(p.b, index);
    if (page == UINT32_MAX) {
      out.insert(Bad::Padding);
      continue;
    }
    if (page >= c.cache.N) {
      out.insert(Bad::PastN); // (or garbage: the same message)
      continue;
    }
    auto [it, inserted] =
        owner.insert({{page, p.p % c.cache.pageSize}, p.b});
    if (!inserted && it->second != p.b)
      out.insert(Bad::Duplicate);
  }
  return out;
}

const int64_t kPageSizes[] = {1, 2, 3, 4, 5, 8, 16, 64};

/// Element bits of one key (value class per request) or gate.
uint32_t randomKey(Rng &rng, const Config &cfg, int cls) {
  switch (cls) {
  case 0:
    return ref::roundToBits(cfg.type, 0.0f);
  case 1: // small: the 1e-4 floor of the scale, e4m3fn subnormals
    return ref::roundToBits(cfg.type, float(rng.uniform(-2e-3, 2e-3)));
  case 2: // large
    return ref::roundToBits(cfg.type, float(rng.uniform(-200, 200)));
  default:
    return ref::roundToBits(cfg.type, float(rng.uniform(-4, 4)));
  }
}

/// A random valid call (no bad entries): the block table maps every
/// (request, page index) a pool of ring_close or compress uses to a page, in
/// random order, pages shared only on disjoint rows.
Call randomCall(const Config &cfg, Rng &rng, bool needPools) {
  for (int attempt = 0;; ++attempt) {
    Call c;
    int64_t K = cfg.K;
    c.B = needPools ? rng.range(1, 6) : rng.range(0, 6);
    bool large = rng.chance(0.3);
    c.cache.pageSize = kPageSizes[rng.range(0, 7)];
    bool huge = large && c.cache.pageSize >= 16 && rng.chance(0.2);
    c.iro.push_back(0);
    std::vector<int> cls;
    for (int64_t b = 0; b < c.B; ++b) {
      int64_t n;
      int64_t r = rng.range(0, 9);
      if (r == 0)
        n = 0;
      else if (r == 1)
        n = 1;
      else if (r == 2)
        n = rng.range(2, 8 * K + 3);
      else
        n = rng.range(2, 3 * K + 2);
      int64_t len;
      if (huge && rng.chance(0.5))
        len = rng.range((int64_t(1) << 20) - 2 * K, (int64_t(1) << 20) + 300);
      else if (large && rng.chance(0.7))
        len = rng.range(65536 - 3 * K, 65536 + 3000);
      else
        len = rng.range(0, 6 * K);
      c.tokens.push_back(n);
      c.rows += n;
      c.iro.push_back(uint32_t(c.rows));
      c.lengths.push_back(uint32_t(len));
      cls.push_back(rng.chance(0.1) ? int(rng.range(0, 2)) : 3);
    }
    int64_t extraRows = rng.chance(0.3) ? rng.range(1, 2) : 0;
    c.numRequests =
        rng.chance(0.7) ? int32_t(c.B) : int32_t(rng.range(0, c.B));
    c.maxSlots = c.B + rng.range(0, 3);
    std::vector<uint32_t> perm(static_cast<size_t>(c.maxSlots));
    for (size_t i = 0; i < perm.size(); ++i)
      perm[i] = uint32_t(i);
    rng.shuffle(perm);
    for (int64_t b = 0; b < c.B; ++b)
      c.slots.push_back(b < c.numRequests
                            ? perm[size_t(b)]
                            // padding rows: any slot, even a bad one
                            : uint32_t(rng.range(0, c.maxSlots + 2)));
    c.window = rng.chance(0.3) ? K + rng.range(1, 2) : K;

    // Data.
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.tokens[b] * cfg.D; ++i) {
        c.k.push_back(randomKey(rng, cfg, cls[b]));
        c.gate.push_back(ref::roundToBits(cfg.type,
                                          float(rng.uniform(-10, 10))));
      }
    for (int64_t i = 0; i < extraRows * cfg.D; ++i) {
      c.k.push_back(randomKey(rng, cfg, 3));
      c.gate.push_back(ref::roundToBits(cfg.type, float(rng.uniform(-10, 10))));
    }
    c.rows += extraRows;
    for (int64_t i = 0; i < K * cfg.D; ++i)
      c.ape.push_back(ref::f32Bits(float(rng.uniform(-3, 3))));
    for (int64_t i = 0; i < c.maxSlots * 2 * c.window * cfg.D; ++i) {
      // [slot, key/gate, member, channel]: keys in [-4, 4), gates [-10, 10).
      bool isGate = (i / (c.window * cfg.D)) % 2 == 1;
      c.tail.push_back(ref::roundToBits(
          cfg.type, float(isGate ? rng.uniform(-10, 10) : rng.uniform(-4, 4))));
    }
    c.extraPooled = rng.chance(0.4) ? rng.range(1, 3) : 0;

    // The block table.
    std::vector<Pool> pools = stepPools(cfg, c);
    if (needPools && pools.empty() && attempt < 100)
      continue;
    int64_t ps = c.cache.pageSize;
    std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> need;
    int64_t maxIndex = -1;
    for (Pool p : pools) {
      need[{p.b, p.p / ps}].insert(p.p % ps);
      maxIndex = std::max(maxIndex, p.p / ps);
    }
    c.fullWidth = c.width = maxIndex + 1 + rng.range(0, 2);
    int64_t N = std::max<int64_t>(1, int64_t(need.size()) + rng.range(0, 3));
    c.cache.N = N;
    c.table.resize(size_t(c.B * c.fullWidth));
    for (uint32_t &e : c.table) {
      int64_t r = rng.range(0, 9);
      e = r < 4   ? UINT32_MAX
          : r < 7 ? uint32_t(rng.next())
                  : uint32_t(rng.range(0, N - 1)); // live, but no pool uses it
    }
    std::vector<int64_t> fresh(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i)
      fresh[size_t(i)] = i;
    rng.shuffle(fresh);
    size_t nextFresh = 0;
    std::vector<std::set<int64_t>> used(static_cast<size_t>(N));
    std::vector<std::pair<int64_t, int64_t>> keys;
    for (auto &[key, rowsUsed] : need)
      keys.push_back(key);
    rng.shuffle(keys);
    for (auto key : keys) {
      const std::set<int64_t> &mine = need[key];
      std::vector<int64_t> shared;
      for (int64_t page = 0; page < N; ++page) {
        if (used[size_t(page)].empty())
          continue;
        bool disjoint = true;
        for (int64_t r : mine)
          disjoint &= !used[size_t(page)].count(r);
        if (disjoint)
          shared.push_back(page);
      }
      int64_t page;
      if (!shared.empty() && rng.chance(0.3)) {
        page = shared[size_t(rng.range(0, int64_t(shared.size()) - 1))];
        ++stats.sharedPages;
      } else
        page = fresh[nextFresh++];
      used[size_t(page)].insert(mine.begin(), mine.end());
      c.table[size_t(key.first * c.fullWidth + key.second)] = uint32_t(page);
    }

    // The cache buffer.
    CacheLayout &L = c.cache;
    L.D = cfg.D;
    L.fp8 = cfg.fp8();
    L.esize = cfg.fp8() ? 1 : cfg.esize();
    L.base = 4 * rng.range(0, 4);
    int64_t pad = rng.chance(0.3) ? 40 : 4 * rng.range(0, 3);
    L.stride = L.keyBytes() + (L.fp8 ? 4 * ps : 0) + pad;
    L.total = L.base + N * L.stride + 4 * rng.range(1, 8);
    L.canary = uint8_t(rng.next());
    stats.emptyBatches += c.B == 0;
    stats.wideRings += c.window > K;
    stats.paddingRows += c.numRequests < c.B;
    for (uint32_t len : c.lengths) {
      stats.pastTwo16 += len >= (1u << 16);
      stats.pastTwo20 += len >= (1u << 20);
    }
    return c;
  }
}

/// Whether two pools of one request are placed in one entry.
bool selfCollision(const Call &c, const std::vector<Pool> &pools) {
  std::map<std::tuple<int64_t, uint32_t, int64_t>, int64_t> seen;
  for (Pool p : pools) {
    if (!placed(c, p))
      continue;
    auto key = std::make_tuple(p.b, c.entry(p.b, p.p / c.cache.pageSize),
                               p.p % c.cache.pageSize);
    auto [it, inserted] = seen.insert({key, p.p});
    if (!inserted && it->second != p.p)
      return true;
  }
  return false;
}

/// Makes `c` bad (kind `bad`): some table entries pools use become -1, N or
/// more, or garbage; or the table view narrower than the pools need; or two
/// requests' pools name one entry. Returns false when this call has no way
/// to be bad of that kind.
bool corrupt(const Config &cfg, Rng &rng, Call &c, Bad bad) {
  std::vector<Pool> pools = stepPools(cfg, c);
  if (pools.empty())
    return false;
  int64_t ps = c.cache.pageSize, N = c.cache.N;
  c.bad = bad;
  if (bad == Bad::Narrow) {
    int64_t maxIndex = 0;
    for (Pool p : pools)
      maxIndex = std::max(maxIndex, p.p / ps);
    c.width = rng.range(0, maxIndex); // the columns past it hold live pages
    return true;
  }
  if (bad == Bad::Duplicate) {
    std::vector<std::pair<Pool, Pool>> pairs;
    for (Pool a : pools)
      for (Pool b : pools)
        if (a.b != b.b && a.p % ps == b.p % ps)
          pairs.push_back({a, b});
    rng.shuffle(pairs);
    for (auto [a, b] : pairs) {
      uint32_t &e = c.table[size_t(b.b * c.fullWidth + b.p / ps)];
      uint32_t old = e;
      e = c.entry(a.b, a.p / ps);
      // Two pools of one request in one entry pass validation and leave
      // either's bytes: keep only tables where that does not happen.
      if (!selfCollision(c, pools))
        return true;
      e = old;
    }
    return false;
  }
  std::set<std::pair<int64_t, int64_t>> usedEntries;
  for (Pool p : pools)
    usedEntries.insert({p.b, p.p / ps});
  std::vector<std::pair<int64_t, int64_t>> chosen;
  for (auto e : usedEntries)
    if (rng.chance(0.4))
      chosen.push_back(e);
  if (chosen.empty()) {
    auto it = usedEntries.begin();
    std::advance(it, rng.range(0, int64_t(usedEntries.size()) - 1));
    chosen.push_back(*it);
  }
  for (auto [b, index] : chosen) {
    uint32_t &e = c.table[size_t(b * c.fullWidth + index)];
    if (bad == Bad::Padding)
      e = UINT32_MAX;
    else if (bad == Bad::PastN)
      e = uint32_t(N + rng.range(0, 2));
    else // garbage: any 32-bit page id at or past N but -1
      e = uint32_t(N + int64_t(rng.next() % (uint64_t(UINT32_MAX) - N)));
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Running a call.
//===----------------------------------------------------------------------===//

std::shared_ptr<KernelSet> kernels(const Config &cfg) {
  KernelConfig kc;
  kc.elementType = cfg.type;
  kc.headDim = cfg.D;
  kc.kpool = cfg.K;
  kc.cache = cfg.format;
  Status s;
  kpool::registerJitCompiler();
  auto set = KernelSet::get(kc, s);
  if (!set)
    mismatch("KernelSet::get(" + cfg.name() + ") failed: " + s.message());
  return set;
}

/// The dense outputs of ring_close, compress and step.
struct Dense {
  Buf rcPooled, closedPool, pro, pooled;              // ring_close, compress
  Buf sClosed, sClosedPool, sPro, sPooled, sTail;     // step
};

struct Inputs {
  Buf k, gate, ape, iro, lengths, slots, tail;
};

Inputs makeInputs(const Config &cfg, const Call &c) {
  Inputs in;
  in.k = Buf::make(cfg.esize(), {c.rows, cfg.D});
  in.k.fill(c.k);
  in.gate = Buf::make(cfg.esize(), {c.rows, cfg.D});
  in.gate.fill(c.gate);
  in.ape = Buf::make(4, {cfg.K, cfg.D});
  in.ape.fill(c.ape);
  in.iro = Buf::make(4, {c.B + 1});
  in.iro.fill(c.iro);
  in.lengths = Buf::make(4, {c.B});
  in.lengths.fill(c.lengths);
  in.slots = Buf::make(4, {c.B});
  in.slots.fill(c.slots);
  in.tail = Buf::make(cfg.esize(), {c.maxSlots, 2, c.window, cfg.D});
  in.tail.fill(c.tail);
  return in;
}

Dense freshDense(const Config &cfg, const Call &c, const Inputs &in,
                 int64_t pooledRows) {
  Dense d;
  int64_t es = cfg.esize();
  d.rcPooled = Buf::make(es, {c.B, cfg.D});
  d.closedPool = Buf::make(4, {c.B});
  d.pro = Buf::make(4, {c.B + 1});
  d.pooled = Buf::make(es, {pooledRows, cfg.D});
  d.sClosed = Buf::make(es, {c.B, cfg.D});
  d.sClosedPool = Buf::make(4, {c.B});
  d.sPro = Buf::make(4, {c.B + 1});
  d.sPooled = Buf::make(es, {pooledRows, cfg.D});
  d.sTail = in.tail;
  return d;
}

struct Where {
  const Config &cfg;
  int64_t callNo;
  const Call &call;
  const char *mode; // "Check" or "Trust"
  std::string prefix() const {
    return "[" + cfg.name() + "] call " + std::to_string(callNo) + " (" +
           badName(call.bad) + ", " + mode + ")";
  }
};

/// Bytes of two dense buffers (canaries included).
void compareDense(const Where &w, const std::string &what, const Buf &got,
                  const Buf &want) {
  if (got.bytes == want.bytes)
    return;
  for (size_t i = 0; i < got.bytes.size(); ++i)
    if (got.bytes[i] != want.bytes[i]) {
      int64_t o = int64_t(i) - got.offset * got.esize;
      std::string at =
          o < 0 || o >= got.numElements() * got.esize
              ? "canary byte " + std::to_string(o)
              : "element " + std::to_string(o / got.esize) + " byte " +
                    std::to_string(o % got.esize);
      mismatch(w.prefix() + ": " + what + ": " + at + ": got " +
               hex(got.bytes[i]) + ", want " + hex(want.bytes[i]));
      return;
    }
}

/// Every byte of a cache buffer against the reference's.
void compareCache(const Where &w, const std::string &op,
                  const std::vector<uint8_t> &got,
                  const std::vector<uint8_t> &want,
                  const std::vector<Pool> &pools) {
  stats.cacheBytes += int64_t(got.size());
  if (got == want)
    return;
  const CacheLayout &L = w.call.cache;
  // Which pool the test meant for an entry, to name it.
  std::map<std::pair<int64_t, int64_t>, Pool> byEntry;
  for (Pool p : pools)
    if (placed(w.call, p))
      byEntry.insert({{w.call.entry(p.b, p.p / L.pageSize), p.p % L.pageSize},
                      p});
  int reported = 0;
  int64_t count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i])
      continue;
    ++count;
    if (reported++ >= 3) {
      ++stats.mismatches;
      continue;
    }
    std::string who;
    int64_t r = int64_t(i) - L.base;
    if (r >= 0 && r / L.stride < L.N) {
      int64_t page = r / L.stride, in = r % L.stride, row = -1;
      if (in < L.keyBytes())
        row = in / (L.D * L.esize);
      else if (L.fp8 && in < L.keyBytes() + 4 * L.pageSize)
        row = (in - L.keyBytes()) / 4;
      auto it = byEntry.find({page, row});
      who = it == byEntry.end()
                ? " (no pool of this call goes there)"
                : " (request " + std::to_string(it->second.b) + ", pool " +
                      std::to_string(it->second.p) + ")";
    }
    mismatch(w.prefix() + ": " + op + ": " + L.where(int64_t(i)) + who +
             ": got " + hex(got[i]) + ", want " + hex(want[i]));
  }
  if (count > 3)
    mismatch(w.prefix() + ": " + op + ": " + std::to_string(count - 3) +
                 " more cache bytes differ",
             0);
}

/// The expected closed_pool of ring_close (and step) for a call whose
/// metadata is valid: the pool id of each closing request, else -1.
std::vector<uint32_t> expectedClosed(const Config &cfg, const Call &c) {
  std::vector<uint32_t> out(size_t(c.B), UINT32_MAX);
  for (Pool p : ringClosePools(cfg, c))
    out[size_t(p.b)] = uint32_t(p.p);
  return out;
}

void expectOk(const Where &w, const std::string &what, const Status &s) {
  if (!s.ok())
    mismatch(w.prefix() + ": " + what + " returned an error: " + s.message());
}

/// Kernel A's arguments: the call's inputs (and block table), then its own
/// outputs, by their table names.
template <typename A>
A callArgs(const Inputs &in, const Call &c, const View &table,
           std::initializer_list<test::Named> outputs) {
  return test::with(test::argsByName<A>(
                        {{"tail", in.tail.view()},
                         {"k", in.k.view()},
                         {"gate", in.gate.view()},
                         {"ape", in.ape.view()},
                         {"input_row_offsets", in.iro.view()},
                         {"cache_lengths", in.lengths.view()},
                         {"slot_idx", in.slots.view()},
                         {"block_table", table}},
                        c.numRequests),
                    outputs);
}

/// Runs the call's three cache ops (and the plain ops) under `validation`,
/// and checks everything. Under Check an op is expected to be rejected
/// exactly when problems() finds a bad entry among its pools.
void runCall(const Config &cfg, const KernelSet &ks, const Call &c,
             int64_t callNo, Validation validation) {
  const char *mode = validation == Validation::Check ? "Check" : "Trust";
  Where w{cfg, callNo, c, mode};
  ++stats.calls;
  ref::Geometry g = cfg.geometry();
  const CacheFormat &f = cfg.format;
  Inputs in = makeInputs(cfg, c);
  View table = c.tableView();

  // The plain kernels (always with validation: the metadata is valid).
  Dense plain = freshDense(cfg, c, in, 0);
  expectOk(w, "ring_close",
           ks.ringClose(callArgs<RingCloseArgs>(
                            in, c, table,
                            {{"pooled", plain.rcPooled.view()},
                             {"closed_pool", plain.closedPool.view()}}),
                        Validation::Check));
  expectOk(w, "pool_offsets",
           ks.poolOffsets(callArgs<PoolOffsetsArgs>(
                              in, c, table,
                              {{"pool_row_offsets", plain.pro.view()}}),
                          Validation::Check));
  // pool_row_offsets against the reference; closed_pool against the pools
  // the test expects ring_close to close (they decide which entries exist).
  {
    Buf pro = Buf::make(4, {c.B + 1});
    ref::poolOffsets(g, pro.view(), in.iro.view(), in.lengths.view());
    compareDense(w, "pool_offsets vs reference", plain.pro, pro);
    Buf closed = Buf::make(4, {c.B});
    closed.fill(expectedClosed(cfg, c));
    compareDense(w, "ring_close closed_pool vs the expected pools",
                 plain.closedPool, closed);
  }
  int64_t pooledRows = int64_t(plain.pro.get(c.B)) + c.extraPooled;
  {
    Dense sized = freshDense(cfg, c, in, pooledRows);
    plain.pooled = sized.pooled;
    plain.sPooled = sized.sPooled;
  }
  expectOk(w, "compress",
           ks.compress(callArgs<CompressArgs>(
                           in, c, table,
                           {{"pooled", plain.pooled.view()},
                            {"pool_row_offsets", plain.pro.view()}}),
                       Validation::Check));
  expectOk(w, "step",
           ks.step(callArgs<StepArgs>(
                       in, c, table,
                       {{"closed", plain.sClosed.view()},
                        {"closed_pool", plain.sClosedPool.view()},
                        {"pool_row_offsets", plain.sPro.view()},
                        {"pooled", plain.sPooled.view()},
                        {"tail", plain.sTail.view()}}),
                   Validation::Check));

  // The cache kernels: ring_close then compress into one cache buffer (as
  // an engine calls them), the fused step into another.
  const CacheLayout &L = c.cache;
  std::vector<uint8_t> bufA = L.fresh(), bufB = L.fresh();
  Dense cached = freshDense(cfg, c, in, pooledRows);
  const Dense untouched = cached;
  Status sRc = ks.ringCloseCache(
      callArgs<RingCloseCacheArgs>(
          in, c, table,
          {{"pooled", cached.rcPooled.view()},
           {"closed_pool", cached.closedPool.view()},
           {"cache_keys", L.keys(bufA)},
           {"cache_scales", L.scales(bufA)}}),
      validation);
  Status sCp = ks.compressCache(
      callArgs<CompressCacheArgs>(in, c, table,
                                  {{"pooled", cached.pooled.view()},
                                   {"pool_row_offsets", plain.pro.view()},
                                   {"cache_keys", L.keys(bufA)},
                                   {"cache_scales", L.scales(bufA)}}),
      validation);
  Status sSt = ks.stepCache(
      callArgs<StepCacheArgs>(in, c, table,
                              {{"closed", cached.sClosed.view()},
                               {"closed_pool", cached.sClosedPool.view()},
                               {"pool_row_offsets", cached.sPro.view()},
                               {"pooled", cached.sPooled.view()},
                               {"tail", cached.sTail.view()},
                               {"cache_keys", L.keys(bufB)},
                               {"cache_scales", L.scales(bufB)}}),
      validation);

  struct OpRun {
    const char *op; // the validator's name of the op
    const char *kernel;
    const Status &status;
    std::vector<Pool> pools;
    bool ran = false;
  };
  OpRun runs[3] = {{"ring_close", "ringCloseCache", sRc, ringClosePools(cfg, c)},
                   {"compress", "compressCache", sCp, compressPools(cfg, c)},
                   {"step", "stepCache", sSt, stepPools(cfg, c)}};
  for (OpRun &r : runs) {
    std::set<Bad> bad;
    if (validation == Validation::Check)
      bad = problems(c, r.pools);
    if (bad.empty()) {
      expectOk(w, r.kernel, r.status);
      r.ran = r.status.ok();
      continue;
    }
    // Rejected, naming the op, the request and the fault.
    if (r.status.ok()) {
      mismatch(w.prefix() + ": " + r.kernel + " accepted a bad block table");
      r.ran = true;
      continue;
    }
    ++stats.rejections;
    const std::string &msg = r.status.message();
    std::string head = std::string(r.op) + ": ";
    if (msg.compare(0, head.size(), head) != 0 ||
        msg.find("request ") == std::string::npos)
      mismatch(w.prefix() + ": " + r.kernel + ": message '" + msg +
               "' does not start with '" + head + "' and name the request");
    bool named = false;
    for (Bad b : bad) {
      if (msg.find(badWords(b)) == std::string::npos)
        continue;
      named = true;
      // One example per kind of table the call was given.
      if (b == c.bad || (c.bad == Bad::Garbage && b == Bad::PastN))
        stats.examples.insert({badName(c.bad), msg});
    }
    if (!named)
      mismatch(w.prefix() + ": " + r.kernel + ": message '" + msg +
               "' names none of the faults of the table");
  }

  // Dense outputs: the plain kernels' bits where the op ran, untouched
  // where it was rejected.
  auto dense = [&](const OpRun &r, const std::string &what, const Buf &got,
                   const Buf &ranWant, const Buf &rejectedWant) {
    compareDense(w, std::string(r.kernel) + " " + what, got,
                 r.ran ? ranWant : rejectedWant);
  };
  dense(runs[0], "pooled", cached.rcPooled, plain.rcPooled,
        untouched.rcPooled);
  dense(runs[0], "closed_pool", cached.closedPool, plain.closedPool,
        untouched.closedPool);
  dense(runs[1], "pooled", cached.pooled, plain.pooled, untouched.pooled);
  dense(runs[2], "closed", cached.sClosed, plain.sClosed, untouched.sClosed);
  dense(runs[2], "closed_pool", cached.sClosedPool, plain.sClosedPool,
        untouched.sClosedPool);
  dense(runs[2], "pool_row_offsets", cached.sPro, plain.sPro,
        untouched.sPro);
  dense(runs[2], "pooled", cached.sPooled, plain.sPooled, untouched.sPooled);
  dense(runs[2], "tail", cached.sTail, plain.sTail, untouched.sTail);

  // The reference's cache: the entry formula on the kernel's own dense rows,
  // placed (with its guards) by storeCache.
  std::vector<uint8_t> refA = L.fresh(), refB = L.fresh();
  if (runs[0].ran)
    ref::ringCloseCache(g, f, L.keys(refA), L.scales(refA), table,
                        cached.rcPooled.view(), cached.closedPool.view());
  if (runs[1].ran)
    ref::compressCache(g, f, L.keys(refA), L.scales(refA), table,
                       cached.pooled.view(), in.iro.view(), plain.pro.view(),
                       in.lengths.view(), c.rows);
  if (runs[2].ran) {
    ref::ringCloseCache(g, f, L.keys(refB), L.scales(refB), table,
                        cached.sClosed.view(), cached.sClosedPool.view());
    ref::compressCache(g, f, L.keys(refB), L.scales(refB), table,
                       cached.sPooled.view(), in.iro.view(),
                       cached.sPro.view(), in.lengths.view(), c.rows);
  }
  std::vector<Pool> poolsA;
  for (int i = 0; i < 2; ++i)
    if (runs[i].ran)
      poolsA.insert(poolsA.end(), runs[i].pools.begin(), runs[i].pools.end());
  compareCache(w, "ringCloseCache + compressCache", bufA, refA, poolsA);
  compareCache(w, "stepCache", bufB, refB,
               runs[2].ran ? runs[2].pools : std::vector<Pool>());
  for (const OpRun &r : runs)
    if (r.ran)
      for (Pool p : r.pools)
        stats.entries += placed(c, p);
}

} // namespace

int main(int argc, char **argv) {
  int64_t callsPerConfig = 300;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-v")
      gVerbose = true;
    else if (a == "-n" && i + 1 < argc)
      callsPerConfig = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [-v] [-n calls-per-config]\n", argv[0]);
      return 2;
    }
  }

  using E = CacheEntry;
  using R = CacheRotate;
  using S = CacheScale;
  const std::vector<Config> configs = {
      {{KPOOL_BF16, 128, 4}, {E::FP8, R::Hadamard, S::Absmax}},
      {{KPOOL_BF16, 128, 4}, {E::FP8, R::Hadamard, S::Pow2}},
      {{KPOOL_F16, 64, 3}, {E::FP8, R::None, S::Absmax}},
      {{KPOOL_F32, 32, 2}, {E::FP8, R::Hadamard, S::Pow2}},
      {{KPOOL_BF16, 16, 4}, {E::Element, R::Hadamard, S::Absmax}},
      {{KPOOL_F32, 8, 1}, {E::Element, R::None, S::Absmax}},
  };
  const Bad kinds[] = {Bad::Padding, Bad::PastN, Bad::Narrow, Bad::Garbage,
                       Bad::Duplicate};

  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const Config &cfg = configs[ci];
    auto t0 = std::chrono::steady_clock::now();
    auto ks = kernels(cfg);
    if (!ks)
      continue;
    auto t1 = std::chrono::steady_clock::now();
    Rng rng(1000 + ci);
    int64_t before = stats.mismatches;
    for (int64_t n = 0; n < callsPerConfig; ++n) {
      // Two thirds valid calls, one third bad tables.
      if (n % 3 != 2) {
        Call c = randomCall(cfg, rng, false);
        ++stats.validCalls;
        runCall(cfg, *ks, c, n, Validation::Check);
        continue;
      }
      Bad kind = kinds[(n / 3) % 5];
      Call c = randomCall(cfg, rng, true);
      if (!corrupt(cfg, rng, c, kind)) {
        // No two requests share a row here: another kind instead.
        kind = Bad::Padding;
        if (!corrupt(cfg, rng, c, kind))
          continue;
      }
      ++stats.checkCalls;
      runCall(cfg, *ks, c, n, Validation::Check);
      if (kind != Bad::Duplicate) { // two writers of one entry race
        ++stats.trustCalls;
        runCall(cfg, *ks, c, n, Validation::Trust);
      }
    }
    auto t2 = std::chrono::steady_clock::now();
    std::printf("%s: %s\n", cfg.name().c_str(),
                stats.mismatches == before ? "ok" : "FAIL");
    if (gVerbose)
      std::printf("    compile %.0f ms, calls %.0f ms\n",
                  std::chrono::duration<double, std::milli>(t1 - t0).count(),
                  std::chrono::duration<double, std::milli>(t2 - t1).count());
    std::fflush(stdout);
  }

  for (Bad b : kinds) {
    auto it = stats.examples.find(badName(b));
    if (it == stats.examples.end()) {
      mismatch(std::string("no Check rejection of kind '") + badName(b) +
               "' was seen");
      continue;
    }
    std::printf("rejected (%s): %s\n", badName(b), it->second.c_str());
  }
  std::printf("valid calls %lld, bad tables %lld under Check (%lld "
              "rejections) and %lld under Trust, %lld cache bytes compared\n",
              (long long)stats.validCalls, (long long)stats.checkCalls,
              (long long)stats.rejections, (long long)stats.trustCalls,
              (long long)stats.cacheBytes);
  if (gVerbose)
    std::printf("coverage: %lld empty batches, %lld calls with padding rows, "
                "%lld with a ring window > K; %lld cache lengths >= 2^16 "
                "(%lld >= 2^20); %lld pages shared on disjoint rows\n",
                (long long)stats.emptyBatches, (long long)stats.paddingRows,
                (long long)stats.wideRings, (long long)stats.pastTwo16,
                (long long)stats.pastTwo20, (long long)stats.sharedPages);
  for (const std::string &m : stats.first)
    std::printf("MISMATCH: %s\n", m.c_str());
  std::printf("cache differential: %lld calls, %lld entries, %lld "
              "mismatches\n",
              (long long)stats.calls, (long long)stats.entries,
              (long long)stats.mismatches);
  return stats.mismatches ? 1 : 0;
}
