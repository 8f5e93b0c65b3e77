//===- kpool-demo.cpp - a serving schedule through the kpool kernels ------===//
//
// The main job of the README: drives the kernels the way a serving engine
// does -- a ragged batch of requests in non-identity ring slots, chunked
// prefill with chunk boundaries inside pools, then decode with one and with
// several (speculative) tokens per call -- and checks every pool produced:
// bit for bit against one-shot compression of the whole sequence, and within
// a few units in the last place against the plain reference implementation.
//
//===----------------------------------------------------------------------===//

#include "Reference/Float.h"
#include "Reference/Reference.h"
#include "Reference/VerifySchedule.h"
#include "kpool/Runtime/Jit.h"
#include "kpool/Runtime/PoolStore.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace kpool;

namespace {

struct Options {
  ElementType type = KPOOL_BF16;
  int64_t headDim = 128;
  int64_t kpool = 4;
  bool openmp = false;
  bool verbose = false;
};

/// A request of the schedule: its slot and its whole token sequence.
struct Request {
  uint32_t slot;
  std::vector<uint8_t> keys, gates; // raw element bytes, row-major
  int64_t length;
};

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--type bf16|f16|f32] [--head-dim N] [--kpool N] "
               "[--openmp] [--verbose]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    if (arg == "--type") {
      const char *v = next();
      if (!v)
        return usage(argv[0]);
      std::string t = v;
      opt.type = t == "f32" ? KPOOL_F32 : t == "f16" ? KPOOL_F16 : KPOOL_BF16;
    } else if (arg == "--head-dim") {
      const char *v = next();
      if (!v)
        return usage(argv[0]);
      opt.headDim = std::atoll(v);
    } else if (arg == "--kpool") {
      const char *v = next();
      if (!v)
        return usage(argv[0]);
      opt.kpool = std::atoll(v);
    } else if (arg == "--openmp") {
      opt.openmp = true;
    } else if (arg == "--verbose") {
      opt.verbose = true;
    } else {
      return usage(argv[0]);
    }
  }
  const int64_t D = opt.headDim, K = opt.kpool;
  const int64_t esize = elementTypeSize(opt.type);
  reference::Geometry geometry{opt.type, D, K};

  KernelConfig config;
  config.elementType = opt.type;
  config.headDim = D;
  config.kpool = K;
  config.openmp = opt.openmp;
  Status status;
  kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  std::shared_ptr<KernelSet> kernels = KernelSet::get(config, status);
  if (!kernels) {
    std::fprintf(stderr, "kpool-demo: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("kpool-demo: %s, head_dim %lld, kpool %lld, CPU (JIT)%s\n",
              elementTypeName(opt.type), (long long)D, (long long)K,
              opt.openmp ? ", OpenMP" : "");

  // Four requests in slots 3, 0, 5, 1 of a 6-slot ring, with prompt lengths
  // that are not multiples of kpool.
  std::mt19937 rng(20261130);
  std::normal_distribution<float> keyDist(0.f, 1.f), gateDist(0.f, 4.f);
  const std::vector<uint32_t> slots = {3, 0, 5, 1};
  const std::vector<int64_t> prompts = {37, 130, 5, 66};
  const int64_t decodeCalls = 9, maxSlots = 6;
  std::vector<Request> requests;
  for (size_t r = 0; r < slots.size(); ++r) {
    Request req;
    req.slot = slots[r];
    req.length = prompts[r] + 3 * decodeCalls;
    req.keys.resize(req.length * D * esize);
    req.gates.resize(req.length * D * esize);
    for (int64_t i = 0; i < req.length * D; ++i) {
      reference::setElementBits(opt.type, &req.keys[i * esize],
                                reference::roundToBits(opt.type, keyDist(rng)));
      reference::setElementBits(
          opt.type, &req.gates[i * esize],
          reference::roundToBits(opt.type, gateDist(rng)));
    }
    requests.push_back(std::move(req));
  }
  std::vector<float> ape(K * D);
  for (float &a : ape)
    a = gateDist(rng) * 0.5f;

  // The schedule: prefill in chunks of 22 tokens (boundaries fall inside
  // pools), then decode: odd calls bring 1 token, even calls 3 (speculative).
  PoolStore store(kernels, maxSlots, ape.data());
  std::vector<int64_t> done(requests.size(), 0), target(requests.size());
  for (size_t r = 0; r < requests.size(); ++r)
    target[r] = prompts[r];
  int call = 0;
  int64_t produced = 0, fromRing = 0;
  auto runCall = [&](const std::vector<int64_t> &counts,
                     const char *phase) -> bool {
    std::vector<uint32_t> iro = {0}, callSlots;
    std::vector<uint8_t> k, g;
    for (size_t r = 0; r < requests.size(); ++r) {
      if (counts[r] < 0)
        continue; // not in this call
      const Request &req = requests[r];
      k.insert(k.end(), req.keys.begin() + done[r] * D * esize,
               req.keys.begin() + (done[r] + counts[r]) * D * esize);
      g.insert(g.end(), req.gates.begin() + done[r] * D * esize,
               req.gates.begin() + (done[r] + counts[r]) * D * esize);
      iro.push_back(iro.back() + counts[r]);
      callSlots.push_back(req.slot);
      done[r] += counts[r];
    }
    int64_t rows = iro.back();
    std::vector<ProducedPool> pools;
    Status s =
        store.step(denseView(k.data(), {rows, D}),
                   denseView(g.data(), {rows, D}), iro, callSlots, &pools);
    if (!s.ok()) {
      std::fprintf(stderr, "kpool-demo: call %d: %s\n", call,
                   s.message().c_str());
      return false;
    }
    int64_t ring = 0;
    for (const ProducedPool &p : pools)
      ring += p.fromRing;
    produced += pools.size();
    fromRing += ring;
    if (call == 0) { // the columns: one per request, by its ring slot
      std::printf("call  #  phase      slot");
      for (uint32_t slot : slots)
        std::printf(" %4u", slot);
      std::printf("  -> pools produced (of them closed from the ring)\n");
    }
    std::printf("call %2d  %-8s tokens", call, phase);
    for (size_t r = 0; r < requests.size(); ++r)
      std::printf(" %4lld", (long long)std::max<int64_t>(counts[r], 0));
    std::printf("  -> %3zu pools (%lld closed from the ring)\n", pools.size(),
                (long long)ring);
    ++call;
    return true;
  };

  const int64_t chunk = 22;
  for (std::vector<int64_t> counts;
       !(counts = reference::nextPrefillCall(
             target, [&](size_t r) { return done[r]; }, chunk))
            .empty();)
    if (!runCall(counts, "prefill"))
      return 1;
  for (int64_t d = 0; d < decodeCalls; ++d) {
    std::vector<int64_t> counts(requests.size(), d % 2 ? 3 : 1);
    if (!runCall(counts, "decode"))
      return 1;
  }

  // Check every pool: bit for bit against a one-shot compress of the whole
  // sequence, and within tolerance against the reference. The kernels'
  // exp is a polynomial, the reference's is libm's; a pooled key is a
  // weighted mean of its members' keys, so an exp error of a few ulp moves it
  // by a few ulp of its largest member key (not of itself: keys of opposite
  // signs cancel). The error is measured in those units.
  int64_t mismatches = 0, checked = 0;
  double maxUlp = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    const Request &req = requests[r];
    int64_t n = done[r], pools = n / K;
    std::vector<uint32_t> iro = {0, uint32_t(n)}, cache = {0},
                          pro = {0, uint32_t(pools)};
    std::vector<uint8_t> oneShot(pools * D * esize), ref(pools * D * esize);
    View k = denseView(const_cast<uint8_t *>(req.keys.data()), {n, D});
    View g = denseView(const_cast<uint8_t *>(req.gates.data()), {n, D});
    View a = denseView(ape.data(), {K, D});
    View iroV = denseView(iro.data(), {2}),
         cacheV = denseView(cache.data(), {1});
    View proV = denseView(pro.data(), {2});
    CompressArgs c{};
    c.pooled = denseView(oneShot.data(), {pools, D});
    c.k = k;
    c.gate = g;
    c.ape = a;
    c.input_row_offsets = iroV;
    c.pool_row_offsets = proV;
    c.cache_lengths = cacheV;
    Status s = kernels->compress(c);
    if (!s.ok()) {
      std::fprintf(stderr, "kpool-demo: %s\n", s.message().c_str());
      return 1;
    }
    reference::compress(geometry, denseView(ref.data(), {pools, D}), k, g, a,
                        iroV, proV, cacheV);
    if (store.pools(req.slot) != pools) {
      std::printf("request %zu (slot %u): %lld pools stored, expected %lld\n",
                  r, req.slot, (long long)store.pools(req.slot),
                  (long long)pools);
      ++mismatches;
      continue;
    }
    for (int64_t p = 0; p < pools; ++p) {
      const auto *got = static_cast<const uint8_t *>(store.pool(req.slot, p));
      bool same = std::memcmp(got, &oneShot[p * D * esize], D * esize) == 0;
      for (int64_t d = 0; d < D; ++d) {
        double scale = 0;
        for (int64_t m = 0; m < K; ++m)
          scale = std::max<double>(
              scale,
              std::fabs(reference::fromBits(
                  opt.type,
                  reference::elementBits(
                      opt.type, &req.keys[((p * K + m) * D + d) * esize]))));
        double a = reference::fromBits(
            opt.type, reference::elementBits(opt.type, got + d * esize));
        double b = reference::fromBits(
            opt.type,
            reference::elementBits(opt.type, &ref[(p * D + d) * esize]));
        maxUlp = std::max(maxUlp,
                          std::fabs(a - b) / reference::ulpOf(opt.type, scale));
      }
      ++checked;
      if (!same) {
        ++mismatches;
        std::printf("request %zu (slot %u): pool %lld differs from one-shot "
                    "compression\n",
                    r, req.slot, (long long)p);
      }
      if (opt.verbose && p < 2) {
        std::printf("  slot %u pool %lld:", req.slot, (long long)p);
        for (int64_t d = 0; d < std::min<int64_t>(D, 6); ++d)
          std::printf(" %.5g", reference::fromBits(
                                   opt.type, reference::elementBits(
                                                 opt.type, got + d * esize)));
        std::printf(" ...\n");
      }
    }
  }
  const double tolerance = 4;
  std::printf("%lld pools produced (%lld closed from the ring); %lld checked: "
              "%lld differ from one-shot compression; max error vs the "
              "reference %.2f ulp of the largest member key (tolerance %.0f)\n",
              (long long)produced, (long long)fromRing, (long long)checked,
              (long long)mismatches, maxUlp, tolerance);
  bool ok = mismatches == 0 && maxUlp <= tolerance && checked == produced;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
