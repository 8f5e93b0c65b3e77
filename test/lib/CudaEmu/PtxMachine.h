//===- PtxMachine.h - the state of a launch, its blocks, warps -*- C++ -*-===//
//
// Internal to the executor: what the launch (PtxExecutor.cpp), the
// scheduler (PtxScheduler.cpp), the instruction handlers (Ptx*Ops.cpp) and
// the sanitizer (Sanitizer.cpp) share while a launch runs. One Launch per
// launch call, so concurrent launches share nothing but their (immutable)
// module.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXMACHINE_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXMACHINE_H

#include "Approx.h"
#include "PtxProgram.h"
#include "Sanitizer.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kpool::emu::ptx {

/// Lanes of one warp at one program counter (per-lane PCs, stored as the
/// partition of the warp's live lanes by PC).
struct Group {
  uint32_t pc = 0;
  uint32_t mask = 0;
  /// 0: runnable; 1: waiting at a warp-synchronous instruction for lanes
  /// that have not arrived; 2: waiting at a block barrier.
  uint8_t wait = 0;
  /// The barrier a waiting group waits at.
  uint32_t barrier = 0;
};

struct Warp {
  uint32_t index = 0;        // warp of the block
  uint32_t valid = 0;        // lanes that exist (a partial last warp has fewer)
  uint32_t exited = 0;       // lanes that have exited
  uint64_t *regs = nullptr;  // numSlots * 32
  uint32_t *preds = nullptr; // numPreds lane masks
  uint32_t *init = nullptr;  // numSlots lane masks: written (initcheck)
  uint32_t *predInit = nullptr;
  uint8_t *local = nullptr; // 32 * Launch::localStride
  Group groups[32];
  uint32_t nGroups = 0;
  /// The lanes of the group whose instruction runs (activemask).
  uint32_t active = 0;
  /// Racecheck: bar.warp.sync executions of this warp, and per lane pair
  /// the count at the last one both took part in.
  uint32_t syncCount = 0;
  uint32_t syncWith[32][32];
  uint64_t *reg(uint32_t slot) { return regs + size_t(slot) * 32; }
  const uint64_t *reg(uint32_t slot) const { return regs + size_t(slot) * 32; }
  bool live() const { return (exited & valid) != valid; }
};

/// A block barrier's arrivals.
struct BarrierState {
  uint32_t arrived = 0;  // threads waiting (bar.sync) or counted (bar.arrive)
  uint32_t expected = 0; // the thread count operand (0: every live thread)
};

/// memcheck's view check: the byte range [lo, hi) a memref descriptor
/// among the kernel's parameters (its aligned pointer at `param`) may
/// describe.
struct ViewRange {
  uint64_t lo = 0, hi = 0;
  uint32_t param = 0;
};
/// The views in one allocation; `checked` is false when some parameter
/// points into it that is not a descriptor's, or a descriptor pointing
/// into it cannot be read: then only the allocation's bounds are checked.
struct AllocationViews {
  uint64_t base = 0, bytes = 0;
  bool checked = true;
  std::vector<ViewRange> ranges;
};

struct Launch {
  Launch(const FunctionImpl &f, const MemoryMap &m, const Options &o)
      : fn(f), module(*f.module), memory(m), options(o) {}

  const FunctionImpl &fn;
  const ModuleImpl &module;
  const MemoryMap &memory;
  Options options;
  approx::Config approx;

  Dim3 grid, block;
  uint32_t threadsPerBlock = 0, warpsPerBlock = 0;
  uint64_t blocksInGrid = 0;
  std::vector<uint8_t> params;
  /// The running block's shared memory (sharedBytes at `shared`, aligned
  /// to 256 inside sharedStorage); generic shared addresses are host
  /// addresses in it.
  std::vector<uint8_t> sharedStorage;
  uint8_t *shared = nullptr;
  uint32_t sharedBytes = 0, dynamicSharedBytes = 0;
  /// Local memory: each thread's frame is localStride bytes of its warp's
  /// buffer (Warp::local).
  uint32_t localStride = 0;

  /// The running block.
  uint64_t blockLinear = 0;
  Dim3 blockIdx;
  uint32_t blockEpoch = 0; // barrier releases so far in this block
  uint32_t liveThreads = 0;
  std::vector<Warp> warps;
  std::map<uint32_t, BarrierState> barriers;

  Sanitizer sanitizer;
  Counters counters;
  uint64_t warpInstructions = 0;

  /// Views by allocation (PtxMemoryOps.cpp, buildViews); empty without
  /// memcheck or descriptors.
  std::vector<AllocationViews> views;
  size_t lastViews = 0;

  std::vector<Finding> findings;
  std::map<std::pair<int, uint32_t>, std::pair<size_t, uint64_t>>
      findingIndex; // (kind, line) -> (index in findings, repeats)
  uint64_t droppedFindings = 0;
  bool failed = false; // a fatal finding: stop
  bool illegalAddress = false; // stopped at a memory error
  bool misaligned = false;     // ... a misaligned access

  uint64_t rngState = 0;
  uint64_t random();

  /// The thread's coordinates, for reports.
  uint32_t threadLinear(const Warp &w, uint32_t lane) const {
    return w.index * 32 + lane;
  }
  Dim3 threadIdx(const Warp &w, uint32_t lane) const;
  uint64_t globalThread(const Warp &w, uint32_t lane) const {
    return blockLinear * threadsPerBlock + threadLinear(w, lane);
  }
  /// "thread (x, y, z) of block (x, y, z)" of a global thread index.
  std::string describeThread(uint64_t globalThread) const;

  /// Records a finding worded "<kind>: <what>, kernel K, block (..),
  /// thread (..), PTX line N: `<text>`"; repeats at one line are counted.
  /// A fatal one stops the launch.
  void report(Finding::Kind kind, bool fatal, const Warp *w, uint32_t lane,
              const Inst *inst, const std::string &what);
  /// The same without a thread (launch-level problems).
  void reportLaunch(Finding::Kind kind, bool fatal, const std::string &what);
};

/// Calls f(lane) for each lane of `lanes`, in order; a full warp as a plain
/// loop the compiler can vectorize.
template <class F> inline void forLanes(uint32_t lanes, F &&f) {
  if (lanes == ~0u) {
    for (uint32_t l = 0; l < 32; ++l)
      f(l);
    return;
  }
  while (lanes) {
    uint32_t l = uint32_t(__builtin_ctz(lanes));
    lanes &= lanes - 1;
    f(l);
  }
}

/// Writes predicate bits: lanes of `lanes` take `bits`, others keep theirs.
inline void setPred(uint32_t &p, uint32_t lanes, uint32_t bits) {
  p = (p & ~lanes) | (bits & lanes);
}

/// Runs block L.blockLinear of the launch to its end, a deadlock or a
/// fatal finding (PtxScheduler.cpp).
void runBlock(Launch &L);

/// Fills L.views from the kernel's memref descriptors and the allocations
/// their pointers are in (PtxMemoryOps.cpp).
void buildViews(Launch &L);

/// The coordinates of linear index `i` in `extent` (x fastest).
Dim3 unlinearize(uint64_t i, Dim3 extent);

/// "(x, y, z)".
std::string formatDim(Dim3 d);
/// "0x..." of an address.
std::string formatAddress(uint64_t a);

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXMACHINE_H
