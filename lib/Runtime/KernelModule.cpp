//===- KernelModule.cpp - the kpool kernel ABI as IR ----------------------===//

#include "kpool/Runtime/KernelModule.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/Runtime/Runtime.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::kpool;

KernelNames::KernelNames(StringRef prefix)
    : compress((prefix + "compress_memref").str()),
      seedTail((prefix + "seed_tail_memref").str()),
      ringClose((prefix + "ring_close_memref").str()),
      poolOffsets((prefix + "pool_offsets_memref").str()) {}

std::string mlir::kpool::kernelPrefix(KPoolElementType type, int64_t headDim,
                                      int64_t kpool) {
  return "kpool_" + std::string(::kpool::elementTypeName(type)) + "_d" +
         std::to_string(headDim) + "_k" + std::to_string(kpool) + "_";
}

OwningOpRef<ModuleOp>
mlir::kpool::buildKernelModule(MLIRContext &ctx, KPoolElementType type,
                               int64_t headDim, int64_t kpool, StringRef prefix,
                               bool poolOffsetsOnly) {
  ctx.loadDialect<func::FuncDialect, memref::MemRefDialect, arith::ArithDialect,
                  KPoolDialect>();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  Type elt = type == KPOOL_BF16  ? Type(b.getBF16Type())
             : type == KPOOL_F16 ? Type(b.getF16Type())
                                 : Type(b.getF32Type());
  int64_t dyn = ShapedType::kDynamic;
  auto strided = [&](ArrayRef<int64_t> shape, Type t) {
    SmallVector<int64_t> strides(shape.size(), dyn);
    return MemRefType::get(shape, t,
                           StridedLayoutAttr::get(&ctx, dyn, strides));
  };
  Type keys = strided({dyn, headDim}, elt);
  Type ape = strided({kpool, headDim}, b.getF32Type());
  Type meta = strided({dyn}, b.getI32Type());
  // The ring window R >= kpool is dynamic: one kernel serves every window.
  Type tail = strided({dyn, 2, dyn, headDim}, elt);
  Type i32 = b.getI32Type();
  IntegerAttr kAttr = b.getI64IntegerAttr(kpool);
  IntegerAttr dAttr = b.getI64IntegerAttr(headDim);
  KernelNames names(prefix);

  auto makeFunc = [&](StringRef name, ArrayRef<Type> args,
                      function_ref<void(ValueRange)> body) {
    auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(args, {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fn.addEntryBlock());
    body(fn.getArguments());
    func::ReturnOp::create(b, loc);
  };

  makeFunc(names.poolOffsets, {meta, meta, meta}, [&](ValueRange a) {
    PoolOffsetsOp::create(b, loc, TypeRange{}, kAttr, a[1], a[2], a[0]);
  });
  if (poolOffsetsOnly)
    return module;
  makeFunc(names.compress, {keys, keys, keys, ape, meta, meta, meta},
           [&](ValueRange a) {
             CompressOp::create(b, loc, TypeRange{}, kAttr, dAttr, a[1], a[2],
                                a[3], a[4], a[5], a[6], a[0]);
           });
  makeFunc(names.seedTail, {tail, keys, keys, meta, meta, meta, i32},
           [&](ValueRange a) {
             SeedTailOp::create(b, loc, TypeRange{}, kAttr, dAttr, a[1], a[2],
                                a[3], a[4], a[5], a[6], a[0]);
           });
  makeFunc(names.ringClose,
           {keys, meta, tail, keys, keys, ape, meta, meta, meta, i32},
           [&](ValueRange a) {
             RingCloseOp::create(b, loc, TypeRange{}, kAttr, dAttr, a[2], a[3],
                                 a[4], a[5], a[6], a[7], a[8], a[9], a[0],
                                 a[1]);
           });
  return module;
}
