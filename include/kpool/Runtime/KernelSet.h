//===- KernelSet.h - compiled kpool kernels on caller buffers ---*- C++ -*-===//
//
// A KernelSet holds the kpool kernels compiled once for one (element type,
// head_dim, kpool, target) and runs them on caller-owned strided buffers.
// Every call takes the caller's stream (CPU kernels ignore it; CUDA kernels
// only enqueue on it: no synchronization, allocation, copy or module load on
// a call's path). Host-side validation checks every operand's shape and, on
// the CPU, the metadata before a kernel runs and reports the request and
// field at fault; device-resident metadata is validated by an explicit call
// on host copies (checkCompress, ...). The kernels' own guards are the last
// line, not the first. Part of KPoolRuntimeCore (no
// MLIR): kernels come precompiled (kpool-aot) or from a compiler registered
// with registerKernelCompiler (the JIT, KPoolRuntimeJit).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELSET_H
#define KPOOL_RUNTIME_KERNELSET_H

#include "kpool/ABI/CacheFormat.h"
#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/View.h"
#include "kpool/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace kpool {

/// Where the kernels run.
enum class Target { CPU, CUDA };

/// What a kernel set is compiled for.
struct KernelConfig {
  ElementType elementType = KPOOL_BF16;
  int64_t headDim = 128;
  int64_t kpool = 4;
  Target target = Target::CPU;
  /// CPU: run pooled rows and requests on OpenMP threads.
  bool openmp = false;
  /// CPU: channels per vector (see kpool-lower-to-llvm); 0 for scalar code.
  int64_t vectorSize = 16;
  /// Only the pool_offsets kernel, which depends on nothing but `kpool`
  /// (the other three fail with an error): one small kernel to compile
  /// when a caller only needs the scan. elementType and headDim are
  /// ignored.
  bool poolOffsetsOnly = false;
  /// With a format (entry not None), the set also has the pool-cache
  /// kernels compressCache, ringCloseCache and stepCache of that format.
  CacheFormat cache;

  bool operator==(const KernelConfig &o) const {
    return elementType == o.elementType && headDim == o.headDim &&
           kpool == o.kpool && target == o.target && openmp == o.openmp &&
           vectorSize == o.vectorSize && poolOffsetsOnly == o.poolOffsetsOnly &&
           cache == o.cache;
  }
};

/// The caller's stream of a call: a CUstream (or a framework's stream
/// handle that is one) as an opaque pointer, and, optionally, the call's
/// status word. Every entry point takes one. CPU kernels ignore the stream
/// and run before the call returns. On the CUDA target null is CUDA's NULL
/// stream of the current context (the legacy default stream, which orders
/// with the context's blocking streams): the call enqueues there and still
/// never synchronizes.
///
/// The status word (`Stream(stream, &word)`, null for none) is one uint64_t
/// in the kernels' memory (device memory on the CUDA target) where the
/// kernels record the first bad-metadata finding their guards meet,
/// stream-ordered with the call (docs/semantics.md, "The status word";
/// decode it with kpool::statusWordError).
struct Stream {
  void *handle = nullptr;
  uint64_t *status = nullptr;
  constexpr Stream() = default;
  constexpr explicit Stream(void *handle, uint64_t *status = nullptr)
      : handle(handle), status(status) {}
};

/// The error the status word `word` holds (see Stream::status): success
/// for 0, otherwise the request and field the kernels found at fault, in
/// the words host validation uses for that finding (indices, not values;
/// the word keeps the smallest (request, finding), which need not be the
/// finding host validation reports first).
Status statusWordError(uint64_t word);

/// Whether a call validates its operands' metadata on the host before
/// launching (shapes are always checked; they are in the views).
///   Auto   the default: Check where the metadata is host memory (a CPU
///          kernel set), shapes only where it is device memory (a CUDA
///          kernel set), since reading it would be a host round trip.
///   Check  read and check the metadata; on a kernel set whose operands are
///          device memory this returns an error saying so, and launches
///          nothing (validate host copies with checkCompress & co. first).
///   Trust  shapes only; exists to test the kernels' own guards.
enum class Validation { Auto, Check, Trust };

/// The entry points of one configuration's kernels (the C interface of
/// KernelABI.def, one field per kernel: compress, seedTail, ringClose,
/// poolOffsets) and where their operands live.
struct KernelBackend {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)                   \
  Name##Fn member = nullptr;
#include "kpool/ABI/KernelABI.def"
  /// Operands are device memory (the CUDA target): calls never read
  /// metadata on the host, and Validation::Check is an error.
  bool deviceResident = false;
  /// Loads what the kernels need (GPU modules) in the context of `stream`
  /// ahead of the first call, e.g. before a graph capture; null when there
  /// is nothing to load.
  Status (*prepare)(void *stream) = nullptr;
  /// Keeps alive what the entry points live in (e.g. a JIT engine).
  std::shared_ptr<void> owner;

  /// The entry point of kernel `id`, untyped: for code that fills a
  /// backend from symbols by name (a JIT's lookup).
  void *entry(abi::KernelId id) const {
    switch (id) {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)                   \
  case abi::KernelId::Name:                                                    \
    return reinterpret_cast<void *>(member);
#include "kpool/ABI/KernelABI.def"
    }
    return nullptr;
  }
  void setEntry(abi::KernelId id, void *fn) {
    switch (id) {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)                   \
  case abi::KernelId::Name:                                                    \
    member = reinterpret_cast<Name##Fn>(fn);                                   \
    break;
#include "kpool/ABI/KernelABI.def"
    }
  }
};

/// Compiles the kernels of a configuration that has no precompiled ones
/// into `backend` (e.g. the JIT of kpool/Runtime/Jit.h).
using KernelCompiler =
    std::function<Status(const KernelConfig &config, KernelBackend &backend)>;

/// Makes `compiler` the one KernelSet::get uses for configurations of
/// `target` with no precompiled kernels (replacing an earlier one; an
/// empty function removes it). Thread-safe.
void registerKernelCompiler(Target target, KernelCompiler compiler);

class KernelSetImpl;

/// The four kernels for one configuration. Thread-safe to call concurrently
/// on disjoint outputs.
class KernelSet {
public:
  /// Returns the kernel set for `config`: precompiled kernels registered
  /// for it if any, otherwise kernels compiled on first use by the compiler
  /// registered for its target (registerKernelCompiler; the CPU JIT
  /// registers with kpool::registerJitCompiler()). Cached for the life of
  /// the process. On failure returns null and sets `status`. Compiling a
  /// configuration blocks only the callers of that configuration: calls
  /// for configurations already compiled (or compiling) go on meanwhile.
  static std::shared_ptr<KernelSet> get(const KernelConfig &config,
                                        Status &status);

  /// Like `get`, but only ever uses precompiled kernels, never a
  /// registered compiler. The GPU kernels come this way.
  static std::shared_ptr<KernelSet> getPrecompiled(const KernelConfig &config,
                                                   Status &status);

  /// Registers ahead-of-time kernels for `config`; the registration
  /// function that kpool-aot generates calls this.
  static void registerPrecompiled(const KernelConfig &config,
                                  KernelBackend backend);

  const KernelConfig &config() const;

  // Operands are in the production kernels' order: outputs first, then the
  // inputs in the order of the op's `ins`, then the caller's Stream (with
  // its optional status word). The overloads without a stream pass a null
  // one, with no status word (see Stream).

  /// kpool.compress: pooled[pool_row_offsets[b] + j] for each pool j made
  /// only of request b's tokens in this call. `pooled` is capacity-shaped:
  /// any number of rows (launch geometry never depends on metadata).
  Status compress(const View &pooled, const View &k, const View &gate,
                  const View &ape, const View &inputRowOffsets,
                  const View &poolRowOffsets, const View &cacheLengths,
                  Stream stream,
                  Validation validation = Validation::Auto) const;
  Status compress(const View &pooled, const View &k, const View &gate,
                  const View &ape, const View &inputRowOffsets,
                  const View &poolRowOffsets, const View &cacheLengths,
                  Validation validation = Validation::Auto) const {
    return compress(pooled, k, gate, ape, inputRowOffsets, poolRowOffsets, cacheLengths, Stream(), validation);
  }

  /// kpool.seed_tail: stashes trailing members of open pools into `tail`.
  Status seedTail(const View &tail, const View &k, const View &gate,
                  const View &inputRowOffsets, const View &cacheLengths,
                  const View &slotIdx, int32_t numRequests,
                  Stream stream,
                  Validation validation = Validation::Auto) const;
  Status seedTail(const View &tail, const View &k, const View &gate,
                  const View &inputRowOffsets, const View &cacheLengths,
                  const View &slotIdx, int32_t numRequests,
                  Validation validation = Validation::Auto) const {
    return seedTail(tail, k, gate, inputRowOffsets, cacheLengths, slotIdx, numRequests, Stream(), validation);
  }

  /// kpool.ring_close: closes the pool the ring holds open per request.
  Status ringClose(const View &pooled, const View &closedPool, const View &tail,
                   const View &k, const View &gate, const View &ape,
                   const View &inputRowOffsets, const View &cacheLengths,
                   const View &slotIdx, int32_t numRequests,
                  Stream stream,
                  Validation validation = Validation::Auto) const;
  Status ringClose(const View &pooled, const View &closedPool, const View &tail,
                   const View &k, const View &gate, const View &ape,
                   const View &inputRowOffsets, const View &cacheLengths,
                   const View &slotIdx, int32_t numRequests,
                  Validation validation = Validation::Auto) const {
    return ringClose(pooled, closedPool, tail, k, gate, ape, inputRowOffsets,
                     cacheLengths, slotIdx, numRequests, Stream(), validation);
  }

  /// kpool.pool_offsets: the exclusive prefix sum of full-pool counts.
  Status poolOffsets(const View &poolRowOffsets, const View &inputRowOffsets,
                     const View &cacheLengths,
                  Stream stream,
                  Validation validation = Validation::Auto) const;
  Status poolOffsets(const View &poolRowOffsets, const View &inputRowOffsets,
                     const View &cacheLengths,
                  Validation validation = Validation::Auto) const {
    return poolOffsets(poolRowOffsets, inputRowOffsets, cacheLengths, Stream(), validation);
  }

  /// kpool.step, the fused serving step: ring_close, pool_offsets, compress
  /// and seed_tail in one kernel, with what the four calls produce.
  /// `closed` [B, head_dim] and `closedPool` [B] are ring_close's outputs,
  /// `poolRowOffsets` [B+1] pool_offsets', `pooled` compress's
  /// (capacity-shaped: a call of T tokens completes at most
  /// floor(T / kpool) + B pools; validation rejects fewer rows than the
  /// call's pools) and `tail` the ring, read and written. Validation makes
  /// one pass over the metadata for the whole step.
  Status step(const View &closed, const View &closedPool,
              const View &poolRowOffsets, const View &pooled, const View &tail,
              const View &k, const View &gate, const View &ape,
              const View &inputRowOffsets, const View &cacheLengths,
              const View &slotIdx, int32_t numRequests, Stream stream,
              Validation validation = Validation::Auto) const;
  Status step(const View &closed, const View &closedPool,
              const View &poolRowOffsets, const View &pooled, const View &tail,
              const View &k, const View &gate, const View &ape,
              const View &inputRowOffsets, const View &cacheLengths,
              const View &slotIdx, int32_t numRequests,
              Validation validation = Validation::Auto) const {
    return step(closed, closedPool, poolRowOffsets, pooled, tail, k, gate, ape,
                inputRowOffsets, cacheLengths, slotIdx, numRequests, Stream(),
                validation);
  }

  // The pool-cache kernels (a set created with a CacheFormat): each is its
  // op above with every pool it produces also stored, in the same kernel,
  // into entry (block_table[b, p / page_size], p mod page_size) of
  // `cacheKeys` [N, page_size, head_dim] (the element type, or FP8 bytes)
  // and, for FP8, `cacheScales` [N, page_size] f32 (ignored, any view, for
  // entries of the element type). `blockTable` is [B, pages per request]
  // uint32 (-1 padding). Validation also checks, per request, that every
  // pool the call stores has a page in the table, below N, that no two
  // pools store into one entry, and the views' shapes.

  Status compressCache(const View &pooled, const View &cacheKeys,
                       const View &cacheScales, const View &k,
                       const View &gate, const View &ape,
                       const View &inputRowOffsets,
                       const View &poolRowOffsets, const View &cacheLengths,
                       const View &blockTable, Stream stream = Stream(),
                       Validation validation = Validation::Auto) const;
  Status ringCloseCache(const View &pooled, const View &closedPool,
                        const View &cacheKeys, const View &cacheScales,
                        const View &tail, const View &k, const View &gate,
                        const View &ape, const View &inputRowOffsets,
                        const View &cacheLengths, const View &slotIdx,
                        int32_t numRequests, const View &blockTable,
                        Stream stream = Stream(),
                        Validation validation = Validation::Auto) const;
  Status stepCache(const View &closed, const View &closedPool,
                   const View &poolRowOffsets, const View &pooled,
                   const View &tail, const View &cacheKeys,
                   const View &cacheScales, const View &k, const View &gate,
                   const View &ape, const View &inputRowOffsets,
                   const View &cacheLengths, const View &slotIdx,
                   int32_t numRequests, const View &blockTable,
                   Stream stream = Stream(),
                   Validation validation = Validation::Auto) const;

  // Host-side validation as an explicit call: the checks Validation::Check
  // makes, on metadata views in host memory (a GPU engine's host copies of
  // what it will upload); the other views are only read for their shapes,
  // so they may be device memory. Launch nothing.
  Status checkCompress(const View &pooled, const View &k, const View &gate,
                  const View &ape, const View &inputRowOffsets,
                  const View &poolRowOffsets, const View &cacheLengths) const;
  Status checkSeedTail(const View &tail, const View &k, const View &gate,
                  const View &inputRowOffsets, const View &cacheLengths,
                  const View &slotIdx, int32_t numRequests) const;
  Status checkRingClose(const View &pooled, const View &closedPool, const View &tail,
                   const View &k, const View &gate, const View &ape,
                   const View &inputRowOffsets, const View &cacheLengths,
                   const View &slotIdx, int32_t numRequests) const;
  Status checkPoolOffsets(const View &poolRowOffsets, const View &inputRowOffsets,
                     const View &cacheLengths) const;
  Status checkStep(const View &closed, const View &closedPool,
                   const View &poolRowOffsets, const View &pooled,
                   const View &tail, const View &k, const View &gate,
                   const View &ape, const View &inputRowOffsets,
                   const View &cacheLengths, const View &slotIdx,
                   int32_t numRequests) const;
  Status checkCompressCache(const View &pooled, const View &cacheKeys,
                            const View &cacheScales, const View &k,
                            const View &gate, const View &ape,
                            const View &inputRowOffsets,
                            const View &poolRowOffsets,
                            const View &cacheLengths,
                            const View &blockTable) const;
  Status checkRingCloseCache(const View &pooled, const View &closedPool,
                             const View &cacheKeys, const View &cacheScales,
                             const View &tail, const View &k,
                             const View &gate, const View &ape,
                             const View &inputRowOffsets,
                             const View &cacheLengths, const View &slotIdx,
                             int32_t numRequests,
                             const View &blockTable) const;
  Status checkStepCache(const View &closed, const View &closedPool,
                        const View &poolRowOffsets, const View &pooled,
                        const View &tail, const View &cacheKeys,
                        const View &cacheScales, const View &k,
                        const View &gate, const View &ape,
                        const View &inputRowOffsets, const View &cacheLengths,
                        const View &slotIdx, int32_t numRequests,
                        const View &blockTable) const;

  /// Loads what the kernels need in the context of `stream` (GPU modules),
  /// so that no later call loads anything: call it before capturing calls
  /// into a graph. Nothing to do on the CPU. Not stream-ordered (it may
  /// allocate and synchronize): never call it during a capture.
  Status prepare(Stream stream = Stream()) const;

  /// Whether the kernels' operands are device memory.
  bool deviceResident() const;

  ~KernelSet();

  /// Wraps `backend` as a kernel set (uncached); prefer get().
  KernelSet(const KernelConfig &config, KernelBackend backend);

private:
  std::unique_ptr<KernelSetImpl> impl;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELSET_H
