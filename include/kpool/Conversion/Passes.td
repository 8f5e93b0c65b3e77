//===- Passes.td - kpool conversion passes -----------------*- tablegen -*-===//

#ifndef KPOOL_CONVERSION_PASSES_TD
#define KPOOL_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKPoolToLinalgPass : Pass<"convert-kpool-to-linalg"> {
  let summary = "Lower kpool ops on memrefs to linalg, scf, memref and arith";
  let description = [{
    Rewrites each kpool op in buffer form (memref operands, any strided
    layout; run `one-shot-bufferize` first for the tensor form) into
    structured IR that later passes map to CPU loops or GPU threads:

    - `kpool.compress`: a `scf.parallel` over the rows of `pooled`; each row
      finds its request by binary search over `pool_row_offsets`, checks the
      row belongs to a pool the request completes, and runs a
      `linalg.generic` over the `head_dim` channels with one input per member
      row of `k`, `gate` and `ape` (the pooling function).
    - `kpool.ring_close`: a `scf.parallel` over batch rows; a closing row
      runs the same `linalg.generic` with its first members read from the
      tail ring, other rows are zero-filled and get `closed_pool = -1`.
    - `kpool.seed_tail`: a `scf.parallel` over requests copying each
      trailing token's key and gate rows into the ring slot (`linalg.copy`).
    - `kpool.pool_offsets`: a sequential scan (in a one-iteration
      `scf.parallel`, so GPU mappings run it on the device).

    The pooling arithmetic and the metadata arithmetic come from one place
    (`kpool/Dialect/KPool/Utils`). All of the contract's runtime guards (docs/semantics.md) are in
    the emitted IR: reversed or overlong row offsets bring no tokens, an
    out-of-range slot neither reads nor writes the ring, a request writes
    only its own pooled rows that exist, `num_requests` is clamped, and an
    operand whose dynamic extent disagrees with `head_dim`/`kpool` makes the
    op a no-op instead of an out-of-bounds access.

    Pools of more than 16 members (`unroll-members`) are computed in a loop
    over the members (a `linalg.generic` over the channels tagged
    `kpool.pool_row_loop`, whose body reads each member's rows; the same
    operations in the same order, so the same bits), so that the IR and
    compile time do not grow with `kpool`.

    Pooled rows are tagged `kpool.pool_row` for the vectorization and GPU
    mapping passes, and each op's top-level `scf.parallel` carries
    `kpool.kernel = "kpool_<op>"` (`kpool_<op>_strided` for the copy that
    handles non-unit innermost strides), after which GPU kernels are named.
  }];
  let options = [
    Option<"stepOffsets", "step-offsets", "std::string", /*default=*/"\"walk\"",
           "how kpool.step finds pool offsets inside its one parallel loop: "
           "'walk' (each offsets entry and pooled row walks the requests' "
           "pool counts, O(B) each, no prologue: one GPU launch) or 'scan' "
           "(a sequential scan before the loop, then a binary search per "
           "pooled row: O(B) once, for the CPU, where that scan is host "
           "code)">,
    Option<"prefetchPools", "prefetch-pools", "int64_t", /*default=*/"0",
           "compress's rows (also kpool.step's) prefetch the key and gate "
           "rows of the pool this many pools ahead in the same request, so "
           "that DRAM-resident inputs arrive while the pool is computed "
           "(0: no prefetch; kpool-lower-to-llvm uses 2; no effect on "
           "results)">,
    Option<"unrollMembers", "unroll-members", "int64_t", /*default=*/"16",
           "pools of at most this many members (1 to 16) are unrolled, one "
           "linalg.generic input per member row; larger pools use the member "
           "loop (two loops over the members, tagged kpool.pool_row_loop), "
           "with the same bits. kpool-lower-to-llvm uses 4: on AVX2 the "
           "unrolled form of 8 members spills the members' z values, and the "
           "loop was 5-10% faster there">,
    Option<"rowsPerIteration", "rows-per-iteration", "int64_t",
           /*default=*/"1",
           "consecutive rows of compress's output (and of kpool.step's, with "
           "step-offsets=scan) per iteration of the parallel loop: the first "
           "row of each searches for the request that claims it, the next "
           "rows follow that request's pools and search again only past "
           "them (1: a search per row, as the GPU mapping expects; "
           "kpool-lower-to-llvm uses 16). Valid metadata gets the same "
           "bits; a row several requests claim gets one of their pools, as "
           "the contract allows">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}



#endif // KPOOL_CONVERSION_PASSES_TD
