//===- KernelSet.h - compiled kpool kernels on caller buffers ---*- C++ -*-===//
//
// A KernelSet holds the kpool kernels compiled once for one configuration
// (element type, head_dim, kpool, target, pool-cache format) and runs them
// on caller-owned strided buffers. A call takes the kernel's argument
// struct (kpool/ABI/Args.h: one named field per operand, e.g.
// CompressArgs), the caller's stream (CPU kernels ignore it; CUDA kernels
// only enqueue on it: no synchronization, allocation, copy or module load
// on a call's path) and a Validation. Host-side validation checks every
// operand's shape and, on the CPU, the metadata before a kernel runs and
// reports the request and field at fault; device-resident metadata is
// validated by an explicit call on host copies (check). The kernels' own
// guards are the last line, not the first. Every method is generated from
// the kernel ABI table (kpool/ABI/KernelABI.def) and goes through one
// generic call. Part of KPoolRuntimeCore (no MLIR): kernels come
// precompiled (kpool-aot) or from a compiler registered with
// registerKernelCompiler (the JIT, KPoolRuntimeJit).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELSET_H
#define KPOOL_RUNTIME_KERNELSET_H

#include "kpool/ABI/Args.h"
#include "kpool/ABI/CacheFormat.h"
#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/View.h"
#include "kpool/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace kpool {

/// Where the kernels run. The underlying type is fixed, so any 32-bit
/// value a C caller passes is a value of the enum (and rejected by
/// validateConfig).
enum class Target : int32_t { CPU = 0, CUDA = 1 };

/// "cpu" or "cuda"; null for a value that is not a target.
const char *targetName(Target target);

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
  /// (the other kernels fail with an error): one small kernel to compile
  /// when a caller only needs the scan. elementType, headDim and cache are
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

/// The one check of a configuration's values, which every layer (the C
/// API, the Python package, kpool-aot, KernelSet::get) calls: the target,
/// element type and cache format are values of their enums, head_dim >= 1,
/// kpool in [1, 2^32] (positions are below 2^33, so no larger pool can
/// complete), kpool x head_dim at most 2^40 (the elements of 'ape'),
/// vector_size >= 0, and a hadamard rotation only for a power-of-two
/// head_dim. The dialect's verifier checks the same attributes in IR.
/// Messages start with "kernel set: " and name the field.
Status validateConfig(const KernelConfig &config);

/// The caller's stream of a call: a CUstream (or a framework's stream
/// handle that is one) as an opaque pointer, and, optionally, the call's
/// status word. Every call takes one. CPU kernels ignore the stream and run
/// before the call returns. On the CUDA target null is CUDA's NULL stream
/// of the current context (the legacy default stream, which orders with
/// the context's blocking streams): the call enqueues there and still never
/// synchronizes.
///
/// The status word (`Stream(stream, &word)`, null for none) is one uint64_t,
/// 8-byte aligned, in the kernels' memory (device memory on the CUDA
/// target) where the kernels record the first bad-metadata finding their
/// guards meet, stream-ordered with the call (docs/semantics.md, "The status
/// word"; decode it with kpool::statusWordError).
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
///          nothing (validate host copies with KernelSet::check first).
///   Trust  shapes only; exists to test the kernels' own guards.
enum class Validation : int32_t { Auto = 0, Check = 1, Trust = 2 };

/// "auto", "check" or "trust"; null for a value that is not one.
const char *validationName(Validation validation);

/// The entry points of one configuration's kernels (the C interface of
/// KernelABI.def, one field per kernel: compress, seedTail, ...) and where
/// their operands live.
struct KernelBackend {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
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
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  case abi::KernelId::Name:                                                    \
    return reinterpret_cast<void *>(member);
#include "kpool/ABI/KernelABI.def"
    }
    return nullptr;
  }
  void setEntry(abi::KernelId id, void *fn) {
    switch (id) {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
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

/// The kernels of one configuration. Thread-safe to call concurrently on
/// disjoint outputs.
///
///   kpool::CompressArgs a{};
///   a.pooled = pooled;  a.k = k;  a.gate = gate;  a.ape = ape;
///   a.input_row_offsets = iro;  a.pool_row_offsets = pro;
///   a.cache_lengths = lengths;
///   kpool::Status s = kernels->compress(a, kpool::Stream(stream, &word));
class KernelSet {
public:
  /// Returns the kernel set for `config` (checked by validateConfig):
  /// precompiled kernels registered for it if any, otherwise kernels
  /// compiled on first use by the compiler registered for its target
  /// (registerKernelCompiler; the CPU JIT registers with
  /// kpool::registerJitCompiler()). Cached for the life of the process:
  /// every caller of one configuration shares one set. On failure returns
  /// null and sets `status`. Compiling a configuration blocks only the
  /// callers of that configuration: calls for configurations already
  /// compiled (or compiling) go on meanwhile.
  static std::shared_ptr<KernelSet> get(const KernelConfig &config,
                                        Status &status);

  /// Like `get`, but only ever uses precompiled kernels, never a
  /// registered compiler.
  static std::shared_ptr<KernelSet> getPrecompiled(const KernelConfig &config,
                                                   Status &status);

  /// Registers ahead-of-time kernels for `config`; the registration
  /// function that kpool-aot generates calls this.
  static void registerPrecompiled(const KernelConfig &config,
                                  KernelBackend backend);

  const KernelConfig &config() const;

  /// Runs kernel `id` on `args`, a pointer to its argument struct
  /// (KPool<Name>Args): validation (see Validation), then the kernel on
  /// `stream`. What every generated method below calls; it marshals the
  /// struct by the ABI table. A call that fails writes none of its outputs.
  Status call(abi::KernelId id, const void *args, Stream stream = Stream(),
              Validation validation = Validation::Auto) const;

  /// Host-side validation as an explicit call: the checks Validation::Check
  /// makes, on metadata views in host memory (a GPU engine's host copies of
  /// what it will upload); the other views are only read for their shapes,
  /// so they may be device memory. Launches nothing.
  Status check(abi::KernelId id, const void *args) const;

  // One method per kernel of the ABI table, and one `check` overload (what
  // each op computes: KernelABI.def and docs/semantics.md):
  //   Status compress(const CompressArgs &, Stream = {}, Validation = Auto);
  //   Status check(const CompressArgs &);
  // and so on for seedTail, ringClose, poolOffsets, step, compressCache,
  // ringCloseCache and stepCache. The pool-cache kernels need a set
  // created with a CacheFormat.
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  Status member(const Name##Args &args, Stream stream = Stream(),              \
                Validation validation = Validation::Auto) const {              \
    return call(abi::KernelId::Name, &args, stream, validation);               \
  }                                                                            \
  Status member(const Name##Args &args, Validation validation) const {         \
    return call(abi::KernelId::Name, &args, Stream(), validation);             \
  }                                                                            \
  Status check(const Name##Args &args) const {                                 \
    return check(abi::KernelId::Name, &args);                                  \
  }
#include "kpool/ABI/KernelABI.def"

  /// Loads what the kernels need in the context of `stream` (GPU modules),
  /// so that no later call loads anything: call it before capturing calls
  /// into a graph. Nothing to do on the CPU. Not stream-ordered (it may
  /// allocate and synchronize): never call it during a capture.
  Status prepare(Stream stream = Stream()) const;

  /// Whether the kernels' operands are device memory.
  bool deviceResident() const;

  /// Whether the set has kernel `id` (a pool-offsets-only set has only
  /// pool_offsets; the `*_cache` kernels need a cache format).
  bool hasKernel(abi::KernelId id) const;

  ~KernelSet();

  /// Wraps `backend` as a kernel set (uncached); prefer get().
  KernelSet(const KernelConfig &config, KernelBackend backend);

private:
  std::unique_ptr<KernelSetImpl> impl;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELSET_H
