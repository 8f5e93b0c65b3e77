/*===- kpool-capi-stores.c - the paged pool store through its C API -------===*\
|*                                                                            *|
|* A serving loop into a paged FP8 pool cache (Hadamard rotation, absmax      *|
|* scales) through kpool-c/Stores.h: ragged calls of chunked prefill and      *|
|* verify steps of 1 + 3 tokens whose rejected drafts are junk, rolled back   *|
|* with accept (chained accepts too), pages handed out in reverse order.      *|
|* Every step's produced pools must be exactly its own requests' pools, and   *|
|* at the end every entry (FP8 codes and scale) must equal, byte for byte,    *|
|* the one-shot compress_cache of the accepted stream on the same kernel      *|
|* set. Then misuse: bad arguments, messages naming the request and the       *|
|* slot, a produced buffer too small, close.                                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// RUN: kpool-capi-stores-test 2>&1 | FileCheck %s

#include "kpool-c/Runtime.h"
#include "kpool-c/Stores.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 16, K = 4, DRAFTS = 3, SLOTS = 3, PAGE = 2, PAGES = 128, LEN = 240 };

static KPoolView view1(void *data, int64_t n) {
  KPoolView v = {data, 1, {n}, {1}};
  return v;
}
static KPoolView view2(void *data, int64_t rows, int64_t cols) {
  KPoolView v = {data, 2, {rows, cols}, {cols, 1}};
  return v;
}

static uint64_t state = 0x2545F4914F6CDD1DULL;
static uint32_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (uint32_t)state;
}
static float value(void) { return (float)((int)(next() % 2001) - 1000) / 250; }

/// Prints "ok" or the error (and frees it); returns whether it failed.
static int report(const char *what, KPoolError *error) {
  if (!error) {
    printf("%s: ok\n", what);
    return 0;
  }
  printf("%s: error: %s\n", what, kpoolErrorMessage(error));
  kpoolErrorDestroy(error);
  return 1;
}

static int failures = 0;
static void fail(const char *what, long long a, long long b) {
  if (failures++ < 10)
    printf("FAIL: %s (%lld, %lld)\n", what, a, b);
}

/// Each slot's stream of keys and gates, and junk for rejected drafts.
static float keys[SLOTS][LEN + DRAFTS + 1][D],
    gates[SLOTS][LEN + DRAFTS + 1][D];
static float junk[2][DRAFTS + 1][D];

int main(void) {
  KPoolKernelConfig config = kpoolKernelConfigDefault();
  config.elementType = KPOOL_F32;
  config.headDim = D;
  config.kpool = K;
  config.cache.entry = KPOOL_CACHE_FP8;
  config.cache.rotate = KPOOL_ROTATE_HADAMARD;
  config.cache.scale = KPOOL_SCALE_ABSMAX;
  KPoolKernelSet *ks = NULL;
  // CHECK: kernel set: ok
  if (report("kernel set", kpoolKernelSetCreate(&config, &ks)))
    return 1;
  float ape[K * D];
  for (int i = 0; i < K * D; ++i)
    ape[i] = value() / 2;
  for (int s = 0; s < SLOTS; ++s)
    for (int t = 0; t < LEN + DRAFTS + 1; ++t)
      for (int d = 0; d < D; ++d) {
        keys[s][t][d] = value();
        gates[s][t][d] = value();
      }
  for (int d = 0; d < D; ++d)
    for (int t = 0; t < DRAFTS + 1; ++t) {
      junk[0][t][d] = 100 + value();
      junk[1][t][d] = -100 + value();
    }

  int64_t order[PAGES];
  for (int i = 0; i < PAGES; ++i)
    order[i] = PAGES - 1 - i;
  KPoolPagedPoolStoreOptions options;
  memset(&options, 0, sizeof options);
  options.maxSlots = SLOTS;
  options.pageSize = PAGE;
  options.numPages = PAGES;
  options.ringWindow = K + DRAFTS - 1;
  options.pageOrder = order;
  KPoolPagedPoolStore *store = NULL;
  // CHECK: paged store: ok
  if (report("paged store",
             kpoolPagedPoolStoreCreate(ks, ape, &options, &store)))
    return 1;
  KPoolPagedPoolStoreLayout layout;
  report("layout", kpoolPagedPoolStoreGetLayout(store, &layout));
  // CHECK: layout: ok
  // CHECK-NEXT: layout: window 6, page stride 40, entry bytes 1, keys [128, 2,
  // 16] scales [128, 2] at +32
  printf("layout: window %lld, page stride %lld, entry bytes %lld, keys "
         "[%lld, %lld, %lld] scales [%lld, %lld] at +%lld\n",
         (long long)layout.ringWindow, (long long)layout.pageStride,
         (long long)layout.entryBytes, (long long)layout.cacheKeys.sizes[0],
         (long long)layout.cacheKeys.sizes[1],
         (long long)layout.cacheKeys.sizes[2],
         (long long)layout.cacheScales.sizes[0],
         (long long)layout.cacheScales.sizes[1],
         (long long)((char *)layout.cacheScales.data - (char *)layout.buffer));

  // The loop: each call brings, for a random subset of the slots, a
  // prefill chunk (1..9 tokens, all kept) or a verify step (the accepted
  // token and DRAFTS drafts, a random prefix accepted, the rest junk).
  int64_t kept[SLOTS] = {0, 0, 0};
  int64_t steps = 0, accepts = 0, produced = 0;
  static float rowsK[SLOTS * (DRAFTS + 10)][D], rowsG[SLOTS * (DRAFTS + 10)][D];
  KPoolProducedPool list[64];
  while (kept[0] < LEN - 12 || kept[1] < LEN - 12 || kept[2] < LEN - 12) {
    uint32_t iro[SLOTS + 1] = {0}, slot[SLOTS];
    int64_t accept[SLOTS], brought[SLOTS];
    int64_t n = 0, rows = 0;
    for (uint32_t s = 0; s < SLOTS; ++s) {
      if (kept[s] >= LEN - 12 || next() % 4 == 0)
        continue;
      int verify = kept[s] >= 8 && next() % 2;
      int64_t count = verify ? DRAFTS + 1 : 1 + next() % 9;
      int64_t good = verify ? 1 + next() % (DRAFTS + 1) : count;
      for (int64_t t = 0; t < count; ++t) {
        const float *srcK = t < good ? keys[s][kept[s] + t] : junk[0][t];
        const float *srcG = t < good ? gates[s][kept[s] + t] : junk[1][t];
        memcpy(rowsK[rows], srcK, sizeof rowsK[0]);
        memcpy(rowsG[rows], srcG, sizeof rowsG[0]);
        ++rows;
      }
      slot[n] = s;
      accept[n] = good;
      brought[n] = count;
      iro[n + 1] = iro[n] + (uint32_t)count;
      ++n;
    }
    if (!n)
      continue;
    KPoolView vk = view2(rowsK, rows, D), vg = view2(rowsG, rows, D);
    int64_t count = -1;
    KPoolError *e = kpoolPagedPoolStoreStep(store, &vk, &vg, n, iro, slot, list,
                                            64, &count);
    if (e) {
      printf("FAIL: step: %s\n", kpoolErrorMessage(e));
      kpoolErrorDestroy(e);
      return 1;
    }
    ++steps;
    // The step's own pools, in order: per request, [c/K, (c+n)/K).
    int64_t at = 0;
    for (int64_t b = 0; b < n; ++b) {
      int64_t c = kept[slot[b]];
      for (int64_t p = c / K; p < (c + brought[b]) / K; ++p, ++at)
        if (at >= count || list[at].slot != slot[b] || list[at].pool != p ||
            list[at].fromRing != (p * K < c))
          fail("a produced record is not the step's own", b, p);
    }
    if (at != count)
      fail("produced count", at, count);
    produced += count;
    for (int64_t b = 0; b < n; ++b) {
      uint32_t s = slot[b];
      int64_t before = kept[s];
      if (accept[b] < brought[b]) {
        // Sometimes keep one more draft first, then roll back further (a
        // chained accept). With a window of K + DRAFTS - 1 rows the ring
        // holds what every accepted length of a verify step needs.
        if (accept[b] + 1 < brought[b] && next() % 2) {
          KPoolError *first =
              kpoolPagedPoolStoreAccept(store, s, accept[b] + 1);
          ++accepts;
          if (first)
            fail("a chained accept refused", s, accept[b] + 1);
          kpoolErrorDestroy(first);
        }
        KPoolError *second = kpoolPagedPoolStoreAccept(store, s, accept[b]);
        ++accepts;
        if (second) {
          // Refused: the rejected drafts would stay. Not with a window of
          // K + DRAFTS - 1 rows.
          printf("FAIL: accept: %s\n", kpoolErrorMessage(second));
          kpoolErrorDestroy(second);
          return 1;
        }
      }
      kept[s] = before + accept[b];
      if (kpoolPagedPoolStoreGetTokens(store, s) != kept[s])
        fail("tokens after accept", kpoolPagedPoolStoreGetTokens(store, s),
             kept[s]);
    }
  }
  // CHECK: loop: {{[0-9]+}} steps, {{[0-9]+}} accepts, {{[0-9]+}} pools
  // produced
  printf("loop: %lld steps, %lld accepts, %lld pools produced\n",
         (long long)steps, (long long)accepts, (long long)produced);

  // One shot: compress_cache of each slot's accepted stream into a cache of
  // its own, every entry compared byte for byte.
  int64_t entries = 0;
  for (uint32_t s = 0; s < SLOTS; ++s) {
    int64_t n = kept[s], pools = n / K, pages = (pools + PAGE - 1) / PAGE;
    static uint8_t codes[PAGES][PAGE][D];
    static float scales[PAGES][PAGE];
    static float pooled[LEN][D];
    uint32_t table[PAGES], iro[2] = {0, (uint32_t)n}, pro[2] = {0, 0},
                           cache[1] = {0};
    for (int64_t i = 0; i < pages; ++i)
      table[i] = (uint32_t)i;
    KPoolCompressCacheArgs a;
    memset(&a, 0, sizeof a);
    a.pooled = view2(pooled, pools, D);
    a.cache_keys = view2(codes, pages, PAGE);
    a.cache_keys.rank = 3;
    a.cache_keys.sizes[2] = D;
    a.cache_keys.strides[0] = PAGE * D;
    a.cache_keys.strides[1] = D;
    a.cache_keys.strides[2] = 1;
    a.cache_scales = view2(scales, pages, PAGE);
    a.k = view2(keys[s], n, D);
    a.gate = view2(gates[s], n, D);
    a.ape = view2(ape, K, D);
    a.input_row_offsets = view1(iro, 2);
    pro[1] = (uint32_t)pools;
    a.pool_row_offsets = view1(pro, 2);
    a.cache_lengths = view1(cache, 1);
    a.block_table = view2(table, 1, pages);
    if (report("one-shot", kpoolCompressCache(ks, &a, NULL)))
      return 1;
    if (kpoolPagedPoolStoreGetNumPools(store, s) != pools)
      fail("pools", kpoolPagedPoolStoreGetNumPools(store, s), pools);
    for (int64_t p = 0; p < pools; ++p, ++entries) {
      uint8_t got[D];
      float scale = -1;
      KPoolError *e =
          kpoolPagedPoolStoreGetEntry(store, s, p, got, sizeof got, &scale);
      if (e) {
        printf("FAIL: entry: %s\n", kpoolErrorMessage(e));
        kpoolErrorDestroy(e);
        return 1;
      }
      if (memcmp(got, codes[p / PAGE][p % PAGE], D) ||
          memcmp(&scale, &scales[p / PAGE][p % PAGE], 4))
        fail("an entry differs from one-shot compression (slot, pool)", s, p);
    }
  }
  // CHECK: one-shot: ok
  // CHECK: entries equal to one-shot compression: {{[1-9][0-9]*}}, 0 failed
  printf("entries equal to one-shot compression: %lld, %d failed\n",
         (long long)entries, failures);

  // Pages: the slot's in block-table order, taken from the reversed list.
  uint32_t pages[PAGES];
  int64_t count = 0;
  report("pages", kpoolPagedPoolStoreGetPages(store, 0, pages, PAGES, &count));
  // CHECK: pages: ok
  // CHECK-NEXT: free: ok
  // CHECK-NEXT: slot 0 has {{[1-9][0-9]*}} pages; its, the other slots' and the
  // free ones: 128
  int64_t free = 0;
  report("free", kpoolPagedPoolStoreGetFreePages(store, NULL, 0, &free));
  int64_t total = free;
  for (uint32_t s = 0; s < SLOTS; ++s) {
    int64_t c = 0;
    kpoolPagedPoolStoreGetPages(store, s, NULL, 0, &c);
    total += c;
  }
  printf("slot 0 has %lld pages; its, the other slots' and the free ones: "
         "%lld\n",
         (long long)count, (long long)total);

  // Misuse: messages name the request, the slot and the field.
  uint32_t iro2[3] = {0, 2, 4}, bad[2] = {0, SLOTS};
  KPoolView vk = view2(keys[0], 4, D), vg = view2(gates[0], 4, D);
  // CHECK: slot: error: step: request 1: slot_idx[1] = 3 is not below max_slots
  // = 3
  report("slot",
         kpoolPagedPoolStoreStep(store, &vk, &vg, 2, iro2, bad, NULL, 0, NULL));
  uint32_t twice[2] = {1, 1};
  // CHECK: twice: error: step: request 1: slot_idx[1] = 1 is also the slot of
  // request 0
  report("twice", kpoolPagedPoolStoreStep(store, &vk, &vg, 2, iro2, twice, NULL,
                                          0, NULL));
  // CHECK: small: error: step: 'produced' has room for 1 records, a call of 4
  // rows of 'k' and 2 requests may produce 3
  uint32_t two[2] = {0, 1};
  report("small",
         kpoolPagedPoolStoreStep(store, &vk, &vg, 2, iro2, two, list, 1, NULL));
  // CHECK: null k: error: step: 'k' is a null view
  report("null k", kpoolPagedPoolStoreStep(store, NULL, &vg, 2, iro2, two, NULL,
                                           0, NULL));
  // CHECK: accept range: error: accept: slot 0: accepted = 99 is outside
  report("accept range", kpoolPagedPoolStoreAccept(store, 0, 99));
  uint8_t tiny[4];
  // CHECK: tiny entry: error: entry: 'values' has 4 bytes, an entry has 16
  report("tiny entry",
         kpoolPagedPoolStoreGetEntry(store, 0, 0, tiny, sizeof tiny, NULL));
  // CHECK: no pool: error: entry: slot 0: pool 1000 is not among its
  report("no pool", kpoolPagedPoolStoreGetEntry(store, 0, 1000, NULL, 0, NULL));
  // CHECK: pages of slot 3: error: pages: slot 3 is not below max_slots = 3
  report("pages of slot 3",
         kpoolPagedPoolStoreGetPages(store, 3, pages, PAGES, &count));
  // CHECK: null options: error: paged pool store: the options are null
  KPoolPagedPoolStore *other = NULL;
  report("null options", kpoolPagedPoolStoreCreate(ks, ape, NULL, &other));
  options.pageSize = 0;
  // CHECK: page size 0: error: paged pool store: page_size must be in [1,
  // 2^31], got 0
  report("page size 0", kpoolPagedPoolStoreCreate(ks, ape, &options, &other));
  // CHECK: null store: error: step: the pool store is null
  report("null store",
         kpoolPagedPoolStoreStep(NULL, &vk, &vg, 2, iro2, two, NULL, 0, NULL));

  // Release and page exhaustion (naming the request that needs the pages).
  // CHECK: release: ok
  report("release", kpoolPagedPoolStoreRelease(store, 1));
  options.pageSize = PAGE;
  options.numPages = 3;
  options.pageOrder = NULL;
  KPoolPagedPoolStore *small = NULL;
  report("small store", kpoolPagedPoolStoreCreate(ks, ape, &options, &small));
  uint32_t big[3] = {0, 2, 40};
  KPoolView bk = view2(keys[0], 40, D), bg = view2(gates[0], 40, D);
  // CHECK: exhausted: error: step: request 1 (slot 1): its pools 0..8 need 5
  // page(s) of 2 entries, it has 0, so 5 new pages, but 3 of the 3 pages are
  // free
  report("exhausted",
         kpoolPagedPoolStoreStep(small, &bk, &bg, 2, big, two, NULL, 0, NULL));
  // CHECK: after exhaustion: tokens 0 0
  printf("after exhaustion: tokens %lld %lld\n",
         (long long)kpoolPagedPoolStoreGetTokens(small, 0),
         (long long)kpoolPagedPoolStoreGetTokens(small, 1));
  kpoolPagedPoolStoreDestroy(small);

  // Close: every later call fails cleanly, queries answer -1.
  kpoolPagedPoolStoreClose(store);
  kpoolPagedPoolStoreClose(store);
  // CHECK: after close: closed 1, tokens -1, pools -1
  printf("after close: closed %d, tokens %lld, pools %lld\n",
         kpoolPagedPoolStoreIsClosed(store),
         (long long)kpoolPagedPoolStoreGetTokens(store, 0),
         (long long)kpoolPagedPoolStoreGetNumPools(store, 0));
  // CHECK: step after close: error: step: the store is closed
  report("step after close",
         kpoolPagedPoolStoreStep(store, &vk, &vg, 2, iro2, two, NULL, 0, NULL));
  // CHECK: accept after close: error: accept: the store is closed
  report("accept after close", kpoolPagedPoolStoreAccept(store, 0, 0));
  // CHECK: entry after close: error: entry: the store is closed
  report("entry after close",
         kpoolPagedPoolStoreGetEntry(store, 0, 0, NULL, 0, NULL));
  kpoolPagedPoolStoreDestroy(store);
  kpoolPagedPoolStoreDestroy(NULL);
  kpoolKernelSetDestroy(ks);
  // CHECK: done
  printf("done\n");
  return failures != 0;
}
