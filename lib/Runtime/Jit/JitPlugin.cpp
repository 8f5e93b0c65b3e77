//===- JitPlugin.cpp - libKPoolJit.so, the JIT the runtime loads ----------===//
//
// The runtime library (libKPoolRuntime.so) has no MLIR or LLVM; when a
// configuration is neither registered nor in the disk cache it opens this
// library from next to itself and takes its compiler
// (kpool/Runtime/KernelObject.h). Only this entry point is exported.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/Jit.h"
#include "kpool/Version.h"

extern "C" __attribute__((visibility("default"))) const kpool::JitPlugin *
kpoolJitPlugin() {
  static const kpool::JitPlugin plugin{kpool::kJitPluginAbiVersion,
                                       KPOOL_VERSION_STRING,
                                       &kpool::compileKernelObject};
  return &plugin;
}
