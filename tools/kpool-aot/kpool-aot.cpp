//===- kpool-aot.cpp - ahead-of-time kpool kernels ------------------------===//
//
// Compiles the kernels of one configuration (element type, head_dim, kpool,
// target) into an object file with plain C entry points, and writes a header
// describing the calling convention, generated from the kernel ABI
// (kpool/ABI/KernelABI.def). The object needs no MLIR or LLVM
// at run time: only libc on the CPU, and the CUDA driver through the mgpu*
// wrappers (libkpool_cuda_runtime) on NVIDIA GPUs, with the GPU binary
// embedded.
//
//   kpool-aot --type=bf16 --head-dim=128 --kpool=4 --target=cuda \
//             -o kernels.o --header=kernels.h
//
//===----------------------------------------------------------------------===//

#include "kpool/ABI/KernelABI.h"
#include "kpool/InitAll.h"
#include "kpool/Kernels/KernelModule.h"
#include "kpool/Pipelines/Pipelines.h"
#include "kpool/Runtime/KernelSet.h"
#include "kpool/Tools/Version.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

#include <set>

using namespace llvm;

/// kpool-aot's own options: `--help` lists these only; the LLVM options
/// linked into the tool are behind `--help-hidden`.
static cl::OptionCategory aotCategory("kpool-aot options");

static cl::opt<std::string> elementType("type", cl::desc("bf16, f16 or f32"),
                                        cl::init("bf16"), cl::cat(aotCategory));
static cl::opt<int64_t> headDim("head-dim", cl::desc("channels per key"),
                                cl::init(128), cl::cat(aotCategory));
static cl::opt<int64_t> poolSize("kpool", cl::desc("tokens per pool"),
                                 cl::init(4), cl::cat(aotCategory));
static cl::opt<std::string> target("target", cl::desc("cpu or cuda"),
                                   cl::init("cpu"), cl::cat(aotCategory));
static cl::opt<std::string> outputObject("o", cl::desc("object file"),
                                         cl::Required, cl::cat(aotCategory));
static cl::opt<std::string> outputHeader("header", cl::desc("C header"),
                                         cl::init(""), cl::cat(aotCategory));
static cl::opt<std::string> outputLLVM("emit-llvm",
                                       cl::desc("also write the LLVM IR"),
                                       cl::init(""), cl::cat(aotCategory));
static cl::opt<std::string>
    hostCPU("mcpu",
            cl::desc("host CPU the object is for (default: this machine's "
                     "for --target=cpu, generic x86-64 for --target=cuda)"),
            cl::init(""), cl::cat(aotCategory));
static cl::opt<bool> openmp("openmp",
                            cl::desc("cpu: OpenMP threads (needs libomp)"),
                            cl::init(false), cl::cat(aotCategory));
static cl::opt<int64_t> vectorSize("vector-size",
                                   cl::desc("cpu: channels per vector"),
                                   cl::init(16), cl::cat(aotCategory));
static cl::opt<std::string> chip("chip", cl::desc("cuda: GPU architecture"),
                                 cl::init("sm_90"), cl::cat(aotCategory));
static cl::opt<std::string> features("features", cl::desc("cuda: PTX features"),
                                     cl::init("+ptx80"), cl::cat(aotCategory));
static cl::opt<std::string> binaryFormat("format",
                                         cl::desc("cuda: isa, bin or fatbin"),
                                         cl::init("fatbin"),
                                         cl::cat(aotCategory));
static cl::opt<std::string> cudaToolkit("cuda-toolkit",
                                        cl::desc("cuda: toolkit root"),
                                        cl::init(""), cl::cat(aotCategory));
static cl::opt<std::string>
    cacheEntry("cache",
               cl::desc("pool-cache kernels (compress_cache, ...): none, "
                        "element (entries of the element type) or fp8"),
               cl::init("none"), cl::cat(aotCategory));
static cl::opt<std::string>
    cacheRotate("rotate", cl::desc("pool cache: none or hadamard"),
                cl::init("none"), cl::cat(aotCategory));
static cl::opt<std::string>
    cacheScale("scale", cl::desc("pool cache, fp8: absmax or pow2"),
               cl::init("absmax"), cl::cat(aotCategory));

/// The value of `E` named `name` by `nameOf` (the leaf's spelling), or
/// false.
template <typename E>
static bool parseName(const std::string &name, const char *(*nameOf)(E),
                      E &value) {
  for (int32_t v = 0; nameOf(E(v)); ++v)
    if (name == nameOf(E(v))) {
      value = E(v);
      return true;
    }
  return false;
}

/// The cache format of the options (parsed and validated in main).
static kpool::CacheFormat cacheFormat() {
  kpool::CacheFormat f;
  parseName<kpool::CacheEntry>(cacheEntry, kpool::cacheEntryName, f.entry);
  parseName<kpool::CacheRotate>(cacheRotate, kpool::cacheRotateName, f.rotate);
  parseName<kpool::CacheScale>(cacheScale, kpool::cacheScaleName, f.scale);
  return f;
}

/// The generated config's cache format lines ("" without one).
static std::string cacheConfig() {
  kpool::CacheFormat f = cacheFormat();
  if (f.entry == kpool::CacheEntry::None)
    return "";
  return std::string("  config.cache.entry = kpool::CacheEntry::") +
         (f.entry == kpool::CacheEntry::FP8 ? "FP8" : "Element") +
         ";\n  config.cache.rotate = kpool::CacheRotate::" +
         (f.rotate == kpool::CacheRotate::Hadamard ? "Hadamard" : "None") +
         ";\n  config.cache.scale = kpool::CacheScale::" +
         (f.scale == kpool::CacheScale::Pow2 ? "Pow2" : "Absmax") + ";\n";
}

/// The kernels this build has: the pool-cache ones only with a format.
static bool built(const kpool::abi::Kernel &kernel) {
  return mlir::kpool::hasKernel(kernel.id, /*poolOffsetsOnly=*/false,
                                cacheFormat());
}

static int fail(const Twine &message) {
  errs() << "kpool-aot: " << message << "\n";
  return 1;
}

/// The header: descriptor types, the `_mlir_ciface_` entry points, plain C
/// wrappers over KPoolView and, for C++, the runtime registration; the
/// kernels and their operands come from the kernel ABI table.
static std::string header(StringRef prefix, StringRef typeEnum, bool cuda) {
  std::string s;
  raw_string_ostream os(s);
  std::string guard = "KPOOL_AOT_" + prefix.upper() + "H";
  os << "/* Generated by kpool-aot: " << elementType << ", head_dim " << headDim
     << ", kpool " << poolSize << ", target " << target
     << (cuda ? " (" + chip + ")" : std::string()) << ". Do not edit. */\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include \"kpool/ABI/Args.h\"\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
     << "#ifndef KPOOL_AOT_DESCRIPTORS\n#define KPOOL_AOT_DESCRIPTORS\n"
     << "/* MLIR's strided memref descriptors, which the kernels take by\n"
     << "   pointer; offset and strides count elements. */\n";
  // One descriptor type per rank that some operand has.
  namespace abi = ::kpool::abi;
  std::set<int> ranks;
  for (const abi::Kernel &kernel : abi::kernels)
    for (const abi::Operand &operand :
         ArrayRef(kernel.operands, kernel.numOperands))
      if (operand.rank)
        ranks.insert(operand.rank);
  for (int rank : ranks)
    os << "typedef struct { void *allocated; void *aligned; int64_t offset; "
          "int64_t sizes["
       << rank << "]; int64_t strides[" << rank << "]; } KPoolDescriptor"
       << rank << ";\n";
  os << "#define KPOOL_AOT_DESCRIPTOR(rank, view) { (view)->data, "
        "(view)->data, 0, KPOOL_AOT_SIZES##rank(view), "
        "KPOOL_AOT_STRIDES##rank(view) }\n";
  for (const char *field : {"sizes", "strides"})
    for (int rank : ranks) {
      os << "#define KPOOL_AOT_" << StringRef(field).upper() << rank << "(v) {";
      for (int d = 0; d < rank; ++d)
        os << (d ? ", " : "") << "(v)->" << field << "[" << d << "]";
      os << "}\n";
    }
  os << "#endif\n\n";

  os << "/* The kernels. Views are " << (cuda ? "device" : "host")
     << " memory; no validation happens here: the kernels' own guards keep\n"
     << "   every access inside the operands whatever the metadata says, and\n"
     << "   kpool::KernelSet (C++) validates metadata before calling them.\n"
     << "   `status` is NULL or the call's status word (one uint64_t, "
     << (cuda ? "device" : "host")
     << " memory):\n   where a guard meets bad metadata the kernels "
        "record the smallest\n   (request << 8 | finding) there "
        "(kpool/ABI/StatusWord.h).\n"
     << (cuda ? "   `stream` is the caller's CUstream: each call only enqueues "
                "its launches\n   there (no synchronization, allocation, "
                "copy or module load; NULL\n   is the context's NULL stream). "
                "GPU modules load on the first launch\n   in a context, or "
                "in kpoolCudaPrepare(stream) before a graph capture;\n   "
                "nothing touches CUDA before that. */\n"
              : "   `stream` is ignored (the CPU kernels run synchronously). "
                "*/\n");
  auto operands = [](const abi::Kernel &kernel) {
    return ArrayRef(kernel.operands, kernel.numOperands);
  };
  auto scalarType = [](const abi::Operand &operand) {
    return operand.kind == abi::Kind::Stream ? "void *"
           : operand.kind == abi::Kind::F32  ? "float "
                                             : "int32_t ";
  };
  for (const abi::Kernel &kernel : abi::kernels) {
    if (!built(kernel))
      continue;
    os << "void _mlir_ciface_"
       << mlir::kpool::kernelFunctionName(prefix, kernel.id) << "(";
    for (auto [i, arg] : llvm::enumerate(operands(kernel)))
      os << (i ? ", " : "")
         << (arg.rank ? ("KPoolDescriptor" + std::to_string(arg.rank) + " *")
                      : std::string(scalarType(arg)))
         << arg.name;
    os << ");\n";
  }
  os << "\n";
  // The plain C wrappers take the kernel's argument struct (kpool/ABI/
  // Args.h), then the context: the status word (NULL: none) and the stream.
  for (const abi::Kernel &kernel : abi::kernels) {
    if (!built(kernel))
      continue;
    std::string args = std::string("KPool") + (kernel.capiFunction + 5) +
                       "Args";
    os << "static inline void " << prefix << kernel.name << "(const " << args
       << " *args, uint64_t *status, void *stream) {\n";
    for (const abi::Operand &arg : operands(kernel))
      if (arg.kind == abi::Kind::U64)
        os << "  KPoolDescriptor1 d_" << arg.name << " = { " << arg.name
           << ", " << arg.name << ", 0, {" << arg.name << " ? 1 : 0}, {1} };\n";
      else if (arg.rank)
        os << "  KPoolDescriptor" << arg.rank << " d_" << arg.name
           << " = KPOOL_AOT_DESCRIPTOR(" << arg.rank << ", &args->" << arg.name
           << ");\n";
    os << "  _mlir_ciface_"
       << mlir::kpool::kernelFunctionName(prefix, kernel.id) << "(";
    for (auto [i, arg] : llvm::enumerate(operands(kernel)))
      os << (i ? ", " : "")
         << (arg.rank ? "&d_" + std::string(arg.name)
             : arg.role == abi::Role::Scalar
                 ? "args->" + std::string(arg.name)
                 : std::string(arg.name));
    os << ");\n}\n";
  }
  os << "\n#ifdef __cplusplus\n} /* extern \"C\" */\n\n"
     << "#include \"kpool/Runtime/KernelSet.h\"\n"
     << (cuda ? "#include \"kpool/Runtime/CUDA.h\"\n" : "") << "\n"
     << "/* These kernels as a runtime backend, e.g. for\n"
     << "   kpool::KernelSet(config, backend). */\n"
     << "inline kpool::KernelBackend " << prefix << "backend() {\n"
     << "  kpool::KernelBackend backend;\n";
  for (const abi::Kernel &kernel : abi::kernels)
    if (built(kernel))
    os << "  backend." << kernel.member
       << " = reinterpret_cast<decltype(backend." << kernel.member
       << ")>(&_mlir_ciface_"
       << mlir::kpool::kernelFunctionName(prefix, kernel.id) << ");\n";
  if (cuda)
    os << "  backend.deviceResident = true;\n"
       << "  backend.prepare = kpool::cuda::prepare;\n";
  os << "  return backend;\n}\n\n"
     << "/* The configuration these kernels were built for. */\n"
     << "inline kpool::KernelConfig " << prefix << "config() {\n"
     << "  kpool::KernelConfig config;\n"
     << "  config.elementType = " << typeEnum << ";\n"
     << "  config.headDim = " << headDim << ";\n"
     << "  config.kpool = " << poolSize << ";\n"
     << "  config.target = kpool::Target::" << (cuda ? "CUDA" : "CPU") << ";\n"
     << (cuda ? std::string()
              : "  config.openmp = " + std::string(openmp ? "true" : "false") +
                    ";\n  config.vectorSize = " + std::to_string(vectorSize) +
                    ";\n")
     << cacheConfig()
     << "  return config;\n}\n\n"
     << "/* Registers these kernels with the runtime, so that\n"
     << "   kpool::KernelSet::getPrecompiled (no MLIR at run time) and\n"
     << "   KernelSet::get return them for this configuration. */\n"
     << "inline void " << prefix << "register() {\n"
     << "  kpool::KernelSet::registerPrecompiled(" << prefix << "config(), "
     << prefix << "backend());\n}\n"
     << "#endif /* __cplusplus */\n\n#endif /* " << guard << " */\n";
  return s;
}

/// Makes the translated host code launch on each entry point's caller
/// stream (its last argument, the last of KernelABI.def's context operands) instead of
/// a stream it creates, synchronizes and destroys around its launches (what
/// the translation of a gpu.launch_func without async dependencies emits):
/// the entry points then only enqueue, in program order, and never wait.
static bool useCallerStreams(Module &module, std::string &error) {
  for (Function &fn : module) {
    SmallVector<CallInst *> creates, waits;
    for (Instruction &inst : instructions(fn))
      if (auto *call = dyn_cast<CallInst>(&inst))
        if (Function *callee = call->getCalledFunction()) {
          StringRef name = callee->getName();
          if (name == "mgpuStreamCreate")
            creates.push_back(call);
          else if (name == "mgpuStreamSynchronize" ||
                   name == "mgpuStreamDestroy")
            waits.push_back(call);
        }
    if (creates.empty() && waits.empty())
      continue;
    if (fn.arg_empty() || !fn.getArg(fn.arg_size() - 1)->getType()->isPointerTy()) {
      error = ("'" + fn.getName() + "' creates streams but takes no caller "
               "stream").str();
      return false;
    }
    Value *stream = fn.getArg(fn.arg_size() - 1);
    for (CallInst *call : waits)
      call->eraseFromParent();
    for (CallInst *call : creates) {
      call->replaceAllUsesWith(stream);
      call->eraseFromParent();
    }
  }
  return true;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::kpool::setToolVersionPrinter("kpool-aot");
  // LLVM's own options (the backends', the pass managers') stay usable but
  // only --help-hidden lists them: HideUnrelatedOptions would drop them from
  // it too (cl::ReallyHidden), so those it hides are made cl::Hidden.
  SmallVector<cl::Option *> shown;
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.second->getOptionHiddenFlag() == cl::NotHidden)
      shown.push_back(entry.second);
  cl::HideUnrelatedOptions(aotCategory);
  for (cl::Option *option : shown)
    if (option->getOptionHiddenFlag() == cl::ReallyHidden)
      option->setHiddenFlag(cl::Hidden);
  cl::ParseCommandLineOptions(argc, argv, "kpool ahead-of-time kernels\n");

  KPoolElementType type;
  if (!parseName<KPoolElementType>(elementType, kpool::elementTypeName, type))
    return fail("--type must be bf16, f16 or f32, got '" + elementType + "'");
  std::string typeEnum = "KPOOL_" + StringRef(elementType).upper();
  bool cuda = target == "cuda";
  if (!cuda && target != "cpu")
    return fail("--target must be cpu or cuda, got '" + target + "'");
  kpool::CacheFormat format;
  if (!parseName<kpool::CacheEntry>(cacheEntry, kpool::cacheEntryName,
                                    format.entry))
    return fail("--cache must be none, element or fp8, got '" + cacheEntry +
                "'");
  if (!parseName<kpool::CacheRotate>(cacheRotate, kpool::cacheRotateName,
                                     format.rotate))
    return fail("--rotate must be none or hadamard, got '" + cacheRotate +
                "'");
  if (!parseName<kpool::CacheScale>(cacheScale, kpool::cacheScaleName,
                                    format.scale))
    return fail("--scale must be absmax or pow2, got '" + cacheScale + "'");
  // The runtime's one check of a configuration's values.
  kpool::KernelConfig config;
  config.elementType = type;
  config.headDim = headDim;
  config.kpool = poolSize;
  config.target = cuda ? kpool::Target::CUDA : kpool::Target::CPU;
  config.vectorSize = vectorSize;
  config.cache = format;
  if (kpool::Status s = kpool::validateConfig(config); !s.ok())
    return fail(s.message());

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::kpool::registerAllDialects(registry);
  mlir::MLIRContext context(registry);

  std::string prefix = mlir::kpool::kernelPrefix(type, headDim, poolSize) +
                       mlir::kpool::cacheFormatPrefix(cacheFormat());
  if (cuda)
    prefix += "cuda_";
  auto module =
      mlir::kpool::buildKernelModule(context, type, headDim, poolSize, prefix,
                                     /*poolOffsetsOnly=*/false, cacheFormat());
  mlir::PassManager pm(&context);
  std::string pipelineError;
  mlir::LogicalResult built = mlir::success();
  if (cuda) {
    mlir::kpool::KPoolToNVVMPipelineOptions options;
    options.bufferize = false;
    options.chip = chip;
    options.features = features;
    options.format = binaryFormat;
    options.cudaToolkit = cudaToolkit;
    built = mlir::kpool::buildLowerToNVVMPipeline(pm, options, &pipelineError);
  } else {
    mlir::kpool::KPoolToLLVMPipelineOptions options;
    options.bufferize = false;
    options.openmp = openmp;
    options.vectorSize = vectorSize;
    built = mlir::kpool::buildLowerToLLVMPipeline(pm, options, &pipelineError);
  }
  if (mlir::failed(built))
    return fail(pipelineError);
  if (mlir::failed(pm.run(*module)))
    return fail("lowering the kernels failed");

  LLVMContext llvmContext;
  std::unique_ptr<Module> llvmModule =
      mlir::translateModuleToLLVMIR(*module, llvmContext, prefix);
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  if (cuda) {
    std::string streamError;
    if (!useCallerStreams(*llvmModule, streamError))
      return fail("launching on the caller's stream: " + streamError);
  }

  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  Triple triple(sys::getDefaultTargetTriple());
  std::string error;
  const Target *llvmTarget = TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return fail(error);
  std::string cpu = hostCPU;
  std::string cpuFeatures;
  if (cpu.empty() || cpu == "native") {
    if (cuda && cpu.empty()) {
      cpu = "x86-64";
    } else {
      cpu = sys::getHostCPUName().str();
      SubtargetFeatures f;
      for (auto &feature : sys::getHostCPUFeatures())
        f.AddFeature(feature.first(), feature.second);
      cpuFeatures = f.getString();
    }
  }
  // Module constructors (the CUDA target loads its GPU modules in them) go
  // to .init_array: lld keeps a legacy .ctors section apart, where glibc
  // never runs it.
  TargetOptions targetOptions;
  targetOptions.UseInitArray = true;
  std::unique_ptr<TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpu, cpuFeatures, targetOptions, Reloc::PIC_, std::nullopt,
      CodeGenOptLevel::Aggressive));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (Error err = mlir::makeOptimizingTransformer(3, 0, machine.get())(
          llvmModule.get()))
    return fail("optimizing the LLVM IR failed: " + toString(std::move(err)));

  if (!outputLLVM.empty()) {
    std::error_code ec;
    raw_fd_ostream os(outputLLVM, ec);
    if (ec)
      return fail("cannot write " + outputLLVM + ": " + ec.message());
    llvmModule->print(os, nullptr);
  }
  {
    std::error_code ec;
    ToolOutputFile out(outputObject, ec, sys::fs::OF_None);
    if (ec)
      return fail("cannot write " + outputObject + ": " + ec.message());
    legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, out.os(), nullptr,
                                     CodeGenFileType::ObjectFile))
      return fail("the target cannot emit object files");
    codegen.run(*llvmModule);
    out.keep();
  }
  if (!outputHeader.empty()) {
    std::error_code ec;
    ToolOutputFile out(outputHeader, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write " + outputHeader + ": " + ec.message());
    out.os() << header(prefix, typeEnum, cuda);
    out.keep();
  }
  return 0;
}
