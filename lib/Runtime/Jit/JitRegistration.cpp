//===- JitRegistration.cpp - the JIT as the runtime's compiler ------------===//
//
// For programs that link the JIT (KPoolRuntimeJit) rather than let the
// runtime load libKPoolJit.so: registers compileKernelObject with the core.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/Jit.h"

#include <mutex>

using namespace kpool;

Status kpool::compileJitKernels(const KernelConfig &config,
                                KernelBackend &backend) {
  KernelObject object;
  CompileOptions options;
  Status status = compileKernelObject(config, options, object);
  if (!status.ok())
    return status;
  return loadKernelObject(config, object, backend);
}

void kpool::registerJitCompiler() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    registerObjectCompiler(Target::CPU, compileKernelObject);
    registerObjectCompiler(Target::CUDA, compileKernelObject);
  });
}
