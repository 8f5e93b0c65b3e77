//===- ExecutorMgpu.h - kpool-aot host code over the executor --*- C++ -*-===//
//
// Test support for the executor's tests of kpool's real kernels: the four
// mgpu* entry points that kpool-aot's CUDA host code calls with --format=isa
// (mgpuModuleLoadJIT with the PTX text, mgpuModuleGetFunction,
// mgpuLaunchKernel, mgpuModuleUnload), implemented directly over the PTX
// executor, with host memory as device memory. The emulated driver
// (libcuda.so.1 stand-in) runs the same kernels through kpool's real CUDA
// layer; this keeps the executor's own tests independent of it.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_EMULATOR_EXECUTORMGPU_H
#define KPOOL_TEST_EMULATOR_EXECUTORMGPU_H

#include "Executor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kpool::emu::test {

/// "Device" memory: an aligned host allocation the launches may touch.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void *data() const { return ptr; }
  size_t bytes() const { return size; }

private:
  void *ptr;
  size_t size;
};

/// What the launches since the last reset did.
struct LaunchLog {
  uint64_t launches = 0, failed = 0;
  std::vector<std::string> findings;
  Counters counters;
  std::map<std::string, Counters> perKernel;
};

/// The options every launch runs with (default: all checks on).
Options &launchOptions();
LaunchLog &launchLog();
void resetLaunchLog();

} // namespace kpool::emu::test

#endif // KPOOL_TEST_EMULATOR_EXECUTORMGPU_H
