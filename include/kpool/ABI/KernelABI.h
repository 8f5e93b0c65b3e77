//===- kpool/ABI/KernelABI.h - the kernel ABI as a table --------*- C++ -*-===//
//
// What kpool/ABI/KernelABI.def describes, in the forms the compiler, the
// runtime and the tools use: a constexpr table of the kernels and their
// operands, with each operand's offset in the kernel's argument struct
// (kpool/ABI/Args.h) -- to iterate: the kernel module builder, kpool-aot's
// header, the runtime's marshalling and shape checks, the C API's
// kpoolKernelAbiGetKernel -- and the C interface type of each kernel
// (`<Name>Fn`, memref descriptors by pointer). Part of the ABI leaf: no
// MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_ABI_KERNELABI_H
#define KPOOL_ABI_KERNELABI_H

#include "kpool/ABI/Args.h"
#include "kpool/ABI/Descriptor.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kpool::abi {

/// How a kernel uses an operand (KPoolOperandRole). Context is the per-call
/// context after the op's operands: the status word (a view of at most one
/// 64-bit word, the op's `status`) and the caller's stream (by value, not
/// an operand of the op); neither is in the argument struct.
enum class Role : int32_t {
  Output = KPOOL_OPERAND_OUTPUT,
  Input = KPOOL_OPERAND_INPUT,
  Scalar = KPOOL_OPERAND_SCALAR,
  Context = KPOOL_OPERAND_CONTEXT,
};
/// What an operand's elements (or a scalar) are (KPoolOperandKind).
enum class Kind : int32_t {
  Element = KPOOL_KIND_ELEMENT,
  U32 = KPOOL_KIND_U32,
  I32 = KPOOL_KIND_I32,
  F32 = KPOOL_KIND_F32,
  Stream = KPOOL_KIND_STREAM,
  CacheEntry = KPOOL_KIND_CACHE_ENTRY,
  U64 = KPOOL_KIND_U64,
  CacheScale = KPOOL_KIND_CACHE_SCALE,
};
/// The geometry attributes of the op.
enum class Geometry { KPool, KPoolHeadDim };

/// The kernels, in KernelABI.def's order (KPoolKernelId).
enum class KernelId : int32_t {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  Name = KPoolKernel##Name,
#include "kpool/ABI/KernelABI.def"
};

/// One operand of a kernel (see KernelABI.def).
struct Operand {
  const char *name;
  Role role;
  int rank;
  Kind kind;
  /// "d0xd1x...": 'D' head_dim, 'K' kpool, a number, '?' any extent, or a
  /// letter naming an extent the op's operands share ("B+1": one more than
  /// B; see KernelABI.def).
  const char *shape;
  /// Where the operand is in the kernel's argument struct (a KPoolView, or
  /// the scalar); -1 for the context operands, which are not in it.
  int64_t offset;
};

/// One kernel: its names, what it derives from and its operands in call
/// order.
struct Kernel {
  KernelId id;
  /// The kernel's name, e.g. "seed_tail" or "compress_cache".
  const char *name;
  /// The KernelBackend field and KernelSet method, e.g. "seedTail".
  const char *member;
  /// The C API function, e.g. "kpoolSeedTail" (and kpoolCheckSeedTail).
  const char *capiFunction;
  /// The op's plain kernel: itself, or for a `*_cache` kernel the kernel
  /// of the same op without the pool cache.
  KernelId base;
  Geometry geometry;
  const Operand *operands;
  int numOperands;
  /// sizeof the argument struct (KPool<Name>Args).
  int64_t argsSize;
};

namespace detail {
template <typename T, size_t N> constexpr int sizeOf(const T (&)[N]) {
  return static_cast<int>(N);
}
#define KPOOL_ABI_OFFSET_Output(name) int64_t(offsetof(Args, name))
#define KPOOL_ABI_OFFSET_Input(name) int64_t(offsetof(Args, name))
#define KPOOL_ABI_OFFSET_Scalar(name) int64_t(offsetof(Args, name))
#define KPOOL_ABI_OFFSET_Context(name) int64_t(-1)
#define KPOOL_OPERAND(name, role, rank, kind, shape)                           \
  Operand{#name,  Role::role, rank, Kind::kind,                                \
          shape, KPOOL_ABI_OFFSET_##role(name)},
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  struct Name##Table {                                                         \
    using Args = KPool##Name##Args;                                            \
    static constexpr Operand operands[] = {OPERANDS};                          \
  };
#include "kpool/ABI/KernelABI.def"
#undef KPOOL_ABI_OFFSET_Output
#undef KPOOL_ABI_OFFSET_Input
#undef KPOOL_ABI_OFFSET_Scalar
#undef KPOOL_ABI_OFFSET_Context
} // namespace detail

/// Every kernel, indexed by KernelId.
inline constexpr Kernel kernels[] = {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  Kernel{KernelId::Name,                                                       \
         #name,                                                                \
         #member,                                                              \
         "kpool" #Name,                                                        \
         KernelId::Base,                                                       \
         Geometry::geometry,                                                   \
         detail::Name##Table::operands,                                        \
         detail::sizeOf(detail::Name##Table::operands),                        \
         int64_t(sizeof(KPool##Name##Args))},
#include "kpool/ABI/KernelABI.def"
};
inline constexpr int numKernels = detail::sizeOf(kernels);
static_assert(numKernels == KPOOL_NUM_KERNELS);

constexpr const Kernel &kernel(KernelId id) {
  return kernels[static_cast<int>(id)];
}

/// Whether kernel `id` is a `*_cache` kernel (its op with the pool-cache
/// destination).
constexpr bool isCacheKernel(KernelId id) { return kernel(id).base != id; }

/// The op a kernel runs, e.g. "compress" for compress and compress_cache.
constexpr const char *opName(KernelId id) {
  return kernel(kernel(id).base).name;
}

namespace detail {
constexpr bool sameName(const char *a, const char *b) {
  for (; *a && *a == *b; ++a, ++b)
    ;
  return *a == *b;
}
} // namespace detail

/// The operand of kernel `id` called `name`, or null.
constexpr const Operand *findOperand(KernelId id, const char *name) {
  const Kernel &k = kernel(id);
  for (int i = 0; i < k.numOperands; ++i)
    if (detail::sameName(k.operands[i].name, name))
      return &k.operands[i];
  return nullptr;
}

namespace detail {
/// Whether operand `i` of kernel `k` is the first of its name in the table.
constexpr bool firstOfName(int k, int i) {
  const char *name = kernels[k].operands[i].name;
  for (int k2 = 0; k2 <= k; ++k2)
    for (int i2 = 0; i2 < (k2 == k ? i : kernels[k2].numOperands); ++i2)
      if (sameName(kernels[k2].operands[i2].name, name))
        return false;
  return true;
}
} // namespace detail

/// An operand's id, as the status word's extent finding carries it
/// (kpool/ABI/StatusWord.h): the position of `name` among the distinct
/// operand names of the table in order of first appearance; -1 for none.
constexpr int operandId(const char *name) {
  int id = 0;
  for (int k = 0; k < numKernels; ++k)
    for (int i = 0; i < kernels[k].numOperands; ++i) {
      if (!detail::firstOfName(k, i))
        continue;
      if (detail::sameName(kernels[k].operands[i].name, name))
        return id;
      ++id;
    }
  return -1;
}

/// The operand name of id `id` (operandId's inverse), or null.
constexpr const char *operandName(int64_t id) {
  int64_t at = 0;
  for (int k = 0; k < numKernels; ++k)
    for (int i = 0; i < kernels[k].numOperands; ++i)
      if (detail::firstOfName(k, i) && at++ == id)
        return kernels[k].operands[i].name;
  return nullptr;
}

/// The kernel whose argument struct is `A`, e.g. KernelOf<CompressArgs>
/// is KernelId::Compress.
template <typename A> struct KernelOf;
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  template <> struct KernelOf<KPool##Name##Args> {                             \
    static constexpr KernelId value = KernelId::Name;                          \
  };
#include "kpool/ABI/KernelABI.def"

/// Sets the view operand `name` of `args`, kernel `id`'s argument struct, by
/// the table's offset; false (and nothing written) when the kernel has no
/// such view operand.
inline bool setView(KernelId id, void *args, const char *name,
                    const KPoolView &view) {
  const Operand *o = findOperand(id, name);
  if (!o || (o->role != Role::Output && o->role != Role::Input))
    return false;
  *reinterpret_cast<KPoolView *>(static_cast<char *>(args) + o->offset) = view;
  return true;
}
/// Sets the int32 scalar operand `name` of `args`; false when there is none.
inline bool setScalar(KernelId id, void *args, const char *name,
                      int32_t value) {
  const Operand *o = findOperand(id, name);
  if (!o || o->role != Role::Scalar || o->kind != Kind::I32)
    return false;
  *reinterpret_cast<int32_t *>(static_cast<char *>(args) + o->offset) = value;
  return true;
}

/// Copies each operand of `src`, kernel `from`'s argument struct, that
/// kernel `to` has under the same name into `dst`, `to`'s argument struct;
/// `to`'s other operands are left as they are.
inline void copyOperands(KernelId from, const void *src, KernelId to,
                         void *dst) {
  const Kernel &k = kernel(from);
  for (int i = 0; i < k.numOperands; ++i) {
    const Operand &o = k.operands[i];
    const Operand *t = findOperand(to, o.name);
    if (o.offset < 0 || !t || t->offset < 0)
      continue;
    // Scalars are int32_t or float.
    size_t size = o.role == Role::Scalar ? 4 : sizeof(KPoolView);
    std::memcpy(static_cast<char *>(dst) + t->offset,
                static_cast<const char *>(src) + o.offset, size);
  }
}

/// The arguments of a `*_cache` kernel from those of its plain kernel:
/// every operand of `base`, and the pool-cache group (`cache_keys`,
/// `cache_scales`, `block_table`) empty for the caller to set, e.g.
/// `abi::withCache<StepCacheArgs>(stepArgs)`.
template <typename CacheArgs, typename BaseArgs>
CacheArgs withCache(const BaseArgs &base) {
  constexpr KernelId to = KernelOf<CacheArgs>::value;
  constexpr KernelId from = KernelOf<BaseArgs>::value;
  static_assert(isCacheKernel(to) && kernel(to).base == from,
                "withCache: CacheArgs is not the *_cache kernel of BaseArgs");
  CacheArgs out{};
  copyOperands(from, &base, to, &out);
  return out;
}

/// The names of roles and kinds, as the C API's kpoolEnumName spells them
/// ("output", ...; "element", "u32", ...); null for a value that is not one.
constexpr const char *roleName(Role role) {
  switch (role) {
  case Role::Output:
    return "output";
  case Role::Input:
    return "input";
  case Role::Scalar:
    return "scalar";
  case Role::Context:
    return "context";
  }
  return nullptr;
}
constexpr const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Element:
    return "element";
  case Kind::U32:
    return "u32";
  case Kind::I32:
    return "i32";
  case Kind::F32:
    return "f32";
  case Kind::Stream:
    return "stream";
  case Kind::CacheEntry:
    return "cache_entry";
  case Kind::U64:
    return "u64";
  case Kind::CacheScale:
    return "cache_scale";
  }
  return nullptr;
}

/// Bytes per element of an operand of `kind`, for a kernel set of
/// `elementSize`-byte elements whose pool-cache entries have
/// `cacheEntrySize`-byte elements (1 for FP8).
constexpr int64_t kindSize(Kind kind, int64_t elementSize,
                           int64_t cacheEntrySize = 1) {
  return kind == Kind::Element      ? elementSize
         : kind == Kind::CacheEntry ? cacheEntrySize
         : kind == Kind::U64        ? 8
                                    : 4;
}

namespace detail {
/// The number of dimensions a shape string names.
constexpr int shapeRank(const char *shape) {
  if (!*shape)
    return 0;
  int rank = 1;
  for (; *shape; ++shape)
    rank += *shape == 'x';
  return rank;
}
constexpr bool shapesMatchRanks() {
  for (const Kernel &k : kernels)
    for (int i = 0; i < k.numOperands; ++i)
      if (shapeRank(k.operands[i].shape) != k.operands[i].rank ||
          (k.operands[i].role == Role::Scalar ||
           k.operands[i].kind == Kind::Stream) !=
              (k.operands[i].rank == 0) ||
          (k.operands[i].role == Role::Context) !=
              (k.operands[i].kind == Kind::Stream ||
               k.operands[i].kind == Kind::U64) ||
          k.operands[i].rank > KPOOL_MAX_RANK)
        return false;
  return true;
}
static_assert(shapesMatchRanks(),
              "KernelABI.def: an operand's shape does not have its rank, or "
              "a context operand is not the status word or the stream");
/// Whether every dimension of a shape string is '?', a number, or one
/// capital letter ('D' head_dim, 'K' kpool, or an extent the op's operands
/// share), the letter optionally followed by "+1".
constexpr bool dimsWellFormed(const char *shape) {
  while (*shape) {
    if (*shape == '?') {
      ++shape;
    } else if (*shape >= '0' && *shape <= '9') {
      while (*shape >= '0' && *shape <= '9')
        ++shape;
    } else if (*shape >= 'A' && *shape <= 'Z') {
      ++shape;
      if (shape[0] == '+' && shape[1] == '1')
        shape += 2;
    } else {
      return false;
    }
    if (*shape == 'x')
      ++shape;
    else if (*shape)
      return false;
  }
  return true;
}
constexpr bool shapesWellFormed() {
  for (const Kernel &k : kernels)
    for (int i = 0; i < k.numOperands; ++i)
      if (!dimsWellFormed(k.operands[i].shape))
        return false;
  return true;
}
static_assert(shapesWellFormed(),
              "KernelABI.def: a dimension is not '?', a number, or a "
              "capital letter (optionally +1)");
/// Whether every kernel ends with its two context operands, the status
/// word and the stream.
constexpr bool contextLast() {
  for (const Kernel &k : kernels)
    for (int i = 0; i < k.numOperands; ++i)
      if ((k.operands[i].role == Role::Context) != (i >= k.numOperands - 2) ||
          (k.operands[i].kind == Kind::Stream) != (i == k.numOperands - 1))
        return false;
  return true;
}
static_assert(contextLast(), "KernelABI.def: every kernel ends with the "
                             "status word and the stream, and only there");
/// Whether the argument structs hold the operands in call order.
constexpr bool fieldsInOrder() {
  for (const Kernel &k : kernels) {
    int64_t last = -1;
    for (int i = 0; i < k.numOperands - 2; ++i) {
      if (k.operands[i].offset <= last)
        return false;
      last = k.operands[i].offset;
    }
  }
  return true;
}
static_assert(fieldsInOrder(), "an argument struct is not in call order");
} // namespace detail

/// The C interface type of an operand: a descriptor pointer, or the scalar.
template <Role R, int Rank, Kind K> struct ArgType {
  static_assert(R != Role::Scalar, "scalars are handled below");
  using type = Descriptor<Rank> *;
};
template <> struct ArgType<Role::Scalar, 0, Kind::I32> {
  using type = int32_t;
};
template <> struct ArgType<Role::Scalar, 0, Kind::F32> { using type = float; };
template <> struct ArgType<Role::Context, 0, Kind::Stream> {
  using type = void *;
};

namespace detail {
template <typename R, typename... Args> struct FunctionPointer {
  using type = R (*)(Args...);
};
} // namespace detail

} // namespace kpool::abi

namespace kpool {

/// The C interface of each kernel (`_mlir_ciface_<prefix><name>_memref`),
/// e.g. CompressFn.
#define KPOOL_OPERAND(name, role, rank, kind, shape)                           \
  , typename abi::ArgType<abi::Role::role, rank, abi::Kind::kind>::type
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  using Name##Fn = abi::detail::FunctionPointer<void OPERANDS>::type;
#include "kpool/ABI/KernelABI.def"

} // namespace kpool

#endif // KPOOL_ABI_KERNELABI_H
