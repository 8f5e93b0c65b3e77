//===- aot-extents.cpp - kernels given sizes that contradict them ---------===//
//
// The ahead-of-time kernels (f32, head_dim 20, kpool 3) called through their
// `_mlir_ciface_` entry points, below kpool-aot's C wrappers (which check
// every view first), with views whose sizes contradict the configuration:
// the kernels take every extent at run time, so their own checks see it,
// write nothing (ring_close: -1 and zero rows) and record the Extent
// finding ((operand id << 4 | dimension) << 8 | 11,
// kpool/ABI/StatusWord.h). The word must be the one the C wrapper's own
// check gives for the same arguments (`<prefix><op>_extents`): two
// implementations of the rule, which agree. Before the kernel module's
// extents were dynamic, the 'D' and 'K' extents were static in the kernels'
// types: a 24-wide k went unseen and was read as 20 wide.
//
//===----------------------------------------------------------------------===//

#include "kpool_aot_f32_d20_k3.h"

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/StatusWord.h"
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

/// The Extent finding's word for dimension `dim` of operand `name`.
uint64_t extent(const char *name, unsigned dim) {
  return kpool::status::encodeExtent(kpool::abi::operandId(name), dim);
}

/// Checks that `status` (the kernels' word) is the Extent finding for
/// dimension `dim` of `name`, the C wrapper's word `wrapper` for the same
/// arguments, and what it decodes to.
void checkWord(const std::string &op, uint64_t status, uint64_t wrapper,
               const char *name, unsigned dim) {
  std::string m = kpool::statusWordError(status).message();
  m = m.substr(0, m.find(" (found by the kernels or their entry point"));
  check(status == extent(name, dim),
        op + ": the kernels' status word " + std::to_string(status) + ", " + m);
  check(wrapper == status, op + ": the C wrapper's check gives " +
                               std::to_string(wrapper) + " too");
  check(m == "'" + std::string(name) + "' dimension " + std::to_string(dim) +
                 " contradicts the op (the other operands' extents) or the "
                 "kernels' configuration (head_dim, kpool)",
        op + ": the message names '" + name + "' dimension " +
            std::to_string(dim));
}

/// The descriptors the kernels take.
KPoolDescriptor1 d1(const KPoolView &v) { return KPOOL_AOT_DESCRIPTOR(1, &v); }
KPoolDescriptor2 d2(const KPoolView &v) { return KPOOL_AOT_DESCRIPTOR(2, &v); }
KPoolDescriptor4 d4(const KPoolView &v) { return KPOOL_AOT_DESCRIPTOR(4, &v); }
KPoolDescriptor1 statusOf(uint64_t *word) { return {word, word, 0, {1}, {1}}; }
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
    KPoolCompressArgs a{};
    a.pooled = view(pooled.data(), {4, D});
    a.k = a.gate = view(k.data(), {T, 24});
    a.ape = view(ape.data(), {K, D});
    a.input_row_offsets = iroV;
    a.pool_row_offsets = proV;
    a.cache_lengths = cacheV;
    uint64_t status = 0;
    KPoolDescriptor2 pooledD = d2(a.pooled), kD = d2(a.k), apeD = d2(a.ape);
    KPoolDescriptor1 iroD = d1(a.input_row_offsets),
                     proD = d1(a.pool_row_offsets),
                     cacheD = d1(a.cache_lengths), st = statusOf(&status);
    _mlir_ciface_kpool_f32_d20_k3_compress_memref(
        &pooledD, &kD, &kD, &apeD, &iroD, &proD, &cacheD, &st, nullptr);
    bool untouched = true;
    for (float v : pooled)
      untouched &= v == -1.f;
    check(untouched, "compress: nothing written for 24-wide keys");
    checkWord("compress", status, kpool_f32_d20_k3_compress_extents(&a), "k",
              1);
  }
  // ring_close with ape [2, 20] under kpool 3: -1 and zero rows.
  {
    std::vector<float> k(T * D, 1.f), tail(2 * 2 * K * D, 5.f),
        pooled(2 * D, 9.f), ape2(2 * D, 0.f);
    std::vector<int32_t> closed = {9, 9};
    KPoolRingCloseArgs a{};
    a.pooled = view(pooled.data(), {2, D});
    a.closed_pool = view(closed.data(), {2});
    a.tail = view(tail.data(), {2, 2, K, D});
    a.k = a.gate = view(k.data(), {T, D});
    a.ape = view(ape2.data(), {2, D});
    a.input_row_offsets = iroV;
    a.cache_lengths = cacheV;
    a.slot_idx = slotsV;
    a.num_requests = 2;
    uint64_t status = 0;
    KPoolDescriptor2 pooledD = d2(a.pooled), kD = d2(a.k), apeD = d2(a.ape);
    KPoolDescriptor4 tailD = d4(a.tail);
    KPoolDescriptor1 closedD = d1(a.closed_pool),
                     iroD = d1(a.input_row_offsets),
                     cacheD = d1(a.cache_lengths), slotsD = d1(a.slot_idx),
                     st = statusOf(&status);
    _mlir_ciface_kpool_f32_d20_k3_ring_close_memref(
        &pooledD, &closedD, &tailD, &kD, &kD, &apeD, &iroD, &cacheD, &slotsD,
        a.num_requests, &st, nullptr);
    bool defined = closed[0] == -1 && closed[1] == -1;
    for (float v : pooled)
      defined &= v == 0.f;
    check(defined, "ring_close: closed_pool -1 and zero rows");
    checkWord("ring_close", status, kpool_f32_d20_k3_ring_close_extents(&a),
              "ape", 0);
  }
  // seed_tail with a ring window of 2 under kpool 3: the ring unchanged.
  {
    std::vector<float> k(T * D, 1.f), tail(2 * 2 * 2 * D, 5.f);
    KPoolSeedTailArgs a{};
    a.tail = view(tail.data(), {2, 2, 2, D});
    a.k = a.gate = view(k.data(), {T, D});
    a.input_row_offsets = iroV;
    a.cache_lengths = cacheV;
    a.slot_idx = slotsV;
    a.num_requests = 2;
    uint64_t status = 0;
    KPoolDescriptor4 tailD = d4(a.tail);
    KPoolDescriptor2 kD = d2(a.k);
    KPoolDescriptor1 iroD = d1(a.input_row_offsets),
                     cacheD = d1(a.cache_lengths), slotsD = d1(a.slot_idx),
                     st = statusOf(&status);
    _mlir_ciface_kpool_f32_d20_k3_seed_tail_memref(
        &tailD, &kD, &kD, &iroD, &cacheD, &slotsD, a.num_requests, &st,
        nullptr);
    bool untouched = true;
    for (float v : tail)
      untouched &= v == 5.f;
    check(untouched, "seed_tail: the ring unchanged");
    checkWord("seed_tail", status, kpool_f32_d20_k3_seed_tail_extents(&a),
              "tail", 2);
  }
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
