//===- Overlap.cpp - operands of one kpool op that must not overlap -------===//
//
// What the verifier can prove about two operands of one op: they are one
// buffer, or views of one buffer that share an element. Anything it cannot
// prove (views through reinterpret_cast, dynamic subviews, function
// arguments that alias at run time) is left to host validation, which
// compares address ranges, and on the GPU to the caller.
//
//===----------------------------------------------------------------------===//

#include "Overlap.h"

#include "kpool/Dialect/KPool/IR/KPoolOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace mlir;

namespace {

/// `value` with `memref.cast`s looked through (a cast is the same buffer).
Value stripCasts(Value value) {
  while (auto cast = value.getDefiningOp<memref::CastOp>())
    value = cast.getSource();
  return value;
}

/// A `memref.subview` of `base` (casts looked through on both sides); the
/// static offsets, sizes and strides are in `base`'s rank, kDynamic where
/// the op has an SSA value.
struct SubView {
  Value base;
  ArrayRef<int64_t> offsets, sizes, strides;
};

std::optional<SubView> asSubView(Value value) {
  auto sub = stripCasts(value).getDefiningOp<memref::SubViewOp>();
  if (!sub)
    return std::nullopt;
  return SubView{stripCasts(sub.getSource()), sub.getStaticOffsets(),
                 sub.getStaticSizes(), sub.getStaticStrides()};
}

/// Whether every size is static and positive: the view then holds at least
/// one element of its base.
bool nonEmpty(const SubView &v) {
  return llvm::all_of(
      v.sizes, [](int64_t s) { return !ShapedType::isDynamic(s) && s > 0; });
}

bool allStatic(ArrayRef<int64_t> values) {
  return llvm::none_of(values, ShapedType::isDynamic);
}

using Int = __int128;

Int floorDiv(Int a, Int b) { // b > 0
  Int q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// The smallest common element of {a + s*i : 0 <= i < n} and
/// {b + t*j : 0 <= j < m} (n, m >= 1; s, t >= 0), if any.
std::optional<int64_t> commonElement(Int a, Int s, Int n, Int b, Int t, Int m) {
  if (n == 1)
    s = 0;
  if (m == 1)
    t = 0;
  auto contains = [](Int x, Int base, Int step, Int count) {
    if (step == 0)
      return x == base;
    Int d = x - base;
    return d >= 0 && d % step == 0 && d / step < count;
  };
  if (s == 0)
    return contains(a, b, t, m) ? std::optional<int64_t>(int64_t(a))
                                : std::nullopt;
  if (t == 0)
    return contains(b, a, s, n) ? std::optional<int64_t>(int64_t(b))
                                : std::nullopt;
  // x = a + s*i = b + t*j: s*i = b - a (mod t). Extended Euclid on (s, t).
  Int r0 = s, r1 = t, x0 = 1, x1 = 0;
  while (r1 != 0) {
    Int q = r0 / r1;
    Int r2 = r0 - q * r1, x2 = x0 - q * x1;
    r0 = r1, r1 = r2, x0 = x1, x1 = x2;
  }
  Int g = r0; // gcd, with s*x0 = g (mod t)
  if ((b - a) % g != 0)
    return std::nullopt;
  Int tg = t / g;
  Int i0 = ((b - a) / g % tg) * (x0 % tg) % tg;
  if (i0 < 0)
    i0 += tg;
  Int period = s * tg; // the solutions are x0 + k * lcm(s, t)
  Int first = a + s * i0;
  Int lo = std::max(a, b);
  Int hi = std::min(a + s * (n - 1), b + t * (m - 1));
  Int x = first - floorDiv(first - lo, period) * period; // smallest >= lo
  if (x < lo || x > hi)
    return std::nullopt;
  return int64_t(x);
}

/// The smallest index of `base` both subviews hold, when both are static.
std::optional<SmallVector<int64_t>> commonIndex(const SubView &x,
                                                const SubView &y) {
  if (x.offsets.size() != y.offsets.size() || !allStatic(x.offsets) ||
      !allStatic(y.offsets) || !allStatic(x.strides) || !allStatic(y.strides) ||
      !nonEmpty(x) || !nonEmpty(y))
    return std::nullopt;
  SmallVector<int64_t> index;
  for (size_t d = 0; d < x.offsets.size(); ++d) {
    if (x.strides[d] < 0 || y.strides[d] < 0)
      return std::nullopt;
    std::optional<int64_t> e =
        commonElement(x.offsets[d], x.strides[d], x.sizes[d], y.offsets[d],
                      y.strides[d], y.sizes[d]);
    if (!e)
      return std::nullopt;
    index.push_back(*e);
  }
  return index;
}

std::string formatList(ArrayRef<int64_t> values) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return str;
}

/// Why `a` and `b` provably overlap (the end of a diagnostic), or nothing.
std::optional<std::string> overlap(Value a, StringRef aName, Value b,
                                   StringRef bName) {
  if (stripCasts(a) == stripCasts(b))
    return std::string("got the same buffer");
  std::optional<SubView> va = asSubView(a), vb = asSubView(b);
  auto viewOfOther = [](const SubView &v, StringRef vName, Value whole,
                        StringRef wholeName) -> std::optional<std::string> {
    if (v.base != stripCasts(whole) || !nonEmpty(v))
      return std::nullopt;
    return ("got '" + vName + "' as a subview of '" + wholeName +
            "' with sizes " + formatList(v.sizes))
        .str();
  };
  if (va)
    if (auto why = viewOfOther(*va, aName, b, bName))
      return why;
  if (vb)
    if (auto why = viewOfOther(*vb, bName, a, aName))
      return why;
  if (va && vb && va->base == vb->base)
    if (auto index = commonIndex(*va, *vb))
      return "got subviews of one buffer that both hold its element " +
             formatList(*index);
  return std::nullopt;
}

/// The first pair of `op`'s operands that must not overlap and provably do
/// (the written one first), and why.
struct Overlap {
  OpOperand *written, *other;
  std::string why;
};

std::optional<Overlap> firstOverlap(Operation *op, ArrayRef<StringRef> names) {
  auto dps = cast<DestinationStyleOpInterface>(op);
  auto nameOf = [&](OpOperand &o) {
    return o.getOperandNumber() < names.size() ? names[o.getOperandNumber()]
                                               : StringRef();
  };
  for (OpOperand &second : op->getOpOperands()) {
    if (!isa<MemRefType>(second.get().getType()))
      continue;
    for (OpOperand &first : op->getOpOperands()) {
      if (first.getOperandNumber() >= second.getOperandNumber())
        break;
      if (!isa<MemRefType>(first.get().getType()))
        continue;
      if (!dps.isDpsInit(&first) && !dps.isDpsInit(&second))
        continue;
      // The written operand is named first (the later one when both are).
      OpOperand &written = dps.isDpsInit(&second) ? second : first;
      OpOperand &other = &written == &second ? first : second;
      if (std::optional<std::string> why = overlap(
              written.get(), nameOf(written), other.get(), nameOf(other)))
        return Overlap{&written, &other, *why};
    }
  }
  return std::nullopt;
}

} // namespace

LogicalResult
mlir::kpool::verifyNoOverlappingOperands(Operation *op,
                                         ArrayRef<StringRef> names) {
  std::optional<Overlap> found = firstOverlap(op, names);
  if (!found)
    return success();
  return op->emitOpError() << "expected '"
                           << names[found->written->getOperandNumber()]
                           << "' (written by the op) not to overlap '"
                           << names[found->other->getOperandNumber()] << "', "
                           << found->why;
}

bool mlir::kpool::hasOverlappingOperands(Operation *op) {
  return firstOverlap(op, {}).has_value();
}
