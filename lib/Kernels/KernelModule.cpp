//===- KernelModule.cpp - the kpool kernel ABI as IR ----------------------===//

#include "kpool/Kernels/KernelModule.h"

#include "kpool/Dialect/KPool/IR/KPoolDialect.h"
#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::kpool;
namespace abi = ::kpool::abi;

std::string mlir::kpool::kernelFunctionName(StringRef prefix,
                                            abi::KernelId id) {
  return (prefix + abi::kernel(id).name + "_memref").str();
}

std::string mlir::kpool::kernelPrefix(KPoolElementType type, int64_t headDim,
                                      int64_t kpool) {
  return "kpool_" + std::string(::kpool::elementTypeName(type)) + "_d" +
         std::to_string(headDim) + "_k" + std::to_string(kpool) + "_";
}

std::string mlir::kpool::poolOffsetsPrefix(int64_t kpool) {
  return "kpool_offsets_k" + std::to_string(kpool) + "_";
}

// The dialect's pool-cache attributes (IR syntax, in ODS) have the values of
// the ABI leaf's cache format: the one place the two are tied.
static_assert(int(Rotate::none) == KPOOL_ROTATE_NONE &&
              int(Rotate::hadamard) == KPOOL_ROTATE_HADAMARD);
static_assert(int(Scale::absmax) == KPOOL_SCALE_ABSMAX &&
              int(Scale::pow2) == KPOOL_SCALE_POW2);

bool mlir::kpool::hasKernel(abi::KernelId id, bool poolOffsetsOnly,
                            const ::kpool::CacheFormat &cache) {
  if (poolOffsetsOnly)
    return id == abi::KernelId::PoolOffsets;
  return !abi::isCacheKernel(id) || cache.entry != ::kpool::CacheEntry::None;
}

std::string mlir::kpool::cacheFormatPrefix(const ::kpool::CacheFormat &cache) {
  using ::kpool::CacheEntry;
  if (cache.entry == CacheEntry::None)
    return "";
  std::string out = std::string(::kpool::cacheEntryName(cache.entry)) + "_" +
                    ::kpool::cacheRotateName(cache.rotate) + "_";
  if (cache.entry == CacheEntry::FP8)
    out += std::string(::kpool::cacheScaleName(cache.scale)) + "_";
  return out;
}

/// The argument type of `operand`: a strided memref of its rank with every
/// extent, stride and the offset dynamic, or the scalar's type. The extents
/// the table fixes ('D', 'K', a number) are dynamic too: a raw entry point
/// may be handed any sizes, and the op's own run-time extent checks
/// (convert-kpool-to-linalg) then see them, record the Extent finding and
/// write nothing; past the checks the lowering casts the operands back to
/// the static extents, so the kernels' code is the same.
static Type argumentType(OpBuilder &b, const abi::Operand &operand,
                         Type element, Type cacheEntry) {
  Type kind = operand.kind == abi::Kind::Element      ? element
              : operand.kind == abi::Kind::CacheEntry ? cacheEntry
              : operand.kind == abi::Kind::F32 ||
                      operand.kind == abi::Kind::CacheScale
                  ? Type(b.getF32Type())
              : operand.kind == abi::Kind::U64        ? Type(b.getI64Type())
                                                      : Type(b.getI32Type());
  if (operand.kind == abi::Kind::Stream)
    return LLVM::LLVMPointerType::get(b.getContext());
  if (operand.role == abi::Role::Scalar)
    return kind;
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<int64_t> shape;
  for (StringRef dim : llvm::split(StringRef(operand.shape), 'x')) {
    int64_t extent;
    if (!dim.empty() && dim.front() >= '0' && dim.front() <= '9' &&
        dim.getAsInteger(10, extent))
      llvm_unreachable("KernelABI.def: a dimension is not a number");
    shape.push_back(dyn);
  }
  SmallVector<int64_t> strides(shape.size(), dyn);
  return MemRefType::get(shape, kind,
                         StridedLayoutAttr::get(b.getContext(), dyn, strides));
}

OwningOpRef<ModuleOp>
mlir::kpool::buildKernelModule(MLIRContext &ctx, KPoolElementType type,
                               int64_t headDim, int64_t kpool, StringRef prefix,
                               bool poolOffsetsOnly,
                               const ::kpool::CacheFormat &cache) {
  ctx.loadDialect<func::FuncDialect, memref::MemRefDialect, arith::ArithDialect,
                  LLVM::LLVMDialect, KPoolDialect>();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  Type element = type == KPOOL_BF16  ? Type(b.getBF16Type())
                 : type == KPOOL_F16 ? Type(b.getF16Type())
                                     : Type(b.getF32Type());
  using ::kpool::CacheEntry;
  bool fp8 = cache.entry == CacheEntry::FP8;
  Type cacheEntry = fp8 ? Type(b.getType<Float8E4M3FNType>()) : element;
  for (const abi::Kernel &kernel : abi::kernels) {
    if (!hasKernel(kernel.id, poolOffsetsOnly, cache))
      continue;
    bool cacheKernel = abi::isCacheKernel(kernel.id);
    SmallVector<Type> args;
    for (const abi::Operand &operand :
         ArrayRef(kernel.operands, kernel.numOperands))
      args.push_back(argumentType(b, operand, element, cacheEntry));
    auto fn =
        func::FuncOp::create(b, loc, kernelFunctionName(prefix, kernel.id),
                             b.getFunctionType(args, {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fn.addEntryBlock());

    // The op takes its `ins` (inputs and scalars) first, then its `outs`;
    // the entry point takes the outputs first.
    // A `*_cache` kernel is its op with the pool-cache destination.
    OperationState state(loc, (KPoolDialect::getDialectNamespace() + "." +
                               abi::opName(kernel.id))
                                  .str());
    state.addAttribute("kpool", b.getI64IntegerAttr(kpool));
    if (kernel.geometry == abi::Geometry::KPoolHeadDim)
      state.addAttribute("head_dim", b.getI64IntegerAttr(headDim));
    if (cacheKernel) {
      state.addAttribute(
          "rotate", RotateAttr::get(&ctx, static_cast<Rotate>(cache.rotate)));
      if (fp8)
        state.addAttribute(
            "scale", ScaleAttr::get(&ctx, static_cast<Scale>(cache.scale)));
    }
    // Operand segments of the ops with an optional pool-cache destination:
    // `block_table` after the inputs, `cache_keys` and `cache_scales` after
    // the outputs, each 1 in a `*_cache` kernel (`cache_scales` only for
    // FP8 entries: the argument is then ignored) and 0 otherwise; then the
    // status word, the op's last `outs` (always there: an empty one records
    // nothing).
    SmallVector<int32_t> segments;
    for (bool outputs : {false, true}) {
      for (auto [operand, arg] :
           llvm::zip(ArrayRef(kernel.operands, kernel.numOperands),
                     fn.getArguments())) {
        if (operand.role == abi::Role::Context ||
            (operand.role == abi::Role::Output) != outputs)
          continue;
        if (operand.kind == abi::Kind::CacheScale && !fp8) {
          segments.push_back(0);
          continue;
        }
        state.addOperands(arg);
        segments.push_back(1);
      }
      if (!cacheKernel) {
        segments.push_back(0);
        if (outputs)
          segments.push_back(0);
      }
    }
    for (auto [operand, arg] :
         llvm::zip(ArrayRef(kernel.operands, kernel.numOperands),
                   fn.getArguments()))
      if (operand.kind == abi::Kind::U64)
        state.addOperands(arg);
    segments.push_back(1);
    std::optional<RegisteredOperationName> registered =
        RegisteredOperationName::lookup(state.name.getStringRef(), &ctx);
    if (registered &&
        registered->hasTrait<OpTrait::AttrSizedOperandSegments>())
      state.addAttribute("operandSegmentSizes",
                         b.getDenseI32ArrayAttr(segments));
    b.create(state);
    func::ReturnOp::create(b, loc);
  }
  return module;
}
