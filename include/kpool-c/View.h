/*===- kpool-c/View.h - strided views of caller memory -------------*- C
-*-===*\
|*                                                                            *|
|* The one description of an operand shared by the C++ runtime, the C API,   *|
|* the Python package and the ahead-of-time kernels.                          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_VIEW_H
#define KPOOL_C_VIEW_H

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
/// ctypes) may pass any int; the C API rejects values that are not one of
/// these. In C++ the enum has a fixed underlying type so that such a value
/// is a valid enum value, not undefined behaviour (UBSan's -fsanitize=enum
/// caught kpoolKernelSetCreate loading 7); the ABI is the same 32-bit int.
#ifdef __cplusplus
typedef enum KPoolElementType : int {
#else
typedef enum KPoolElementType {
#endif
  KPOOL_BF16 = 0,
  KPOOL_F16 = 1,
  KPOOL_F32 = 2,
} KPoolElementType;

#ifdef __cplusplus
}
#endif

#endif /* KPOOL_C_VIEW_H */
