/*===- Introspection.h - questions only the emulated CUDA driver answers -===*\
 *
 * The emulated CUDA driver (<build>/lib/cuda-emu/libcuda.so.1) exports these
 * calls besides the CUDA driver API, so that tests can check what a real
 * driver does not tell: which stream ran a launch, how often a module was
 * loaded. A real libcuda.so.1 has none of them: look them up with dlsym on
 * the loaded libcuda.so.1 (test/lib/GPU/GpuSupport.cpp does), and treat
 * their absence as "not the emulated driver".
 *
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_TEST_LIB_CUDAEMU_INTROSPECTION_H
#define KPOOL_TEST_LIB_CUDAEMU_INTROSPECTION_H

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Kernel launches executed on `stream` so far: eager ones and the kernel
 *  nodes of graphs launched there (NULL: the legacy stream). */
CUresult kpoolEmuStreamLaunches(CUstream stream, int64_t *launches);

/** The stream's number in the process: 0 for the legacy stream, then 1, 2,
 *  ... in creation order. */
CUresult kpoolEmuStreamId(CUstream stream, int64_t *id);

/** Successful module loads so far, the distinct modules (by name, docs/gpu.md)
 *  they loaded, and the most loads of any one module. Each may be NULL. */
CUresult kpoolEmuModuleLoads(int64_t *loads, int64_t *modules,
                             int64_t *mostLoadsOfOne);

/** Kernel launches executed so far, those with sanitizer findings, and those
 *  that failed. Each may be NULL. */
CUresult kpoolEmuLaunches(int64_t *launches, int64_t *withFindings,
                          int64_t *failed);

/** Kernel launches executed so far of the kernels whose name contains
 *  `part` (the empty string: every kernel). */
CUresult kpoolEmuKernelLaunches(const char *part, int64_t *launches);

#ifdef __cplusplus
}
#endif

#endif /* KPOOL_TEST_LIB_CUDAEMU_INTROSPECTION_H */
