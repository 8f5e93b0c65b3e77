//===- kpool-gpu-capture.cpp - kpool calls captured into a graph ----------===//
//
// What a serving engine does with kpool on a GPU: buffers allocated once at
// capacity, the four calls of a step (ring_close, pool_offsets, compress,
// seed_tail) captured once from its stream into a graph, then the graph
// replayed step after step with the metadata and keys rewritten in place
// between replays. Checks, on the device or in the CPU emulation:
//   (a) every step's outputs (pooled, pool_row_offsets, closed pools, the
//       ring) are bit-identical between the eager run and the replays;
//   (b) the graph holds 4 kernel launches (one per call: launches per step);
//       under the emulated CUDA driver (test/lib/CudaEmu) also that eager
//       launches and replays run on the stream they were enqueued on, and
//       never on the other stream, which runs its own schedule, and that
//       each GPU module loaded once;
//   (c) per-step device time of eager steps and of replays (CUDA events).
// Any synchronization, allocation, free, copy or module load during the
// capture fails in the driver (the emulated one names the call) and the
// CUDA layer aborts; the --forbidden=<call> modes make one on purpose (for
// the lit test), and --fork runs the schedule in a child forked before any
// CUDA call (--fork-after-init: after one, which must fail in the child).
//
//   kpool-gpu-capture [--steps=N] [--forbidden=sync|alloc|copy|load]
//                     [--fork] [--fork-after-init]
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d64_k3.h"

#include "GPU/GpuSupport.h"
#include "Support/ArgsByName.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace kpool;
using namespace kpool::gpu;

namespace {

int failures = 0;
void expect(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  failures += !ok;
}

constexpr int64_t B = 4, T = 24, MaxSlots = 6;

/// The device buffers of one engine, at capacity, and the host side of
/// each step.
struct Engine {
  const KernelSet &kernels;
  int64_t D, K, es;
  Tensor k, g, ape, iro, cache, slots, pro, pooled, closed, closedRows, ring;
  /// The calls' status word (device memory, zeroed once): the kernels
  /// record bad metadata there; the engine reads it when it likes.
  Tensor status;
  std::vector<uint32_t> lengths = std::vector<uint32_t>(B, 0);
  std::mt19937 rng;

  Engine(const KernelSet &kernels, uint32_t seed)
      : kernels(kernels), D(kernels.config().headDim),
        K(kernels.config().kpool),
        es(elementTypeSize(kernels.config().elementType)), k(es, {T, D}),
        g(es, {T, D}), ape(4, {K, D}), iro(4, {B + 1}), cache(4, {B}),
        slots(4, {B}), pro(4, {B + 1}), pooled(es, {T / K, D}),
        closed(4, {B}), closedRows(es, {B, D}),
        ring(es, {MaxSlots, 2, K, D}), status(8, {1}), rng(seed) {
    std::vector<float> apeValues(K * D);
    for (int64_t i = 0; i < K * D; ++i)
      apeValues[i] = 0.01f * float(i % 17) - 0.08f;
    ape.fill(0, bytesOf(apeValues));
    slots.fill(0, bytesOf(std::vector<uint32_t>{3, 0, 5, 1}));
    for (Tensor *t : {&k, &g, &ape, &iro, &cache, &slots, &pro, &pooled,
                      &closed, &closedRows, &ring, &status}) {
      if (t != &ape && t != &slots)
        t->fill(0);
      t->upload();
    }
  }

  /// Writes step `s`'s keys and metadata into the device buffers in place
  /// (outside any capture: this is the engine's own upload).
  void stage(int64_t s, void *stream) {
    std::vector<uint32_t> offsets = {0};
    for (int64_t b = 0; b < B; ++b) {
      // Prefill chunks first, then decode of 1-3 tokens, some requests idle.
      int64_t n = s < 2 ? 4 + b : (s + b) % 4; // at most T tokens in all
      offsets.push_back(offsets.back() + uint32_t(n));
    }
    std::vector<uint8_t> keys = randomElements(
                             kernels.config().elementType, T * D, rng, 1.f),
                         gates = randomElements(kernels.config().elementType,
                                                T * D, rng, 4.f);
    k.fill(0, keys);
    g.fill(0, gates);
    iro.fill(0, bytesOf(offsets));
    cache.fill(0, bytesOf(lengths));
    for (Tensor *t : {&k, &g, &iro, &cache})
      t->upload(stream);
    for (int64_t b = 0; b < B; ++b)
      lengths[b] += offsets[b + 1] - offsets[b];
  }

  /// The four calls of a step, enqueued on `stream`.
  void enqueue(void *stream) {
    Stream on(stream, static_cast<uint64_t *>(status.deviceView().data));
    auto must = [](Status s) {
      if (!s.ok()) {
        std::fprintf(stderr, "kpool-gpu-capture: %s\n", s.message().c_str());
        std::exit(1);
      }
    };
    // The call's operands by their table names; ring_close's `pooled` is
    // `closedRows`.
    std::initializer_list<test::Named> operands = {
        {"tail", ring.deviceView()},
        {"k", k.deviceView()},
        {"gate", g.deviceView()},
        {"ape", ape.deviceView()},
        {"input_row_offsets", iro.deviceView()},
        {"pool_row_offsets", pro.deviceView()},
        {"cache_lengths", cache.deviceView()},
        {"slot_idx", slots.deviceView()},
        {"closed_pool", closed.deviceView()},
        {"pooled", pooled.deviceView()}};
    int32_t n = int32_t(B);
    must(kernels.ringClose(
        test::with(test::argsByName<RingCloseArgs>(operands, n),
                   {{"pooled", closedRows.deviceView()}}),
        on));
    must(kernels.poolOffsets(test::argsByName<PoolOffsetsArgs>(operands), on));
    must(kernels.compress(test::argsByName<CompressArgs>(operands), on));
    must(kernels.seedTail(test::argsByName<SeedTailArgs>(operands, n), on));
  }

  /// Every output of the step, downloaded after the stream's work.
  std::vector<uint8_t> outputs(void *stream) {
    std::vector<uint8_t> all;
    for (Tensor *t : {&pooled, &pro, &closed, &closedRows, &ring}) {
      std::vector<uint8_t> img = t->download(stream);
      all.insert(all.end(), img.begin(), img.end());
    }
    return all;
  }
};

/// Runs `steps` steps eagerly (graph null) or by replaying `graph`.
std::vector<std::vector<uint8_t>> run(Engine &e, int64_t steps, void *stream,
                                      const Graph *graph, double *msPerStep) {
  std::vector<std::vector<uint8_t>> out;
  StreamTimer timer(stream);
  double total = 0;
  for (int64_t s = 0; s < steps; ++s) {
    e.stage(s, stream);
    timer.start();
    if (graph)
      launchGraph(*graph, stream);
    else
      e.enqueue(stream);
    total += timer.stop();
    out.push_back(e.outputs(stream));
  }
  if (msPerStep)
    *msPerStep = steps ? total / double(steps) : 0;
  return out;
}

int schedule(const KernelSet &kernels, int64_t steps, const std::string &bad) {
  cuda::OwnedStream a, b;
  if (bad == "load") {
    // No launch and no prepare before the capture: its first launch would
    // load the GPU modules.
    Engine e(kernels, 7);
    beginCapture(a.get());
    e.enqueue(a.get());
    endCapture(a.get());
    return 1;
  }
  // Eager on A, while B runs its own engine's schedule.
  Engine eager(kernels, 7), other(kernels, 11);
  double eagerMs = 0;
  // Launch counts per stream: only the emulated driver tells them.
  const bool counted = emulatedDriver();
  int64_t a0 = launchCount(a.get()), b0 = launchCount(b.get());
  auto want = run(eager, steps, a.get(), nullptr, &eagerMs);
  int64_t a1 = launchCount(a.get()), b1 = launchCount(b.get());
  if (counted)
    expect(a1 - a0 == 4 * steps && b1 == b0,
           "eager: " + std::to_string(a1 - a0) + " launches on stream " +
               std::to_string(streamId(a.get())) + " for " +
               std::to_string(steps) + " steps, " + std::to_string(b1 - b0) +
               " on stream " + std::to_string(streamId(b.get())));
  auto otherWant = run(other, steps, b.get(), nullptr, nullptr);
  a1 = launchCount(a.get());
  b1 = launchCount(b.get());

  // The engine captures one step after preparing (module loads happen
  // there, not during the capture).
  Engine replayed(kernels, 7), other2(kernels, 11);
  Status p = kernels.prepare(Stream(a.get()));
  expect(p.ok(), "prepare before capture" +
                     (p.ok() ? std::string() : ": " + p.message()));
  beginCapture(a.get());
  replayed.enqueue(a.get());
  if (bad == "sync")
    mgpuStreamSynchronize(a.get());
  else if (bad == "alloc")
    cuda::DeviceBuffer scratch(64);
  else if (bad == "copy") {
    uint32_t word = 0;
    mgpuMemcpy(&word, replayed.iro.deviceView().data, 4, a.get());
  }
  std::shared_ptr<Graph> graph = endCapture(a.get());
  expect(graphLaunches(*graph) == 4,
         "the captured step holds " + std::to_string(graphLaunches(*graph)) +
             " kernel launches (one per call)");
  int64_t a2 = launchCount(a.get()), b2 = launchCount(b.get());
  int64_t loads = 0, modules = 0, most = 0;
  if (counted && moduleLoads(loads, modules, most)) {
    expect(a2 == a1 && b2 == b1, "nothing ran while capturing");
    expect(modules > 0 && most == 1 && loads == modules,
           "the GPU modules loaded once each (" + std::to_string(modules) +
               " modules, " + std::to_string(loads) + " loads)");
  }
  double replayMs = 0;
  auto got = run(replayed, steps, a.get(), graph.get(), &replayMs);
  auto otherGot = run(other2, steps, b.get(), nullptr, nullptr);
  int64_t a3 = launchCount(a.get()), b3 = launchCount(b.get());
  if (counted)
    expect(a3 - a2 == 4 * steps && b3 - b2 == 4 * steps,
           "replays: " + std::to_string(a3 - a2) + " launches on stream " +
               std::to_string(streamId(a.get())) + ", " +
               std::to_string(b3 - b2) + " on stream " +
               std::to_string(streamId(b.get())) + " from its own calls");
  int64_t same = 0;
  for (int64_t s = 0; s < steps; ++s)
    same += got[s] == want[s];
  expect(same == steps, std::to_string(same) + " of " + std::to_string(steps) +
                            " replayed steps bit-identical to the eager run "
                            "(metadata rewritten in place between replays)");
  expect(otherGot == otherWant,
         "the other stream's schedule is unchanged by the capture on this one");
  int64_t pools = 0;
  for (uint32_t l : eager.lengths)
    pools += l / kernels.config().kpool;
  expect(pools > 0, std::to_string(pools) + " pools made over " +
                        std::to_string(steps) + " steps");
  auto word = [&](Engine &e) {
    std::vector<uint8_t> img = e.status.download(a.get());
    uint64_t w;
    std::memcpy(&w, img.data(), 8);
    return w;
  };
  expect(word(eager) == 0 && word(replayed) == 0,
         "the status word is 0 after " + std::to_string(steps) + " (" + std::to_string(word(eager)) + ", " + std::to_string(word(replayed)) + ")" +
             " good steps, eager and replayed");
  // Bad metadata written in place, as an engine's bug would: request 2's
  // slot past the ring. The replay records it on the device; the word is
  // read afterwards, off the step's path, and decodes to the request and
  // field.
  replayed.stage(steps, a.get());
  replayed.slots.fill(0, bytesOf(std::vector<uint32_t>{3, 0, MaxSlots + 3, 1}));
  replayed.slots.upload(a.get());
  launchGraph(*graph, a.get());
  uint64_t found = word(replayed);
  Status decoded = statusWordError(found);
  expect(found == (uint64_t(2) << 8 | 3) && !decoded.ok() &&
             decoded.message().find("request 2: slot_idx[2]") == 0,
         "a replay with a bad slot records it: " +
             (decoded.ok() ? std::string("(nothing)") : decoded.message()));
  std::printf("per-step time: eager %.4f ms, replay %.4f ms (%s)\n", eagerMs,
              replayMs, deviceDescription().c_str());
  std::printf("digest of every device download: %016llx\n",
              (unsigned long long)downloadDigest());
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  int64_t steps = 12;
  std::string bad;
  bool fork = false, forkAfterInit = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--steps=", 0) == 0)
      steps = std::atoll(arg.c_str() + 8);
    else if (arg.rfind("--forbidden=", 0) == 0)
      bad = arg.substr(12);
    else if (arg == "--fork")
      fork = true;
    else if (arg == "--fork-after-init")
      forkAfterInit = true;
    else {
      std::fprintf(stderr, "usage: kpool-gpu-capture [--steps=N] "
                           "[--forbidden=sync|alloc|copy|load] [--fork] "
                           "[--fork-after-init]\n");
      return 2;
    }
  }
  // Registration touches no CUDA.
  kpool_bf16_d64_k3_cuda_register();
  Status status;
  std::shared_ptr<KernelSet> kernels =
      KernelSet::getPrecompiled(kpool_bf16_d64_k3_cuda_config(), status);
  if (!kernels) {
    std::fprintf(stderr, "kpool-gpu-capture: %s\n", status.message().c_str());
    return 1;
  }
  if (fork || forkAfterInit) {
    // Nothing has touched CUDA yet, unless asked to.
    if (forkAfterInit)
      cuda::DeviceBuffer touch(64);
    pid_t child = ::fork();
    if (child == 0) {
      int rc = schedule(*kernels, steps, bad);
      std::fflush(stdout);
      std::_Exit(rc);
    }
    int wstatus = 0;
    waitpid(child, &wstatus, 0);
    bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    expect(ok, "a child forked before the first CUDA call runs the schedule");
    if (!ok)
      return 1;
    // And the parent still can.
    return schedule(*kernels, steps, bad);
  }
  std::printf("kpool-gpu-capture: %s\n", deviceDescription().c_str());
  return schedule(*kernels, steps, bad);
}
