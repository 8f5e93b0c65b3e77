//===- KPoolToLinalgPass.cpp - the convert-kpool-to-linalg pass -----------===//
//
// A dialect conversion: every kpool op is illegal, the patterns of
// KPoolToLinalg.cpp lower the buffer form to legal arith, linalg, math,
// memref and scf, and an op that is left (the tensor form) fails the pass.
//
//===----------------------------------------------------------------------===//

#include "kpool/Conversion/KPoolToLinalg/KPoolToLinalg.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Dialect/KPool/Utils/Pooling.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/FoldUtils.h"

#include <limits>

namespace mlir::kpool {
#define GEN_PASS_DEF_CONVERTKPOOLTOLINALGPASS
#include "kpool/Conversion/Passes.h.inc"
} // namespace mlir::kpool

using namespace mlir;
using namespace mlir::kpool;

namespace {

struct ConvertKPoolToLinalgPass
    : public kpool::impl::ConvertKPoolToLinalgPassBase<
          ConvertKPoolToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    // The patterns lower the buffer form only. Name the missing step for
    // every op in tensor form, rather than the conversion's generic "failed
    // to legalize" for the first of them.
    bool tensorForm = false;
    getOperation()->walk([&](DestinationStyleOpInterface op) {
      if (!isa<KPoolDialect>(op->getDialect()) || op.hasPureBufferSemantics())
        return;
      op->emitOpError() << "has tensor operands; run one-shot-bufferize "
                           "before convert-kpool-to-linalg";
      tensorForm = true;
    });
    if (tensorForm)
      return signalPassFailure();

    ConversionTarget target(getContext());
    target.addIllegalDialect<KPoolDialect>();
    // The per-pool pool-cache store stays for the backend that spreads it
    // (kpool-lower-cache-entries, kpool-map-to-gpu).
    target.addLegalOp<CacheEntryOp>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, memref::MemRefDialect,
                           scf::SCFDialect>();
    // The signless views of ui32 metadata (MetadataBuilder::signless).
    target.addLegalOp<UnrealizedConversionCastOp>();
    if (stepOffsets != "walk" && stepOffsets != "scan") {
      getOperation()->emitError()
          << "convert-kpool-to-linalg: step-offsets must be 'walk' or "
             "'scan', got '"
          << stepOffsets << "'";
      return signalPassFailure();
    }
    // An integer option outside [lo, hi] (`expected` in words) fails the
    // pass with the option's name and value.
    auto outOfRange = [&](StringRef option, int64_t value, int64_t lo,
                          int64_t hi, const Twine &expected) {
      if (value >= lo && value <= hi)
        return false;
      getOperation()->emitError()
          << "convert-kpool-to-linalg: " << option << " must be " << expected
          << ", got " << value;
      return true;
    };
    constexpr int64_t any = std::numeric_limits<int64_t>::max();
    if (outOfRange("prefetch-pools", prefetchPools, 0, any, "0 or more") ||
        outOfRange("rows-per-iteration", rowsPerIteration, 1, any,
                   "at least 1") ||
        outOfRange("unroll-members", unrollMembers, 1, kMaxUnrolledMembers,
                   "in [1, " + Twine(kMaxUnrolledMembers) + "]"))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    KPoolToLinalgOptions options;
    options.unrollMembers = unrollMembers;
    options.scanStepOffsets = stepOffsets == "scan";
    options.prefetchPools = prefetchPools;
    options.rowsPerIteration = rowsPerIteration;
    populateKPoolToLinalgConversionPatterns(patterns, options);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();

    // The lowering creates each constant where it needs it; unique them at
    // the top of their region, as the greedy driver this pass used to run
    // did, so that later passes and tests see one constant per value.
    SmallVector<std::pair<Operation *, Attribute>> constants;
    getOperation()->walk([&](Operation *op) {
      Attribute value;
      if (op->hasTrait<OpTrait::ConstantLike>() &&
          matchPattern(op, m_Constant(&value)))
        constants.emplace_back(op, value);
    });
    OperationFolder folder(&getContext());
    for (auto [op, value] : constants)
      (void)folder.insertKnownConstant(op, value);
  }
};

} // namespace
