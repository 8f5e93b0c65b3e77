//===- LowerCacheEntries.cpp - kpool.cache_entry for the CPU --------------===//

#include "kpool/Dialect/KPool/Transforms/Passes.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Utils/PoolCache.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kpool {
#define GEN_PASS_DEF_KPOOLLOWERCACHEENTRIESPASS
#include "kpool/Dialect/KPool/Transforms/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

namespace {
struct KPoolLowerCacheEntriesPass
    : public kpool::impl::KPoolLowerCacheEntriesPassBase<
          KPoolLowerCacheEntriesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateCacheEntryLoweringPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
