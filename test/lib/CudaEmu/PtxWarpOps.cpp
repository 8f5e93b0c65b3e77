//===- PtxWarpOps.cpp - shfl.sync, vote.sync, bar.warp.sync, activemask ---===//
//
// The scheduler (PtxScheduler.cpp) runs a warp-synchronous instruction only
// for lanes whose member mask names no lane that has not arrived at it, so
// a handler sees the lanes that execute it together. Reading a lane that
// does not take part (not executing the instruction with it, or not in the
// reader's member mask) is undefined in the ISA: reported, and the emulator
// reads that lane's register as it is.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"
#include "PtxOps.h"

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

void shfl(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  const uint64_t *a = w.reg(in.s[0]), *b = w.reg(in.s[1]), *c = w.reg(in.s[2]),
                 *mask = w.reg(in.s[3]);
  uint32_t tmp[32], p = 0, strayLane = 32, strayFrom = 0;
  forLanes(lanes, [&](uint32_t l) {
    uint32_t bval = uint32_t(b[l]) & 31, cval = uint32_t(c[l]) & 31;
    uint32_t seg = (uint32_t(c[l]) >> 8) & 31;
    uint32_t maxLane = (l & seg) | (cval & ~seg);
    uint32_t minLane = l & seg;
    int64_t j = 0;
    bool pval = false;
    switch (ShflMode(in.mode)) {
    case ShflMode::Up:
      j = int64_t(l) - int64_t(bval);
      pval = j >= int64_t(maxLane);
      break;
    case ShflMode::Down:
      j = int64_t(l) + int64_t(bval);
      pval = j <= int64_t(maxLane);
      break;
    case ShflMode::Bfly:
      j = int64_t(l ^ bval);
      pval = j <= int64_t(maxLane);
      break;
    case ShflMode::Idx:
      j = int64_t(minLane | (bval & ~seg));
      pval = j <= int64_t(maxLane);
      break;
    }
    if (!pval)
      j = l;
    uint32_t src = uint32_t(j);
    if (src != l &&
        (!((lanes >> src) & 1) || !((uint32_t(mask[l]) >> src) & 1)) &&
        strayLane == 32) {
      strayLane = l;
      strayFrom = src;
    }
    tmp[l] = uint32_t(a[src]);
    p |= uint32_t(pval) << l;
  });
  uint64_t *d = w.reg(in.d[0]);
  forLanes(lanes, [&](uint32_t l) { d[l] = tmp[l]; });
  setPred(w.preds[in.d[1] & ~kPredBit], lanes, p);
  if (strayLane < 32)
    L.report(Finding::Kind::Synccheck, false, &w, strayLane, &in,
             "shfl.sync reads lane " + std::to_string(strayFrom) +
                 ", which does not take part in it (not executing it or not "
                 "in the member mask): the value is undefined");
}

void vote(Launch &, Warp &w, const Inst &in, uint32_t lanes) {
  uint32_t a = w.preds[in.s[0] & ~kPredBit];
  if (in.flag)
    a = ~a;
  const uint64_t *mask = w.reg(in.s[1]);
  VoteMode mode = VoteMode(in.mode);
  uint32_t live = w.valid & ~w.exited;
  if (mode == VoteMode::Ballot) {
    uint64_t *d = w.reg(in.d[0]);
    forLanes(lanes, [&](uint32_t l) { d[l] = a & uint32_t(mask[l]); });
    return;
  }
  uint32_t r = 0;
  forLanes(lanes, [&](uint32_t l) {
    uint32_t s = uint32_t(mask[l]) & live;
    bool v = mode == VoteMode::All   ? (a & s) == s
             : mode == VoteMode::Any ? (a & s) != 0
                                     : ((a & s) == s || (a & s) == 0);
    r |= uint32_t(v) << l;
  });
  setPred(w.preds[in.d[0] & ~kPredBit], lanes, r);
}

void barWarpSync(Launch &L, Warp &w, const Inst &, uint32_t lanes) {
  if (!L.sanitizer.tracking())
    return;
  uint32_t count = ++w.syncCount;
  forLanes(lanes, [&](uint32_t a) {
    forLanes(lanes, [&](uint32_t b) { w.syncWith[a][b] = count; });
  });
}

void activemask(Launch &, Warp &w, const Inst &in, uint32_t lanes) {
  uint64_t *d = w.reg(in.d[0]);
  forLanes(lanes, [&](uint32_t l) { d[l] = w.active; });
}

template <bool SixtyFour, bool High>
void clock(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  uint64_t *d = w.reg(in.d[0]);
  uint64_t t = L.warpInstructions; // a deterministic "cycle" count
  uint64_t v = SixtyFour ? t : High ? (t >> 32) : uint32_t(t);
  forLanes(lanes, [&](uint32_t l) { d[l] = v; });
}

void nop(Launch &, Warp &, const Inst &, uint32_t) {}

} // namespace

Handler kpool::emu::ptx::selectShfl() { return shfl; }
Handler kpool::emu::ptx::selectVote() { return vote; }
Handler kpool::emu::ptx::selectBarWarpSync() { return barWarpSync; }
Handler kpool::emu::ptx::selectActivemask() { return activemask; }
Handler kpool::emu::ptx::selectNop() { return nop; }
Handler kpool::emu::ptx::selectClock(bool sixtyFour, bool high) {
  if (sixtyFour)
    return clock<true, false>;
  return high ? clock<false, true> : clock<false, false>;
}
