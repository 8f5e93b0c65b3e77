//===- ExecutorMgpu.cpp - kpool-aot's CUDA host code over the executor ----===//

#include "ExecutorMgpu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

using namespace kpool::emu;
using namespace kpool::emu::test;

namespace {

class Memory final : public MemoryMap {
public:
  std::map<uint64_t, Allocation> live; // by base
  const Allocation *find(uint64_t address, uint64_t bytes) const override {
    auto it = live.upper_bound(address);
    if (it == live.begin())
      return nullptr;
    --it;
    const Allocation &a = it->second;
    if (address + bytes < address || address + bytes > a.base + a.bytes)
      return nullptr;
    return &a;
  }
};

/// Never destroyed: kpool-aot's module destructors run at exit, after
/// function-local statics may be gone.
struct State {
  std::mutex mutex;
  Memory memory;
  Options options;
  LaunchLog log;
  std::vector<std::unique_ptr<Module>> modules;
};

State &state() {
  static State *s = new State;
  return *s;
}

} // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : size(bytes) {
  // 256-byte aligned like cuMemAlloc, and exactly `bytes` long as far as
  // the checks know, so one byte past the end is outside it.
  ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  std::memset(ptr, 0, bytes);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().memory.live[reinterpret_cast<uint64_t>(ptr)] =
      Allocation{reinterpret_cast<uint64_t>(ptr), bytes};
}

DeviceBuffer::~DeviceBuffer() {
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().memory.live.erase(reinterpret_cast<uint64_t>(ptr));
  }
  std::free(ptr);
}

Options &kpool::emu::test::launchOptions() { return state().options; }
LaunchLog &kpool::emu::test::launchLog() { return state().log; }
void kpool::emu::test::resetLaunchLog() { state().log = LaunchLog(); }

extern "C" {

void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  std::string error;
  std::unique_ptr<Module> m =
      loadModule(static_cast<const char *>(data), error);
  if (!m) {
    std::fprintf(stderr, "FAIL: the executor rejects a kernel module: %s\n",
                 error.c_str());
    std::exit(1);
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  state().modules.push_back(std::move(m));
  return state().modules.back().get();
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  const Function *f = static_cast<Module *>(module)->function(name);
  if (!f) {
    std::fprintf(stderr, "FAIL: no kernel '%s' in its module\n", name);
    std::exit(1);
  }
  return const_cast<Function *>(f);
}

void mgpuModuleUnload(void *) {}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void * /*stream*/,
                      void **params, void ** /*extra*/, size_t /*count*/) {
  const auto *f = static_cast<const Function *>(function);
  State &s = state();
  LaunchResult r =
      launch(*f, Dim3{uint32_t(gridX), uint32_t(gridY), uint32_t(gridZ)},
             Dim3{uint32_t(blockX), uint32_t(blockY), uint32_t(blockZ)},
             uint32_t(smem), params, s.memory, s.options);
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.log.launches;
  s.log.failed += !r.completed;
  for (const Finding &finding : r.findings)
    s.log.findings.push_back(finding.message);
  s.log.counters += r.counters;
  s.log.perKernel[f->name()] += r.counters;
}

} // extern "C"
