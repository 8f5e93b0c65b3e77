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
#include "kpool-c/Stores.h"

#include <math.h>
#include <stddef.h>
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

/// The options of a call with (1) or without (0) host validation.
static const KPoolCallOptions *validated(int validate) {
  static const KPoolCallOptions check = {NULL, NULL, KPOOL_VALIDATION_CHECK},
                                trust = {NULL, NULL, KPOOL_VALIDATION_TRUST};
  return validate ? &check : &trust;
}

/// A kernel set of the test's configuration (f32, D, K) on `target`.
static KPoolKernelConfig config(int32_t target) {
  KPoolKernelConfig c = kpoolKernelConfigDefault();
  c.target = target;
  c.elementType = KPOOL_F32;
  c.headDim = D;
  c.kpool = K;
  return c;
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

  KPoolKernelConfig cpu = config(KPOOL_TARGET_CPU), bad = cpu;
  bad.elementType = 7;
  // CHECK: bad element type: error: kernel set: element type 7 is not one of
  report("bad element type", kpoolKernelSetCreate(&bad, &ks));
  // CHECK: null config: error: kernel set: the configuration is null
  report("null config", kpoolKernelSetCreate(NULL, &ks));
  // CHECK: create: ok
  if (report("create", kpoolKernelSetCreate(&cpu, &ks)))
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
  KPoolPoolOffsetsArgs offsets = {0};
  offsets.pool_row_offsets = vpro;
  offsets.input_row_offsets = viro;
  offsets.cache_lengths = vcache;
  // CHECK: pool_offsets: ok
  report("pool_offsets", kpoolPoolOffsets(ks, &offsets, validated(1)));
  // CHECK: pool_row_offsets: 0 2 3
  printf("pool_row_offsets: %u %u %u\n", pro[0], pro[1], pro[2]);

  // compress against the C computation.
  float pooled[3 * D];
  KPoolView vpooled = view2(pooled, 3, D);
  KPoolCompressArgs compress = {0};
  compress.pooled = vpooled;
  compress.k = vk;
  compress.gate = vgate;
  compress.ape = vape;
  compress.input_row_offsets = viro;
  compress.pool_row_offsets = vpro;
  compress.cache_lengths = vcache;
  // CHECK: compress: ok
  report("compress", kpoolCompress(ks, &compress, validated(1)));
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
  KPoolSeedTailArgs seed = {0};
  seed.tail = vtail;
  seed.k = vk;
  seed.gate = vgate;
  seed.input_row_offsets = viro;
  seed.cache_lengths = vcache;
  seed.slot_idx = vslots;
  seed.num_requests = 2;
  // CHECK: seed_tail: ok
  report("seed_tail", kpoolSeedTail(ks, &seed, validated(1)));
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
  KPoolRingCloseArgs close = {0};
  close.pooled = vclosedRow;
  close.closed_pool = vclosed;
  close.tail = vtail;
  close.k = vk;
  close.gate = vgate;
  close.ape = vape;
  close.input_row_offsets = viro2;
  close.cache_lengths = vcache2;
  close.slot_idx = vslot2;
  close.num_requests = 1;
  // CHECK: ring_close: ok
  report("ring_close", kpoolRingClose(ks, &close, validated(1)));
  // CHECK: closed pool 1, bit-identical to compress: 1
  printf("closed pool %d, bit-identical to compress: %d\n", closed[0],
         memcmp(closedRow, &pooled[1 * D], sizeof closedRow) == 0);

  // Bad metadata: an error naming the request and the field; no output
  // changes.
  float before[3 * D], tailBefore[SLOTS * 2 * K * D];
  memcpy(before, pooled, sizeof pooled);
  memcpy(tailBefore, tail, sizeof tail);
  uint32_t badIro[3] = {0, 9, 17};
  KPoolCompressArgs bad1 = compress;
  bad1.input_row_offsets = view1(badIro, 3);
  // CHECK: overlong rows: error: compress: request 1: input_row_offsets[2] = 17
  // reaches past the 16 rows of 'k'
  report("overlong rows", kpoolCompress(ks, &bad1, validated(1)));
  uint32_t badSlots[2] = {2, 3};
  KPoolSeedTailArgs bad2 = seed;
  bad2.slot_idx = view1(badSlots, 2);
  // CHECK: bad slot: error: seed_tail: request 1: slot_idx[1] = 3 is not below
  // max_slots = 3
  report("bad slot", kpoolSeedTail(ks, &bad2, validated(1)));
  uint32_t badPro[3] = {0, 1, 2};
  KPoolCompressArgs bad3 = compress;
  bad3.pool_row_offsets = view1(badPro, 3);
  // CHECK: bad pool rows: error: compress: request 0: pool_row_offsets[1] -
  // pool_row_offsets[0] = 1, but the request completes 2 pool(s)
  report("bad pool rows", kpoolCompress(ks, &bad3, validated(1)));
  KPoolCompressArgs bad4 = compress;
  bad4.k.rank = 9;
  // CHECK: bad rank: error: compress: 'k' has rank 9
  report("bad rank", kpoolCompress(ks, &bad4, validated(1)));
  // CHECK: null args: error: ring_close: the argument struct is null
  report("null args", kpoolRingClose(ks, NULL, validated(1)));
  // An operand left out of the struct is an empty view, named.
  KPoolRingCloseArgs bad5 = close;
  memset(&bad5.tail, 0, sizeof bad5.tail);
  // CHECK: empty view: error: ring_close: 'tail' must have shape [?, 2, ?, 8] (max_slots x 2 x window x head_dim), got rank 0
  report("empty view", kpoolRingClose(ks, &bad5, validated(1)));
  // The generic call: a struct of another size is refused; a kernel that
  // is not in the table too.
  // CHECK: bad size: error: compress: the argument struct has 8 bytes, this library's KPoolCompressArgs has
  report("bad size", kpoolCall(ks, KPoolKernelCompress, &compress, 8, NULL));
  // CHECK: bad kernel: error: call: kernel 99 is not a KPoolKernelId (0 to 7)
  report("bad kernel",
         kpoolCall(ks, (KPoolKernelId)99, &compress, sizeof compress, NULL));
  // CHECK: generic call: ok
  report("generic call", kpoolCall(ks, KPoolKernelCompress, &compress,
                                   sizeof compress, NULL));
  // CHECK: misaligned status: error: compress: the status word at {{.*}} is not 8-byte aligned
  uint64_t words[2] = {0, 0};
  KPoolCallOptions misaligned = {(uint64_t *)((char *)words + 4), NULL,
                                 KPOOL_VALIDATION_CHECK};
  report("misaligned status", kpoolCompress(ks, &compress, &misaligned));
  // Overlapping operands (contract revision 3): an output on an input, and
  // a status word inside an output, named with both operands; with any
  // validation (the views' address ranges are compared, nothing is read).
  KPoolCompressArgs onK = compress;
  onK.pooled.data = onK.k.data;
  // CHECK: pooled on k: error: compress: 'pooled' (bytes
  // {{0x[0-9a-f]+\.\.0x[0-9a-f]+}}), which the op writes, overlaps 'k' (bytes
  report("pooled on k", kpoolCompress(ks, &onK, validated(0)));
  uintptr_t word8 = ((uintptr_t)compress.pooled.data + 7) & ~(uintptr_t)7;
  KPoolCallOptions inPooled = {(uint64_t *)word8, NULL, KPOOL_VALIDATION_TRUST};
  // CHECK: status in pooled: error: compress: 'pooled' {{.*}}, which the op
  // writes, overlaps the status word (bytes
  report("status in pooled", kpoolCompress(ks, &compress, &inPooled));
  // CHECK: bad validation: error: compress: validation 7 is not one of KPOOL_VALIDATION_AUTO
  KPoolCallOptions badValidation = {NULL, NULL, 7};
  report("bad validation", kpoolCompress(ks, &compress, &badValidation));

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
    KPoolCompressArgs c = compress;
    c.input_row_offsets = vnullIro;
    report("null iro", kpoolCompress(ks, &c, validated(validate)));
    c = compress;
    c.pool_row_offsets = vnullPro;
    report("null pro", kpoolCompress(ks, &c, validated(validate)));
    KPoolView vnullIro2 = viro2;
    vnullIro2.data = NULL;
    KPoolSeedTailArgs st = seed;
    st.input_row_offsets = vnullIro2;
    st.cache_lengths = vcache2;
    st.slot_idx = vslot2;
    st.num_requests = 1;
    report("null seed iro", kpoolSeedTail(ks, &st, validated(validate)));
    st.input_row_offsets = viro2;
    st.slot_idx = vnullSlots;
    report("null seed slots", kpoolSeedTail(ks, &st, validated(validate)));
    KPoolRingCloseArgs rc = close;
    rc.input_row_offsets = vnullIro2;
    report("null close iro", kpoolRingClose(ks, &rc, validated(validate)));
    rc = close;
    rc.slot_idx = vnullSlots;
    report("null close slots", kpoolRingClose(ks, &rc, validated(validate)));
    KPoolPoolOffsetsArgs po = offsets;
    po.input_row_offsets = vnullIro;
    report("null offsets iro", kpoolPoolOffsets(ks, &po, validated(validate)));
  }
  // Sizes whose element count overflows 64 bits: not "no elements".
  KPoolCompressArgs huge = compress;
  huge.k = view2(NULL, (int64_t)1 << 61, D);
  // CHECK: huge k: error: compress: 'k' has shape [2305843009213693952, 8], more elements than a view can address (2^60)
  report("huge k", kpoolCompress(ks, &huge, validated(0)));
  huge = compress;
  huge.cache_lengths = view1(cache, INT64_MAX);
  // CHECK: huge batch: error: compress: 'cache_lengths' has shape [9223372036854775807], more elements than a view can address (2^60)
  report("huge batch", kpoolCompress(ks, &huge, validated(0)));
  huge.cache_lengths.sizes[0] = (int64_t)1 << 31;
  // CHECK: large batch: error: compress: 'cache_lengths' has 2147483648 entries; a batch has at most 2^31 - 1 requests
  report("large batch", kpoolCompress(ks, &huge, validated(0)));
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
  KPoolKernelConfig cuda = config(KPOOL_TARGET_CUDA);
  // CHECK: cuda: error: CUDA kernels: libkpool_cuda_runtime.so (the CUDA layer, which needs the CUDA driver libcuda.so.1) could not be loaded: {{.*}}.missing/libkpool_cuda_runtime.so: cannot open shared object file: No such file or directory
  report("cuda", kpoolKernelSetCreate(&cuda, &cudaSet));
  // CHECK: cuda set is null: 1
  printf("cuda set is null: %d\n", cudaSet == NULL);
  KPoolKernelConfig badTarget = config(5);
  // CHECK: bad target: error: kernel set: target 5 is not one of KPOOL_TARGET_CPU, KPOOL_TARGET_CUDA
  report("bad target", kpoolKernelSetCreate(&badTarget, &cudaSet));
  // The kernel ABI, as the Python package reads it.
  // CHECK: abi: 8 kernels
  // CHECK-NEXT: abi: compress (kpoolCompress): pooled:o2e:?xD k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 pool_row_offsets:i1u:B+1 cache_lengths:i1u:B status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: seed_tail (kpoolSeedTail): tail:o4e:Sx2xRxD k:i2e:TxD gate:i2e:TxD input_row_offsets:i1u:B+1 cache_lengths:i1u:B slot_idx:i1u:B num_requests:s0i: status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: ring_close (kpoolRingClose): pooled:o2e:BxD closed_pool:o1i:B tail:i4e:Sx2xRxD k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 cache_lengths:i1u:B slot_idx:i1u:B num_requests:s0i: status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: pool_offsets (kpoolPoolOffsets): pool_row_offsets:o1u:B+1 input_row_offsets:i1u:B+1 cache_lengths:i1u:B status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: step (kpoolStep): closed:o2e:BxD closed_pool:o1i:B pool_row_offsets:o1u:B+1 pooled:o2e:?xD tail:o4e:Sx2xRxD k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 cache_lengths:i1u:B slot_idx:i1u:B num_requests:s0i: status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: compress_cache (kpoolCompressCache): pooled:o2e:?xD cache_keys:o3c:NxPxD cache_scales:o2S:NxP k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 pool_row_offsets:i1u:B+1 cache_lengths:i1u:B block_table:i2u:BxW status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: ring_close_cache (kpoolRingCloseCache): pooled:o2e:BxD closed_pool:o1i:B cache_keys:o3c:NxPxD cache_scales:o2S:NxP tail:i4e:Sx2xRxD k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 cache_lengths:i1u:B slot_idx:i1u:B num_requests:s0i: block_table:i2u:BxW status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: step_cache (kpoolStepCache): closed:o2e:BxD closed_pool:o1i:B pool_row_offsets:o1u:B+1 pooled:o2e:?xD tail:o4e:Sx2xRxD cache_keys:o3c:NxPxD cache_scales:o2S:NxP k:i2e:TxD gate:i2e:TxD ape:i2f:KxD input_row_offsets:i1u:B+1 cache_lengths:i1u:B slot_idx:i1u:B num_requests:s0i: block_table:i2u:BxW status:c1w:? stream:c0s:
  // CHECK-NEXT: abi: kernel 8 is null: 1
  printf("abi: %lld kernels\n", (long long)kpoolKernelAbiGetNumKernels());
  for (int64_t i = 0; i < kpoolKernelAbiGetNumKernels(); ++i) {
    const KPoolKernelInfo *info = kpoolKernelAbiGetKernel(i);
    printf("abi: %s (%s):", info->name, info->capiFunction);
    for (int64_t j = 0; j < info->numOperands; ++j) {
      const KPoolOperandInfo *o = &info->operands[j];
      printf(" %s:%c%d%c:%s", o->name, "oisc"[o->role], o->rank,
             "euifscwS"[o->kind], o->shape);
    }
    printf("\n");
  }
  printf("abi: kernel %lld is null: %d\n",
         (long long)kpoolKernelAbiGetNumKernels(),
         kpoolKernelAbiGetKernel(kpoolKernelAbiGetNumKernels()) == NULL);
  // The argument structs' layout, as the Python package reads it.
  // CHECK: abi: step_cache: 15 fields, struct of 1128 bytes, num_requests at 1040 (int32), block_table at 1048, base step
  const KPoolKernelInfo *stepCache = kpoolKernelAbiGetKernel(KPoolKernelStepCache);
  printf("abi: %s: %lld fields, struct of %lld bytes, num_requests at %lld "
         "(int32), block_table at %lld, base %s\n",
         stepCache->name, (long long)stepCache->numOperands - 2,
         (long long)stepCache->argsSize,
         (long long)stepCache->operands[13].offset,
         (long long)stepCache->operands[14].offset,
         kpoolKernelAbiGetKernel(stepCache->base)->name);
  // CHECK: offsets match offsetof: 1 1
  printf("offsets match offsetof: %d %d\n",
         stepCache->operands[13].offset ==
             (int64_t)offsetof(KPoolStepCacheArgs, num_requests),
         stepCache->argsSize == (int64_t)sizeof(KPoolStepCacheArgs));
  // CHECK: enum names: fp8 hadamard pow2 cuda trust cache_scale (null)
  printf("enum names: %s %s %s %s %s %s %s\n",
         kpoolEnumName(KPOOL_ENUM_CACHE_ENTRY, KPOOL_CACHE_FP8),
         kpoolEnumName(KPOOL_ENUM_CACHE_ROTATE, KPOOL_ROTATE_HADAMARD),
         kpoolEnumName(KPOOL_ENUM_CACHE_SCALE, KPOOL_SCALE_POW2),
         kpoolEnumName(KPOOL_ENUM_TARGET, KPOOL_TARGET_CUDA),
         kpoolEnumName(KPOOL_ENUM_VALIDATION, KPOOL_VALIDATION_TRUST),
         kpoolEnumName(KPOOL_ENUM_OPERAND_KIND, KPOOL_KIND_CACHE_SCALE),
         kpoolEnumName(KPOOL_ENUM_CACHE_ENTRY, 3) ? "not null" : "(null)");
  KPoolKernelSet *hugeSet = NULL;
  KPoolKernelConfig hugeConfig = config(KPOOL_TARGET_CPU);
  hugeConfig.elementType = KPOOL_BF16;
  hugeConfig.headDim = (int64_t)1 << 62;
  // CHECK: huge head_dim: error: kernel set: kpool x head_dim = 4 x 4611686018427387904 is too large
  report("huge head_dim", kpoolKernelSetCreate(&hugeConfig, &hugeSet));
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
  KPoolProducedPool list[8];
  report("prefill", kpoolPoolStoreStep(store, &prefillK, &prefillGate, 1,
                                       stepIro, stepSlot, list, 8, &produced));
  // CHECK: produced 1, tokens 6
  printf("produced %lld, tokens %lld\n", (long long)produced,
         (long long)kpoolPoolStoreGetTokens(store, 1));
  for (int t = 6; t < 8; ++t) {
    uint32_t one[2] = {0, 1};
    KPoolView dk = view2(k + t * D, 1, D), dg = view2(gate + t * D, 1, D);
    report("decode", kpoolPoolStoreStep(store, &dk, &dg, 1, one, stepSlot, list,
                                        8, &produced));
  }
  // CHECK: decode: ok
  // CHECK: decode: ok
  // The step's own pools come back from the step itself.
  // CHECK: last step: 1 pool(s): slot 1 pool 1 from ring 1
  printf("last step: %lld pool(s): slot %u pool %lld from ring %d\n",
         (long long)produced, list[0].slot, (long long)list[0].pool,
         list[0].fromRing);
  // A buffer smaller than the most a call can produce is refused first.
  // CHECK: small buffer: error: step: 'produced' has room for 1 records, a call
  // of 6 rows of 'k' and 1 requests may produce 2
  report("small buffer",
         kpoolPoolStoreStep(store, &prefillK, &prefillGate, 1, stepIro,
                            stepSlot, list, 1, &produced));
  float storePools[2 * D];
  KPoolView vstorePools = view2(storePools, 2, D);
  // CHECK: copy: ok
  report("copy", kpoolPoolStoreCopyPools(store, 1, 0, 2, &vstorePools));
  // CHECK: store pools bit-identical to one-shot compress: 1
  printf("store pools bit-identical to one-shot compress: %d\n",
         memcmp(storePools, pooled, sizeof storePools) == 0);
  // CHECK: bad step: error: {{.*}}slot_idx[0] = 5 is not below max_slots = 3
  uint32_t badStepSlot[1] = {5};
  report("bad step",
         kpoolPoolStoreStep(store, &prefillK, &prefillGate, 1, stepIro,
                            badStepSlot, NULL, 0, &produced));
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
  report("spec prefill", kpoolPoolStoreStep(store, &k2, &g2, 1, twoIro,
                                            specSlot, NULL, 0, &produced));
  // Positions 2, 3, 4: pool 0 completes, then both drafts are rejected.
  report("verify", kpoolPoolStoreStep(store, &k3, &g3, 1, threeIro, specSlot,
                                      NULL, 0, &produced));
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
  // Close: later calls fail cleanly, queries say -1, and close is
  // idempotent.
  kpoolPoolStoreClose(store);
  kpoolPoolStoreClose(store);
  // CHECK: closed 1: step: the store is closed; tokens -1 pools -1
  KPoolError *closedError = kpoolPoolStoreStep(store, &k2, &g2, 1, twoIro,
                                               specSlot, NULL, 0, &produced);
  printf("closed %d: %s; tokens %lld pools %lld\n",
         kpoolPoolStoreIsClosed(store), kpoolErrorMessage(closedError),
         (long long)kpoolPoolStoreGetTokens(store, 2),
         (long long)kpoolPoolStoreGetNumPools(store, 2));
  kpoolErrorDestroy(closedError);
  // CHECK: accept after close: error: accept: the store is closed
  report("accept after close", kpoolPoolStoreAccept(store, 2, 0));
  kpoolPoolStoreDestroy(store);
  kpoolKernelSetDestroy(ks);
  // CHECK: done
  printf("done\n");
  return 0;
}
