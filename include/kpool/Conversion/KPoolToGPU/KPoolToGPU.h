//===- KPoolToGPU.h - map kpool's kernel loops to gpu.launch ----*- C++ -*-===//
//
// The mapping behind `kpool-map-to-gpu`, for a graph compiler that drives it
// from its own pass. Like upstream's gpu-map-parallel-loops and
// convert-parallel-loops-to-gpu, it is a plan and its application: the plan
// says what each `scf.parallel` that convert-kpool-to-linalg tagged
// `kpool.kernel` maps to (rows over row groups of lanes, channel loops over
// the lanes, their vector widths, the block and grid shape), and applying it
// replaces the loop by one `gpu.launch` with the same body. Nothing else in
// the function is touched. The options are the pass's
// (KPoolMapToGPUPassOptions, generated from include/kpool/Conversion/
// Passes.td), checked by one validator.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_CONVERSION_KPOOLTOGPU_KPOOLTOGPU_H
#define KPOOL_CONVERSION_KPOOLTOGPU_KPOOLTOGPU_H

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>

namespace mlir::kpool {

#define GEN_PASS_DECL_KPOOLMAPTOGPUPASS
#define GEN_PASS_DECL_KPOOLDEVICEBUFFERSPASS
#define GEN_PASS_DECL_KPOOLASYNCDEVICEMEMORYPASS
#include "kpool/Conversion/Passes.h.inc"

/// Checks the options' values: `vector-bytes` a power of two in [1, 16],
/// `block-size` in [1, 1024], `grid-blocks` in [1, 2^31 - 1]. On failure
/// returns failure and sets `error` to a message naming the option
/// ("block-size must be in [1, 1024], got 2048"), which each caller
/// prefixes with its own name.
LogicalResult verifyMapToGPUOptions(const KPoolMapToGPUPassOptions &options,
                                    std::string &error);

/// The outermost `scf.parallel` ops of `func` tagged `kpool.kernel` (not
/// nested in another parallel loop or a launch): what the mapping maps.
SmallVector<scf::ParallelOp> getKernelLoops(func::FuncOp func);

/// What one kernel loop maps to.
struct KernelLoopPlan {
  /// The loop; applying the plan replaces it.
  scf::ParallelOp loop;
  /// The name of the outlined kernel (`<function>_<kpool.kernel>`, spelled
  /// as a PTX identifier), or empty.
  std::string kernelName;
  /// The channel loops of its rows (pooled-row generics, fills and copies
  /// of one row), each with the channels a lane handles per step: a power
  /// of two when every view is statically unit-stride, else 1.
  SmallVector<std::pair<linalg::LinalgOp, int64_t>> channelOps;
  /// The pool-cache entries, each computed by the row group that wrote its
  /// pooled row.
  SmallVector<CacheEntryOp> cacheEntries;
  /// Lanes per row (`threadIdx.x`): enough for one access per lane over the
  /// widest row, at most `max-threads-per-row`; with cache entries a power
  /// of two within a warp.
  int64_t lanes = 1;
  /// Rows per block (`threadIdx.y`).
  int64_t rowsPerBlock = 1;
  /// The buffers the loop body writes (what they are views of); loads of
  /// other buffers that do not depend on the row may be hoisted. With
  /// `writesUnknown`, nothing is hoisted.
  SmallVector<Value> writtenRoots;
  bool writesUnknown = false;
};

/// Decides how `loop`, a kernel loop, maps to a launch. Emits an error and
/// fails when it is not the form convert-kpool-to-linalg emits.
FailureOr<KernelLoopPlan>
planKernelLoop(scf::ParallelOp loop, const KPoolMapToGPUPassOptions &options);

/// Replaces the plan's loop by one `gpu.launch` with the same body: a row
/// group of lanes per iteration, the channel loops spread over the lanes
/// (vector accesses where the views allow, checked for alignment), stores
/// outside them on one lane, pool-cache entries exchanged between the
/// group's lanes by warp shuffles (NVVM). Emits an error and fails if it
/// cannot.
LogicalResult applyKernelLoopPlan(const KernelLoopPlan &plan,
                                  const KPoolMapToGPUPassOptions &options);

/// planKernelLoop, then applyKernelLoopPlan, after checking `options`.
LogicalResult mapKernelLoopToGPU(scf::ParallelOp loop,
                                 const KPoolMapToGPUPassOptions &options);

/// Rewrites the pooling arithmetic in `region` (the body of a pooled-row
/// generic) to the GPU's fast form (the `fast-math` option): `exp(x)` as
/// `exp2(x * log2 e)` and f32 divisions with `afn`.
void applyGPUFastMath(Region &region);

/// The guard of kpool-lower-to-nvvm (`check-host-access`), whose kernels run
/// on caller-provided device buffers: fails, with an error at each
/// offending op, when `func` allocates, copies or accesses a buffer outside
/// parallel loops and launches. The errors name what maps those ops too.
/// Accesses to the buffers `hostBuffers` (allocations kept in host memory,
/// see moveBuffersToDevice) and to their views are allowed.
LogicalResult verifyNoHostAccess(func::FuncOp func,
                                 ArrayRef<Value> hostBuffers = {});

/// kpool-device-buffers: in a function whose ops run as GPU kernels (it has
/// kpool ops or kernels, GPU launches or GPU memory operations), allocates
/// its buffers in device memory: memref.alloc and dealloc outside the
/// kernels become gpu.alloc and gpu.dealloc, memref.copy a gpu.memcpy
/// between row-major buffers and else a parallel loop (for the caller's
/// mapping to make a kernel). An allocation only the host reads and writes
/// (e.g. the deallocation pipeline's lists of pointers to free) stays in
/// host memory. Then checks that nothing else on the host touches a buffer
/// (verifyNoHostAccess). Run it before the caller's parallel loops are
/// mapped. Other functions are left as they are.
/// `symbols` finds the callees (other functions of the module: run it from
/// a module pass).
LogicalResult moveBuffersToDevice(func::FuncOp func,
                                  SymbolTableCollection &symbols);

} // namespace mlir::kpool

#endif // KPOOL_CONVERSION_KPOOLTOGPU_KPOOLTOGPU_H
