//===- KernelSet.h - compiled kpool kernels on caller buffers ---*- C++ -*-===//
//
// A KernelSet holds the kpool kernels compiled once for one (element type,
// head_dim, kpool, target) and runs them on caller-owned strided buffers.
// Host-side validation checks every operand's shape and the metadata before
// a kernel runs and reports the request and field at fault; the kernels'
// own guards are the last line, not the first. Part of KPoolRuntimeCore (no
// MLIR): kernels come precompiled (kpool-aot) or from a compiler registered
// with registerKernelCompiler (the JIT, KPoolRuntimeJit).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELSET_H
#define KPOOL_RUNTIME_KERNELSET_H

#include "kpool/Runtime/KernelABI.h"
#include "kpool/Runtime/Status.h"
#include "kpool/Runtime/View.h"

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

  bool operator==(const KernelConfig &o) const {
    return elementType == o.elementType && headDim == o.headDim &&
           kpool == o.kpool && target == o.target && openmp == o.openmp &&
           vectorSize == o.vectorSize && poolOffsetsOnly == o.poolOffsetsOnly;
  }
};

/// Whether a call validates its operands on the host before launching.
/// `Trust` skips validation; it exists to test the kernels' own guards.
enum class Validation { Check, Trust };

/// The entry points of one configuration's kernels (the C interface of
/// KernelABI.def, one field per kernel: compress, seedTail, ringClose,
/// poolOffsets) and how to read metadata that lives in the target's memory.
struct KernelBackend {
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  Name##Fn member = nullptr;
#include "kpool/Runtime/KernelABI.def"
  /// Copies a 1-D view of 32-bit elements into host memory, for host-side
  /// validation; null when views are host memory (the CPU target).
  Status (*readMetadata)(const View &view,
                         std::vector<uint32_t> &out) = nullptr;
  /// Target memory for validation's own kernel runs (compress checks
  /// pool_row_offsets against the pool_offsets kernel); null on the CPU.
  /// Set together with readMetadata.
  void *(*allocateScratch)(size_t bytes) = nullptr;
  void (*freeScratch)(void *ptr) = nullptr;
  /// Keeps alive what the entry points live in (e.g. a JIT engine).
  std::shared_ptr<void> owner;

  /// The entry point of kernel `id`, untyped: for code that fills a
  /// backend from symbols by name (a JIT's lookup).
  void *entry(abi::KernelId id) const {
    switch (id) {
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  case abi::KernelId::Name:                                                    \
    return reinterpret_cast<void *>(member);
#include "kpool/Runtime/KernelABI.def"
    }
    return nullptr;
  }
  void setEntry(abi::KernelId id, void *fn) {
    switch (id) {
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  case abi::KernelId::Name:                                                    \
    member = reinterpret_cast<Name##Fn>(fn);                                   \
    break;
#include "kpool/Runtime/KernelABI.def"
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
  // inputs in the order of the op's `ins`.

  /// kpool.compress: pooled[pool_row_offsets[b] + j] for each pool j made
  /// only of request b's tokens in this call.
  Status compress(const View &pooled, const View &k, const View &gate,
                  const View &ape, const View &inputRowOffsets,
                  const View &poolRowOffsets, const View &cacheLengths,
                  Validation validation = Validation::Check) const;

  /// kpool.seed_tail: stashes trailing members of open pools into `tail`.
  Status seedTail(const View &tail, const View &k, const View &gate,
                  const View &inputRowOffsets, const View &cacheLengths,
                  const View &slotIdx, int32_t numRequests,
                  Validation validation = Validation::Check) const;

  /// kpool.ring_close: closes the pool the ring holds open per request.
  Status ringClose(const View &pooled, const View &closedPool, const View &tail,
                   const View &k, const View &gate, const View &ape,
                   const View &inputRowOffsets, const View &cacheLengths,
                   const View &slotIdx, int32_t numRequests,
                   Validation validation = Validation::Check) const;

  /// kpool.pool_offsets: the exclusive prefix sum of full-pool counts.
  Status poolOffsets(const View &poolRowOffsets, const View &inputRowOffsets,
                     const View &cacheLengths,
                     Validation validation = Validation::Check) const;

  /// kpool.step, the fused serving step: ring_close, pool_offsets, compress
  /// and seed_tail in one kernel, with what the four calls produce.
  /// `closed` [B, head_dim] and `closedPool` [B] are ring_close's outputs,
  /// `poolRowOffsets` [B+1] pool_offsets', `pooled` compress's (its rows
  /// are a capacity: at most floor(T / kpool) + B pools come out of a call
  /// of T tokens; validation rejects fewer rows than the call's pools) and
  /// `tail` the ring, read and written. Validation makes one pass over the
  /// metadata for the whole step.
  Status step(const View &closed, const View &closedPool,
              const View &poolRowOffsets, const View &pooled, const View &tail,
              const View &k, const View &gate, const View &ape,
              const View &inputRowOffsets, const View &cacheLengths,
              const View &slotIdx, int32_t numRequests,
              Validation validation = Validation::Check) const;

  ~KernelSet();

  /// Wraps `backend` as a kernel set (uncached); prefer get().
  KernelSet(const KernelConfig &config, KernelBackend backend);

private:
  std::unique_ptr<KernelSetImpl> impl;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELSET_H
