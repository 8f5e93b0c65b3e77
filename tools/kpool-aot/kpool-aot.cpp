//===- kpool-aot.cpp - ahead-of-time kpool kernels ------------------------===//
//
// Compiles kpool kernels ahead of time, with the JIT's compiler
// (kpool/Kernels/KernelCompile.h), into
//
// * an object file with plain C entry points for one configuration, and a
//   header describing the calling convention, generated from the kernel ABI
//   (kpool/ABI/KernelABI.def): wrappers that take each kernel's argument
//   struct (kpool/ABI/Args.h) and check every view's extents first:
//
//     kpool-aot --type=bf16 --head-dim=128 --kpool=4 --target=cuda \
//               -o kernels.o --header=kernels.h
//
// * or a kernel pack (kpool/ABI/KernelPack.h): one object, linked into a
//   shared library by the build (kpool_add_kernel_pack), holding several
//   configurations that share one MLIR context and share their kernels
//   where they are the same (the dense kernels of a configuration's cache
//   formats, pool_offsets of every element type and head_dim):
//
//     kpool-aot --pack --target=cuda --config=bf16:128:4:all \
//               --config=f16:128:4:all -o pack.o
//
// The objects need no MLIR or LLVM at run time: only libc on the CPU, and
// the CUDA driver through the mgpu* wrappers (libkpool_cuda_runtime) on
// NVIDIA GPUs, with the GPU code embedded (PTX, and a cubin where ptxas is
// found: kpool/ABI/CudaImage.h).
//
//===----------------------------------------------------------------------===//

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/KernelPack.h"
#include "kpool/ABI/StatusWord.h"
#include "kpool/Kernels/KernelCompile.h"
#include "kpool/Kernels/KernelModule.h"
#include "kpool/Runtime/KernelPacks.h"
#include "kpool/Runtime/KernelSet.h"
#include "kpool/Tools/Version.h"
#include "kpool/Version.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
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
static cl::opt<std::string> binaryFormat(
    "format",
    cl::desc("cuda: ptx+cubin (PTX, and a cubin where ptxas is found: the "
             "loader falls back to the PTX), isa, bin or fatbin"),
    cl::init("ptx+cubin"), cl::cat(aotCategory));
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
static cl::opt<bool>
    pack("pack",
         cl::desc("write a kernel pack of the --config "
                  "configurations (link -o into a shared library)"),
         cl::init(false), cl::cat(aotCategory));
static cl::list<std::string> packConfigs(
    "config",
    cl::desc("--pack: <type>:<head_dim>:<kpool>[:<format>], the format "
             "none (the default), element-<rotate>, fp8-<rotate>-<scale> or "
             "all (no cache and every format); repeatable"),
    cl::cat(aotCategory));

/// The value of `E` named `name` by `nameOf` (the leaf's spelling), or
/// false.
template <typename E>
static bool parseName(StringRef name, const char *(*nameOf)(E), E &value) {
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

/// C statements checking the views of `args`, `kernel`'s argument struct,
/// against their shapes in the kernel ABI table (KernelABI.def: 'D', 'K'
/// and numbers fixed, the other letters extents that every operand naming
/// them shares): each failing check returns the extent finding of the
/// operand and dimension. Symbols bind at their first operand.
static std::string extentChecks(const kpool::abi::Kernel &kernel) {
  namespace abi = ::kpool::abi;
  namespace st = ::kpool::status;
  std::string s;
  raw_string_ostream os(s);
  std::set<char> symbols;
  for (const abi::Operand &arg :
       ArrayRef(kernel.operands, kernel.numOperands)) {
    if (!arg.rank || arg.role == abi::Role::Context)
      continue;
    for (const char *c = arg.shape; *c; ++c)
      if (*c >= 'A' && *c <= 'Z' && *c != 'D' && *c != 'K')
        symbols.insert(*c);
  }
  if (!symbols.empty()) {
    os << "  int64_t";
    for (auto [i, sym] : llvm::enumerate(symbols))
      os << (i ? ", " : " ") << sym << " = -1";
    os << ";\n";
  }
  bool fp8 = cacheFormat().entry == kpool::CacheEntry::FP8;
  for (const abi::Operand &arg :
       ArrayRef(kernel.operands, kernel.numOperands)) {
    if (!arg.rank || arg.role == abi::Role::Context)
      continue;
    std::string name = "args->" + std::string(arg.name);
    int id = abi::operandId(arg.name);
    // The scales of entries of the element type are not read (any view).
    if (arg.kind == abi::Kind::CacheScale && !fp8)
      continue;
    auto bad = [&](unsigned dim) {
      return "return " + std::to_string(st::encodeExtent(id, dim)) + "ull;";
    };
    os << "  if (" << name << ".rank != " << arg.rank << ")\n    "
       << bad(st::kExtentRank) << "\n";
    SmallVector<StringRef> dims;
    StringRef(arg.shape).split(dims, 'x');
    std::string nonEmpty;
    for (auto [d, dim] : llvm::enumerate(dims)) {
      std::string size = (name + ".sizes[" + Twine(d) + "]").str();
      nonEmpty += (d ? " && " : "") + size + " > 0";
      std::string fail = bad(d);
      int64_t fixed;
      if (dim == "?") {
        os << "  if (" << size << " < 0)\n    " << fail << "\n";
      } else if (dim == "D" || dim == "K" || !dim.getAsInteger(10, fixed)) {
        int64_t value = dim == "D"   ? int64_t(headDim)
                        : dim == "K" ? int64_t(poolSize)
                                     : fixed;
        os << "  if (" << size << " != " << value << ")\n    " << fail << "\n";
      } else {
        bool plusOne = dim.consume_back("+1");
        char sym = dim.front();
        std::string value = plusOne ? size + " - 1" : size;
        os << "  if (" << size << " < " << (plusOne ? 1 : 0) << " || (" << sym
           << " >= 0 && " << value << " != " << sym << "))\n    " << fail
           << "\n  " << sym << " = " << value << ";\n";
        // What the symbols must also satisfy: the ring holds a pool, a
        // page holds an entry, the batch fits the metadata's 32 bits.
        if (sym == 'R')
          os << "  if (R < " << int64_t(poolSize) << ")\n    " << fail << "\n";
        if (sym == 'P')
          os << "  if (P < 1)\n    " << fail << "\n";
        if (sym == 'B')
          os << "  if (B > 2147483647)\n    " << fail << "\n";
      }
    }
    os << "  if (!" << name << ".data && " << nonEmpty << ")\n    "
       << bad(st::kExtentData) << "\n";
  }
  for (char sym : symbols)
    os << "  (void)" << sym << ";\n";
  return s;
}

/// The header: descriptor types, the `_mlir_ciface_` entry points, plain C
/// wrappers taking the argument structs (kpool/ABI/Args.h) and, for C++,
/// the runtime registration; the kernels and their operands come from the
/// kernel ABI table.
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
     << " memory. Each entry point takes the kernel's argument struct\n"
     << "   (kpool/ABI/Args.h), then the context: the status word and the\n"
     << "   stream. It first checks every view's rank and extents against the\n"
     << "   kernels' configuration and against the other views (the shapes\n"
     << "   of kpool/ABI/KernelABI.def): on a null `args` or a mismatch it\n"
     << "   reads and writes nothing, records the extent finding in `status`\n"
     << "   and returns that word (kpool::statusWordError and\n"
     << "   kpoolStatusWordError name the operand and dimension); it returns\n"
     << "   0 when the kernels\n"
     << "   ran. Metadata values are not validated here: the kernels' own\n"
     << "   guards keep every access inside the operands whatever the\n"
     << "   metadata says, and kpool::KernelSet validates it on the host.\n"
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
  // Recording an extent finding: on the host a compare-and-swap keeping the
  // smallest nonzero word; on the device a stream-ordered launch of
  // libkpool_cuda_runtime's recorder.
  if (cuda)
    os << "#ifndef KPOOL_AOT_RECORD_CUDA\n#define KPOOL_AOT_RECORD_CUDA\n"
       << "void kpoolCudaRecordStatus(uint64_t *word, uint64_t value, "
          "void *stream);\n#endif\n";
  else
    os << "#ifndef KPOOL_AOT_RECORD_HOST\n#define KPOOL_AOT_RECORD_HOST\n"
       << "static inline void kpool_aot_record(uint64_t *word, uint64_t "
          "value) {\n"
       << "  uint64_t old;\n  if (!word)\n    return;\n"
       << "  old = __atomic_load_n(word, __ATOMIC_RELAXED);\n"
       << "  while ((old == 0 || old > value) &&\n"
       << "         !__atomic_compare_exchange_n(word, &old, value, 1,\n"
       << "                                      __ATOMIC_RELAXED, "
          "__ATOMIC_RELAXED)) {\n  }\n}\n#endif\n";
  os << "\n";
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
  for (const abi::Kernel &kernel : abi::kernels) {
    if (!built(kernel))
      continue;
    // The wrappers take the kernel's argument struct, then the context:
    // the status word (a uint64_t *, NULL: none, as in the C API) and the
    // stream.
    std::string args = std::string("KPool") + (kernel.capiFunction + 5) +
                       "Args";
    // A null `args`: the first view's "wrong rank (or null)" finding.
    const abi::Operand *firstView = nullptr;
    for (const abi::Operand &arg : operands(kernel))
      if (arg.rank && arg.role != abi::Role::Context && !firstView)
        firstView = &arg;
    os << "/* 0, or the extent finding of the first view of `args` that does "
          "not fit. */\n"
       << "static inline uint64_t " << prefix << kernel.name
       << "_extents(const " << args << " *args) {\n"
       << "  if (!args)\n    return "
       << ::kpool::status::encodeExtent(abi::operandId(firstView->name),
                                        ::kpool::status::kExtentRank)
       << "ull;\n"
       << extentChecks(kernel) << "  return 0;\n}\n";
    os << "static inline uint64_t " << prefix << kernel.name << "(const "
       << args << " *args, uint64_t *status, void *stream) {\n"
       << "  uint64_t bad = " << prefix << kernel.name << "_extents(args);\n"
       << "  if (bad) {\n"
       << (cuda ? "    kpoolCudaRecordStatus(status, bad, stream);\n"
                : "    (void)stream;\n    kpool_aot_record(status, bad);\n")
       << "    return bad;\n  }\n  {\n";
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
    os << ");\n  }\n  return 0;\n}\n";
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

/// The compile options of the command line.
static mlir::kpool::KernelCompileOptions compileOptions(bool cuda) {
  mlir::kpool::KernelCompileOptions options;
  options.cuda = cuda;
  options.openmp = openmp;
  options.vectorSize = vectorSize;
  options.hostCPU = hostCPU;
  options.chip = chip;
  options.features = features;
  options.format = binaryFormat;
  options.cudaToolkit = cudaToolkit;
  return options;
}

/// Parses an element type name (the leaf's spelling).
static bool parseType(StringRef name, KPoolElementType &type,
                      std::string *typeEnum = nullptr) {
  for (int t = 0; t < KPOOL_NUM_ELEMENT_TYPES; ++t)
    if (name == kpool::elementTypeName(KPoolElementType(t))) {
      type = KPoolElementType(t);
      if (typeEnum)
        *typeEnum = "KPOOL_" + name.upper();
      return true;
    }
  return false;
}

/// The runtime's one check of a configuration's values
/// (kpool::validateConfig), for the kernels of `type`, `dim`, `pool` and
/// `format` on the command line's target and CPU options.
static kpool::Status validate(KPoolElementType type, int64_t dim, int64_t pool,
                              const kpool::CacheFormat &format, bool cuda) {
  kpool::KernelConfig config;
  config.elementType = type;
  config.headDim = dim;
  config.kpool = pool;
  config.target = cuda ? kpool::Target::CUDA : kpool::Target::CPU;
  config.openmp = openmp;
  config.vectorSize = vectorSize;
  config.cache = format;
  return kpool::validateConfig(config);
}

/// Parses a pool-cache format `<entry>-<rotate>[-<scale>]` or "none".
static bool parseFormat(StringRef text, kpool::CacheFormat &format) {
  format = kpool::CacheFormat();
  if (text == "none")
    return true;
  SmallVector<StringRef> parts;
  text.split(parts, '-');
  if (parts.size() < 2 || parts.size() > 3)
    return false;
  if (!parseName<kpool::CacheEntry>(parts[0], kpool::cacheEntryName,
                                    format.entry) ||
      format.entry == kpool::CacheEntry::None ||
      (format.entry == kpool::CacheEntry::FP8) != (parts.size() == 3))
    return false;
  if (!parseName<kpool::CacheRotate>(parts[1], kpool::cacheRotateName,
                                     format.rotate))
    return false;
  return parts.size() == 2 ||
         parseName<kpool::CacheScale>(parts[2], kpool::cacheScaleName,
                                      format.scale);
}

/// Every pool-cache format, for a configuration's `all`: element and FP8
/// (both scales) entries, unrotated and, for a power-of-two head_dim,
/// Hadamard-rotated.
static std::vector<kpool::CacheFormat> allFormats(int64_t dim) {
  std::vector<kpool::CacheFormat> out;
  bool pow2 = dim > 0 && (dim & (dim - 1)) == 0;
  for (kpool::CacheRotate r :
       {kpool::CacheRotate::None, kpool::CacheRotate::Hadamard}) {
    if (r == kpool::CacheRotate::Hadamard && !pow2)
      continue;
    kpool::CacheFormat f;
    f.rotate = r;
    f.entry = kpool::CacheEntry::Element;
    out.push_back(f);
    f.entry = kpool::CacheEntry::FP8;
    for (kpool::CacheScale s :
         {kpool::CacheScale::Absmax, kpool::CacheScale::Pow2}) {
      f.scale = s;
      out.push_back(f);
    }
  }
  return out;
}

/// parseFormat's spelling of `f`.
static std::string formatName(const kpool::CacheFormat &f) {
  if (f.entry == kpool::CacheEntry::None)
    return "none";
  std::string s = std::string(kpool::cacheEntryName(f.entry)) + "-" +
                  kpool::cacheRotateName(f.rotate);
  if (f.entry == kpool::CacheEntry::FP8)
    s += std::string("-") + kpool::cacheScaleName(f.scale);
  return s;
}

namespace {
/// One configuration of a pack and the symbols of its kernels.
struct PackConfig {
  KPoolElementType type;
  int64_t dim, pool;
  kpool::CacheFormat cache;
  std::map<std::string, std::string> entries; // kernel name -> symbol
};
} // namespace

/// Adds the pack's table and its entry point (kpool/ABI/KernelPack.h).
static void addPackTable(Module &module, const std::vector<PackConfig> &configs,
                         bool cuda, const std::string &description) {
  LLVMContext &ctx = module.getContext();
  Type *i32 = Type::getInt32Ty(ctx), *i64 = Type::getInt64Ty(ctx);
  PointerType *ptr = PointerType::get(ctx, 0);
  StructType *entryTy = StructType::create(ctx, {ptr, ptr}, "KPoolPackEntry");
  StructType *configTy = StructType::create(
      ctx, {i32, i32, i64, i64, i64, i32, i32, i32, i32, i32, i32, ptr},
      "KPoolPackConfig");
  StructType *packTy = StructType::create(ctx, {i32, i32, i64, ptr, ptr, ptr},
                                          "KPoolKernelPack");
  auto string = [&](StringRef s) -> Constant * {
    Constant *data = ConstantDataArray::getString(ctx, s);
    auto *g =
        new GlobalVariable(module, data->getType(), /*isConstant=*/true,
                           GlobalValue::PrivateLinkage, data, "kpool.pack.str");
    g->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
    return g;
  };
  std::map<std::string, Constant *> names;
  auto name = [&](const std::string &s) {
    Constant *&c = names[s];
    if (!c)
      c = string(s);
    return c;
  };
  SmallVector<Constant *> configValues;
  for (const PackConfig &c : configs) {
    SmallVector<Constant *> entries;
    for (auto &[kernel, symbol] : c.entries)
      entries.push_back(ConstantStruct::get(
          entryTy, {name(kernel), module.getFunction(symbol)}));
    ArrayType *arrayTy = ArrayType::get(entryTy, entries.size());
    auto *array = new GlobalVariable(
        module, arrayTy, /*isConstant=*/true, GlobalValue::PrivateLinkage,
        ConstantArray::get(arrayTy, entries), "kpool.pack.entries");
    auto int32 = [&](int64_t v) { return ConstantInt::get(i32, v); };
    auto int64 = [&](int64_t v) { return ConstantInt::get(i64, v); };
    configValues.push_back(ConstantStruct::get(
        configTy,
        {int32(c.type), int32(cuda ? 1 : 0), int64(c.dim), int64(c.pool),
         int64(cuda ? 0 : vectorSize), int32(!cuda && openmp), int32(0),
         int32(int(c.cache.entry)), int32(int(c.cache.rotate)),
         int32(int(c.cache.scale)), int32(entries.size()), array}));
  }
  ArrayType *configsTy = ArrayType::get(configTy, configValues.size());
  auto *configArray = new GlobalVariable(
      module, configsTy, /*isConstant=*/true, GlobalValue::PrivateLinkage,
      ConstantArray::get(configsTy, configValues), "kpool.pack.configs");
  auto *table = new GlobalVariable(
      module, packTy, /*isConstant=*/true, GlobalValue::PrivateLinkage,
      ConstantStruct::get(packTy,
                          {ConstantInt::get(i32, KPOOL_KERNEL_PACK_VERSION),
                           ConstantInt::get(i32, configs.size()),
                           ConstantInt::get(i64, kpool::kernelAbiHash()),
                           string(KPOOL_VERSION_STRING), string(description),
                           configArray}),
      "kpool.pack");
  Function *entry = Function::Create(FunctionType::get(ptr, false),
                                     GlobalValue::ExternalLinkage,
                                     KPOOL_KERNEL_PACK_ENTRY, module);
  IRBuilder<> b(BasicBlock::Create(ctx, "entry", entry));
  b.CreateRet(table);
}

static bool writeFile(StringRef path, StringRef contents, bool text,
                      std::string &error) {
  std::error_code ec;
  ToolOutputFile out(path, ec, text ? sys::fs::OF_Text : sys::fs::OF_None);
  if (ec) {
    error = ("cannot write " + path + ": " + ec.message()).str();
    return false;
  }
  out.os() << contents;
  out.keep();
  return true;
}

/// kpool-aot --pack.
static int writePack(mlir::MLIRContext &context, bool cuda) {
  if (packConfigs.empty())
    return fail("--pack needs at least one --config");
  if (!outputHeader.empty())
    return fail("--pack writes no header (the pack registers itself)");
  mlir::kpool::KernelCompileOptions options = compileOptions(cuda);
  // The configurations, grouped by (type, head_dim, kpool): each group's
  // dense kernels are built once for all its formats, each format's
  // `*_cache` kernels apart, and pool_offsets once per kpool.
  std::vector<PackConfig> configs;
  for (StringRef text : packConfigs) {
    SmallVector<StringRef> f;
    text.split(f, ':');
    PackConfig c;
    if (f.size() < 3 || f.size() > 4 || !parseType(f[0], c.type) ||
        f[1].getAsInteger(10, c.dim) || f[2].getAsInteger(10, c.pool))
      return fail("--config='" + text +
                  "': expected <bf16|f16|f32>:<head_dim>:<kpool>[:<format>]");
    std::vector<kpool::CacheFormat> formats(1);
    if (f.size() == 4 && f[3] == "all") {
      for (const kpool::CacheFormat &format : allFormats(c.dim))
        formats.push_back(format);
    } else if (f.size() == 4 && !parseFormat(f[3], formats[0])) {
      return fail("--config='" + text +
                  "': the format must be none, all, element-<none|hadamard> "
                  "or fp8-<none|hadamard>-<absmax|pow2>");
    }
    for (const kpool::CacheFormat &format : formats) {
      if (kpool::Status s = validate(c.type, c.dim, c.pool, format, cuda);
          !s.ok())
        return fail("--config='" + text + "': " + s.message());
      PackConfig one = c;
      one.cache = format;
      bool duplicate = false;
      for (const PackConfig &o : configs)
        duplicate |= o.type == one.type && o.dim == one.dim &&
                     o.pool == one.pool && o.cache == one.cache;
      if (!duplicate)
        configs.push_back(one);
    }
  }

  // The parts: pool_offsets once per kpool, each (type, head_dim, kpool)'s
  // dense kernels once, each format's `*_cache` kernels once; all lowered
  // together (one host module, one GPU module).
  namespace abi = kpool::abi;
  std::vector<abi::KernelId> dense, cacheKernels;
  for (const abi::Kernel &k : abi::kernels) {
    if (abi::isCacheKernel(k.id))
      cacheKernels.push_back(k.id);
    else if (k.id != abi::KernelId::PoolOffsets)
      dense.push_back(k.id);
  }
  std::vector<mlir::kpool::KernelModuleSpec> specs;
  std::map<std::string, std::map<std::string, std::string>> parts;
  auto part = [&](const std::string &name,
                  const mlir::kpool::KernelModuleSpec &spec)
      -> const std::map<std::string, std::string> & {
    auto it = parts.find(name);
    if (it != parts.end())
      return it->second;
    specs.push_back(spec);
    std::map<std::string, std::string> &entries = parts[name];
    for (auto &[id, symbol] : mlir::kpool::kernelEntryPoints(spec, options))
      entries[abi::kernel(id).name] = symbol;
    return entries;
  };
  for (PackConfig &c : configs) {
    mlir::kpool::KernelModuleSpec spec;
    spec.type = c.type;
    spec.headDim = c.dim;
    spec.kpool = c.pool;
    std::string group = std::string(kpool::elementTypeName(c.type)) + "/" +
                        std::to_string(c.dim) + "/" + std::to_string(c.pool);
    mlir::kpool::KernelModuleSpec offsets = spec;
    offsets.poolOffsetsOnly = true;
    c.entries = part("offsets/" + std::to_string(c.pool), offsets);
    mlir::kpool::KernelModuleSpec d = spec;
    d.only = dense;
    for (auto &e : part(group, d))
      c.entries.insert(e);
    if (c.cache.entry == kpool::CacheEntry::None)
      continue;
    mlir::kpool::KernelModuleSpec k = spec;
    k.cache = c.cache;
    k.only = cacheKernels;
    for (auto &e : part(group + "/" + formatName(c.cache), k))
      c.entries.insert(e);
  }
  LLVMContext llvmContext;
  std::string error;
  std::unique_ptr<Module> linked =
      mlir::kpool::lowerKernels(context, llvmContext, specs, options, error);
  if (!linked)
    return fail(error);

  std::string description = std::string(cuda ? "cuda " : "cpu ");
  description +=
      cuda ? chip + " " + binaryFormat : mlir::kpool::describeHostCPU(options);
  description += ":";
  for (const PackConfig &c : configs)
    description += std::string(" ") + kpool::elementTypeName(c.type) + "/" +
                   std::to_string(c.dim) + "/" + std::to_string(c.pool) + "/" +
                   formatName(c.cache);
  addPackTable(*linked, configs, cuda, description);
  // A pack exports its entry point only (kpool/ABI/KernelPack.h): its
  // kernels' symbols are hidden, so that they never interpose, or get
  // interposed by, another pack's or a program's kernels of the same
  // configuration.
  for (GlobalValue &g : linked->global_values())
    if (!g.isDeclaration() && !g.hasLocalLinkage() &&
        g.getName() != KPOOL_KERNEL_PACK_ENTRY)
      g.setVisibility(GlobalValue::HiddenVisibility);

  std::string object, ir;
  if (failed(mlir::kpool::emitObject(*linked, options, object, error,
                                     outputLLVM.empty() ? nullptr : &ir)))
    return fail(error);
  if (!outputLLVM.empty() && !writeFile(outputLLVM, ir, true, error))
    return fail(error);
  if (!writeFile(outputObject, object, false, error))
    return fail(error);
  return 0;
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

  bool cuda = target == "cuda";
  if (!cuda && target != "cpu")
    return fail("--target must be cpu or cuda, got '" + target + "'");
  if (binaryFormat != "ptx+cubin" && binaryFormat != "isa" &&
      binaryFormat != "bin" && binaryFormat != "fatbin")
    return fail("--format must be ptx+cubin, isa, bin or fatbin, got '" +
                binaryFormat + "'");

  mlir::DialectRegistry registry;
  mlir::kpool::registerKernelCompileDialects(registry);
  mlir::MLIRContext context(registry);
  if (pack)
    return writePack(context, cuda);

  KPoolElementType type;
  std::string typeEnum;
  if (!parseType(elementType, type, &typeEnum))
    return fail("--type must be bf16, f16 or f32, got '" + elementType + "'");
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
  if (kpool::Status s = validate(type, headDim, poolSize, format, cuda);
      !s.ok())
    return fail(s.message());

  mlir::kpool::KernelCompileOptions options = compileOptions(cuda);
  mlir::kpool::KernelModuleSpec spec;
  spec.type = type;
  spec.headDim = headDim;
  spec.kpool = poolSize;
  spec.cache = cacheFormat();
  std::string prefix = mlir::kpool::kernelSymbolPrefix(spec, options);
  LLVMContext llvmContext;
  std::string error;
  std::unique_ptr<Module> module =
      mlir::kpool::lowerKernels(context, llvmContext, spec, options, error);
  if (!module)
    return fail(error);
  std::string object, ir;
  if (failed(mlir::kpool::emitObject(*module, options, object, error,
                                     outputLLVM.empty() ? nullptr : &ir)))
    return fail(error);
  if (!outputLLVM.empty() && !writeFile(outputLLVM, ir, true, error))
    return fail(error);
  if (!writeFile(outputObject, object, false, error))
    return fail(error);
  if (!outputHeader.empty() &&
      !writeFile(outputHeader, header(prefix, typeEnum, cuda), true, error))
    return fail(error);
  return 0;
}
