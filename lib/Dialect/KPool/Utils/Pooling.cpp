//===- Pooling.cpp - the kpool pooling arithmetic -------------------------===//

#include "kpool/Dialect/KPool/Utils/Pooling.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::kpool;

Value mlir::kpool::buildPooledChannel(OpBuilder &b, Location loc,
                                      ValueRange keys, ValueRange gates,
                                      ValueRange apes, Type resultType) {
  assert(!keys.empty() && keys.size() == gates.size() &&
         keys.size() == apes.size() && "one key, gate and ape per member");
  Type f32 = b.getF32Type();
  if (auto vecType = dyn_cast<VectorType>(resultType))
    f32 = vecType.clone(f32);
  auto toF32 = [&](Value v) -> Value {
    if (v.getType() == f32)
      return v;
    return arith::ExtFOp::create(b, loc, f32, v);
  };
  size_t kpool = keys.size();

  SmallVector<Value> z;
  for (size_t m = 0; m < kpool; ++m)
    z.push_back(arith::AddFOp::create(b, loc, toF32(gates[m]), apes[m]));
  Value maxZ = z[0];
  for (size_t m = 1; m < kpool; ++m)
    maxZ = arith::MaximumFOp::create(b, loc, maxZ, z[m]);

  // Sums in member order, one rounding to T at the end.
  Value sum, acc;
  for (size_t m = 0; m < kpool; ++m) {
    Value e =
        math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, z[m], maxZ));
    Value term = arith::MulFOp::create(b, loc, e, toF32(keys[m]));
    sum = m == 0 ? e : arith::AddFOp::create(b, loc, sum, e).getResult();
    acc = m == 0 ? term : arith::AddFOp::create(b, loc, acc, term).getResult();
  }
  Value out = arith::DivFOp::create(b, loc, acc, sum);
  if (out.getType() != resultType)
    out = arith::TruncFOp::create(b, loc, resultType, out);
  return out;
}

void mlir::kpool::buildPoolRow(OpBuilder &b, Location loc, ValueRange keyRows,
                               ValueRange gateRows, ValueRange apeRows,
                               Value outRow) {
  size_t kpool = keyRows.size();
  SmallVector<Value> inputs;
  llvm::append_range(inputs, keyRows);
  llvm::append_range(inputs, gateRows);
  llvm::append_range(inputs, apeRows);
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps(inputs.size() + 1,
                              AffineMap::getMultiDimIdentityMap(1, ctx));
  SmallVector<utils::IteratorType> iterators = {utils::IteratorType::parallel};
  Type outType = cast<MemRefType>(outRow.getType()).getElementType();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{}, inputs, ValueRange{outRow}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value out = buildPooledChannel(nb, nloc, args.take_front(kpool),
                                       args.slice(kpool, kpool),
                                       args.slice(2 * kpool, kpool), outType);
        linalg::YieldOp::create(nb, nloc, out);
      });
  generic->setAttr(kPoolRowAttrName, b.getUnitAttr());
}
