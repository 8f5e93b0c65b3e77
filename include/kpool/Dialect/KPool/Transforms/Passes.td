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
    non-empty channel loop, stay scalar. The one-row `linalg.copy` and
    `linalg.fill` ops inside a lowered op's loop (`kpool.kernel`: the ring
    rows of `ring_close` and `seed_tail`, the zero rows of `ring_close`) are
    tiled and vectorized the same way when their views are unit-stride.

    In every pooled row, vector or scalar, the arithmetic is then rewritten
    the same way (`kpool/Dialect/KPool/Utils/Numerics.h`), so that every
    channel of every op uses the same arithmetic (`ring_close` and
    `compress` stay bit identical) and no libm call is left in the loop:
    the max as one compare-and-select, `acc + e * k` as an FMA, the bf16
    rounding as integer arithmetic, and `math.exp` as kpool's polynomial
    approximation.
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

def KPoolLowerCacheEntriesPass : Pass<"kpool-lower-cache-entries"> {
  let summary = "Lower kpool.cache_entry to vector code (the CPU form)";
  let description = [{
    Rewrites each `kpool.cache_entry` that `convert-kpool-to-linalg` emits
    after a pooled row into straight-line vector code for one thread: the
    row as one vector of f32, the staged Walsh-Hadamard rotation as vector
    shuffles, the absmax as a vector reduction, the pow2 scale and the FP8
    (e4m3fn) codes by exact integer arithmetic on the bits. Unit-stride
    views are read and written with vector loads and stores, others element
    by element. The GPU form is kpool-map-to-gpu's (the same code,
    `kpool/Dialect/KPool/Utils/PoolCache.h`, spread over a row group's
    lanes).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def KPoolFuseStepPass : Pass<"kpool-fuse-step"> {
  let summary = "Fuse a serving step's four ops into kpool.step";
  let description = [{
    Replaces `kpool.ring_close`, `kpool.pool_offsets`, `kpool.compress` and
    `kpool.seed_tail` of one serving step by one `kpool.step`, which lowers
    to one kernel (one GPU launch). The four ops are a step when they are in
    one block and share `kpool`, `head_dim`, `k`, `gate`,
    `input_row_offsets` and `cache_lengths`; ring_close and seed_tail also
    share `slot_idx`, `num_requests` and the ring (ring_close's `tail` is
    seed_tail's `outs`), compress and ring_close share `ape`, and compress
    reads the offsets that pool_offsets produces. The fused op goes where
    the last of them is, and only when that moves nothing observable: on
    tensors no result of the four is used before that point; on buffers
    ring_close comes before seed_tail (it reads the ring that seed_tail
    overwrites) and no other op between them has memory effects. With a
    pool cache (`to_cache`), ring_close and compress must both have one,
    the same block table, format and cache buffers (on tensors compress's
    cache inits are ring_close's cache results and nothing else uses
    those); the step then writes that cache. Anything else is left as it
    is.
  }];
}

def KPoolGPUKernelAttrsPass
    : Pass<"kpool-gpu-kernel-attrs", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Mark the read-only operands of outlined kpool kernels";
  let description = [{
    Runs on the outlined kernels (`gpu.func ... kernel`) of a GPU module.
    A memref argument that the kernel only reads (loads, descriptor
    queries, views of it that are only read) gets `llvm.readonly`, which
    the NVVM lowering copies to its pointers; `kpool-nvvm-readonly-noalias`
    then adds `noalias` to them, so that the NVPTX backend loads them with
    `ld.global.nc` (the read-only data path). With `min-blocks-per-sm`,
    every kernel also gets `nvvm.minctasm` (PTX `.minnctapersm`), an
    occupancy hint that lets ptxas schedule the member loads up front.
  }];
  let options = [
    Option<"minBlocksPerSM", "min-blocks-per-sm", "int64_t", /*default=*/"0",
           "blocks per multiprocessor that ptxas must allow for "
           "(nvvm.minctasm); 0 gives no hint">,
  ];
}

def KPoolNVVMReadOnlyNoAliasPass
    : Pass<"kpool-nvvm-readonly-noalias", "::mlir::gpu::GPUModuleOp"> {
  let summary = "noalias on the read-only pointers of lowered kpool kernels";
  let description = [{
    Runs after `convert-gpu-to-nvvm`: every pointer argument of an
    `nvvm.kernel` function that carries `llvm.readonly` (from
    `kpool-gpu-kernel-attrs`) also gets `llvm.noalias`. The upstream lowering
    cannot copy `noalias` to the pointers of a memref descriptor. This states
    the kernels' contract that no operand they write overlaps an operand
    they only read; the read-only operands may overlap each other.
  }];
}

#endif // KPOOL_DIALECT_KPOOL_TRANSFORMS_PASSES_TD
