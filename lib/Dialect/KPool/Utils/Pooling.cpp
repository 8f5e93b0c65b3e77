//===- Pooling.cpp - the kpool pooling arithmetic -------------------------===//

#include "kpool/Dialect/KPool/Utils/Pooling.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

  if (kpool == 1) {
    // One member: z - M is 0 for a finite z, so e = exp(0) = 1 and the
    // function is T(1 * k / 1) = k exactly; for z = +-inf or NaN, z - M is
    // NaN and so is every later value, carrying that NaN (exp, the product
    // and the quotient propagate their NaN operand). The same bits without
    // the exp and the division.
    Value z = arith::AddFOp::create(b, loc, toF32(gates[0]), apes[0]);
    Value d = arith::SubFOp::create(b, loc, z, z);
    Value finite =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ORD, d, d);
    Value out = arith::SelectOp::create(b, loc, finite, toF32(keys[0]), d);
    if (out.getType() != resultType)
      out = arith::TruncFOp::create(b, loc, resultType, out);
    return out;
  }

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
  KPoolDialect::PoolRowAttrHelper(b.getContext())
      .setAttr(generic, b.getUnitAttr());
}

void mlir::kpool::buildPoolRowLoop(OpBuilder &b, Location loc, int64_t kpool,
                                   MemberRowsFn memberRows, Value ape,
                                   Value outRow) {
  MLIRContext *ctx = b.getContext();
  Type outType = cast<MemRefType>(outRow.getType()).getElementType();
  Type f32 = b.getF32Type();
  Block *body = nullptr;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{}, ValueRange{}, ValueRange{outRow},
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(1, ctx)},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location, ValueRange args) {
        body = args.front().getParentBlock();
      });
  KPoolDialect::PoolRowLoopAttrHelper(ctx).setAttr(generic, b.getUnitAttr());

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(body);
  Value d = linalg::IndexOp::create(b, loc, 0);
  auto toF32 = [&](Value v) -> Value {
    if (v.getType() == f32)
      return v;
    return arith::ExtFOp::create(b, loc, f32, v);
  };
  // z_m = f32(gate_m[d]) + ape[m][d], and member m's key row.
  auto member = [&](Value m) -> std::pair<Value, Value> {
    auto [keyRow, gateRow] = memberRows(m);
    Value g = memref::LoadOp::create(b, loc, gateRow, ValueRange{d});
    Value a = memref::LoadOp::create(b, loc, ape, ValueRange{m, d});
    return {arith::AddFOp::create(b, loc, toF32(g), a), keyRow};
  };
  auto key = [&](Value keyRow) {
    return toF32(memref::LoadOp::create(b, loc, keyRow, ValueRange{d}));
  };
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = arith::ConstantIndexOp::create(b, loc, kpool);

  // M = max over m of z_m, from z_0 on in member order.
  auto [z0, key0] = member(zero);
  auto maxLoop = scf::ForOp::create(b, loc, one, count, one, ValueRange{z0});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(maxLoop.getBody());
    Value z = member(maxLoop.getInductionVar()).first;
    Value m = arith::MaximumFOp::create(b, loc, maxLoop.getRegionIterArg(0), z);
    scf::YieldOp::create(b, loc, m);
  }
  Value maxZ = maxLoop.getResult(0);

  // Sums in member order (member 0 starts them, as in the unrolled form).
  Value e0 =
      math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, z0, maxZ));
  Value acc0 = arith::MulFOp::create(b, loc, e0, key(key0));
  auto sumLoop =
      scf::ForOp::create(b, loc, one, count, one, ValueRange{e0, acc0});
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(sumLoop.getBody());
    auto [z, keyRow] = member(sumLoop.getInductionVar());
    Value e =
        math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, z, maxZ));
    Value term = arith::MulFOp::create(b, loc, e, key(keyRow));
    Value sum = arith::AddFOp::create(b, loc, sumLoop.getRegionIterArg(0), e);
    Value acc =
        arith::AddFOp::create(b, loc, sumLoop.getRegionIterArg(1), term);
    scf::YieldOp::create(b, loc, ValueRange{sum, acc});
  }
  Value out =
      arith::DivFOp::create(b, loc, sumLoop.getResult(1), sumLoop.getResult(0));
  if (out.getType() != outType)
    out = arith::TruncFOp::create(b, loc, outType, out);
  linalg::YieldOp::create(b, loc, out);
}
