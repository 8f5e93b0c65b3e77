//===- Sanitizer.cpp - racecheck and initcheck shadow memory --------------===//

#include "Sanitizer.h"
#include "PtxMachine.h"

using namespace kpool::emu;
using namespace kpool::emu::ptx;

void Sanitizer::start(uint32_t sharedBytes, bool tracking) {
  tracking_ = tracking;
  pages_.clear();
  lastPage_ = ~0ull;
  lastCells_ = nullptr;
  shared_.assign(tracking ? sharedBytes : 0, ShadowCell());
}

ShadowCell *Sanitizer::globalCell(uint64_t address) {
  uint64_t page = address >> kPageBits;
  if (page != lastPage_) {
    auto &cells = pages_[page];
    if (!cells)
      cells.reset(new ShadowCell[size_t(1) << kPageBits]);
    lastPage_ = page;
    lastCells_ = cells.get();
  }
  return lastCells_ + (address & ((uint64_t(1) << kPageBits) - 1));
}

namespace {

struct Checker {
  Launch &L;
  Warp &w;
  uint32_t lane;
  uint32_t me;

  bool ordered(const AccessRecord &r) const {
    uint64_t t = r.thread - 1;
    if (t / L.threadsPerBlock != L.blockLinear)
      return false; // no barrier orders threads of different blocks
    if (r.epoch != uint16_t(L.blockEpoch))
      return true; // a bar.sync was released since
    uint32_t inBlock = uint32_t(t % L.threadsPerBlock);
    if (inBlock / 32 != w.index)
      return false;
    uint16_t since = uint16_t(w.syncWith[lane][inBlock % 32] - r.warpSync);
    return since >= 1 && since < 0x8000; // a bar.warp.sync of both since
  }
  bool conflicts(const AccessRecord &r, bool atomic) const {
    if (!r.thread || r.thread == me || (atomic && r.atomic))
      return false;
    return !ordered(r);
  }
};

} // namespace

void kpool::emu::ptx::checkAccess(Launch &L, Warp &w, uint32_t lane,
                                  const Inst &in, bool shared, uint64_t address,
                                  uint32_t bytes, AccessKind kind) {
  Checker c{L, w, lane, uint32_t(L.globalThread(w, lane)) + 1};
  AccessRecord rec;
  rec.thread = c.me;
  rec.epoch = uint16_t(L.blockEpoch);
  rec.warpSync = uint16_t(w.syncCount);
  rec.line = in.line;
  rec.atomic = kind == AccessKind::Atomic;
  bool race = L.options.racecheck;
  bool init = L.options.initcheck && shared;
  bool atomic = kind == AccessKind::Atomic;
  const char *hazard = nullptr;
  AccessRecord other;
  bool uninitialized = false, stale = false;
  AccessRecord staleWriter;
  // Accesses are aligned to their size (<= 16 bytes), so they never cross
  // a shadow page: one lookup for all their bytes.
  ShadowCell *cells = shared ? L.sanitizer.sharedCell(uint32_t(address))
                             : L.sanitizer.globalCell(address);
  for (uint32_t i = 0; i < bytes; ++i) {
    ShadowCell *cell = cells + i;
    if (shared) {
      // Records of an earlier block describe another block's memory.
      auto fromOtherBlock = [&](const AccessRecord &r) {
        return r.thread && (r.thread - 1) / L.threadsPerBlock != L.blockLinear;
      };
      if (fromOtherBlock(cell->writer) || fromOtherBlock(cell->reader))
        *cell = ShadowCell();
    }
    if (kind == AccessKind::Read || kind == AccessKind::ReadNonCoherent) {
      if (init && !cell->writer.thread)
        uninitialized = true;
      // A read racing with atomics is the compare-and-swap loop's first
      // read (the CUDA Programming Guide's atomicCAS idiom: a plain read
      // of the current value, then atom.cas, which retries with the value
      // it finds); it may see any value the location held, and the CAS
      // checks it. Not a hazard; a read racing with a plain write is.
      if (race && !hazard && !cell->writer.atomic &&
          c.conflicts(cell->writer, false)) {
        hazard = "read-after-write";
        other = cell->writer;
      }
      if (kind == AccessKind::ReadNonCoherent && cell->writer.thread &&
          !stale) {
        stale = true;
        staleWriter = cell->writer;
      }
      cell->reader = rec;
    } else {
      if (race && !hazard) {
        if (c.conflicts(cell->writer, atomic)) {
          hazard = atomic ? "atomic-after-write" : "write-after-write";
          other = cell->writer;
        } else if (!atomic && c.conflicts(cell->reader, false)) {
          hazard = "write-after-read"; // (atomics after reads: see above)
          other = cell->reader;
        }
      }
      cell->writer = rec;
      cell->reader = AccessRecord();
    }
  }
  if (!hazard && !uninitialized && !(stale && race))
    return;
  const char *space = shared ? "shared" : "global";
  std::string where = shared ? "shared address " + formatAddress(address)
                             : formatAddress(address);
  if (hazard) {
    bool otherWrote =
        !(std::string(hazard).find("after-read") != std::string::npos);
    L.report(Finding::Kind::Racecheck, false, &w, lane, &in,
             std::string(hazard) + " hazard on " + space + " memory at " +
                 where + " (" + std::to_string(bytes) +
                 " bytes): " + L.describeThread(other.thread - 1) + " " +
                 (otherWrote
                      ? (other.atomic ? "updated it atomically" : "wrote it")
                      : "read it") +
                 " at PTX line " + std::to_string(other.line) +
                 " with no barrier or atomic between the two");
  }
  if (uninitialized)
    L.report(Finding::Kind::Initcheck, false, &w, lane, &in,
             "read of never-written shared memory at " + where + " (" +
                 std::to_string(bytes) + " bytes)");
  if (stale && race)
    L.report(Finding::Kind::Racecheck, false, &w, lane, &in,
             "ld.global.nc of " + where + ", which this launch writes (" +
                 L.describeThread(staleWriter.thread - 1) + " at PTX line " +
                 std::to_string(staleWriter.line) +
                 "): the non-coherent path may return stale data");
}
