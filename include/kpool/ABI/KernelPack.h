/*===- kpool/ABI/KernelPack.h - the entry point of a kernel pack --*- C -*-===*\
|*                                                                            *|
|* A kernel pack is a shared library made by `kpool-aot --pack` that holds   *|
|* the kernels of one or more configurations (element type, head_dim, kpool, *|
|* pool-cache format, target) and needs no MLIR or LLVM: CPU kernels need    *|
|* libc, CUDA kernels libkpool_cuda_runtime (their GPU code is a             *|
|* kpool/ABI/CudaImage.h image: PTX, and a cubin where ptxas was found).     *|
|* It exports one symbol, KPOOL_KERNEL_PACK_ENTRY, a function returning its  *|
|* table; the runtime (kpoolLoadKernelPack, kpool.load_kernel_pack) checks   *|
|* the table's versions and registers each configuration.                    *|
|*                                                                            *|
|* Versioning: the entry point's name carries the table layout's version     *|
|* (a new layout gets a new name, so an old runtime finds nothing rather     *|
|* than misreading); `kernelAbiHash` identifies the kernel ABI (every        *|
|* kernel's operands: kpool/Runtime/KernelPacks.h computes it), and the      *|
|* runtime refuses a pack made for another.                                  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_ABI_KERNELPACK_H
#define KPOOL_ABI_KERNELPACK_H

#include <stdint.h>

#define KPOOL_KERNEL_PACK_ENTRY "kpool_kernel_pack_v1"
#define KPOOL_KERNEL_PACK_VERSION 1

/* One kernel: its op name ("compress", "step_cache", ...) and its C
   interface entry point (_mlir_ciface_..., taking memref descriptors). */
typedef struct KPoolPackEntry {
  const char *kernel;
  void *function;
} KPoolPackEntry;

/* One configuration (the fields of kpool::KernelConfig). */
typedef struct KPoolPackConfig {
  int32_t elementType; /* KPoolElementType */
  int32_t target;      /* 0 CPU, 1 CUDA */
  int64_t headDim;
  int64_t kpool;
  int64_t vectorSize; /* CPU */
  int32_t openmp;     /* CPU */
  int32_t poolOffsetsOnly;
  int32_t cacheEntry;  /* 0 none, 1 element, 2 fp8 */
  int32_t cacheRotate; /* 0 none, 1 hadamard */
  int32_t cacheScale;  /* 0 absmax, 1 pow2 */
  int32_t numEntries;
  const KPoolPackEntry *entries;
} KPoolPackConfig;

typedef struct KPoolKernelPack {
  uint32_t version; /* KPOOL_KERNEL_PACK_VERSION */
  uint32_t numConfigs;
  uint64_t kernelAbiHash;
  const char *kpoolVersion; /* of the kpool-aot that made it */
  const char *description;  /* e.g. "cuda sm_90, ptx+cubin: bf16 d128 k4 ..." */
  const KPoolPackConfig *configs;
} KPoolKernelPack;

typedef const KPoolKernelPack *(*KPoolKernelPackEntryFn)(void);

#endif /* KPOOL_ABI_KERNELPACK_H */
