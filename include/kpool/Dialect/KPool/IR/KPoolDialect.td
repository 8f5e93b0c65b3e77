//===- KPoolDialect.td - kpool dialect definition ----------*- tablegen -*-===//

#ifndef KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_TD
#define KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_TD

include "mlir/IR/OpBase.td"

def KPool_Dialect : Dialect {
  let name = "kpool";
  let cppNamespace = "::mlir::kpool";
  let summary = "Pooled-key cache maintenance for sparse-attention indexers";
  let description = [{
    The `kpool` dialect describes the three kernels that maintain the
    pooled-key cache of a sparse-attention indexer (DeepSeek/GLM style), plus
    the metadata scan that sizes their output.

    A sequence's tokens are grouped into *pools* of `kpool` consecutive
    absolute positions. Each pool gets one pooled key of `head_dim` channels:
    per channel, the softmax-weighted sum of its members' keys, the weights
    coming from the members' gate scores plus a learned within-pool position
    embedding `ape` (`[kpool, head_dim]`, f32). All arithmetic is f32 with one
    rounding to the element type at the end:

    ```
    z_m = f32(gate_m[d]) + ape[m][d];   M = max_m z_m;   e_m = exp(z_m - M)
    out[d] = T((e_0*k_0[d] + ... + e_{K-1}*k_{K-1}[d]) / (e_0 + ... + e_{K-1}))
    ```

    Requests arrive in ragged batches described by `input_row_offsets`
    (`[B+1]`, token rows of request `b` are `[iro[b], iro[b+1])`) and
    `cache_lengths` (`[B]`, tokens of request `b` that earlier calls saw, so
    row `iro[b] + i` holds absolute position `cache_lengths[b] + i`). Three
    writers together produce every pool exactly once, whatever the chunking:
    `kpool.ring_close` closes a pool whose first members an earlier call left
    in the tail ring, `kpool.compress` builds every pool made only of this
    call's tokens, and `kpool.seed_tail` stashes the trailing members of a
    still-open pool in the ring. They run in that order on the same operands.

    Every op has destination-passing style: on tensors it returns new values
    for its `outs` operands, on memrefs (any strided layout) it writes them in
    place. `one-shot-bufferize` turns the first form into the second.
    Offsets, cache lengths and slots are 1-D 32-bit integers (`i32` or `ui32`,
    both read as unsigned); keys, gates, pooled keys and the ring are bf16,
    f16 or f32.

    Runtime metadata can be wrong. The lowered kernels never read or write
    outside their operands: a request whose rows are reversed or reach past
    `k` brings no tokens, an out-of-range slot neither reads nor writes the
    ring, a request writes only its own pooled rows that exist, and
    `num_requests` is clamped to `[0, B]`.

    The full contract, bit for bit and for bad input, is
    [semantics.md](../semantics.md) (`docs/semantics.md` in the source tree,
    `share/doc/kpool/docs/semantics.md` in an install).
  }];
  let usePropertiesForAttributes = 1;

  // The contract between kpool's passes: convert-kpool-to-linalg tags what
  // it emits, kpool-vectorize-pool-rows and kpool-map-to-gpu find it by
  // these tags. The verifier checks their types and placement.
  let discardableAttrs = (ins
    // On each top-level `scf.parallel` of a lowered op: the kernel it
    // becomes (`kpool_compress`, `kpool_compress_strided`, ...).
    // kpool-map-to-gpu maps only loops that carry it and names the GPU
    // kernels after it.
    "::mlir::StringAttr":$kernel,
    // On the `linalg.generic` over the channels of one pooled row (one
    // input per member row).
    "::mlir::UnitAttr":$pool_row,
    // On the `linalg.generic` over the channels of one pooled row in the
    // loop form (the members as a loop in its body, for large kpool).
    "::mlir::UnitAttr":$pool_row_loop
  );
  let hasOperationAttrVerify = 1;
}

#endif // KPOOL_DIALECT_KPOOL_IR_KPOOLDIALECT_TD
