/*===- kpool/ABI/CudaImage.h - GPU code with a PTX fallback -------*- C -*-===*\
|*                                                                            *|
|* The GPU image kpool's compiler embeds in CUDA host code (kpool-aot, the    *|
|* JIT, kernel packs) and libkpool_cuda_runtime loads: the kernels as a      *|
|* cubin for one architecture (when ptxas was found at compile time) and as  *|
|* PTX. The loader tries the cubin first and falls back to the PTX, which    *|
|* the driver compiles for the device it has, when the driver rejects the    *|
|* cubin (another architecture, or a driver that runs PTX only).             *|
|*                                                                            *|
|*   header   "KPOOLCUI", version (1), number of entries      16 bytes        *|
|*   entries  kind, architecture (e.g. 90), offset, size     24 bytes each   *|
|*   payload  each entry's bytes at its offset (from the image's start),     *|
|*            16-byte aligned; PTX is NUL-terminated, the NUL counted.       *|
|*                                                                            *|
|* Plain C, no dependency: the compiler writes it, the CUDA layer reads it.   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_ABI_CUDAIMAGE_H
#define KPOOL_ABI_CUDAIMAGE_H

#include <stdint.h>

#define KPOOL_CUDA_IMAGE_MAGIC "KPOOLCUI"
#define KPOOL_CUDA_IMAGE_VERSION 1

typedef enum KPoolCudaImageKind {
  KPOOL_CUDA_IMAGE_CUBIN = 1, /* an ELF cubin for `arch` */
  KPOOL_CUDA_IMAGE_PTX = 2,   /* PTX text written for `arch` */
} KPoolCudaImageKind;

typedef struct KPoolCudaImageHeader {
  char magic[8];
  uint32_t version;
  uint32_t count;
} KPoolCudaImageHeader;

typedef struct KPoolCudaImageEntry {
  uint32_t kind;
  uint32_t arch;
  uint64_t offset;
  uint64_t size;
} KPoolCudaImageEntry;

#endif /* KPOOL_ABI_CUDAIMAGE_H */
