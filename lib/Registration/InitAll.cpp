//===- InitAll.cpp - register everything kpool adds -----------------------===//

#include "kpool/InitAll.h"

#include "kpool/Conversion/Passes.h"
#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/Transforms/BufferizableOpInterfaceImpl.h"
#include "kpool/Dialect/KPool/Transforms/Passes.h"
#include "kpool/Pipelines/Pipelines.h"
#include "mlir/IR/DialectRegistry.h"

void mlir::kpool::registerAllDialects(DialectRegistry &registry) {
  registry.insert<KPoolDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}

void mlir::kpool::registerAllPasses() {
  registerKPoolConversionPasses();
  registerKPoolPasses();
  registerPipelines();
}
