//===- ExtentChecks.cpp - run-time extents that contradict the op ---------===//

#include "ExtentChecks.h"

#include "Emitter.h"

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/StatusWord.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::kpool;
using namespace mlir::kpool::lowering;
namespace status = ::kpool::status;

/// The Extent finding's word naming dimension `dim` of operand `operand`.
static uint64_t extentWord(const char *operand, int64_t dim) {
  int id = ::kpool::abi::operandId(operand);
  assert(id >= 0 && "an operand the kernel table does not name");
  assert(dim >= 0 && dim < 4 && "views have at most 4 dimensions");
  return status::encodeExtent(uint64_t(id), unsigned(dim));
}

void ExtentChecks::equal(Value memref, int64_t dim, const char *operand,
                         int64_t expected) {
  checks.push_back({memref, dim, extentWord(operand, dim), expected, Value()});
}

void ExtentChecks::atLeast(Value memref, int64_t dim, const char *operand,
                           int64_t least) {
  Check c{memref, dim, extentWord(operand, dim), least, Value()};
  c.atLeast = true;
  checks.push_back(c);
}

void ExtentChecks::sameAs(Value memref, int64_t dim, const char *operand,
                          Value ref, int64_t refDim, int64_t delta) {
  checks.push_back({memref, dim, extentWord(operand, dim), ShapedType::kDynamic,
                    ref, refDim, delta});
}

bool ExtentChecks::isDynamic(const Check &c) {
  if (cast<MemRefType>(c.memref.getType()).isDynamicDim(c.dim))
    return true;
  return c.ref && cast<MemRefType>(c.ref.getType()).isDynamicDim(c.refDim);
}

Value ExtentChecks::expectedOf(const Check &c) {
  if (!c.ref)
    return e.idx(c.expected);
  Value ref = e.dim(c.ref, c.refDim);
  if (c.delta == 0)
    return ref;
  return arith::AddIOp::create(e.b, e.loc, ref, e.idx(c.delta));
}

Value ExtentChecks::fails(const Check &c, Value actual, Value expected) {
  return e.cmp(c.atLeast ? arith::CmpIPredicate::ult : arith::CmpIPredicate::ne,
               actual, expected);
}

Value ExtentChecks::allHold() {
  Value ok;
  for (const Check &c : checks) {
    if (!isDynamic(c))
      continue;
    Value actual = e.dim(c.memref, c.dim);
    Value holds =
        e.cmp(c.atLeast ? arith::CmpIPredicate::sge : arith::CmpIPredicate::eq,
              actual, expectedOf(c));
    ok = e.both(ok, holds);
  }
  return ok;
}

void ExtentChecks::recordFirstFailure() {
  if (!e.status.present())
    return;
  OpBuilder &b = e.b;
  Location loc = e.loc;
  e.status.guard([&] {
    // The word of each check that fails; the first in the list wins.
    SmallVector<std::pair<Value, uint64_t>> words;
    for (const Check &c : checks) {
      if (!isDynamic(c))
        continue;
      words.push_back(
          {fails(c, e.dim(c.memref, c.dim), expectedOf(c)), c.word});
    }
    Value code = e.i64(0);
    for (auto [fail, word] : llvm::reverse(words))
      code = arith::SelectOp::create(b, loc, fail, e.i64(int64_t(word)), code);
    e.status.recordCode(code);
  });
}

void ExtentChecks::guard(function_ref<void()> holds, function_ref<Value()> rows,
                         function_ref<void(Value)> nothing) {
  Value ok = allHold();
  if (!ok)
    return holds();
  bool recordable = e.status.present();
  if (!nothing && !recordable)
    return e.ifThen(ok, holds);
  e.ifThenElse(ok, holds, [&] {
    Value iterations = e.idx(1);
    if (nothing)
      iterations = e.status.withStatusIteration(rows());
    e.parallelFor(
        iterations,
        [&](Value i) {
          if (nothing)
            nothing(i);
          if (recordable)
            e.ifThen(e.cmp(arith::CmpIPredicate::eq, i, e.idx(0)),
                     [&] { recordFirstFailure(); });
        },
        "mismatch");
  });
}

Value ExtentChecks::refined(Value memref) {
  if (Value known = refinements.lookup(memref))
    return known;
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (const Check &c : checks)
    if (c.memref == memref && !c.ref && !c.atLeast &&
        ShapedType::isDynamic(shape[c.dim]))
      shape[c.dim] = c.expected;
  Value result = memref;
  if (ArrayRef<int64_t>(shape) != type.getShape())
    result = memref::CastOp::create(
        e.b, e.loc,
        MemRefType::get(shape, type.getElementType(), type.getLayout(),
                        type.getMemorySpace()),
        memref);
  refinements[memref] = result;
  return result;
}
