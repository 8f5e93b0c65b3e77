//===- kpool-overlap.cpp - host validation of overlapping operands --------===//
//
// Contract revision 3, "Overlapping operands": host validation rejects a
// call where an operand the kernel writes (an output of the table, or the
// status word) overlaps another operand, naming both. Driven by the kernel
// ABI table: for every kernel (the pool-cache ones included) a valid call
// is accepted, then every written operand is moved onto every other
// operand (and the status word into every operand) and each such call must
// be rejected naming the pair. Then the edges, in one arena with known
// gaps: byte ranges that touch in one byte or end one byte apart, negative
// strides, empty views, inputs that share a buffer, and the paged cache's
// keys and scales interleaved in one buffer (accepted) or overlapping
// (rejected).
//
//===----------------------------------------------------------------------===//

#include "Support/ArgsByName.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/KernelSet.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace kpool;

namespace {

int failures = 0, passes = 0;

void expect(bool ok, const std::string &what) {
  if (ok) {
    ++passes;
    return;
  }
  ++failures;
  std::printf("FAIL: %s\n", what.c_str());
}

/// `s` failed with a message naming `written` and `other`.
bool namesPair(const Status &s, const std::string &written,
               const std::string &other) {
  const std::string &m = s.message();
  size_t w = m.find(written), o = m.find(" overlaps " + other);
  return !s.ok() && w != std::string::npos && o != std::string::npos && w < o;
}

/// The view operand `name` inside `args` (kernel `id`'s struct), or null.
View *field(abi::KernelId id, std::vector<char> &args, const char *name) {
  const abi::Operand *o = abi::findOperand(id, name);
  if (!o || o->offset < 0 || o->role == abi::Role::Scalar)
    return nullptr;
  return reinterpret_cast<View *>(args.data() + o->offset);
}

std::string quoted(const char *name) { return std::string("'") + name + "'"; }

} // namespace

int main() {
  registerJitCompiler();
  KernelConfig config;
  config.elementType = KPOOL_F32;
  config.headDim = 16;
  config.kpool = 4;
  config.cache.entry = CacheEntry::FP8;
  config.cache.rotate = CacheRotate::Hadamard;
  Status status;
  auto set = KernelSet::get(config, status);
  if (!set) {
    std::printf("FAIL: no kernel set: %s\n", status.message().c_str());
    return 1;
  }
  // A ragged call: three requests of 5, 2 and 9 tokens after 3, 0 and 6
  // cached ones, in slots 2, 0 and 1.
  const int64_t B = 3, D = 16, K = 4, R = K, T = 16, P = 4, W = 4;
  std::vector<uint32_t> iro = {0, 5, 7, 16}, cache = {3, 0, 6},
                        slots = {2, 0, 1}, proInit(B + 1), table(B * W);
  for (int64_t i = 0; i < B * W; ++i)
    table[i] = uint32_t(i);
  std::vector<float> k(T * D, 0.5f), gate(T * D, 0.25f), ape(K * D, 0.125f),
      tail(B * 2 * R * D), closedRows(B * D), pooled((T / K + B) * D),
      scales(B * W * P);
  std::vector<int32_t> closed(B);
  std::vector<uint8_t> keys(B * W * P * D);
  int64_t capacity = T / K + B;
  // Every operand in its own 8 KiB of one arena: an operand moved onto
  // another (none is larger than 2 KiB) overlaps that one alone.
  const size_t spacing = 8192;
  std::vector<uint64_t> arena(14 * spacing / 8);
  int placed = 0;
  auto place = [&](auto &data) {
    auto *at = reinterpret_cast<char *>(arena.data()) + placed++ * spacing;
    std::memcpy(at, data.data(), data.size() * sizeof(data[0]));
    return reinterpret_cast<decltype(data.data())>(at);
  };
  uint32_t *pro = place(proInit);
  float *pooledAt = place(pooled);
  std::initializer_list<test::Named> operands = {
      {"tail", denseView(place(tail), {B, 2, R, D})},
      {"k", denseView(place(k), {T, D})},
      {"gate", denseView(place(gate), {T, D})},
      {"ape", denseView(place(ape), {K, D})},
      {"input_row_offsets", denseView(place(iro), {B + 1})},
      {"pool_row_offsets", denseView(pro, {B + 1})},
      {"cache_lengths", denseView(place(cache), {B})},
      {"slot_idx", denseView(place(slots), {B})},
      {"closed", denseView(place(closedRows), {B, D})},
      {"closed_pool", denseView(place(closed), {B})},
      {"cache_keys", denseView(place(keys), {B * W, P, D})},
      {"cache_scales", denseView(place(scales), {B * W, P})},
      {"block_table", denseView(place(table), {B, W})}};
  // compress needs its exact pool rows: pool_offsets first.
  PoolOffsetsArgs po = test::argsByName<PoolOffsetsArgs>(operands);
  if (Status s = set->poolOffsets(po); !s.ok()) {
    std::printf("FAIL: pool_offsets: %s\n", s.message().c_str());
    return 1;
  }

  // Every kernel: accepted as it is; rejected with any written operand
  // moved onto any other operand, or the status word inside any operand.
  for (const abi::Kernel &kernel : abi::kernels) {
    std::vector<char> args(size_t(kernel.argsSize), 0);
    for (const test::Named &n : operands)
      abi::setView(kernel.id, args.data(), n.first, n.second);
    abi::setScalar(kernel.id, args.data(), "num_requests", int32_t(B));
    // `pooled`: compress's exact rows, ring_close's one per request, the
    // step's capacity.
    abi::KernelId base = kernel.base;
    View pooledView =
        denseView(pooledAt, {base == abi::KernelId::Compress ? int64_t(pro[B])
                             : base == abi::KernelId::RingClose ? B
                                                                : capacity,
                             D});
    abi::setView(kernel.id, args.data(), "pooled", pooledView);
    std::string name = kernel.name;
    Status good =
        set->call(kernel.id, args.data(), Stream(), Validation::Check);
    expect(good.ok(), name + ": the valid call: " + good.message());
    int pairs = 0;
    for (int w = 0; w < kernel.numOperands; ++w) {
      const abi::Operand &ow = kernel.operands[w];
      bool statusWord =
          ow.role == abi::Role::Context && ow.kind == abi::Kind::U64;
      if (ow.role != abi::Role::Output && !statusWord)
        continue;
      for (int o = 0; o < kernel.numOperands; ++o) {
        const abi::Operand &oo = kernel.operands[o];
        if (o == w ||
            (oo.role != abi::Role::Output && oo.role != abi::Role::Input))
          continue;
        std::vector<char> bad = args;
        View *other = field(kernel.id, bad, oo.name);
        std::string a, b;
        Status s;
        if (statusWord) {
          s = set->call(kernel.id, bad.data(),
                        Stream(nullptr, static_cast<uint64_t *>(other->data)),
                        Validation::Check);
          a = "the status word";
        } else {
          field(kernel.id, bad, ow.name)->data = other->data;
          s = set->check(kernel.id, bad.data());
          a = quoted(ow.name);
        }
        b = quoted(oo.name);
        // The first written operand of the pair in the table's order is
        // named first.
        bool named = o < w && oo.role == abi::Role::Output ? namesPair(s, b, a)
                                                           : namesPair(s, a, b);
        expect(named, name + ": " + a + " on " + b + ": " +
                          (s.ok() ? "accepted" : s.message()));
        ++pairs;
      }
    }
    std::printf("%s: %d overlapping pairs rejected\n", kernel.name, pairs);
  }

  // The edges, in one arena: `k` at element 4096, `pooled` placed around it.
  std::vector<float> edges(16384);
  float *kAt = edges.data() + 4096;
  std::memcpy(kAt, k.data(), k.size() * sizeof(float));
  View kView = denseView(kAt, {T, D});
  auto compress = [&](View pooledView, View gateView) {
    CompressArgs a = test::argsByName<CompressArgs>(operands);
    a.k = kView;
    a.gate = gateView;
    a.pooled = pooledView;
    return set->check(a);
  };
  const int64_t rows = pro[B];
  View gateView = denseView(edges.data() + 12288, {T, D});
  // `pooled` ending one element before `k`, and one element later.
  View before = denseView(kAt - rows * D, {rows, D});
  View touching = denseView(kAt - rows * D + 1, {rows, D});
  expect(compress(before, gateView).ok(),
         "pooled ending right before k is accepted");
  Status s = compress(touching, gateView);
  expect(namesPair(s, "'pooled'", "'k'"),
         "pooled sharing one element with k: " + s.message());
  // Negative row strides: the lowest byte counts.
  View down = denseView(kAt - D, {rows, D});
  down.strides[0] = -D;
  expect(compress(down, gateView).ok(),
         "pooled with a negative row stride, below k, is accepted");
  down.data = kAt;
  s = compress(down, gateView);
  expect(namesPair(s, "'pooled'", "'k'"),
         "pooled with a negative row stride from k's first row: " +
             s.message());
  // Inputs may share a buffer; an empty written view overlaps nothing.
  expect(compress(denseView(edges.data(), {rows, D}), kView).ok(),
         "k and gate as one buffer are accepted");
  CompressArgs none = test::argsByName<CompressArgs>(operands);
  std::vector<uint32_t> noTokens = {0, 0, 0, 0};
  none.input_row_offsets = denseView(noTokens.data(), {B + 1});
  std::vector<uint32_t> noPools = {0, 0, 0, 0};
  none.pool_row_offsets = denseView(noPools.data(), {B + 1});
  none.pooled = denseView(kAt, {0, D});
  s = set->check(none);
  expect(s.ok(), "an empty pooled on k is accepted: " + s.message());

  // The paged cache's keys and scales interleaved in the pages of one
  // buffer (the indexer page: P x D codes, then P f32 scales): accepted;
  // a page stride too small for both: rejected.
  const int64_t N = B * W, pageBytes = P * D + 4 * P;
  std::vector<uint32_t> pagesWords(size_t(N * pageBytes / 4 + 4));
  uint8_t *pages = reinterpret_cast<uint8_t *>(pagesWords.data());
  auto stepCache = [&](int64_t stride) {
    StepCacheArgs a = test::argsByName<StepCacheArgs>(operands, int32_t(B));
    a.pooled = denseView(pooledAt, {capacity, D});
    a.cache_keys = denseView(pages, {N, P, D});
    a.cache_keys.strides[0] = stride;
    a.cache_scales = denseView(pages + P * D, {N, P});
    a.cache_scales.strides[0] = stride / 4;
    return set->check(a);
  };
  s = stepCache(pageBytes);
  expect(s.ok(), "keys and scales in the pages of one buffer: " + s.message());
  s = stepCache(pageBytes - 4);
  expect(namesPair(s, "'cache_keys'", "'cache_scales'"),
         "keys and scales sharing bytes of the next page: " + s.message());

  // One byte: FP8 keys (1-byte elements) starting on the last byte of
  // `pooled`, and one byte later.
  std::vector<uint32_t> bytes(4096);
  uint8_t *base = reinterpret_cast<uint8_t *>(bytes.data());
  auto keysAfterPooled = [&](int64_t gap) {
    StepCacheArgs a = test::argsByName<StepCacheArgs>(operands, int32_t(B));
    a.pooled = denseView(reinterpret_cast<float *>(base), {capacity, D});
    uint8_t *pooledEnd = base + capacity * D * int64_t(sizeof(float));
    a.cache_keys = denseView(pooledEnd - 1 + gap, {N, P, D});
    return set->check(a);
  };
  s = keysAfterPooled(0);
  expect(namesPair(s, "'pooled'", "'cache_keys'"),
         "keys on pooled's last byte: " + s.message());
  s = keysAfterPooled(1);
  expect(s.ok(), "keys right after pooled's last byte: " + s.message());

  std::printf("%d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
