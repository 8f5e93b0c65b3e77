//===- Emitter.cpp - IR emission for one lowered kpool op -----------------===//

#include "Emitter.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/SaveAndRestore.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;

Emitter::Emitter(OpBuilder &b, Location loc, const KernelSpec &spec,
                 Value statusWord, const CacheDest &cacheDest)
    : MetadataBuilder(b, loc, spec.kpool), b(b), loc(loc), kpool(spec.kpool),
      headDim(spec.headDim), cache(*this, cacheDest),
      status(*this, statusWord), kernelName(spec.name),
      prefetchPools(spec.prefetchPools), unrollMembers(spec.unrollMembers) {}

//===----------------------------------------------------------------------===//
// Values and conditions
//===----------------------------------------------------------------------===//

Value Emitter::dim(Value memref, int64_t d) {
  return memref::DimOp::create(b, loc, memref, d);
}

Value Emitter::cmp(arith::CmpIPredicate pred, Value lhs, Value rhs) {
  return arith::CmpIOp::create(b, loc, pred, lhs, rhs);
}

Value Emitter::i1(bool v) {
  return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v);
}

Value Emitter::both(Value lhs, Value rhs) {
  if (!lhs || !rhs)
    return lhs ? lhs : rhs;
  return arith::AndIOp::create(b, loc, lhs, rhs);
}

int64_t Emitter::innermostStride(MemRefType type) {
  auto [strides, offset] = type.getStridesAndOffset();
  return strides.empty() ? 1 : strides.back();
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

Value Emitter::channelView(Value memref, ArrayRef<OpFoldResult> leading) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(leading);
  offsets.push_back(b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes(rank - 1, b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(headDim));
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  // The kept dimension is the innermost one, with its stride. The result
  // type is spelled out: with head_dim 1 every size is 1, and the inferred
  // rank reduction may keep an outer dimension and its stride instead
  // (strided<[8]> for a row of a [?, 1] view with row stride 8).
  int64_t inner = innermostStride(type);
  auto full = cast<MemRefType>(
      memref::SubViewOp::inferResultType(type, offsets, sizes, strides));
  int64_t fullOffset = full.getStridesAndOffset().second;
  auto reduced = MemRefType::get(
      {headDim}, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), fullOffset, {inner}),
      type.getMemorySpace());
  Value view = memref::SubViewOp::create(b, loc, reduced, memref, offsets,
                                         sizes, strides);
  auto layout =
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                             {inner == 1 ? 1 : ShapedType::kDynamic});
  auto viewType = MemRefType::get({headDim}, type.getElementType(), layout,
                                  type.getMemorySpace());
  if (view.getType() != viewType)
    view = memref::CastOp::create(b, loc, viewType, view);
  return view;
}

Value Emitter::rowView(Value memref, Value row) {
  return channelView(memref, {toIndex(row)});
}

Value Emitter::ringView(Value tail, Value slot, int64_t which, Value row) {
  IntegerAttr staticRow;
  OpFoldResult rowIndex = matchPattern(row, m_Constant(&staticRow))
                              ? OpFoldResult(b.getIndexAttr(staticRow.getInt()))
                              : OpFoldResult(toIndex(row));
  return channelView(tail, {toIndex(slot), b.getIndexAttr(which), rowIndex});
}

Value Emitter::selectView(Value cond, Value lhs, Value rhs) {
  if (lhs.getType() != rhs.getType()) {
    auto type = cast<MemRefType>(lhs.getType());
    auto layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                                         {ShapedType::kDynamic});
    auto dynType = MemRefType::get(type.getShape(), type.getElementType(),
                                   layout, type.getMemorySpace());
    lhs = memref::CastOp::create(b, loc, dynType, lhs);
    rhs = memref::CastOp::create(b, loc, dynType, rhs);
  }
  return arith::SelectOp::create(b, loc, cond, lhs, rhs);
}

void Emitter::versionOnUnitStride(ArrayRef<Value> memrefs,
                                  function_ref<void(ArrayRef<Value>)> fn) {
  Value unit;
  SmallVector<std::pair<size_t, MemRefType>> unitTypes;
  for (auto [i, memref] : llvm::enumerate(memrefs)) {
    auto type = cast<MemRefType>(memref.getType());
    if (!ShapedType::isDynamic(innermostStride(type)))
      continue;
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value isUnit =
        cmp(arith::CmpIPredicate::eq, meta.getStrides().back(), idx(1));
    unit = unit ? arith::AndIOp::create(b, loc, unit, isUnit).getResult()
                : isUnit;
    auto [strides, offset] = type.getStridesAndOffset();
    strides.back() = 1;
    unitTypes.push_back(
        {i, MemRefType::get(
                type.getShape(), type.getElementType(),
                StridedLayoutAttr::get(b.getContext(), offset, strides),
                type.getMemorySpace())});
  }
  if (!unit)
    return fn(memrefs);
  ifThenElse(
      unit,
      [&] {
        SmallVector<Value> unitOperands(memrefs);
        for (auto [i, type] : unitTypes)
          unitOperands[i] = memref::CastOp::create(b, loc, type, memrefs[i]);
        fn(unitOperands);
      },
      [&] {
        // The general-stride copy of the op's loops is a kernel of its own.
        llvm::SaveAndRestore<bool> general(generalStrides, true);
        fn(memrefs);
      });
}

void Emitter::versionWithCache(ArrayRef<Value> memrefs,
                               function_ref<void(ArrayRef<Value>)> fn) {
  if (!cache.present())
    return versionOnUnitStride(memrefs, fn);
  SmallVector<Value> all(memrefs);
  all.push_back(cache.keys());
  versionOnUnitStride(all, [&](ArrayRef<Value> v) {
    cache.withKeys(v.back(), [&] { fn(v.drop_back()); });
  });
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

void Emitter::ifThen(Value cond, function_ref<void()> fn) {
  if (!cond)
    return fn();
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  fn();
}

void Emitter::ifThenOtherwise(Value cond, function_ref<void()> thenFn,
                              function_ref<void()> elseFn) {
  if (!cond)
    return thenFn();
  ifThenElse(cond, thenFn, elseFn);
}

void Emitter::ifThenElse(Value cond, function_ref<void()> thenFn,
                         function_ref<void()> elseFn) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  thenFn();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  elseFn();
}

void Emitter::parallelFor(Value ub, function_ref<void(Value)> fn,
                          StringRef variant) {
  auto par = scf::ParallelOp::create(b, loc, ValueRange{idx(0)},
                                     ValueRange{ub}, ValueRange{idx(1)});
  std::string name = "kpool_" + kernelName;
  if (!variant.empty())
    name += ("_" + variant).str();
  if (generalStrides)
    name += "_strided";
  KPoolDialect::KernelAttrHelper(b.getContext())
      .setAttr(par, b.getStringAttr(name));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(par.getBody());
  fn(par.getInductionVars()[0]);
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

void Emitter::poolRow(ArrayRef<Value> keys, ArrayRef<Value> gates, Value ape,
                      Value outRow) {
  SmallVector<Value> apes;
  for (int64_t m = 0; m < kpool; ++m)
    apes.push_back(channelView(ape, {b.getIndexAttr(m)}));
  buildPoolRow(b, loc, keys, gates, apes, outRow);
}

void Emitter::poolRowLoop(function_ref<std::pair<Value, Value>(Value)> member,
                          Value ape, Value outRow) {
  buildPoolRowLoop(
      b, loc, kpool, [&](Value m) { return member(toI64(m)); }, ape, outRow);
}

Value Emitter::zeroRow(Value outRow) {
  Type elt = cast<MemRefType>(outRow.getType()).getElementType();
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
  linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{outRow});
  return outRow;
}

void Emitter::prefetchMembers(Value k, Value gate, Value first,
                              Value numRows) {
  if (prefetchPools <= 0 || kpool > kMaxUnrolledMembers)
    return;
  Value last = arith::SubIOp::create(b, loc, numRows, i64(1));
  Value ahead =
      arith::AddIOp::create(b, loc, first, i64(prefetchPools * kpool));
  for (int64_t m = 0; m < kpool; ++m) {
    Value member =
        m ? arith::AddIOp::create(b, loc, ahead, i64(m)).getResult() : ahead;
    Value row = toIndex(arith::MinSIOp::create(b, loc, member, last));
    for (Value rows : {k, gate}) {
      auto type = cast<MemRefType>(rows.getType());
      // Channels per 64-byte cache line.
      int64_t perLine = std::max<int64_t>(
          1, 512 / std::max<int64_t>(1, type.getElementTypeBitWidth()));
      for (int64_t c = 0; c < headDim; c += perLine)
        memref::PrefetchOp::create(b, loc, rows, ValueRange{row, idx(c)},
                                   /*isWrite=*/false, /*localityHint=*/3,
                                   /*isDataCache=*/true);
    }
  }
}

//===----------------------------------------------------------------------===//
// Batches
//===----------------------------------------------------------------------===//

Value Emitter::batchSize(ArrayRef<BatchOperand> operands) {
  SmallVector<Value> sizes;
  for (auto [memref, delta] : operands) {
    Value size = dim(memref, 0);
    if (delta != 0)
      size = arith::SubIOp::create(b, loc, size, idx(delta));
    sizes.push_back(size);
  }
  return minIndex(sizes);
}

Value Emitter::tokenRows(Value k, Value gate) {
  return toI64(minIndex({dim(k, 0), dim(gate, 0)}));
}

Value Emitter::noRowLimit() { return i64(int64_t(1) << 32); }
