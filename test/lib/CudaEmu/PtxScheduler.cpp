//===- PtxScheduler.cpp - blocks, warps and lanes: CUDA's execution model -===//
//
// A launch runs its blocks one after another (a legal CUDA schedule) in the
// order Options::order picks. Within a block, warps take turns of a few
// warp-instructions (the quantum), and switch at barriers and warp-sync
// waits, so accesses of different warps interleave. Within a warp, every
// lane has its own program counter (kept as the partition of the live
// lanes by PC: Warp::groups); the scheduler runs the lanes at one PC
// together, chosen by the order (Forward: the lowest PC, which reconverges
// lanes at the first common instruction; Reverse: the highest; Random: any),
// and lanes whose PCs meet run together again. Divergence and reconvergence
// come from the PCs, not from a stack.
//
// Warp-synchronous instructions wait until every non-exited lane their
// member mask names is at the same instruction; block barriers until every
// live thread (or the count operand) has arrived. When no lane of a block
// can move the launch stops with a synccheck report naming who waits for
// whom: a deadlock is a report, never a hang.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"
#include "PtxOps.h"

#include <algorithm>
#include <cstring>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

bool isBarWarpSync(const Inst &in) { return in.fn == selectBarWarpSync(); }

std::string laneList(uint32_t mask) {
  std::string s;
  int n = 0;
  for (int l = 0; l < 32;) {
    if (!(mask >> l & 1)) {
      ++l;
      continue;
    }
    int e = l;
    while (e + 1 < 32 && (mask >> (e + 1) & 1))
      ++e;
    s += (s.empty() ? "" : ", ") + std::to_string(l) +
         (e > l ? "-" + std::to_string(e) : "");
    n += e - l + 1;
    l = e + 1;
  }
  return (n == 1 ? "lane " : "lanes ") + s;
}

class Scheduler {
public:
  explicit Scheduler(Launch &L) : L(L), code(L.fn.code.data()) {}
  void runBlock();

private:
  Launch &L;
  const Inst *code;

  Group *pick(Warp &w);
  void removeGroup(Warp &w, Group *g);
  Group *placeLanes(Warp &w, uint32_t pc, uint32_t mask);
  Group *settle(Warp &w, Group *g);
  void normalize(Warp &w);
  bool runWarp(Warp &w, uint32_t budget);
  void exitLanes(Warp &w, uint32_t lanes);
  void warpSync(Warp &w, Group *g, const Inst &in, uint32_t eff);
  void barrier(Warp &w, Group *g, const Inst &in, uint32_t eff);
  void releaseBarriers();
  void reportDeadlock();
  uint32_t guardMask(const Warp &w, const Inst &in) const {
    if (in.guard == kNoSlot)
      return ~0u;
    uint32_t p = w.preds[in.guard];
    return in.guardNeg ? ~p : p;
  }
  void checkInit(Warp &w, const Inst &in, uint32_t group, uint32_t eff);
  void markInit(Warp &w, const Inst &in, uint32_t eff) {
    for (unsigned k = 0; k < in.nd; ++k) {
      uint32_t d = in.d[k];
      if (d & kPredBit)
        w.predInit[d & ~kPredBit] |= eff;
      else
        w.init[d] |= eff;
    }
  }
  void count(const Inst &in, uint32_t mask) {
    ++L.warpInstructions;
    if (!L.options.profile)
      return;
    uint64_t n = uint64_t(__builtin_popcount(mask));
    Counters &c = L.counters;
    switch (in.cls) {
    case OpClass::Integer:
      c.integer += n;
      break;
    case OpClass::Integer64:
      c.integer64 += n;
      break;
    case OpClass::Float:
      c.floating += n;
      break;
    case OpClass::Special:
      c.special += n;
      break;
    case OpClass::Memory:
      c.memory += n;
      break;
    case OpClass::Control:
      c.control += n;
      break;
    case OpClass::Sync:
      c.sync += n;
      break;
    }
    ++c.warpInstructions;
    c.activeLanes += n;
  }
};

Group *Scheduler::pick(Warp &w) {
  Group *best = nullptr;
  if (L.options.order == Order::Random) {
    uint32_t runnable = 0;
    for (uint32_t i = 0; i < w.nGroups; ++i)
      runnable += w.groups[i].wait == 0;
    if (!runnable)
      return nullptr;
    uint32_t k = uint32_t(L.random() % runnable);
    for (uint32_t i = 0; i < w.nGroups; ++i)
      if (w.groups[i].wait == 0 && k-- == 0)
        return &w.groups[i];
    return nullptr;
  }
  bool lowest = L.options.order == Order::Forward;
  for (uint32_t i = 0; i < w.nGroups; ++i) {
    Group &g = w.groups[i];
    if (g.wait)
      continue;
    if (!best || (lowest ? g.pc < best->pc : g.pc > best->pc))
      best = &g;
  }
  return best;
}

void Scheduler::removeGroup(Warp &w, Group *g) { *g = w.groups[--w.nGroups]; }

/// Puts `mask` lanes at `pc`: into the group already there (which must
/// then re-evaluate any wait), or a new group.
Group *Scheduler::placeLanes(Warp &w, uint32_t pc, uint32_t mask) {
  for (uint32_t i = 0; i < w.nGroups; ++i)
    if (w.groups[i].pc == pc && w.groups[i].wait != 2) {
      w.groups[i].mask |= mask;
      w.groups[i].wait = 0;
      return &w.groups[i];
    }
  Group &g = w.groups[w.nGroups++];
  g = Group();
  g.pc = pc;
  g.mask = mask;
  return &g;
}

/// After `g` moved: merges it with a group at the same PC. Returns the
/// group that now holds its lanes.
Group *Scheduler::settle(Warp &w, Group *g) {
  for (uint32_t i = 0; i < w.nGroups; ++i) {
    Group &o = w.groups[i];
    if (&o != g && o.pc == g->pc && o.wait != 2 && g->wait != 2) {
      o.mask |= g->mask;
      o.wait = 0;
      uint32_t oi = i;
      removeGroup(w, g);
      // removeGroup moved the last group into g's place.
      return oi == w.nGroups ? g : &w.groups[oi];
    }
  }
  return g;
}

/// Merges every pair of groups at one PC (except barrier waiters).
void Scheduler::normalize(Warp &w) {
  for (uint32_t i = 0; i < w.nGroups; ++i)
    for (uint32_t j = i + 1; j < w.nGroups;) {
      Group &a = w.groups[i], &b = w.groups[j];
      if (a.pc == b.pc && a.wait != 2 && b.wait != 2) {
        a.mask |= b.mask;
        a.wait = 0;
        removeGroup(w, &b);
      } else {
        ++j;
      }
    }
}

void Scheduler::checkInit(Warp &w, const Inst &in, uint32_t group,
                          uint32_t eff) {
  if (in.guard != kNoSlot && (w.predInit[in.guard] & group) != group) {
    uint32_t bad = group & ~w.predInit[in.guard];
    L.report(Finding::Kind::Initcheck, false, &w, uint32_t(__builtin_ctz(bad)),
             &in,
             "read of never-written predicate " +
                 L.fn.registerName(in.guard | kPredBit));
  }
  for (unsigned k = 0; k < in.ns; ++k) {
    uint32_t s = in.s[k];
    uint32_t have = (s & kPredBit) ? w.predInit[s & ~kPredBit] : w.init[s];
    if ((have & eff) != eff) {
      uint32_t bad = eff & ~have;
      L.report(Finding::Kind::Initcheck, false, &w,
               uint32_t(__builtin_ctz(bad)), &in,
               "read of never-written register " + L.fn.registerName(s) +
                   " by " + laneList(bad));
    }
  }
}

void Scheduler::exitLanes(Warp &w, uint32_t lanes) {
  w.exited |= lanes;
  L.liveThreads -= uint32_t(__builtin_popcount(lanes));
  // Lanes waiting for these may be free now; barriers may be complete.
  for (uint32_t i = 0; i < w.nGroups; ++i)
    if (w.groups[i].wait == 1)
      w.groups[i].wait = 0;
  releaseBarriers();
}

void Scheduler::warpSync(Warp &w, Group *g, const Inst &in, uint32_t eff) {
  const uint64_t *memberMask = w.reg(in.s[in.target]);
  uint32_t live = w.valid & ~w.exited;
  uint32_t ready = 0;
  bool barWarp = isBarWarpSync(in);
  forLanes(eff, [&](uint32_t l) {
    uint32_t m = uint32_t(memberMask[l]);
    if (!(m >> l & 1))
      L.report(Finding::Kind::Synccheck, false, &w, l, &in,
               "the executing lane is not in the member mask " +
                   formatAddress(m) + " (undefined behaviour)");
    if (barWarp && (m & ~live))
      L.report(Finding::Kind::Synccheck, false, &w, l, &in,
               "member mask " + formatAddress(m) + " names exited or absent " +
                   laneList(m & ~live));
    uint32_t need = (m | (1u << l)) & live;
    if ((need & ~eff) == 0)
      ready |= 1u << l;
  });
  if (!L.options.synccheck && ready != eff) {
    // Without synccheck a lane never waits for others (no deadlock
    // detection either): the warp runs what has arrived.
    ready = eff;
  }
  if (!ready) {
    g->wait = 1;
    return;
  }
  if (L.options.initcheck)
    checkInit(w, in, g->mask, ready);
  in.fn(L, w, in, ready);
  if (L.options.initcheck)
    markInit(w, in, ready);
  count(in, ready);
  uint32_t pc = g->pc;
  if (ready == g->mask) {
    g->pc = pc + 1;
    settle(w, g);
  } else {
    g->mask &= ~ready;
    g->wait = 1;
    placeLanes(w, pc + 1, ready);
  }
}

void Scheduler::barrier(Warp &w, Group *g, const Inst &in, uint32_t eff) {
  uint32_t id = uint32_t(w.reg(in.s[0])[__builtin_ctz(eff)]);
  uint32_t expected =
      in.ns > 1 ? uint32_t(w.reg(in.s[1])[__builtin_ctz(eff)]) : 0;
  if (id >= 16) {
    L.report(Finding::Kind::Execution, true, &w, uint32_t(__builtin_ctz(eff)),
             &in, "barrier id " + std::to_string(id) + " is not in 0..15");
    return;
  }
  count(in, g->mask);
  BarrierState &b = L.barriers[id];
  b.arrived += uint32_t(__builtin_popcount(eff));
  if (expected)
    b.expected = expected;
  if (in.flag) { // bar.arrive: counted, no wait
    g->pc += 1;
    settle(w, g);
  } else {
    g->wait = 2;
    g->barrier = id;
  }
  releaseBarriers();
}

void Scheduler::releaseBarriers() {
  for (auto it = L.barriers.begin(); it != L.barriers.end();) {
    BarrierState &b = it->second;
    uint32_t need = b.expected ? b.expected : L.liveThreads;
    if (b.arrived < need) {
      ++it;
      continue;
    }
    uint32_t id = it->first;
    for (Warp &w : L.warps) {
      uint32_t pcs = 0, firstPc = 0;
      const Inst *other = nullptr;
      for (uint32_t i = 0; i < w.nGroups; ++i) {
        Group &g = w.groups[i];
        if (g.wait != 2 || g.barrier != id)
          continue;
        if (pcs++ == 0)
          firstPc = g.pc;
        else if (g.pc != firstPc)
          other = &code[g.pc];
        g.wait = 0;
        g.pc += 1;
      }
      if (other)
        L.report(Finding::Kind::Synccheck, false, &w, 0, &code[firstPc],
                 "divergent barrier: lanes of warp " + std::to_string(w.index) +
                     " wait at barrier " + std::to_string(id) +
                     " at different instructions (also PTX line " +
                     std::to_string(other->line) +
                     "); bar.sync needs the whole warp at one instruction");
      normalize(w);
    }
    ++L.blockEpoch;
    it = L.barriers.erase(it);
  }
}

void Scheduler::reportDeadlock() {
  // Describe the first waiting group of the first stuck warp, and where the
  // lanes it waits for are.
  for (Warp &w : L.warps) {
    for (uint32_t i = 0; i < w.nGroups; ++i) {
      Group &g = w.groups[i];
      const Inst &in = code[g.pc];
      std::string what;
      if (g.wait == 1) {
        const uint64_t *mm = w.reg(in.s[in.target]);
        uint32_t live = w.valid & ~w.exited;
        uint32_t missing = 0;
        forLanes(g.mask, [&](uint32_t l) {
          missing |= (uint32_t(mm[l]) | (1u << l)) & live & ~g.mask;
        });
        std::string where;
        bool divergentWarpSync = false;
        for (uint32_t k = 0; k < w.nGroups; ++k) {
          const Group &o = w.groups[k];
          if (&o == &g || !(o.mask & missing))
            continue;
          const Inst &oi = code[o.pc];
          where += std::string(where.empty() ? "" : "; ") +
                   laneList(o.mask & missing) + " at PTX line " +
                   std::to_string(oi.line) +
                   (o.wait == 2   ? " (a block barrier)"
                    : o.wait == 1 ? " (another warp-synchronous instruction)"
                                  : "");
          if (isBarWarpSync(oi) && isBarWarpSync(in))
            divergentWarpSync = true;
        }
        std::string name = isBarWarpSync(in)       ? "bar.warp.sync"
                           : in.fn == selectVote() ? "vote.sync"
                                                   : "shfl.sync";
        what = std::string(divergentWarpSync ? "divergent bar.warp.sync: "
                                             : "deadlock: ") +
               laneList(g.mask) + " of warp " + std::to_string(w.index) +
               " wait at " + name + " for " + laneList(missing) +
               " named in the member mask, which never arrive (" +
               (where.empty() ? "they are stuck elsewhere" : where) + ")";
      } else if (g.wait == 2) {
        uint32_t need =
            L.barriers.count(g.barrier) && L.barriers[g.barrier].expected
                ? L.barriers[g.barrier].expected
                : L.liveThreads;
        what = "deadlock: " + laneList(g.mask) + " of warp " +
               std::to_string(w.index) + " wait at barrier " +
               std::to_string(g.barrier) + " for " + std::to_string(need) +
               " threads, " + std::to_string(L.barriers[g.barrier].arrived) +
               " have arrived and the others wait elsewhere";
      } else {
        continue;
      }
      L.report(Finding::Kind::Synccheck, true, &w,
               uint32_t(__builtin_ctz(g.mask)), &in, what);
      return;
    }
  }
  L.reportLaunch(Finding::Kind::Synccheck, true,
                 "deadlock: no thread of block " + formatDim(L.blockIdx) +
                     " can make progress");
}

/// Runs `w` for up to `budget` warp-instructions; false when the warp can
/// not move (all its lanes wait or exited).
bool Scheduler::runWarp(Warp &w, uint32_t budget) {
  Group *g = pick(w);
  if (!g)
    return false;
  const bool initcheck = L.options.initcheck;
  const uint64_t limit = L.options.maxWarpInstructions
                             ? L.options.maxWarpInstructions
                             : (uint64_t(1) << 36);
  for (uint32_t steps = 0; steps < budget && g && !L.failed; ++steps) {
    const Inst &in = code[g->pc];
    w.active = g->mask;
    uint32_t eff = g->mask & guardMask(w, in);
    switch (in.kind) {
    case Kind::Normal:
      if (initcheck)
        checkInit(w, in, g->mask, eff);
      if (eff)
        in.fn(L, w, in, eff);
      if (initcheck)
        markInit(w, in, eff);
      count(in, g->mask);
      g->pc += 1;
      if (w.nGroups > 1) {
        g = settle(w, g);
        if (L.options.order == Order::Random && (L.random() & 7) == 0)
          g = pick(w);
      }
      break;
    case Kind::Branch: {
      if (initcheck && in.guard != kNoSlot)
        checkInit(w, in, g->mask, 0);
      count(in, g->mask);
      uint32_t taken = eff, fall = g->mask & ~eff;
      if (in.flag && taken && fall)
        L.report(Finding::Kind::Execution, false, &w,
                 uint32_t(__builtin_ctz(fall)), &in,
                 "bra.uni diverges: " + laneList(taken) + " branch, " +
                     laneList(fall) + " fall through");
      if (!fall) {
        g->pc = in.target;
      } else if (!taken) {
        g->pc += 1;
      } else {
        uint32_t pc = g->pc;
        g->mask = taken;
        g->pc = in.target;
        placeLanes(w, pc + 1, fall);
      }
      normalize(w);
      g = pick(w);
      break;
    }
    case Kind::Exit: {
      count(in, g->mask);
      if (!eff) {
        g->pc += 1;
        g = settle(w, g);
        break;
      }
      uint32_t stay = g->mask & ~eff;
      if (stay) {
        g->mask = stay;
        g->pc += 1;
      } else {
        removeGroup(w, g);
      }
      normalize(w);
      exitLanes(w, eff);
      g = pick(w);
      break;
    }
    case Kind::WarpSync: {
      uint32_t skip = g->mask & ~eff;
      if (skip) { // guard-false lanes do not take part
        if (!eff) {
          count(in, g->mask);
          g->pc += 1;
          g = settle(w, g);
          break;
        }
        g->mask = eff;
        placeLanes(w, g->pc + 1, skip); // appends: g stays valid
      }
      warpSync(w, g, in, eff);
      g = pick(w);
      break;
    }
    case Kind::Barrier:
      if (!eff) {
        count(in, g->mask);
        g->pc += 1;
        g = settle(w, g);
        break;
      }
      if (eff != g->mask) {
        L.report(Finding::Kind::Synccheck, false, &w,
                 uint32_t(__builtin_ctz(g->mask & ~eff)), &in,
                 "a predicated barrier: " + laneList(g->mask & ~eff) +
                     " skip it");
        uint32_t skip = g->mask & ~eff;
        g->mask = eff;
        placeLanes(w, g->pc + 1, skip);
      }
      barrier(w, g, in, eff);
      g = pick(w);
      break;
    case Kind::Trap:
      L.report(Finding::Kind::Execution, true, &w,
               uint32_t(__builtin_ctz(g->mask)), &in,
               "the kernel executed trap");
      return true;
    }
    if (L.warpInstructions > limit) {
      L.report(Finding::Kind::Execution, true, &w, 0, &in,
               "the launch ran " + std::to_string(L.warpInstructions) +
                   " warp-instructions without finishing (an endless loop, "
                   "or a wait for a block that runs later)");
      return true;
    }
  }
  return true;
}

void Scheduler::runBlock() {
  const FunctionImpl &fn = L.fn;
  L.blockIdx = unlinearize(L.blockLinear, L.grid);
  L.blockEpoch = 0;
  L.barriers.clear();
  L.liveThreads = L.threadsPerBlock;
  std::memset(L.shared, 0, L.sharedBytes);
  bool tracking = L.sanitizer.tracking();
  for (Warp &w : L.warps) {
    uint32_t first = w.index * 32;
    uint32_t n = std::min<uint32_t>(32, L.threadsPerBlock - first);
    w.valid = n == 32 ? ~0u : (1u << n) - 1;
    w.exited = 0;
    w.nGroups = 1;
    w.groups[0] = Group();
    w.groups[0].mask = w.valid;
    std::memset(w.init, 0, sizeof(uint32_t) * fn.numSlots);
    std::memset(w.preds, 0, sizeof(uint32_t) * fn.numPreds);
    std::memset(w.predInit, 0, sizeof(uint32_t) * fn.numPreds);
    if (fn.localBytes)
      std::memset(w.local, 0, size_t(32) * L.localStride);
    w.syncCount = 0;
    if (tracking)
      std::memset(w.syncWith, 0, sizeof(w.syncWith));
    for (const ConstSlot &c : fn.constants) {
      uint64_t *r = w.reg(c.slot);
      w.init[c.slot] = ~0u;
      for (uint32_t l = 0; l < 32; ++l) {
        uint32_t t = first + l;
        Dim3 tid = unlinearize(t, L.block);
        uint64_t v = 0;
        switch (c.kind) {
        case ConstSlot::Value:
          v = c.value;
          break;
        case ConstSlot::TidX:
          v = tid.x;
          break;
        case ConstSlot::TidY:
          v = tid.y;
          break;
        case ConstSlot::TidZ:
          v = tid.z;
          break;
        case ConstSlot::NtidX:
          v = L.block.x;
          break;
        case ConstSlot::NtidY:
          v = L.block.y;
          break;
        case ConstSlot::NtidZ:
          v = L.block.z;
          break;
        case ConstSlot::CtaidX:
          v = L.blockIdx.x;
          break;
        case ConstSlot::CtaidY:
          v = L.blockIdx.y;
          break;
        case ConstSlot::CtaidZ:
          v = L.blockIdx.z;
          break;
        case ConstSlot::NctaidX:
          v = L.grid.x;
          break;
        case ConstSlot::NctaidY:
          v = L.grid.y;
          break;
        case ConstSlot::NctaidZ:
          v = L.grid.z;
          break;
        case ConstSlot::LaneId:
          v = l;
          break;
        case ConstSlot::WarpId:
          v = w.index;
          break;
        case ConstSlot::NWarpId:
          v = L.warpsPerBlock;
          break;
        case ConstSlot::SmId:
          v = uint32_t(L.blockLinear % 132);
          break;
        case ConstSlot::NSmId:
          v = 132;
          break;
        case ConstSlot::GridId:
          v = 0;
          break;
        case ConstSlot::LanemaskEq:
          v = 1u << l;
          break;
        case ConstSlot::LanemaskLe:
          v = l == 31 ? ~0u : (2u << l) - 1;
          break;
        case ConstSlot::LanemaskLt:
          v = (1u << l) - 1;
          break;
        case ConstSlot::LanemaskGe:
          v = ~((1u << l) - 1);
          break;
        case ConstSlot::LanemaskGt:
          v = l == 31 ? 0 : ~((2u << l) - 1);
          break;
        case ConstSlot::DynamicSmemSize:
          v = L.dynamicSharedBytes;
          break;
        case ConstSlot::TotalSmemSize:
          v = L.sharedBytes;
          break;
        case ConstSlot::DynamicSharedBase:
          v = fn.dynamicSharedOffset;
          break;
        }
        r[l] = v;
      }
    }
    for (auto &[slot, bits] : fn.predConstants) {
      w.preds[slot] = bits;
      w.predInit[slot] = ~0u;
    }
  }
  uint32_t quantum = L.options.quantum ? L.options.quantum : 32;
  size_t n = L.warps.size();
  size_t cursor = L.options.order == Order::Reverse ? n - 1 : 0;
  while (!L.failed) {
    // Pick a warp that can move, starting at the cursor.
    Warp *w = nullptr;
    if (L.options.order == Order::Random) {
      size_t start = size_t(L.random() % n);
      for (size_t k = 0; k < n && !w; ++k) {
        Warp &c = L.warps[(start + k) % n];
        for (uint32_t i = 0; i < c.nGroups; ++i)
          if (c.groups[i].wait == 0) {
            w = &c;
            break;
          }
      }
    } else {
      for (size_t k = 0; k < n && !w; ++k) {
        size_t i = L.options.order == Order::Reverse ? (cursor + n - k) % n
                                                     : (cursor + k) % n;
        Warp &c = L.warps[i];
        for (uint32_t j = 0; j < c.nGroups; ++j)
          if (c.groups[j].wait == 0) {
            w = &c;
            break;
          }
      }
    }
    if (!w) {
      bool anyLive = false;
      for (Warp &c : L.warps)
        anyLive |= c.nGroups > 0;
      if (anyLive)
        reportDeadlock();
      return;
    }
    uint32_t budget = L.options.order == Order::Random
                          ? 1 + uint32_t(L.random() % (2 * quantum))
                          : quantum;
    runWarp(*w, budget);
    size_t wi = size_t(w - L.warps.data());
    cursor =
        L.options.order == Order::Reverse ? (wi + n - 1) % n : (wi + 1) % n;
  }
}

} // namespace

void kpool::emu::ptx::runBlock(Launch &L) { Scheduler(L).runBlock(); }
