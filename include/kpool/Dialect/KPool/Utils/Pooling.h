//===- Pooling.h - the kpool pooling arithmetic ------------------*- C++
//-*-===//
//
// The one implementation of the pooling function of docs/semantics.md. Every
// lowering of every kpool op emits it through these builders, so a pool built
// by `ring_close` from ring members and the same pool built by `compress` are
// bit-identical on one backend.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_DIALECT_KPOOL_UTILS_POOLING_H
#define KPOOL_DIALECT_KPOOL_UTILS_POOLING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::kpool {

/// Emits the pooling function for one channel:
///   z_m = f32(gate_m) + ape_m;  M = max_m z_m;  e_m = exp(z_m - M)
///   out = T((e_0*f32(key_0) + ... ) / (e_0 + ...))   (member order, f32)
/// `keys` and `gates` hold the K members' values of element type T (or
/// vectors of T), `apes` the matching f32 values; the result has type
/// `resultType` (T or a vector of T). Works on scalars and vectors alike.
Value buildPooledChannel(OpBuilder &b, Location loc, ValueRange keys,
                         ValueRange gates, ValueRange apes, Type resultType);

/// Emits a `linalg.generic` over the `head_dim` channels of one pool that
/// writes the pooling function of members `keyRows[m]`, `gateRows[m]` (1-D
/// memrefs of T) with position embeddings `apeRows[m]` (1-D f32 memrefs) into
/// the 1-D memref `outRow`. The generic is tagged with `kPoolRowAttrName` so
/// later passes can find the channel loops.
void buildPoolRow(OpBuilder &b, Location loc, ValueRange keyRows,
                  ValueRange gateRows, ValueRange apeRows, Value outRow);

/// Unit attribute that marks the channel loop of one pooled row.
inline constexpr llvm::StringLiteral kPoolRowAttrName = "kpool.pool_row";

} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_UTILS_POOLING_H
