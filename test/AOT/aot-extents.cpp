//===- aot-extents.cpp - raw entry points given contradicting sizes -------===//
//
// The ahead-of-time kernels' raw C entry points (kpool-aot's header, no
// validation) handed views whose sizes contradict the configuration (f32,
// head_dim 20, kpool 3): the kernels take every extent at run time, so their
// own checks see it, write nothing (ring_close: -1 and zero rows) and record
// the Extent finding, decoded in the words host validation uses. Before the
// kernel module's extents were dynamic, the 'D' and 'K' extents were static
// in the kernels' types: a 24-wide k went unseen and was read as 20 wide.
//
//===----------------------------------------------------------------------===//

#include "kpool_aot_f32_d20_k3.h"

#include "kpool/Runtime/KernelSet.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {
int failures = 0, passes = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  ok ? ++passes : ++failures;
}

KPoolView view(void *data, std::vector<int64_t> sizes) {
  KPoolView v{};
  v.data = data;
  v.rank = int64_t(sizes.size());
  int64_t stride = 1;
  for (int64_t d = v.rank - 1; d >= 0; --d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = stride;
    stride *= sizes[d];
  }
  return v;
}

/// What the status word `word` says, without its hex.
std::string message(uint64_t word) {
  std::string m = kpool::statusWordError(word).message();
  return m.substr(0, m.find(" (found by the kernels"));
}
} // namespace

int main() {
  const int64_t D = 20, K = 3, T = 6;
  std::vector<uint32_t> iro = {0, 3, 6}, cache = {0, 1}, pro = {0, 1, 2},
                        slots = {1, 0};
  std::vector<float> ape(K * D, 0.f);
  KPoolView iroV = view(iro.data(), {3}), cacheV = view(cache.data(), {2}),
            proV = view(pro.data(), {3}), slotsV = view(slots.data(), {2});

  // compress with keys 24 wide.
  {
    std::vector<float> k(T * 24, 1.f), pooled(4 * D, -1.f);
    KPoolView kV = view(k.data(), {T, 24}), apeV = view(ape.data(), {K, D}),
              outV = view(pooled.data(), {4, D});
    uint64_t status = 0;
    kpool_f32_d20_k3_compress(&outV, &kV, &kV, &apeV, &iroV, &proV, &cacheV,
                              &status, nullptr);
    bool untouched = true;
    for (float v : pooled)
      untouched &= v == -1.f;
    check(untouched, "compress: nothing written for 24-wide keys");
    check(message(status) ==
              "'k' dimension 1 is 24 at run time, expected 20 (head_dim)",
          "compress: " + message(status));
  }
  // ring_close with ape [2, 20] under kpool 3: -1 and zero rows.
  {
    std::vector<float> k(T * D, 1.f), tail(2 * 2 * K * D, 5.f),
        pooled(2 * D, 9.f), ape2(2 * D, 0.f);
    std::vector<int32_t> closed = {9, 9};
    KPoolView kV = view(k.data(), {T, D}), apeV = view(ape2.data(), {2, D}),
              tailV = view(tail.data(), {2, 2, K, D}),
              outV = view(pooled.data(), {2, D}),
              closedV = view(closed.data(), {2});
    uint64_t status = 0;
    kpool_f32_d20_k3_ring_close(&outV, &closedV, &tailV, &kV, &kV, &apeV, &iroV,
                                &cacheV, &slotsV, 2, &status, nullptr);
    bool defined = closed[0] == -1 && closed[1] == -1;
    for (float v : pooled)
      defined &= v == 0.f;
    check(defined, "ring_close: closed_pool -1 and zero rows");
    check(message(status) ==
              "'ape' dimension 0 is 2 at run time, expected 3 (kpool)",
          "ring_close: " + message(status));
  }
  // seed_tail with a ring window of 2 under kpool 3: the ring unchanged.
  {
    std::vector<float> k(T * D, 1.f), tail(2 * 2 * 2 * D, 5.f);
    KPoolView kV = view(k.data(), {T, D}),
              tailV = view(tail.data(), {2, 2, 2, D});
    uint64_t status = 0;
    kpool_f32_d20_k3_seed_tail(&tailV, &kV, &kV, &iroV, &cacheV, &slotsV, 2,
                               &status, nullptr);
    bool untouched = true;
    for (float v : tail)
      untouched &= v == 5.f;
    check(untouched, "seed_tail: the ring unchanged");
    check(message(status) ==
              "'tail' dimension 2 is 2 at run time, expected at least 3 "
              "(kpool)",
          "seed_tail: " + message(status));
  }
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
