//===- kpool-speculative.cpp - ring window and rollback, differential -----===//
//
// Random speculative-decoding schedules (test/lib/Reference/VerifySchedule.h)
// through kpool::PoolStore on the JIT-compiled CPU kernels: verify steps of
// 1 + d tokens (d = 1..7) whose rejected drafts are junk tokens, mixed with
// plain decode and chunked prefill in the same ragged calls, each verify
// step followed by PoolStore::accept with a random accepted length.
//
//  - With a ring window R >= K + d - 1 every accept must succeed, and in the
//    end every slot's pools must be bit-identical to a one-shot compress of
//    the accepted sequence (what the engine would have produced without
//    drafts), with exactly floor(length / K) pools after every step.
//  - With a window too small for the drafts (R = K + d - 2 >= K), accept
//    must fail exactly when the contract's condition fails, name the slot,
//    and change nothing; the test then resets the slot and prefills the
//    accepted sequence again, and the pools must still be exact.
//
// Prints one line per configuration and `N passed, M failed` (a case is one
// schedule); exits 1 on failure. Usage: kpool-speculative [cases-per-config]
//
//===----------------------------------------------------------------------===//

#include "Reference/Reference.h"
#include "Reference/VerifySchedule.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/PoolStore.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kpool;
namespace ref = kpool::reference;

namespace {

struct Config {
  ElementType type;
  int64_t D, K;
  std::string name() const {
    return std::string(elementTypeName(type)) + " D" + std::to_string(D) +
           " K" + std::to_string(K);
  }
};

/// Raw element bytes of `rows` random rows: keys in [-4, 4), gates in
/// [-10, 10) so that the softmax discriminates.
std::vector<uint8_t> randomRows(ref::SplitMix &rng, const Config &c,
                                int64_t rows, double scale) {
  int64_t esize = elementTypeSize(c.type);
  std::vector<uint8_t> out(rows * c.D * esize);
  for (int64_t i = 0; i < rows * c.D; ++i)
    ref::setElementBits(c.type, &out[i * esize],
                        ref::roundToBits(c.type, float((rng.unit() * 2 - 1) *
                                                       scale)));
  return out;
}

struct Outcome {
  bool ok = true;
  std::string why;
  int64_t accepts = 0, rejected = 0;
  void fail(const std::string &msg) {
    if (ok)
      why = msg;
    ok = false;
  }
};

/// Runs one schedule through a PoolStore with ring window `window`.
Outcome runSchedule(const Config &c, std::shared_ptr<KernelSet> kernels,
                    const ref::VerifySchedule &s, ref::SplitMix &rng) {
  Outcome out;
  const int64_t D = c.D, K = c.K, esize = elementTypeSize(c.type);
  const int64_t rowBytes = D * esize, maxSlots = 6;
  size_t requests = s.slots.size();
  std::vector<float> ape(K * D);
  for (float &a : ape)
    a = float(rng.unit() * 6 - 3);
  // The accepted sequence of each request, made up front.
  std::vector<std::vector<uint8_t>> keys(requests), gates(requests);
  for (size_t r = 0; r < requests; ++r) {
    keys[r] = randomRows(rng, c, s.lengths[r], 4);
    gates[r] = randomRows(rng, c, s.lengths[r], 10);
  }
  PoolStore store(kernels, maxSlots, ape.data(), s.window);
  std::vector<int64_t> kept(requests, 0); // accepted tokens so far

  // One call: each entry brings `count` rows, the first `accepted` from the
  // accepted sequence, the rest junk.
  auto call = [&](const std::vector<ref::VerifyEntry> &entries) -> bool {
    std::vector<uint8_t> k, g;
    std::vector<uint32_t> iro = {0}, slots;
    for (const ref::VerifyEntry &e : entries) {
      size_t r = e.request;
      const uint8_t *k0 = keys[r].data() + kept[r] * rowBytes;
      const uint8_t *g0 = gates[r].data() + kept[r] * rowBytes;
      k.insert(k.end(), k0, k0 + e.accepted * rowBytes);
      g.insert(g.end(), g0, g0 + e.accepted * rowBytes);
      std::vector<uint8_t> jk = randomRows(rng, c, e.count - e.accepted, 4),
                           jg = randomRows(rng, c, e.count - e.accepted, 10);
      k.insert(k.end(), jk.begin(), jk.end());
      g.insert(g.end(), jg.begin(), jg.end());
      iro.push_back(iro.back() + uint32_t(e.count));
      slots.push_back(s.slots[r]);
    }
    int64_t rows = iro.back();
    k.resize(std::max<int64_t>(rows, 1) * rowBytes);
    g.resize(std::max<int64_t>(rows, 1) * rowBytes);
    View kv = denseView(k.data(), {rows, D}), gv = denseView(g.data(), {rows, D});
    Status st = store.step(kv, gv, iro, slots);
    if (!st.ok()) {
      out.fail("step: " + st.message());
      return false;
    }
    return true;
  };

  for (const auto &step : s.steps) {
    std::vector<int64_t> begin(requests);
    for (size_t r = 0; r < requests; ++r)
      begin[r] = store.tokens(s.slots[r]);
    if (!call(step))
      return out;
    for (const ref::VerifyEntry &e : step) {
      size_t r = e.request;
      uint32_t slot = s.slots[r];
      int64_t end = begin[r] + e.count, length = begin[r] + e.accepted;
      if (store.tokens(slot) != end)
        out.fail("slot " + std::to_string(slot) + " has " +
                 std::to_string(store.tokens(slot)) + " tokens, expected " +
                 std::to_string(end));
      if (e.verify) {
        ++out.accepts;
        bool valid = ref::rollbackKeepsRing(K, s.window, length, end);
        // The contract's claim: K + d - 1 rows survive any acceptance.
        if (!valid && s.window >= K + s.drafts - 1) {
          out.fail("the contract's condition fails for a window of " +
                   std::to_string(s.window) + " >= K + d - 1 (length " +
                   std::to_string(length) + ", end " + std::to_string(end) +
                   ")");
          return out;
        }
        int64_t poolsBefore = store.pools(slot);
        Status st = store.accept(slot, e.accepted);
        if (valid && !st.ok()) {
          out.fail("accept(" + std::to_string(e.accepted) + ") of slot " +
                   std::to_string(slot) + " failed: " + st.message());
          return out;
        }
        if (!valid) {
          if (st.ok()) {
            out.fail("accept(" + std::to_string(e.accepted) + ") of slot " +
                     std::to_string(slot) +
                     " succeeded although the ring cannot hold the pending "
                     "pool (length " +
                     std::to_string(length) + ", end " + std::to_string(end) +
                     ")");
            return out;
          }
          ++out.rejected;
          std::string name = "slot " + std::to_string(slot) + ":";
          if (st.message().find(name) == std::string::npos)
            out.fail("the rejection does not name the slot: " + st.message());
          if (store.tokens(slot) != end || store.pools(slot) != poolsBefore)
            out.fail("a rejected accept changed the store");
          // What an engine does then: start the request over and prefill
          // its accepted sequence again.
          store.reset(slot);
          kept[r] = 0;
          if (!call({{r, length, length, false}}))
            return out;
        }
      }
      kept[r] = length;
      if (store.tokens(slot) != length || store.pools(slot) != length / K)
        out.fail("slot " + std::to_string(slot) + ": " +
                 std::to_string(store.tokens(slot)) + " tokens and " +
                 std::to_string(store.pools(slot)) + " pools, expected " +
                 std::to_string(length) + " and " +
                 std::to_string(length / K));
    }
  }

  // Every pool against a one-shot compress of the accepted sequence.
  for (size_t r = 0; r < requests; ++r) {
    int64_t n = kept[r], pools = n / K;
    std::vector<uint8_t> oneShot(std::max<int64_t>(pools, 1) * rowBytes);
    std::vector<uint32_t> iro = {0, uint32_t(n)}, pro = {0, uint32_t(pools)},
                          cache = {0};
    std::vector<uint8_t> k = keys[r], g = gates[r];
    k.resize(std::max<int64_t>(n, 1) * rowBytes);
    g.resize(std::max<int64_t>(n, 1) * rowBytes);
    CompressArgs c{};
    c.pooled = denseView(oneShot.data(), {pools, D});
    c.k = denseView(k.data(), {n, D});
    c.gate = denseView(g.data(), {n, D});
    c.ape = denseView(ape.data(), {K, D});
    c.input_row_offsets = denseView(iro.data(), {2});
    c.pool_row_offsets = denseView(pro.data(), {2});
    c.cache_lengths = denseView(cache.data(), {1});
    Status st = kernels->compress(c);
    if (!st.ok()) {
      out.fail("one-shot compress: " + st.message());
      continue;
    }
    uint32_t slot = s.slots[r];
    if (store.pools(slot) != pools) {
      out.fail("slot " + std::to_string(slot) + " has " +
               std::to_string(store.pools(slot)) + " pools, expected " +
               std::to_string(pools));
      continue;
    }
    for (int64_t p = 0; p < pools; ++p)
      if (std::memcmp(store.pool(slot, p), &oneShot[p * rowBytes], rowBytes)) {
        out.fail("slot " + std::to_string(slot) + " pool " +
                 std::to_string(p) +
                 " differs from one-shot compression of the accepted "
                 "sequence");
        break;
      }
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  int64_t perConfig = argc > 1 ? std::atoll(argv[1]) : 2000;
  const Config configs[] = {
      {KPOOL_BF16, 16, 4}, {KPOOL_BF16, 16, 3}, {KPOOL_BF16, 8, 1},
      {KPOOL_F16, 8, 4},   {KPOOL_F32, 8, 3},   {KPOOL_BF16, 128, 4}};
  int64_t passed = 0, failed = 0;
  for (const Config &c : configs) {
    KernelConfig kc;
    kc.elementType = c.type;
    kc.headDim = c.D;
    kc.kpool = c.K;
    Status st;
    kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
    std::shared_ptr<KernelSet> kernels = KernelSet::get(kc, st);
    if (!kernels) {
      std::printf("FAIL: %s: %s\n", c.name().c_str(), st.message().c_str());
      ++failed;
      continue;
    }
    ref::SplitMix rng(0x5eed0000u + uint64_t(c.type) * 977 + c.D * 31 + c.K);
    int64_t cases = c.D >= 128 ? perConfig / 4 : perConfig;
    int64_t ok = 0, bad = 0, accepts = 0, small = 0, rejected = 0;
    for (int64_t i = 0; i < cases; ++i) {
      int64_t d = rng.range(1, 7);
      // Mostly the minimal window K + d - 1, sometimes wider; one case in
      // five a window one row too small (where that is still >= K).
      int64_t window = c.K + d - 1;
      bool tooSmall = i % 5 == 4 && d >= 2 && c.K >= 2;
      if (tooSmall)
        window -= 1;
      else if (rng.unit() < 0.3)
        window += rng.range(1, 5);
      ref::VerifySchedule s = ref::randomVerifySchedule(rng, c.K, d, window);
      Outcome o = runSchedule(c, kernels, s, rng);
      accepts += o.accepts;
      rejected += o.rejected;
      small += tooSmall;
      if (o.ok) {
        ++ok;
        continue;
      }
      ++bad;
      if (bad <= 5)
        std::printf("FAIL: %s case %lld (%s): %s\n", c.name().c_str(),
                    (long long)i, s.describe().c_str(), o.why.c_str());
    }
    std::printf("%s: %s: %lld schedules (%lld with a window one row too "
                "small), %lld verify steps accepted or rolled back, %lld "
                "rollbacks rejected by the store\n",
                bad ? "FAIL" : "PASS", c.name().c_str(), (long long)cases,
                (long long)small, (long long)accepts, (long long)rejected);
    passed += ok;
    failed += bad;
  }
  std::printf("%lld passed, %lld failed\n", (long long)passed,
              (long long)failed);
  return failed ? 1 : 0;
}
