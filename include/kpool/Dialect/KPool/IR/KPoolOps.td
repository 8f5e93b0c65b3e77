//===- KPoolOps.td - kpool operations ----------------------*- tablegen -*-===//

#ifndef KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_TD
#define KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_TD

include "kpool/Dialect/KPool/IR/KPoolDialect.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpBase.td"

/// A ranked tensor (value form) or a strided memref (buffer form). Ranks,
/// shapes and element types are checked by the op verifiers so that the
/// diagnostics can name the operand and the expected shape.
def KPool_TensorOrMemRef : AnyTypeOf<[AnyRankedTensor, AnyStridedMemRef],
    "ranked tensor or strided memref">;

/// Static `kpool` and `head_dim`, both at least 1 (checked by the verifier
/// with a message that names the attribute).
defvar KPool_GeometryArgs = (ins I64Attr:$kpool, I64Attr:$head_dim);

/// The C++ half of every kernel op (kpool/Dialect/KPool/IR/KPoolOps.h): its
/// memory effects, which follow from its `outs` (kpool::readsInit), and the
/// operand range of its `outs`.
def KPool_KernelOpTrait : NativeOpTrait<"KernelOpTrait"> {
  let cppNamespace = "::mlir::kpool";
}

/// The ops' assembly uses three custom directives (KPoolOps.cpp), so that a
/// parse error names what is missing: `custom<IntegerClause>` is
/// `keyword(<integer>)`, `custom<ValueClause>` is `keyword(%value)` and
/// `custom<OperandGroup>` is `ins(...)`/`outs(...)`, `keyword(%a, %b : type,
/// type)`, given the operands' names in order for its messages, e.g.
/// "expected 6 operands in 'ins' (k, gate, ...), got 5".
///
/// A kernel op: destination style, its `outs` the operand `firstInit` (the
/// accessor's name, e.g. "Pooled") and every operand after it (the optional
/// pool-cache outputs and status word included).
class KPool_Op<string mnemonic, string firstInit, list<Trait> traits = []>
    : Op<KPool_Dialect, mnemonic, !listconcat(traits, [
        MemoryEffectsOpInterface, DestinationStyleOpInterface,
        KPool_KernelOpTrait])> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getInitsFrom(get}] # firstInit # [{Mutable());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Pool-cache format
//===----------------------------------------------------------------------===//

include "mlir/IR/EnumAttr.td"

def KPool_RotateNone : I32EnumAttrCase<"none", 0>;
def KPool_RotateHadamard : I32EnumAttrCase<"hadamard", 1>;
def KPool_RotateAttr : I32EnumAttr<"Rotate",
    "rotation applied to a pool before it enters the pool cache",
    [KPool_RotateNone, KPool_RotateHadamard]> {
  let cppNamespace = "::mlir::kpool";
}

def KPool_ScaleAbsmax : I32EnumAttrCase<"absmax", 0>;
def KPool_ScalePow2 : I32EnumAttrCase<"pow2", 1>;
def KPool_ScaleAttr : I32EnumAttr<"Scale",
    "how the f32 scale of an FP8 pool-cache entry is chosen",
    [KPool_ScaleAbsmax, KPool_ScalePow2]> {
  let cppNamespace = "::mlir::kpool";
}

/// The optional pool-cache destination of an op that produces pools: an
/// input `block_table` (before the op's `outs`) and the outputs
/// `cache_keys` and, when quantized, `cache_scales` (after them).
defvar KPool_CacheFormatArgs = (ins OptionalAttr<KPool_RotateAttr>:$rotate,
                                    OptionalAttr<KPool_ScaleAttr>:$scale);

/// Assembly of the pool-cache destination, after `outs`.
defvar KPool_CacheAssembly = [{
    (`to_cache` `(` $block_table^ `,` $cache_keys (`,` $cache_scales^)?
                `:` type($block_table) `,` type($cache_keys)
                (`,` type($cache_scales)^)? `)`)?
    (`rotate` `(` $rotate^ `)`)?
    (`scale` `(` $scale^ `)`)?
}];

/// What every op with a pool-cache destination documents.
defvar KPool_CacheDescription = [{

    **Pool cache.** With `to_cache(%block_table, %cache_keys[, %cache_scales])`
    each pool the op writes to its dense output is also stored, in the same
    kernel, into entry `(block_table[b, p / page_size], p mod page_size)`
    of `cache_keys` `[N, page_size, head_dim]` (and of `cache_scales`
    `[N, page_size]` f32), `p` its absolute pool id and `b` its batch row.
    `rotate(hadamard)` applies the scaled Walsh-Hadamard transform
    (`head_dim` a power of two); `cache_keys` of the keys' element type
    stores the value rounded to it, `f8E4M3FN` stores FP8 codes with one
    scale per entry (`scale(absmax)`, the default, or `scale(pow2)`), and
    `cache_scales` is present exactly then. An entry whose page is not below
    `N`, or whose page index is not below the table's width, or whose batch
    row is not below the table's rows, is not written (an i32 `-1` padding
    entry reads as a huge unsigned page). The formulas are in
    docs/semantics.md, "The pool cache".
}];

/// The optional device status word of every op: a 1-D i64/ui64 operand
/// (the last of the `outs`) where the kernels record the first
/// bad-metadata finding (kpool/ABI/StatusWord.h).
defvar KPool_StatusArg = (ins Optional<KPool_TensorOrMemRef>:$status);

/// Assembly of the status word, last before the attributes.
defvar KPool_StatusAssembly = [{
    (`status` `(` $status^ `:` type($status) `)`)?
}];

/// What every op documents about the status word.
defvar KPool_StatusDescription = [{

    **Status word.** With `status(%s)` (a 1-D i64 or ui64 buffer; an empty
    one disables it) the op also records, where one of its guards finds bad
    metadata, the code `(b << 8) | finding` of request `b` in `%s[0]`, with
    an atomic that keeps the smallest nonzero code (0 means nothing was
    found; a word holding a code only changes to a smaller one). The
    findings, the fields they name and their order are in
    docs/semantics.md, "The status word". The guards themselves act as
    without a status word.
}];

//===----------------------------------------------------------------------===//
// compress
//===----------------------------------------------------------------------===//

def KPool_CompressOp : KPool_Op<"compress", "Pooled", [AttrSizedOperandSegments]> {
  let summary = "builds every pool made only of this call's tokens";
  let description = !strconcat([{
    For each request `b`, with `s = input_row_offsets[b]`,
    `n = input_row_offsets[b+1] - s` and `c = cache_lengths[b]`, the pools
    `ceil(c / kpool) .. floor((c + n) / kpool) - 1` are made entirely of this
    call's tokens. Pool `ceil(c / kpool) + j` has members at rows
    `s + skip + j * kpool + m` (`skip = ceil(c / kpool) * kpool - c`, the
    leading tokens that belong to a pool the ring holds) and is written to
    row `pool_row_offsets[b] + j` of `pooled`. Member `m` uses `ape[m]`. The
    caller supplies `pool_row_offsets` as the exclusive prefix sum of the
    per-request pool counts (`kpool.pool_offsets` computes it).

    Rows of `pooled` that no request writes keep their value, so the `outs`
    operand is read. A request writes only rows in
    `[pool_row_offsets[b], pool_row_offsets[b+1])` that exist in `pooled`;
    reversed or overlong `input_row_offsets` bring no tokens.

    Operands, in order: `k` and `gate` `[T_total, head_dim]`, `ape`
    `[kpool, head_dim]` f32, `input_row_offsets` `[B+1]`, `pool_row_offsets`
    `[B+1]`, `cache_lengths` `[B]`; `outs`: `pooled` `[P, head_dim]`.

    Example:

    ```mlir
    %pooled = kpool.compress kpool(4) head_dim(128)
        ins(%k, %gate, %ape, %iro, %pro, %cache
            : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
              tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
        outs(%init : tensor<?x128xbf16>) -> tensor<?x128xbf16>
    ```
  }], KPool_CacheDescription, KPool_StatusDescription, [{
  }]);
  let arguments = !con(KPool_GeometryArgs, (ins
      KPool_TensorOrMemRef:$k,
      KPool_TensorOrMemRef:$gate,
      KPool_TensorOrMemRef:$ape,
      KPool_TensorOrMemRef:$input_row_offsets,
      KPool_TensorOrMemRef:$pool_row_offsets,
      KPool_TensorOrMemRef:$cache_lengths,
      Optional<KPool_TensorOrMemRef>:$block_table,
      KPool_TensorOrMemRef:$pooled,
      Optional<KPool_TensorOrMemRef>:$cache_keys,
      Optional<KPool_TensorOrMemRef>:$cache_scales), KPool_StatusArg,
      KPool_CacheFormatArgs);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = !strconcat([{
    custom<IntegerClause>("\"kpool\"", "\"tokens per pool\"", $kpool)
    custom<IntegerClause>("\"head_dim\"", "\"channels per key\"", $head_dim)
    custom<OperandGroup>("\"ins\"",
        "\"k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths\"",
        $k, $gate, $ape, $input_row_offsets, $pool_row_offsets, $cache_lengths,
        type($k), type($gate), type($ape), type($input_row_offsets),
        type($pool_row_offsets), type($cache_lengths))
    custom<OperandGroup>("\"outs\"", "\"pooled\"", $pooled, type($pooled))
  }], KPool_CacheAssembly, KPool_StatusAssembly, [{
    attr-dict (`->` type($result)^)?
  }]);
  // The form without a pool cache.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::IntegerAttr":$kpool,
                   "::mlir::IntegerAttr":$head_dim, "::mlir::Value":$k, "::mlir::Value":$gate, "::mlir::Value":$ape, "::mlir::Value":$input_row_offsets, "::mlir::Value":$pool_row_offsets, "::mlir::Value":$cache_lengths, "::mlir::Value":$pooled), [{
      build($_builder, $_state, results, kpool, head_dim, k, gate, ape, input_row_offsets, pool_row_offsets, cache_lengths, /*block_table=*/::mlir::Value(), pooled, /*cache_keys=*/::mlir::Value(), /*cache_scales=*/::mlir::Value(), /*status=*/::mlir::Value(), /*rotate=*/nullptr, /*scale=*/nullptr);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// seed_tail
//===----------------------------------------------------------------------===//

def KPool_SeedTailOp : KPool_Op<"seed_tail", "Tail"> {
  let summary = "stashes the trailing members of each open pool in the tail ring";
  let description = !strconcat([{
    The ring holds each request's last `R` positions, `R >= kpool` being the
    ring window (the tail's third extent, static or dynamic; `R = kpool` in
    plain serving, `R = kpool + drafts - 1` or more for speculative
    decoding). For each request `b < num_requests` (clamped to `[0, B]`),
    with `end = c + n`, every position `q` in `[max(c, end - R), end)` is
    stored in ring slot `slot_idx[b]`: `tail[slot, 0, q mod R, :]` gets the
    key row and `tail[slot, 1, q mod R, :]` the raw gate row (no `ape`).
    Nothing else in `tail` changes. Only tokens this call owns are written,
    so after any sequence of calls without rollback the slot holds the
    request's last `min(R, length)` positions (after a rollback it may also
    hold rejected positions at or after the accepted length, overwritten
    before they are read), and a prefill split into chunks leaves the
    ring as one unsplit prefill does.

    The ring is addressed by `slot_idx`, never by batch row. A slot at or past
    the ring's first dimension neither reads nor writes it; a dynamic window
    below `kpool` makes the op write nothing.

    Operands, in order: `k` and `gate` `[T_total, head_dim]`,
    `input_row_offsets` `[B+1]`, `cache_lengths` `[B]`, `slot_idx` `[B]`,
    `num_requests` (i32); `outs`: `tail` `[max_slots, 2, R, head_dim]`,
    read and written (the updated ring is the result on tensors).

    Example:

    ```mlir
    %ring = kpool.seed_tail kpool(4) head_dim(128)
        ins(%k, %gate, %iro, %cache, %slots
            : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?xui32>,
              tensor<?xui32>, tensor<?xui32>)
        num_requests(%n)
        outs(%tail : tensor<?x2x4x128xbf16>) -> tensor<?x2x4x128xbf16>
    ```
  }], KPool_StatusDescription);
  let arguments = !con(KPool_GeometryArgs, (ins
      KPool_TensorOrMemRef:$k,
      KPool_TensorOrMemRef:$gate,
      KPool_TensorOrMemRef:$input_row_offsets,
      KPool_TensorOrMemRef:$cache_lengths,
      KPool_TensorOrMemRef:$slot_idx,
      I32:$num_requests,
      KPool_TensorOrMemRef:$tail), KPool_StatusArg);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = !strconcat([{
    custom<IntegerClause>("\"kpool\"", "\"tokens per pool\"", $kpool)
    custom<IntegerClause>("\"head_dim\"", "\"channels per key\"", $head_dim)
    custom<OperandGroup>("\"ins\"",
        "\"k, gate, input_row_offsets, cache_lengths, slot_idx\"",
        $k, $gate, $input_row_offsets, $cache_lengths, $slot_idx,
        type($k), type($gate), type($input_row_offsets), type($cache_lengths),
        type($slot_idx))
    custom<ValueClause>("\"num_requests\"", "\"live requests, i32\"",
                        $num_requests)
    custom<OperandGroup>("\"outs\"", "\"tail\"", $tail, type($tail))
  }], KPool_StatusAssembly, [{
    attr-dict (`->` type($result)^)?
  }]);
  // The form without a status word.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::IntegerAttr":$kpool,
                   "::mlir::IntegerAttr":$head_dim, "::mlir::Value":$k, "::mlir::Value":$gate, "::mlir::Value":$input_row_offsets, "::mlir::Value":$cache_lengths, "::mlir::Value":$slot_idx, "::mlir::Value":$num_requests, "::mlir::Value":$tail), [{
      build($_builder, $_state, results, kpool, head_dim, k, gate, input_row_offsets, cache_lengths, slot_idx, num_requests, tail, /*status=*/::mlir::Value());
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// ring_close
//===----------------------------------------------------------------------===//

def KPool_RingCloseOp : KPool_Op<"ring_close", "Pooled", [AttrSizedOperandSegments]> {
  let summary = "closes each request's pool that the tail ring holds open";
  let description = !strconcat([{
    For each request `b < num_requests` (clamped to `[0, B]`), with
    `held = c mod kpool`: when `held > 0` and the request brings at least
    `kpool - held` tokens, pool `p = floor(c / kpool)` completes in this call.
    Its members `m < held` come from
    `tail[slot_idx[b], 0/1, (p * kpool + m) mod R]` (`R` the ring window,
    the tail's third extent), members
    `m >= held` from rows `s + (m - held)` of `k` and `gate`; `pooled[b]` is
    the pooling function over them (the same arithmetic as `kpool.compress`,
    so the pool is bit-identical to one built in a single call) and
    `closed_pool[b] = p`. Otherwise, and for padding rows
    `b >= num_requests`, `closed_pool[b] = -1` and `pooled[b]` is zero.
    A slot at or past the ring's first dimension closes nothing.

    `tail` is only read: run this op before `kpool.seed_tail` overwrites the
    ring. Every row of both outputs is written, so their initial contents
    are not read.

    Operands, in order: `tail` `[max_slots, 2, R, head_dim]` (`R >= kpool`),
    `k` and
    `gate` `[T_total, head_dim]`, `ape` `[kpool, head_dim]` f32,
    `input_row_offsets` `[B+1]`, `cache_lengths` `[B]`, `slot_idx` `[B]`,
    `num_requests` (i32); `outs`: `pooled` `[B, head_dim]` and `closed_pool`
    `[B]` i32 or i64 (pool ids are below 2^31 either way).

    Example:

    ```mlir
    %pooled, %closed = kpool.ring_close kpool(4) head_dim(128)
        ins(%tail, %k, %gate, %ape, %iro, %cache, %slots
            : tensor<?x2x4x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>,
              tensor<4x128xf32>, tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
        num_requests(%n)
        outs(%pinit, %cinit : tensor<?x128xbf16>, tensor<?xi32>)
        -> tensor<?x128xbf16>, tensor<?xi32>
    ```
  }], KPool_CacheDescription, KPool_StatusDescription, [{
  }]);
  let arguments = !con(KPool_GeometryArgs, (ins
      KPool_TensorOrMemRef:$tail,
      KPool_TensorOrMemRef:$k,
      KPool_TensorOrMemRef:$gate,
      KPool_TensorOrMemRef:$ape,
      KPool_TensorOrMemRef:$input_row_offsets,
      KPool_TensorOrMemRef:$cache_lengths,
      KPool_TensorOrMemRef:$slot_idx,
      I32:$num_requests,
      Optional<KPool_TensorOrMemRef>:$block_table,
      KPool_TensorOrMemRef:$pooled,
      KPool_TensorOrMemRef:$closed_pool,
      Optional<KPool_TensorOrMemRef>:$cache_keys,
      Optional<KPool_TensorOrMemRef>:$cache_scales), KPool_StatusArg,
      KPool_CacheFormatArgs);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = !strconcat([{
    custom<IntegerClause>("\"kpool\"", "\"tokens per pool\"", $kpool)
    custom<IntegerClause>("\"head_dim\"", "\"channels per key\"", $head_dim)
    custom<OperandGroup>("\"ins\"",
        "\"tail, k, gate, ape, input_row_offsets, cache_lengths, slot_idx\"",
        $tail, $k, $gate, $ape, $input_row_offsets, $cache_lengths, $slot_idx,
        type($tail), type($k), type($gate), type($ape),
        type($input_row_offsets), type($cache_lengths), type($slot_idx))
    custom<ValueClause>("\"num_requests\"", "\"live requests, i32\"",
                        $num_requests)
    custom<OperandGroup>("\"outs\"", "\"pooled, closed_pool\"",
        $pooled, $closed_pool, type($pooled), type($closed_pool))
  }], KPool_CacheAssembly, KPool_StatusAssembly, [{
    attr-dict (`->` type($result)^)?
  }]);
  // The form without a pool cache.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::IntegerAttr":$kpool,
                   "::mlir::IntegerAttr":$head_dim, "::mlir::Value":$tail, "::mlir::Value":$k, "::mlir::Value":$gate, "::mlir::Value":$ape, "::mlir::Value":$input_row_offsets, "::mlir::Value":$cache_lengths, "::mlir::Value":$slot_idx, "::mlir::Value":$num_requests, "::mlir::Value":$pooled, "::mlir::Value":$closed_pool), [{
      build($_builder, $_state, results, kpool, head_dim, tail, k, gate, ape, input_row_offsets, cache_lengths, slot_idx, num_requests, /*block_table=*/::mlir::Value(), pooled, closed_pool, /*cache_keys=*/::mlir::Value(), /*cache_scales=*/::mlir::Value(), /*status=*/::mlir::Value(), /*rotate=*/nullptr, /*scale=*/nullptr);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// pool_offsets
//===----------------------------------------------------------------------===//

def KPool_PoolOffsetsOp : KPool_Op<"pool_offsets", "PoolRowOffsets"> {
  let summary = "exclusive prefix sum of each request's full-pool count";
  let description = !strconcat([{
    Computes the `pool_row_offsets` operand of `kpool.compress`:
    `pool_row_offsets[0] = 0` and
    `pool_row_offsets[b+1] = pool_row_offsets[b] + count_b` with
    `count_b = max(0, floor((c + n) / kpool) - ceil(c / kpool))`, the number
    of pools made only of request `b`'s tokens in this call. A request whose
    `input_row_offsets` are reversed counts zero pools. The sum wraps modulo
    2^32 like the unsigned offsets it produces. This is the same metadata
    arithmetic the `kpool.compress` lowering uses, so a graph needs no host
    round trip to size the pooled output: its row count is the last entry.

    Operands: `input_row_offsets` `[B+1]`, `cache_lengths` `[B]`; `outs`:
    `pool_row_offsets` `[B+1]`. Only `kpool` matters here, so the op has no
    `head_dim`.

    Example:

    ```mlir
    %pro = kpool.pool_offsets kpool(4)
        ins(%iro, %cache : tensor<?xui32>, tensor<?xui32>)
        outs(%init : tensor<?xui32>) -> tensor<?xui32>
    ```
  }], KPool_StatusDescription);
  let arguments = (ins I64Attr:$kpool,
      KPool_TensorOrMemRef:$input_row_offsets,
      KPool_TensorOrMemRef:$cache_lengths,
      KPool_TensorOrMemRef:$pool_row_offsets,
      Optional<KPool_TensorOrMemRef>:$status);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = !strconcat([{
    custom<IntegerClause>("\"kpool\"", "\"tokens per pool\"", $kpool)
    custom<OperandGroup>("\"ins\"", "\"input_row_offsets, cache_lengths\"",
        $input_row_offsets, $cache_lengths,
        type($input_row_offsets), type($cache_lengths))
    custom<OperandGroup>("\"outs\"", "\"pool_row_offsets\"", $pool_row_offsets,
        type($pool_row_offsets))
  }], KPool_StatusAssembly, [{
    attr-dict (`->` type($result)^)?
  }]);
  // The form without a status word.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::IntegerAttr":$kpool,
                   "::mlir::Value":$input_row_offsets, "::mlir::Value":$cache_lengths, "::mlir::Value":$pool_row_offsets), [{
      build($_builder, $_state, results, kpool, input_row_offsets, cache_lengths, pool_row_offsets, /*status=*/::mlir::Value());
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// step
//===----------------------------------------------------------------------===//

def KPool_StepOp : KPool_Op<"step", "Closed", [AttrSizedOperandSegments]> {
  let summary = "one serving step: ring_close, pool_offsets, compress and "
                "seed_tail in one op";
  let description = !strconcat([{
    Computes exactly what the four-op sequence of a serving step computes on
    the same operands:

    ```
    closed, closed_pool = ring_close(tail, k, gate, ape, iro, cache, slots, n)
    pool_row_offsets    = pool_offsets(iro, cache)
    pooled              = compress(k, gate, ape, iro, pool_row_offsets, cache)
    tail                = seed_tail(k, gate, iro, cache, slots, n)
    ```

    with valid metadata bit for bit, and it lowers to one kernel: one
    `scf.parallel` (one GPU launch, one parallel region on the CPU) whose
    iterations are the batch rows (ring_close of request `b`, then
    seed_tail of request `b`, then entry `b` of `pool_row_offsets`) followed
    by the rows of `pooled` (compress). `kpool-fuse-step` forms it from the
    four ops. The ordering hazards of one launch are designed out:

    * ring_close must read a request's ring rows before seed_tail of the
      same request overwrites them: both run in the same iteration, in that
      order, and each channel of a ring row is read and written by the same
      thread (the channel loops are mapped identically), so program order is
      enough and no barrier is needed. Two live requests that share a slot
      are bad metadata; as for the separate ops, each ring row then holds a
      value one of them stores.
    * pool offsets are a scan across requests: no iteration waits for
      another. Entry `b` of `pool_row_offsets` sums the pool counts of the
      requests before `b`, and a row of `pooled` finds the request that owns
      it by walking the counts, so each costs `O(B)` metadata reads (an
      `O(B)` scan per block is the planned refinement). The rows a request
      owns are those of the 64-bit prefix sums, which equal the 32-bit
      `pool_row_offsets` whenever the total is below 2^32 (host validation
      guarantees it; the separate ops' `pool_offsets` wraps).

    The guards of the four ops hold unchanged (docs/semantics.md, "Bad
    input"); each part checks its own operands' extents as its op does.

    Operands, in order: `k` and `gate` `[T_total, head_dim]`, `ape`
    `[kpool, head_dim]` f32, `input_row_offsets` `[B+1]`, `cache_lengths`
    `[B]`, `slot_idx` `[B]`, `num_requests` (i32); `outs`: `closed`
    `[B, head_dim]` and `closed_pool` `[B]` i32 or i64 (ring_close's outputs, every
    row written), `pool_row_offsets` `[B+1]` (every entry written), `pooled`
    `[P, head_dim]` (rows no request claims keep their value) and `tail`
    `[max_slots, 2, R, head_dim]` (read and written). On tensors the results
    are the updated outs, in that order.

    Example:

    ```mlir
    %closed, %ids, %pro, %pooled, %ring = kpool.step kpool(4) head_dim(128)
        ins(%k, %gate, %ape, %iro, %cache, %slots
            : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<4x128xf32>,
              tensor<?xui32>, tensor<?xui32>, tensor<?xui32>)
        num_requests(%n)
        outs(%cinit, %idinit, %proinit, %pinit, %tail
             : tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
               tensor<?x128xbf16>, tensor<?x2x4x128xbf16>)
        -> tensor<?x128xbf16>, tensor<?xi32>, tensor<?xui32>,
           tensor<?x128xbf16>, tensor<?x2x4x128xbf16>
    ```
  }], KPool_CacheDescription, KPool_StatusDescription, [{
  }]);
  let arguments = !con(KPool_GeometryArgs, (ins
      KPool_TensorOrMemRef:$k,
      KPool_TensorOrMemRef:$gate,
      KPool_TensorOrMemRef:$ape,
      KPool_TensorOrMemRef:$input_row_offsets,
      KPool_TensorOrMemRef:$cache_lengths,
      KPool_TensorOrMemRef:$slot_idx,
      I32:$num_requests,
      Optional<KPool_TensorOrMemRef>:$block_table,
      KPool_TensorOrMemRef:$closed,
      KPool_TensorOrMemRef:$closed_pool,
      KPool_TensorOrMemRef:$pool_row_offsets,
      KPool_TensorOrMemRef:$pooled,
      KPool_TensorOrMemRef:$tail,
      Optional<KPool_TensorOrMemRef>:$cache_keys,
      Optional<KPool_TensorOrMemRef>:$cache_scales), KPool_StatusArg,
      KPool_CacheFormatArgs);
  let results = (outs Variadic<AnyRankedTensor>:$result);
  let assemblyFormat = !strconcat([{
    custom<IntegerClause>("\"kpool\"", "\"tokens per pool\"", $kpool)
    custom<IntegerClause>("\"head_dim\"", "\"channels per key\"", $head_dim)
    custom<OperandGroup>("\"ins\"",
        "\"k, gate, ape, input_row_offsets, cache_lengths, slot_idx\"",
        $k, $gate, $ape, $input_row_offsets, $cache_lengths, $slot_idx,
        type($k), type($gate), type($ape), type($input_row_offsets),
        type($cache_lengths), type($slot_idx))
    custom<ValueClause>("\"num_requests\"", "\"live requests, i32\"",
                        $num_requests)
    custom<OperandGroup>("\"outs\"",
        "\"closed, closed_pool, pool_row_offsets, pooled, tail\"",
        $closed, $closed_pool, $pool_row_offsets, $pooled, $tail,
        type($closed), type($closed_pool), type($pool_row_offsets),
        type($pooled), type($tail))
  }], KPool_CacheAssembly, KPool_StatusAssembly, [{
    attr-dict (`->` type($result)^)?
  }]);
  // The form without a pool cache.
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::IntegerAttr":$kpool,
                   "::mlir::IntegerAttr":$head_dim, "::mlir::Value":$k, "::mlir::Value":$gate, "::mlir::Value":$ape, "::mlir::Value":$input_row_offsets, "::mlir::Value":$cache_lengths, "::mlir::Value":$slot_idx, "::mlir::Value":$num_requests, "::mlir::Value":$closed, "::mlir::Value":$closed_pool, "::mlir::Value":$pool_row_offsets, "::mlir::Value":$pooled, "::mlir::Value":$tail), [{
      build($_builder, $_state, results, kpool, head_dim, k, gate, ape, input_row_offsets, cache_lengths, slot_idx, num_requests, /*block_table=*/::mlir::Value(), closed, closed_pool, pool_row_offsets, pooled, tail, /*cache_keys=*/::mlir::Value(), /*cache_scales=*/::mlir::Value(), /*status=*/::mlir::Value(), /*rotate=*/nullptr, /*scale=*/nullptr);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// cache_entry (lowering-level)
//===----------------------------------------------------------------------===//

def KPool_CacheEntryOp : Op<KPool_Dialect, "cache_entry", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "stores one pool into its pool-cache entry (lowering level)";
  let description = [{
    The per-pool step of a pool-cache store, as `convert-kpool-to-linalg`
    emits it after the pooled row it belongs to: reads the pool's dense
    value `value` (`[head_dim]`, bf16/f16/f32, the bits the dense output
    holds), optionally rotates it, and writes the entry `entry`
    (`[head_dim]`, the value's element type or `f8E4M3FN`) and, for FP8, its
    scale `scale` (a 0-d f32 memref), by the formulas of docs/semantics.md
    ("The pool cache"). The caller has already checked that the entry
    exists. Buffer form only.

    `kpool-lower-cache-entries` lowers it for the CPU (vector code, an exact
    software FP8 conversion); `kpool-map-to-gpu` spreads it over the lanes
    of the row group that wrote `value` (butterflies and the absmax
    reduction by warp shuffles). Both use the one implementation in
    `kpool/Dialect/KPool/Utils/PoolCache.h`.

    Example:

    ```mlir
    kpool.cache_entry rotate(hadamard) scale(pow2) %row into %codes, %s
        : memref<128xbf16, strided<[1], offset: ?>>,
          memref<128xf8E4M3FN, strided<[1], offset: ?>>,
          memref<f32, strided<[], offset: ?>>
    ```
  }];
  let arguments = (ins
      MemRefRankOf<[BF16, F16, F32], [1]>:$value,
      MemRefRankOf<[BF16, F16, F32, F8E4M3FN], [1]>:$entry,
      Optional<MemRefRankOf<[F32], [0]>>:$scale,
      DefaultValuedAttr<KPool_RotateAttr, "::mlir::kpool::Rotate::none">:$rotate,
      DefaultValuedAttr<KPool_ScaleAttr,
                        "::mlir::kpool::Scale::absmax">:$scale_mode);
  let assemblyFormat = [{
    `rotate` `(` $rotate `)` `scale` `(` $scale_mode `)`
    $value `into` $entry (`,` $scale^)? attr-dict
    `:` type($value) `,` type($entry) (`,` type($scale)^)?
  }];
  let hasVerifier = 1;
}

#endif // KPOOL_DIALECT_KPOOL_IR_KPOOLOPS_TD
