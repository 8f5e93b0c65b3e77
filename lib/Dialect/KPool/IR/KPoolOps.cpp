//===- KPoolOps.cpp - kpool operations and verifiers ----------------------===//
//
// Every static mistake of the spec's "Bad input" list is a verifier error
// that names the operand, the expected shape or type and the actual one.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/IR/KPoolOps.h"

#include "OperandChecker.h"
#include "Overlap.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::kpool;
using mlir::kpool::detail::OperandChecker;

bool mlir::kpool::isSupportedElementType(Type type) {
  return type.isBF16() || type.isF16() || type.isF32();
}

bool mlir::kpool::isMetadataElementType(Type type) {
  auto intType = dyn_cast<IntegerType>(type);
  return intType && intType.getWidth() == 32 &&
         (intType.isSignless() || intType.isUnsigned());
}

namespace {

/// Whether `operand` is `op`'s status word.
bool isStatusOperand(Operation *op, OpOperand &operand) {
  auto is = [&](MutableOperandRange range) {
    for (OpOperand &o : range)
      if (&o == &operand)
        return true;
    return false;
  };
  return TypeSwitch<Operation *, bool>(op)
      .Case<CompressOp, SeedTailOp, RingCloseOp, PoolOffsetsOp, StepOp>(
          [&](auto op) { return is(op.getStatusMutable()); })
      .Default([](Operation *) { return false; });
}

/// Whether `init` is one of `op`'s pool-cache operands.
template <typename OpTy> bool isCacheInit(OpTy op, OpOperand &init) {
  for (MutableOperandRange range :
       {op.getCacheKeysMutable(), op.getCacheScalesMutable()})
    for (OpOperand &operand : range)
      if (&operand == &init)
        return true;
  return false;
}

} // namespace

void mlir::kpool::getKernelOpEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  auto dps = cast<DestinationStyleOpInterface>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    bool init = dps.isDpsInit(&operand);
    if (!init || readsInit(op, operand))
      effects.emplace_back(MemoryEffects::Read::get(), &operand, /*stage=*/0,
                           /*effectOnFullRegion=*/true,
                           SideEffects::DefaultResource::get());
    if (init)
      effects.emplace_back(MemoryEffects::Write::get(), &operand, /*stage=*/1,
                           /*effectOnFullRegion=*/true,
                           SideEffects::DefaultResource::get());
  }
}

bool mlir::kpool::readsInit(Operation *op, OpOperand &init) {
  // The status word keeps its smallest finding: its old value is read.
  if (isStatusOperand(op, init))
    return true;
  if (auto close = dyn_cast<RingCloseOp>(op))
    return isCacheInit(close, init);
  if (auto step = dyn_cast<StepOp>(op))
    return &init == &step.getPooledMutable() ||
           &init == &step.getTailMutable() || isCacheInit(step, init);
  return true;
}

//===----------------------------------------------------------------------===//
// CompressOp
//===----------------------------------------------------------------------===//

LogicalResult CompressOp::verify() {
  OperandChecker c(*this);
  int64_t kpool = getKpool(), headDim = getHeadDim();
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getK(), "k"},
      {getGate(), "gate"},
      {getApe(), "ape"},
      {getInputRowOffsets(), "input_row_offsets"},
      {getPoolRowOffsets(), "pool_row_offsets"},
      {getCacheLengths(), "cache_lengths"},
      {getPooled(), "pooled"}};
  OperandChecker::addCacheOperands(operands, getBlockTable(), getCacheKeys(),
                                   getCacheScales());
  if (failed(c.checkGeometry(kpool, headDim)) ||
      failed(c.checkForm(operands, *this, getStatus())) ||
      failed(c.checkKeysAndGates(getK(), getGate(), headDim)) ||
      failed(c.checkApe(getApe(), kpool, headDim)) ||
      failed(c.checkMetadata(getInputRowOffsets(), "input_row_offsets")) ||
      failed(c.checkMetadata(getPoolRowOffsets(), "pool_row_offsets")) ||
      failed(c.checkMetadata(getCacheLengths(), "cache_lengths")))
    return failure();
  FailureOr<int64_t> batch =
      c.checkBatch({{getCacheLengths(), "cache_lengths", 0},
                    {getInputRowOffsets(), "input_row_offsets", 1},
                    {getPoolRowOffsets(), "pool_row_offsets", 1}});
  if (failed(batch) ||
      failed(c.checkPooledRows(getPooled(), getK(), headDim)) ||
      failed(c.checkCache(getBlockTable(), getCacheKeys(), getCacheScales(),
                          getRotate(), getScale(), getK(), headDim, *batch)))
    return failure();
  return verifyNoOverlappingOperands(
      *this,
      operandNames(*this, {"k", "gate", "ape", "input_row_offsets",
                           "pool_row_offsets", "cache_lengths", "block_table",
                           "pooled", "cache_keys", "cache_scales", "status"}));
}

//===----------------------------------------------------------------------===//
// SeedTailOp
//===----------------------------------------------------------------------===//

LogicalResult SeedTailOp::verify() {
  OperandChecker c(*this);
  int64_t kpool = getKpool(), headDim = getHeadDim();
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getK(), "k"},
      {getGate(), "gate"},
      {getInputRowOffsets(), "input_row_offsets"},
      {getCacheLengths(), "cache_lengths"},
      {getSlotIdx(), "slot_idx"},
      {getTail(), "tail"}};
  if (failed(c.checkGeometry(kpool, headDim)) ||
      failed(c.checkForm(operands, *this, getStatus())))
    return failure();
  if (failed(c.checkRingRequests(getK(), getGate(), getTail(),
                                 getInputRowOffsets(), getCacheLengths(),
                                 getSlotIdx(), kpool, headDim)))
    return failure();
  return verifyNoOverlappingOperands(
      *this,
      operandNames(*this, {"k", "gate", "input_row_offsets", "cache_lengths",
                           "slot_idx", "num_requests", "tail", "status"}));
}

//===----------------------------------------------------------------------===//
// RingCloseOp
//===----------------------------------------------------------------------===//

LogicalResult RingCloseOp::verify() {
  OperandChecker c(*this);
  int64_t kpool = getKpool(), headDim = getHeadDim();
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getTail(), "tail"},
      {getK(), "k"},
      {getGate(), "gate"},
      {getApe(), "ape"},
      {getInputRowOffsets(), "input_row_offsets"},
      {getCacheLengths(), "cache_lengths"},
      {getSlotIdx(), "slot_idx"},
      {getPooled(), "pooled"},
      {getClosedPool(), "closed_pool"}};
  OperandChecker::addCacheOperands(operands, getBlockTable(), getCacheKeys(),
                                   getCacheScales());
  if (failed(c.checkGeometry(kpool, headDim)) ||
      failed(c.checkForm(operands, *this, getStatus())))
    return failure();
  FailureOr<int64_t> batch = c.checkRingCloseInputs(
      getK(), getGate(), getTail(), getApe(), getInputRowOffsets(),
      getCacheLengths(), getSlotIdx(), kpool, headDim);
  if (failed(batch) ||
      failed(c.checkClosedOutputs(getPooled(), "pooled", getClosedPool(),
                                  getK(), *batch, headDim)) ||
      failed(c.checkCache(getBlockTable(), getCacheKeys(), getCacheScales(),
                          getRotate(), getScale(), getK(), headDim, *batch)))
    return failure();
  return verifyNoOverlappingOperands(
      *this,
      operandNames(*this, {"tail", "k", "gate", "ape", "input_row_offsets",
                           "cache_lengths", "slot_idx", "num_requests",
                           "block_table", "pooled", "closed_pool", "cache_keys",
                           "cache_scales", "status"}));
}

//===----------------------------------------------------------------------===//
// PoolOffsetsOp
//===----------------------------------------------------------------------===//

LogicalResult PoolOffsetsOp::verify() {
  OperandChecker c(*this);
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getInputRowOffsets(), "input_row_offsets"},
      {getCacheLengths(), "cache_lengths"},
      {getPoolRowOffsets(), "pool_row_offsets"}};
  if (failed(c.checkKPool(getKpool())) ||
      failed(c.checkForm(operands, *this, getStatus())) ||
      failed(c.checkMetadata(getInputRowOffsets(), "input_row_offsets")) ||
      failed(c.checkMetadata(getCacheLengths(), "cache_lengths")) ||
      failed(c.checkMetadata(getPoolRowOffsets(), "pool_row_offsets")) ||
      failed(c.checkBatch({{getCacheLengths(), "cache_lengths", 0},
                           {getInputRowOffsets(), "input_row_offsets", 1},
                           {getPoolRowOffsets(), "pool_row_offsets", 1}})))
    return failure();
  return verifyNoOverlappingOperands(
      *this, operandNames(*this, {"input_row_offsets", "cache_lengths",
                                  "pool_row_offsets", "status"}));
}

//===----------------------------------------------------------------------===//
// StepOp
//===----------------------------------------------------------------------===//

LogicalResult StepOp::verify() {
  OperandChecker c(*this);
  int64_t kpool = getKpool(), headDim = getHeadDim();
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getK(), "k"},
      {getGate(), "gate"},
      {getApe(), "ape"},
      {getInputRowOffsets(), "input_row_offsets"},
      {getCacheLengths(), "cache_lengths"},
      {getSlotIdx(), "slot_idx"},
      {getClosed(), "closed"},
      {getClosedPool(), "closed_pool"},
      {getPoolRowOffsets(), "pool_row_offsets"},
      {getPooled(), "pooled"},
      {getTail(), "tail"}};
  OperandChecker::addCacheOperands(operands, getBlockTable(), getCacheKeys(),
                                   getCacheScales());
  if (failed(c.checkGeometry(kpool, headDim)) ||
      failed(c.checkForm(operands, *this, getStatus())))
    return failure();
  if (failed(c.checkRingCloseInputs(getK(), getGate(), getTail(), getApe(),
                                    getInputRowOffsets(), getCacheLengths(),
                                    getSlotIdx(), kpool, headDim)) ||
      failed(c.checkMetadata(getPoolRowOffsets(), "pool_row_offsets")))
    return failure();
  FailureOr<int64_t> all =
      c.checkBatch({{getCacheLengths(), "cache_lengths", 0},
                    {getInputRowOffsets(), "input_row_offsets", 1},
                    {getSlotIdx(), "slot_idx", 0},
                    {getPoolRowOffsets(), "pool_row_offsets", 1}});
  if (failed(all) ||
      failed(c.checkClosedOutputs(getClosed(), "closed", getClosedPool(),
                                  getK(), *all, headDim)) ||
      failed(c.checkPooledRows(getPooled(), getK(), headDim)) ||
      failed(c.checkCache(getBlockTable(), getCacheKeys(), getCacheScales(),
                          getRotate(), getScale(), getK(), headDim, *all)))
    return failure();
  return verifyNoOverlappingOperands(
      *this, operandNames(*this, {"k", "gate", "ape", "input_row_offsets",
                                  "cache_lengths", "slot_idx", "num_requests",
                                  "block_table", "closed", "closed_pool",
                                  "pool_row_offsets", "pooled", "tail",
                                  "cache_keys", "cache_scales", "status"}));
}

//===----------------------------------------------------------------------===//
// CacheEntryOp
//===----------------------------------------------------------------------===//

LogicalResult CacheEntryOp::verify() {
  auto value = cast<MemRefType>(getValue().getType());
  auto entry = cast<MemRefType>(getEntry().getType());
  if (value.getDimSize(0) != entry.getDimSize(0) ||
      ShapedType::isDynamic(value.getDimSize(0)))
    return emitOpError() << "expected 'value' and 'entry' to have the same "
                            "static length, got "
                         << value << " and " << entry;
  Type elt = entry.getElementType();
  bool fp8 = isa<Float8E4M3FNType>(elt);
  if (!fp8 && elt != value.getElementType())
    return emitOpError() << "expected 'entry' element type to be "
                         << value.getElementType()
                         << " (the element type of 'value') or f8E4M3FN, got "
                         << elt;
  if (fp8 != bool(getScale()))
    return emitOpError() << (fp8 ? "expected a 'scale' with an f8E4M3FN entry"
                                 : "expected no 'scale' with an entry of the "
                                   "value's element type");
  if (getRotate() == Rotate::hadamard &&
      !llvm::isPowerOf2_64(value.getDimSize(0)))
    return emitOpError() << "expected a power-of-two length for "
                            "rotate(hadamard), got "
                         << value.getDimSize(0);
  return success();
}

void CacheEntryOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getValueMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getEntryMutable(),
                       SideEffects::DefaultResource::get());
  for (OpOperand &scale : getScaleMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &scale,
                         SideEffects::DefaultResource::get());
}

//===----------------------------------------------------------------------===//
// Custom assembly directives
//===----------------------------------------------------------------------===//
//
// The clauses of the kpool ops' syntax, parsed so that a mistake is reported
// with what the clause must hold (e.g. "expected 6 operands in 'ins' (k,
// gate, ape, input_row_offsets, pool_row_offsets, cache_lengths), got 5")
// rather than the generic parser's "expected ','". They print exactly what
// the declarative format printed.

namespace {

/// Parses `keyword(%a, %b, ... : type, type, ...)` into `operands` and
/// `types`, one each per name in `names` (comma-separated, for the
/// messages).
ParseResult
parseOperandGroupImpl(OpAsmParser &parser, StringRef keyword, StringRef names,
                      ArrayRef<OpAsmParser::UnresolvedOperand *> operands,
                      ArrayRef<Type *> types) {
  size_t expected = operands.size();
  auto count = [](size_t n, StringRef what) {
    return std::to_string(n) + " " + what.str() + (n == 1 ? "" : "s");
  };
  std::string group = ("'" + keyword + "' (" + names + ")").str();
  if (failed(parser.parseOptionalKeyword(keyword)))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '" << keyword << "(" << names << " : "
           << (expected == 1 ? "<type>" : "<types>") << ")'";
  if (failed(parser.parseOptionalLParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '(' after '" << keyword << "'";
  SMLoc operandsLoc = parser.getCurrentLocation();
  SmallVector<OpAsmParser::UnresolvedOperand> parsedOperands;
  if (parser.parseOperandList(parsedOperands))
    return failure();
  if (parsedOperands.size() != expected)
    return parser.emitError(operandsLoc)
           << "expected " << count(expected, "operand") << " in " << group
           << ", got " << parsedOperands.size();
  if (failed(parser.parseOptionalColon()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected ':' and " << count(expected, "type") << " in " << group;
  SMLoc typesLoc = parser.getCurrentLocation();
  SmallVector<Type> parsedTypes;
  if (parser.parseTypeList(parsedTypes))
    return failure();
  if (parsedTypes.size() != expected)
    return parser.emitError(typesLoc)
           << "expected " << count(expected, "type") << " in " << group
           << ", got " << parsedTypes.size();
  if (failed(parser.parseOptionalRParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected ')' to end " << group;
  for (auto [operand, parsed] : llvm::zip_equal(operands, parsedOperands))
    *operand = parsed;
  for (auto [type, parsed] : llvm::zip_equal(types, parsedTypes))
    *type = parsed;
  return success();
}

/// `custom<OperandGroup>(keyword, names, $a, $b, ..., type($a), type($b),
/// ...)`: the operands, then their types, in the same order.
template <typename... Args>
ParseResult parseOperandGroup(OpAsmParser &parser, StringRef keyword,
                              StringRef names, Args &...args) {
  static_assert(sizeof...(Args) % 2 == 0, "one type per operand");
  SmallVector<OpAsmParser::UnresolvedOperand *> operands;
  SmallVector<Type *> types;
  auto add = [&](auto &arg) {
    if constexpr (std::is_same_v<std::decay_t<decltype(arg)>, Type>)
      types.push_back(&arg);
    else
      operands.push_back(&arg);
  };
  (add(args), ...);
  return parseOperandGroupImpl(parser, keyword, names, operands, types);
}

template <typename... Args>
void printOperandGroup(OpAsmPrinter &printer, Operation *, StringRef keyword,
                       StringRef, Args... args) {
  SmallVector<Value> values;
  SmallVector<Type> types;
  auto add = [&](auto arg) {
    if constexpr (std::is_convertible_v<decltype(arg), Type>)
      types.push_back(arg);
    else
      values.push_back(arg);
  };
  (add(args), ...);
  printer << keyword << "(";
  printer.printOperands(values);
  printer << " : ";
  llvm::interleaveComma(types, printer);
  printer << ")";
}

/// `custom<IntegerClause>(keyword, what, $attr)`: `keyword(<i64>)`.
ParseResult parseIntegerClause(OpAsmParser &parser, StringRef keyword,
                               StringRef what, IntegerAttr &attr) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '" << keyword << "(<" << what << ">)'";
  if (failed(parser.parseOptionalLParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '(' after '" << keyword << "'";
  SMLoc loc = parser.getCurrentLocation();
  Attribute value;
  if (parser.parseAttribute(value, parser.getBuilder().getI64Type()))
    return failure();
  attr = dyn_cast<IntegerAttr>(value);
  if (!attr)
    return parser.emitError(loc)
           << "expected an integer in '" << keyword << "(<" << what << ">)'";
  if (failed(parser.parseOptionalRParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected ')' after '" << keyword << "(" << attr.getInt() << "'";
  return success();
}

void printIntegerClause(OpAsmPrinter &printer, Operation *, StringRef keyword,
                        StringRef, IntegerAttr attr) {
  printer << keyword << "(";
  printer.printAttributeWithoutType(attr);
  printer << ")";
}

/// `custom<ValueClause>(keyword, what, $operand)`: `keyword(%value)`.
ParseResult parseValueClause(OpAsmParser &parser, StringRef keyword,
                             StringRef what,
                             OpAsmParser::UnresolvedOperand &operand) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '" << keyword << "(%value)' (" << what << ")";
  if (failed(parser.parseOptionalLParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected '(' after '" << keyword << "'";
  if (parser.parseOperand(operand))
    return failure();
  if (failed(parser.parseOptionalRParen()))
    return parser.emitError(parser.getCurrentLocation())
           << "expected ')' after the operand of '" << keyword
           << "' (one value: " << what << ")";
  return success();
}

void printValueClause(OpAsmPrinter &printer, Operation *, StringRef keyword,
                      StringRef, Value value) {
  printer << keyword << "(" << value << ")";
}

} // namespace

#define GET_OP_CLASSES
#include "kpool/Dialect/KPool/IR/KPoolOps.cpp.inc"
