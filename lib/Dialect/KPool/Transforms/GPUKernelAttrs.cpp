//===- GPUKernelAttrs.cpp - attributes of outlined kpool kernels ----------===//
//
// Read-only operands and occupancy hints for the kernels kpool-map-to-gpu
// produces, once they are outlined (kpool-gpu-kernel-attrs) and once they are
// in the LLVM dialect (kpool-nvvm-readonly-noalias). Together they make the
// NVPTX backend load the read-only operands with ld.global.nc.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLGPUKERNELATTRSPASS
#define GEN_PASS_DEF_KPOOLNVVMREADONLYNOALIASPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;

/// Whether the memory `v` (a memref) refers to is only read by its users:
/// loads, descriptor queries, and views (subview, cast, select, ...) whose
/// results are only read in turn. Anything else counts as a write.
static bool onlyRead(Value v, int depth = 0) {
  if (depth > 32)
    return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<memref::LoadOp, vector::LoadOp, vector::TransferReadOp,
            vector::MaskedLoadOp, vector::GatherOp, memref::DimOp,
            memref::ExtractAlignedPointerAsIndexOp>(user))
      continue;
    if (auto meta = dyn_cast<memref::ExtractStridedMetadataOp>(user)) {
      if (!onlyRead(meta.getBaseBuffer(), depth + 1))
        return false;
      continue;
    }
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user)) {
      if (linalgOp.isDpsInput(&use))
        continue;
      return false;
    }
    if (isa<memref::SubViewOp, memref::CastOp, memref::ReinterpretCastOp,
            memref::CollapseShapeOp, memref::ExpandShapeOp,
            memref::TransposeOp, memref::ViewOp, arith::SelectOp>(user)) {
      for (Value result : user->getResults())
        if (isa<MemRefType>(result.getType()) && !onlyRead(result, depth + 1))
          return false;
      continue;
    }
    return false;
  }
  return true;
}

namespace {

struct KPoolGPUKernelAttrsPass
    : public kpool::impl::KPoolGPUKernelAttrsPassBase<KPoolGPUKernelAttrsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (minBlocksPerSM < 0 || minBlocksPerSM > 64) {
      getOperation().emitError()
          << "kpool-gpu-kernel-attrs: min-blocks-per-sm must be in [0, 64], "
             "got "
          << minBlocksPerSM;
      return signalPassFailure();
    }
    Builder b(&getContext());
    getOperation().walk([&](gpu::GPUFuncOp func) {
      if (!func.isKernel() || func.isExternal())
        return;
      for (BlockArgument arg : func.getArguments())
        if (isa<MemRefType>(arg.getType()) && onlyRead(arg))
          func.setArgAttr(arg.getArgNumber(), "llvm.readonly", b.getUnitAttr());
      if (minBlocksPerSM > 0)
        func->setAttr("nvvm.minctasm",
                      b.getI32IntegerAttr(static_cast<int32_t>(minBlocksPerSM)));
    });
  }
};

struct KPoolNVVMReadOnlyNoAliasPass
    : public kpool::impl::KPoolNVVMReadOnlyNoAliasPassBase<
          KPoolNVVMReadOnlyNoAliasPass> {
  using Base::Base;

  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      if (!func->hasAttr("nvvm.kernel") || func.isExternal())
        return;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (isa<LLVM::LLVMPointerType>(func.getArgument(i).getType()) &&
            func.getArgAttr(i, "llvm.readonly"))
          func.setArgAttr(i, "llvm.noalias", b.getUnitAttr());
    });
  }
};

} // namespace
