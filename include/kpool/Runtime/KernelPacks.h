//===- KernelPacks.h - kernels from a shared library ------------*- C++ -*-===//
//
// Loading kernel packs (kpool/ABI/KernelPack.h): shared libraries made by
// `kpool-aot --pack` holding the kernels of several configurations, which
// need no MLIR at run time. Loading one registers its configurations with
// KernelSet (as kpool-aot's generated registration functions do), so
// KernelSet::get returns them. The runtime also loads the packs installed
// next to it by itself (kpool/Runtime/KernelObject.h). Part of
// KPoolRuntimeCore.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELPACKS_H
#define KPOOL_RUNTIME_KERNELPACKS_H

#include "kpool/ABI/KernelABI.h"
#include "kpool/Runtime/Status.h"

#include <cstdint>
#include <string>

namespace kpool {

namespace detail {
constexpr uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; ++s)
    h = (h ^ uint64_t(uint8_t(*s))) * 0x100000001b3ull;
  return (h ^ 0xffu) * 0x100000001b3ull; // a separator
}
constexpr uint64_t fnv(uint64_t h, int64_t v) {
  for (int i = 0; i < 8; ++i)
    h = (h ^ uint64_t((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}
} // namespace detail

/// A hash of the kernel ABI (every kernel's name and operands: name, role,
/// rank, kind, shape, in order): a kernel pack records the one it was built
/// for, and a runtime with another refuses it.
constexpr uint64_t kernelAbiHash() {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const abi::Kernel &k : abi::kernels) {
    h = detail::fnv(h, k.name);
    for (int i = 0; i < k.numOperands; ++i) {
      const abi::Operand &o = k.operands[i];
      h = detail::fnv(h, o.name);
      h = detail::fnv(h, int64_t(o.role));
      h = detail::fnv(h, int64_t(o.rank));
      h = detail::fnv(h, int64_t(o.kind));
      h = detail::fnv(h, o.shape);
    }
  }
  return h;
}

/// Loads the kernel pack at `path` (once per path; loading it again does
/// nothing) and registers its configurations; `configurations` receives
/// their number. Errors name the file and what is wrong (not a pack,
/// another version or kernel ABI, an unknown kernel).
Status loadKernelPack(const std::string &path,
                      int64_t *configurations = nullptr);

} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELPACKS_H
