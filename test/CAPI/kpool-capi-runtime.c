/*===- kpool-capi-runtime.c - the kpool runtime through its C API ---------===*\
|*                                                                            *|
|* Runs the four kernels on C arrays (f32, head_dim 8, kpool 4), checks them  *|
|* against each other and a plain C computation, checks that bad metadata    *|
|* is an error naming the request and the field and leaves every output as  *|
|* it was, and drives a PoolStore through a prefill and a decode.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// No CUDA layer (libkpool_cuda_runtime.so named at a path that does not
// exist) and no kernel packs: the CUDA target fails with a message saying
// so, before compiling anything (kpool-capi-cuda.c has the CUDA target).
// RUN: env KPOOL_CUDA_RUNTIME=%t.missing/libkpool_cuda_runtime.so \
// RUN:   KPOOL_KERNEL_PACKS= kpool-capi-runtime-test 2>&1 | FileCheck %s

#include "kpool-c/Runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 8, K = 4, SLOTS = 3 };

static KPoolView view1(void *data, int64_t n) {
  KPoolView v = {data, 1, {n}, {1}};
  return v;
}
static KPoolView view2(void *data, int64_t rows, int64_t cols) {
  KPoolView v = {data, 2, {rows, cols}, {cols, 1}};
  return v;
}

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

/// The pooling function in double precision: the kernels must agree to f32
/// rounding.
static void poolRef(const float *keys[K], const float *gates[K],
                    const float *ape, float *out) {
  for (int d = 0; d < D; ++d) {
    double z[K], m = -INFINITY, sum = 0, acc = 0;
    for (int j = 0; j < K; ++j) {
      z[j] = (double)gates[j][d] + ape[j * D + d];
      m = z[j] > m ? z[j] : m;
    }
    for (int j = 0; j < K; ++j) {
      double e = exp(z[j] - m);
      sum += e;
      acc += e * keys[j][d];
    }
    out[d] = (float)(acc / sum);
  }
}

/// In [0, 1].
static float uniform(void) { return (float)((double)rand() / RAND_MAX); }

static float maxRelErr(const float *a, const float *b, int n) {
  float worst = 0;
  for (int i = 0; i < n; ++i) {
    float err = fabsf(a[i] - b[i]) / (fabsf(b[i]) + 1e-3f);
    worst = err > worst ? err : worst;
  }
  return worst;
}

int main(void) {
  KPoolKernelSet *ks = NULL;

  // CHECK: bad element type: error: kernel set: element type 7 is not one of
  report("bad element type",
         kpoolKernelSetCreate((KPoolElementType)7, D, K, false, 16, &ks));
  // CHECK: create: ok
  if (report("create", kpoolKernelSetCreate(KPOOL_F32, D, K, false, 16, &ks)))
    return 1;
  // CHECK: config: f32 8 4
  printf("config: %s %lld %lld\n",
         kpoolElementTypeName(kpoolKernelSetGetElementType(ks)),
         (long long)kpoolKernelSetGetHeadDim(ks),
         (long long)kpoolKernelSetGetKPool(ks));

  // 16 tokens: request 0 (slot 2) brings 9 tokens from cache 0, request 1
  // (slot 0) 7 tokens from cache 6 (positions 6..12: it closes pool 1 from
  // the ring, builds pool 2 and leaves position 12 open).
  float k[16 * D], gate[16 * D], ape[K * D];
  srand(7);
  for (int i = 0; i < 16 * D; ++i) {
    k[i] = uniform() * 2 - 1;
    gate[i] = (uniform() * 2 - 1) * 4;
  }
  for (int i = 0; i < K * D; ++i)
    ape[i] = uniform() - 0.5f;
  uint32_t iro[3] = {0, 9, 16}, cache[2] = {0, 6}, slots[2] = {2, 0};
  KPoolView vk = view2(k, 16, D), vgate = view2(gate, 16, D),
            vape = view2(ape, K, D), viro = view1(iro, 3),
            vcache = view1(cache, 2), vslots = view1(slots, 2);

  // pool_offsets: request 0 has pools 0 and 1, request 1 pool 2.
  uint32_t pro[3];
  KPoolView vpro = view1(pro, 3);
  // CHECK: pool_offsets: ok
  report("pool_offsets", kpoolPoolOffsets(ks, &vpro, &viro, &vcache, NULL, NULL, true));
  // CHECK: pool_row_offsets: 0 2 3
  printf("pool_row_offsets: %u %u %u\n", pro[0], pro[1], pro[2]);

  // compress against the C computation.
  float pooled[3 * D];
  KPoolView vpooled = view2(pooled, 3, D);
  // CHECK: compress: ok
  report("compress", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape, &viro,
                                   &vpro, &vcache, NULL, NULL, true));
  float expected[3 * D];
  for (int p = 0; p < 3; ++p) {
    // Pools 0, 1 of request 0 start at rows 0 and 4; pool 2 of request 1 at
    // row 9 + 2 (its first two tokens complete pool 1).
    int first = p < 2 ? 4 * p : 11;
    const float *keys[K], *gates[K];
    for (int j = 0; j < K; ++j) {
      keys[j] = k + (first + j) * D;
      gates[j] = gate + (first + j) * D;
    }
    poolRef(keys, gates, ape, expected + p * D);
  }
  // CHECK: compress matches: 1
  printf("compress matches: %d\n", maxRelErr(pooled, expected, 3 * D) < 1e-5f);

  // The ring: slot 0 holds positions 4, 5 of request 1's sequence. Make
  // them so that the closed pool is request 0's pool 1 over again (rows 4,
  // 5 then 9, 10 would not be; instead seed from a one-shot prefix).
  float tail[SLOTS * 2 * K * D];
  for (int i = 0; i < SLOTS * 2 * K * D; ++i)
    tail[i] = -7.0f; // sentinel
  KPoolView vtail = {tail, 4, {SLOTS, 2, K, D}, {2 * K * D, K * D, D, 1}};
  // seed_tail of this call keeps each request's last R = K positions:
  // request 0 ends at position 9 -> positions 5..8 (rows 5..8) in ring rows
  // 1, 2, 3, 0 of slot 2; request 1 ends at 13 -> positions 9..12 (rows
  // 12..15) in ring rows 1, 2, 3, 0 of slot 0.
  // CHECK: seed_tail: ok
  report("seed_tail", kpoolSeedTail(ks, &vtail, &vk, &vgate, &viro, &vcache,
                                    &vslots, 2, NULL, NULL, true));
  int seeded = 1;
  for (int r = 0; r < K; ++r) {
    int row0 = r == 0 ? 8 : 4 + r, row1 = r == 0 ? 15 : 11 + r;
    seeded &= memcmp(&tail[(2 * 2 * K + r) * D], &k[row0 * D], D * 4) == 0 &&
              memcmp(&tail[(2 * 2 * K + K + r) * D], &gate[row0 * D],
                     D * 4) == 0 &&
              memcmp(&tail[r * D], &k[row1 * D], D * 4) == 0 &&
              memcmp(&tail[(K + r) * D], &gate[row1 * D], D * 4) == 0;
  }
  int untouched = 1;
  for (int i = 0; i < SLOTS * 2 * K * D; ++i) {
    int slot = i / (2 * K * D);
    int written = slot == 2 || slot == 0;
    untouched &= written || tail[i] == -7.0f;
  }
  // CHECK: seeded: 1 rest untouched: 1
  printf("seeded: %d rest untouched: %d\n", seeded, untouched);

  // ring_close closes pool 1 of a request with cache 6 from a ring holding
  // positions 4, 5: put rows 4, 5 there and close with rows 6, 7; the pool
  // must be bit-identical to compress's pool 1 (rows 4..7).
  memcpy(&tail[(1 * 2 * K + 0) * D], &k[4 * D], 2 * D * 4);
  memcpy(&tail[(1 * 2 * K + K) * D], &gate[4 * D], 2 * D * 4);
  uint32_t iro2[2] = {6, 8}, cache2[1] = {6}, slot2[1] = {1};
  KPoolView viro2 = view1(iro2, 2), vcache2 = view1(cache2, 1),
            vslot2 = view1(slot2, 1);
  float closedRow[D];
  int32_t closed[1] = {42};
  KPoolView vclosedRow = view2(closedRow, 1, D), vclosed = view1(closed, 1);
  // CHECK: ring_close: ok
  report("ring_close",
         kpoolRingClose(ks, &vclosedRow, &vclosed, &vtail, &vk, &vgate, &vape,
                        &viro2, &vcache2, &vslot2, 1, NULL, NULL, true));
  // CHECK: closed pool 1, bit-identical to compress: 1
  printf("closed pool %d, bit-identical to compress: %d\n", closed[0],
         memcmp(closedRow, &pooled[1 * D], sizeof closedRow) == 0);

  // Bad metadata: an error naming the request and the field; no output
  // changes.
  float before[3 * D], tailBefore[SLOTS * 2 * K * D];
  memcpy(before, pooled, sizeof pooled);
  memcpy(tailBefore, tail, sizeof tail);
  uint32_t badIro[3] = {0, 9, 17};
  KPoolView vbadIro = view1(badIro, 3);
  // CHECK: overlong rows: error: compress: request 1: input_row_offsets[2] = 17
  // reaches past the 16 rows of 'k'
  report("overlong rows", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape,
                                        &vbadIro, &vpro, &vcache, NULL, NULL, true));
  uint32_t badSlots[2] = {2, 3};
  KPoolView vbadSlots = view1(badSlots, 2);
  // CHECK: bad slot: error: seed_tail: request 1: slot_idx[1] = 3 is not below
  // max_slots = 3
  report("bad slot", kpoolSeedTail(ks, &vtail, &vk, &vgate, &viro, &vcache,
                                   &vbadSlots, 2, NULL, NULL, true));
  uint32_t badPro[3] = {0, 1, 2};
  KPoolView vbadPro = view1(badPro, 3);
  // CHECK: bad pool rows: error: compress: request 0: pool_row_offsets[1] -
  // pool_row_offsets[0] = 1, but the request completes 2 pool(s)
  report("bad pool rows", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape, &viro,
                                        &vbadPro, &vcache, NULL, NULL, true));
  KPoolView vbadRank = vk;
  vbadRank.rank = 9;
  // CHECK: bad rank: error: compress: 'k' has rank 9
  report("bad rank", kpoolCompress(ks, &vpooled, &vbadRank, &vgate, &vape,
                                   &viro, &vpro, &vcache, NULL, NULL, true));
  // CHECK: null view: error: ring_close: 'tail' is a null view
  report("null view",
         kpoolRingClose(ks, &vclosedRow, &vclosed, NULL, &vk, &vgate, &vape,
                        &viro2, &vcache2, &vslot2, 1, NULL, NULL, true));

  // NULL data pointers in metadata views: an error, validated or not (the
  // kernels would dereference them).
  KPoolView vnullIro = viro, vnullPro = vpro, vnullSlots = vslot2;
  vnullIro.data = NULL;
  vnullPro.data = NULL;
  vnullSlots.data = NULL;
  for (int validate = 1; validate >= 0; --validate) {
    printf("validate %d\n", validate);
    // CHECK: validate 1
    // CHECK-NEXT: null iro: error: compress: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null pro: error: compress: 'pool_row_offsets' has no data pointer
    // CHECK-NEXT: null seed iro: error: seed_tail: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null seed slots: error: seed_tail: 'slot_idx' has no data pointer
    // CHECK-NEXT: null close iro: error: ring_close: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null close slots: error: ring_close: 'slot_idx' has no data pointer
    // CHECK-NEXT: null offsets iro: error: pool_offsets: 'input_row_offsets' has no data pointer
    // CHECK: validate 0
    // CHECK-NEXT: null iro: error: compress: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null pro: error: compress: 'pool_row_offsets' has no data pointer
    // CHECK-NEXT: null seed iro: error: seed_tail: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null seed slots: error: seed_tail: 'slot_idx' has no data pointer
    // CHECK-NEXT: null close iro: error: ring_close: 'input_row_offsets' has no data pointer
    // CHECK-NEXT: null close slots: error: ring_close: 'slot_idx' has no data pointer
    // CHECK-NEXT: null offsets iro: error: pool_offsets: 'input_row_offsets' has no data pointer
    report("null iro", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape,
                                     &vnullIro, &vpro, &vcache, NULL, NULL, validate));
    report("null pro", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape, &viro,
                                     &vnullPro, &vcache, NULL, NULL, validate));
    KPoolView vnullIro2 = viro2;
    vnullIro2.data = NULL;
    report("null seed iro",
           kpoolSeedTail(ks, &vtail, &vk, &vgate, &vnullIro2, &vcache2,
                         &vslot2, 1, NULL, NULL, validate));
    report("null seed slots",
           kpoolSeedTail(ks, &vtail, &vk, &vgate, &viro2, &vcache2,
                         &vnullSlots, 1, NULL, NULL, validate));
    report("null close iro",
           kpoolRingClose(ks, &vclosedRow, &vclosed, &vtail, &vk, &vgate,
                          &vape, &vnullIro2, &vcache2, &vslot2, 1, NULL, NULL, validate));
    report("null close slots",
           kpoolRingClose(ks, &vclosedRow, &vclosed, &vtail, &vk, &vgate,
                          &vape, &viro2, &vcache2, &vnullSlots, 1, NULL, NULL, validate));
    report("null offsets iro",
           kpoolPoolOffsets(ks, &vpro, &vnullIro, &vcache, NULL, NULL, validate));
  }
  // Sizes whose element count overflows 64 bits: not "no elements".
  KPoolView vhuge = view2(NULL, (int64_t)1 << 61, D);
  // CHECK: huge k: error: compress: 'k' has shape [2305843009213693952, 8], more elements than a view can address (2^60)
  report("huge k", kpoolCompress(ks, &vpooled, &vhuge, &vgate, &vape, &viro,
                                 &vpro, &vcache, NULL, NULL, false));
  KPoolView vhugeCache = view1(cache, INT64_MAX);
  // CHECK: huge batch: error: compress: 'cache_lengths' has shape [9223372036854775807], more elements than a view can address (2^60)
  report("huge batch", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape, &viro,
                                     &vpro, &vhugeCache, NULL, NULL, false));
  vhugeCache.sizes[0] = (int64_t)1 << 31;
  // CHECK: large batch: error: compress: 'cache_lengths' has 2147483648 entries; a batch has at most 2^31 - 1 requests
  report("large batch", kpoolCompress(ks, &vpooled, &vk, &vgate, &vape, &viro,
                                      &vpro, &vhugeCache, NULL, NULL, false));
  // CHECK: null set: type -1 head_dim -1 kpool -1
  printf("null set: type %d head_dim %lld kpool %lld\n",
         (int)kpoolKernelSetGetElementType(NULL),
         (long long)kpoolKernelSetGetHeadDim(NULL),
         (long long)kpoolKernelSetGetKPool(NULL));
  // The target: CPU by default. CUDA needs the CUDA layer.
  // CHECK: target: 0 (null set: -1)
  printf("target: %d (null set: %d)\n", kpoolKernelSetGetTarget(ks),
         kpoolKernelSetGetTarget(NULL));
  KPoolKernelSet *cudaSet = NULL;
  // CHECK: cuda: error: CUDA kernels: libkpool_cuda_runtime.so (the CUDA layer, which needs the CUDA driver libcuda.so.1) could not be loaded: {{.*}}.missing/libkpool_cuda_runtime.so: cannot open shared object file: No such file or directory
  report("cuda", kpoolKernelSetCreateForTarget(KPOOL_TARGET_CUDA, KPOOL_F32, D,
                                               K, false, 0, &cudaSet));
  // CHECK: cuda set is null: 1
  printf("cuda set is null: %d\n", cudaSet == NULL);
  // CHECK: bad target: error: kernel set: target 5 is not one of KPOOL_TARGET_CPU, KPOOL_TARGET_CUDA
  report("bad target", kpoolKernelSetCreateForTarget((KPoolTarget)5, KPOOL_F32,
                                                     D, K, false, 0, &cudaSet));
  // The kernel ABI, as the Python package reads it.
  // CHECK: abi: 8 kernels
  // CHECK-NEXT: abi: compress (kpoolCompress): pooled:o2e:?xD k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? pool_row_offsets:i1u:? cache_lengths:i1u:?
  // CHECK-NEXT: abi: seed_tail (kpoolSeedTail): tail:o4e:?x2x?xD k:i2e:?xD gate:i2e:?xD input_row_offsets:i1u:? cache_lengths:i1u:? slot_idx:i1u:? num_requests:s0i:
  // CHECK-NEXT: abi: ring_close (kpoolRingClose): pooled:o2e:?xD closed_pool:o1i:? tail:i4e:?x2x?xD k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? cache_lengths:i1u:? slot_idx:i1u:? num_requests:s0i:
  // CHECK-NEXT: abi: pool_offsets (kpoolPoolOffsets): pool_row_offsets:o1u:? input_row_offsets:i1u:? cache_lengths:i1u:?
  // CHECK-NEXT: abi: step (kpoolStep): closed:o2e:?xD closed_pool:o1i:? pool_row_offsets:o1u:? pooled:o2e:?xD tail:o4e:?x2x?xD k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? cache_lengths:i1u:? slot_idx:i1u:? num_requests:s0i:
  // CHECK-NEXT: abi: compress_cache (kpoolCompressCache): pooled:o2e:?xD cache_keys:o3c:?x?xD cache_scales:o2f:?x? k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? pool_row_offsets:i1u:? cache_lengths:i1u:? block_table:i2u:?x? status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: ring_close_cache (kpoolRingCloseCache): pooled:o2e:?xD closed_pool:o1i:? cache_keys:o3c:?x?xD cache_scales:o2f:?x? tail:i4e:?x2x?xD k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? cache_lengths:i1u:? slot_idx:i1u:? num_requests:s0i: block_table:i2u:?x? status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: step_cache (kpoolStepCache): closed:o2e:?xD closed_pool:o1i:? pool_row_offsets:o1u:? pooled:o2e:?xD tail:o4e:?x2x?xD cache_keys:o3c:?x?xD cache_scales:o2f:?x? k:i2e:?xD gate:i2e:?xD ape:i2f:KxD input_row_offsets:i1u:? cache_lengths:i1u:? slot_idx:i1u:? num_requests:s0i: block_table:i2u:?x? status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: kernel 8 is null: 1
  printf("abi: %lld kernels\n", (long long)kpoolKernelAbiGetNumKernels());
  for (int64_t i = 0; i < kpoolKernelAbiGetNumKernels(); ++i) {
    const KPoolKernelInfo *info = kpoolKernelAbiGetKernel(i);
    printf("abi: %s (%s):", info->name, info->capiFunction);
    for (int64_t j = 0; j < info->numOperands; ++j) {
      const KPoolOperandInfo *o = &info->operands[j];
      printf(" %s:%c%d%c:%s", o->name, "oisc"[o->role], o->rank,
             "euifscw"[o->kind], o->shape);
    }
    printf("\n");
  }
  printf("abi: kernel %lld is null: %d\n",
         (long long)kpoolKernelAbiGetNumKernels(),
         kpoolKernelAbiGetKernel(kpoolKernelAbiGetNumKernels()) == NULL);
  KPoolKernelSet *hugeSet = NULL;
  // CHECK: huge head_dim: error: kpool x head_dim = 4 x 4611686018427387904 is too large
  report("huge head_dim", kpoolKernelSetCreate(KPOOL_BF16, (int64_t)1 << 62,
                                               K, false, 16, &hugeSet));
  // A ring of 2^31 slots (512 GiB): an error, not std::bad_alloc.
  KPoolPoolStore *hugeStore = NULL;
  // CHECK: huge store: error: pool store: could not allocate the ring of 549755813888 bytes
  report("huge store",
         kpoolPoolStoreCreate(ks, (int64_t)1 << 31, ape, &hugeStore));
  // CHECK: huge store is null: 1
  printf("huge store is null: %d\n", hugeStore == NULL);

  // CHECK: outputs unchanged: 1 1
  printf("outputs unchanged: %d %d\n",
         memcmp(before, pooled, sizeof pooled) == 0,
         memcmp(tailBefore, tail, sizeof tail) == 0);

  // A pool store: a prefill of 6 tokens in slot 1, then 2 decode tokens;
  // pools 0 and 1 must equal compress's over the 8 tokens at once.
  KPoolPoolStore *store = NULL;
  // CHECK: store: ok
  report("store", kpoolPoolStoreCreate(ks, SLOTS, ape, &store));
  uint32_t stepIro[2] = {0, 6}, stepSlot[1] = {1};
  KPoolView prefillK = view2(k, 6, D), prefillGate = view2(gate, 6, D);
  int64_t produced = -1;
  // CHECK: prefill: ok
  report("prefill", kpoolPoolStoreStep(store, &prefillK, &prefillGate, 1,
                                       stepIro, stepSlot, &produced));
  // CHECK: produced 1, tokens 6
  printf("produced %lld, tokens %lld\n", (long long)produced,
         (long long)kpoolPoolStoreGetTokens(store, 1));
  for (int t = 6; t < 8; ++t) {
    uint32_t one[2] = {0, 1};
    KPoolView dk = view2(k + t * D, 1, D), dg = view2(gate + t * D, 1, D);
    report("decode",
           kpoolPoolStoreStep(store, &dk, &dg, 1, one, stepSlot, &produced));
  }
  // CHECK: decode: ok
  // CHECK: decode: ok
  int64_t count = 0;
  const KPoolProducedPool *last = kpoolPoolStoreGetProduced(store, &count);
  // CHECK: last step: 1 pool(s): slot 1 pool 1 from ring 1
  printf("last step: %lld pool(s): slot %u pool %lld from ring %d\n",
         (long long)count, last[0].slot, (long long)last[0].pool,
         last[0].fromRing);
  float storePools[2 * D];
  KPoolView vstorePools = view2(storePools, 2, D);
  // CHECK: copy: ok
  report("copy", kpoolPoolStoreCopyPools(store, 1, 0, 2, &vstorePools));
  // CHECK: store pools bit-identical to one-shot compress: 1
  printf("store pools bit-identical to one-shot compress: %d\n",
         memcmp(storePools, pooled, sizeof storePools) == 0);
  // CHECK: bad step: error: {{.*}}slot_idx[0] = 5 is not below max_slots = 3
  uint32_t badStepSlot[1] = {5};
  report("bad step", kpoolPoolStoreStep(store, &prefillK, &prefillGate, 1,
                                        stepIro, badStepSlot, &produced));
  // CHECK: after the bad step: tokens 8 pools 2
  printf("after the bad step: tokens %lld pools %lld\n",
         (long long)kpoolPoolStoreGetTokens(store, 1),
         (long long)kpoolPoolStoreGetNumPools(store, 1));
  // CHECK: bad reset: error: reset: slot 3 is not below max_slots = 3
  report("bad reset", kpoolPoolStoreReset(store, 3));
  // CHECK: reset: ok
  report("reset", kpoolPoolStoreReset(store, 1));
  // CHECK: after reset: tokens 0 pools 0 pool pointer null 1
  printf("after reset: tokens %lld pools %lld pool pointer null %d\n",
         (long long)kpoolPoolStoreGetTokens(store, 1),
         (long long)kpoolPoolStoreGetNumPools(store, 1),
         kpoolPoolStoreGetPool(store, 1, 0) == NULL);
  kpoolPoolStoreDestroy(store);

  // Speculative decoding: a ring window of K + 2 rows survives rejecting
  // both drafts of a verify step of 3 tokens; the store forgets the pool
  // the drafts completed and its length rolls back.
  // CHECK: bad window: error: pool store: ring_window must be 0 (kpool) or in [kpool = 4, 2^31], got 3
  report("bad window",
         kpoolPoolStoreCreateWithWindow(ks, SLOTS, 3, ape, &store));
  // CHECK: spec store: ok
  // CHECK-NEXT: spec store window 6
  report("spec store",
         kpoolPoolStoreCreateWithWindow(ks, SLOTS, K + 2, ape, &store));
  printf("spec store window %lld\n",
         (long long)kpoolPoolStoreGetRingWindow(store));
  uint32_t twoIro[2] = {0, 2}, threeIro[2] = {0, 3}, specSlot[1] = {2};
  KPoolView k2 = view2(k, 2, D), g2 = view2(gate, 2, D);
  KPoolView k3 = view2(k + 2 * D, 3, D), g3 = view2(gate + 2 * D, 3, D);
  report("spec prefill",
         kpoolPoolStoreStep(store, &k2, &g2, 1, twoIro, specSlot, &produced));
  // Positions 2, 3, 4: pool 0 completes, then both drafts are rejected.
  report("verify",
         kpoolPoolStoreStep(store, &k3, &g3, 1, threeIro, specSlot, &produced));
  // CHECK: verify: tokens 5 pools 1
  printf("verify: tokens %lld pools %lld\n",
         (long long)kpoolPoolStoreGetTokens(store, 2),
         (long long)kpoolPoolStoreGetNumPools(store, 2));
  // CHECK: accept 1: ok
  report("accept 1", kpoolPoolStoreAccept(store, 2, 1));
  // CHECK: after accept: tokens 3 pools 0
  printf("after accept: tokens %lld pools %lld\n",
         (long long)kpoolPoolStoreGetTokens(store, 2),
         (long long)kpoolPoolStoreGetNumPools(store, 2));
  // CHECK: accept 2 of 1: error: accept: slot 2: accepted = 2 is outside [0, 1]
  report("accept 2 of 1", kpoolPoolStoreAccept(store, 2, 2));
  // CHECK: accept on NULL: error: accept: the pool store is null
  report("accept on NULL", kpoolPoolStoreAccept(NULL, 2, 0));
  kpoolPoolStoreDestroy(store);
  kpoolKernelSetDestroy(ks);
  // CHECK: done
  printf("done\n");
  return 0;
}
