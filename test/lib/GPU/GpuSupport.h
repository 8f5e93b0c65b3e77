//===- GpuSupport.h - shared code of the GPU executables --------*- C++ -*-===//
//
// What kpool-gpu-check, kpool-gpu-demo and kpool-bench-gpu share: a check
// that a CUDA driver and device are there (before the ahead-of-time kernels
// load their GPU modules), tensors that live in device memory with a host
// image of the whole allocation (guards and padding included), comparison
// in units in the last place of the largest member key, and a serving
// schedule driven through the four kernels on device buffers.
//
// Test and benchmark code: it links no MLIR, only KPoolRuntimeCore,
// KPoolReference and libkpool_cuda_runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_GPU_GPUSUPPORT_H
#define KPOOL_TEST_LIB_GPU_GPUSUPPORT_H

#include "Reference/Reference.h"
#include "kpool/Runtime/CUDA.h"
#include "kpool/Runtime/KernelSet.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kpool::gpu {

/// "NVIDIA H200 (sm_90), 132 SMs, driver 13.0": the device the kernels run
/// on -- a GPU, or the emulated CUDA driver's "kpool emulated device"
/// (test/lib/CudaEmu, selected by LD_LIBRARY_PATH: the same binaries run
/// the shipped PTX in its executor). The first call checks that the CUDA
/// driver initializes and has a device; if not, the program prints why and
/// exits with status 2 instead of aborting in the module loader. Nothing
/// runs before main: a program may fork before its first CUDA call.
const std::string &deviceDescription();

/// Whether the CUDA driver is kpool's emulated one (after
/// deviceDescription()), which answers the questions below.
bool emulatedDriver();
/// Kernel launches executed on `stream` so far, eager ones and those of
/// graphs launched there (null: the NULL stream); -1 on a real driver.
int64_t launchCount(void *stream);
/// The stream's number in the process (0: the NULL stream); -1 on a real
/// driver.
int64_t streamId(void *stream);
/// Module loads so far, the distinct modules loaded, and the most loads of
/// one module; false on a real driver.
bool moduleLoads(int64_t &loads, int64_t &modules, int64_t &mostOfOne);

/// Kernel launches the emulated driver executed so far (a launch executes
/// when something waits for its stream), those with sanitizer findings
/// and those that failed; false on a real driver.
bool emulatedLaunches(int64_t &launches, int64_t &withFindings,
                      int64_t &failed);
/// Launches executed so far of the kernels whose name contains `part`
/// (e.g. "_compress_strided"); -1 on a real driver.
int64_t kernelLaunches(const std::string &part);

/// A running FNV-1a digest of every byte Tensor::download returned, so that
/// runs can be compared bit for bit (e.g. under different emulated
/// schedules) by one line.
uint64_t downloadDigest();

//===----------------------------------------------------------------------===//
// Streams and graphs
//===----------------------------------------------------------------------===//

/// Launches captured from a stream: a CUDA graph, instantiated.
struct Graph;
/// Starts capturing the work enqueued on `stream` (not the NULL stream), in
/// the driver's global capture mode: any synchronization, allocation, free,
/// copy or module load until endCapture fails (the emulated driver names
/// the call on stderr; kpool's CUDA layer then aborts).
void beginCapture(void *stream);
/// Ends the capture and returns what it captured, ready to launch.
std::shared_ptr<Graph> endCapture(void *stream);
/// Enqueues the graph's launches on `stream`.
void launchGraph(const Graph &graph, void *stream);
/// The kernel launches (kernel nodes) in `graph`.
int64_t graphLaunches(const Graph &graph);

/// Milliseconds of device time between two points of a stream (CUDA
/// events; under the emulated driver, host time spent executing).
class StreamTimer {
public:
  explicit StreamTimer(void *stream);
  ~StreamTimer();
  void start();
  /// Ends the interval and waits for it; milliseconds since start().
  double stop();

private:
  void *stream;
  void *begin = nullptr, *end = nullptr;
};

/// Raw bits of one element of `type` at `p` (uint16 for bf16/f16).
inline uint32_t loadBits(ElementType type, const void *p) {
  return reference::elementBits(type, p);
}
using reference::ulpOf;
/// What the kernels this build runs do with softmax weights below 2^-126
/// (docs/semantics.md, "Subnormal weights"): the GPU's default exp
/// (ex2.approx.f32, libdevice's __nv_expf) keeps every one (on a GPU
/// and through the emulated driver, which runs the same PTX). References
/// and exact checks apply it.
constexpr reference::SubnormalWeights kSubnormalWeights =
    reference::kGpuSubnormalWeights;
/// The element at `p` as a double.
double loadValue(ElementType type, const void *p);
/// `n` elements of `type`, each T(normal(0, sigma)), as raw bytes.
std::vector<uint8_t> randomElements(ElementType type, int64_t n,
                                    std::mt19937 &rng, float sigma);

/// The tolerance of a GPU pooled key against the reference, in ulp of the
/// largest member key of its channel: the GPU's exp is libdevice's
/// __nv_expf (at most 2 ulp off in f32), the reference's is std::exp. A
/// pooled key is a softmax-weighted mean of its members' keys, so an exp
/// error moves it by a few ulp of the largest member key (not of itself:
/// keys of opposite signs cancel). bf16/f16 round the f32 result once, so
/// the f32 error shows as at most one ulp; f32 shows it whole.
double toleranceUlp(ElementType type);

/// A tensor in device memory and a host image of its whole allocation:
/// `guard` elements before and after the span of a strided view. Padding
/// and guards are canaries: nothing may write them.
class Tensor {
public:
  /// `strides` empty: dense row-major.
  Tensor(int64_t elementSize, std::vector<int64_t> sizes,
         std::vector<int64_t> strides = {}, int64_t guard = 0);

  int64_t elementSize() const { return esize; }
  const std::vector<int64_t> &sizes() const { return shape; }
  /// Logical elements (product of the sizes).
  int64_t elements() const;

  /// The host image: guards, padding and the view's elements.
  std::vector<uint8_t> image;
  /// Fills the whole image with `byte`, then the view's elements with
  /// `dense` (row-major logical contents; empty: leave the fill).
  void fill(uint8_t byte, const std::vector<uint8_t> &dense = {});
  /// Fills the whole image with random bytes, then the view with `dense`.
  void fillRandom(std::mt19937 &rng, const std::vector<uint8_t> &dense = {});
  /// The view's elements of `img` (default: the image), row-major.
  std::vector<uint8_t> dense(const std::vector<uint8_t> *img = nullptr) const;
  /// Whether every byte of `img` outside the view equals `before`'s.
  bool outsideUnchanged(const std::vector<uint8_t> &before,
                        const std::vector<uint8_t> &img) const;

  /// The view over the image (host memory: the reference's operand).
  View hostView();
  /// The view over device memory (after upload()).
  View deviceView() const;
  /// Copies the image to the device (allocating on first use), after the
  /// work enqueued on `stream`, and waits.
  void upload(void *stream = nullptr);
  /// Copies the device allocation into a new image, which it returns,
  /// after the work enqueued on `stream`.
  std::vector<uint8_t> download(void *stream = nullptr) const;

private:
  View viewAt(void *base) const;
  /// Offsets (in elements, from the first guard element) of the view's
  /// elements in row-major order.
  std::vector<int64_t> elementOffsets() const;

  int64_t esize, guard, span;
  std::vector<int64_t> shape, stride;
  std::unique_ptr<cuda::DeviceBuffer> device;
};

/// Dense bytes of a vector of 32-bit values (metadata).
std::vector<uint8_t> bytesOf(const std::vector<uint32_t> &values);
std::vector<uint8_t> bytesOf(const std::vector<float> &values);
/// 32-bit values of dense bytes.
std::vector<uint32_t> wordsOf(const std::vector<uint8_t> &bytes);

/// Largest error, in ulp of the largest member key of each channel, of the
/// pooled rows `got` against `want` (dense [rows, D] of `type`): `scales`
/// holds, per row and channel, the largest |member key|.
double maxUlpError(ElementType type, int64_t D, const std::vector<uint8_t> &got,
                   const std::vector<uint8_t> &want,
                   const std::vector<double> &scales);
/// Appends to `scales` the per-channel max |key| over the member key rows
/// `members` (D elements each, dense).
void appendScales(ElementType type, int64_t D,
                  const std::vector<const uint8_t *> &members,
                  std::vector<double> &scales);

//===----------------------------------------------------------------------===//
// A serving schedule on the device
//===----------------------------------------------------------------------===//

/// A request of a schedule: its tail-ring slot and its whole token sequence
/// (raw element bytes, [length, D] row-major).
struct Sequence {
  uint32_t slot;
  std::vector<uint8_t> keys, gates;
  int64_t length;
};

/// Random sequences of the given lengths in the given slots: keys
/// normal(0, 1), gates normal(0, 4) (large enough that the softmax
/// discriminates).
std::vector<Sequence> randomSequences(ElementType type, int64_t D,
                                      const std::vector<uint32_t> &slots,
                                      const std::vector<int64_t> &lengths,
                                      std::mt19937 &rng);

/// Drives calls of ring_close, pool_offsets, compress and seed_tail (in that
/// order, as a serving engine does) on device buffers over a ragged batch,
/// and keeps every pool produced, on the host, to check it.
class DeviceSchedule {
public:
  /// `ringWindow`: rows per ring slot (>= kpool; 0 for kpool). Every call
  /// goes to `stream` (null: the NULL stream).
  DeviceSchedule(const KernelSet &kernels, const std::vector<Sequence> &seqs,
                 int64_t maxSlots, const std::vector<float> &ape,
                 int64_t ringWindow = 0, void *stream = nullptr);

  /// One call: `counts[r]` more tokens of request r (-1: r is not in this
  /// call). Validates every op's metadata on the host copies before the
  /// upload (KernelSet::check); the calls themselves read
  /// nothing back: `pooled` is capacity-shaped (tokens / kpool rows) and
  /// results are downloaded once, after the four calls.
  /// Adds to the pools produced; `closedFromRing` counts those ring_close
  /// produced in this call.
  ///
  /// Speculative decoding: with `accepted`, a request r with
  /// `accepted[r] >= 0` brings its next `accepted[r]` tokens followed by
  /// `counts[r] - accepted[r]` junk tokens (rejected drafts), and after the
  /// call rolls back to the accepted length, as an engine does: it checks
  /// the contract's condition (kpool::ringHoldsPending; an error if the
  /// ring window is too small) and forgets the pools at and after the first
  /// rejected position.
  Status step(const std::vector<int64_t> &counts, int64_t *pools,
              int64_t *closedFromRing,
              const std::vector<int64_t> *accepted = nullptr);

  /// Run each call as one fused kpool.step (KernelSet::step) instead of the
  /// four ops.
  bool fused = false;

  /// Tokens of request r seen so far.
  int64_t done(size_t r) const { return seen[r]; }

  /// What checkAgainstOneShot found.
  struct Report {
    int64_t produced = 0, fromRing = 0;  ///< pools the schedule produced
    int64_t checked = 0;                 ///< pools compared
    int64_t missing = 0, duplicated = 0; ///< pools produced 0, >1 times
    int64_t differ = 0, ringDiffer = 0;  ///< differ from one-shot (ring)
    double maxUlp = 0;                   ///< worst error vs the reference
    bool ok(ElementType type) const {
      return checked == produced && missing == 0 && duplicated == 0 &&
             differ == 0 && maxUlp <= toleranceUlp(type);
    }
  };
  /// Compares every complete pool of every request's tokens so far with a
  /// one-shot compress of the request's whole sequence on the device (bit
  /// for bit) and with the reference (tolerance). Prints a line per pool
  /// that differs, prefixed with `prefix`.
  Report checkAgainstOneShot(const std::string &prefix) const;

private:
  struct Produced {
    std::vector<uint8_t> bytes;
    int times = 0;
    bool fromRing = false;
  };
  const KernelSet &kernels;
  const std::vector<Sequence> &seqs;
  void *stream;
  KernelConfig config;
  int64_t esize;
  std::vector<float> ape;
  int64_t window;
  Tensor apeT, ring;
  std::mt19937 junk{0x6a756e6b};
  std::vector<int64_t> seen;
  std::vector<std::vector<Produced>> produced; // [request][pool]
  int64_t totalProduced = 0, totalFromRing = 0;
};

} // namespace kpool::gpu

#endif // KPOOL_TEST_LIB_GPU_GPUSUPPORT_H
