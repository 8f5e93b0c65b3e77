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

using namespace mlir;
using namespace mlir::kpool;

LogicalResult kpool::verifyNoHostAccess(func::FuncOp func) {
  bool hostAccess = false;
  func.walk([&](Operation *op) {
    if (op->getParentOfType<scf::ParallelOp>() ||
        op->getParentOfType<gpu::LaunchOp>())
      return;
    if (isa<memref::AllocOp, memref::AllocaOp, memref::ReallocOp,
            memref::CopyOp, bufferization::CloneOp>(op)) {
      op->emitOpError()
          << "would place a buffer in host memory next to GPU kernels; "
             "kpool-map-to-gpu expects every operand to be a "
             "caller-provided device buffer (write the results into "
             "function arguments)";
      hostAccess = true;
    } else if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp,
                   vector::StoreOp, vector::TransferReadOp,
                   vector::TransferWriteOp, linalg::LinalgOp>(op)) {
      // E.g. a canonicalization folded a one-iteration parallel loop.
      op->emitOpError() << "accesses a buffer outside any parallel loop "
                           "in a function with GPU kernels; it would "
                           "access device memory on the host";
      hostAccess = true;
    }
  });
  return failure(hostAccess);
}
