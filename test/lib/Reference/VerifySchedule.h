//===- VerifySchedule.h - random speculative-decoding schedules -*- C++ -*-===//
//
// Random serving schedules with speculative decoding, for the differential
// tests of the ring window (docs/semantics.md, "Speculative decoding"):
// per step, each request is absent, brings a chunk of prefill, one decode
// token, or a verify step of 1 + d tokens (its accepted token and d
// drafts) of which none to all drafts are accepted afterwards. Test-only; the drivers (the CPU PoolStore
// test and the GPU check, emulated or on a device) make the token values and
// compare every pool with a one-shot compress of the accepted sequence.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_REFERENCE_VERIFYSCHEDULE_H
#define KPOOL_TEST_REFERENCE_VERIFYSCHEDULE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kpool::reference {

/// Deterministic random numbers (splitmix64).
struct SplitMix {
  uint64_t state;
  explicit SplitMix(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) {
    return lo + int64_t(next() % uint64_t(hi - lo + 1));
  }
  /// Uniform in [0, 1).
  double unit() { return double(next() >> 11) * 0x1.0p-53; }
};

/// The differential tests' generator: SplitMix seeded apart from the
/// schedules' (seed * golden + 1), with the draws they share.
struct TestRng : SplitMix {
  explicit TestRng(uint64_t seed)
      : SplitMix(seed * 0x9e3779b97f4a7c15ull + 1) {}
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  bool chance(double p) { return unit() < p; }
  /// Fisher-Yates.
  template <typename T> void shuffle(std::vector<T> &v) {
    for (size_t i = v.size(); i > 1; --i)
      std::swap(v[i - 1], v[size_t(next() % i)]);
  }
};

/// The next call of a chunked prefill: `counts[r]` = min(chunk, what is
/// left of request r's prompt), -1 for a request whose prompt is done
/// (absent from the call); empty when every prompt is done. `done(r)` is
/// the number of tokens request r has brought so far.
template <typename Done>
std::vector<int64_t> nextPrefillCall(const std::vector<int64_t> &prompts,
                                     Done done, int64_t chunk) {
  std::vector<int64_t> counts(prompts.size(), -1);
  bool any = false;
  for (size_t r = 0; r < prompts.size(); ++r)
    if (int64_t left = prompts[r] - int64_t(done(r)); left > 0) {
      counts[r] = left < chunk ? left : chunk;
      any = true;
    }
  if (!any)
    counts.clear();
  return counts;
}

/// What one request does in one step.
struct VerifyEntry {
  size_t request;   ///< index into VerifySchedule::slots
  int64_t count;    ///< tokens the call brings
  int64_t accepted; ///< of which the first `accepted` are kept
  bool verify;      ///< a verify step (accepted may be below count)
};

struct VerifySchedule {
  int64_t kpool, drafts, window;
  std::vector<uint32_t> slots;            ///< ring slot of each request
  std::vector<std::vector<VerifyEntry>> steps;
  /// Tokens each request keeps in the end (the accepted sequence).
  std::vector<int64_t> lengths;

  std::string describe() const {
    return "K " + std::to_string(kpool) + ", d " + std::to_string(drafts) +
           ", R " + std::to_string(window) + ", " +
           std::to_string(slots.size()) + " request(s), " +
           std::to_string(steps.size()) + " step(s)";
  }
};

/// A random schedule of 1..4 requests in distinct, non-dense slots of
/// [0, maxSlots), 3..10 steps, verify steps of 1 + `drafts` tokens.
inline VerifySchedule randomVerifySchedule(SplitMix &rng, int64_t kpool,
                                           int64_t drafts, int64_t window,
                                           int64_t maxSlots = 6) {
  VerifySchedule s{kpool, drafts, window, {}, {}, {}};
  int64_t requests = rng.range(1, std::min<int64_t>(4, maxSlots));
  std::vector<uint32_t> free;
  for (int64_t i = 0; i < maxSlots; ++i)
    free.push_back(uint32_t(i));
  for (int64_t r = 0; r < requests; ++r) {
    size_t pick = size_t(rng.range(0, int64_t(free.size()) - 1));
    s.slots.push_back(free[pick]);
    free.erase(free.begin() + pick);
  }
  s.lengths.assign(requests, 0);
  int64_t steps = rng.range(3, 10);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<VerifyEntry> step;
    for (int64_t r = 0; r < requests; ++r) {
      double u = rng.unit();
      VerifyEntry e{size_t(r), 0, 0, false};
      if (u < 0.15)
        continue; // not in this call
      if (u < 0.30 || (t == 0 && u < 0.6)) {
        e.count = rng.range(0, 3 * kpool + 4); // (chunked) prefill
        e.accepted = e.count;
      } else if (u < 0.45) {
        e.count = e.accepted = 1; // plain decode
      } else {
        // A verify step: the request's accepted token plus `drafts` drafts,
        // of which none to all are accepted.
        e.count = 1 + drafts;
        e.accepted = rng.range(1, 1 + drafts);
        e.verify = true;
      }
      s.lengths[r] += e.accepted;
      step.push_back(e);
    }
    s.steps.push_back(step);
  }
  return s;
}

/// The contract's condition, written out independently of the runtime's:
/// after a call that brought positions [c, end), continuing at `accepted`
/// keeps the pending pool's members in a ring of `window` rows.
inline bool rollbackKeepsRing(int64_t kpool, int64_t window, int64_t accepted,
                              int64_t end) {
  int64_t pendingStart = (accepted / kpool) * kpool;
  return accepted == pendingStart || end - pendingStart <= window;
}

} // namespace kpool::reference

#endif // KPOOL_TEST_REFERENCE_VERIFYSCHEDULE_H
