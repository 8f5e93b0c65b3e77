//===- KernelCompile.cpp - one configuration's kernels to an object -------===//

#include "kpool/Kernels/KernelCompile.h"

#include "kpool/ABI/CudaImage.h"
#include "kpool/InitAll.h"
#include "kpool/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

#include <cstring>
#include <mutex>
#include <set>

using namespace mlir;
using namespace mlir::kpool;
namespace abi = ::kpool::abi;

void mlir::kpool::registerKernelCompileDialects(DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  mlir::kpool::registerAllDialects(registry);
}

std::string
mlir::kpool::kernelSymbolPrefix(const KernelModuleSpec &spec,
                                const KernelCompileOptions &options) {
  std::string prefix = spec.poolOffsetsOnly
                           ? poolOffsetsPrefix(spec.kpool)
                           : kernelPrefix(spec.type, spec.headDim, spec.kpool) +
                                 cacheFormatPrefix(spec.cache);
  if (options.cuda)
    prefix += "cuda_";
  return prefix;
}

/// Whether `spec` builds kernel `id`.
static bool builds(const KernelModuleSpec &spec, abi::KernelId id) {
  ::kpool::CacheFormat cache =
      spec.poolOffsetsOnly ? ::kpool::CacheFormat() : spec.cache;
  if (!hasKernel(id, spec.poolOffsetsOnly, cache))
    return false;
  return spec.only.empty() || llvm::is_contained(spec.only, id);
}

std::vector<std::pair<abi::KernelId, std::string>>
mlir::kpool::kernelEntryPoints(const KernelModuleSpec &spec,
                               const KernelCompileOptions &options) {
  std::string prefix = kernelSymbolPrefix(spec, options);
  std::vector<std::pair<abi::KernelId, std::string>> out;
  for (const abi::Kernel &kernel : abi::kernels)
    if (builds(spec, kernel.id))
      out.push_back(
          {kernel.id, "_mlir_ciface_" + kernelFunctionName(prefix, kernel.id)});
  return out;
}

/// Makes the translated host code launch on each entry point's caller
/// stream (its last argument, the last of KernelABI.def's context operands)
/// instead of a stream it creates, synchronizes and destroys around its
/// launches (what the translation of a gpu.launch_func without async
/// dependencies emits): the entry points then only enqueue, in program
/// order, and never wait.
static bool useCallerStreams(llvm::Module &module, std::string &error) {
  for (llvm::Function &fn : module) {
    SmallVector<llvm::CallInst *> creates, waits;
    for (llvm::Instruction &inst : llvm::instructions(fn))
      if (auto *call = dyn_cast<llvm::CallInst>(&inst))
        if (llvm::Function *callee = call->getCalledFunction()) {
          StringRef name = callee->getName();
          if (name == "mgpuStreamCreate")
            creates.push_back(call);
          else if (name == "mgpuStreamSynchronize" ||
                   name == "mgpuStreamDestroy")
            waits.push_back(call);
        }
    if (creates.empty() && waits.empty())
      continue;
    if (fn.arg_empty() ||
        !fn.getArg(fn.arg_size() - 1)->getType()->isPointerTy()) {
      error =
          ("'" + fn.getName() + "' creates streams but takes no caller stream")
              .str();
      return false;
    }
    llvm::Value *stream = fn.getArg(fn.arg_size() - 1);
    for (llvm::CallInst *call : waits)
      call->eraseFromParent();
    for (llvm::CallInst *call : creates) {
      call->replaceAllUsesWith(stream);
      call->eraseFromParent();
    }
  }
  return true;
}

/// Assembles `ptx` for `chip` with the toolkit's ptxas into `cubin`.
static LogicalResult assemble(StringRef ptxas, StringRef ptx, StringRef chip,
                              int optLevel, StringRef extraOptions,
                              std::string &cubin, std::string &error) {
  SmallString<128> ptxPath, cubinPath, logPath;
  if (llvm::sys::fs::createTemporaryFile("kpool", "ptx", ptxPath) ||
      llvm::sys::fs::createTemporaryFile("kpool", "cubin", cubinPath) ||
      llvm::sys::fs::createTemporaryFile("kpool", "log", logPath)) {
    error = "cannot create temporary files for ptxas";
    return failure();
  }
  llvm::scope_exit cleanup([&] {
    llvm::sys::fs::remove(ptxPath);
    llvm::sys::fs::remove(cubinPath);
    llvm::sys::fs::remove(logPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec) {
      error = "cannot write " + ptxPath.str().str() + ": " + ec.message();
      return failure();
    }
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  std::string opt = "--opt-level=" + std::to_string(optLevel);
  SmallVector<StringRef> args = {ptxas, arch, opt, "-o", cubinPath, ptxPath};
  SmallVector<StringRef> extra;
  extraOptions.split(extra, ' ', -1, /*KeepEmpty=*/false);
  args.insert(args.begin() + 3, extra.begin(), extra.end());
  std::optional<StringRef> redirects[] = {std::nullopt, logPath.str(),
                                          logPath.str()};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0,
                                     &message);
  if (rc != 0) {
    auto log = llvm::MemoryBuffer::getFile(logPath);
    error = "ptxas failed" + (message.empty() ? "" : ": " + message) +
            (log ? "\n" + (*log)->getBuffer().str() : std::string());
    return failure();
  }
  auto binary = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!binary) {
    error = "ptxas wrote no cubin";
    return failure();
  }
  cubin = (*binary)->getBuffer().str();
  return success();
}

/// The CudaImage of `ptx` (and `cubin`, if not empty) for `chip`.
static std::string cudaImage(StringRef ptx, StringRef cubin, StringRef chip) {
  unsigned arch = 0;
  StringRef digits = chip;
  digits.consume_front("sm_");
  digits.take_while([](char c) { return c >= '0' && c <= '9'; })
      .getAsInteger(10, arch);
  std::string text = ptx.str();
  if (text.empty() || text.back() != '\0')
    text.push_back('\0');
  SmallVector<std::pair<uint32_t, StringRef>> parts;
  if (!cubin.empty())
    parts.push_back({KPOOL_CUDA_IMAGE_CUBIN, cubin});
  parts.push_back({KPOOL_CUDA_IMAGE_PTX, text});
  KPoolCudaImageHeader header{};
  std::memcpy(header.magic, KPOOL_CUDA_IMAGE_MAGIC, 8);
  header.version = KPOOL_CUDA_IMAGE_VERSION;
  header.count = parts.size();
  uint64_t at = llvm::alignTo(
      sizeof header + parts.size() * sizeof(KPoolCudaImageEntry), 16);
  std::string out(reinterpret_cast<const char *>(&header), sizeof header);
  std::vector<KPoolCudaImageEntry> entries;
  for (auto &[kind, bytes] : parts) {
    entries.push_back({kind, arch, at, bytes.size()});
    at = llvm::alignTo(at + bytes.size(), 16);
  }
  out.append(reinterpret_cast<const char *>(entries.data()),
             entries.size() * sizeof(KPoolCudaImageEntry));
  for (auto [entry, part] : llvm::zip(entries, parts)) {
    out.resize(entry.offset, '\0');
    out.append(part.second.data(), part.second.size());
  }
  return out;
}

/// Replaces each gpu.binary's PTX by a CudaImage with the PTX and, when the
/// toolkit has ptxas, a cubin.
static LogicalResult embedImages(ModuleOp module,
                                 const KPoolToNVVMPipelineOptions &pipeline,
                                 std::string &error) {
  std::string toolkit =
      mlir::kpool::resolveCudaToolkitPath(pipeline.cudaToolkit);
  std::string ptxas = toolkit.empty() ? "" : toolkit + "/bin/ptxas";
  if (!ptxas.empty() && !llvm::sys::fs::can_execute(ptxas))
    ptxas.clear();
  WalkResult walked = module.walk([&](gpu::BinaryOp binary) {
    SmallVector<Attribute> objects;
    for (Attribute a : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(a);
      if (object.getFormat() != gpu::CompilationTarget::Assembly) {
        error = "expected PTX in gpu.binary '" + binary.getName().str() + "'";
        return WalkResult::interrupt();
      }
      StringRef ptx = object.getObject().getValue();
      std::string cubin;
      if (!ptxas.empty() &&
          failed(assemble(ptxas, ptx, pipeline.chip, pipeline.optLevel,
                          pipeline.ptxasOptions, cubin, error))) {
        error = "gpu.binary '" + binary.getName().str() + "': " + error;
        return WalkResult::interrupt();
      }
      std::string image = cudaImage(ptx, cubin, pipeline.chip);
      objects.push_back(
          gpu::ObjectAttr::get(module.getContext(), object.getTarget(),
                               gpu::CompilationTarget::Binary,
                               StringAttr::get(module.getContext(), image),
                               object.getProperties(), object.getKernels()));
    }
    binary.setObjectsAttr(ArrayAttr::get(module.getContext(), objects));
    return WalkResult::advance();
  });
  return failure(walked.wasInterrupted());
}

std::unique_ptr<llvm::Module>
mlir::kpool::lowerKernels(MLIRContext &context, llvm::LLVMContext &llvmContext,
                          const KernelModuleSpec &spec,
                          const KernelCompileOptions &options,
                          std::string &error) {
  return lowerKernels(context, llvmContext, ArrayRef(spec), options, error);
}

/// The kernel module of `spec`, with only its `only` kernels.
static OwningOpRef<ModuleOp> buildSpec(MLIRContext &context,
                                       const KernelModuleSpec &spec,
                                       const KernelCompileOptions &options) {
  std::string prefix = kernelSymbolPrefix(spec, options);
  ::kpool::CacheFormat cache =
      spec.poolOffsetsOnly ? ::kpool::CacheFormat() : spec.cache;
  OwningOpRef<ModuleOp> module = buildKernelModule(
      context, spec.type, spec.poolOffsetsOnly ? 1 : spec.headDim, spec.kpool,
      prefix, spec.poolOffsetsOnly, cache);
  if (!spec.only.empty()) {
    std::set<std::string> wanted;
    for (abi::KernelId id : spec.only)
      wanted.insert(kernelFunctionName(prefix, id));
    for (func::FuncOp fn :
         llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
      if (!wanted.count(fn.getSymName().str()))
        fn.erase();
  }
  return module;
}

std::unique_ptr<llvm::Module>
mlir::kpool::lowerKernels(MLIRContext &context, llvm::LLVMContext &llvmContext,
                          ArrayRef<KernelModuleSpec> specs,
                          const KernelCompileOptions &options,
                          std::string &error) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return success();
  });
  if (specs.empty()) {
    error = "no kernels to compile";
    return nullptr;
  }
  std::string prefix = kernelSymbolPrefix(specs.front(), options);
  OwningOpRef<ModuleOp> module = buildSpec(context, specs.front(), options);
  for (const KernelModuleSpec &spec : specs.drop_front()) {
    OwningOpRef<ModuleOp> more = buildSpec(context, spec, options);
    for (Operation &op : llvm::make_early_inc_range(*more->getBody()))
      op.moveBefore(module->getBody(), module->getBody()->end());
  }

  PassManager pm(&context);
  std::string pipelineError;
  KPoolToNVVMPipelineOptions nvvm;
  bool images = options.cuda && options.format == "ptx+cubin";
  if (options.cuda) {
    nvvm.bufferize = false;
    nvvm.chip = options.chip;
    nvvm.features = options.features;
    nvvm.format = images ? "isa" : options.format;
    nvvm.cudaToolkit = options.cudaToolkit;
    // One GPU module for all the kernels: compiled and loaded once.
    nvvm.singleGPUModule = true;
    if (failed(buildLowerToNVVMPipeline(pm, nvvm, &pipelineError))) {
      error = pipelineError;
      return nullptr;
    }
  } else {
    KPoolToLLVMPipelineOptions llvmOptions;
    llvmOptions.bufferize = false;
    llvmOptions.openmp = options.openmp;
    llvmOptions.vectorSize = options.vectorSize;
    if (failed(buildLowerToLLVMPipeline(pm, llvmOptions, &pipelineError))) {
      error = pipelineError;
      return nullptr;
    }
  }
  if (failed(pm.run(*module))) {
    error = "lowering the kernels failed:\n" + diagnostics;
    return nullptr;
  }
  if (images && failed(embedImages(*module, nvvm, error)))
    return nullptr;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, prefix);
  if (!llvmModule) {
    error = "translation to LLVM IR failed:\n" + diagnostics;
    return nullptr;
  }
  if (options.cuda && !useCallerStreams(*llvmModule, error)) {
    error = "launching on the caller's stream: " + error;
    return nullptr;
  }
  return llvmModule;
}

/// The CPU name and feature string emitObject compiles for.
static std::pair<std::string, std::string>
hostTarget(const KernelCompileOptions &options) {
  std::string cpu = options.hostCPU;
  if (options.cuda && cpu.empty())
    return {"x86-64", ""};
  if (!cpu.empty() && cpu != "native")
    return {cpu, ""};
  // The name alone is not enough: a VM may report a CPU (znver4) whose
  // AVX-512 it does not have; the features are what the CPU says it has.
  llvm::SubtargetFeatures features;
  for (auto &feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.first(), feature.second);
  return {llvm::sys::getHostCPUName().str(), features.getString()};
}

std::string mlir::kpool::describeHostCPU(const KernelCompileOptions &options) {
  auto [cpu, features] = hostTarget(options);
  return features.empty() ? cpu : cpu + " " + features;
}

LogicalResult mlir::kpool::emitObject(llvm::Module &module,
                                      const KernelCompileOptions &options,
                                      std::string &object, std::string &error,
                                      std::string *llvmIR) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = lookupError;
    return failure();
  }
  auto [cpu, features] = hostTarget(options);
  // Static constructors (the CUDA host code registers its GPU modules in
  // one) in .init_array, as every current toolchain has them: the runtime's
  // object loader runs those.
  llvm::TargetOptions targetOptions;
  targetOptions.UseInitArray = true;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine) {
    error = "no target machine for " + triple.str() + " " + cpu;
    return failure();
  }
  module.setDataLayout(machine->createDataLayout());
  module.setTargetTriple(triple);
  if (llvm::Error err =
          makeOptimizingTransformer(3, 0, machine.get())(&module)) {
    error = "optimizing the LLVM IR failed: " + toString(std::move(err));
    return failure();
  }
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    module.print(os, nullptr);
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  codegen.run(module);
  object.assign(buffer.data(), buffer.size());
  return success();
}
