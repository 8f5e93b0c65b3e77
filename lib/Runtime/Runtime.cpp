//===- Runtime.cpp - compiled kpool kernels on caller buffers -------------===//

#include "kpool/Runtime/Runtime.h"

#include "Validation.h"
#include "kpool/InitAll.h"
#include "kpool/Pipelines/Pipelines.h"
#include "kpool/Runtime/Descriptor.h"
#include "kpool/Runtime/KernelModule.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>
#include <tuple>

using namespace kpool;
using namespace kpool::detail;

const char *kpool::elementTypeName(ElementType type) {
  switch (type) {
  case KPOOL_BF16:
    return "bf16";
  case KPOOL_F16:
    return "f16";
  case KPOOL_F32:
    return "f32";
  }
  return "unknown";
}

int64_t kpool::elementTypeSize(ElementType type) {
  return type == KPOOL_F32 ? 4 : 2;
}

View kpool::denseView(void *data, std::vector<int64_t> sizes) {
  View view{};
  view.data = data;
  view.rank = static_cast<int64_t>(sizes.size());
  int64_t stride = 1;
  for (int64_t i = view.rank - 1; i >= 0; --i) {
    view.sizes[i] = sizes[i];
    view.strides[i] = stride;
    stride *= sizes[i];
  }
  return view;
}

namespace kpool {

/// The compiled kernels of one configuration.
class KernelSetImpl {
public:
  KernelConfig config;
  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  CompressFn compress = nullptr;
  SeedTailFn seedTail = nullptr;
  RingCloseFn ringClose = nullptr;
  PoolOffsetsFn poolOffsets = nullptr;

  explicit KernelSetImpl(const KernelConfig &config, mlir::DialectRegistry &r)
      : config(config), context(r) {}

  Status compile();

  Geometry geometry() const { return {config.headDim, config.kpool}; }

  /// Metadata is host memory on the CPU target.
  static Status readHost(const View &view, std::vector<uint32_t> &out) {
    out.resize(view.sizes[0]);
    const auto *data = static_cast<const uint32_t *>(view.data);
    for (int64_t i = 0; i < view.sizes[0]; ++i)
      out[i] = data[i * view.strides[0]];
    return Status();
  }

  Validator validator(const char *op) const {
    return Validator(op, geometry(), readHost);
  }
};

} // namespace kpool

static mlir::DialectRegistry &registry() {
  static mlir::DialectRegistry *r = [] {
    auto *reg = new mlir::DialectRegistry();
    mlir::registerAllDialects(*reg);
    mlir::registerAllExtensions(*reg);
    mlir::registerAllToLLVMIRTranslations(*reg);
    mlir::kpool::registerAllDialects(*reg);
    return reg;
  }();
  return *r;
}

Status KernelSetImpl::compile() {
  if (config.target != Target::CPU)
    return Status::error("the CUDA target is served by the ahead-of-time "
                         "kernels (kpool-aot); the JIT runtime compiles for "
                         "the CPU");
  if (config.headDim < 1 || config.kpool < 1)
    return Status::error("head_dim and kpool must be at least 1, got " +
                         std::to_string(config.headDim) + " and " +
                         std::to_string(config.kpool));
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return mlir::success();
  });

  std::string prefix = mlir::kpool::kernelPrefix(config.elementType,
                                                 config.headDim, config.kpool);
  auto module = mlir::kpool::buildKernelModule(
      context, config.elementType, config.headDim, config.kpool, prefix);
  mlir::PassManager pm(&context);
  mlir::kpool::LowerToLLVMOptions options;
  options.bufferize = false;
  options.openmp = config.openmp;
  options.vectorSize = config.vectorSize;
  mlir::kpool::buildLowerToLLVMPipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return Status::error("lowering the kernels failed:\n" + diagnostics);

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  mlir::ExecutionEngineOptions engineOptions;
  auto transformer = mlir::makeOptimizingTransformer(
      /*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  engineOptions.enableGDBNotificationListener = false;
  engineOptions.enablePerfNotificationListener = false;
  llvm::SmallVector<llvm::StringRef> libs;
  if (config.openmp)
    libs.push_back(KPOOL_LIBOMP_PATH);
  engineOptions.sharedLibPaths = libs;
  auto created = mlir::ExecutionEngine::create(*module, engineOptions);
  if (!created)
    return Status::error("JIT compilation failed: " +
                         llvm::toString(created.takeError()) + "\n" +
                         diagnostics);
  engine = std::move(*created);

  mlir::kpool::KernelNames names(prefix);
  auto lookup = [&](const std::string &name, auto &fn) -> Status {
    auto symbol = engine->lookup("_mlir_ciface_" + name);
    if (!symbol)
      return Status::error("kernel '" + name +
                           "' not found: " + llvm::toString(symbol.takeError()));
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(*symbol);
    return Status();
  };
  for (Status s : {lookup(names.compress, compress),
                   lookup(names.seedTail, seedTail),
                   lookup(names.ringClose, ringClose),
                   lookup(names.poolOffsets, poolOffsets)})
    if (!s.ok())
      return s;
  return Status();
}

std::shared_ptr<KernelSet> KernelSet::get(const KernelConfig &config,
                                          Status &status) {
  using Key = std::tuple<int, int64_t, int64_t, int, bool, int64_t>;
  // Compiled kernels live for the whole process. The cache is never
  // destroyed: tearing JIT engines down during static destruction races
  // with LLVM's own globals.
  static std::mutex &mutex = *new std::mutex;
  static auto &cache = *new std::map<Key, std::shared_ptr<KernelSet>>;
  Key key{config.elementType, config.headDim, config.kpool,
          static_cast<int>(config.target), config.openmp, config.vectorSize};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) {
    status = Status();
    return it->second;
  }
  auto impl = std::make_unique<KernelSetImpl>(config, registry());
  status = impl->compile();
  if (!status.ok())
    return nullptr;
  std::shared_ptr<KernelSet> set(new KernelSet(std::move(impl)));
  cache.emplace(key, set);
  return set;
}

KernelSet::KernelSet(std::unique_ptr<KernelSetImpl> impl)
    : impl(std::move(impl)) {}
KernelSet::~KernelSet() = default;

const KernelConfig &KernelSet::config() const { return impl->config; }

#define KPOOL_TRY(expr)                                                        \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    if (!s_.ok())                                                              \
      return s_;                                                               \
  } while (false)

Status KernelSet::poolOffsets(const View &pro, const View &iro,
                              const View &cache, Validation validation) const {
  Validator v = impl->validator("pool_offsets");
  KPOOL_TRY(v.shape("cache_lengths", cache, {-1}, "batch"));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.length("pool_row_offsets", pro, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.shape("input_row_offsets", iro, {batch + 1}, "batch + 1"));
  KPOOL_TRY(v.shape("pool_row_offsets", pro, {batch + 1}, "batch + 1"));
  if (validation == Validation::Check) {
    std::vector<uint32_t> offsets;
    KPOOL_TRY(v.load(iro, offsets));
    KPOOL_TRY(v.rows(offsets, batch, UINT32_MAX));
  }
  Desc1 dPro = Desc1::from(pro), dIro = Desc1::from(iro),
        dCache = Desc1::from(cache);
  impl->poolOffsets(&dPro, &dIro, &dCache);
  return Status();
}

Status KernelSet::compress(const View &pooled, const View &k, const View &gate,
                           const View &ape, const View &iro, const View &pro,
                           const View &cache, Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("compress");
  KPOOL_TRY(v.shape("k", k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", k, "gate", gate, 0));
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {-1, c.headDim}, "pools x head_dim"));
  KPOOL_TRY(v.shape("cache_lengths", cache, {-1}, "batch"));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.length("pool_row_offsets", pro, batch + 1,
                     "one more than cache_lengths"));
  if (validation == Validation::Check) {
    std::vector<uint32_t> offsets, pools, lengths;
    KPOOL_TRY(v.load(iro, offsets));
    KPOOL_TRY(v.load(pro, pools));
    KPOOL_TRY(v.load(cache, lengths));
    KPOOL_TRY(v.rows(offsets, batch, k.sizes[0]));
    // The expected counts come from the pool_offsets kernel: one
    // implementation of the metadata arithmetic.
    std::vector<uint32_t> expected(batch + 1);
    View expectedView = denseView(expected.data(), {batch + 1});
    KPOOL_TRY(poolOffsets(expectedView, iro, cache, Validation::Trust));
    KPOOL_TRY(v.poolRows(pools, expected, offsets, lengths, pooled.sizes[0]));
  }
  Desc2 dPooled = Desc2::from(pooled), dK = Desc2::from(k),
        dGate = Desc2::from(gate), dApe = Desc2::from(ape);
  Desc1 dIro = Desc1::from(iro), dPro = Desc1::from(pro),
        dCache = Desc1::from(cache);
  impl->compress(&dPooled, &dK, &dGate, &dApe, &dIro, &dPro, &dCache);
  return Status();
}

/// Shape and metadata checks shared by seed_tail and ring_close.
static Status checkRing(Validator &v, const KernelConfig &c, const View &tail,
                        const View &k, const View &gate, const View &iro,
                        const View &cache, const View &slots,
                        int32_t numRequests, Validation validation) {
  KPOOL_TRY(v.shape("tail", tail, {-1, 2, c.kpool, c.headDim},
                    "max_slots x 2 x kpool x head_dim"));
  KPOOL_TRY(v.shape("k", k, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.shape("gate", gate, {-1, c.headDim}, "tokens x head_dim"));
  KPOOL_TRY(v.sameExtent("k", k, "gate", gate, 0));
  KPOOL_TRY(v.shape("cache_lengths", cache, {-1}, "batch"));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.length("input_row_offsets", iro, batch + 1,
                     "one more than cache_lengths"));
  KPOOL_TRY(v.length("slot_idx", slots, batch, "one per request"));
  if (validation == Validation::Trust)
    return Status();
  KPOOL_TRY(v.numRequests(numRequests, batch));
  std::vector<uint32_t> offsets, slotValues;
  KPOOL_TRY(v.load(iro, offsets));
  KPOOL_TRY(v.load(slots, slotValues));
  KPOOL_TRY(v.rows(offsets, numRequests, k.sizes[0]));
  return v.slots(slotValues, numRequests, tail.sizes[0]);
}

Status KernelSet::seedTail(const View &tail, const View &k, const View &gate,
                           const View &iro, const View &cache,
                           const View &slots, int32_t numRequests,
                           Validation validation) const {
  Validator v = impl->validator("seed_tail");
  KPOOL_TRY(checkRing(v, impl->config, tail, k, gate, iro, cache, slots,
                      numRequests, validation));
  Desc4 dTail = Desc4::from(tail);
  Desc2 dK = Desc2::from(k), dGate = Desc2::from(gate);
  Desc1 dIro = Desc1::from(iro), dCache = Desc1::from(cache),
        dSlots = Desc1::from(slots);
  impl->seedTail(&dTail, &dK, &dGate, &dIro, &dCache, &dSlots, numRequests);
  return Status();
}

Status KernelSet::ringClose(const View &pooled, const View &closed,
                            const View &tail, const View &k, const View &gate,
                            const View &ape, const View &iro,
                            const View &cache, const View &slots,
                            int32_t numRequests, Validation validation) const {
  const KernelConfig &c = impl->config;
  Validator v = impl->validator("ring_close");
  KPOOL_TRY(checkRing(v, c, tail, k, gate, iro, cache, slots, numRequests,
                      validation));
  int64_t batch = cache.sizes[0];
  KPOOL_TRY(v.shape("ape", ape, {c.kpool, c.headDim}, "kpool x head_dim"));
  KPOOL_TRY(v.shape("pooled", pooled, {batch, c.headDim}, "batch x head_dim"));
  KPOOL_TRY(v.shape("closed_pool", closed, {batch}, "batch"));
  Desc2 dPooled = Desc2::from(pooled), dK = Desc2::from(k),
        dGate = Desc2::from(gate), dApe = Desc2::from(ape);
  Desc1 dClosed = Desc1::from(closed), dIro = Desc1::from(iro),
        dCache = Desc1::from(cache), dSlots = Desc1::from(slots);
  Desc4 dTail = Desc4::from(tail);
  impl->ringClose(&dPooled, &dClosed, &dTail, &dK, &dGate, &dApe, &dIro,
                  &dCache, &dSlots, numRequests);
  return Status();
}
