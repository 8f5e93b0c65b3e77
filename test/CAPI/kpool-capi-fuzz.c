/*===- kpool-capi-fuzz.c - a bounded random driver of the C runtime API ---===*\
|*                                                                            *|
|* Calls the four ops and the pool store with random operands: random         *|
|* metadata (reversed, overlong, non-monotone offsets, bad slots, any        *|
|* num_requests), random geometry mistakes (ranks, sizes, a NULL data         *|
|* pointer, sizes whose element count overflows), validation on and off.     *|
|* Every buffer sits between canaries. A call must return (an error or       *|
|* success), never touch a canary, and, when it fails, leave its outputs as   *|
|* they were. Deterministic for a seed.                                       *|
|*                                                                            *|
|* usage: kpool-capi-fuzz-test [iterations [seed]]                           *|
|* (benchmarks-style long runs: a large iteration count).                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// RUN: kpool-capi-fuzz-test 3000 1 | FileCheck %s
// RUN: kpool-capi-fuzz-test 3000 2 | FileCheck %s
// CHECK: fuzz: {{[0-9]+}} calls ({{[0-9]+}} errors, {{[0-9]+}} succeeded), 0 canary hits, 0 changed-on-error

#include "kpool-c/Runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 8, K = 3, CANARY = 64 };
static const uint8_t kCanary = 0xA5;

static uint64_t state;
static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
static int64_t below(int64_t n) { return n > 0 ? (int64_t)(next() % n) : 0; }

/// A buffer of `bytes` between two canary zones.
typedef struct {
  uint8_t *raw;
  size_t bytes;
} Buffer;

static Buffer alloc(size_t bytes) {
  Buffer b = {malloc(bytes + 2 * CANARY), bytes};
  memset(b.raw, kCanary, bytes + 2 * CANARY);
  return b;
}
static void *data(Buffer b) { return b.raw + CANARY; }
static int canaryHit(Buffer b) {
  for (size_t i = 0; i < CANARY; ++i)
    if (b.raw[i] != kCanary || b.raw[CANARY + b.bytes + i] != kCanary)
      return 1;
  return 0;
}

static KPoolView view(void *p, int64_t rank, const int64_t *sizes) {
  KPoolView v;
  memset(&v, 0, sizeof v);
  v.data = p;
  v.rank = rank;
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    v.sizes[i] = sizes[i];
    v.strides[i] = stride;
    stride *= sizes[i];
  }
  return v;
}

/// Random metadata values: mostly plausible, sometimes anything.
static uint32_t value(uint32_t plausible) {
  switch (below(8)) {
  case 0:
    return (uint32_t)next();
  case 1:
    return 0xFFFFFFFFu;
  case 2:
    return plausible + (uint32_t)below(3);
  default:
    return plausible;
  }
}

/// A geometry mistake now and then: breaks one view so that the call must
/// report it (or, for a NULL pointer on an empty view, may succeed).
static void mangle(KPoolView *v) {
  switch (below(40)) {
  case 0:
    v->data = NULL;
    break;
  case 1:
    v->rank = below(6) - 1;
    break;
  case 2:
    v->sizes[0] = INT64_MAX;
    break;
  case 3:
    v->sizes[0] = (int64_t)1 << 61;
    v->data = NULL;
    break;
  case 4:
    if (v->rank > 1)
      v->sizes[v->rank - 1] += 1;
    break;
  default:
    break;
  }
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000;
  state = argc > 2 ? strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ull + 1
                   : 0x2545F4914F6CDD1Dull;
  KPoolKernelSet *ks = NULL;
  KPoolError *err = kpoolKernelSetCreate(KPOOL_F32, D, K, false, 16, &ks);
  if (err) {
    printf("create: %s\n", kpoolErrorMessage(err));
    return 1;
  }
  long calls = 0, errors = 0, hits = 0, changed = 0;
  float ape[K * D];
  for (int i = 0; i < K * D; ++i)
    ape[i] = (float)(i % 5) - 2.0f;
  KPoolPoolStore *store = NULL;
  kpoolPoolStoreCreate(ks, 4, ape, &store);

  for (long it = 0; it < iterations; ++it) {
    int64_t rows = below(20), batch = below(5), pooledRows = below(8),
            slots = 1 + below(4);
    Buffer bk = alloc(rows * D * 4), bg = alloc(rows * D * 4),
           bape = alloc(K * D * 4), biro = alloc((batch + 1) * 4),
           bpro = alloc((batch + 1) * 4), bcache = alloc(batch * 4 + 4),
           bslots = alloc(batch * 4 + 4), bpooled = alloc(pooledRows * D * 4),
           btail = alloc(slots * 2 * K * D * 4), bclosedRows = alloc(batch * D * 4),
           bclosed = alloc(batch * 4 + 4);
    Buffer all[] = {bk, bg, bape, biro, bpro, bcache, bslots, bpooled, btail,
                    bclosedRows, bclosed};
    float *k = data(bk), *g = data(bg);
    for (int64_t i = 0; i < rows * D; ++i) {
      k[i] = (float)below(100) / 10.0f - 5.0f;
      g[i] = (float)below(100) / 10.0f - 5.0f;
    }
    memcpy(data(bape), ape, sizeof ape);
    uint32_t *iro = data(biro), *pro = data(bpro), *cache = data(bcache),
             *slot = data(bslots);
    uint32_t at = 0, pools = 0;
    for (int64_t b = 0; b <= batch; ++b) {
      iro[b] = value(at);
      pro[b] = value(pools);
      if (b < batch) {
        uint32_t n = (uint32_t)below(6);
        cache[b] = value((uint32_t)below(7));
        slot[b] = value((uint32_t)below(slots));
        at += n;
        pools += (cache[b] + n) / K - (cache[b] + K - 1) / K;
      }
    }
    memset(data(bpooled), 0x11, pooledRows * D * 4);
    memset(data(btail), 0x22, slots * 2 * K * D * 4);
    memset(data(bclosedRows), 0x33, batch * D * 4);
    memset(data(bclosed), 0x44, batch * 4);

    int64_t s2[2] = {rows, D}, sApe[2] = {K, D}, sB1[1] = {batch + 1},
            sB[1] = {batch}, sP[2] = {pooledRows, D},
            sT[4] = {slots, 2, K, D}, sC[2] = {batch, D};
    KPoolView vk = view(data(bk), 2, s2), vg = view(data(bg), 2, s2),
              vape = view(data(bape), 2, sApe),
              viro = view(iro, 1, sB1), vpro = view(pro, 1, sB1),
              vcache = view(cache, 1, sB), vslots = view(slot, 1, sB),
              vpooled = view(data(bpooled), 2, sP),
              vtail = view(data(btail), 4, sT),
              vcr = view(data(bclosedRows), 2, sC),
              vclosed = view(data(bclosed), 1, sB);
    KPoolView *views[] = {&vk, &vg, &vape, &viro, &vpro, &vcache, &vslots,
                          &vpooled, &vtail, &vcr, &vclosed};
    mangle(views[below(11)]);
    bool validate = below(2);
    int32_t n = below(4) ? (int32_t)batch : (int32_t)(below(10) - 3);

    // Snapshots of the outputs, to check that a failed call changed none.
    size_t outBytes[4] = {pooledRows * D * 4, slots * 2 * K * D * 4,
                          batch * D * 4, batch * 4};
    Buffer outs[4] = {bpooled, btail, bclosedRows, bclosed};
    uint8_t *before[4];
    for (int i = 0; i < 4; ++i) {
      before[i] = malloc(outBytes[i] + 1);
      memcpy(before[i], data(outs[i]), outBytes[i]);
    }
    int op = (int)below(5);
    switch (op) {
    case 0:
      err = kpoolCompress(ks, &vpooled, &vk, &vg, &vape, &viro, &vpro,
                          &vcache, validate);
      break;
    case 1:
      err = kpoolSeedTail(ks, &vtail, &vk, &vg, &viro, &vcache, &vslots, n,
                          validate);
      break;
    case 2:
      err = kpoolRingClose(ks, &vcr, &vclosed, &vtail, &vk, &vg, &vape, &viro,
                           &vcache, &vslots, n, validate);
      break;
    case 3:
      err = kpoolPoolOffsets(ks, &vpro, &viro, &vcache, validate);
      break;
    default: {
      int64_t produced = 0;
      err = kpoolPoolStoreStep(store, &vk, &vg, batch, iro, slot, &produced);
      if (below(8) == 0)
        kpoolPoolStoreReset(store, slot[0] % 4);
      break;
    }
    }
    ++calls;
    if (err) {
      ++errors;
      kpoolErrorDestroy(err);
      for (int i = 0; i < 4; ++i)
        if (memcmp(before[i], data(outs[i]), outBytes[i]) != 0) {
          if (changed++ < 5)
            printf("changed on error: op %d output %d (iteration %ld)\n", op,
                   i, it);
        }
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
      if (canaryHit(all[i])) {
        if (hits++ < 5)
          printf("canary hit: op %d buffer %zu (iteration %ld)\n", op, i, it);
      }
    for (int i = 0; i < 4; ++i)
      free(before[i]);
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
      free(all[i].raw);
  }
  printf("fuzz: %ld calls (%ld errors, %ld succeeded), %ld canary hits, %ld "
         "changed-on-error\n",
         calls, errors, calls - errors, hits, changed);
  kpoolPoolStoreDestroy(store);
  kpoolKernelSetDestroy(ks);
  return hits || changed;
}
