//===- Measure.h - side-by-side timing for the benchmarks -------*- C++ -*-===//
//
// The machines are shared and noisy, so candidates are compared in one run:
// every candidate is timed in each of several interleaved rounds, and the
// median (and the minimum) per candidate is reported.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_BENCHMARKS_MEASURE_H
#define KPOOL_BENCHMARKS_MEASURE_H

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace kpool::bench {

/// The CPU's model name (/proc/cpuinfo), for the figures' header line.
inline std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

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

/// One candidate's seconds per call: the fastest and the median sample.
struct Timing {
  double min = 0, median = 0;
  int samples = 0, reps = 0;
};

/// Like `measure`, with the repetitions per sample chosen per candidate: a
/// first timed call (after which the buffers are paged in and the kernels
/// loaded) sets `reps` so that a sample takes about `sampleSeconds`. The
/// rounds stay interleaved, so noise hits every candidate alike; a
/// candidate that has `minSamples` samples and has spent `budgetSeconds`
/// sits the remaining rounds out (the plain reference on a million tokens
/// takes seconds per call).
inline std::vector<Timing>
measureAdaptive(const std::vector<std::function<void()>> &fns, int rounds,
                double sampleSeconds, double budgetSeconds,
                int minSamples = 3) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  size_t n = fns.size();
  std::vector<std::vector<double>> samples(n);
  std::vector<int> reps(n);
  std::vector<double> spent(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    auto start = Clock::now();
    fns[i]();
    double once = std::max(seconds(start, Clock::now()), 1e-9);
    reps[i] =
        static_cast<int>(std::clamp(sampleSeconds / once, 1.0, 1000000.0));
  }
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(samples[i].size()) >= minSamples &&
          spent[i] >= budgetSeconds)
        continue;
      auto start = Clock::now();
      for (int j = 0; j < reps[i]; ++j)
        fns[i]();
      double total = seconds(start, Clock::now());
      spent[i] += total;
      samples[i].push_back(total / reps[i]);
    }
  std::vector<Timing> out(n);
  for (size_t i = 0; i < n; ++i) {
    auto &s = samples[i];
    std::sort(s.begin(), s.end());
    out[i] = {s.front(), s[s.size() / 2], static_cast<int>(s.size()), reps[i]};
  }
  return out;
}

} // namespace kpool::bench

#endif // KPOOL_BENCHMARKS_MEASURE_H
