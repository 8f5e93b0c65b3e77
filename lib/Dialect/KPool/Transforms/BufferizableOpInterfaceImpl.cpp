//===- BufferizableOpInterfaceImpl.cpp - kpool bufferization --------------===//
//
// The kpool ops are destination-passing: each `outs` tensor bufferizes in
// place into the result. Inputs are only read. Outputs are read too, except
// where the op overwrites every element (ring_close's, and step's ring_close
// and pool_offsets outputs), so one-shot
// bufferization can skip the copy of a fresh init there.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/Transforms/BufferizableOpInterfaceImpl.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::kpool;

namespace {

template <typename OpTy>
struct KPoolOpInterface
    : public DstBufferizableOpInterfaceExternalModel<KPoolOpInterface<OpTy>,
                                                     OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &state) const {
    // The same rule as the ops' memory effects.
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand) ||
           readsInit(op, operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto dpsOp = cast<DestinationStyleOpInterface>(op);
    SmallVector<Value> newOperands;
    SmallVector<Value> initBuffers;
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      if (!isa<TensorType>(value.getType())) {
        newOperands.push_back(value);
        continue;
      }
      FailureOr<Value> buffer = getBuffer(rewriter, value, options, state);
      if (failed(buffer))
        return failure();
      newOperands.push_back(*buffer);
      if (dpsOp.isDpsInit(&operand))
        initBuffers.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    SmallVector<NamedAttribute> discardable(op->getDiscardableAttrs());
    OperationState newState(op->getLoc(), op->getName(), newOperands,
                            /*types=*/TypeRange{}, discardable);
    newState.propertiesAttr = op->getPropertiesAsAttribute();
    rewriter.create(newState);
    replaceOpWithBufferizedValues(rewriter, op, initBuffers);
    return success();
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<KPoolOpInterface<Ops>>(*ctx), ...);
}

} // namespace

void mlir::kpool::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, KPoolDialect *) {
    attach<CompressOp, SeedTailOp, RingCloseOp, PoolOffsetsOp, StepOp>(ctx);
  });
}
