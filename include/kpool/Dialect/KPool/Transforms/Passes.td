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

def KPoolMapToGPUPass : Pass<"kpool-map-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Map the parallel loops of lowered kpool ops to gpu.launch";
  let description = [{
    Runs after `convert-kpool-to-linalg`, on its output: each outermost
    `scf.parallel` (one iteration per pooled row or request) becomes one
    `gpu.launch`, and the channel loops of each row (the `linalg.generic`
    tagged `kpool.pool_row`, and the 1-D `linalg.fill`/`linalg.copy` of the
    zero rows and ring copies) are spread over the threads of a row group.
    The structured IR stays the single source: the loop body (binary search,
    guards, row views) moves into the launch unchanged.

    Mapping: `threadIdx.x` runs over the channels of one row, `threadIdx.y`
    over the rows of a block, `blockIdx.x` over groups of rows. Each thread
    handles `V` consecutive channels per step, `V` the widest power of two
    with `V * sizeof(T) <= vector-bytes` that divides `head_dim` (8 bf16 or
    f16 and 4 f32 channels for 16 bytes; `head_dim = 128` gives 16 or 32
    threads per row). The vector loads and stores are taken only when every
    view of the row is unit-stride and aligned to the access width (checked
    per row at run time); otherwise the row runs a scalar loop with the same
    thread mapping. A row's metadata (binary search, guards) is evaluated
    redundantly by the threads of its group, which read the same addresses,
    and a store outside the channel loops is done by `threadIdx.x == 0` only.
    An empty iteration space launches nothing.

    Only the loops kpool's lowering produced (an `scf.parallel` tagged
    `kpool.kernel`) are mapped: the caller's own loops, allocations and ops
    in the same function are left to the caller's pipeline (e.g. upstream's
    `gpu-map-parallel-loops` and `convert-parallel-loops-to-gpu`), so the
    pass composes into a graph compiler's pipeline. With
    `check-host-access` (on in `kpool-lower-to-nvvm`, whose kernels run on
    caller-provided device buffers), a function with kernels may keep only
    descriptor reads (`memref.dim`, strides) on the host: host allocations,
    copies and buffer accesses outside the parallel loops are rejected.

    A pool-cache entry (`kpool.cache_entry`) is computed by the row group
    that wrote its pooled row: the group (then a power of two of at most a
    warp) meets at a warp barrier, and its lanes hold the entry's channels
    `i * lanes + lane`, exchanging them for the rotation's butterflies and
    the absmax reduction by `shfl.sync.bfly` (NVVM ops: the pass then
    targets NVIDIA GPUs). Lane 0 stores the scale.
  }];
  let options = [
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"16",
           "widest access per thread and channel step, in bytes (a power of "
           "two, at most 16); the element size keeps the channel loops scalar">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "threads per block (rows per block = block-size / threads per row)">,
    Option<"maxThreadsPerRow", "max-threads-per-row", "int64_t",
           /*default=*/"32",
           "most threads that share one row's channels (a warp by default)">,
    Option<"checkHostAccess", "check-host-access", "bool",
           /*default=*/"false",
           "reject host allocations, copies and buffer accesses outside "
           "parallel loops in a function with kpool kernels (the guard of "
           "kpool-lower-to-nvvm, whose kernels run on caller-provided "
           "device buffers)">,
    Option<"approximateExp", "approximate-exp", "bool", /*default=*/"false",
           "rewrite math.exp in the kernels with MLIR's polynomial "
           "approximation (what kpool-vectorize-pool-rows does on the CPU) "
           "instead of leaving it to libdevice's __nv_expf; the CPU path's "
           "arithmetic, so it turns fast-math off">,
    Option<"fastMath", "fast-math", "bool", /*default=*/"true",
           "the GPU's fast arithmetic in the pooling function: exp(x) as "
           "exp2(x * log2 e) (ex2.approx.f32) and the division with afn "
           "(div.approx.f32), within the contract's tolerance (docs/gpu.md); "
           "false keeps libdevice's accurate __nv_expf and div.rn.f32">,
    Option<"gridBlocks", "grid-blocks", "int64_t", /*default=*/"1024",
           "most blocks per launch; a grid-stride loop covers the rows past "
           "them, with row-invariant loads (ape) issued once per thread">,
    Option<"hardwareFP8", "hardware-fp8", "bool", /*default=*/"true",
           "FP8 codes of pool-cache entries by the hardware conversion "
           "(cvt.rn.satfinite.e4m3x2.f32, sm_89+); false: the exact "
           "software conversion of the CPU path">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
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
