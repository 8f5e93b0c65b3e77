//===- KernelSet.cpp - kpool kernels on caller buffers --------------------===//
//
// The part of the runtime that needs no MLIR: the one check of a
// configuration, the one generic call every kernel method goes through
// (validation, then marshalling the argument struct by the ABI table into
// the memref descriptors the kernels take), and the registry and cache of
// kernel sets, with the compilers registered per target.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelSet.h"

#include "OperandChecks.h"
#include "Validation.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

using namespace kpool;
using namespace kpool::detail;

const char *kpool::targetName(Target target) {
  switch (target) {
  case Target::CPU:
    return "cpu";
  case Target::CUDA:
    return "cuda";
  }
  return nullptr;
}

const char *kpool::validationName(Validation validation) {
  switch (validation) {
  case Validation::Auto:
    return "auto";
  case Validation::Check:
    return "check";
  case Validation::Trust:
    return "trust";
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Configurations
//===----------------------------------------------------------------------===//

static Status configError(const std::string &message) {
  return Status::error("kernel set: " + message);
}

/// "'name' = value is not in [low, high]" (bounds as written).
static Status outOfRange(const char *name, int64_t value, const char *range,
                         const char *why = "") {
  return configError(std::string("'") + name + "' = " + std::to_string(value) +
                     " is not in " + range + why);
}

Status kpool::validateConfig(const KernelConfig &c) {
  if (!targetName(c.target))
    return configError("target " + std::to_string(int32_t(c.target)) +
                       " is not one of KPOOL_TARGET_CPU, KPOOL_TARGET_CUDA");
  if (c.kpool < 1 || c.kpool > (int64_t(1) << 32))
    return outOfRange("kpool", c.kpool, "[1, 2^32]",
                      " (positions are below 2^33, so no larger pool can "
                      "complete)");
  if (c.vectorSize < 0)
    return outOfRange("vector_size", c.vectorSize, "[0, 2^63 - 1]",
                      " (0: scalar code)");
  // A pool-offsets-only set ignores the element type, head_dim and format.
  if (c.poolOffsetsOnly)
    return Status();
  if (!isElementType(c.elementType))
    return configError("element type " + std::to_string(int(c.elementType)) +
                       " is not one of KPOOL_BF16, KPOOL_F16, KPOOL_F32");
  if (c.headDim < 1)
    return outOfRange("head_dim", c.headDim, "[1, 2^63 - 1]");
  int64_t apeElements;
  if (__builtin_mul_overflow(c.kpool, c.headDim, &apeElements) ||
      apeElements > (int64_t(1) << 40))
    return configError("kpool x head_dim = " + std::to_string(c.kpool) +
                       " x " + std::to_string(c.headDim) +
                       " is too large: 'ape' alone would exceed 2^40 "
                       "elements");
  if (!cacheEntryName(c.cache.entry))
    return configError("cache entry " + std::to_string(int32_t(c.cache.entry)) +
                       " is not one of KPOOL_CACHE_NONE, KPOOL_CACHE_ELEMENT, "
                       "KPOOL_CACHE_FP8");
  if (!cacheRotateName(c.cache.rotate))
    return configError("rotation " + std::to_string(int32_t(c.cache.rotate)) +
                       " is not one of KPOOL_ROTATE_NONE, "
                       "KPOOL_ROTATE_HADAMARD");
  if (!cacheScaleName(c.cache.scale))
    return configError("scale " + std::to_string(int32_t(c.cache.scale)) +
                       " is not one of KPOOL_SCALE_ABSMAX, KPOOL_SCALE_POW2");
  if (c.cache.entry != CacheEntry::None &&
      c.cache.rotate == CacheRotate::Hadamard &&
      (c.headDim & (c.headDim - 1)) != 0)
    return configError("the pool-cache format rotates by hadamard, which "
                       "needs a power-of-two head_dim, got " +
                       std::to_string(c.headDim));
  return Status();
}

//===----------------------------------------------------------------------===//
// The generic call
//===----------------------------------------------------------------------===//

namespace {

/// What a call keeps for an argument of C type `T`, made from its operand
/// in the argument struct (by the table's offset) or the call's context:
/// the descriptor behind a pointer, or the scalar.
template <typename T> struct Slot;
template <int Rank> struct Slot<Descriptor<Rank> *> {
  Descriptor<Rank> value;
  Slot(const abi::Operand &o, const char *args, const Stream &stream) {
    if (o.kind == abi::Kind::U64) {
      // The status word: one element, or none to record nothing.
      value.allocated = value.aligned = stream.status;
      value.offset = 0;
      value.sizes[0] = stream.status ? 1 : 0;
      value.strides[0] = 1;
    } else {
      value = Descriptor<Rank>::from(
          *reinterpret_cast<const View *>(args + o.offset));
    }
  }
  Descriptor<Rank> *get() { return &value; }
};
template <typename T> struct ScalarSlot {
  T value;
  ScalarSlot(const abi::Operand &o, const char *args, const Stream &) {
    std::memcpy(&value, args + o.offset, sizeof value);
  }
  T get() { return value; }
};
template <> struct Slot<int32_t> : ScalarSlot<int32_t> {
  using ScalarSlot::ScalarSlot;
};
template <> struct Slot<float> : ScalarSlot<float> {
  using ScalarSlot::ScalarSlot;
};
template <> struct Slot<void *> {
  void *value;
  Slot(const abi::Operand &, const char *, const Stream &stream)
      : value(stream.handle) {}
  void *get() { return value; }
};

template <abi::KernelId Id, typename... A, size_t... I>
void invoke(void (*fn)(A...), const char *args, const Stream &stream,
            std::index_sequence<I...>) {
  constexpr const abi::Kernel &kernel = abi::kernel(Id);
  static_assert(sizeof...(A) == size_t(kernel.numOperands),
                "the C interface type and the table disagree");
  std::tuple<Slot<A>...> slots{Slot<A>(kernel.operands[I], args, stream)...};
  fn(std::get<I>(slots).get()...);
}

/// Calls kernel `id` of `backend` (present) on `args`.
void marshalAndCall(const KernelBackend &backend, abi::KernelId id,
                    const void *args, const Stream &stream) {
  const char *bytes = static_cast<const char *>(args);
  switch (id) {
#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  case abi::KernelId::Name:                                                    \
    invoke<abi::KernelId::Name>(backend.member, bytes, stream,                 \
                                std::make_index_sequence<                      \
                                    abi::kernel(abi::KernelId::Name)           \
                                        .numOperands>());                      \
    return;
#include "kpool/ABI/KernelABI.def"
  }
}

} // namespace

namespace kpool {

/// A configuration and its kernels.
class KernelSetImpl {
public:
  KernelConfig config;
  KernelBackend backend;

  Validator validator(abi::KernelId id) const {
    return Validator(abi::opName(id), {config.headDim, config.kpool});
  }

  /// The error of a call to a kernel the set does not have.
  Status missingKernel(Validator &v, abi::KernelId id) const {
    if (abi::isCacheKernel(id) &&
        (config.poolOffsetsOnly || config.cache.entry == CacheEntry::None))
      return v.error("this kernel set has no pool-cache kernels: create it "
                     "with a cache format (KernelConfig::cache)");
    if (config.poolOffsetsOnly)
      return v.error("this kernel set has only the pool_offsets kernel");
    return v.error(std::string("this kernel set has no ") +
                   abi::kernel(id).name + " kernel");
  }

  /// How a call handles metadata: whether to read and check it, or the
  /// error a Check on device-resident operands is.
  Status metadataChecks(Validator &v, abi::KernelId id, Validation validation,
                        bool &check) const {
    if (!validationName(validation))
      return v.error("validation " + std::to_string(int32_t(validation)) +
                     " is not one of KPOOL_VALIDATION_AUTO, "
                     "KPOOL_VALIDATION_CHECK, KPOOL_VALIDATION_TRUST");
    check = validation == Validation::Check ||
            (validation == Validation::Auto && !backend.deviceResident);
    if (check && backend.deviceResident)
      return v.error(
          "validation was requested, but this kernel set's metadata is "
          "device memory and a GPU call never reads it back (no host round "
          "trip): check host copies with KernelSet::check (C: " +
          std::string(abi::kernel(id).capiFunction).insert(5, "Check") +
          ") before uploading them, and call with Validation::Auto or Trust");
    return Status();
  }
};

} // namespace kpool

KernelSet::KernelSet(const KernelConfig &config, KernelBackend backend)
    : impl(new KernelSetImpl{config, std::move(backend)}) {}
KernelSet::~KernelSet() = default;

const KernelConfig &KernelSet::config() const { return impl->config; }

bool KernelSet::deviceResident() const { return impl->backend.deviceResident; }

bool KernelSet::hasKernel(abi::KernelId id) const {
  return impl->backend.entry(id) != nullptr;
}

Status KernelSet::prepare(Stream stream) const {
  if (!impl->backend.prepare)
    return Status();
  return impl->backend.prepare(stream.handle);
}

Status KernelSet::call(abi::KernelId id, const void *args, Stream stream,
                       Validation validation) const {
  Validator v = impl->validator(id);
  if (!impl->backend.entry(id))
    return impl->missingKernel(v, id);
  if (reinterpret_cast<uintptr_t>(stream.status) % alignof(uint64_t)) {
    char where[32];
    std::snprintf(where, sizeof where, "0x%" PRIxPTR,
                  reinterpret_cast<uintptr_t>(stream.status));
    return v.error(std::string("the status word at ") + where +
                   " is not 8-byte aligned (the kernels update it "
                   "atomically)");
  }
  bool check;
  KPOOL_TRY(impl->metadataChecks(v, id, validation, check));
  KPOOL_TRY(checkOperands(impl->config, v, id, args, check, stream.status));
  marshalAndCall(impl->backend, id, args, stream);
  return Status();
}

Status KernelSet::check(abi::KernelId id, const void *args) const {
  Validator v = impl->validator(id);
  return checkOperands(impl->config, v, id, args, /*check=*/true);
}
