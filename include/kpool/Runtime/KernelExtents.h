//===- KernelExtents.h - the kernels' extents, related ----------*- C++ -*-===//
//
// KernelExtents.def as a table (for kpool-aot's generated extent checks and
// the status word's operand ids), checked against KernelABI.def at compile
// time. No MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELEXTENTS_H
#define KPOOL_RUNTIME_KERNELEXTENTS_H

#include "kpool/Runtime/KernelABI.h"

namespace kpool::abi {

/// One view operand's symbolic shape (KernelExtents.def).
struct Extent {
  const char *kernel;
  const char *operand;
  const char *shape;
};

inline constexpr Extent extents[] = {
#define KPOOL_EXTENT(kernel, operand, shape) Extent{#kernel, #operand, shape},
#include "kpool/Runtime/KernelExtents.def"
};

namespace detail {
constexpr bool same(const char *a, const char *b) {
  for (; *a && *a == *b; ++a, ++b)
    ;
  return *a == *b;
}
/// The symbolic shape of `operand` of `kernel`, or null.
constexpr const char *extentOf(const char *kernel, const char *operand) {
  for (const Extent &e : extents)
    if (same(e.kernel, kernel) && same(e.operand, operand))
      return e.shape;
  return nullptr;
}
/// Whether symbolic `sym` refines ABI shape `abi`: the same dimensions, the
/// fixed ones (D, K, numbers) equal, only '?' replaced.
constexpr bool refines(const char *sym, const char *abi) {
  while (*sym || *abi) {
    // One dimension of each.
    const char *s = sym, *a = abi;
    while (*sym && *sym != 'x')
      ++sym;
    while (*abi && *abi != 'x')
      ++abi;
    bool anyAbi = abi - a == 1 && *a == '?';
    if (!anyAbi) {
      if (sym - s != abi - a)
        return false;
      for (const char *p = s, *q = a; p != sym; ++p, ++q)
        if (*p != *q)
          return false;
    }
    if ((*sym == 'x') != (*abi == 'x'))
      return false;
    if (*sym)
      ++sym;
    if (*abi)
      ++abi;
  }
  return true;
}
constexpr bool extentsMatchAbi() {
  for (const Kernel &k : kernels)
    for (int i = 0; i < k.numOperands; ++i) {
      const Operand &o = k.operands[i];
      if (o.role == Role::Scalar || o.role == Role::Context)
        continue;
      const char *shape = extentOf(k.name, o.name);
      if (!shape || !refines(shape, o.shape))
        return false;
    }
  return true;
}
static_assert(extentsMatchAbi(),
              "KernelExtents.def: a view operand of KernelABI.def is missing "
              "or has another rank or fixed extent");
} // namespace detail

/// The operand id the status word's extent finding carries: the position
/// of `name` among the distinct operand names of KernelABI.def, in order of
/// first appearance (-1 for none).
constexpr int operandId(const char *name) {
  int id = 0;
  for (int k = 0; k < numKernels; ++k)
    for (int i = 0; i < kernels[k].numOperands; ++i) {
      const char *n = kernels[k].operands[i].name;
      bool first = true;
      for (int k2 = 0; k2 <= k && first; ++k2)
        for (int i2 = 0; i2 < (k2 == k ? i : kernels[k2].numOperands); ++i2)
          if (detail::same(kernels[k2].operands[i2].name, n)) {
            first = false;
            break;
          }
      if (!first)
        continue;
      if (detail::same(n, name))
        return id;
      ++id;
    }
  return -1;
}

/// The operand name of id `id` (operandId's inverse), or null.
constexpr const char *operandName(int id) {
  for (int k = 0; k < numKernels; ++k)
    for (int i = 0; i < kernels[k].numOperands; ++i)
      if (operandId(kernels[k].operands[i].name) == id)
        return kernels[k].operands[i].name;
  return nullptr;
}

} // namespace kpool::abi

#endif // KPOOL_RUNTIME_KERNELEXTENTS_H
