//===- Pipelines.h - kpool lowering pipelines -------------------*- C++ -*-===//
//
// The pass pipelines that take kpool ops on tensors in `func.func`s to the
// LLVM dialect (CPU) and to NVVM plus a GPU binary (NVIDIA). Each is an
// options struct, a build function a graph compiler calls on its own pass
// manager, and one command-line registration.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_PIPELINES_PIPELINES_H
#define KPOOL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/LogicalResult.h"

#include <string>

namespace mlir {
class OpPassManager;

namespace kpool {

/// The options both pipelines have.
template <typename Derived>
struct KPoolPipelineOptionsBase : public PassPipelineOptions<Derived> {
  ::mlir::detail::PassOptions::Option<bool> bufferize{
      *this, "bufferize",
      llvm::cl::desc("Run one-shot-bufferize (function boundaries included) "
                     "first; turn off for input that is already on memrefs"),
      llvm::cl::init(true)};
  ::mlir::detail::PassOptions::Option<bool> fuseStep{
      *this, "fuse-step",
      llvm::cl::desc("Fuse each serving step's ring_close, pool_offsets, "
                     "compress and seed_tail into one kpool.step "
                     "(kpool-fuse-step), which lowers to one kernel"),
      llvm::cl::init(true)};
};

/// Options of `kpool-lower-to-llvm` (named apart from upstream's
/// mlir::LowerToLLVMOptions, the options of the LLVM type converter).
struct KPoolToLLVMPipelineOptions
    : public KPoolPipelineOptionsBase<KPoolToLLVMPipelineOptions> {
  PassOptions::Option<bool> openmp{
      *this, "openmp",
      llvm::cl::desc("Run pooled rows and requests on OpenMP threads "
                     "(convert-scf-to-openmp); link libomp at run time"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> vectorSize{
      *this, "vector-size",
      llvm::cl::desc("Channels per vector in the pooled-row loops "
                     "(kpool-vectorize-pool-rows); 0 keeps them scalar"),
      llvm::cl::init(16)};
  PassOptions::Option<bool> deallocate{
      *this, "deallocate",
      llvm::cl::desc("Insert deallocations for what the input allocates "
                     "(buffer-deallocation-pipeline). Public functions then "
                     "return copies of arguments they updated in place; turn "
                     "off for input that allocates nothing, to keep every "
                     "update in place"),
      llvm::cl::init(true)};
};

/// Checks the options' values (vector-size not negative). On failure
/// returns failure and sets `error` to a message naming the option.
LogicalResult verifyLowerToLLVMOptions(const KPoolToLLVMPipelineOptions &options,
                                       std::string &error);

/// Bufferizes, lowers kpool to linalg, vectorizes the channel loops, lowers
/// to loops (OpenMP when asked) and converts everything to the LLVM dialect.
/// The result runs under `mlir-runner` or the ExecutionEngine.
/// Checks the options first (verifyLowerToLLVMOptions): on a bad value adds
/// nothing to `pm`, returns failure and stores the message in `error` (when
/// not null).
LogicalResult buildLowerToLLVMPipeline(OpPassManager &pm,
                                       const KPoolToLLVMPipelineOptions &options,
                                       std::string *error = nullptr);

/// Options of `kpool-lower-to-nvvm`.
struct KPoolToNVVMPipelineOptions
    : public KPoolPipelineOptionsBase<KPoolToNVVMPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("NVIDIA GPU architecture (sm_XX)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features; sm_90 needs at least +ptx80"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What the gpu.binary holds: isa (PTX text, JIT-compiled "
                     "by the driver at load), bin (cubin) or fatbin (cubin "
                     "plus PTX); bin and fatbin run ptxas at compile time"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<std::string> cudaToolkit{
      *this, "cuda-toolkit",
      llvm::cl::desc("CUDA toolkit root for libdevice (math.exp), ptxas and "
                     "fatbinary; empty: $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, "
                     "then /usr/local/cuda, the first that exists"),
      llvm::cl::init("")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level",
      llvm::cl::desc("LLVM optimization level of the device code"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> ptxasOptions{
      *this, "ptxas-options",
      llvm::cl::desc("Extra command-line options for ptxas"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> vectorBytes{
      *this, "vector-bytes",
      llvm::cl::desc("Widest per-thread access to a row, in bytes "
                     "(kpool-map-to-gpu); the element size keeps it scalar"),
      llvm::cl::init(16)};
  PassOptions::Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block (kpool-map-to-gpu)"),
      llvm::cl::init(256)};
  PassOptions::Option<bool> approximateExp{
      *this, "approximate-exp",
      llvm::cl::desc("exp by MLIR's polynomial approximation, as on the CPU "
                     "path, instead of libdevice's __nv_expf "
                     "(kpool-map-to-gpu). Without it the CUDA toolkit must "
                     "provide libdevice (nvvm/libdevice/libdevice.10.bc); "
                     "the pipeline fails when none is found. The CPU path's "
                     "arithmetic: it turns fast-math off"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fastMath{
      *this, "fast-math",
      llvm::cl::desc("The GPU's fast arithmetic in the pooling function "
                     "(kpool-map-to-gpu): exp(x) as exp2(x * log2 e) "
                     "(ex2.approx.f32) and an approximate division "
                     "(div.approx.f32), within the contract's tolerance "
                     "(docs/gpu.md); false: libdevice's accurate __nv_expf "
                     "and the IEEE div.rn.f32"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> gridBlocks{
      *this, "grid-blocks",
      llvm::cl::desc("Most blocks per launch; a grid-stride loop covers the "
                     "rest, with ape loaded once per thread "
                     "(kpool-map-to-gpu)"),
      llvm::cl::init(1024)};
  PassOptions::Option<int64_t> minBlocksPerSM{
      *this, "min-blocks-per-sm",
      llvm::cl::desc("Occupancy hint for ptxas (nvvm.minctasm, PTX "
                     ".minnctapersm); 0 gives none"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> mapOtherOps{
      *this, "map-other-ops",
      llvm::cl::desc("Lower the function's other ops (linalg, tensor, "
                     "memref, arith next to the kpool ops) to GPU kernels "
                     "too: bufferization with deallocation, then, once "
                     "kpool's kernels are mapped, upstream's "
                     "convert-linalg-to-parallel-loops, kpool-device-"
                     "buffers (the function's buffers in device memory), "
                     "and upstream's scf-parallel-loop-tiling, "
                     "gpu-map-parallel-loops and convert-parallel-loops-"
                     "to-gpu (docs/embedding.md)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> singleGPUModule{
      *this, "single-gpu-module",
      llvm::cl::desc("Outline every kernel into one gpu.module, compiled "
                     "(libdevice, PTX, ptxas) and loaded once rather than "
                     "once per kernel; the kernels are the same (kpool-aot "
                     "and the JIT use it)"),
      llvm::cl::init(false)};
};

/// Bufferizes, lowers kpool to linalg, maps each op's parallel loop to a
/// `gpu.launch` (kpool-map-to-gpu), outlines the kernels, lowers them to NVVM
/// and serializes them into a `gpu.binary`, and lowers the host side to the
/// LLVM dialect with `gpu.launch_func`, which mlir-translate turns into calls
/// of the mgpu* runtime functions (lib/Runtime/CUDA). The kernels work on the
/// caller's device buffers: the host code allocates and copies nothing.
///
/// Checks the options first (verifyLowerToNVVMOptions): on a bad value adds
/// nothing to `pm`, returns failure and stores the message in `error` (when
/// not null).
LogicalResult buildLowerToNVVMPipeline(OpPassManager &pm,
                                       const KPoolToNVVMPipelineOptions &options,
                                       std::string *error = nullptr);

/// Checks the options' values, so that no value makes a later pass crash,
/// abort or silently produce something else: `chip` is an NVIDIA
/// architecture LLVM knows (sm_20 ... sm_121f), `features` a comma-separated
/// list of `+ptxNN` PTX versions LLVM knows, none below what `chip` needs
/// (e.g. 78 for sm_90, 86 for sm_100a), `format` one of isa, bin, fatbin,
/// `cuda-toolkit` (when set) an existing directory, `opt-level` in [0, 3],
/// `vector-bytes` a power of two in [1, 16], `block-size` in [1, 1024]. The
/// toolkit (set or found) must provide libdevice unless `approximate-exp`
/// is set, and ptxas (and fatbinary) for `bin` (`fatbin`). On failure
/// returns failure and sets `error` to a message naming the option.
LogicalResult verifyLowerToNVVMOptions(const KPoolToNVVMPipelineOptions &options,
                                       std::string &error);

/// The CUDA toolkit root `buildLowerToNVVMPipeline` uses for `option`: the
/// option itself when set, else the first existing of $CUDA_HOME, $CUDA_PATH,
/// $CUDA_ROOT and /usr/local/cuda, else empty.
std::string resolveCudaToolkitPath(StringRef option);

/// The bufferization prefix both pipelines share: one-shot-bufferize with
/// function boundaries and fully dynamic layouts on function arguments, then
/// (when `deallocate`) the buffer deallocation pipeline and
/// convert-bufferization-to-memref. Deallocation makes public functions own
/// their results, so a function that returns an argument it updated in
/// place (the ring after seed_tail) returns a copy of it; input that
/// allocates nothing can skip it and update in place with no copy.
void buildBufferizationPipeline(OpPassManager &pm, bool deallocate = true);

/// The start both pipelines share: kpool-fuse-step when `fuseStep`, then,
/// when `bufferize`, buildBufferizationPipeline(pm, deallocate).
void addFuseAndBufferize(OpPassManager &pm, bool fuseStep, bool bufferize,
                         bool deallocate);

/// Checks that `pm` can take the passes of the pipeline `pipeline`: they
/// bufferize and convert whole modules, so `pm` must run on
/// `builtin.module` (or be op-agnostic, `any`, where they run on the
/// modules it meets). Adding them to a pass manager of another operation
/// would abort in OpPassManager::addPass; instead this returns failure and
/// sets `error` (when not null) to a message naming where the pipeline must
/// be nested. Both build functions call it first.
LogicalResult checkPipelineAnchor(const OpPassManager &pm, StringRef pipeline,
                                  std::string *error);

/// Registers `kpool-lower-to-llvm` (and the GPU pipeline when it is built).
void registerPipelines();

} // namespace kpool
} // namespace mlir

#endif // KPOOL_PIPELINES_PIPELINES_H
