//===- Measure.h - side-by-side timing for the benchmarks -------*- C++ -*-===//
//
// The machines are shared and noisy, so candidates are compared in one run:
// every candidate is timed in each of several interleaved rounds, and the
// median per candidate is reported.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_BENCHMARKS_MEASURE_H
#define KPOOL_BENCHMARKS_MEASURE_H

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kpool::bench {

/// Median seconds per call of each candidate over `rounds` interleaved
/// rounds, each round running every candidate `reps` times after one
/// warm-up call (paging buffers in, loading kernels).
inline std::vector<double>
measure(const std::vector<std::function<void()>> &fns, int rounds, int reps) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> samples(fns.size());
  for (auto &fn : fns)
    fn();
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      auto start = Clock::now();
      for (int j = 0; j < reps; ++j)
        fns[i]();
      samples[i].push_back(
          std::chrono::duration<double>(Clock::now() - start).count() / reps);
    }
  std::vector<double> medians;
  for (auto &s : samples) {
    std::sort(s.begin(), s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

} // namespace kpool::bench

#endif // KPOOL_BENCHMARKS_MEASURE_H
