//===- kpool/ABI/Descriptor.h - memref descriptors of views -----*- C++ -*-===//
//
// The strided memref descriptor that the kernels' C interface takes by
// pointer (`_mlir_ciface_*`, see kpool/ABI/KernelABI.def), made from a
// KPoolView. Part of the ABI leaf: no MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_ABI_DESCRIPTOR_H
#define KPOOL_ABI_DESCRIPTOR_H

#include "kpool/ABI/View.h"

#include <cstdint>

namespace kpool {

/// The strided memref descriptor that MLIR's C interface passes by pointer.
template <int Rank> struct Descriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];

  static Descriptor from(const KPoolView &view) {
    Descriptor d;
    d.allocated = d.aligned = view.data;
    d.offset = 0;
    for (int i = 0; i < Rank; ++i) {
      d.sizes[i] = view.sizes[i];
      d.strides[i] = view.strides[i];
    }
    return d;
  }
};

} // namespace kpool

#endif // KPOOL_ABI_DESCRIPTOR_H
