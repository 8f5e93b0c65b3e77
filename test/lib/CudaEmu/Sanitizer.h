//===- Sanitizer.h - racecheck and initcheck shadow memory -----*- C++ -*-===//
//
// Internal. Per byte of global memory (pages allocated on first touch) and
// of the block's shared memory, the last write and the last read of the
// launch: which thread, at which barrier epoch of its block, at which
// bar.warp.sync count of its warp, from which PTX line. An access conflicts
// with a recorded one by another thread unless the two are ordered: same
// block and a bar.sync released in between, or same warp and a
// bar.warp.sync both took part in in between. Threads of different blocks
// are never ordered (there is no barrier across blocks), so on global
// memory any such pair is a race unless both are atomics, or one is an
// atomic and the other a read: the compare-and-swap loop reads the
// current value plainly, then atom.cas checks it (the CUDA Programming
// Guide's idiom; kpool's status word is kept that way).
//
// Shared memory records of another block are stale (blocks run one after
// another on one buffer) and count as never written, which is also what
// initcheck reads.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_SANITIZER_H
#define KPOOL_TEST_LIB_CUDAEMU_SANITIZER_H

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace kpool::emu::ptx {

struct Launch;
struct Warp;
struct Inst;
enum class Space : uint8_t;

struct AccessRecord {
  uint32_t thread = 0; // global thread index + 1; 0: none
  uint16_t epoch = 0;  // the block's barrier releases before the access
  uint16_t warpSync = 0;
  uint32_t line : 31;
  uint32_t atomic : 1;
  AccessRecord() : line(0), atomic(0) {}
};

struct ShadowCell {
  AccessRecord writer, reader;
};

enum class AccessKind : uint8_t { Read, ReadNonCoherent, Write, Atomic };

class Sanitizer {
public:
  /// Starts a launch; `tracking`: keep records (racecheck or initcheck).
  void start(uint32_t sharedBytes, bool tracking);
  bool tracking() const { return tracking_; }
  ShadowCell *globalCell(uint64_t address);
  ShadowCell *sharedCell(uint32_t offset) { return &shared_[offset]; }

private:
  static constexpr unsigned kPageBits = 12;
  bool tracking_ = false;
  std::unordered_map<uint64_t, std::unique_ptr<ShadowCell[]>> pages_;
  uint64_t lastPage_ = ~0ull;
  ShadowCell *lastCells_ = nullptr;
  std::vector<ShadowCell> shared_;
};

/// Racecheck (and shared-memory initcheck, and reads through the
/// non-coherent path of data the launch writes) for one lane's access of
/// `bytes` at `address` (a host address for global memory, an offset for
/// shared memory). Reports through the launch.
void checkAccess(Launch &L, Warp &w, uint32_t lane, const Inst &in, bool shared,
                 uint64_t address, uint32_t bytes, AccessKind kind);

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_SANITIZER_H
