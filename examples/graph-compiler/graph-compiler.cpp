//===- graph-compiler.cpp - embedding kpool in a C++ graph compiler -------===//
//
// What a graph compiler does with kpool: builds a function with the C++
// builders (no textual IR) whose graph sizes and fills the pooled-key output
// itself, in place in the caller's buffers,
//
//   pro    = kpool.pool_offsets(iro, cache)                     (tensors)
//   P      = pro[B]
//   pooled = kpool.compress(k, gate, ape, iro, pro, cache)  (first P rows)
//
// lowers it with mlir::kpool::buildLowerToLLVMPipeline on its own pass manager,
// JIT-compiles it with MLIR's ExecutionEngine and runs it on a ragged batch
// (bf16, head_dim 128, kpool 4). The result must match known pool counts and,
// bit for bit, ::kpool::KernelSet::compress on the same data.
//
//===----------------------------------------------------------------------===//

#include "kpool/Dialect/KPool/IR/KPoolOps.h"
#include "kpool/InitAll.h"
#include "kpool/Pipelines/Pipelines.h"
#include "kpool/Runtime/Jit.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace mlir;

static constexpr int64_t kHeadDim = 128;
static constexpr int64_t kPool = 4;

/// Builds @graph: tensors in, results written into the caller's memrefs.
static OwningOpRef<ModuleOp> buildGraph(MLIRContext &ctx) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  int64_t dyn = ShapedType::kDynamic;
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  auto keys = RankedTensorType::get({dyn, kHeadDim}, bf16);
  auto ape = RankedTensorType::get({kPool, kHeadDim}, b.getF32Type());
  auto meta = RankedTensorType::get({dyn}, i32);
  auto proOut = MemRefType::get({dyn}, i32);
  auto pooledOut = MemRefType::get({dyn, kHeadDim}, bf16);

  auto fn = func::FuncOp::create(
      b, loc, "graph",
      b.getFunctionType({keys, keys, ape, meta, meta, proOut, pooledOut}, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  b.setInsertionPointToStart(fn.addEntryBlock());
  Value k = fn.getArgument(0), gate = fn.getArgument(1),
        apeArg = fn.getArgument(2), iro = fn.getArgument(3),
        cache = fn.getArgument(4), proDest = fn.getArgument(5),
        pooledDest = fn.getArgument(6);
  IntegerAttr kAttr = b.getI64IntegerAttr(kPool);
  IntegerAttr dAttr = b.getI64IntegerAttr(kHeadDim);

  // The caller's buffers become the ops' destinations ("restrict writable":
  // nothing else in the graph aliases them), so the results are written in
  // place and nothing is copied.
  auto destination = [&](Value buffer, Type tensorType) -> Value {
    return bufferization::ToTensorOp::create(b, loc, tensorType, buffer,
                                             /*restrict=*/true,
                                             /*writable=*/true);
  };

  // pool_row_offsets, computed in the graph.
  Value proInit = destination(proDest, meta);
  Value pro = mlir::kpool::PoolOffsetsOp::create(b, loc, TypeRange{meta}, kAttr,
                                                 iro, cache, proInit)
                  .getResult()[0];

  // The pooled output has P = pro[B] rows: sized in the graph, no host
  // round trip. It goes to the first P rows of the caller's buffer.
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value batchPlusOne = tensor::DimOp::create(b, loc, iro, c0);
  Value last = arith::SubIOp::create(b, loc, batchPlusOne, c1);
  Value total = tensor::ExtractOp::create(b, loc, pro, ValueRange{last});
  Value numPools =
      arith::IndexCastUIOp::create(b, loc, b.getIndexType(), total);
  SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{numPools, b.getIndexAttr(kHeadDim)};
  SmallVector<OpFoldResult> strides{b.getIndexAttr(1), b.getIndexAttr(1)};
  Value firstRows =
      memref::SubViewOp::create(b, loc, pooledDest, offsets, sizes, strides);
  Value pooledInit = destination(firstRows, keys);
  mlir::kpool::CompressOp::create(b, loc, TypeRange{keys}, kAttr, dAttr, k,
                                  gate, apeArg, iro, pro, cache, pooledInit);
  func::ReturnOp::create(b, loc);
  return module;
}

/// Round to nearest even, as arith.truncf does.
static uint16_t toBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

template <typename T, int N>
static StridedMemRefType<T, N> hostMemRef(T *data, std::vector<int64_t> sizes) {
  StridedMemRefType<T, N> m;
  m.basePtr = m.data = data;
  m.offset = 0;
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    m.sizes[i] = sizes[i];
    m.strides[i] = stride;
    stride *= sizes[i];
  }
  return m;
}

int main() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  mlir::kpool::registerAllDialects(registry); // + bufferization of kpool ops
  MLIRContext ctx(registry);
  ctx.loadDialect<func::FuncDialect, arith::ArithDialect, tensor::TensorDialect,
                  memref::MemRefDialect, bufferization::BufferizationDialect,
                  mlir::kpool::KPoolDialect>();

  OwningOpRef<ModuleOp> module = buildGraph(ctx);
  if (failed(verify(*module))) {
    std::fprintf(stderr, "the graph does not verify\n");
    return 1;
  }
  std::printf("built @graph: %s\n",
              module->lookupSymbol("graph") ? "yes" : "no");

  PassManager pm(&ctx);
  // bufferize=true (the default): the graph is on tensors.
  mlir::kpool::KPoolToLLVMPipelineOptions options;
  std::string pipelineError;
  if (failed(
          mlir::kpool::buildLowerToLLVMPipeline(pm, options, &pipelineError))) {
    std::fprintf(stderr, "%s\n", pipelineError.c_str());
    return 1;
  }
  if (failed(pm.run(*module))) {
    std::fprintf(stderr, "kpool-lower-to-llvm failed\n");
    return 1;
  }
  std::printf("lowered to the LLVM dialect\n");

  ExecutionEngineOptions engineOptions;
  auto engine = ExecutionEngine::create(*module, engineOptions);
  if (!engine) {
    llvm::errs() << "JIT failed: " << llvm::toString(engine.takeError())
                 << "\n";
    return 1;
  }
  using Keys = StridedMemRefType<uint16_t, 2>;
  using Ape = StridedMemRefType<float, 2>;
  using Meta = StridedMemRefType<int32_t, 1>;
  using GraphFn =
      void (*)(Keys *, Keys *, Ape *, Meta *, Meta *, Meta *, Keys *);
  auto symbol = (*engine)->lookup("_mlir_ciface_graph");
  if (!symbol) {
    llvm::errs() << llvm::toString(symbol.takeError()) << "\n";
    return 1;
  }
  auto graph = reinterpret_cast<GraphFn>(*symbol);

  // A ragged batch: (cache, tokens) = (0, 9), (3, 5), (70001, 11), (6, 1):
  // 2, 1, 2 and 0 pools made only of this call's tokens.
  std::vector<int32_t> cache{0, 3, 70001, 6}, iro{0, 9, 14, 25, 26};
  int64_t tokens = iro.back(), batch = cache.size();
  std::vector<uint16_t> k(tokens * kHeadDim), gate(tokens * kHeadDim);
  std::vector<float> ape(kPool * kHeadDim);
  uint32_t state = 12345;
  auto uniform = [&] { // in [-1, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / (1 << 23) - 1.0f;
  };
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = toBF16(uniform());
    gate[i] = toBF16(4 * uniform()); // large gates: the softmax matters
  }
  for (float &a : ape)
    a = uniform();

  std::vector<int32_t> pro(batch + 1, -1);
  int64_t capacity = tokens / kPool; // at most this many pools
  std::vector<uint16_t> pooled(capacity * kHeadDim, 0);
  Keys mK = hostMemRef<uint16_t, 2>(k.data(), {tokens, kHeadDim});
  Keys mGate = hostMemRef<uint16_t, 2>(gate.data(), {tokens, kHeadDim});
  Ape mApe = hostMemRef<float, 2>(ape.data(), {kPool, kHeadDim});
  Meta mIro = hostMemRef<int32_t, 1>(iro.data(), {batch + 1});
  Meta mCache = hostMemRef<int32_t, 1>(cache.data(), {batch});
  Meta mPro = hostMemRef<int32_t, 1>(pro.data(), {batch + 1});
  Keys mPooled = hostMemRef<uint16_t, 2>(pooled.data(), {capacity, kHeadDim});
  graph(&mK, &mGate, &mApe, &mIro, &mCache, &mPro, &mPooled);

  std::printf("pool_row_offsets:");
  for (int32_t p : pro)
    std::printf(" %d", p);
  std::printf("\n");
  bool ok = pro == std::vector<int32_t>{0, 2, 3, 5, 5};
  std::printf("pool counts as expected: %s\n", ok ? "yes" : "NO");

  // The runtime's compress on the same data.
  ::kpool::KernelConfig config;
  config.elementType = KPOOL_BF16;
  config.headDim = kHeadDim;
  config.kpool = kPool;
  ::kpool::Status status;
  ::kpool::registerJitCompiler(); // KernelSet::get JIT-compiles
  auto kernels = ::kpool::KernelSet::get(config, status);
  if (!kernels) {
    std::fprintf(stderr, "KernelSet: %s\n", status.message().c_str());
    return 1;
  }
  int64_t numPools = pro[batch];
  std::vector<uint16_t> expected(numPools * kHeadDim, 0);
  ::kpool::CompressArgs args{};
  args.pooled = ::kpool::denseView(expected.data(), {numPools, kHeadDim});
  args.k = ::kpool::denseView(k.data(), {tokens, kHeadDim});
  args.gate = ::kpool::denseView(gate.data(), {tokens, kHeadDim});
  args.ape = ::kpool::denseView(ape.data(), {kPool, kHeadDim});
  args.input_row_offsets = ::kpool::denseView(iro.data(), {batch + 1});
  args.pool_row_offsets = ::kpool::denseView(pro.data(), {batch + 1});
  args.cache_lengths = ::kpool::denseView(cache.data(), {batch});
  status = kernels->compress(args);
  if (!status.ok()) {
    std::fprintf(stderr, "KernelSet::compress: %s\n", status.message().c_str());
    return 1;
  }
  int64_t differing = 0;
  for (int64_t i = 0; i < numPools * kHeadDim; ++i)
    differing += pooled[i] != expected[i];
  std::printf("pooled rows: %lld, elements differing from "
              "KernelSet::compress: %lld\n",
              static_cast<long long>(numPools),
              static_cast<long long>(differing));
  ok &= differing == 0 && numPools > 0;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
