//===- Fatbin.h - the PTX of a CUDA module image ----------------*- C++ -*-===//
//
// What cuModuleLoadData is given -- PTX text, a cubin (ELF) or a fatbin --
// reduced to the PTX the emulated driver can execute.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_FATBIN_H
#define KPOOL_TEST_LIB_CUDAEMU_FATBIN_H

#include <cuda.h>

#include <string>

namespace kpool::emu::driver {

/// Sets `ptx` to the PTX of `image` for an sm_90 device:
///  - NUL-terminated PTX text: itself;
///  - a fatbin (magic 0xBA55ED50, or the 0x466243B1 wrapper that points to
///    one): its PTX entry for the highest architecture up to sm_90,
///    decompressed (zstd, which CUDA 12.8+ `fatbinary` uses by default,
///    through the system's libzstd.so.1; or the LZ4 block format of
///    `--compress-mode=speed`);
///  - a cubin: none (CUDA_ERROR_NO_BINARY_FOR_GPU): it holds SASS only.
/// On failure returns the CUresult a driver would and sets `error`.
CUresult ptxOfImage(const void *image, std::string &ptx, std::string &error);

} // namespace kpool::emu::driver

#endif // KPOOL_TEST_LIB_CUDAEMU_FATBIN_H
