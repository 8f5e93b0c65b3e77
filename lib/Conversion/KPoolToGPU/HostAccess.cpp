//===- HostAccess.cpp - no host access next to kpool's GPU kernels --------===//
//
// kpool-lower-to-nvvm's guard (`check-host-access`): its kernels run on the
// caller's device buffers, so a function with kpool kernels may keep only
// descriptor reads (`memref.dim`, strides) on the host. Anything else that
// touches memory outside the parallel loops and launches would run on the
// host against device memory.
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToGPU/KPoolToGPU.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::kpool;

/// How to run the function's other ops on the GPU too: the pipeline's
/// option, or the manual recipe (docs/embedding.md, "Composing with a
/// graph on the GPU").
static constexpr const char *kOtherOps =
    "; to lower the function's other ops to GPU kernels too, use "
    "kpool-lower-to-nvvm{map-other-ops=true}, or map them first "
    "(bufferize, then convert-linalg-to-parallel-loops, "
    "kpool-device-buffers, scf-parallel-loop-tiling, gpu-map-parallel-loops, "
    "convert-parallel-loops-to-gpu) and then run "
    "kpool-lower-to-nvvm{bufferize=false} (docs/embedding.md)";

/// The buffer `v` is a view of (through casts, subviews and other views),
/// or `v` itself.
static Value viewSource(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

LogicalResult kpool::verifyNoHostAccess(func::FuncOp func,
                                        ArrayRef<Value> hostBuffers) {
  bool hostAccess = false;
  llvm::SmallPtrSet<Operation *, 4> hostAllocs;
  for (Value buffer : hostBuffers)
    hostAllocs.insert(buffer.getDefiningOp());
  auto onHost = [&](Value memref) {
    return llvm::is_contained(hostBuffers, viewSource(memref));
  };
  func.walk([&](Operation *op) {
    if (op->getParentOfType<scf::ParallelOp>() ||
        op->getParentOfType<gpu::LaunchOp>() || hostAllocs.contains(op))
      return;
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && onHost(load.getMemref()))
      return;
    if (auto store = dyn_cast<memref::StoreOp>(op);
        store && onHost(store.getMemref()))
      return;
    if (isa<memref::AllocOp, memref::AllocaOp, memref::ReallocOp,
            memref::CopyOp, bufferization::CloneOp>(op)) {
      op->emitOpError()
          << "would place a buffer in host memory next to GPU kernels; "
             "kpool-map-to-gpu expects every operand to be a "
             "caller-provided device buffer (write the results into "
             "function arguments)"
          << kOtherOps;
      hostAccess = true;
    } else if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp,
                   vector::StoreOp, vector::TransferReadOp,
                   vector::TransferWriteOp, linalg::LinalgOp>(op)) {
      // E.g. a canonicalization folded a one-iteration parallel loop.
      op->emitOpError() << "accesses a buffer outside any parallel loop "
                           "in a function with GPU kernels; it would "
                           "access device memory on the host"
                        << kOtherOps;
      hostAccess = true;
    }
  });
  return failure(hostAccess);
}
