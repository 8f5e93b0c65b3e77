//===- KPoolMapToGPUPass.cpp - the kpool-map-to-gpu pass ------------------===//
//
// Plans and applies the mapping of every kernel loop of a function
// (KPoolToGPU.h); the caller's own loops, allocations and ops are left to
// the caller's pipeline.
//
//===----------------------------------------------------------------------===//

#include "MappingDetail.h"

#include "kpool/Dialect/KPool/Utils/Numerics.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLMAPTOGPUPASS
#include "kpool/Conversion/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::gpu_mapping;

namespace {

struct KPoolMapToGPUPass
    : public kpool::impl::KPoolMapToGPUPassBase<KPoolMapToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    KPoolMapToGPUPassOptions options;
    options.vectorBytes = vectorBytes;
    options.blockSize = blockSize;
    options.maxThreadsPerRow = maxThreadsPerRow;
    options.checkHostAccess = checkHostAccess;
    options.approximateExp = approximateExp;
    options.fastMath = fastMath;
    options.gridBlocks = gridBlocks;
    options.hardwareFP8 = hardwareFP8;
    std::string error;
    if (failed(verifyMapToGPUOptions(options, error))) {
      func.emitError("kpool-map-to-gpu: " + error);
      return signalPassFailure();
    }

    // Launches already in the function (the caller's own) would be
    // outlined as <function>_kernel, which must be a PTX identifier too.
    std::string outlined = (func.getName() + "_kernel").str();
    if (ptxIdentifier(outlined) != outlined)
      func.walk([&](gpu::LaunchOp launch) {
        if (!launch.getFunctionAttr())
          launch.setFunctionAttr(FlatSymbolRefAttr::get(
              &getContext(), ptxIdentifier(outlined)));
      });

    // Only the loops kpool's lowering produced; the caller's own loops,
    // allocations and ops are left to the caller's pipeline.
    SmallVector<scf::ParallelOp> loops = getKernelLoops(func);
    if (loops.empty())
      return;
    if (checkHostAccess && failed(verifyNoHostAccess(func)))
      return signalPassFailure();

    // Every plan first, from the untouched function, then their
    // application.
    SmallVector<KernelLoopPlan> plans;
    for (scf::ParallelOp loop : loops) {
      FailureOr<KernelLoopPlan> plan = planKernelLoop(loop, options);
      if (failed(plan))
        return signalPassFailure();
      plans.push_back(std::move(*plan));
    }
    for (const KernelLoopPlan &plan : plans)
      if (failed(applyKernelLoopPlan(plan, options)))
        return signalPassFailure();

    if (approximateExp) {
      // The same rewrite kpool-vectorize-pool-rows applies on the CPU.
      SmallVector<Operation *> exps;
      func.walk([&](math::ExpOp exp) {
        if (exp->getParentOfType<gpu::LaunchOp>())
          exps.push_back(exp);
      });
      RewritePatternSet patterns(&getContext());
      populateExpApproximationPatterns(patterns);
      GreedyRewriteConfig config;
      config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
      if (failed(applyOpPatternsGreedily(exps, std::move(patterns), config)))
        return signalPassFailure();
    }
  }
};

} // namespace
