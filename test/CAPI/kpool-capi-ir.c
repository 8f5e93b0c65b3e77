/*===- kpool-capi-ir.c - kpool through MLIR's C API -----------------------===*\
|*                                                                            *|
|* A graph compiler written in C: registers the kpool dialect through its    *|
|* handle, parses and verifies kpool ops, sees verifier errors through a     *|
|* diagnostic handler, lowers with kpool-lower-to-llvm added by the C API    *|
|* (and by name, after registering the passes), JIT-compiles the result with *|
|* the ExecutionEngine and runs kpool.pool_offsets on C arrays.             *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

// RUN: kpool-capi-ir-test 2>&1 | FileCheck %s

#include "kpool-c/Dialect.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/ExecutionEngine.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printToStdout(MlirStringRef s, void *userData) {
  (void)userData;
  fwrite(s.data, 1, s.length, stdout);
}

/// Appends to the 512-byte string `userData`.
static void collect(MlirStringRef s, void *userData) {
  char *buffer = (char *)userData;
  size_t used = strlen(buffer);
  size_t n = s.length < 511 - used ? s.length : 511 - used;
  memcpy(buffer + used, s.data, n);
  buffer[used + n] = 0;
}

static MlirLogicalResult printDiagnostic(MlirDiagnostic d, void *userData) {
  (void)userData;
  printf("diagnostic: ");
  mlirDiagnosticPrint(d, printToStdout, NULL);
  printf("\n");
  return mlirLogicalResultSuccess();
}

static MlirContext makeContext(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirKPoolRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllLLVMTranslations(ctx);
  return ctx;
}

static void testDialectHandle(void) {
  // CHECK-LABEL: dialect handle
  printf("dialect handle\n");
  MlirContext ctx = mlirContextCreate();
  MlirDialectHandle handle = mlirGetDialectHandle__kpool__();
  MlirStringRef ns = mlirDialectHandleGetNamespace(handle);
  // CHECK: namespace: kpool
  printf("namespace: %.*s\n", (int)ns.length, ns.data);
  mlirDialectHandleRegisterDialect(handle, ctx);
  MlirDialect dialect = mlirDialectHandleLoadDialect(handle, ctx);
  // CHECK: loaded: 1
  printf("loaded: %d\n", !mlirDialectIsNull(dialect));
  // CHECK: registered ops: kpool.compress 1
  printf("registered ops: kpool.compress %d\n",
         mlirContextIsRegisteredOperation(
             ctx, mlirStringRefCreateFromCString("kpool.compress")));
  mlirContextDestroy(ctx);
}

static const char *kOffsetsModule =
    "func.func @offsets(%pro: memref<?xi32>, %iro: memref<?xi32>,\n"
    "                   %cache: memref<?xi32>)\n"
    "    attributes {llvm.emit_c_interface} {\n"
    "  kpool.pool_offsets kpool(4)\n"
    "      ins(%iro, %cache : memref<?xi32>, memref<?xi32>)\n"
    "      outs(%pro : memref<?xi32>)\n"
    "  return\n"
    "}\n";

static void testParse(void) {
  // CHECK-LABEL: parse
  printf("parse\n");
  MlirContext ctx = makeContext();
  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(kOffsetsModule));
  // CHECK: parsed: 1 verified: 1
  printf("parsed: %d verified: %d\n", !mlirModuleIsNull(module),
         mlirOperationVerify(mlirModuleGetOperation(module)));
  MlirOperation func = mlirBlockGetFirstOperation(mlirModuleGetBody(module));
  MlirOperation op = mlirBlockGetFirstOperation(
      mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0)));
  MlirIdentifier name = mlirOperationGetName(op);
  MlirStringRef nameStr = mlirIdentifierStr(name);
  // CHECK: first op: kpool.pool_offsets
  printf("first op: %.*s\n", (int)nameStr.length, nameStr.data);
  MlirAttribute kpool = mlirOperationGetAttributeByName(
      op, mlirStringRefCreateFromCString("kpool"));
  // CHECK: kpool attribute: 4
  printf("kpool attribute: %lld\n",
         (long long)mlirIntegerAttrGetValueInt(kpool));
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
}

static void testVerifierError(void) {
  // CHECK-LABEL: verifier error
  printf("verifier error\n");
  MlirContext ctx = makeContext();
  MlirDiagnosticHandlerID id =
      mlirContextAttachDiagnosticHandler(ctx, printDiagnostic, NULL, NULL);
  // ape must be [kpool, head_dim] = [4, 8] f32.
  const char *bad =
      "func.func @bad(%k: tensor<?x8xf32>, %ape: tensor<4x16xf32>,\n"
      "               %m: tensor<?xi32>, %out: tensor<?x8xf32>)\n"
      "    -> tensor<?x8xf32> {\n"
      "  %r = kpool.compress kpool(4) head_dim(8)\n"
      "      ins(%k, %k, %ape, %m, %m, %m : tensor<?x8xf32>,\n"
      "          tensor<?x8xf32>, tensor<4x16xf32>, tensor<?xi32>,\n"
      "          tensor<?xi32>, tensor<?xi32>)\n"
      "      outs(%out : tensor<?x8xf32>) -> tensor<?x8xf32>\n"
      "  return %r : tensor<?x8xf32>\n"
      "}\n";
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(bad));
  // CHECK: diagnostic: 'kpool.compress' op {{.*}}'ape'{{.*}}[4, 8]{{.*}}[4, 16]
  // CHECK: module is null: 1
  printf("module is null: %d\n", mlirModuleIsNull(module));
  mlirContextDetachDiagnosticHandler(ctx, id);
  mlirContextDestroy(ctx);
}

static void testPipelineOptions(void) {
  // CHECK-LABEL: pipeline options
  printf("pipeline options\n");
  MlirContext ctx = makeContext();
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult r = mlirKPoolAddLowerToLLVMPipeline(
      opm, mlirStringRefCreateFromCString("vector-size=banana"), printToStdout,
      NULL);
  // CHECK: kpool-lower-to-llvm: invalid options 'vector-size=banana'
  // CHECK: bad options: failed 1
  printf("\nbad options: failed %d\n", mlirLogicalResultIsFailure(r));
  r = mlirKPoolAddLowerToLLVMPipeline(
      opm, mlirStringRefCreateFromCString("no-such-option=1"), printToStdout,
      NULL);
  // CHECK: kpool-lower-to-llvm: invalid options 'no-such-option=1':
  // {{.*}}no-such-option CHECK: unknown option: failed 1
  printf("\nunknown option: failed %d\n", mlirLogicalResultIsFailure(r));
  r = mlirKPoolAddLowerToLLVMPipeline(
      opm, mlirStringRefCreateFromCString("bufferize=false vector-size=8"),
      printToStdout, NULL);
  // CHECK: good options: ok 1
  printf("good options: ok %d\n", mlirLogicalResultIsSuccess(r));
  // CHECK: pipeline:
  // {{.*}}convert-kpool-to-linalg{{.*}}kpool-vectorize-pool-rows{vector-size=8}
  printf("pipeline: ");
  mlirPrintPassPipeline(opm, printToStdout, NULL);
  printf("\n");
  mlirPassManagerDestroy(pm);

  // Option values the pipelines check themselves: each fails here with a
  // message naming the option, instead of crashing, aborting or producing
  // something else in a later pass.
  static const char *const badLLVM[] = {"vector-size=-1"};
  static const char *const badNVVM[] = {
      "format=isa chip=",           "chip=sm_100a",
      "features=+ptx60",            "format=foo",
      "cuda-toolkit=/nonexistent",  "chip=sm_1000",
      "features=garbage",           "features=+ptx80,ptx81",
      "opt-level=7",                "block-size=0",
      "vector-bytes=3",
  };
  // CHECK: bad value 'vector-size=-1': failed 1: kpool-lower-to-llvm: vector-size must be 0 (scalar) or a positive number of channels, got -1
  // CHECK: bad value 'format=isa chip=': failed 1: kpool-lower-to-nvvm: chip='' is not an NVIDIA architecture
  // CHECK: bad value 'chip=sm_100a': failed 1: kpool-lower-to-nvvm: features='+ptx80' selects PTX 8.0, but chip=sm_100a needs PTX 8.6 or later
  // CHECK: bad value 'features=+ptx60': failed 1: kpool-lower-to-nvvm: features='+ptx60' selects PTX 6.0, but chip=sm_90 needs PTX 7.8 or later
  // CHECK: bad value 'format=foo': failed 1: kpool-lower-to-nvvm: format='foo' is not one of isa
  // CHECK: bad value 'cuda-toolkit=/nonexistent': failed 1: kpool-lower-to-nvvm: cuda-toolkit='/nonexistent' is not a directory
  // CHECK: bad value 'chip=sm_1000': failed 1: kpool-lower-to-nvvm: chip='sm_1000' is not an NVIDIA architecture
  // CHECK: bad value 'features=garbage': failed 1: kpool-lower-to-nvvm: features='garbage': expected a comma-separated list of PTX versions
  // CHECK: bad value 'features=+ptx80,ptx81': failed 1: {{.*}}got 'ptx81'
  // CHECK: bad value 'opt-level=7': failed 1: kpool-lower-to-nvvm: opt-level must be in [0, 3], got 7
  // CHECK: bad value 'block-size=0': failed 1: kpool-lower-to-nvvm: block-size must be in [1, 1024], got 0
  // CHECK: bad value 'vector-bytes=3': failed 1: kpool-lower-to-nvvm: vector-bytes must be a power of two in [1, 16], got 3
  for (int nvvm = 0; nvvm < 2; ++nvvm) {
    const char *const *list = nvvm ? badNVVM : badLLVM;
    int count = nvvm ? (int)(sizeof(badNVVM) / sizeof(*badNVVM))
                     : (int)(sizeof(badLLVM) / sizeof(*badLLVM));
    for (int i = 0; i < count; ++i) {
      pm = mlirPassManagerCreate(ctx);
      opm = mlirPassManagerGetAsOpPassManager(pm);
      char message[512] = "";
      MlirStringRef text = mlirStringRefCreateFromCString(list[i]);
      r = nvvm ? mlirKPoolAddLowerToNVVMPipeline(opm, text, collect, message)
               : mlirKPoolAddLowerToLLVMPipeline(opm, text, collect, message);
      printf("bad value '%s': failed %d: %s\n", list[i],
             mlirLogicalResultIsFailure(r), message);
      mlirPassManagerDestroy(pm);
    }
  }
  // By name, once registered.
  mlirKPoolRegisterAllPasses();
  pm = mlirPassManagerCreate(ctx);
  opm = mlirPassManagerGetAsOpPassManager(pm);
  r = mlirOpPassManagerAddPipeline(
      opm,
      mlirStringRefCreateFromCString(
          "kpool-lower-to-llvm{bufferize=false openmp=false}"),
      printToStdout, NULL);
  // CHECK: by name: ok 1
  printf("by name: ok %d\n", mlirLogicalResultIsSuccess(r));
  mlirPassManagerDestroy(pm);

  // The same check when the pipeline is added by name.
  pm = mlirPassManagerCreate(ctx);
  opm = mlirPassManagerGetAsOpPassManager(pm);
  printf("by name, bad value: ");
  r = mlirOpPassManagerAddPipeline(
      opm, mlirStringRefCreateFromCString("kpool-lower-to-nvvm{chip=sm_100a}"),
      printToStdout, NULL);
  // CHECK: by name, bad value: {{.*}}chip=sm_100a needs PTX 8.6 or later
  // CHECK: by name, bad value failed: 1
  printf("\nby name, bad value failed: %d\n", mlirLogicalResultIsFailure(r));
  mlirPassManagerDestroy(pm);

  // Appended to a pass manager nested on func.func: a message saying where
  // the pipelines belong, not an abort in OpPassManager::addPass.
  for (int nvvm = 0; nvvm < 2; ++nvvm) {
    pm = mlirPassManagerCreate(ctx);
    opm = mlirPassManagerGetNestedUnder(
        pm, mlirStringRefCreateFromCString("func.func"));
    char message[512] = "";
    MlirStringRef text = mlirStringRefCreateFromCString("");
    r = nvvm ? mlirKPoolAddLowerToNVVMPipeline(opm, text, collect, message)
             : mlirKPoolAddLowerToLLVMPipeline(opm, text, collect, message);
    // clang-format off
    // CHECK: nested in func.func: failed 1: kpool-lower-to-llvm must be nested in 'builtin.module' (it bufferizes and converts whole modules), got a pass manager on 'func.func'
    // CHECK: nested in func.func: failed 1: kpool-lower-to-nvvm must be nested in 'builtin.module'
    // clang-format on
    printf("nested in func.func: failed %d: %s\n",
           mlirLogicalResultIsFailure(r), message);
    mlirPassManagerDestroy(pm);
  }

  // A single pass, created through the generated C API.
  pm = mlirPassManagerCreate(ctx);
  mlirPassManagerAddOwnedPass(
      pm, mlirCreateKPoolConversionConvertKPoolToLinalgPass());
  // CHECK: single pass: {{.*}}convert-kpool-to-linalg
  printf("single pass: ");
  mlirPrintPassPipeline(mlirPassManagerGetAsOpPassManager(pm), printToStdout,
                        NULL);
  printf("\n");
  mlirPassManagerDestroy(pm);
  mlirContextDestroy(ctx);
}

/// memref<?xi32> as the C interface passes it.
typedef struct {
  uint32_t *allocated, *aligned;
  int64_t offset, size, stride;
} MemRef1D;

static MemRef1D memref(uint32_t *data, int64_t size) {
  MemRef1D m = {data, data, 0, size, 1};
  return m;
}

static void testLowerAndRun(void) {
  // CHECK-LABEL: lower and run
  printf("lower and run\n");
  MlirContext ctx = makeContext();
  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(kOffsetsModule));
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirLogicalResult r = mlirKPoolAddLowerToLLVMPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      mlirStringRefCreateFromCString("bufferize=false"), printToStdout, NULL);
  r = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  // CHECK: lowered: 1
  printf("lowered: %d\n", mlirLogicalResultIsSuccess(r));
  mlirPassManagerDestroy(pm);

  MlirExecutionEngine jit = mlirExecutionEngineCreate(
      module, /*optLevel=*/2, 0, NULL,
      /*enableObjectDump=*/false, /*enablePIC=*/false);
  // CHECK: jit: 1
  printf("jit: %d\n", !mlirExecutionEngineIsNull(jit));
  typedef void (*OffsetsFn)(MemRef1D *, MemRef1D *, MemRef1D *);
  OffsetsFn fn = (OffsetsFn)mlirExecutionEngineLookup(
      jit, mlirStringRefCreateFromCString("_mlir_ciface_offsets"));
  // Four requests, kpool 4: (cache 0, 9 tokens) -> 2 pools; (cache 3, 5) ->
  // pools 1 only; (cache 2, 1) -> none; (cache 70001, 11) -> 70004..70012:
  // pools 17501 and 17502.
  uint32_t iro[5] = {0, 9, 14, 15, 26};
  uint32_t cache[4] = {0, 3, 2, 70001};
  uint32_t pro[5] = {99, 99, 99, 99, 99};
  MemRef1D mPro = memref(pro, 5), mIro = memref(iro, 5),
           mCache = memref(cache, 4);
  fn(&mPro, &mIro, &mCache);
  // CHECK: pool_row_offsets: 0 2 3 3 5
  printf("pool_row_offsets: %u %u %u %u %u\n", pro[0], pro[1], pro[2], pro[3],
         pro[4]);
  mlirExecutionEngineDestroy(jit);
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
}

int main(void) {
  testDialectHandle();
  testParse();
  testVerifierError();
  testPipelineOptions();
  testLowerAndRun();
  // CHECK: done
  printf("done\n");
  return 0;
}
