//===- DeviceMemory.cpp - a function's buffers on the GPU -----------------===//
//
// What a function that mixes kpool's kernels with the caller's own ops
// needs once those ops run as GPU kernels too (kpool-lower-to-nvvm's
// `map-other-ops`, or upstream's parallel-loop mapping run by hand): its
// buffers allocated in device memory and its copies run as kernels
// (kpool-device-buffers, before the caller's parallel loops are mapped), and
// those allocations, copies and frees ordered with the launches on a
// stream, the form gpu-to-llvm lowers (kpool-async-device-memory).
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToGPU/KPoolToGPU.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLDEVICEBUFFERSPASS
#define GEN_PASS_DEF_KPOOLASYNCDEVICEMEMORYPASS
#include "kpool/Conversion/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

/// Whether `op` is inside a kernel (a launch or a GPU module).
static bool onDevice(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() ||
         op->getParentOfType<gpu::GPUModuleOp>();
}

/// Whether `func`'s buffers live in device memory: it has kpool ops (which
/// kpool-lower-to-nvvm maps to kernels), GPU kernels, or GPU memory
/// operations (it already handles device memory, e.g. frees the buffers a
/// function with kernels returned to it).
static bool usesDeviceMemory(func::FuncOp func) {
  WalkResult found = func.walk([](Operation *op) {
    if (isa_and_nonnull<KPoolDialect>(op->getDialect()) ||
        isa<gpu::LaunchOp, gpu::LaunchFuncOp, gpu::AllocOp, gpu::DeallocOp,
            gpu::MemcpyOp, gpu::MemsetOp>(op))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

/// Whether `type` is laid out contiguously in row-major order (what
/// gpu.memcpy copies; gpu-to-llvm lowers it only for such memrefs).
static bool isContiguous(MemRefType type) {
  return type.getLayout().isIdentity();
}

/// `copy` as a parallel loop over the target's elements, which the
/// caller's mapping (gpu-map-parallel-loops) makes a kernel like any other
/// parallel loop.
static void copyAsParallelLoop(RewriterBase &rewriter, memref::CopyOp copy) {
  Location loc = copy.getLoc();
  Value source = copy.getSource(), target = copy.getTarget();
  int64_t rank = cast<MemRefType>(target.getType()).getRank();
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  SmallVector<Value> lower(rank, zero), steps(rank, one), upper;
  for (int64_t d = 0; d < rank; ++d)
    upper.push_back(memref::DimOp::create(rewriter, loc, target, d));
  if (rank == 0) {
    // A one-iteration loop, so that the element still moves on the device.
    lower.push_back(zero);
    upper.push_back(one);
    steps.push_back(one);
  }
  scf::ParallelOp::create(rewriter, loc, lower, upper, steps,
                          [&](OpBuilder &b, Location loc, ValueRange ivs) {
                            ValueRange indices = rank == 0 ? ValueRange() : ivs;
                            Value v =
                                memref::LoadOp::create(b, loc, source, indices);
                            memref::StoreOp::create(b, loc, v, target, indices);
                          });
  rewriter.eraseOp(copy);
}

/// Whether only the host reads and writes `buffer` (through its views):
/// loads and stores outside the parallel loops and kernels, its pointer,
/// its deallocation, and calls of functions that use no device memory (the
/// deallocation pipeline's lists of buffers to free, and its helper that
/// reads them).
static bool hostOnly(Value buffer, SymbolTableCollection &symbols) {
  SmallVector<Value> values = {buffer};
  while (!values.empty()) {
    Value v = values.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user->getParentOfType<scf::ParallelOp>() || onDevice(user))
        return false;
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == v) {
          values.push_back(view->getResult(0));
          continue;
        }
        return false;
      }
      if (isa<memref::LoadOp, memref::DeallocOp,
              memref::ExtractAlignedPointerAsIndexOp,
              memref::ExtractStridedMetadataOp, memref::DimOp>(user))
        continue;
      if (auto store = dyn_cast<memref::StoreOp>(user)) {
        if (store.getMemref() == v)
          continue;
        return false;
      }
      if (auto call = dyn_cast<func::CallOp>(user)) {
        auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr());
        if (callee && !callee.isExternal() && !usesDeviceMemory(callee))
          continue;
        return false;
      }
      return false;
    }
  }
  return true;
}

/// Whether a kernel reads `global` (through its views): a use inside a
/// parallel loop or a launch, or by a kpool op or a launch_func.
static bool readOnDevice(memref::GetGlobalOp global) {
  SmallVector<Value> values = {global.getResult()};
  while (!values.empty()) {
    Value v = values.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user->getParentOfType<scf::ParallelOp>() || onDevice(user) ||
          isa_and_nonnull<KPoolDialect>(user->getDialect()) ||
          isa<gpu::LaunchFuncOp>(user))
        return true;
      if (auto view = dyn_cast<ViewLikeOpInterface>(user);
          view && view.getViewSource() == v)
        values.push_back(view->getResult(0));
    }
  }
  return false;
}

LogicalResult kpool::moveBuffersToDevice(func::FuncOp func,
                                         SymbolTableCollection &symbols) {
  if (!usesDeviceMemory(func))
    return success();
  // A global is host memory (e.g. a constant tensor of the function,
  // bufferized): a kernel cannot read it.
  bool hostGlobal = false;
  func.walk(
      [&](memref::GetGlobalOp global) {
        if (onDevice(global) || !readOnDevice(global))
          return;
        global.emitOpError()
            << "is host memory that a GPU kernel would read; pass the values "
               "to the function as an argument in device memory (or copy them "
               "with gpu.memcpy into a device buffer)";
        hostGlobal = true;
      });
  if (hostGlobal)
    return failure();
  // gpu-to-llvm lowers copies between row-major memrefs only (a memref.cast
  // to a row-major type before a gpu.memcpy folds away).
  bool stridedCopy = false;
  func.walk(
      [&](gpu::MemcpyOp copy) {
        for (Value operand : {copy.getDst(), copy.getSrc()})
          if (!isContiguous(cast<MemRefType>(operand.getType()))) {
            copy.emitOpError()
                << "copies a memref whose type is not row-major ("
                << operand.getType()
                << "), which gpu-to-llvm cannot lower; copy it into a "
                   "row-major buffer first (e.g. bufferization.to_buffer to a "
                   "row-major type, or memref.copy, which this pass makes a "
                   "kernel)";
            stridedCopy = true;
            return;
          }
      });
  if (stridedCopy)
    return failure();
  SmallVector<Value> hostBuffers;
  SmallVector<Operation *> hostOps;
  func.walk([&](Operation *op) {
    if (onDevice(op) ||
        !isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp>(op))
      return;
    if (auto alloc = dyn_cast<memref::AllocOp>(op);
        alloc && hostOnly(alloc.getMemref(), symbols)) {
      hostBuffers.push_back(alloc.getMemref());
      return;
    }
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      Value freed = dealloc.getMemref();
      while (auto view = freed.getDefiningOp<ViewLikeOpInterface>())
        freed = view.getViewSource();
      if (llvm::is_contained(hostBuffers, freed))
        return;
    }
    hostOps.push_back(op);
  });
  IRRewriter rewriter(func.getContext());
  for (Operation *op : hostOps) {
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      auto device = gpu::AllocOp::create(
          rewriter, loc, alloc.getType(), /*asyncToken=*/Type(),
          /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
          alloc.getSymbolOperands());
      rewriter.replaceOp(alloc, device.getMemref());
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(), ValueRange(),
                             dealloc.getMemref());
      rewriter.eraseOp(dealloc);
    } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      auto sourceType = cast<MemRefType>(copy.getSource().getType());
      auto targetType = cast<MemRefType>(copy.getTarget().getType());
      if (isContiguous(sourceType) && isContiguous(targetType)) {
        gpu::MemcpyOp::create(rewriter, loc, /*asyncToken=*/Type(),
                              ValueRange(), copy.getTarget(), copy.getSource());
        rewriter.eraseOp(copy);
      } else {
        // E.g. the deallocation pipeline's clone of a strided argument.
        copyAsParallelLoop(rewriter, copy);
      }
    }
  }
  return verifyNoHostAccess(func, hostBuffers);
}

namespace {

struct KPoolDeviceBuffersPass
    : public kpool::impl::KPoolDeviceBuffersPassBase<KPoolDeviceBuffersPass> {
  using Base::Base;
  void runOnOperation() override {
    SymbolTableCollection symbols;
    bool failed = false;
    for (auto func : getOperation().getOps<func::FuncOp>())
      failed |= mlir::failed(moveBuffersToDevice(func, symbols));
    if (failed)
      signalPassFailure();
  }
};

struct KPoolAsyncDeviceMemoryPass
    : public kpool::impl::KPoolAsyncDeviceMemoryPassBase<
          KPoolAsyncDeviceMemoryPass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Synchronous device memory operations stay unlowered in gpu-to-llvm;
    // only functions that have some get the stream (their kpool launches
    // included), the others keep their synchronous launches.
    WalkResult memory = func.walk([](Operation *op) {
      if (isa<gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp, gpu::MemsetOp>(op) &&
          !cast<gpu::AsyncOpInterface>(op).getAsyncToken())
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (!memory.wasInterrupted())
      return;
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(createGpuAsyncRegionPass());
    if (failed(runPipeline(pm, func)))
      signalPassFailure();
  }
};

} // namespace
