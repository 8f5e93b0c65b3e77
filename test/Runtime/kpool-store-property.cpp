//===- kpool-store-property.cpp - the stores under random call sequences -===//
//
// Drives kpool::PoolStore and kpool::PagedPoolStore (JIT-compiled CPU
// kernels) with random interleavings of
//  - steps: random ragged batches of chunked prefill, decode, speculative
//    verify steps (1 + d tokens, d up to past what the window rolls back)
//    and requests of no tokens;
//  - accepts, chained too (a second accept on the same step), valid and
//    invalid (out of range, or a ring too small for the new length);
//  - resets (PoolStore) and releases (PagedPoolStore), also when a slot's
//    length passes a cap;
//  - misuse: slots past max_slots, a slot twice in one call, rows past `k`,
//    reversed rows, offsets of the wrong length, a `k` of the wrong width,
//    lengths past 2^32 - 1 (stride-0 views of 2^32 - 1 rows), page
//    exhaustion, accept/reset/entry on bad slots, calls after close();
// single-threaded, and with several threads each owning its slots of one
// store, then racing on one shared slot.
//
// Every call's outcome is predicted by a model that knows nothing of the
// store's code: per slot, its accepted token stream, the positions of its
// last step, which token every ring row holds (the rows seed_tail writes,
// simulated; so an accept is valid iff the simulated ring holds the
// pending pool's members: the contract's condition is checked against that
// too), and for the paged store (single-threaded) its pages and the free
// list. Checks:
//  - a successful step returns exactly its own pools ([floor(c/K),
//    floor((c+n)/K)) per request, the ring's first) and every new pool is
//    the backend's compress of its members, every new entry the reference's
//    pool-cache formula (test/lib/Reference/PoolCache) on that dense pool;
//  - the store's ring rows equal the simulated ring, byte for byte;
//  - every slot's pools and entries equal the backend's one-shot compress
//    of the accepted stream (and the formula on it) at every reset, every
//    256 operations for a random slot and at the end; the contract: entries
//    are the formula on the backend's dense pool, and the dense pool is
//    bit-identical to one-shot compression on one backend;
//  - every call that must fail fails with its message (naming the request,
//    the slot and the field) and changes nothing: the store's full state
//    (bookkeeping, pools, entries, pages, free list, ring, cache buffer;
//    with threads, the calling thread's slots) before and after;
//  - cache bytes no entry owns (page padding, pages never handed out) keep
//    their canary.
//
// Usage: kpool-store-property [-steps N] [-threads T] [-seed S] [-all]
//   -steps   steps per store and mode (default 2000, or
//            $KPOOL_STORE_PROPERTY_STEPS)
//   -threads threads of the threaded mode (default 4; 0 skips it)
//   -all     four kernel configurations instead of two
// Prints one line per configuration, store and mode, then the totals and
// `N failed`; exits 1 on a failure (the first few are printed).
//
//===----------------------------------------------------------------------===//

#include "StoreTestSupport.h"

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>

using namespace kpool;
using namespace kpool::storetest;

namespace {

//===----------------------------------------------------------------------===//
// Failures and counts
//===----------------------------------------------------------------------===//

std::mutex failureMutex;
int64_t failures = 0;

void fail(const std::string &where, const std::string &what) {
  std::lock_guard<std::mutex> lock(failureMutex);
  if (++failures <= 10)
    std::printf("FAIL: %s: %s\n", where.c_str(), what.c_str());
}

struct Counts {
  int64_t steps = 0, stepsRefused = 0, tokens = 0, accepts = 0,
          acceptsRejected = 0, chained = 0, resets = 0, misuse = 0,
          fullChecks = 0, pools = 0, raceSteps = 0, raceAccepts = 0;
  void add(const Counts &o) {
    steps += o.steps;
    stepsRefused += o.stepsRefused;
    tokens += o.tokens;
    accepts += o.accepts;
    acceptsRejected += o.acceptsRejected;
    chained += o.chained;
    resets += o.resets;
    misuse += o.misuse;
    fullChecks += o.fullChecks;
    pools += o.pools;
    raceSteps += o.raceSteps;
    raceAccepts += o.raceAccepts;
  }
  std::string text() const {
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "%" PRId64 " steps (%" PRId64 " refused for pages), %" PRId64
        " tokens, %" PRId64 " accepts (%" PRId64 " chained, %" PRId64
        " rejected), %" PRId64 " resets, %" PRId64 " misuse calls, %" PRId64
        " full checks, %" PRId64 " pools checked, %" PRId64
        " race steps, %" PRId64 " race accepts",
        steps, stepsRefused, tokens, accepts, chained, acceptsRejected, resets,
        misuse, fullChecks, pools, raceSteps, raceAccepts);
    return buf;
  }
};

//===----------------------------------------------------------------------===//
// The environment of a round: kernels, geometry, the stores' options
//===----------------------------------------------------------------------===//

struct Env {
  std::shared_ptr<KernelSet> ks;
  KernelConfig c;
  int64_t K = 0, D = 0, R = 0, rowBytes = 0, maxSlots = 0;
  std::vector<float> ape;
  PagedPoolStoreOptions options;
  std::vector<uint8_t> buffer; ///< the caller's cache buffer, if any
  int64_t capLength = 0;       ///< a slot past this is reset
  bool fp8 = false;
  int64_t entryBytes = 0, keysBytes = 0, pageBytes = 0;
};

constexpr uint8_t kCanary = 0xA5;

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

struct SlotModel {
  /// The accepted tokens [0, L) and their ids.
  Tokens stream;
  std::vector<uint64_t> ids;
  int64_t L = 0, begin = 0, end = 0;
  /// The ring as seed_tail writes it: per row the token id (0: never
  /// written) and its key and gate bytes.
  std::vector<uint64_t> ringId;
  std::vector<uint8_t> ringK, ringG;
  /// The backend's dense pools [0, L / K): each the compress of its
  /// members when it was produced.
  std::vector<uint8_t> dense;
  std::vector<uint32_t> pages;

  void init(const Env &e) {
    stream = Tokens();
    stream.rowBytes = e.rowBytes;
    ids.clear();
    L = begin = end = 0;
    ringId.assign(size_t(e.R), 0);
    ringK.assign(size_t(e.R * e.rowBytes), 0);
    ringG.assign(size_t(e.R * e.rowBytes), 0);
    dense.clear();
    pages.clear();
  }
};

/// What a store of `Store` type needs beyond the shared driver.
template <typename Store> constexpr bool isPaged() {
  return std::is_same_v<Store, PagedPoolStore>;
}

Status clearSlot(PoolStore &s, uint32_t slot) { return s.reset(slot); }
Status clearSlot(PagedPoolStore &s, uint32_t slot) { return s.release(slot); }
const char *clearName(const PoolStore &) { return "reset"; }
const char *clearName(const PagedPoolStore &) { return "release"; }

//===----------------------------------------------------------------------===//
// The driver: one thread's operations on its slots of one store
//===----------------------------------------------------------------------===//

template <typename Store> class Driver {
public:
  Driver(Store &store, Env &env, std::vector<uint32_t> mine, uint64_t seed,
         bool threaded, std::vector<uint32_t> *freeStack, std::string where)
      : store(store), e(env), mine(std::move(mine)), rng(seed),
        threaded(threaded), freeStack(freeStack), where(std::move(where)),
        idBase(seed << 32) {
    slots.resize(size_t(e.maxSlots));
    for (uint32_t s : this->mine)
      slots[s].init(e);
  }

  /// Runs `steps` steps with accepts, resets and misuse in between.
  void run(int64_t steps) {
    int64_t ops = 0;
    while (counts.steps < steps && ok()) {
      int64_t r = rng.range(0, 99);
      if (r < 70)
        step();
      else if (r < 82) {
        uint32_t slot = pick();
        accept(slot, rng.range(-1, held(slot) + 2), false);
      } else if (r < 86)
        reset(pick());
      else
        misuse();
      if (++ops % 256 == 0)
        fullCheck(pick());
    }
    for (uint32_t s : mine)
      fullCheck(s);
  }

  Counts counts;
  std::vector<SlotModel> slots;
  /// Pages the model saw handed out (single-threaded paged store).
  std::set<uint32_t> everTaken;

private:
  bool ok() const { return failures == 0; }
  uint32_t pick() {
    return mine[size_t(rng.range(0, int64_t(mine.size()) - 1))];
  }
  int64_t held(uint32_t s) const { return slots[s].L - slots[s].begin; }
  void failure(const std::string &what) { fail(where, what); }

  /// Whether `s` failed with a message containing `part` (else a failure).
  bool expectError(const Status &s, const std::string &part,
                   const std::string &what) {
    if (s.ok()) {
      failure(what + ": succeeded, expected an error containing \"" + part +
              "\"");
      return false;
    }
    if (s.message().find(part) == std::string::npos) {
      failure(what + ": the message \"" + s.message() +
              "\" does not contain \"" + part + "\"");
      return false;
    }
    return true;
  }

  /// The state a failed call must leave: the whole store single-threaded,
  /// this thread's slots with threads.
  Snapshot state() {
    if constexpr (isPaged<Store>())
      return snapshot(store, mine, /*whole=*/!threaded);
    else
      return snapshot(store, mine);
  }
  void unchanged(const Snapshot &before, const std::string &what) {
    Snapshot after = state();
    if (!(after == before))
      failure(what + ": a failed call changed " + after.diff(before));
  }

  //===--------------------------------------------------------------------===//
  // Steps
  //===--------------------------------------------------------------------===//

  struct Request {
    uint32_t slot;
    int64_t n;
    Tokens rows;
    std::vector<uint64_t> ids;
    bool verify;
  };

  Tokens freshRows(int64_t n) {
    Tokens t;
    t.rowBytes = e.rowBytes;
    t.k = randomRows(rng, e.c.elementType, e.D, n, 4);
    t.g = randomRows(rng, e.c.elementType, e.D, n, 10);
    return t;
  }

  std::vector<Request> randomRequests() {
    std::vector<uint32_t> order = mine;
    rng.shuffle(order);
    int64_t batch = rng.range(1, std::min<int64_t>(4, int64_t(order.size())));
    std::vector<Request> out;
    for (int64_t b = 0; b < batch; ++b) {
      Request r;
      r.slot = order[size_t(b)];
      r.verify = false;
      int64_t kind = rng.range(0, 99);
      if (kind < 35) {
        r.n = 1; // decode
      } else if (kind < 60) {
        r.n = rng.range(2, 3 * e.K + 3); // a prefill chunk
      } else if (kind < 90) {
        r.n = 1 + rng.range(1, e.R - e.K + 2); // a verify step
        r.verify = true;
      } else {
        r.n = 0;
      }
      r.rows = freshRows(r.n);
      for (int64_t i = 0; i < r.n; ++i)
        r.ids.push_back(idBase + ++nextId);
      out.push_back(std::move(r));
    }
    return out;
  }

  /// The paged store's page accounting, as the model predicts it
  /// (single-threaded): the first request whose new pages are not free,
  /// with the message's numbers, or -1.
  int64_t pagesShort(const std::vector<Request> &reqs, std::string &message) {
    int64_t wanted = 0, free = int64_t(freeStack->size());
    const int64_t P = e.options.pageSize;
    for (size_t b = 0; b < reqs.size(); ++b) {
      const SlotModel &m = slots[reqs[b].slot];
      int64_t pools = (m.L + reqs[b].n) / e.K, need = (pools + P - 1) / P;
      int64_t have = int64_t(m.pages.size());
      int64_t extra = std::max<int64_t>(0, need - have);
      if (wanted + extra > free) {
        message = "step: request " + std::to_string(b) + " (slot " +
                  std::to_string(reqs[b].slot) + "): its pools 0.." +
                  std::to_string(pools - 1) + " need " + std::to_string(need) +
                  " page(s) of " + std::to_string(P) + " entries, it has " +
                  std::to_string(have) + ", so " + std::to_string(extra) +
                  " new pages, but " + std::to_string(free - wanted) +
                  " of the " + std::to_string(e.options.numPages) +
                  " pages are free";
        return int64_t(b);
      }
      wanted += extra;
    }
    return -1;
  }

  void step() {
    std::vector<Request> reqs = randomRequests();
    Call call(e.rowBytes);
    for (Request &r : reqs)
      call.add(r.slot, r.rows, 0, r.n);
    std::string shortMessage;
    bool refuse = false;
    if constexpr (isPaged<Store>())
      refuse = !threaded && pagesShort(reqs, shortMessage) >= 0;
    Snapshot before;
    if (refuse)
      before = state();
    std::vector<ProducedPool> produced;
    Status st = call.run(store, e.D, &produced);
    ++counts.steps;
    if (refuse) {
      ++counts.stepsRefused;
      if (expectError(st, shortMessage, "a step short of pages"))
        unchanged(before, "a step short of pages");
      if (!produced.empty())
        failure("a refused step reported pools");
      return;
    }
    if (!st.ok()) {
      // With threads the free list is shared: a page error is possible.
      if (threaded && isPaged<Store>() &&
          st.message().find("pages are free") != std::string::npos) {
        ++counts.stepsRefused;
        for (uint32_t s : mine)
          compareSlot(s, "after a step short of pages");
        return;
      }
      failure("step: " + st.message());
      return;
    }
    // The model: what the step produced, and its effects.
    std::vector<ProducedPool> want;
    std::vector<std::pair<uint32_t, int64_t>> fresh; // (slot, pool)
    for (Request &r : reqs) {
      SlotModel &m = slots[r.slot];
      int64_t c = m.L;
      for (int64_t p = c / e.K; p < (c + r.n) / e.K; ++p) {
        want.push_back({r.slot, p, p * e.K < c});
        fresh.push_back({r.slot, p});
      }
      // seed_tail: the last min(R, n) positions, rows q mod R.
      for (int64_t q = std::max(c, c + r.n - e.R); q < c + r.n; ++q) {
        size_t row = size_t(q % e.R), i = size_t(q - c);
        m.ringId[row] = r.ids[i];
        std::memcpy(&m.ringK[row * e.rowBytes], &r.rows.k[i * e.rowBytes],
                    size_t(e.rowBytes));
        std::memcpy(&m.ringG[row * e.rowBytes], &r.rows.g[i * e.rowBytes],
                    size_t(e.rowBytes));
      }
      m.stream.append(r.rows.k.data(), r.rows.g.data(), r.n);
      m.ids.insert(m.ids.end(), r.ids.begin(), r.ids.end());
      m.begin = c;
      m.L = m.end = c + r.n;
      counts.tokens += r.n;
      if constexpr (isPaged<Store>()) {
        int64_t P = e.options.pageSize;
        int64_t need = ((c + r.n) / e.K + P - 1) / P;
        if (!threaded) {
          while (int64_t(m.pages.size()) < need) {
            m.pages.push_back(freeStack->back());
            everTaken.insert(freeStack->back());
            freeStack->pop_back();
          }
        } else {
          (void)store.pages(r.slot, m.pages);
        }
      }
    }
    bool same = produced.size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i)
      same = produced[i].slot == want[i].slot &&
             produced[i].pool == want[i].pool &&
             produced[i].fromRing == want[i].fromRing;
    if (!same)
      failure("a step returned pools other than its own (" +
              std::to_string(produced.size()) + " records, expected " +
              std::to_string(want.size()) + ")");
    // The oracle of the new pools: compress of each pool's members.
    if (!fresh.empty()) {
      Tokens members;
      members.rowBytes = e.rowBytes;
      for (auto [slot, p] : fresh) {
        const SlotModel &m = slots[slot];
        members.append(&m.stream.k[size_t(p * e.K * e.rowBytes)],
                       &m.stream.g[size_t(p * e.K * e.rowBytes)], e.K);
      }
      std::vector<uint8_t> dense;
      if (Status s = oneShot(*e.ks, e.ape, members, members.size(), dense);
          !s.ok()) {
        failure("oracle compress: " + s.message());
        return;
      }
      for (size_t i = 0; i < fresh.size(); ++i) {
        auto [slot, p] = fresh[i];
        SlotModel &m = slots[slot];
        // A pool re-produced after a rollback replaces the void one.
        m.dense.resize(size_t(p * e.rowBytes));
        m.dense.insert(m.dense.end(), &dense[i * e.rowBytes],
                       &dense[i * e.rowBytes] + e.rowBytes);
        checkPool(slot, p, "a new pool");
      }
    }
    for (Request &r : reqs)
      compareSlot(r.slot, "after a step", /*pools=*/false);
    if constexpr (isPaged<Store>())
      if (!threaded) {
        std::vector<uint32_t> freeNow = store.freePages();
        if (!std::equal(freeNow.begin(), freeNow.end(), freeStack->rbegin(),
                        freeStack->rend()))
          failure("the free list differs from the model's");
      }
    // Accepts after verify steps (and sometimes after others), chained
    // now and then.
    for (Request &r : reqs) {
      if (!r.verify && !rng.chance(0.1))
        continue;
      int64_t a = rng.range(0, r.n);
      if (!accept(r.slot, a, false) || !rng.chance(0.3))
        continue;
      ++counts.chained;
      accept(r.slot, rng.range(0, a), true);
    }
    for (Request &r : reqs)
      if (slots[r.slot].L > e.capLength)
        reset(r.slot);
  }

  //===--------------------------------------------------------------------===//
  // Accept, reset
  //===--------------------------------------------------------------------===//

  /// Whether the simulated ring holds the members [floor(L/K)*K, L).
  bool ringHolds(const SlotModel &m, int64_t L) const {
    for (int64_t q = L / e.K * e.K; q < L; ++q)
      if (m.ringId[size_t(q % e.R)] != m.ids[size_t(q)])
        return false;
    return true;
  }

  /// accept(slot, a), predicted; returns whether it succeeded.
  bool accept(uint32_t slot, int64_t a, bool chained) {
    SlotModel &m = slots[slot];
    ++counts.accepts;
    std::string what = std::string(chained ? "a chained " : "an ") + "accept(" +
                       std::to_string(slot) + ", " + std::to_string(a) +
                       ") after a step bringing [" + std::to_string(m.begin) +
                       ", " + std::to_string(m.end) + ") (length " +
                       std::to_string(m.L) + ", R " + std::to_string(e.R) +
                       ", K " + std::to_string(e.K) + ")";
    std::string slotName = "accept: slot " + std::to_string(slot) + ": ";
    int64_t h = held(slot);
    std::string expected;
    if (a < 0 || a > h) {
      expected = slotName + "accepted = " + std::to_string(a) +
                 " is outside [0, " + std::to_string(h) + "]";
    } else {
      int64_t length = m.begin + a;
      bool ring = ringHolds(m, length);
      bool rule = ringHoldsPending(e.K, e.R, length, m.end);
      if (ring != rule)
        failure(what + ": the contract's condition says " +
                (rule ? "valid" : "invalid") + ", the simulated ring " +
                (ring ? "holds" : "does not hold") + " the pending members");
      if (!ring)
        expected = slotName + "keeping " + std::to_string(a) +
                   " token(s) (length " + std::to_string(length) +
                   ") needs positions " + std::to_string(length / e.K * e.K) +
                   ".." + std::to_string(length - 1) + " of pool " +
                   std::to_string(length / e.K) +
                   " in the ring, but its last step wrote up to position " +
                   std::to_string(m.end - 1) + " and a window of " +
                   std::to_string(e.R) + " rows keeps only positions " +
                   std::to_string(m.end - e.R) +
                   " and later; a ring window of at least " +
                   std::to_string(m.end - length / e.K * e.K) +
                   " rows would hold them";
    }
    if (!expected.empty()) {
      ++counts.acceptsRejected;
      Snapshot before = state();
      if (expectError(store.accept(slot, a), expected, what))
        unchanged(before, what);
      return false;
    }
    if (Status s = store.accept(slot, a); !s.ok()) {
      failure(what + ": " + s.message());
      return false;
    }
    m.L = m.begin + a;
    m.stream.truncate(m.L);
    m.ids.resize(size_t(m.L));
    m.dense.resize(size_t(m.L / e.K * e.rowBytes));
    compareSlot(slot, what, /*pools=*/false);
    return true;
  }

  void reset(uint32_t slot) {
    fullCheck(slot);
    ++counts.resets;
    if (Status s = clearSlot(store, slot); !s.ok()) {
      failure(std::string(clearName(store)) + ": " + s.message());
      return;
    }
    SlotModel &m = slots[slot];
    if constexpr (isPaged<Store>())
      if (!threaded)
        freeStack->insert(freeStack->end(), m.pages.rbegin(), m.pages.rend());
    m.init(e);
    compareSlot(slot, clearName(store));
  }

  //===--------------------------------------------------------------------===//
  // Misuse: each call fails, naming what is wrong, and changes nothing
  //===--------------------------------------------------------------------===//

  void misuse() {
    ++counts.misuse;
    Snapshot before = state();
    std::string expected, what;
    Status st;
    int64_t kind = rng.range(0, 10);
    std::vector<Request> reqs = randomRequests();
    int64_t B = int64_t(reqs.size());
    Call call(e.rowBytes);
    for (Request &r : reqs)
      call.add(r.slot, r.rows, 0, r.n);
    int64_t j = rng.range(0, B - 1);
    std::string req = "step: request " + std::to_string(j) + ": ";
    switch (kind) {
    case 0: { // a slot past max_slots
      uint32_t bad = uint32_t(e.maxSlots + rng.range(0, 1000));
      call.slots[size_t(j)] = bad;
      what = "a slot past max_slots";
      expected = req + "slot_idx[" + std::to_string(j) +
                 "] = " + std::to_string(bad) +
                 " is not below max_slots = " + std::to_string(e.maxSlots);
      st = call.run(store, e.D);
      break;
    }
    case 1: { // a slot twice
      call.add(call.slots[0], freshRows(1), 0, 1);
      what = "a slot twice in one call";
      expected = "step: request " + std::to_string(B) + ": slot_idx[" +
                 std::to_string(B) + "] = " + std::to_string(call.slots[0]) +
                 " is also the slot of request 0";
      st = call.run(store, e.D);
      break;
    }
    case 2: { // rows past k
      uint32_t rows = call.iro.back();
      uint32_t past = rows + uint32_t(rng.range(1, 9));
      for (int64_t b = j + 1; b <= B; ++b)
        call.iro[size_t(b)] = past;
      what = "rows past k";
      expected = req + "input_row_offsets[" + std::to_string(j + 1) +
                 "] = " + std::to_string(past) + " reaches past the " +
                 std::to_string(rows) + " rows of 'k'";
      st = call.run(store, e.D);
      break;
    }
    case 3: { // reversed rows: request 1 ends before it begins
      Call bad(e.rowBytes);
      int64_t n = rng.range(1, 5);
      Tokens rows = freshRows(n);
      bad.add(reqs[0].slot, rows, 0, n);
      bad.add(pick(), rows, 0, 0);
      uint32_t hi = uint32_t(n - rng.range(1, n));
      bad.iro[2] = hi;
      what = "reversed rows";
      expected =
          "step: request 1: input_row_offsets[2] = " + std::to_string(hi) +
          " is below input_row_offsets[1] = " + std::to_string(n) +
          " (rows reversed)";
      st = bad.run(store, e.D);
      break;
    }
    case 4: { // offsets of the wrong length
      call.iro.push_back(call.iro.back());
      what = "input_row_offsets of the wrong length";
      expected = "step: input_row_offsets must have one more entry than "
                 "slots (" +
                 std::to_string(B + 1) + "), got " + std::to_string(B + 2);
      st = call.run(store, e.D);
      break;
    }
    case 5: { // k of the wrong width
      View k = call.kView(e.D), g = call.gView(e.D);
      k.sizes[1] = e.D + 1;
      k.sizes[0] = call.iro.back() * e.D / (e.D + 1);
      what = "a k of the wrong width";
      expected = "step: 'k' dimension 1 is " + std::to_string(e.D + 1) +
                 ", expected " + std::to_string(e.D) + " (head_dim)";
      st = store.step(k, g, call.iro, call.slots);
      break;
    }
    case 6: { // a length past 2^32 - 1 (stride-0 rows: refused unread)
      uint32_t slot = reqs[0].slot;
      int64_t L = slots[slot].L;
      if (L == 0) {
        --counts.misuse;
        return; // needs tokens in the slot
      }
      int64_t n = int64_t(UINT32_MAX) - L + 1 + rng.range(0, L - 1);
      std::vector<uint8_t> row(size_t(e.rowBytes), 0);
      View k = denseView(row.data(), {int64_t(UINT32_MAX), e.D});
      k.strides[0] = 0;
      std::vector<uint32_t> iro = {0, uint32_t(n)}, sl = {slot};
      what = "a length past 2^32 - 1";
      expected = "step: request 0 (slot " + std::to_string(slot) +
                 "): its length would pass 2^32 - 1 tokens (" +
                 std::to_string(L) + " + " + std::to_string(n);
      st = store.step(k, k, iro, sl);
      break;
    }
    case 7: { // accept on a slot past max_slots
      uint32_t bad = uint32_t(e.maxSlots + rng.range(0, 5));
      what = "accept on a bad slot";
      expected = "accept: slot " + std::to_string(bad) +
                 ": not below max_slots = " + std::to_string(e.maxSlots);
      st = store.accept(bad, 0);
      break;
    }
    case 8: { // reset/release of a slot past max_slots
      uint32_t bad = uint32_t(e.maxSlots + rng.range(0, 5));
      what = std::string(clearName(store)) + " of a bad slot";
      expected = std::string(clearName(store)) + ": slot " +
                 std::to_string(bad) +
                 " is not below max_slots = " + std::to_string(e.maxSlots);
      st = clearSlot(store, bad);
      break;
    }
    case 9: { // a pool that is not complete
      uint32_t slot = pick();
      int64_t pools = slots[slot].L / e.K;
      what = "a pool past the slot's";
      if constexpr (isPaged<Store>()) {
        std::vector<uint8_t> out(size_t(e.D * e.entryBytes));
        float scale;
        expected = "entry: slot " + std::to_string(slot) + ": pool " +
                   std::to_string(pools) + " is not among its " +
                   std::to_string(pools) + " complete pools";
        st = store.entry(slot, pools, out.data(), &scale);
      } else {
        std::vector<uint8_t> out(size_t(e.rowBytes));
        expected = "copy_pools: pools [" + std::to_string(pools) + ", " +
                   std::to_string(pools) + " + 1) are not all among the " +
                   std::to_string(pools) + " pools of slot " +
                   std::to_string(slot);
        st = store.copyPools(slot, pools, 1, denseView(out.data(), {1, e.D}));
        if (store.pool(slot, pools) != nullptr)
          failure("pool() of a pool past the slot's is not null");
      }
      break;
    }
    default: { // page exhaustion is predicted in step(); here: a bad
               // accept range on a slot that took no step
      uint32_t slot = pick();
      int64_t h = held(slot);
      what = "accept past the held tokens";
      expected = "accept: slot " + std::to_string(slot) +
                 ": accepted = " + std::to_string(h + 1) + " is outside [0, " +
                 std::to_string(h) + "]";
      st = store.accept(slot, h + 1);
      break;
    }
    }
    if (expectError(st, expected, "misuse (" + what + ")"))
      unchanged(before, "misuse (" + what + ")");
  }

  //===--------------------------------------------------------------------===//
  // Comparing the store with the model
  //===--------------------------------------------------------------------===//

  /// Pool `p` of `slot` against the model's dense pool (PoolStore: bits;
  /// PagedPoolStore: the formula on it).
  void checkPool(uint32_t slot, int64_t p, const std::string &what) {
    const SlotModel &m = slots[slot];
    const uint8_t *dense = &m.dense[size_t(p * e.rowBytes)];
    ++counts.pools;
    if constexpr (isPaged<Store>()) {
      Entry got, want = referenceEntry(e.c, dense);
      Status s = storedEntry(store, slot, p, got);
      if (!s.ok() || !(got == want))
        failure(what + ": slot " + std::to_string(slot) + " entry " +
                std::to_string(p) +
                " differs from the formula on the dense "
                "pool" +
                (s.ok() ? "" : " (" + s.message() + ")"));
    } else {
      const void *got = store.pool(slot, p);
      if (!got || std::memcmp(got, dense, size_t(e.rowBytes)))
        failure(what + ": slot " + std::to_string(slot) + " pool " +
                std::to_string(p) + " differs from compress of its members");
    }
  }

  /// The slot's bookkeeping, ring rows and (with `pools`) every pool
  /// against the model.
  void compareSlot(uint32_t slot, const std::string &what, bool pools = true) {
    const SlotModel &m = slots[slot];
    SlotInfo info;
    Status s = store.slotInfo(slot, info);
    if (!s.ok() || info.tokens != m.L || info.stepBegin != m.begin ||
        info.stepEnd != m.end || store.tokens(slot) != m.L ||
        store.pools(slot) != m.L / e.K) {
      failure(what + ": slot " + std::to_string(slot) + " has length " +
              std::to_string(info.tokens) + ", last step [" +
              std::to_string(info.stepBegin) + ", " +
              std::to_string(info.stepEnd) + "), " +
              std::to_string(store.pools(slot)) +
              " pools; the model: " + std::to_string(m.L) + ", [" +
              std::to_string(m.begin) + ", " + std::to_string(m.end) + ")");
      return;
    }
    View ring = store.ring();
    const auto *base = static_cast<const uint8_t *>(ring.data) +
                       int64_t(slot) * 2 * e.R * e.rowBytes;
    if (std::memcmp(base, m.ringK.data(), m.ringK.size()) ||
        std::memcmp(base + e.R * e.rowBytes, m.ringG.data(), m.ringG.size()))
      failure(what + ": slot " + std::to_string(slot) +
              "'s ring rows differ from the rows seed_tail writes");
    if constexpr (isPaged<Store>()) {
      std::vector<uint32_t> pages;
      (void)store.pages(slot, pages);
      if (pages != m.pages)
        failure(what + ": slot " + std::to_string(slot) +
                "'s pages differ from the model's");
    }
    if (pools)
      for (int64_t p = 0; p < m.L / e.K; ++p)
        checkPool(slot, p, what);
  }

  /// Every pool of `slot` against the backend's one-shot compress of its
  /// accepted stream (and the model's pools, made pool by pool, against
  /// it).
  void fullCheck(uint32_t slot) {
    const SlotModel &m = slots[slot];
    ++counts.fullChecks;
    std::vector<uint8_t> whole;
    if (Status s = oneShot(*e.ks, e.ape, m.stream, m.L, whole); !s.ok()) {
      failure("one-shot compress: " + s.message());
      return;
    }
    if (whole != m.dense)
      failure("slot " + std::to_string(slot) +
              ": one-shot compress of the accepted stream differs from "
              "compress of each pool's members");
    compareSlot(slot, "a full check");
  }

  Store &store;
  Env &e;
  std::vector<uint32_t> mine;
  Rng rng;
  bool threaded;
  std::vector<uint32_t> *freeStack;
  std::string where;
  uint64_t idBase, nextId = 0;
};

//===----------------------------------------------------------------------===//
// Threads racing on one slot
//===----------------------------------------------------------------------===//

/// `threads` threads step slot `slot` with whole pools at a time (1 to 8
/// pools of K tokens, from a pool boundary: every step completes its own
/// pools, and their ids say where its tokens went), all starting together,
/// and race accept(slot, 0) (drop the last step, whoever's), accept(slot,
/// K) (keep its first pool), accept(slot, 9K) (never valid) and reads.
/// Afterwards the length is K times the pools, and each pool is the
/// compress of the matching tokens of one of the steps that reported its
/// id (a dropped pool is produced again by a later step).
template <typename Store>
void race(Store &store, Env &e, uint32_t slot, int threads, int64_t steps,
          Counts &counts, const std::string &where) {
  struct Done {
    int64_t first;
    Tokens tokens;
  };
  std::vector<std::vector<Done>> done(static_cast<size_t>(threads));
  std::vector<Counts> perThread(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  // All threads start together, so that their steps overlap.
  std::atomic<int> ready{0};
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      Rng rng(uint64_t(9000 + i));
      Counts &n = perThread[size_t(i)];
      ++ready;
      while (ready < threads)
        std::this_thread::yield();
      for (int64_t s = 0; s < steps && failures == 0; ++s) {
        int64_t count = e.K * rng.range(1, 8);
        Tokens tok;
        tok.rowBytes = e.rowBytes;
        tok.k = randomRows(rng, e.c.elementType, e.D, count, 4);
        tok.g = randomRows(rng, e.c.elementType, e.D, count, 10);
        Call call(e.rowBytes);
        call.add(slot, tok, 0, count);
        std::vector<ProducedPool> produced;
        Status st = call.run(store, e.D, &produced);
        ++n.raceSteps;
        if (!st.ok()) {
          if (isPaged<Store>() &&
              st.message().find("pages are free") != std::string::npos)
            continue;
          fail(where, "race step: " + st.message());
          return;
        }
        bool own = int64_t(produced.size()) == count / e.K;
        for (size_t j = 0; own && j < produced.size(); ++j)
          own = produced[j].slot == slot && !produced[j].fromRing &&
                produced[j].pool == produced[0].pool + int64_t(j);
        if (!own) {
          fail(where, "a race step of whole pools from a pool boundary did "
                      "not report exactly its own pools");
          return;
        }
        done[size_t(i)].push_back({produced[0].pool, std::move(tok)});
        int64_t r = rng.range(0, 9);
        ++n.raceAccepts;
        if (r < 2) {
          if (Status a = store.accept(slot, 0); !a.ok())
            fail(where, "race accept(slot, 0): " + a.message());
        } else if (r < 4) {
          // Every step brings at least K tokens, so accept(slot, K) fails
          // only when the slot holds fewer than K tokens of a last step:
          // none yet, or another thread's accept(slot, 0) came between
          // that step and this accept (its range error says so).
          Status a = store.accept(slot, e.K);
          if (!a.ok() &&
              a.message().find("is outside [0, 0]") == std::string::npos)
            fail(where, "race accept(slot, K): " + a.message());
        } else if (r < 6) {
          if (store.accept(slot, 9 * e.K).ok())
            fail(where, "race accept(slot, 9K) succeeded");
        } else {
          --n.raceAccepts;
          SlotInfo info;
          (void)store.slotInfo(slot, info);
          if (info.tokens % e.K || info.stepEnd % e.K || info.stepBegin % e.K ||
              info.tokens < info.stepBegin || info.tokens > info.stepEnd)
            fail(where, "a torn slot state in the race");
        }
      }
    });
  for (std::thread &t : pool)
    t.join();
  for (const Counts &n : perThread)
    counts.add(n);
  // Each pool against the candidates that reported its id.
  int64_t length = store.tokens(slot);
  if (length % e.K) {
    fail(where, "the raced slot's length is not a multiple of K");
    return;
  }
  std::map<int64_t, std::vector<std::pair<const Tokens *, int64_t>>> candidates;
  for (auto &list : done)
    for (Done &d : list)
      for (int64_t j = 0; j < d.tokens.size() / e.K; ++j)
        candidates[d.first + j].push_back({&d.tokens, j});
  for (int64_t p = 0; p < length / e.K && failures == 0; ++p) {
    auto it = candidates.find(p);
    if (it == candidates.end()) {
      fail(where, "raced pool " + std::to_string(p) + " was never reported");
      return;
    }
    bool found = false;
    for (auto [tok, j] : it->second) {
      Tokens members;
      members.rowBytes = e.rowBytes;
      members.append(&tok->k[size_t(j * e.K * e.rowBytes)],
                     &tok->g[size_t(j * e.K * e.rowBytes)], e.K);
      std::vector<uint8_t> dense;
      (void)oneShot(*e.ks, e.ape, members, e.K, dense);
      if constexpr (isPaged<Store>()) {
        Entry got;
        (void)storedEntry(store, slot, p, got);
        found |= got == referenceEntry(e.c, dense.data());
      } else {
        found |= std::memcmp(store.pool(slot, p), dense.data(),
                             size_t(e.rowBytes)) == 0;
      }
    }
    ++counts.pools;
    if (!found)
      fail(where, "raced pool " + std::to_string(p) +
                      " is none of the steps' that reported it");
  }
}

//===----------------------------------------------------------------------===//
// Rounds
//===----------------------------------------------------------------------===//

struct Config {
  ElementType type;
  int64_t D, K;
  CacheFormat format;
};

/// A round's geometry: slots, window, pages (few enough that exhaustion
/// happens single-threaded), a padded page stride, a shuffled page order,
/// the caller's buffer (canary) or the store's.
void makeEnv(Env &e, std::shared_ptr<KernelSet> ks, Rng &rng, int64_t maxSlots,
             bool plentyOfPages) {
  e.ks = ks;
  e.c = ks->config();
  e.K = e.c.kpool;
  e.D = e.c.headDim;
  e.rowBytes = e.D * elementTypeSize(e.c.elementType);
  e.R = e.K + rng.range(0, 4);
  e.maxSlots = maxSlots;
  e.ape.resize(size_t(e.K * e.D));
  for (float &a : e.ape)
    a = float(rng.uniform(-3, 3));
  e.capLength = e.K * rng.range(6, 24);
  e.fp8 = e.c.cache.entry == CacheEntry::FP8;
  e.entryBytes = e.fp8 ? 1 : elementTypeSize(e.c.elementType);
  PagedPoolStoreOptions &o = e.options;
  o = PagedPoolStoreOptions();
  o.maxSlots = maxSlots;
  o.ringWindow = e.R == e.K && rng.chance(0.5) ? 0 : e.R;
  o.pageSize = std::vector<int64_t>{1, 2, 3, 4, 7}[size_t(rng.range(0, 4))];
  // The pages every slot needs at its cap (plus a verify step's pools).
  int64_t perSlot = (e.capLength / e.K + 8 + o.pageSize - 1) / o.pageSize;
  o.numPages =
      plentyOfPages
          ? maxSlots * perSlot + 4
          : std::max<int64_t>(1, maxSlots * perSlot * rng.range(20, 90) / 100);
  e.keysBytes = o.pageSize * e.D * e.entryBytes;
  e.pageBytes = e.keysBytes + (e.fp8 ? 4 * o.pageSize : 0);
  int64_t align = e.fp8 ? 4 : e.entryBytes;
  o.pageStride = rng.chance(0.5) ? 0 : e.pageBytes + align * rng.range(0, 5);
  if (rng.chance(0.7)) {
    for (int64_t i = 0; i < o.numPages; ++i)
      o.pageOrder.push_back(i);
    rng.shuffle(o.pageOrder);
  }
  int64_t stride = o.pageStride ? o.pageStride : e.pageBytes;
  e.buffer.clear();
  o.cache = nullptr;
  if (rng.chance(0.5)) {
    e.buffer.assign(size_t(o.numPages * stride + 8), kCanary);
    o.cache = e.buffer.data();
  }
}

/// After a round: bytes of the caller's buffer that no entry ever owned
/// (page padding, pages never handed out) keep the canary.
void checkCanary(const PagedPoolStore &store, const Env &e,
                 const std::set<uint32_t> &everTaken,
                 const std::string &where) {
  if (e.buffer.empty())
    return;
  int64_t stride = store.pageStride();
  for (int64_t p = 0; p < store.numPages(); ++p) {
    const uint8_t *page = e.buffer.data() + p * stride;
    int64_t from = everTaken.count(uint32_t(p)) ? e.pageBytes : 0;
    for (int64_t i = from; i < stride; ++i)
      if (page[i] != kCanary) {
        fail(where, "byte " + std::to_string(i) + " of page " +
                        std::to_string(p) + ", which no entry owns, changed");
        return;
      }
  }
}

template <typename Store>
std::unique_ptr<Store> makeStore(Env &e, std::string &error);
template <>
std::unique_ptr<PoolStore> makeStore<PoolStore>(Env &e, std::string &error) {
  Status st;
  auto s = PoolStore::create(e.ks, e.maxSlots, e.ape.data(), st,
                             e.options.ringWindow);
  if (!s)
    error = st.message();
  return s;
}
template <>
std::unique_ptr<PagedPoolStore> makeStore<PagedPoolStore>(Env &e,
                                                          std::string &error) {
  Status st;
  auto s = PagedPoolStore::create(e.ks, e.ape.data(), e.options, st);
  if (!s)
    error = st.message();
  return s;
}

/// After close(): every call fails, naming the op.
template <typename Store>
void afterClose(Store &store, Env &e, const std::string &where) {
  store.close();
  std::vector<uint8_t> k(size_t(e.rowBytes));
  View kv = denseView(k.data(), {1, e.D});
  Status s = store.step(kv, kv, {0, 1}, {0});
  if (s.message() != "step: the store is closed")
    fail(where, "a step after close: " + (s.ok() ? "succeeded" : s.message()));
  if (store.accept(0, 0).message() != "accept: the store is closed" ||
      clearSlot(store, 0).message() !=
          std::string(clearName(store)) + ": the store is closed" ||
      store.tokens(0) != -1 || store.pools(0) != 0)
    fail(where, "a closed store answered a call");
}

/// One store type, one configuration: single-threaded rounds, then a
/// threaded round (owners, then a race on a shared slot).
template <typename Store>
Counts runStore(std::shared_ptr<KernelSet> ks, const std::string &name,
                uint64_t seed, int64_t steps, int threads) {
  Counts total;
  Rng rng(seed);
  const char *kind = isPaged<Store>() ? "paged" : "pool";
  // Single-threaded: rounds of a few thousand steps, new geometry each.
  int64_t done = 0;
  for (int round = 0; done < steps && failures == 0; ++round) {
    Env e;
    makeEnv(e, ks, rng, rng.range(3, 6), /*plentyOfPages=*/false);
    std::string where =
        name + " " + kind + " store, round " + std::to_string(round);
    std::string error;
    auto store = makeStore<Store>(e, error);
    if (!store) {
      fail(where, "create: " + error);
      break;
    }
    std::vector<uint32_t> all;
    for (int64_t s = 0; s < e.maxSlots; ++s)
      all.push_back(uint32_t(s));
    std::vector<uint32_t> freeStack;
    if constexpr (isPaged<Store>()) {
      std::vector<uint32_t> order = store->freePages();
      freeStack.assign(order.rbegin(), order.rend());
    }
    Driver<Store> d(*store, e, all, rng.next(), false, &freeStack, where);
    d.run(std::min<int64_t>(steps - done, 4000));
    done += d.counts.steps;
    total.add(d.counts);
    if constexpr (isPaged<Store>())
      checkCanary(*store, e, d.everTaken, where);
    afterClose(*store, e, where);
  }
  // Threaded: rounds where each thread owns two slots, then races the
  // others on a fifth.
  done = 0;
  for (int round = 0; threads > 0 && done < steps && failures == 0; ++round) {
    const int64_t perThread =
        std::min<int64_t>((steps - done + threads - 1) / threads, 1000);
    const int64_t raceSteps = 100;
    Env e;
    makeEnv(e, ks, rng, 2 * threads + 1, /*plentyOfPages=*/true);
    // Room for the raced slot's pools too.
    e.options.numPages += 8 * threads * raceSteps / e.options.pageSize + 1;
    if (!e.buffer.empty()) {
      int64_t stride =
          e.options.pageStride ? e.options.pageStride : e.pageBytes;
      e.buffer.assign(size_t(e.options.numPages * stride + 8), kCanary);
      e.options.cache = e.buffer.data();
    }
    if (!e.options.pageOrder.empty()) {
      e.options.pageOrder.clear();
      for (int64_t i = 0; i < e.options.numPages; ++i)
        e.options.pageOrder.push_back(i);
      rng.shuffle(e.options.pageOrder);
    }
    std::string where = name + " " + kind + " store, " +
                        std::to_string(threads) + " threads, round " +
                        std::to_string(round);
    std::string error;
    auto store = makeStore<Store>(e, error);
    if (!store) {
      fail(where, "create: " + error);
      return total;
    }
    std::vector<std::unique_ptr<Driver<Store>>> drivers;
    for (int i = 0; i < threads; ++i)
      drivers.push_back(std::make_unique<Driver<Store>>(
          *store, e,
          std::vector<uint32_t>{uint32_t(2 * i), uint32_t(2 * i + 1)},
          rng.next(), true, nullptr, where + ", thread " + std::to_string(i)));
    std::vector<std::thread> pool;
    std::atomic<int> ready{0};
    for (auto &d : drivers)
      pool.emplace_back([&d, &ready, perThread, threads] {
        ++ready;
        while (ready < threads)
          std::this_thread::yield();
        d->run(perThread);
      });
    for (std::thread &t : pool)
      t.join();
    for (auto &d : drivers) {
      total.add(d->counts);
      done += d->counts.steps;
    }
    race(*store, e, uint32_t(2 * threads), threads, raceSteps, total, where);
    afterClose(*store, e, where);
  }
  return total;
}

} // namespace

int main(int argc, char **argv) {
  int64_t steps = 2000;
  if (const char *env = std::getenv("KPOOL_STORE_PROPERTY_STEPS"))
    steps = std::atoll(env);
  int threads = 4;
  uint64_t seed = 1;
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-steps" && i + 1 < argc)
      steps = std::atoll(argv[++i]);
    else if (a == "-threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "-seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "-all")
      all = true;
    else {
      std::fprintf(stderr,
                   "usage: kpool-store-property [-steps N] [-threads T] "
                   "[-seed S] [-all]\n");
      return 2;
    }
  }
  std::vector<Config> configs = {
      {KPOOL_BF16,
       16,
       4,
       {CacheEntry::FP8, CacheRotate::Hadamard, CacheScale::Absmax}},
      {KPOOL_F32,
       8,
       3,
       {CacheEntry::Element, CacheRotate::None, CacheScale::Absmax}},
  };
  if (all) {
    configs.push_back({KPOOL_F16,
                       32,
                       5,
                       {CacheEntry::FP8, CacheRotate::None, CacheScale::Pow2}});
    configs.push_back(
        {KPOOL_BF16,
         16,
         1,
         {CacheEntry::Element, CacheRotate::Hadamard, CacheScale::Absmax}});
  }
  auto start = std::chrono::steady_clock::now();
  Counts total;
  for (size_t i = 0; i < configs.size() && failures == 0; ++i) {
    const Config &c = configs[i];
    std::string error;
    auto ks = cacheKernels(c.type, c.D, c.K, c.format, error);
    if (!ks) {
      fail("setup", error);
      break;
    }
    std::string name = configName(ks->config());
    for (int paged = 0; paged < 2 && failures == 0; ++paged) {
      auto t0 = std::chrono::steady_clock::now();
      Counts n = paged ? runStore<PagedPoolStore>(
                             ks, name, seed * 100 + i * 2 + 1, steps, threads)
                       : runStore<PoolStore>(ks, name, seed * 100 + i * 2,
                                             steps, threads);
      double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      std::printf("%s: %s %s store: %s (%.1f s)\n", failures ? "FAIL" : "PASS",
                  name.c_str(), paged ? "paged" : "pool", n.text().c_str(), s);
      std::fflush(stdout);
      total.add(n);
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("total: %s, %d threads, %.1f s\n", total.text().c_str(), threads,
              seconds);
  std::printf("%" PRId64 " failed\n", failures);
  return failures ? 1 : 0;
}
