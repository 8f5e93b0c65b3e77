/*===- kpool-c/Dialect.h - C API of the kpool dialect and passes --*- C -*-===*\
|*                                                                            *|
|* What a graph compiler written in C (or any language with a C FFI) needs   *|
|* to put kpool ops into its IR and lower them: the dialect handle, the      *|
|* external models the dialect needs for bufferization, the passes and the   *|
|* kpool-lower-to-llvm / kpool-lower-to-nvvm pipelines. Follows MLIR's C API *|
|* conventions (mlir-c/IR.h, mlir-c/Pass.h); libKPoolCAPI.so also carries   *|
|* the MLIR C API itself (IR, passes, func/arith/tensor/memref/linalg/      *|
|* bufferization dialects, registration of everything, ExecutionEngine).    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_DIALECT_H
#define KPOOL_C_DIALECT_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// mlirGetDialectHandle__kpool__(): inserts or loads the kpool dialect.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(KPool, kpool);

/// Adds the kpool dialect and its external interface models (bufferization
/// of kpool ops on tensors) to `registry`. Prefer this over the bare dialect
/// handle when the IR will be bufferized (kpool-lower-to-llvm does).
MLIR_CAPI_EXPORTED void
mlirKPoolRegisterAllDialects(MlirDialectRegistry registry);

/// Registers every kpool pass and pipeline with the global registry, so that
/// mlirParsePassPipeline / mlirOpPassManagerAddPipeline accept their names.
MLIR_CAPI_EXPORTED void mlirKPoolRegisterAllPasses(void);

/// Registers the `kpool-lower-to-llvm` and `kpool-lower-to-nvvm` pipelines
/// with the global registry.
MLIR_CAPI_EXPORTED void mlirKPoolRegisterPipelines(void);

/// Appends `kpool-lower-to-llvm` to `passManager` with the options in
/// `options`, written as on the command line without braces, e.g.
/// "openmp=true vector-size=8 bufferize=false" (empty: the defaults). On a
/// bad option string nothing is added, `errorCallback` (if not NULL) receives
/// the message and the result is failure.
MLIR_CAPI_EXPORTED MlirLogicalResult mlirKPoolAddLowerToLLVMPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

/// Appends `kpool-lower-to-nvvm` to `passManager`; as above. Running it needs
/// the LLVM IR translations of the GPU dialects registered in the context
/// (mlirRegisterAllLLVMTranslations).
MLIR_CAPI_EXPORTED MlirLogicalResult mlirKPoolAddLowerToNVVMPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

/* Generated: mlirRegisterKPoolPasses(), mlirRegisterKPoolConversionPasses()
 * and mlirCreate<Group><Pass>() / mlirRegister<Group><Pass>() per pass. */
#include "kpool-c/ConversionPasses.capi.h.inc"
#include "kpool-c/TransformsPasses.capi.h.inc"

#endif /* KPOOL_C_DIALECT_H */
