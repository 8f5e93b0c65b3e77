/*===- aot-guard-pages.c - the raw entry points check their views --------===*\
|*                                                                            *|
|* kpool-aot's plain C entry points (f32, head_dim 4, kpool 2, CPU) check    *|
|* every view's rank and extents against the kernels' configuration and the  *|
|* other views before they read anything. Each wrong call here runs with     *|
|* every operand's memory made inaccessible (PROT_NONE): the call must       *|
|* return the extent finding and record it in the status word without        *|
|* touching a byte of any operand (a touch is a SIGSEGV). Right calls run on *|
|* buffers that end at an inaccessible page, so a read past a view's end     *|
|* faults. `--unchecked` makes the call (a `k` view of [6, 2] for    *|
|* head_dim 4) straight into the kernel, under the same guard: the kernels'  *|
|* own extent checks (convert-kpool-to-linalg) refuse it too, read nothing   *|
|* past the view and record the same word.                                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "kpool_aot_f32_d4_k2.h"

#include "kpool-c/Runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { D = 4, K = 2 };

/* `bytes` of memory that end exactly at an inaccessible page and start
   right after one (rounded to the element size). */
typedef struct {
  char *map;
  size_t mapped;
  char *data;
  size_t bytes;
} Guarded;

static size_t pageSize(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static Guarded guarded(size_t bytes) {
  Guarded g;
  size_t page = pageSize();
  size_t body = (bytes + page - 1) / page * page;
  if (body == 0)
    body = page;
  g.mapped = body + 2 * page;
  g.map = mmap(NULL, g.mapped, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g.map == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  mprotect(g.map, page, PROT_NONE);
  mprotect(g.map + page + body, page, PROT_NONE);
  g.data = g.map + page + body - bytes;
  g.bytes = bytes;
  memset(g.data, 0, bytes);
  return g;
}

/* Makes all of `g` inaccessible (or accessible again). */
static void lock(Guarded *g, int locked) {
  size_t page = pageSize();
  mprotect(g->map + page, g->mapped - 2 * page,
           locked ? PROT_NONE : PROT_READ | PROT_WRITE);
}

static KPoolView view(void *data, int64_t rank, const int64_t *sizes) {
  KPoolView v;
  int64_t stride = 1;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.rank = rank;
  for (int64_t d = rank - 1; d >= 0; --d) {
    v.sizes[d] = sizes[d];
    v.strides[d] = stride;
    stride *= sizes[d];
  }
  return v;
}

static size_t elements(int64_t rank, const int64_t *sizes) {
  size_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= (size_t)sizes[d];
  return n;
}

/* One operand: its guarded memory and its view. */
typedef struct {
  Guarded memory;
  KPoolView view;
} Operand;

static Operand operand(int64_t rank, const int64_t *sizes, size_t elementSize) {
  Operand o;
  o.memory = guarded(elements(rank, sizes) * elementSize);
  o.view = view(o.memory.data, rank, sizes);
  return o;
}

static int failures = 0;

/* Prints what the call returned and the status word says. */
static void report(const char *what, uint64_t returned, uint64_t status,
                   uint64_t expectedNonzero) {
  KPoolError *error = kpoolStatusWordError(returned);
  int ok = expectedNonzero ? (returned != 0 && returned == status)
                           : (returned == 0 && status == 0);
  printf("%s: returned 0x%llx, status 0x%llx%s%s\n", what,
         (unsigned long long)returned, (unsigned long long)status,
         error ? ": " : "", error ? kpoolErrorMessage(error) : "");
  kpoolErrorDestroy(error);
  if (!ok) {
    printf("FAIL: %s\n", what);
    ++failures;
  }
}

/* compress's operands for `tokens` rows of k, `batch` requests. */
typedef struct {
  Operand pooled, k, gate, ape, iro, pro, cache;
} Compress;

static Compress compressOperands(int64_t tokens, int64_t kDim, int64_t gateRows,
                                 int64_t apeRows, int64_t batch,
                                 int64_t cacheLen) {
  Compress c;
  int64_t pooled[2] = {tokens / K + 1, D}, k[2] = {tokens, kDim};
  int64_t gate[2] = {gateRows, D}, ape[2] = {apeRows, D};
  int64_t offsets[1] = {batch + 1}, cache[1] = {cacheLen};
  c.pooled = operand(2, pooled, 4);
  c.k = operand(2, k, 4);
  c.gate = operand(2, gate, 4);
  c.ape = operand(2, ape, 4);
  c.iro = operand(1, offsets, 4);
  c.pro = operand(1, offsets, 4);
  c.cache = operand(1, cache, 4);
  return c;
}

static void lockAll(Compress *c, int locked) {
  lock(&c->pooled.memory, locked);
  lock(&c->k.memory, locked);
  lock(&c->gate.memory, locked);
  lock(&c->ape.memory, locked);
  lock(&c->iro.memory, locked);
  lock(&c->pro.memory, locked);
  lock(&c->cache.memory, locked);
}

/* compress's argument struct (kpool/ABI/Args.h) over `c`'s views. */
static KPoolCompressArgs compressArgs(const Compress *c) {
  KPoolCompressArgs a;
  memset(&a, 0, sizeof a);
  a.pooled = c->pooled.view;
  a.k = c->k.view;
  a.gate = c->gate.view;
  a.ape = c->ape.view;
  a.input_row_offsets = c->iro.view;
  a.pool_row_offsets = c->pro.view;
  a.cache_lengths = c->cache.view;
  return a;
}

/* A wrong compress: every operand locked, so any read faults. */
static void wrongCompress(const char *what, Compress c) {
  uint64_t status = 0;
  uint64_t returned;
  KPoolCompressArgs args = compressArgs(&c);
  lockAll(&c, 1);
  returned = kpool_f32_d4_k2_compress(&args, &status, NULL);
  report(what, returned, status, 1);
}

int main(int argc, char **argv) {
  /* The call: a `k` view of [6, 2] for head_dim 4. */
  Compress bad = compressOperands(6, 2, 6, K, 1, 1);
  if (argc > 1 && !strcmp(argv[1], "--unchecked")) {
    /* The same call straight into the kernel, with one request over all
       6 rows: a kernel taking k's extents on trust would read 4 channels of
       rows that hold 2, past the end of the view's memory. */
    uint32_t *iro = (uint32_t *)bad.iro.memory.data;
    uint32_t *pro = (uint32_t *)bad.pro.memory.data;
    KPoolDescriptor2 pooled = KPOOL_AOT_DESCRIPTOR(2, &bad.pooled.view);
    KPoolDescriptor2 k = KPOOL_AOT_DESCRIPTOR(2, &bad.k.view);
    KPoolDescriptor2 gate = KPOOL_AOT_DESCRIPTOR(2, &bad.gate.view);
    KPoolDescriptor2 ape = KPOOL_AOT_DESCRIPTOR(2, &bad.ape.view);
    KPoolDescriptor1 diro = KPOOL_AOT_DESCRIPTOR(1, &bad.iro.view);
    KPoolDescriptor1 dpro = KPOOL_AOT_DESCRIPTOR(1, &bad.pro.view);
    KPoolDescriptor1 cache = KPOOL_AOT_DESCRIPTOR(1, &bad.cache.view);
    uint64_t word = 0;
    KPoolDescriptor1 status = {&word, &word, 0, {1}, {1}};
    iro[0] = 0;
    iro[1] = 6;
    pro[0] = 0;
    pro[1] = 3;
    printf("unchecked: calling the kernel\n");
    fflush(stdout);
    _mlir_ciface_kpool_f32_d4_k2_compress_memref(
        &pooled, &k, &gate, &ape, &diro, &dpro, &cache, &status, NULL);
    printf("unchecked: returned, status 0x%llx\n", (unsigned long long)word);
    return 0;
  }

  wrongCompress("k [6, 2] for head_dim 4", bad);
  wrongCompress("gate with other rows than k",
                compressOperands(6, D, 5, K, 1, 1));
  wrongCompress("ape [3, 4] for kpool 2", compressOperands(6, D, 6, 3, 1, 1));
  wrongCompress("cache_lengths not one shorter than the offsets",
                compressOperands(6, D, 6, K, 2, 3));
  {
    Compress c = compressOperands(6, D, 6, K, 1, 1);
    int64_t sizes[3] = {1, 6, D};
    c.k.view = view(c.k.memory.data, 3, sizes);
    wrongCompress("k of rank 3", c);
  }
  {
    Compress c = compressOperands(6, D, 6, K, 1, 1);
    c.gate.view.data = NULL;
    wrongCompress("gate without data", c);
  }
  {
    Compress c = compressOperands(6, D, 6, K, 1, 1);
    c.pooled.view.sizes[0] = -1;
    wrongCompress("pooled with a negative extent", c);
  }
  {
    uint64_t status = 0;
    uint64_t returned = kpool_f32_d4_k2_compress(NULL, &status, NULL);
    report("null arguments", returned, status, 1);
  }
  {
    /* seed_tail with a ring window below kpool. */
    int64_t tail[4] = {2, 2, 1, D}, k[2] = {3, D}, two[1] = {2}, one[1] = {1};
    Operand t = operand(4, tail, 4), kk = operand(2, k, 4),
            gate = operand(2, k, 4), iro = operand(1, two, 4),
            cache = operand(1, one, 4), slots = operand(1, one, 4);
    uint64_t status = 0, returned;
    KPoolSeedTailArgs args;
    memset(&args, 0, sizeof args);
    args.tail = t.view;
    args.k = kk.view;
    args.gate = gate.view;
    args.input_row_offsets = iro.view;
    args.cache_lengths = cache.view;
    args.slot_idx = slots.view;
    args.num_requests = 1;
    lock(&t.memory, 1);
    lock(&kk.memory, 1);
    lock(&gate.memory, 1);
    lock(&iro.memory, 1);
    lock(&cache.memory, 1);
    lock(&slots.memory, 1);
    returned = kpool_f32_d4_k2_seed_tail(&args, &status, NULL);
    report("seed_tail with a ring window of 1 for kpool 2", returned, status,
           1);
  }

  /* A status word keeps the smallest finding: a second, larger one leaves
     it as it is. */
  {
    Compress first = compressOperands(6, D, 6, 3, 1, 1); /* ape: id 3 */
    Compress second = compressOperands(6, D, 6, K, 1, 1);
    uint64_t status = 0, a, b;
    second.pooled.view.sizes[1] = 5; /* pooled: id 0, smaller */
    KPoolCompressArgs firstArgs = compressArgs(&first),
                      secondArgs = compressArgs(&second);
    lockAll(&first, 1);
    lockAll(&second, 1);
    a = kpool_f32_d4_k2_compress(&firstArgs, &status, NULL);
    b = kpool_f32_d4_k2_compress(&secondArgs, &status, NULL);
    printf("two findings: 0x%llx then 0x%llx, status keeps 0x%llx\n",
           (unsigned long long)a, (unsigned long long)b,
           (unsigned long long)status);
    if (status != (a < b ? a : b)) {
      printf("FAIL: the status word does not keep the smallest finding\n");
      ++failures;
    }
  }

  /* Right views, each ending at an inaccessible page: the kernels read
     nothing past them. One request of 6 tokens from 0: 3 pools. */
  {
    Compress c = compressOperands(6, D, 6, K, 1, 1); /* cache_lengths [0] */
    uint64_t status = 0, returned;
    uint32_t *iro = (uint32_t *)c.iro.memory.data;
    uint32_t *pro = (uint32_t *)c.pro.memory.data;
    float *k = (float *)c.k.memory.data, *gate = (float *)c.gate.memory.data;
    float *pooled = (float *)c.pooled.memory.data;
    int64_t i;
    iro[0] = 0;
    iro[1] = 6;
    pro[0] = 0;
    pro[1] = 3;
    for (i = 0; i < 6 * D; ++i) {
      k[i] = (float)(i + 1);
      gate[i] = 0.f; /* equal weights: a pool is its members' mean */
    }
    KPoolCompressArgs args = compressArgs(&c);
    returned = kpool_f32_d4_k2_compress(&args, &status, NULL);
    report("right views", returned, status, 0);
    printf("pool 1, channel 0: %g (expected %g)\n", pooled[1 * D],
           (k[2 * D] + k[3 * D]) / 2);
    if (pooled[1 * D] != (k[2 * D] + k[3 * D]) / 2)
      ++failures;
  }
  printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
