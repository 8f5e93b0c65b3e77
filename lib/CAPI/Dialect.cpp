//===- Dialect.cpp - C API of the kpool dialect ---------------------------===//

#include "kpool-c/Dialect.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/InitAll.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(KPool, kpool, mlir::kpool::KPoolDialect)

void mlirKPoolRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::kpool::registerAllDialects(*unwrap(registry));
}
