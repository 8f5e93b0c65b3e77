//===- Traffic.h - memory-traffic baselines for the benchmark ---*- C++ -*-===//
//
// What compress cannot beat, whatever its arithmetic:
//  - trafficFloor: the same metadata walk and the same bytes as compress
//    (read every member row of k and gate once, write each pooled row once)
//    with no math: a pooled row is the XOR of its members' key and gate
//    rows;
//  - copyBytes: a memcpy of as many bytes as compress moves (it reads and
//    writes them all, so it moves about twice compress's traffic, plus the
//    read-for-ownership of the destination).
// And 64-byte aligned buffers for every operand (std::vector's large
// allocations are 16 bytes off a cache line).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_BENCHMARKS_TRAFFIC_H
#define KPOOL_BENCHMARKS_TRAFFIC_H

#include "kpool/ABI/View.h"

#include <cstddef>
#include <cstdint>

namespace kpool::bench {

/// A zero-filled (so paged-in), 64-byte aligned allocation.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer &&other) noexcept;
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;

  template <typename T = void> T *data() const { return static_cast<T *>(ptr); }
  size_t size() const { return bytes; }

private:
  void *ptr = nullptr;
  size_t bytes = 0;
};

/// compress's reads and writes without its arithmetic; operands as for
/// compress (`elementSize` bytes per element, dense inner dimension),
/// with compress's per-request guards.
void trafficFloor(int64_t elementSize, int64_t headDim, int64_t kpool,
                  const KPoolView &pooled, const KPoolView &k,
                  const KPoolView &gate, const KPoolView &inputRowOffsets,
                  const KPoolView &poolRowOffsets,
                  const KPoolView &cacheLengths);

/// memcpy, out of line so that the call is not folded away.
void copyBytes(void *dst, const void *src, size_t bytes);

} // namespace kpool::bench

#endif // KPOOL_BENCHMARKS_TRAFFIC_H
