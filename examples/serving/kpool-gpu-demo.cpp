//===- kpool-gpu-demo.cpp - the serving schedule on the GPU ---------------===//
//
// The README's main job (examples/serving/kpool-demo.cpp) on an NVIDIA GPU with the
// ahead-of-time CUDA kernels (bf16, head_dim 128, kpool 4), which the
// runtime finds through KernelSet::getPrecompiled -- no MLIR at run time.
// A ragged batch of four requests in ring slots 3, 0, 5, 1 of 6, chunked
// prefill in chunks of 22 tokens (boundaries inside pools), then decode
// with one and with three (speculative) tokens per call; every call runs
// ring_close, pool_offsets, compress and seed_tail on device buffers with
// host-side validation of the device-resident metadata. Every pool is then
// checked bit for bit against a one-shot compress of its request's whole
// sequence on the device, and against the reference within tolerance.
//
//===----------------------------------------------------------------------===//

#include "kpool_gpu_bf16_d128_k4.h"

#include "GPU/GpuSupport.h"
#include "Reference/VerifySchedule.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

using namespace kpool;
using namespace kpool::gpu;

int main() {
  // Registration touches no CUDA.
  kpool_bf16_d128_k4_cuda_register();
  Status status;
  std::shared_ptr<KernelSet> kernels =
      KernelSet::getPrecompiled(kpool_bf16_d128_k4_cuda_config(), status);
  if (!kernels) {
    std::fprintf(stderr, "kpool-gpu-demo: %s\n", status.message().c_str());
    return 1;
  }
  const KernelConfig &config = kernels->config();
  std::printf("kpool-gpu-demo: %s, head_dim %lld, kpool %lld, "
              "ahead-of-time kernels on %s\n",
              elementTypeName(config.elementType), (long long)config.headDim,
              (long long)config.kpool, deviceDescription().c_str());

  // The schedule of examples/serving/kpool-demo.cpp.
  const std::vector<uint32_t> slots = {3, 0, 5, 1};
  const std::vector<int64_t> prompts = {37, 130, 5, 66};
  const int64_t chunk = 22, decodeCalls = 9, maxSlots = 6;
  std::vector<int64_t> lengths;
  for (int64_t p : prompts)
    lengths.push_back(p + 3 * decodeCalls);
  std::mt19937 rng(20261130);
  std::vector<Sequence> seqs =
      randomSequences(config.elementType, config.headDim, slots, lengths, rng);
  std::normal_distribution<float> apeDist(0.f, 2.f);
  std::vector<float> ape(config.kpool * config.headDim);
  for (float &a : ape)
    a = apeDist(rng);

  DeviceSchedule schedule(*kernels, seqs, maxSlots, ape);
  int call = 0;
  auto runCall = [&](const std::vector<int64_t> &counts, const char *phase) {
    int64_t pools = 0, ring = 0;
    Status s = schedule.step(counts, &pools, &ring);
    if (!s.ok()) {
      std::fprintf(stderr, "kpool-gpu-demo: call %d: %s\n", call,
                   s.message().c_str());
      return false;
    }
    if (call == 0) { // the columns: one per request, by its ring slot
      std::printf("call  #  phase      slot");
      for (uint32_t slot : slots)
        std::printf(" %4u", slot);
      std::printf("  -> pools produced (of them closed from the ring)\n");
    }
    std::printf("call %2d  %-8s tokens", call++, phase);
    for (int64_t c : counts)
      std::printf(" %4lld", (long long)std::max<int64_t>(c, 0));
    std::printf("  -> %3lld pools (%lld closed from the ring)\n",
                (long long)pools, (long long)ring);
    return true;
  };
  for (std::vector<int64_t> counts;
       !(counts = reference::nextPrefillCall(
             prompts, [&](size_t r) { return schedule.done(r); }, chunk))
            .empty();)
    if (!runCall(counts, "prefill"))
      return 1;
  for (int64_t d = 0; d < decodeCalls; ++d)
    if (!runCall(std::vector<int64_t>(seqs.size(), d % 2 ? 3 : 1), "decode"))
      return 1;

  DeviceSchedule::Report r = schedule.checkAgainstOneShot("");
  std::printf("%lld pools produced (%lld closed from the ring); %lld checked: "
              "%lld differ from one-shot compression on the device, %lld "
              "missing, %lld produced twice; max error vs the reference "
              "%.2f ulp of the largest member key (tolerance %.0f)\n",
              (long long)r.produced, (long long)r.fromRing,
              (long long)r.checked, (long long)r.differ, (long long)r.missing,
              (long long)r.duplicated, r.maxUlp,
              toleranceUlp(config.elementType));
  bool ok = r.ok(config.elementType);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
