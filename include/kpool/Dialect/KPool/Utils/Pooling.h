//===- Pooling.h - the kpool pooling arithmetic -----------------*- C++ -*-===//
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
/// the 1-D memref `outRow`. The generic is tagged `kpool.pool_row` (KPoolDialect::PoolRowAttrHelper) so
/// later passes can find the channel loops.
void buildPoolRow(OpBuilder &b, Location loc, ValueRange keyRows,
                  ValueRange gateRows, ValueRange apeRows, Value outRow);

/// The members of one pool in the loop form: the key and gate rows (1-D
/// memrefs of T) of member `member` (an index value), built with the
/// builder passed to buildPoolRowLoop at its current insertion point.
using MemberRowsFn = function_ref<std::pair<Value, Value>(Value member)>;

/// The same function as buildPoolRow, for any `kpool`, with IR whose size
/// does not depend on it: a `linalg.generic` over the `head_dim` channels of
/// `outRow` whose body loops over the members (max of `z`, then the sums in
/// member order; member 0 peeled), reading member rows from `memberRows`
/// and `ape[m]` from the 2-D f32 memref `ape`. The same operations in the
/// same order as the unrolled form, so both give the same bits. Tagged with
/// `kpool.pool_row_loop` (KPoolDialect::PoolRowLoopAttrHelper; scalar channel loops; exp is approximated like
/// the unrolled rows').
void buildPoolRowLoop(OpBuilder &b, Location loc, int64_t kpool,
                      MemberRowsFn memberRows, Value ape, Value outRow);

/// Pools of at most this many members are unrolled (one linalg.generic
/// input per member row, vectorizable); larger ones use the loop form, so
/// compile time stays flat in kpool.
inline constexpr int64_t kMaxUnrolledMembers = 16;

} // namespace mlir::kpool

#endif // KPOOL_DIALECT_KPOOL_UTILS_POOLING_H
