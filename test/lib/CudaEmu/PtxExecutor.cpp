//===- PtxExecutor.cpp - a launch: configuration, memory, findings -------===//
//
// launch(): validates the configuration, lays out the parameters, shared
// and local memory and the warps' registers, and runs the blocks in the
// order Options::order picks (PtxScheduler.cpp runs one block); plus the
// wording of findings.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

Counters &Counters::operator+=(const Counters &o) {
  integer += o.integer;
  integer64 += o.integer64;
  floating += o.floating;
  special += o.special;
  memory += o.memory;
  control += o.control;
  sync += o.sync;
  warpInstructions += o.warpInstructions;
  activeLanes += o.activeLanes;
  globalLoadSectors += o.globalLoadSectors;
  globalStoreSectors += o.globalStoreSectors;
  globalLoadLines += o.globalLoadLines;
  globalStoreLines += o.globalStoreLines;
  globalLoadBytes += o.globalLoadBytes;
  globalStoreBytes += o.globalStoreBytes;
  threads += o.threads;
  return *this;
}

//===----------------------------------------------------------------------===//
// Reports.
//===----------------------------------------------------------------------===//

std::string kpool::emu::ptx::formatDim(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
         std::to_string(d.z) + ")";
}

std::string kpool::emu::ptx::formatAddress(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, a);
  return buf;
}

uint64_t Launch::random() {
  uint64_t x = (rngState += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Dim3 kpool::emu::ptx::unlinearize(uint64_t i, Dim3 extent) {
  Dim3 d;
  d.x = uint32_t(i % extent.x);
  d.y = uint32_t((i / extent.x) % extent.y);
  d.z = uint32_t(i / (uint64_t(extent.x) * extent.y));
  return d;
}

Dim3 Launch::threadIdx(const Warp &w, uint32_t lane) const {
  return unlinearize(threadLinear(w, lane), block);
}

std::string Launch::describeThread(uint64_t t) const {
  return "thread " + formatDim(unlinearize(t % threadsPerBlock, block)) +
         " of block " + formatDim(unlinearize(t / threadsPerBlock, grid));
}

static const char *kindName(Finding::Kind k) {
  switch (k) {
  case Finding::Kind::Memcheck:
    return "memcheck";
  case Finding::Kind::Racecheck:
    return "racecheck";
  case Finding::Kind::Synccheck:
    return "synccheck";
  case Finding::Kind::Initcheck:
    return "initcheck";
  case Finding::Kind::Execution:
    return "execution";
  }
  return "finding";
}

void Launch::report(Finding::Kind kind, bool fatal, const Warp *w,
                    uint32_t lane, const Inst *inst, const std::string &what) {
  if (fatal)
    failed = true;
  uint32_t line = inst ? inst->line : 0;
  auto key = std::make_pair(int(kind), line);
  auto it = findingIndex.find(key);
  if (it != findingIndex.end() && !fatal) {
    ++it->second.second;
    return;
  }
  if (findings.size() >= options.maxFindings && !fatal) {
    ++droppedFindings;
    return;
  }
  std::string m = std::string(kindName(kind)) + ": " + what + "; kernel " +
                  fn.name_ + ", block " + formatDim(blockIdx);
  if (w)
    m += ", thread " + formatDim(threadIdx(*w, lane));
  if (inst) {
    std::string text = line && line <= module.lines.size()
                           ? module.lines[line - 1]
                           : std::string();
    size_t comment = text.find("//");
    if (comment != std::string::npos)
      text = text.substr(0, comment);
    size_t b = text.find_first_not_of(" \t");
    size_t e = text.find_last_not_of(" \t\r");
    text = b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
    m += ", PTX line " + std::to_string(line) + ": " + text;
  }
  findingIndex[key] = {findings.size(), 0};
  findings.push_back(Finding{kind, m});
}

void Launch::reportLaunch(Finding::Kind kind, bool fatal,
                          const std::string &what) {
  if (fatal)
    failed = true;
  findings.push_back(Finding{kind, std::string(kindName(kind)) + ": " + what +
                                       "; kernel " + fn.name_});
}

//===----------------------------------------------------------------------===//
// launch.
//===----------------------------------------------------------------------===//

namespace {

double threadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

LaunchResult run(const FunctionImpl &fn, Dim3 grid, Dim3 block,
                 uint32_t dynamicSharedBytes, void *const *params,
                 const MemoryMap &memory, const Options &options);

} // namespace

LaunchResult kpool::emu::launch(const Function &function, Dim3 grid, Dim3 block,
                                uint32_t dynamicSharedBytes,
                                void *const *params, const MemoryMap &memory,
                                const Options &options) {
  double start = threadCpuSeconds();
  LaunchResult result = run(static_cast<const FunctionImpl &>(function), grid,
                            block, dynamicSharedBytes, params, memory, options);
  result.cpuSeconds = threadCpuSeconds() - start;
  return result;
}

namespace {

LaunchResult run(const FunctionImpl &fn, Dim3 grid, Dim3 block,
                 uint32_t dynamicSharedBytes, void *const *params,
                 const MemoryMap &memory, const Options &options) {
  Launch L(fn, memory, options);
  L.approx.adversarial = options.approx == Approx::Adversarial;
  L.approx.seed = options.approxSeed;
  L.rngState = options.seed;
  L.grid = grid;
  L.block = block;
  LaunchResult result;
  auto reject = [&](const std::string &why) {
    L.reportLaunch(Finding::Kind::Execution, true, "invalid launch: " + why);
    result.completed = false;
    result.findings = L.findings;
    return result;
  };
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
    return reject("grid " + formatDim(grid) + " and block " + formatDim(block) +
                  " must have no zero dimension");
  if (threads > fn.maxThreads || block.z > 64 || grid.y > 65535 ||
      grid.z > 65535)
    return reject("block " + formatDim(block) + " has " +
                  std::to_string(threads) + " threads, the kernel accepts " +
                  std::to_string(fn.maxThreads) +
                  " (block.z <= 64, grid.y and grid.z <= 65535)");
  if (fn.reqntid[0] && (block.x != fn.reqntid[0] || block.y != fn.reqntid[1] ||
                        block.z != fn.reqntid[2]))
    return reject("block " + formatDim(block) + " differs from .reqntid " +
                  formatDim(Dim3{fn.reqntid[0], fn.reqntid[1], fn.reqntid[2]}));
  L.threadsPerBlock = uint32_t(threads);
  L.warpsPerBlock = (L.threadsPerBlock + 31) / 32;
  L.blocksInGrid = uint64_t(grid.x) * grid.y * grid.z;
  L.params.assign(fn.paramBytes, 0);
  for (size_t i = 0; i < fn.params_.size(); ++i) {
    if (!params || !params[i])
      return reject("kernel parameter " + std::to_string(i) + " is null");
    std::memcpy(L.params.data() + fn.params_[i].offset, params[i],
                fn.params_[i].size);
  }
  L.dynamicSharedBytes = dynamicSharedBytes;
  uint64_t sharedBytes =
      dynamicSharedBytes ? uint64_t(fn.dynamicSharedOffset) + dynamicSharedBytes
                         : fn.staticShared;
  if (sharedBytes > 227 * 1024)
    return reject(std::to_string(sharedBytes) +
                  " bytes of shared memory per block (sm_90 allows 232448)");
  L.sharedBytes = uint32_t(sharedBytes);
  L.sharedStorage.assign(L.sharedBytes + 256, 0);
  L.shared = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(L.sharedStorage.data()) + 255) &
      ~uintptr_t(255));
  L.localStride = (fn.localBytes + 15) / 16 * 16;

  // Warp storage, reused by every block.
  size_t slots = fn.numSlots, preds = std::max<uint32_t>(fn.numPreds, 1);
  std::vector<uint64_t> regs(size_t(L.warpsPerBlock) * slots * 32);
  std::vector<uint32_t> masks(size_t(L.warpsPerBlock) * (slots + 3 * preds));
  std::vector<uint8_t> local(size_t(L.warpsPerBlock) * 32 * L.localStride + 16);
  L.warps.resize(L.warpsPerBlock);
  for (uint32_t i = 0; i < L.warpsPerBlock; ++i) {
    Warp &w = L.warps[i];
    w.index = i;
    w.regs = regs.data() + size_t(i) * slots * 32;
    uint32_t *m = masks.data() + size_t(i) * (slots + 3 * preds);
    w.init = m;
    w.preds = m + slots;
    w.predInit = m + slots + preds;
    w.local = local.data() + size_t(i) * 32 * L.localStride;
  }
  L.sanitizer.start(L.sharedBytes, options.racecheck || options.initcheck);
  buildViews(L);

  std::vector<uint64_t> order(L.blocksInGrid);
  for (uint64_t i = 0; i < L.blocksInGrid; ++i)
    order[i] = options.order == Order::Reverse ? L.blocksInGrid - 1 - i : i;
  if (options.order == Order::Random)
    for (uint64_t i = L.blocksInGrid; i > 1; --i)
      std::swap(order[i - 1], order[L.random() % i]);

  for (uint64_t b : order) {
    L.blockLinear = b;
    runBlock(L);
    if (L.failed)
      break;
  }
  L.counters.threads = threads * L.blocksInGrid;
  for (auto &[key, entry] : L.findingIndex)
    if (entry.second)
      L.findings[entry.first].message +=
          " (and " + std::to_string(entry.second) + " more at this line)";
  if (L.droppedFindings)
    L.reportLaunch(Finding::Kind::Execution, false,
                   std::to_string(L.droppedFindings) +
                       " more findings at other lines were not kept");
  result.completed = !L.failed;
  result.illegalAddress = L.illegalAddress;
  result.misaligned = L.misaligned;
  result.findings = std::move(L.findings);
  result.counters = L.counters;
  return result;
}

} // namespace
