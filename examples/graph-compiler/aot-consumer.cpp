//===- aot-consumer.cpp - precompiled kernels from the installed package --===//
//
// kpool_add_aot_kernels (from find_package(KPool)) compiles the kernels of
// one configuration ahead of time; this program links them and
// KPool::KPoolRuntimeCore only -- no MLIR at run time -- and runs
// pool_offsets and compress through the plain C entry points and through a
// validated kpool::KernelSet, which must agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "example_kernels.h"

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  // Two requests: 5 tokens after 1 cached, 4 tokens after none (kpool 2,
  // head_dim 8, f32).
  const int64_t D = 8, K = 2, rows = 9, B = 2;
  std::vector<float> k(rows * D), gate(rows * D), ape(K * D);
  for (int64_t i = 0; i < rows * D; ++i) {
    k[i] = float(i % 13) - 6.0f;
    gate[i] = float((i * 7) % 11) * 0.5f - 2.0f;
  }
  for (int64_t i = 0; i < K * D; ++i)
    ape[i] = float(i % 5) * 0.25f;
  std::vector<uint32_t> iro = {0, 5, 9}, cache = {1, 0}, pro(B + 1);

  KPoolView kV = kpool::denseView(k.data(), {rows, D});
  KPoolView gV = kpool::denseView(gate.data(), {rows, D});
  KPoolView apeV = kpool::denseView(ape.data(), {K, D});
  KPoolView iroV = kpool::denseView(iro.data(), {B + 1});
  KPoolView cacheV = kpool::denseView(cache.data(), {B});
  KPoolView proV = kpool::denseView(pro.data(), {B + 1});

  KPoolPoolOffsetsArgs offsets{};
  offsets.pool_row_offsets = proV;
  offsets.input_row_offsets = iroV;
  offsets.cache_lengths = cacheV;
  kpool_f32_d8_k2_pool_offsets(&offsets, /*status=*/nullptr,
                               /*stream=*/nullptr);
  std::printf("AOT pool_row_offsets: %u %u %u\n", pro[0], pro[1], pro[2]);

  int64_t pools = pro[B];
  std::vector<float> plain(pools * D), checked(pools * D);
  KPoolView plainV = kpool::denseView(plain.data(), {pools, D});
  KPoolView checkedV = kpool::denseView(checked.data(), {pools, D});
  kpool::CompressArgs c{};
  c.pooled = plainV;
  c.k = kV;
  c.gate = gV;
  c.ape = apeV;
  c.input_row_offsets = iroV;
  c.pool_row_offsets = proV;
  c.cache_lengths = cacheV;
  kpool_f32_d8_k2_compress(&c, /*status=*/nullptr, /*stream=*/nullptr);

  kpool_f32_d8_k2_register();
  kpool::Status status;
  auto kernels = kpool::KernelSet::getPrecompiled(kpool_f32_d8_k2_config(),
                                                  status);
  if (!kernels) {
    std::printf("getPrecompiled: %s\n", status.message().c_str());
    return 1;
  }
  c.pooled = checkedV;
  status = kernels->compress(c);
  bool same = status.ok() &&
              std::memcmp(plain.data(), checked.data(),
                          plain.size() * sizeof(float)) == 0;
  std::printf("AOT compress: %lld pools, C entry point and KernelSet agree: "
              "%s\n",
              (long long)pools, same ? "yes" : "no");

  // Validation names the request and field, and nothing runs.
  pro[2] = pro[1] + 7;
  status = kernels->compress(c);
  std::printf("AOT validation: %s\n", status.message().c_str());
  return same && !status.ok() ? 0 : 1;
}
