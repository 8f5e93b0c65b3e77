//===- View.h - views of caller memory and their element types --*- C++ -*-===//

#ifndef KPOOL_RUNTIME_VIEW_H
#define KPOOL_RUNTIME_VIEW_H

#include "kpool-c/View.h"

#include <cstdint>
#include <vector>

namespace kpool {

using View = KPoolView;
using ElementType = KPoolElementType;

/// Returns "bf16", "f16" or "f32" ("unknown" for another value).
inline const char *elementTypeName(ElementType type) {
  switch (type) {
  case KPOOL_BF16:
    return "bf16";
  case KPOOL_F16:
    return "f16";
  case KPOOL_F32:
    return "f32";
  }
  return "unknown";
}

/// Bytes per element: 2, 2 or 4.
inline int64_t elementTypeSize(ElementType type) {
  return type == KPOOL_F32 ? 4 : 2;
}

/// A dense row-major view of `data` with the given sizes.
View denseView(void *data, std::vector<int64_t> sizes);

} // namespace kpool

#endif // KPOOL_RUNTIME_VIEW_H
