/*===- c-embedder.c - embedding kpool through the C API -------------------===*\
|*                                                                            *|
|* The same flow for a graph compiler written in C (or any language with a   *|
|* C FFI), linking only libKPoolCAPI.so (KPool::CAPI), which carries MLIR's  *|
|* C API too: register the dialect, build IR (parsed here for brevity; the   *|
|* mlir-c builders work as well), lower it with kpool-lower-to-llvm, run it  *|
|* with the ExecutionEngine, and call the runtime's kernels directly.        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "kpool-c/Dialect.h"
#include "kpool-c/Runtime.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"

#include <stdint.h>
#include <stdio.h>

static void print(MlirStringRef s, void *userData) {
  (void)userData;
  fprintf(stderr, "%.*s", (int)s.length, s.data);
}

/// memref<?xi32> as the C interface passes it.
typedef struct {
  uint32_t *allocated, *aligned;
  int64_t offset, size, stride;
} MemRef1D;

int main(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirKPoolRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllLLVMTranslations(ctx);

  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(
               "func.func @offsets(%pro: memref<?xi32>, %iro: memref<?xi32>,"
               "                   %cache: memref<?xi32>)"
               "    attributes {llvm.emit_c_interface} {"
               "  kpool.pool_offsets kpool(4)"
               "      ins(%iro, %cache : memref<?xi32>, memref<?xi32>)"
               "      outs(%pro : memref<?xi32>)"
               "  return"
               "}"));
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  if (mlirModuleIsNull(module) ||
      mlirLogicalResultIsFailure(mlirKPoolAddLowerToLLVMPipeline(
          mlirPassManagerGetAsOpPassManager(pm),
          mlirStringRefCreateFromCString("bufferize=false"), print, NULL)) ||
      mlirLogicalResultIsFailure(
          mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "lowering failed\n");
    return 1;
  }
  mlirPassManagerDestroy(pm);
  printf("C: lowered with kpool-lower-to-llvm\n");

  MlirExecutionEngine jit =
      mlirExecutionEngineCreate(module, 2, 0, NULL, false, false);
  void (*offsets)(MemRef1D *, MemRef1D *, MemRef1D *) =
      (void (*)(MemRef1D *, MemRef1D *, MemRef1D *))mlirExecutionEngineLookup(
          jit, mlirStringRefCreateFromCString("_mlir_ciface_offsets"));
  uint32_t iro[3] = {0, 9, 14}, cache[2] = {0, 3}, pro[3] = {0};
  MemRef1D mPro = {pro, pro, 0, 3, 1}, mIro = {iro, iro, 0, 3, 1},
           mCache = {cache, cache, 0, 2, 1};
  offsets(&mPro, &mIro, &mCache);
  printf("C: JIT pool_row_offsets: %u %u %u\n", pro[0], pro[1], pro[2]);
  mlirExecutionEngineDestroy(jit);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);

  // The runtime: the same op, validated on the host first.
  KPoolKernelSet *kernels = NULL;
  KPoolKernelConfig config = kpoolKernelConfigDefault(); // bf16, 128, 4
  KPoolError *error = kpoolKernelSetCreate(&config, &kernels);
  if (error) {
    fprintf(stderr, "%s\n", kpoolErrorMessage(error));
    kpoolErrorDestroy(error);
    return 1;
  }
  uint32_t badIro[3] = {0, 9, 8}; // request 1's rows are reversed
  KPoolPoolOffsetsArgs args = {0};
  args.pool_row_offsets = (KPoolView){pro, 1, {3}, {1}};
  args.input_row_offsets = (KPoolView){badIro, 1, {3}, {1}};
  args.cache_lengths = (KPoolView){cache, 1, {2}, {1}};
  error = kpoolPoolOffsets(kernels, &args, NULL); // validated: a CPU set

  printf("C: runtime error: %s\n", error ? kpoolErrorMessage(error) : "none");
  kpoolErrorDestroy(error);
  kpoolKernelSetDestroy(kernels);
  return 0;
}
