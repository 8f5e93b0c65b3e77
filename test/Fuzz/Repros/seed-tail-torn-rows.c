// Repro of an open finding (docs/testing.md, "Findings"): seed_tail with
// OpenMP kernels and requests that share a ring slot (bad metadata, host
// validation off) leaves ring rows torn -- part one request's key row, part
// another's -- where the spec says each ring row holds the value one of them
// stores. Not run by lit (it fails until fixed, and it is a race).
//
//   clang-22 -O1 -Iinclude test/Fuzz/Repros/seed-tail-torn-rows.c \
//     -Lbuild/lib -lKPoolCAPI -Wl,-rpath,$PWD/build/lib -o torn && ./torn
//   -> "210 of 8000 ring rows torn" on a 2-core machine; exits 1.
#include "kpool-c/Runtime.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
enum { D = 4096, K = 2, B = 64, T = B * K };
int main(void) {
  KPoolKernelSet *ks;
  KPoolKernelConfig config = kpoolKernelConfigDefault();
  config.elementType = KPOOL_F32;
  config.headDim = D;
  config.kpool = K;
  config.openmp = true;
  KPoolError *e = kpoolKernelSetCreate(&config, &ks);
  if (e) { printf("%s\n", kpoolErrorMessage(e)); return 1; }
  float *k = malloc(sizeof(float) * T * D), *g = malloc(sizeof(float) * T * D);
  for (int r = 0; r < T; ++r)
    for (int d = 0; d < D; ++d) k[r * D + d] = g[r * D + d] = (float)(r / K);
  float *tail = calloc(2 * K * D, sizeof(float));
  uint32_t iro[B + 1], cache[B], slots[B];
  for (int b = 0; b <= B; ++b) iro[b] = b * K;
  for (int b = 0; b < B; ++b) { cache[b] = 0; slots[b] = 0; }
  KPoolSeedTailArgs a = {0};
  a.tail = (KPoolView){tail, 4, {1, 2, K, D}, {2 * K * D, K * D, D, 1}};
  a.k = (KPoolView){k, 2, {T, D}, {D, 1}};
  a.gate = (KPoolView){g, 2, {T, D}, {D, 1}};
  a.input_row_offsets = (KPoolView){iro, 1, {B + 1}, {1}};
  a.cache_lengths = (KPoolView){cache, 1, {B}, {1}};
  a.slot_idx = (KPoolView){slots, 1, {B}, {1}};
  a.num_requests = B;
  KPoolCallOptions trust = {NULL, NULL, KPOOL_VALIDATION_TRUST};
  int torn = 0, runs = 2000;
  for (int it = 0; it < runs; ++it) {
    e = kpoolSeedTail(ks, &a, &trust);
    if (e) { printf("%s\n", kpoolErrorMessage(e)); return 1; }
    for (int row = 0; row < 2 * K; ++row)
      for (int d = 1; d < D; ++d)
        if (tail[row * D + d] != tail[row * D]) { ++torn; break; }
  }
  printf("%d of %d ring rows torn (hold parts of two requests' rows)\n", torn, runs * 2 * K);
  return torn != 0;
}
