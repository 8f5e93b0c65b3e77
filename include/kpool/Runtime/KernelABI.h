//===- KernelABI.h - the kernel ABI as C++ types and a table ----*- C++ -*-===//
//
// What KernelABI.def describes, in the forms the runtime and the tools use:
// a constexpr table of the kernels and their operands (to iterate: the
// kernel module builder, kpool-aot's header, the C API's
// kpoolKernelAbiGetKernel), the C interface type of each kernel (`<Name>Fn`)
// and a call that marshals views into the memref descriptors the kernels
// take. No MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_RUNTIME_KERNELABI_H
#define KPOOL_RUNTIME_KERNELABI_H

#include "kpool/Runtime/Descriptor.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <tuple>
#include <utility>

namespace kpool::abi {

/// How a kernel uses an operand.
/// Context is the per-call context after the op's operands: the status
/// word (a view of at most one 64-bit word, the op's `status`) and the
/// caller's stream (by value, not an operand of the op).
enum class Role { Output, Input, Scalar, Context };
/// What an operand's elements (or a scalar) are; Stream is a CUstream as an
/// opaque pointer.
enum class Kind { Element, U32, I32, F32, Stream, CacheEntry, U64 };

/// The caller's stream of a call: a CUstream (or a framework's stream
/// handle that is one) as an opaque pointer. CPU kernels ignore it. On the
/// CUDA target null is CUDA's NULL stream of the current context (the
/// legacy default stream, which orders with the context's blocking
/// streams): the call enqueues there and still never synchronizes.
///
/// A call's context also names, optionally, its status word: one uint64_t
/// in the kernels' memory (device memory on the CUDA target) where the
/// kernels record the first bad-metadata finding, stream-ordered with the
/// call (docs/semantics.md, "The status word"; decode it with
/// kpool::statusWordError). Null records nothing.
struct Stream {
  void *handle = nullptr;
  uint64_t *status = nullptr;
  constexpr Stream() = default;
  constexpr explicit Stream(void *handle, uint64_t *status = nullptr)
      : handle(handle), status(status) {}
};
/// The geometry attributes of the op.
enum class Geometry { KPool, KPoolHeadDim };

/// One operand of a kernel (see KernelABI.def).
struct Operand {
  const char *name;
  Role role;
  int rank;
  Kind kind;
  /// "d0xd1x...": '?' any extent, 'D' head_dim, 'K' kpool or a number.
  const char *shape;
};

/// The kernels, in KernelABI.def's order.
enum class KernelId {
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS) Name,
#include "kpool/Runtime/KernelABI.def"
};

/// One kernel: its op name, names derived from it and its operands in call
/// order.
struct Kernel {
  KernelId id;
  /// The op's name, e.g. "seed_tail" (kpool.seed_tail).
  const char *name;
  /// The KernelBackend field and KernelSet method, e.g. "seedTail".
  const char *member;
  /// The C API function, e.g. "kpoolSeedTail".
  const char *capiFunction;
  Geometry geometry;
  const Operand *operands;
  int numOperands;
};

namespace detail {
#define KPOOL_OPERAND(name, role, rank, kind, shape)                           \
  Operand{#name, Role::role, rank, Kind::kind, shape},
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  inline constexpr Operand name##Operands[] = {OPERANDS};
#include "kpool/Runtime/KernelABI.def"

template <typename T, size_t N> constexpr int sizeOf(const T (&)[N]) {
  return static_cast<int>(N);
}
} // namespace detail

/// Every kernel, indexed by KernelId.
inline constexpr Kernel kernels[] = {
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  Kernel{KernelId::Name,                                                       \
         #name,                                                                \
         #member,                                                              \
         "kpool" #Name,                                                        \
         Geometry::geometry,                                                   \
         detail::name##Operands,                                               \
         detail::sizeOf(detail::name##Operands)},
#include "kpool/Runtime/KernelABI.def"
};
inline constexpr int numKernels = detail::sizeOf(kernels);

constexpr const Kernel &kernel(KernelId id) {
  return kernels[static_cast<int>(id)];
}

/// Bytes per element of an operand of `kind`; `elementSize` is the kernel
/// set's element type's.
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
               k.operands[i].kind == Kind::U64))
        return false;
  return true;
}
static_assert(shapesMatchRanks(),
              "KernelABI.def: an operand's shape does not have its rank, or "
              "a context operand is not the status word or the stream");
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
#define KPOOL_KERNEL(name, Name, member, geometry, OPERANDS)                   \
  using Name##Fn = abi::detail::FunctionPointer<void OPERANDS>::type;
#include "kpool/Runtime/KernelABI.def"

namespace abi {

/// One argument of a call: a view, a scalar or the call's context (its
/// role says which).
struct Arg {
  Arg() = default;
  Arg(const KPoolView &view) : view(&view) {}
  Arg(int32_t scalar) : i32(scalar) {}
  Arg(float scalar) : f32(scalar) {}
  Arg(Stream stream) : stream(stream.handle), status(stream.status) {}
  const KPoolView *view = nullptr;
  void *stream = nullptr;
  uint64_t *status = nullptr;
  int32_t i32 = 0;
  float f32 = 0;
};

namespace detail {
/// What a call keeps for an argument of C type `T`: the descriptor behind
/// a pointer, or the scalar.
template <typename T> struct Slot;
template <int Rank> struct Slot<Descriptor<Rank> *> {
  Descriptor<Rank> value;
  explicit Slot(const Arg &a) : value(Descriptor<Rank>::from(*a.view)) {}
  Descriptor<Rank> *get() { return &value; }
};
template <> struct Slot<int32_t> {
  int32_t value;
  explicit Slot(const Arg &a) : value(a.i32) {}
  int32_t get() { return value; }
};
template <> struct Slot<void *> {
  void *value;
  explicit Slot(const Arg &a) : value(a.stream) {}
  void *get() { return value; }
};
template <> struct Slot<float> {
  float value;
  explicit Slot(const Arg &a) : value(a.f32) {}
  float get() { return value; }
};

template <typename... A, size_t... I>
void invoke(void (*fn)(A...), const Arg *args, std::index_sequence<I...>) {
  std::tuple<Slot<A>...> slots{Slot<A>(args[I])...};
  fn(std::get<I>(slots).get()...);
}
} // namespace detail

/// Calls `fn` with `args`: one per operand of the op, in call order, then
/// the call's Stream, whose status word (Stream::status, null for none)
/// becomes the `status` operand (one element, or none) and whose handle the
/// `stream` operand. Views become the memref descriptors the kernel takes.
template <typename... A>
void invoke(void (*fn)(A...), std::initializer_list<Arg> args) {
  static_assert(sizeof...(A) >= 2, "a kernel ends with status and stream");
  if (args.size() + 1 != sizeof...(A))
    __builtin_trap(); // a call site that does not match KernelABI.def
  const Arg &stream = *(args.end() - 1);
  KPoolView status{};
  status.data = stream.status;
  status.rank = 1;
  status.sizes[0] = stream.status ? 1 : 0;
  status.strides[0] = 1;
  Arg all[sizeof...(A)];
  size_t i = 0;
  for (const Arg *a = args.begin(); a + 1 != args.end(); ++a)
    all[i++] = *a;
  all[i++] = Arg(status);
  all[i] = stream;
  detail::invoke(fn, all, std::index_sequence_for<A...>());
}

} // namespace abi
} // namespace kpool

#endif // KPOOL_RUNTIME_KERNELABI_H
