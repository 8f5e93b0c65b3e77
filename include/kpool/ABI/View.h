/*===- kpool/ABI/View.h - strided views of caller memory ----------*- C -*-===*\
|*                                                                            *|
|* The one description of an operand shared by the compiler's kernel module,  *|
|* the C++ runtime, the C API, the Python package and the ahead-of-time       *|
|* kernels: a strided view and the element types. C-compatible, with a C++    *|
|* section (namespace kpool). Part of the ABI leaf: includes nothing else of  *|
|* kpool, no MLIR and no CUDA.                                                *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_ABI_VIEW_H
#define KPOOL_ABI_VIEW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Most dimensions an operand has (the tail ring has 4).
#define KPOOL_MAX_RANK 4

/// A strided view of caller-owned memory: element (i0, i1, ...) is at
/// `data + sum(i_d * strides[d])` elements. Sizes and strides count
/// elements, not bytes. `data` is host memory for the CPU target and device
/// memory for the CUDA target.
typedef struct KPoolView {
  void *data;
  int64_t rank;
  int64_t sizes[KPOOL_MAX_RANK];
  int64_t strides[KPOOL_MAX_RANK];
} KPoolView;

/// Element types of keys, gates, pooled keys and the ring. C callers (and
/// ctypes) may pass any int; the runtime rejects values that are not one of
/// these. In C++ the enum has a fixed underlying type so that such a value
/// is a valid enum value, not undefined behaviour; the ABI is the same
/// 32-bit int.
#ifdef __cplusplus
typedef enum KPoolElementType : int {
#else
typedef enum KPoolElementType {
#endif
  KPOOL_BF16 = 0,
  KPOOL_F16 = 1,
  KPOOL_F32 = 2,
} KPoolElementType;

/// How many element types there are (they are 0 .. KPOOL_NUM_ELEMENT_TYPES-1).
#define KPOOL_NUM_ELEMENT_TYPES 3

#ifdef __cplusplus
}

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace kpool {

using View = KPoolView;
using ElementType = KPoolElementType;

/// Whether `type` is one of the element types (a C caller may pass any int).
constexpr bool isElementType(ElementType type) {
  return int(type) >= 0 && int(type) < KPOOL_NUM_ELEMENT_TYPES;
}

/// Returns "bf16", "f16" or "f32" ("unknown" for a value that is not an
/// element type).
constexpr const char *elementTypeName(ElementType type) {
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
constexpr int64_t elementTypeSize(ElementType type) {
  return type == KPOOL_F32 ? 4 : 2;
}

/// A dense row-major view of `data` with the `rank` extents of `sizes`
/// (rank at most KPOOL_MAX_RANK).
inline View denseView(void *data, const int64_t *sizes, size_t rank) {
  View view{};
  view.data = data;
  view.rank = static_cast<int64_t>(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    view.sizes[i] = sizes[i];
    view.strides[i] = stride;
    stride *= sizes[i];
  }
  return view;
}
inline View denseView(void *data, std::initializer_list<int64_t> sizes) {
  return denseView(data, sizes.begin(), sizes.size());
}
inline View denseView(void *data, const std::vector<int64_t> &sizes) {
  return denseView(data, sizes.data(), sizes.size());
}

} // namespace kpool

#endif // __cplusplus

#endif /* KPOOL_ABI_VIEW_H */
