//===- Executor.h - the PTX executor behind the emulated CUDA driver -*- C++ -*-===//
//
// The boundary between the emulated CUDA driver (Driver.cpp: the libcuda.so.1
// stand-in, which owns contexts, allocations, streams, capture and graphs)
// and the PTX executor (Ptx*.cpp: parses a module's PTX once into predecoded
// form and runs kernels with CUDA's execution model, checks and counters).
// Test and benchmark support: nothing in kpool's libraries includes it.
//
// "Device" memory is host memory the driver allocates; a PTX global or
// generic address is the host address. Shared and local memory belong to
// the executor (a window of generic addresses it reserves per launch).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_EXECUTOR_H
#define KPOOL_TEST_LIB_CUDAEMU_EXECUTOR_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::emu {

/// One live device allocation, as the driver recorded it.
struct Allocation {
  uint64_t base = 0;
  uint64_t bytes = 0;
};

/// The driver's live allocations, for the executor's memory checks.
class MemoryMap {
public:
  virtual ~MemoryMap() = default;
  /// The live allocation that wholly holds [address, address + bytes), or
  /// null. Must be cheap (called per warp-level access).
  virtual const Allocation *find(uint64_t address, uint64_t bytes) const = 0;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

/// The order in which runnable warps (and blocks) are picked.
enum class Order { Forward, Reverse, Random };
/// How `.approx` instructions round: Nominal is a fixed deterministic
/// function within the ISA's maximum error; Adversarial (seeded) pushes
/// every result towards that bound.
enum class Approx { Nominal, Adversarial };

/// What a launch is run with (the driver fills it from the environment:
/// KPOOL_EMU_ORDER, KPOOL_EMU_SEED, KPOOL_EMU_APPROX, KPOOL_EMU_CHECKS).
struct Options {
  Order order = Order::Forward;
  uint64_t seed = 0;
  Approx approx = Approx::Nominal;
  uint64_t approxSeed = 0;
  /// Memory accesses are always checked before any byte moves: an access
  /// outside every live allocation (or shared/local window, or misaligned)
  /// stops the launch whatever this says, and the launch fails as with a
  /// device's illegal address (LaunchResult::illegalAddress). memcheck
  /// makes that a sanitizer finding (Finding::Kind::Memcheck, else
  /// Kind::Execution) and adds the view check: in an allocation that only
  /// the memref descriptors among the kernel's parameters point into
  /// (MLIR's allocated and aligned pointers, offset, sizes, strides: a
  /// `.ptr` pair of .u64 parameters followed by .u64 ones), an access
  /// outside every view they describe is reported (the launch goes on: the
  /// bytes are inside an allocation).
  bool memcheck = true;
  bool racecheck = true;
  bool synccheck = true;
  bool initcheck = true;
  /// Collect the counters of LaunchResult::counters (the CPU time of the
  /// launch, LaunchResult::cpuSeconds, is always measured).
  bool profile = false;
  /// Warp-instructions a warp runs before the block's scheduler picks the
  /// next warp (0: 32; under Order::Random each turn's length is drawn in
  /// [1, 2 * quantum]).
  uint32_t quantum = 0;
  /// Warp-instructions after which a launch stops with an Execution finding
  /// (a kernel that never ends; 0: 2^36).
  uint64_t maxWarpInstructions = 0;
  /// Findings kept per launch; later ones are counted, not kept.
  uint32_t maxFindings = 64;
};

/// Dynamic counts of one launch (filled when Options::profile is set).
struct Counters {
  /// Thread-instructions by class.
  uint64_t integer = 0, integer64 = 0, floating = 0, special = 0,
           memory = 0, control = 0, sync = 0;
  /// Warp-instructions executed and the active lanes summed over them
  /// (divergence: activeLanes / (32 * warpInstructions)).
  uint64_t warpInstructions = 0, activeLanes = 0;
  /// Per warp-level global access: distinct 32-byte sectors and 128-byte
  /// lines touched by the active lanes, and the bytes they asked for.
  uint64_t globalLoadSectors = 0, globalStoreSectors = 0;
  uint64_t globalLoadLines = 0, globalStoreLines = 0;
  uint64_t globalLoadBytes = 0, globalStoreBytes = 0;
  uint64_t threads = 0;
  Counters &operator+=(const Counters &other);
};

/// A sanitizer or execution finding, already worded for a person: kernel,
/// block, thread, PTX line and address where they apply.
struct Finding {
  enum class Kind { Memcheck, Racecheck, Synccheck, Initcheck, Execution };
  Kind kind;
  std::string message;
};

struct LaunchResult {
  /// False when the kernel could not run to completion (an execution
  /// error, a deadlock, a fatal memory error); the driver then returns
  /// CUDA_ERROR_LAUNCH_FAILED (or the closest CUresult) from the launch
  /// and from later synchronization, as a real device does.
  bool completed = true;
  /// The launch stopped at an access outside memory it may touch (a
  /// memory error: CUDA_ERROR_ILLEGAL_ADDRESS), or at a misaligned one
  /// (also `misaligned`: CUDA_ERROR_MISALIGNED_ADDRESS), with or without
  /// memcheck.
  bool illegalAddress = false;
  bool misaligned = false;
  std::vector<Finding> findings;
  Counters counters;
  /// CPU time the calling thread spent in the launch (one core).
  double cpuSeconds = 0;
};

/// One kernel of a module: what the driver needs to marshal a launch.
struct Param {
  uint32_t size = 0;
  uint32_t align = 1;
  uint32_t offset = 0;
};
class Function {
public:
  virtual ~Function() = default;
  virtual const std::string &name() const = 0;
  /// The kernel's .param list, in order (cuLaunchKernel's kernelParams[i]
  /// points at params()[i].size bytes).
  virtual const std::vector<Param> &params() const = 0;
  /// Bytes of static .shared memory.
  virtual uint32_t staticSharedBytes() const = 0;
  /// Largest block the kernel accepts (.maxntid, else 1024).
  virtual uint32_t maxThreadsPerBlock() const = 0;
};

/// A parsed, predecoded PTX module.
class Module {
public:
  virtual ~Module() = default;
  /// The kernel `name` (an .entry), or null.
  virtual const Function *function(std::string_view name) const = 0;
  /// Its .entry names, in order.
  virtual std::vector<std::string> functionNames() const = 0;
};

/// Parses `ptx` (text; a fatbin or cubin is the driver's to unpack). On
/// failure returns null and sets `error` (line and reason).
std::unique_ptr<Module> loadModule(std::string_view ptx, std::string &error);

/// Runs `function` over `grid` x `block` with `dynamicSharedBytes` of
/// dynamic shared memory; `params[i]` points at parameter i's bytes (as in
/// cuLaunchKernel). Returns when every thread has exited or the launch
/// failed. Thread-safe for concurrent launches.
LaunchResult launch(const Function &function, Dim3 grid, Dim3 block,
                    uint32_t dynamicSharedBytes, void *const *params,
                    const MemoryMap &memory, const Options &options);

} // namespace kpool::emu

#endif // KPOOL_TEST_LIB_CUDAEMU_EXECUTOR_H
