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

def KPoolDeviceBuffersPass
    : Pass<"kpool-device-buffers", "::mlir::ModuleOp"> {
  let summary = "Allocate a function's buffers in GPU memory next to its "
                "kernels";
  let description = [{
    For a function whose ops run as GPU kernels: one with kpool ops (or
    kpool's kernels, after kpool-map-to-gpu), GPU launches, or GPU memory
    operations. Run it once the caller's ops are parallel loops
    (`convert-linalg-to-parallel-loops`) and before those are mapped
    (`gpu-map-parallel-loops`, `convert-parallel-loops-to-gpu`). The
    buffers bufferization allocated on the host would be read and written
    by the kernels, so this pass allocates them in device memory:
    `memref.alloc` -> `gpu.alloc`, `memref.dealloc` -> `gpu.dealloc`;
    `memref.copy` -> `gpu.memcpy` between row-major buffers, else a
    parallel loop that the mapping makes a kernel (e.g. the deallocation
    pipeline's clone of a strided argument). An allocation that only the
    host reads and writes stays in host memory: loaded and stored outside
    the parallel loops, freed, or passed to a function that uses no device
    memory (the deallocation pipeline's lists of buffers to free and its
    `dealloc_helper`; a module pass, so that it may read the callees).
    Then it checks that nothing else touches a buffer on the host outside
    the parallel loops (the check of `kpool-map-to-gpu{check-host-access}`).
    Other functions are left as they are.
    `kpool-lower-to-nvvm{map-other-ops=true}` runs it; so can a graph
    compiler that maps its ops itself (docs/embedding.md).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def KPoolAsyncDeviceMemoryPass
    : Pass<"kpool-async-device-memory", "::mlir::func::FuncOp"> {
  let summary = "Order a function's GPU memory operations on a stream";
  let description = [{
    gpu-to-llvm lowers `gpu.alloc`, `gpu.memcpy` and `gpu.dealloc` only in
    their asynchronous form. In a function that has any synchronous one,
    this pass runs upstream's `gpu-async-region` (after kernel outlining):
    the memory operations and the launches go to one stream, ordered by
    tokens, and the function waits for them before it returns. Functions
    without GPU memory operations keep their synchronous launches.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // KPOOL_CONVERSION_PASSES_TD
