/*===- kpool-c/Runtime.h - C API of the kpool runtime -------------*- C -*-===*\
|*                                                                            *|
|* The kpool kernels, compiled once per configuration (target, element type, *|
|* head_dim, kpool, pool-cache format) -- JIT-compiled for the CPU or CUDA  *|
|* (libKPoolJit.so, loaded on demand), taken from the disk cache, or         *|
|* precompiled (kpool-aot, kernel packs) -- and run on caller-owned strided  *|
|* buffers (KPoolView). The kernel ABI (every kernel's operands in order,    *|
|* with their offsets in the argument structs) can be read at run time. The *|
|* pool stores, which run the kernels for calls of any shape, are in        *|
|* kpool-c/Stores.h. This is what the Python package binds with ctypes.     *|
|*                                                                            *|
|* Errors. No function here aborts on bad input. A function that can fail    *|
|* returns NULL on success or a KPoolError the caller must free with         *|
|* kpoolErrorDestroy; kpoolErrorMessage says what is wrong, naming the op,   *|
|* the request and the field, e.g.                                           *|
|*   "compress: request 2: input_row_offsets[3] = 70 reaches past the 64     *|
|*    rows of 'k'".                                                           *|
|* A call that fails writes none of its outputs. Host validation also         *|
|* rejects a call where an operand the kernel writes (an output, or the       *|
|* status word) overlaps another operand, naming both (it compares the        *|
|* views' address ranges; nothing is read, so on the CUDA target too).        *|
|*                                                                            *|
|* Calls. Each kernel takes its argument struct (kpool/ABI/Args.h, generated *|
|* from the kernel ABI table: one named KPoolView field per operand, scalars *|
|* as their C type) and a KPoolCallOptions:                                  *|
|*                                                                            *|
|*   KPoolCompressArgs a = {0};                                              *|
|*   a.pooled = pooled; a.k = k; a.gate = gate; a.ape = ape;                 *|
|*   a.input_row_offsets = iro; a.pool_row_offsets = pro;                    *|
|*   a.cache_lengths = lengths;                                              *|
|*   KPoolError *e = kpoolCompress(kernels, &a, NULL);                       *|
|*                                                                            *|
|* Views carry no element type: keys, gates, pooled keys and the ring have   *|
|* the kernel set's element type (bf16 and f16 as their 16-bit patterns),    *|
|* `ape` is f32, offsets, cache lengths and slots are uint32 and closed_pool *|
|* is int32 (kpoolKernelAbiGetKernel reports each operand's kind).           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KPOOL_C_RUNTIME_H
#define KPOOL_C_RUNTIME_H

#include "kpool/ABI/Args.h"
#include "kpool/ABI/CacheFormat.h"
#include "kpool/ABI/StatusWord.h"
#include "kpool/ABI/View.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef KPOOL_CAPI_EXPORTED
#define KPOOL_CAPI_EXPORTED __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Errors
 *===----------------------------------------------------------------------===*/

/// An error: a message. Owned by the caller once returned.
typedef struct KPoolError KPoolError;

/// The error's message (valid until the error is destroyed).
KPOOL_CAPI_EXPORTED const char *kpoolErrorMessage(const KPoolError *error);

/// Frees `error`; NULL is allowed.
KPOOL_CAPI_EXPORTED void kpoolErrorDestroy(KPoolError *error);

/// "bf16", "f16", "f32", or NULL for a value that is not an element type.
KPOOL_CAPI_EXPORTED const char *kpoolElementTypeName(KPoolElementType type);

/*===----------------------------------------------------------------------===*
 * Kernel sets
 *===----------------------------------------------------------------------===*/

/// The kernels compiled for one configuration.
typedef struct KPoolKernelSet KPoolKernelSet;

/// Where the kernels run. Views are host memory for the CPU and device
/// memory for CUDA.
typedef enum KPoolTarget {
  KPOOL_TARGET_CPU = 0,
  KPOOL_TARGET_CUDA = 1,
} KPoolTarget;

/// What a kernel set is compiled for. Enum fields are int32_t (a C caller
/// may put any value there; kpoolKernelSetCreate rejects the others, as it
/// rejects every value the runtime's configuration check does: head_dim
/// >= 1, kpool in [1, 2^32], kpool x head_dim <= 2^40, vector_size >= 0, a
/// hadamard rotation only for a power-of-two head_dim). Start from
/// kpoolKernelConfigDefault().
typedef struct KPoolKernelConfig {
  int32_t target;      ///< a KPoolTarget
  int32_t elementType; ///< a KPoolElementType
  int64_t headDim;
  int64_t kpool;
  /// CPU: channels per vector in the pooled-row loops (0: scalar code).
  int64_t vectorSize;
  /// With a format (entry not KPOOL_CACHE_NONE) the set also has the
  /// pool-cache kernels of that format (kpoolCompressCache, ...).
  KPoolCacheFormat cache;
  /// CPU: run pooled rows and requests on OpenMP threads.
  bool openmp;
  /// Only the pool_offsets kernel, which depends on nothing but `kpool`:
  /// one small kernel to compile for callers that only need the scan
  /// (elementType, headDim and cache are ignored).
  bool poolOffsetsOnly;
} KPoolKernelConfig;

/// The defaults: CPU, bf16, head_dim 128, kpool 4, 16 channels per vector,
/// no OpenMP, no pool cache.
KPOOL_CAPI_EXPORTED KPoolKernelConfig kpoolKernelConfigDefault(void);

/// The kernel set of `config`. Either target takes, in order, kernels
/// registered in the process (kpool-aot's registration functions, kernel
/// packs: kpoolLoadKernelPack and the packs installed next to the runtime
/// library), the disk cache of compiled kernels, then the JIT
/// (libKPoolJit.so, opened from next to the runtime library); a
/// configuration none of them provides fails with a message naming it and
/// saying how to get it (kpool-c/Packs.h). Every handle of one
/// configuration shares one set (the runtime's cache). On success stores a
/// new handle in `*result`.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelSetCreate(const KPoolKernelConfig *config, KPoolKernelSet **result);

/// Releases the handle; NULL is allowed. Compiled code stays cached, and
/// pool stores made from the set keep working.
KPOOL_CAPI_EXPORTED void kpoolKernelSetDestroy(KPoolKernelSet *kernels);

/// The set's configuration into `*config`; false (and nothing written) for
/// a NULL set or config.
KPOOL_CAPI_EXPORTED bool kpoolKernelSetGetConfig(const KPoolKernelSet *kernels,
                                                 KPoolKernelConfig *config);

/// The set's configuration; for a NULL set: -1 (not an element type), -1
/// and -1.
KPOOL_CAPI_EXPORTED KPoolElementType
kpoolKernelSetGetElementType(const KPoolKernelSet *kernels);
KPOOL_CAPI_EXPORTED int64_t
kpoolKernelSetGetHeadDim(const KPoolKernelSet *kernels);
KPOOL_CAPI_EXPORTED int64_t
kpoolKernelSetGetKPool(const KPoolKernelSet *kernels);
/// The set's target; -1 for a NULL set.
KPOOL_CAPI_EXPORTED int kpoolKernelSetGetTarget(const KPoolKernelSet *kernels);

/// Whether the set has kernel `kernel` (a pool-offsets-only set has only
/// kpoolPoolOffsets; the pool-cache kernels need a cache format).
KPOOL_CAPI_EXPORTED bool kpoolKernelSetHasKernel(const KPoolKernelSet *kernels,
                                                 KPoolKernelId kernel);

/// Loads what `kernels` need in the context of `stream` (the GPU modules)
/// so that no later call loads anything: an engine calls it once before
/// capturing calls into a CUDA graph. Not stream-ordered; never call it
/// during a capture. Nothing to do on the CPU.
KPOOL_CAPI_EXPORTED KPoolError *
kpoolKernelSetPrepare(const KPoolKernelSet *kernels, void *stream);

/*===----------------------------------------------------------------------===*
 * Calls
 *===----------------------------------------------------------------------===*/

/// Whether a call validates its operands' metadata on the host first
/// (shapes are always checked).
typedef enum KPoolValidation {
  /// The default: check where the metadata is host memory (a CPU set),
  /// shapes only where it is device memory (a CUDA set).
  KPOOL_VALIDATION_AUTO = 0,
  /// Read and check the metadata (the request and field at fault are
  /// named); an error on a CUDA set, whose metadata a call never reads back:
  /// check host copies with kpoolCheck<Name> before uploading them.
  KPOOL_VALIDATION_CHECK = 1,
  /// Shapes only; exists to test the kernels' own guards.
  KPOOL_VALIDATION_TRUST = 2,
} KPoolValidation;

/// The per-call context. Zero-initialized (or a NULL pointer) is the
/// default: no status word, the NULL stream, KPOOL_VALIDATION_AUTO.
typedef struct KPoolCallOptions {
  /// NULL or the call's status word: one uint64_t, 8-byte aligned -- the
  /// kernels update it with 64-bit atomics, which need that alignment, so a
  /// misaligned word is an error before anything runs -- overlapping no
  /// operand of the call, in the kernels' memory (device memory on the CUDA
  /// target), where the kernels record the first bad-metadata
  /// finding they meet (`(request << 8) | finding`, a KPoolStatusFinding),
  /// in stream order and without a host round trip; 0 means nothing was
  /// found, and a word that holds a code only changes to a smaller one, so
  /// an engine clears it once (e.g. cuMemsetD8Async(word, 0, 8, stream))
  /// and reads it whenever it likes. kpoolStatusWordError decodes it.
  uint64_t *status;
  /// The caller's stream (a CUstream as an opaque pointer): on the CUDA
  /// target a call only enqueues its launches there -- no synchronization,
  /// allocation, free, host-device copy or module load on its path -- so it
  /// can be captured into a CUDA graph; NULL is CUDA's NULL stream of the
  /// current context (the legacy default stream), enqueued on and never
  /// synchronized. CPU kernels ignore it and finish before the call returns.
  void *stream;
  /// A KPoolValidation.
  int32_t validation;
} KPoolCallOptions;

/// Runs kernel `kernel` of `kernels` on `args`, its argument struct
/// (KPool<Name>Args) of `argsSize` bytes: the size guards against a struct
/// of another version of this header. `options` may be NULL. What every
/// kpool<Name> below calls.
KPOOL_CAPI_EXPORTED KPoolError *kpoolCall(const KPoolKernelSet *kernels,
                                          KPoolKernelId kernel,
                                          const void *args, size_t argsSize,
                                          const KPoolCallOptions *options);

/// Host-side validation as an explicit call, for metadata in host memory (a
/// GPU engine's host copies of what it will upload): the checks
/// KPOOL_VALIDATION_CHECK makes, with the same messages; the other views are
/// read only for their shapes (they may be device memory). Launches
/// nothing.
KPOOL_CAPI_EXPORTED KPoolError *kpoolCheck(const KPoolKernelSet *kernels,
                                           KPoolKernelId kernel,
                                           const void *args, size_t argsSize);

/// One function per kernel of the ABI table and its check, generated from
/// kpool/ABI/KernelABI.def (what each computes is documented there and in
/// docs/semantics.md):
///   KPoolError *kpoolCompress(const KPoolKernelSet *,
///                             const KPoolCompressArgs *,
///                             const KPoolCallOptions *);
///   KPoolError *kpoolCheckCompress(const KPoolKernelSet *,
///                                  const KPoolCompressArgs *);
/// and likewise kpoolSeedTail, kpoolRingClose, kpoolPoolOffsets, kpoolStep
/// and the pool-cache kernels kpoolCompressCache, kpoolRingCloseCache and
/// kpoolStepCache (a set created with a cache format).
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  KPOOL_CAPI_EXPORTED KPoolError *kpool##Name(                                 \
      const KPoolKernelSet *kernels, const KPool##Name##Args *args,            \
      const KPoolCallOptions *options);                                        \
  KPOOL_CAPI_EXPORTED KPoolError *kpoolCheck##Name(                            \
      const KPoolKernelSet *kernels, const KPool##Name##Args *args);
#include "kpool/ABI/KernelABI.def"

/// The error a status word holds: NULL for 0 (nothing found), else the
/// request and field the kernels found at fault, e.g. "request 3:
/// slot_idx[3] is not below max_slots (the ring's slots) (found by the
/// kernels; status word 0x303)". Destroy it with kpoolErrorDestroy.
KPOOL_CAPI_EXPORTED KPoolError *kpoolStatusWordError(uint64_t word);

/*===----------------------------------------------------------------------===*
 * The kernel ABI
 *===----------------------------------------------------------------------===*/

/// One operand of a kernel.
typedef struct KPoolOperandInfo {
  const char *name; ///< e.g. "input_row_offsets"
  int32_t role;     ///< a KPoolOperandRole
  int32_t rank;     ///< 0 for a scalar
  int32_t kind;     ///< a KPoolOperandKind
  /// "d0xd1x...": '?' any extent, 'D' head_dim, 'K' kpool or a number.
  const char *shape;
  /// The operand's offset in the argument struct (a KPoolView, or the
  /// scalar); -1 for the context operands (status word and stream), which
  /// are in KPoolCallOptions.
  int64_t offset;
} KPoolOperandInfo;

/// One kernel: kpoolCall(set, id, &args, argsSize, options) runs it on an
/// argument struct of `argsSize` bytes holding the operands at their
/// offsets; its operands are in the kernel's order, the context last.
typedef struct KPoolKernelInfo {
  const char *name;         ///< e.g. "compress_cache"
  const char *capiFunction; ///< e.g. "kpoolCompressCache"
  int64_t numOperands;
  const KPoolOperandInfo *operands;
  int32_t id;               ///< its KPoolKernelId (its index)
  int32_t base;             ///< the op's plain kernel (itself, or e.g.
                            ///< KPoolKernelCompress for compress_cache)
  int64_t argsSize;         ///< sizeof(KPool<Name>Args)
} KPoolKernelInfo;

/// How many kernels there are.
KPOOL_CAPI_EXPORTED int64_t kpoolKernelAbiGetNumKernels(void);

/// Kernel `index` (0 <= index < kpoolKernelAbiGetNumKernels()), or NULL.
/// Static storage: valid for the life of the process.
KPOOL_CAPI_EXPORTED const KPoolKernelInfo *
kpoolKernelAbiGetKernel(int64_t index);

/// The enums of this API whose values have names.
typedef enum KPoolEnum {
  KPOOL_ENUM_ELEMENT_TYPE = 0, ///< "bf16", "f16", "f32"
  KPOOL_ENUM_TARGET = 1,       ///< "cpu", "cuda"
  KPOOL_ENUM_CACHE_ENTRY = 2,  ///< "none", "element", "fp8"
  KPOOL_ENUM_CACHE_ROTATE = 3, ///< "none", "hadamard"
  KPOOL_ENUM_CACHE_SCALE = 4,  ///< "absmax", "pow2"
  KPOOL_ENUM_VALIDATION = 5,   ///< "auto", "check", "trust"
  KPOOL_ENUM_OPERAND_ROLE = 6, ///< "output", "input", "scalar", "context"
  KPOOL_ENUM_OPERAND_KIND = 7, ///< "element", "u32", ... (KPoolOperandKind)
} KPoolEnum;

/// The name of value `value` of enum `which` (a KPoolEnum), as the Python
/// package and kpool-aot spell it; NULL when it is not a value. Values are
/// 0, 1, 2, ... with no gaps: a binding lists an enum by asking from 0 up
/// to the first NULL.
KPOOL_CAPI_EXPORTED const char *kpoolEnumName(int32_t which, int32_t value);

#ifdef __cplusplus
}
#endif

/* Kernel packs, the kernel cache and the version. */
#include "kpool-c/Packs.h"

#endif /* KPOOL_C_RUNTIME_H */
