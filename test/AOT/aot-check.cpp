//===- aot-check.cpp - ahead-of-time kernels vs the JIT -------------------===//
//
// The kernels kpool-aot compiled into this executable and the kernels the
// JIT compiles at run time come from the same module and pipeline, so they
// must agree bit for bit: on every op, for a ragged call with cached
// prefixes, a padded ring, non-identity slots, a strided k and bad metadata
// (no validation, the kernels' guards only).
//
//===----------------------------------------------------------------------===//

#include "kpool_aot_bf16_d128_k4.h"
#include "kpool_aot_f16_d8_k1.h"
#include "kpool_aot_f32_d20_k3.h"

#include "Reference/Reference.h"
#include "kpool/Runtime/Jit.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace kpool;

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  (ok ? passed : failed)++;
}

template <typename T>
bool same(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Runs all four ops through `aot` and `jit` on the same inputs.
void compare(const KernelConfig &config, const KernelSet &aot,
             const KernelSet &jit, unsigned seed) {
  const int64_t D = config.headDim, K = config.kpool;
  const int64_t es = elementTypeSize(config.elementType);
  std::string name = std::string(elementTypeName(config.elementType)) +
                     " head_dim " + std::to_string(D) + " kpool " +
                     std::to_string(K);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 3.f);
  auto bytes = [&](int64_t n) {
    std::vector<uint8_t> v(n * es);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = reference::roundToBits(config.elementType, dist(rng));
      std::memcpy(&v[i * es], &bits, es);
    }
    return v;
  };
  // Five requests; request 3 has reversed offsets, request 4 reaches past
  // k; slot of request 2 is out of range. k rows have a padded stride.
  const int64_t rows = 23, rowStride = D + 5, slots = 6,
                slotStride = 2 * K * D + 7;
  std::vector<uint32_t> iro = {0, 7, 8, 19, 15, 40};
  std::vector<uint32_t> cache = {0, 5, 70001, 3, 1};
  std::vector<uint32_t> slot = {3, 0, 9, 5, 1};
  const int64_t B = 5;
  std::vector<uint8_t> k = bytes(rows * rowStride), g = bytes(rows * rowStride);
  std::vector<float> ape(K * D);
  for (float &a : ape)
    a = dist(rng);
  std::vector<uint8_t> ring = bytes(slots * slotStride);
  View kV{k.data(), 2, {rows, D}, {rowStride, 1}};
  View gV{g.data(), 2, {rows, D}, {rowStride, 1}};
  View apeV = denseView(ape.data(), {K, D});
  View iroV = denseView(iro.data(), {B + 1}),
       cacheV = denseView(cache.data(), {B}),
       slotV = denseView(slot.data(), {B});

  std::vector<uint32_t> proA(B + 1), proJ(B + 1);
  PoolOffsetsArgs offsets{};
  offsets.input_row_offsets = iroV;
  offsets.cache_lengths = cacheV;
  offsets.pool_row_offsets = denseView(proA.data(), {B + 1});
  aot.poolOffsets(offsets, Validation::Trust);
  offsets.pool_row_offsets = denseView(proJ.data(), {B + 1});
  jit.poolOffsets(offsets, Validation::Trust);
  check(same(proA, proJ), name + ": pool_offsets");

  int64_t P = proJ[B] + 2;
  std::vector<uint8_t> pooledA(P * D * es, 0x5a), pooledJ(P * D * es, 0x5a);
  CompressArgs c{};
  c.k = kV;
  c.gate = gV;
  c.ape = apeV;
  c.input_row_offsets = iroV;
  c.cache_lengths = cacheV;
  c.pooled = denseView(pooledA.data(), {P, D});
  c.pool_row_offsets = denseView(proA.data(), {B + 1});
  aot.compress(c, Validation::Trust);
  c.pooled = denseView(pooledJ.data(), {P, D});
  c.pool_row_offsets = denseView(proJ.data(), {B + 1});
  jit.compress(c, Validation::Trust);
  check(same(pooledA, pooledJ), name + ": compress");

  View ringA{nullptr, 4, {slots, 2, K, D}, {slotStride, K * D, D, 1}};
  std::vector<uint8_t> ringJ = ring;
  std::vector<uint8_t> closedRowsA(B * D * es), closedRowsJ(B * D * es);
  std::vector<int32_t> closedA(B), closedJ(B);
  std::vector<uint8_t> ringAcopy = ring;
  ringA.data = ringAcopy.data();
  View ringJV = ringA;
  ringJV.data = ringJ.data();
  RingCloseArgs r{};
  r.k = kV;
  r.gate = gV;
  r.ape = apeV;
  r.input_row_offsets = iroV;
  r.cache_lengths = cacheV;
  r.slot_idx = slotV;
  r.num_requests = int32_t(B);
  r.pooled = denseView(closedRowsA.data(), {B, D});
  r.closed_pool = denseView(closedA.data(), {B});
  r.tail = ringA;
  aot.ringClose(r, Validation::Trust);
  r.pooled = denseView(closedRowsJ.data(), {B, D});
  r.closed_pool = denseView(closedJ.data(), {B});
  r.tail = ringJV;
  jit.ringClose(r, Validation::Trust);
  check(same(closedRowsA, closedRowsJ) && same(closedA, closedJ),
        name + ": ring_close");

  SeedTailArgs t{};
  t.k = kV;
  t.gate = gV;
  t.input_row_offsets = iroV;
  t.cache_lengths = cacheV;
  t.slot_idx = slotV;
  t.num_requests = int32_t(B);
  t.tail = ringA;
  aot.seedTail(t, Validation::Trust);
  t.tail = ringJV;
  jit.seedTail(t, Validation::Trust);
  check(same(ringAcopy, ringJ), name + ": seed_tail");
  if (K > 1) // with kpool 1 every token closes its own pool
    check(!same(ringAcopy, ring), name + ": seed_tail wrote the ring");
}

template <typename BackendFn, typename ConfigFn>
void run(BackendFn backend, ConfigFn configFn, unsigned seed) {
  KernelConfig config = configFn();
  KernelSet aot(config, backend());
  Status status;
  kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  auto jit = KernelSet::get(config, status);
  if (!jit) {
    check(false, "JIT: " + status.message());
    return;
  }
  compare(config, aot, *jit, seed);
}

} // namespace

int main() {
  run(kpool_bf16_d128_k4_backend, kpool_bf16_d128_k4_config, 1);
  run(kpool_f32_d20_k3_backend, kpool_f32_d20_k3_config, 2);
  run(kpool_f16_d8_k1_backend, kpool_f16_d8_k1_config, 3);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
