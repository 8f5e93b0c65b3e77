//===- Driver.h - the emulated CUDA driver's state --------------*- C++ -*-===//
//
// Internal to the emulated CUDA driver (libcuda.so.1 of <build>/lib/cuda-emu,
// docs/gpu.md "The emulated CUDA driver"): the objects behind the driver's
// handles and what the entry points of Driver.cpp, Memory.cpp, Streams.cpp,
// Graphs.cpp and Modules.cpp share. The PTX executor (Executor.h) runs the kernels.
//
// One lock serializes every entry point, kernel execution included: the
// driver is thread-safe, not concurrent. A handle is the address of the
// object behind it; the driver keeps every live object in a registry and
// rejects any other value (CUDA_ERROR_INVALID_HANDLE, or the error the real
// driver documents) instead of following it.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_DRIVER_H
#define KPOOL_TEST_LIB_CUDAEMU_DRIVER_H

#include "CudaEmu/Executor.h"

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kpool::emu::driver {

//===----------------------------------------------------------------------===//
// Options and reports (Options.cpp)
//===----------------------------------------------------------------------===//

/// What a launch with sanitizer findings does to the process.
enum class OnFinding { Exit, Abort, Report };

/// The driver's options, read from the environment by cuInit.
struct Settings {
  emu::Options launch;
  OnFinding onFinding = OnFinding::Exit;
  /// KPOOL_PTX_DUMP, KPOOL_PTX_OVERRIDE, KPOOL_EMU_PROFILE (empty: off).
  std::string dumpDir, overrideDir, profilePath;
};

/// Reads the KPOOL_EMU_* and KPOOL_PTX_* variables into `settings`; false
/// (with `error` naming the variable and the value) on a bad value.
bool readSettings(Settings &settings, std::string &error);

/// The exit status of a process whose launches had sanitizer findings.
constexpr int kFindingsExitStatus = 86;

/// Prints "cuda-emu: <text>" on stderr.
void say(const std::string &text);

//===----------------------------------------------------------------------===//
// Memory (Memory.cpp)
//===----------------------------------------------------------------------===//

/// The "device" memory: host memory the driver allocated (with a
/// PROT_NONE guard page on each side) or registered, all of it addressable
/// by kernels at its host address (unified addressing).
class Memory final : public emu::MemoryMap {
public:
  enum class Kind { Device, Managed, Registered };
  struct Range {
    emu::Allocation allocation;
    Kind kind;
    /// The mapping around a driver allocation (guards included).
    void *mapping = nullptr;
    size_t mappingBytes = 0;
  };

  const emu::Allocation *find(uint64_t address, uint64_t bytes) const override;
  /// The range holding `address`, or null.
  const Range *rangeOf(uint64_t address) const;

  /// Maps `bytes` (> 0) of new memory, filled with 0xcd (device memory
  /// starts undefined); null when the host is out of memory.
  void *allocate(size_t bytes, Kind kind);
  /// Unmaps the allocation starting at `address`; false when there is none
  /// of kind Device or Managed.
  bool release(uint64_t address);
  /// Records [p, p + bytes) as registered host memory.
  CUresult registerHost(void *p, size_t bytes);
  CUresult unregisterHost(void *p);

  /// Live allocations and registrations, for messages.
  size_t size() const { return ranges.size(); }

private:
  void insert(Range r);
  std::vector<Range> ranges; // sorted by base, disjoint
};

//===----------------------------------------------------------------------===//
// Modules and functions (Modules.cpp)
//===----------------------------------------------------------------------===//

struct Module {
  /// The module's name: its first .entry (docs/gpu.md, KPOOL_PTX_DUMP).
  std::string name;
  std::unique_ptr<emu::Module> parsed;
  /// PTX ISA version of the module (e.g. 80), for cuFuncGetAttribute.
  int ptxVersion = 0;
  std::map<std::string, std::unique_ptr<struct CUfunc_st>, std::less<>>
      functions;
};

//===----------------------------------------------------------------------===//
// Launches, streams, events (Streams.cpp), capture and graphs (Graphs.cpp)
//===----------------------------------------------------------------------===//

/// A kernel launch as enqueued or captured: the parameters' bytes are
/// copied when the launch is made, as CUDA does.
struct KernelLaunch {
  std::shared_ptr<Module> module; // keeps the function alive
  const emu::Function *function = nullptr;
  emu::Dim3 grid, block;
  uint32_t dynamicShared = 0;
  std::vector<uint8_t> params;
};

struct Stream;
struct Event;

/// A stream-ordered operation.
struct Op {
  enum class Kind { Launch, Copy, Set, Record, Wait } kind;
  uint64_t seq = 0; ///< its place in its stream (1, 2, ...)
  /// Operations of other streams that must run first (events waited for,
  /// the legacy stream's implicit synchronization).
  std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> after;
  std::shared_ptr<const KernelLaunch> launch;
  // Copy: `bytes` from `src` (or from `snapshot`, taken when enqueued) to
  // `dst`. Set: `count` elements of `elementSize` bytes of `value`.
  void *dst = nullptr;
  const void *src = nullptr;
  size_t bytes = 0;
  std::vector<uint8_t> snapshot;
  uint32_t value = 0;
  unsigned elementSize = 0;
  size_t count = 0;
  // Record: the event and the record it completes.
  std::shared_ptr<Event> event;
  uint64_t generation = 0;
};

/// Launches captured from a stream (cuStreamBeginCapture); a capture's
/// graph holds kernel nodes only.
struct Capture {
  uint64_t id;
  CUstreamCaptureMode mode;
  std::thread::id thread;
  CUgraph graph;
  /// Set when a call that the capture forbids was made.
  bool invalidated = false;
};

struct Stream {
  uint64_t id = 0; ///< 0: the legacy (NULL) stream
  unsigned flags = 0;
  int priority = 0;
  CUcontext context = nullptr;
  std::deque<Op> pending;
  uint64_t enqueued = 0, done = 0;
  /// Kernel launches executed on this stream.
  int64_t launches = 0;
  std::shared_ptr<Capture> capture;
  bool blocking() const { return id == 0 || !(flags & CU_STREAM_NON_BLOCKING); }
};

struct Event {
  unsigned flags = 0;
  std::shared_ptr<Stream> stream; ///< where it was last recorded
  uint64_t seq = 0;
  uint64_t generation = 0;
  bool recorded = false, completed = false;
  double milliseconds = 0; ///< host time when the record ran
};

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

struct Driver {
  std::recursive_mutex mutex;
  bool initialized = false;
  Settings settings;
  Memory memory;
  /// The primary context of device 0 (the only device) and its retains.
  CUcontext primary = nullptr;
  int primaryRetains = 0;
  /// CUDA_SUCCESS, or the sticky error of a failed launch: every later call
  /// that uses the context returns it, as on a device.
  CUresult contextError = CUDA_SUCCESS;

  std::shared_ptr<Stream> legacy;
  std::unordered_map<const void *, std::shared_ptr<Stream>> streams;
  std::unordered_map<std::thread::id, std::shared_ptr<Stream>> perThread;
  std::unordered_map<const void *, std::shared_ptr<Event>> events;
  std::unordered_map<const void *, std::shared_ptr<Module>> modules;
  std::unordered_map<const void *, const struct CUfunc_st *> functions;
  std::unordered_map<const void *, std::unique_ptr<struct CUgraph_st>> graphs;
  std::unordered_map<const void *, std::unique_ptr<struct CUgraphExec_st>>
      execs;
  std::vector<std::shared_ptr<Capture>> captures; ///< in progress
  uint64_t nextStreamId = 1, nextCaptureId = 1;

  /// Statistics for the report at exit and the introspection calls.
  int64_t launches = 0, launchesWithFindings = 0, findings = 0,
          failedLaunches = 0;
  int64_t moduleLoads = 0;
  std::map<std::string, int64_t> loadsByModule;
  std::map<std::string, int64_t> launchesByKernel;
  /// Per-kernel totals for KPOOL_EMU_PROFILE.
  struct KernelTotals {
    int64_t launches = 0;
    emu::Counters counters;
    double cpuSeconds = 0; // in the executor, summed over the launches
  };
  std::map<std::string, KernelTotals> profile;
};

/// The driver (never destroyed: launches may come during exit).
Driver &state();

/// An entry point's preamble: checks, in order, that the process is the one
/// that initialized the driver (a child forked after cuInit gets
/// CUDA_ERROR_NOT_INITIALIZED, as with a real driver), that cuInit ran,
/// that no launch failed (the sticky error), that a context is current and
/// that no stream capture forbids the call; then holds the driver's lock.
/// Each failure is printed with the call's name.
class Entry {
public:
  enum Needs : unsigned {
    None = 0,
    Init = 1,
    Context = 2 | Init,
    /// A call that a stream capture forbids (it synchronizes, allocates,
    /// frees, copies or loads a module): it fails with
    /// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.
    NotUnderCapture = 4 | Init,
    /// Checked against the sticky error of a failed launch.
    Healthy = 8 | Init,
  };
  Entry(const char *call, unsigned needs);
  Entry(const Entry &) = delete;
  Entry &operator=(const Entry &) = delete;

  bool failed() const { return result != CUDA_SUCCESS; }
  CUresult status() const { return result; }
  const char *call() const { return name; }
  /// Prints "<call>: <text>" and returns `code`.
  CUresult fail(CUresult code, const std::string &text) const;

private:
  const char *name;
  CUresult result = CUDA_SUCCESS;
  std::unique_lock<std::recursive_mutex> lock;
};

/// The stream behind a handle (0 and CU_STREAM_LEGACY: the legacy stream;
/// CU_STREAM_PER_THREAD: the calling thread's), or null.
std::shared_ptr<Stream> streamOf(CUstream handle);

/// The stream of `handle` for `entry`, or null after printing why (not a
/// stream; the legacy and per-thread streams need a current context).
std::shared_ptr<Stream> streamFor(const Entry &entry, CUstream handle,
                                  CUresult *result);

/// Whether the calling thread has a current context.
bool hasCurrentContext();

/// Runs the operations of `stream` up to `seq` (and those of other streams
/// they wait for). Returns the sticky error if a launch failed.
CUresult flush(Stream &stream, uint64_t seq);
/// Runs every pending operation of every stream.
CUresult flushAll();

/// Appends `op` to `stream` (with the legacy stream's implicit
/// synchronization) and returns its sequence number.
uint64_t enqueue(const std::shared_ptr<Stream> &stream, Op op);

/// Fails `entry` (and invalidates the capture) when `stream` is capturing:
/// for the stream-ordered calls a capture does not record.
CUresult notCapturing(const Entry &entry, const Stream &stream);

/// A short description of a stream for messages: "stream 3", "the legacy
/// stream".
std::string describe(const Stream &stream);

/// Executes one kernel launch now (the caller holds the lock); records
/// statistics, prints findings, and sets the sticky error on failure.
void execute(Stream &stream, const KernelLaunch &launch);

/// Appends the per-kernel totals to the profile (KPOOL_EMU_PROFILE).
void writeProfileTotals();

/// At exit (registered by cuInit): runs pending work, writes the profile's
/// totals, and exits with kFindingsExitStatus after sanitizer findings.
void atExit();

} // namespace kpool::emu::driver

//===----------------------------------------------------------------------===//
// The objects behind the opaque handles of cuda.h
//===----------------------------------------------------------------------===//

struct CUctx_st {
  CUdevice device = 0;
  unsigned flags = 0;
};

struct CUfunc_st {
  kpool::emu::driver::Module *module = nullptr;
  const kpool::emu::Function *function = nullptr;
  /// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (48 KiB less the
  /// static shared memory until raised).
  int maxDynamicShared = 0;
  int preferredCarveout = -1;
};

struct CUgraphNode_st {
  CUgraph graph = nullptr;
  std::shared_ptr<const kpool::emu::driver::KernelLaunch> launch;
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  std::vector<std::shared_ptr<const kpool::emu::driver::KernelLaunch>> launches;
};

#endif // KPOOL_TEST_LIB_CUDAEMU_DRIVER_H
