//===- Runtime.cpp - C API of the kpool runtime ---------------------------===//
//
// Thin wrappers over kpool::KernelSet: the configuration and the call are
// the C++ core's (validateConfig, KernelSet::call); what is here is what
// the C++ API takes for granted and a C caller may get wrong (null
// pointers, ranks past KPOOL_MAX_RANK, kernel ids and struct sizes of
// another version), reported as a KPoolError. The per-kernel functions are
// generated from the kernel ABI table.
//
//===----------------------------------------------------------------------===//

#include "Handles.h"

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/StatusWord.h"

#include <vector>

using namespace kpool::capi;
namespace abi = kpool::abi;

const char *kpoolErrorMessage(const KPoolError *error) {
  return error ? error->message.c_str() : "";
}

void kpoolErrorDestroy(KPoolError *error) { delete error; }

const char *kpoolElementTypeName(KPoolElementType type) {
  return kpool::isElementType(type) ? kpool::elementTypeName(type) : nullptr;
}

KPoolError *kpoolStatusWordError(uint64_t word) {
  return wrap(kpool::statusWordError(word));
}

//===----------------------------------------------------------------------===//
// Kernel sets
//===----------------------------------------------------------------------===//

static_assert(KPOOL_TARGET_CPU == int(kpool::Target::CPU) &&
              KPOOL_TARGET_CUDA == int(kpool::Target::CUDA));
static_assert(KPOOL_VALIDATION_AUTO == int(kpool::Validation::Auto) &&
              KPOOL_VALIDATION_CHECK == int(kpool::Validation::Check) &&
              KPOOL_VALIDATION_TRUST == int(kpool::Validation::Trust));

static KPoolKernelConfig toC(const kpool::KernelConfig &c) {
  KPoolKernelConfig out{};
  out.target = int32_t(c.target);
  out.elementType = c.elementType;
  out.headDim = c.headDim;
  out.kpool = c.kpool;
  out.vectorSize = c.vectorSize;
  out.cache = c.cache;
  out.openmp = c.openmp;
  out.poolOffsetsOnly = c.poolOffsetsOnly;
  return out;
}

static kpool::KernelConfig fromC(const KPoolKernelConfig &c) {
  kpool::KernelConfig out;
  out.target = kpool::Target(c.target);
  out.elementType = KPoolElementType(c.elementType);
  out.headDim = c.headDim;
  out.kpool = c.kpool;
  out.vectorSize = c.vectorSize;
  out.cache = c.cache;
  out.openmp = c.openmp;
  out.poolOffsetsOnly = c.poolOffsetsOnly;
  return out;
}

KPoolKernelConfig kpoolKernelConfigDefault(void) {
  return toC(kpool::KernelConfig());
}

KPoolError *kpoolKernelSetCreate(const KPoolKernelConfig *config,
                                 KPoolKernelSet **result) {
  return guard("kernel set", [&]() -> KPoolError * {
    if (!result)
      return makeError("kernel set: the result pointer is null");
    *result = nullptr;
    if (!config)
      return makeError("kernel set: the configuration is null");
    kpool::KernelConfig c = fromC(*config);
    // Kernels not registered or cached are compiled by the JIT, which the
    // runtime loads on demand (libKPoolJit.so, kpool-c/Packs.h).
    kpool::Status status;
    std::shared_ptr<kpool::KernelSet> kernels = kpool::KernelSet::get(c, status);
    if (!kernels)
      return makeError(status.ok() ? "kernel set: compilation failed"
                                   : status.message());
    *result = new KPoolKernelSet{std::move(kernels)};
    return nullptr;
  });
}

void kpoolKernelSetDestroy(KPoolKernelSet *kernels) { delete kernels; }

static bool live(const KPoolKernelSet *kernels) {
  return kernels && kernels->kernels;
}

bool kpoolKernelSetGetConfig(const KPoolKernelSet *kernels,
                             KPoolKernelConfig *config) {
  if (!live(kernels) || !config)
    return false;
  *config = toC(kernels->kernels->config());
  return true;
}
KPoolElementType kpoolKernelSetGetElementType(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().elementType
                       : static_cast<KPoolElementType>(-1);
}
int64_t kpoolKernelSetGetHeadDim(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().headDim : -1;
}
int64_t kpoolKernelSetGetKPool(const KPoolKernelSet *kernels) {
  return live(kernels) ? kernels->kernels->config().kpool : -1;
}
int kpoolKernelSetGetTarget(const KPoolKernelSet *kernels) {
  return live(kernels) ? int(kernels->kernels->config().target) : -1;
}

static bool isKernelId(KPoolKernelId kernel) {
  return int(kernel) >= 0 && int(kernel) < abi::numKernels;
}

bool kpoolKernelSetHasKernel(const KPoolKernelSet *kernels,
                             KPoolKernelId kernel) {
  return live(kernels) && isKernelId(kernel) &&
         kernels->kernels->hasKernel(abi::KernelId(kernel));
}

KPoolError *kpoolKernelSetPrepare(const KPoolKernelSet *kernels,
                                  void *stream) {
  return guard("prepare", [&]() -> KPoolError * {
    KPOOL_CHECK(checkKernels("prepare", kernels));
    return wrap(kernels->kernels->prepare(kpool::Stream(stream)));
  });
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

/// What a call's arguments must be before the C++ core takes them: a set,
/// a kernel of the table, a struct of that kernel's size and, in it, views
/// of ranks a KPoolView holds.
static KPoolError *checkCall(const KPoolKernelSet *kernels,
                             KPoolKernelId kernel, const void *args,
                             size_t argsSize) {
  if (!isKernelId(kernel))
    return makeError("call: kernel " + std::to_string(int(kernel)) +
                     " is not a KPoolKernelId (0 to " +
                     std::to_string(abi::numKernels - 1) + ")");
  const abi::Kernel &k = abi::kernel(abi::KernelId(kernel));
  const char *op = abi::opName(k.id);
  KPOOL_CHECK(checkKernels(op, kernels));
  if (!args)
    return makeError(std::string(op) + ": the argument struct is null");
  if (argsSize != size_t(k.argsSize))
    return makeError(std::string(op) + ": the argument struct has " +
                     std::to_string(argsSize) + " bytes, this library's " +
                     "KPool" + (k.capiFunction + 5) + "Args has " +
                     std::to_string(k.argsSize) +
                     " (a header of another kpool version?)");
  const char *bytes = static_cast<const char *>(args);
  for (int i = 0; i < k.numOperands; ++i)
    if (k.operands[i].role == abi::Role::Output ||
        k.operands[i].role == abi::Role::Input)
      KPOOL_CHECK(checkView(
          op, k.operands[i].name,
          reinterpret_cast<const KPoolView *>(bytes + k.operands[i].offset)));
  return nullptr;
}

KPoolError *kpoolCall(const KPoolKernelSet *kernels, KPoolKernelId kernel,
                      const void *args, size_t argsSize,
                      const KPoolCallOptions *options) {
  return guard("call", [&]() -> KPoolError * {
    KPOOL_CHECK(checkCall(kernels, kernel, args, argsSize));
    KPoolCallOptions o = options ? *options : KPoolCallOptions{};
    return wrap(kernels->kernels->call(
        abi::KernelId(kernel), args, kpool::Stream(o.stream, o.status),
        kpool::Validation(o.validation)));
  });
}

KPoolError *kpoolCheck(const KPoolKernelSet *kernels, KPoolKernelId kernel,
                       const void *args, size_t argsSize) {
  return guard("check", [&]() -> KPoolError * {
    KPOOL_CHECK(checkCall(kernels, kernel, args, argsSize));
    return wrap(kernels->kernels->check(abi::KernelId(kernel), args));
  });
}

#define KPOOL_KERNEL(name, Name, member, Base, geometry, OPERANDS)             \
  KPoolError *kpool##Name(const KPoolKernelSet *kernels,                       \
                          const KPool##Name##Args *args,                       \
                          const KPoolCallOptions *options) {                   \
    return kpoolCall(kernels, KPoolKernel##Name, args, sizeof *args,           \
                     options);                                                 \
  }                                                                            \
  KPoolError *kpoolCheck##Name(const KPoolKernelSet *kernels,                  \
                               const KPool##Name##Args *args) {                \
    return kpoolCheck(kernels, KPoolKernel##Name, args, sizeof *args);         \
  }
#include "kpool/ABI/KernelABI.def"

//===----------------------------------------------------------------------===//
// The kernel ABI
//===----------------------------------------------------------------------===//

namespace {
/// The kernel ABI table in the C API's types, built once.
struct AbiTable {
  std::vector<KPoolOperandInfo> operands;
  std::vector<KPoolKernelInfo> kernels;
  AbiTable() {
    size_t total = 0;
    for (const abi::Kernel &k : abi::kernels)
      total += k.numOperands;
    operands.reserve(total); // stable addresses for the kernels' pointers
    for (const abi::Kernel &k : abi::kernels) {
      const KPoolOperandInfo *first = operands.data() + operands.size();
      for (int i = 0; i < k.numOperands; ++i) {
        const abi::Operand &o = k.operands[i];
        operands.push_back({o.name, int32_t(o.role), o.rank, int32_t(o.kind),
                            o.shape, o.offset});
      }
      kernels.push_back({k.name, k.capiFunction, k.numOperands, first,
                         int32_t(k.id), int32_t(k.base), k.argsSize});
    }
  }
};

const AbiTable &abiTable() {
  static const AbiTable *table = new AbiTable;
  return *table;
}
} // namespace

int64_t kpoolKernelAbiGetNumKernels(void) { return abi::numKernels; }

const KPoolKernelInfo *kpoolKernelAbiGetKernel(int64_t index) {
  if (index < 0 || index >= abi::numKernels)
    return nullptr;
  return &abiTable().kernels[index];
}

const char *kpoolEnumName(int32_t which, int32_t value) {
  switch (which) {
  case KPOOL_ENUM_ELEMENT_TYPE:
    return kpoolElementTypeName(KPoolElementType(value));
  case KPOOL_ENUM_TARGET:
    return kpool::targetName(kpool::Target(value));
  case KPOOL_ENUM_CACHE_ENTRY:
    return kpool::cacheEntryName(kpool::CacheEntry(value));
  case KPOOL_ENUM_CACHE_ROTATE:
    return kpool::cacheRotateName(kpool::CacheRotate(value));
  case KPOOL_ENUM_CACHE_SCALE:
    return kpool::cacheScaleName(kpool::CacheScale(value));
  case KPOOL_ENUM_VALIDATION:
    return kpool::validationName(kpool::Validation(value));
  case KPOOL_ENUM_OPERAND_ROLE:
    return abi::roleName(abi::Role(value));
  case KPOOL_ENUM_OPERAND_KIND:
    return abi::kindName(abi::Kind(value));
  }
  return nullptr;
}
