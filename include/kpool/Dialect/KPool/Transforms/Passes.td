//===- Passes.td - kpool dialect transforms ----------------*- tablegen -*-===//

#ifndef KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_TD
#define KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def KPoolVectorizePoolRowsPass : Pass<"kpool-vectorize-pool-rows"> {
  let summary = "Vectorize the channel loops of pooled rows";
  let description = [{
    Finds the `linalg.generic` ops that `convert-kpool-to-linalg` emits for
    one pooled row (tagged `kpool.pool_row`), tiles their channel dimension
    by the widest power of two of at most `vector-size` channels that
    divides `head_dim` (16 for the production 128; no tile needs a mask;
    the same rule as kpool-map-to-gpu's, `kpool/Dialect/KPool/Utils/
    Numerics.h`) and
    vectorizes each tile into contiguous vector loads and stores. Rows whose
    operands do not all have a static unit innermost stride (the general-
    stride path of the lowering), and tagged ops that are not one static,
    non-empty channel loop, stay scalar. The `math.exp` of those rows, vector or scalar, is then
    rewritten with MLIR's polynomial approximation, so that every channel of
    every op uses the same arithmetic (`ring_close` and `compress` stay bit
    identical) and no libm call is left in the loop.
  }];
  let options = [
    Option<"vectorSize", "vector-size", "int64_t", /*default=*/"16",
           "channels per vector, at most 64 (wider vectors only multiply "
           "LLVM's compile time); 0 keeps the channel loops scalar (exp is "
           "still approximated)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_TD
