//===- MapToGPU.h - map kpool's kernel loops to gpu.launch ------*- C++ -*-===//
//
// The mapping behind `kpool-map-to-gpu`, for a graph compiler that drives it
// from its own pass: each `scf.parallel` that convert-kpool-to-linalg tagged
// `kpool.kernel` becomes one `gpu.launch` (a row group of lanes per
// iteration, the channel loops of each row spread over the lanes, vector
// accesses where the views allow). Nothing else in the function is touched.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_TRANSFORMS_MAPTOGPU_H
#define KPOOL_DIALECT_KPOOL_TRANSFORMS_MAPTOGPU_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>

namespace mlir::kpool {

/// How kernel loops are mapped (the options of kpool-map-to-gpu, which
/// documents them).
struct KernelLoopMappingOptions {
  /// Widest access per thread and channel step, in bytes: a power of two,
  /// at most 16.
  int64_t vectorBytes = 16;
  /// Threads per block, in [1, 1024].
  int64_t blockSize = 256;
  /// Most threads that share one row's channels.
  int64_t maxThreadsPerRow = 32;
  /// Most blocks per launch: row groups past them are done by a grid-stride
  /// loop, so that a thread keeps what does not depend on the row (`ape`)
  /// in registers across rows. At least 1.
  int64_t gridBlocks = 1024;
  /// The GPU's fast arithmetic in the pooling function: `exp(x)` as
  /// `exp2(x * log2(e))` (`ex2.approx.f32` on NVVM) and the final division
  /// with `afn` (`div.approx.f32`), for pooled rows stored as bf16 or f16
  /// (f32 rows keep the accurate arithmetic). Every kernel gets the same
  /// rewrite, so pools stay bit-identical across ops on one backend. See
  /// docs/gpu.md.
  bool fastMath = true;
  /// FP8 codes of pool-cache entries by the hardware conversion
  /// (`cvt.rn.satfinite.e4m3x2.f32`, sm_89 and later) instead of the exact
  /// software conversion the CPU uses; both round to nearest even on the
  /// same clamped values.
  bool hardwareFP8 = true;
};

/// Rewrites the pooling arithmetic in `region` (the body of a pooled-row
/// generic) to the fast GPU form of `KernelLoopMappingOptions::fastMath`.
void applyGPUFastMath(Region &region);

/// Checks `options`; on failure emits an error at `loc` naming the option.
LogicalResult verifyKernelLoopMappingOptions(
    Location loc, const KernelLoopMappingOptions &options);

/// The outermost `scf.parallel` ops of `func` tagged `kpool.kernel` (not
/// nested in another parallel loop or a launch): what the mapping maps.
SmallVector<scf::ParallelOp> getKernelLoops(func::FuncOp func);

/// Replaces `loop`, a kernel loop, by one `gpu.launch` with the same body.
/// Emits an error and fails if it cannot.
LogicalResult mapKernelLoopToGPU(scf::ParallelOp loop,
                                 const KernelLoopMappingOptions &options);

/// The guard of kpool-lower-to-nvvm (`check-host-access`), whose kernels run
/// on caller-provided device buffers: fails, with an error at each
/// offending op, when `func` allocates, copies or accesses a buffer outside
/// parallel loops and launches.
LogicalResult verifyNoHostAccess(func::FuncOp func);

} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_TRANSFORMS_MAPTOGPU_H
