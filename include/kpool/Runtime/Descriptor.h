//===- Descriptor.h - memref descriptors for kpool views --------*- C++ -*-===//

#ifndef KPOOL_RUNTIME_DESCRIPTOR_H
#define KPOOL_RUNTIME_DESCRIPTOR_H

#include "kpool-c/View.h"

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

using Desc1 = Descriptor<1>;
using Desc2 = Descriptor<2>;
using Desc4 = Descriptor<4>;

} // namespace kpool

#endif // KPOOL_RUNTIME_DESCRIPTOR_H
