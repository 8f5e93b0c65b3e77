//===- kpool-gpu-cache-check.cpp - the pool cache on a device -------------===//
//
// The fused serving step writing the production pool cache (bf16, head_dim
// 128, kpool 4, FP8 e4m3fn, Hadamard, absmax and pow2 scales;
// docs/pool-cache.md), and two more formats (f32 FP8 without the rotation,
// whose row groups on a GPU are a whole warp; bf16 entries of the element
// type) through the ahead-of-time CUDA kernels
// (KernelSet::stepCache on device memory), in an engine-style loop: ragged
// requests in non-identity slots, a chunked prefill whose chunks end inside
// pools, then decode steps; pages out of order in one allocation with a
// padded page stride, like the DeepSeek/vLLM indexer page. After every call
// the device's dense rows (`closed`, `pooled`) are read back, and every
// cache entry must be, byte for byte, the reference's formulas
// (test/lib/Reference/PoolCache.h) applied to the device's own dense pool;
// every other byte of the cache allocation must keep its canary, and every
// dense pool must be produced once, within tolerance of the reference's
// one-shot compress of its request's whole sequence (the ring, of kpool
// rows per slot or a wider window, carried its members across calls). A last
// call with a bad block table (-1, pages at or past N, too narrow) checks
// the kernels' guards the same way. On a device, or through the emulated
// CUDA driver (test/lib/CudaEmu: the same PTX executed), this checks the
// warp shuffles, the FP8 conversion and the guards of kpool-map-to-gpu.
// Every cache format is covered: FP8 with and without the rotation, absmax
// and pow2 scales, entries of the element type with and without it.
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4_element_hadamard.h"
#include "kpool_gpu_bf16_d128_k4_fp8_hadamard_absmax.h"
#include "kpool_gpu_bf16_d128_k4_fp8_hadamard_pow2.h"
#include "kpool_gpu_f16_d128_k4_fp8_none_pow2.h"
#include "kpool_gpu_f32_d128_k4_element_none.h"
#include "kpool_gpu_f32_d128_k4_fp8_none_absmax.h"

#include "GPU/GpuSupport.h"
#include "Support/ArgsByName.h"
#include "Reference/PoolCache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kpool;
using namespace kpool::gpu;

namespace {

constexpr int64_t D = 128, K = 4, kPageSize = 16, kPages = 40;
constexpr int64_t kSlots = 6;

/// The cache: one byte allocation of kPages pages, each the entries
/// (codes, or elements of the keys' type) then, for FP8, the scales, and
/// 256 bytes of padding.
struct CacheBuffer {
  bool fp8;
  int64_t entryBytes, pageStride;
  Tensor bytes;

  CacheBuffer(bool fp8, int64_t elementSize)
      : fp8(fp8), entryBytes(fp8 ? 1 : elementSize),
        pageStride(kPageSize * D * entryBytes + (fp8 ? 4 * kPageSize : 0) +
                   256),
        bytes(1, {kPages * pageStride}) {}

  View keys(View base) const {
    View v = base;
    v.rank = 3;
    v.sizes[0] = kPages, v.sizes[1] = kPageSize, v.sizes[2] = D;
    v.strides[0] = pageStride / entryBytes, v.strides[1] = D,
    v.strides[2] = 1;
    return v;
  }
  /// The scales (FP8), or an empty view that the kernels do not use.
  View scales(View base) const {
    View v = base;
    v.rank = 2;
    if (!fp8) {
      v.sizes[0] = v.sizes[1] = 0;
      v.strides[0] = v.strides[1] = 1;
      return v;
    }
    v.data = static_cast<char *>(base.data) + kPageSize * D;
    v.sizes[0] = kPages, v.sizes[1] = kPageSize;
    v.strides[0] = pageStride / 4, v.strides[1] = 1;
    return v;
  }
};

int failures = 0;

void expect(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

void die(const Status &s) {
  if (s.ok())
    return;
  std::printf("FAIL: %s\n", s.message().c_str());
  std::exit(1);
}

/// The expected cache after one call: every pool the call produced, from
/// the device's dense rows, placed by the reference.
void expectEntries(ElementType type, const CacheFormat &f,
                   View hostKeys,
                   View hostScales, View table,
                   const std::vector<uint8_t> &closed,
                   const std::vector<int32_t> &ids,
                   const std::vector<uint8_t> &pooled,
                   const std::vector<uint32_t> &pro,
                   const std::vector<int64_t> &firstPool) {
  reference::Geometry g{type, D, K};
  int64_t es = reference::elementSize(type);
  auto store = [&](int64_t b, int64_t p, const uint8_t *row) {
    float x[D];
    for (int64_t d = 0; d < D; ++d)
      x[d] = reference::fromBits(type,
                                 reference::elementBits(type, row + es * d));
    uint32_t bits[D];
    float scale = 0;
    reference::cacheEntry(type, D, f, x, bits, &scale);
    reference::storeCache(g, f, hostKeys, hostScales, table, b, p, bits,
                          scale);
  };
  int64_t batch = static_cast<int64_t>(ids.size());
  for (int64_t b = 0; b < batch; ++b) {
    if (ids[b] >= 0)
      store(b, ids[b], closed.data() + b * D * es);
    for (uint32_t r = pro[b]; r < pro[b + 1]; ++r)
      store(b, firstPool[b] + (r - pro[b]),
            pooled.data() + int64_t(r) * D * es);
  }
}

int run(const KernelSet &kernels, const CacheFormat &format,
        const char *name, unsigned seed, int64_t window) {
  std::mt19937 rng(seed);
  ElementType type = kernels.config().elementType;
  int64_t es = reference::elementSize(type);
  const std::vector<uint32_t> slotOf = {3, 0, 5, 1, 4};
  const std::vector<int64_t> lengths = {301, 77, 5, 130, 64};
  int64_t B = static_cast<int64_t>(slotOf.size());
  std::vector<Sequence> seqs = randomSequences(type, D, slotOf, lengths, rng);
  std::vector<float> apeValues(K * D);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (float &a : apeValues)
    a = dist(rng);

  // Pages: each request's pages in a shuffled order of all pages.
  std::vector<uint32_t> order(kPages);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  int64_t width = 0;
  for (int64_t n : lengths)
    width = std::max(width, (n / K + kPageSize - 1) / kPageSize);
  std::vector<uint32_t> table(B * width);
  for (int64_t i = 0; i < B * width; ++i)
    table[i] = order[i];

  CacheBuffer cache(format.entry == CacheEntry::FP8, es);
  cache.bytes.fill(0xA5);
  cache.bytes.upload();
  std::vector<uint8_t> expected = cache.bytes.image;
  // The ring: `window` rows per slot (>= kpool; a pool's members sit at
  // their position modulo the window).
  Tensor tail(es, {kSlots, 2, window, D});
  tail.fill(0);
  tail.upload();
  Tensor ape(4, {K, D});
  ape.image = bytesOf(apeValues);
  ape.upload();

  // The schedule: chunks of 1..37 tokens per request and call, every
  // request in every call until it is done, then decode-sized chunks.
  std::vector<int64_t> done(B, 0);
  std::vector<std::map<int64_t, std::vector<std::vector<uint8_t>>>> produced(B);
  int calls = 0;
  while (true) {
    std::vector<int64_t> counts(B);
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      int64_t left = lengths[b] - done[b];
      int64_t chunk = calls < 6 ? int64_t(rng() % 37) + 1 : 1;
      counts[b] = std::min(left, chunk);
      any |= counts[b] > 0;
    }
    if (!any)
      break;
    ++calls;
    std::vector<uint32_t> iro = {0}, cacheLengths, slots;
    std::vector<uint8_t> kRows, gRows;
    for (int64_t b = 0; b < B; ++b) {
      iro.push_back(iro.back() + uint32_t(counts[b]));
      cacheLengths.push_back(uint32_t(done[b]));
      slots.push_back(slotOf[b]);
      kRows.insert(kRows.end(), seqs[b].keys.begin() + done[b] * D * es,
                   seqs[b].keys.begin() + (done[b] + counts[b]) * D * es);
      gRows.insert(gRows.end(), seqs[b].gates.begin() + done[b] * D * es,
                   seqs[b].gates.begin() + (done[b] + counts[b]) * D * es);
    }
    int64_t T = iro.back();
    int64_t capacity = T / K + B;
    Tensor k(es, {std::max<int64_t>(T, 1), D}),
        g(es, {std::max<int64_t>(T, 1), D});
    k.fill(0, kRows);
    g.fill(0, gRows);
    Tensor tIro(4, {B + 1}), tCache(4, {B}), tSlots(4, {B}), tTable(4, {B, width});
    tIro.image = bytesOf(iro);
    tCache.image = bytesOf(cacheLengths);
    tSlots.image = bytesOf(slots);
    tTable.image = bytesOf(table);
    Tensor closed(es, {B, D}), ids(4, {B}), pro(4, {B + 1}),
        pooled(es, {capacity, D});
    for (Tensor *t : {&k, &g, &tIro, &tCache, &tSlots, &tTable, &closed, &ids,
                      &pro, &pooled})
      t->upload();
    View kv = k.deviceView(), gv = g.deviceView();
    kv.sizes[0] = gv.sizes[0] = T;
    View base = cache.bytes.deviceView();
    die(kernels.stepCache(test::argsByName<StepCacheArgs>(
        {{"closed", closed.deviceView()},
         {"closed_pool", ids.deviceView()},
         {"pool_row_offsets", pro.deviceView()},
         {"pooled", pooled.deviceView()},
         {"tail", tail.deviceView()},
         {"cache_keys", cache.keys(base)},
         {"cache_scales", cache.scales(base)},
         {"k", kv},
         {"gate", gv},
         {"ape", ape.deviceView()},
         {"input_row_offsets", tIro.deviceView()},
         {"cache_lengths", tCache.deviceView()},
         {"slot_idx", tSlots.deviceView()},
         {"block_table", tTable.deviceView()}},
        int32_t(B))));
    std::vector<uint8_t> closedImg = closed.download();
    std::vector<uint8_t> closedRows = closed.dense(&closedImg);
    std::vector<uint8_t> idBytes = ids.download();
    std::vector<uint8_t> proBytes = pro.download();
    std::vector<uint8_t> pooledImg = pooled.download();
    std::vector<int32_t> idValues(B);
    std::memcpy(idValues.data(), idBytes.data(), 4 * B);
    std::vector<uint32_t> proValues = wordsOf(proBytes);
    std::vector<int64_t> firstPool(B);
    for (int64_t b = 0; b < B; ++b)
      firstPool[b] = (done[b] + K - 1) / K;
    View hostBase = denseView(expected.data(), {kPages * cache.pageStride});
    std::vector<uint8_t> pooledRows = pooled.dense(&pooledImg);
    expectEntries(type, format, cache.keys(hostBase), cache.scales(hostBase),
                  tTable.hostView(), closedRows, idValues, pooledRows,
                  proValues, firstPool);
    // The dense pools themselves, by request and pool id.
    const size_t rowBytes = size_t(D * es);
    for (int64_t b = 0; b < B; ++b) {
      if (idValues[b] >= 0)
        produced[b][idValues[b]].push_back(
            std::vector<uint8_t>(closedRows.begin() + b * rowBytes,
                                 closedRows.begin() + (b + 1) * rowBytes));
      for (uint32_t r = proValues[b]; r < proValues[b + 1]; ++r)
        produced[b][firstPool[b] + (r - proValues[b])].push_back(
            std::vector<uint8_t>(pooledRows.begin() + r * rowBytes,
                                 pooledRows.begin() + (r + 1) * rowBytes));
    }
    for (int64_t b = 0; b < B; ++b)
      done[b] += counts[b];
  }
  // Every pool of every request produced exactly once, within tolerance of
  // the reference's one-shot compress of the whole sequence: the ring
  // (window `window`) carried the members of pools across calls.
  int64_t pools = 0, bad = 0;
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = lengths[b], P = n / K;
    std::vector<uint8_t> want(std::max<int64_t>(P, 1) * D * es);
    std::vector<uint32_t> iro1 = {0, uint32_t(n)}, pro1 = {0, uint32_t(P)},
                          cache1 = {0};
    reference::compress(
        {type, D, K}, denseView(want.data(), {P, D}),
        denseView(const_cast<uint8_t *>(seqs[b].keys.data()), {n, D}),
        denseView(const_cast<uint8_t *>(seqs[b].gates.data()), {n, D}),
        denseView(apeValues.data(), {K, D}), denseView(iro1.data(), {2}),
        denseView(pro1.data(), {2}), denseView(cache1.data(), {1}));
    for (int64_t p = 0; p < P; ++p, ++pools) {
      auto it = produced[b].find(p);
      if (it == produced[b].end() || it->second.size() != 1) {
        ++bad;
        continue;
      }
      std::vector<const uint8_t *> members;
      for (int64_t m = 0; m < K; ++m)
        members.push_back(seqs[b].keys.data() + (p * K + m) * D * es);
      std::vector<double> scales;
      appendScales(type, D, members, scales);
      std::vector<uint8_t> one(want.begin() + p * D * es,
                               want.begin() + (p + 1) * D * es);
      worst = std::max(worst, maxUlpError(type, D, it->second[0], one, scales));
    }
    bad += int64_t(produced[b].size()) > P;
  }
  char dense[200];
  std::snprintf(dense, sizeof(dense),
                "the dense pools: %lld, each produced once, within %.0f ulp "
                "of the reference's one-shot compress (max %.2f)",
                (long long)pools, toleranceUlp(type), worst);
  bool denseOk = bad == 0 && worst <= toleranceUlp(type);
  std::vector<uint8_t> got = cache.bytes.download();
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected[i]) {
      if (first < 0)
        first = int64_t(i);
      ++differ;
    }
  int64_t written = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    written += expected[i] != 0xA5;
  std::printf("%s: %d calls, %lld cache bytes differ from the reference "
              "(%lld bytes written; ring window %lld)\n",
              name, calls, (long long)differ, (long long)written,
              (long long)window);
  if (first >= 0)
    std::printf("  first at byte %lld: page %lld, offset %lld: got 0x%02x, "
                "want 0x%02x\n",
                (long long)first, (long long)(first / cache.pageStride),
                (long long)(first % cache.pageStride), got[first],
                expected[first]);
  expect(differ == 0 && written > 0,
         "every entry is the formula on the device's dense pool, nothing "
         "else written");
  expect(denseOk, dense);

  // The guards (validation off, as on a device): request 0's page is good
  // (7), request 1's is -1, request 2's the page count N, and request 3's
  // later pools need a second page the table does not have; only request
  // 0's entries and request 3's first page change.
  {
    std::vector<uint32_t> iro = {0, 8, 16, 24, 104}, cacheLengths(4, 0),
                          slots = {0, 1, 2, 3};
    std::vector<uint32_t> bad = {7, uint32_t(-1), uint32_t(kPages), 9};
    std::vector<uint8_t> kRows(seqs[0].keys.begin(),
                               seqs[0].keys.begin() + 104 * D * es);
    Tensor k(es, {104, D}), tIro(4, {5}), tCache(4, {4}), tSlots(4, {4}),
        tTable(4, {4, 1}), closed(es, {4, D}), ids(4, {4}), pro(4, {5}),
        pooled(es, {30, D});
    k.fill(0, kRows);
    tIro.image = bytesOf(iro);
    tCache.image = bytesOf(cacheLengths);
    tSlots.image = bytesOf(slots);
    tTable.image = bytesOf(bad);
    for (Tensor *t : {&k, &tIro, &tCache, &tSlots, &tTable, &closed, &ids,
                      &pro, &pooled})
      t->upload();
    View base = cache.bytes.deviceView();
    die(kernels.stepCache(test::argsByName<StepCacheArgs>(
                              {{"closed", closed.deviceView()},
                               {"closed_pool", ids.deviceView()},
                               {"pool_row_offsets", pro.deviceView()},
                               {"pooled", pooled.deviceView()},
                               {"tail", tail.deviceView()},
                               {"cache_keys", cache.keys(base)},
                               {"cache_scales", cache.scales(base)},
                               {"k", k.deviceView()},
                               {"gate", k.deviceView()},
                               {"ape", ape.deviceView()},
                               {"input_row_offsets", tIro.deviceView()},
                               {"cache_lengths", tCache.deviceView()},
                               {"slot_idx", tSlots.deviceView()},
                               {"block_table", tTable.deviceView()}},
                              4),
                          Validation::Trust));
    std::vector<uint8_t> pooledImg = pooled.download();
    std::vector<uint8_t> proBytes = pro.download();
    std::vector<uint8_t> closedImg = closed.download();
    std::vector<int32_t> idValues(4, -1);
    View hostBase = denseView(expected.data(), {kPages * cache.pageStride});
    expectEntries(type, format, cache.keys(hostBase), cache.scales(hostBase),
                  tTable.hostView(), closed.dense(&closedImg), idValues,
                  pooled.dense(&pooledImg), wordsOf(proBytes), {0, 0, 0, 0});
    std::vector<uint8_t> after = cache.bytes.download();
    expect(after == expected,
           "bad block-table entries (-1, a page at N, past the table's "
           "width) write nothing; the good entries are written");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // --format=<name>: one format only, by the name it prints (e.g. "fp8
  // hadamard absmax"; a mutated module of one format needs no more).
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--format=", 0) == 0) {
      only = arg.substr(9);
    } else {
      std::fprintf(stderr, "usage: %s [--format=<name>]\n", argv[0]);
      return 2;
    }
  }
  std::printf("kpool-gpu-cache-check: %s\n", deviceDescription().c_str());
#define KPOOL_GPU_KERNELS(name)                                                \
  KernelSet name(kpool_##name##_cuda_config(), kpool_##name##_cuda_backend())
  KPOOL_GPU_KERNELS(bf16_d128_k4_fp8_hadamard_absmax);
  KPOOL_GPU_KERNELS(bf16_d128_k4_fp8_hadamard_pow2);
  KPOOL_GPU_KERNELS(f32_d128_k4_fp8_none_absmax);
  KPOOL_GPU_KERNELS(f16_d128_k4_fp8_none_pow2);
  KPOOL_GPU_KERNELS(bf16_d128_k4_element_hadamard);
  KPOOL_GPU_KERNELS(f32_d128_k4_element_none);
#undef KPOOL_GPU_KERNELS
  // Ring windows: kpool rows for three formats, more for the others (a
  // speculative decoder's window).
  struct Format {
    const KernelSet &kernels;
    CacheFormat format;
    const char *name;
    unsigned seed;
    int64_t window;
  } formats[] = {
      {bf16_d128_k4_fp8_hadamard_absmax,
       {CacheEntry::FP8, CacheRotate::Hadamard, CacheScale::Absmax},
       "fp8 hadamard absmax",
       3,
       K},
      {bf16_d128_k4_fp8_hadamard_pow2,
       {CacheEntry::FP8, CacheRotate::Hadamard, CacheScale::Pow2},
       "fp8 hadamard pow2",
       5,
       K + 3},
      // f32 rows: 32 lanes a row group on the GPU; no rotation.
      {f32_d128_k4_fp8_none_absmax,
       {CacheEntry::FP8, CacheRotate::None, CacheScale::Absmax},
       "f32 fp8 absmax",
       7,
       K + 1},
      {f16_d128_k4_fp8_none_pow2,
       {CacheEntry::FP8, CacheRotate::None, CacheScale::Pow2},
       "f16 fp8 pow2",
       11,
       K},
      // Entries of the element type: no scales.
      {bf16_d128_k4_element_hadamard,
       {CacheEntry::Element, CacheRotate::Hadamard, CacheScale::Absmax},
       "bf16 element hadamard",
       9,
       K + 2},
      {f32_d128_k4_element_none,
       {CacheEntry::Element, CacheRotate::None, CacheScale::Absmax},
       "f32 element",
       13,
       K},
  };
  int ran = 0;
  for (const Format &f : formats)
    if (only.empty() || only == f.name) {
      run(f.kernels, f.format, f.name, f.seed, f.window);
      ++ran;
    }
  if (!ran) {
    std::fprintf(stderr, "%s: --format names one of", argv[0]);
    for (const Format &f : formats)
      std::fprintf(stderr, " '%s'", f.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  std::printf("digest of every device download: %016llx\n",
              (unsigned long long)downloadDigest());
  return failures ? 1 : 0;
}
