//===- KernelObjects.cpp - compiled kernels: cache, compilers, loading ----===//
//
// The run-time compilation path of KernelSet::get: the disk cache, the
// object compilers (registered, or the JIT plugin loaded on demand), and
// loading an object's kernels into a KernelBackend. No MLIR or LLVM: the JIT
// lives in libKPoolJit.so, opened only when a configuration is neither
// registered nor cached.
//
//===----------------------------------------------------------------------===//

#include "KernelObjects.h"

#include "DiskCache.h"
#include "ObjectLoader.h"

#include "kpool/Runtime/KernelCache.h"
#include "kpool/Version.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KPOOL_LLVM_VERSION
#error "KPOOL_LLVM_VERSION must be defined by the build"
#endif
#include "kpool/Runtime/CompilerId.h" // KPOOL_COMPILER_ID (generated)

using namespace kpool;
using namespace kpool::detail;

namespace {

std::mutex &compilerMutex() {
  static auto *m = new std::mutex;
  return *m;
}
std::map<Target, ObjectCompiler> &objectCompilers() {
  static auto *m = new std::map<Target, ObjectCompiler>;
  return *m;
}

/// The cache's counters (kpool/Runtime/KernelCache.h).
std::atomic<int64_t> hits{0}, misses{0}, compiled{0}, stored{0}, rejected{0};
std::mutex problemMutex;
std::string &lastProblem() {
  static auto *s = new std::string;
  return *s;
}
void noteProblem(const std::string &problem) {
  std::lock_guard<std::mutex> lock(problemMutex);
  lastProblem() = problem;
}

const char *targetWord(Target t) { return t == Target::CPU ? "cpu" : "cuda"; }

/// "size:mtime" of a file, or "-" when it is missing.
std::string fileStamp(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return "-";
  return std::to_string((long long)st.st_size) + ":" +
         std::to_string((long long)st.st_mtime);
}

/// The CUDA toolkit the JIT uses: $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, then
/// /usr/local/cuda, the first that is a folder.
std::string cudaToolkit() {
  auto isDir = [](const char *p) {
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
  };
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *p = std::getenv(var); isDir(p))
      return p;
  if (isDir("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

//===----------------------------------------------------------------------===//
// Cache contents: a KernelObject
//===----------------------------------------------------------------------===//

constexpr char kObjectMagic[8] = {'K', 'O', 'B', 'J', 'v', '1', '\n', '\0'};

void put(std::string &out, const std::string &s) {
  uint64_t n = s.size();
  out.append(reinterpret_cast<const char *>(&n), 8);
  out += s;
}
bool take(const std::string &in, size_t &at, std::string &s) {
  uint64_t n;
  if (in.size() - at < 8)
    return false;
  std::memcpy(&n, in.data() + at, 8);
  at += 8;
  if (n > in.size() - at)
    return false;
  s.assign(in, at, n);
  at += n;
  return true;
}

std::string serialize(const KernelObject &object) {
  std::string out(kObjectMagic, sizeof kObjectMagic);
  put(out, std::to_string(object.entries.size()));
  for (auto &[kernel, symbol] : object.entries) {
    put(out, kernel);
    put(out, symbol);
  }
  put(out, object.description);
  put(out, object.object);
  return out;
}

bool deserialize(const std::string &in, KernelObject &object) {
  if (in.size() < sizeof kObjectMagic ||
      std::memcmp(in.data(), kObjectMagic, sizeof kObjectMagic) != 0)
    return false;
  size_t at = sizeof kObjectMagic;
  std::string count;
  if (!take(in, at, count))
    return false;
  unsigned long n = std::strtoul(count.c_str(), nullptr, 10);
  if (n > 64)
    return false;
  object.entries.resize(n);
  for (auto &[kernel, symbol] : object.entries)
    if (!take(in, at, kernel) || !take(in, at, symbol))
      return false;
  return take(in, at, object.description) && take(in, at, object.object) &&
         at == in.size();
}

//===----------------------------------------------------------------------===//
// The JIT plugin
//===----------------------------------------------------------------------===//

/// The plugin's object compilers, registered once (or why not).
bool loadJitPlugin(std::string &why) {
  static std::mutex mutex;
  static bool tried = false, loaded = false;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (tried) {
    why = failure;
    return loaded;
  }
  tried = true;
  std::string path;
  if (const char *p = std::getenv("KPOOL_JIT_LIBRARY"))
    path = p;
  else
    path = runtimeDirectory() + "/libKPoolJit.so";
  auto fail = [&](const std::string &message) {
    failure = message;
    why = failure;
    return false;
  };
  if (path.empty())
    return fail("the JIT is off (KPOOL_JIT_LIBRARY is set and empty)");
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *e = dlerror();
    return fail("the JIT library could not be loaded: " +
                std::string(e ? e : path));
  }
  auto entry =
      reinterpret_cast<const JitPlugin *(*)()>(dlsym(handle, "kpoolJitPlugin"));
  const JitPlugin *plugin = entry ? entry() : nullptr;
  if (!plugin)
    return fail(path + " has no kpoolJitPlugin entry point");
  if (plugin->abiVersion != kJitPluginAbiVersion ||
      std::strcmp(plugin->kpoolVersion, KPOOL_VERSION_STRING) != 0)
    return fail(path + " is the JIT of kpool " + plugin->kpoolVersion +
                " (plugin interface " + std::to_string(plugin->abiVersion) +
                "), not of this runtime (kpool " KPOOL_VERSION_STRING
                ", interface " +
                std::to_string(kJitPluginAbiVersion) + ")");
  auto compile = plugin->compile;
  std::lock_guard<std::mutex> registry(compilerMutex());
  for (Target t : {Target::CPU, Target::CUDA})
    if (!objectCompilers().count(t))
      objectCompilers()[t] = compile;
  loaded = true;
  return true;
}

ObjectCompiler compilerFor(Target target, std::string &why) {
  {
    std::lock_guard<std::mutex> lock(compilerMutex());
    auto it = objectCompilers().find(target);
    if (it != objectCompilers().end())
      return it->second;
  }
  if (!loadJitPlugin(why))
    return nullptr;
  std::lock_guard<std::mutex> lock(compilerMutex());
  auto it = objectCompilers().find(target);
  return it == objectCompilers().end() ? nullptr : it->second;
}

//===----------------------------------------------------------------------===//
// libkpool_cuda_runtime
//===----------------------------------------------------------------------===//

using PrepareFn = int (*)(void *);
std::atomic<PrepareFn> prepareFn{nullptr};

} // namespace

std::string detail::runtimeDirectory() {
  Dl_info info;
  std::string path;
  if (dladdr(reinterpret_cast<void *>(&detail::runtimeDirectory), &info) &&
      info.dli_fname)
    path = info.dli_fname;
  // In a program that links the core statically, dladdr names the program
  // as it was started (perhaps without a folder): ask the kernel instead.
  if (path.find('/') == std::string::npos) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
      return ".";
    exe[n] = '\0';
    path = exe;
  }
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

void *detail::cudaRuntime(std::string *why) {
  static std::mutex mutex;
  static void *handle = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (handle || !failure.empty()) {
    if (!handle && why)
      *why = failure;
    return handle;
  }
  std::string tried;
  auto attempt = [&](const std::string &path) {
    if (handle)
      return;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char *e = dlerror();
      std::string message = e ? e : path;
      if (tried.find(message) == std::string::npos)
        tried += (tried.empty() ? "" : "; ") + message;
    }
  };
  if (const char *p = std::getenv("KPOOL_CUDA_RUNTIME")) {
    attempt(p);
  } else {
    // By name first, so that LD_LIBRARY_PATH (e.g. an emulation) wins,
    // then next to the runtime (a program in bin/ has it in ../lib).
    attempt("libkpool_cuda_runtime.so");
    attempt(runtimeDirectory() + "/libkpool_cuda_runtime.so");
    attempt(runtimeDirectory() + "/../lib/libkpool_cuda_runtime.so");
  }
  if (!handle) {
    failure = "libkpool_cuda_runtime.so (the CUDA layer, which needs the "
              "CUDA driver libcuda.so.1) could not be loaded: " +
              tried;
    if (why)
      *why = failure;
    return nullptr;
  }
  prepareFn = reinterpret_cast<PrepareFn>(dlsym(handle, "kpoolCudaPrepare"));
  return handle;
}

Status detail::cudaPrepare(void *stream) {
  PrepareFn fn = prepareFn.load();
  if (!fn)
    return Status::error("libkpool_cuda_runtime.so is not loaded");
  int result = fn(stream);
  if (result != 0)
    return Status::error("loading the GPU modules failed with CUDA error " +
                         std::to_string(result));
  return Status();
}

void kpool::registerObjectCompiler(Target target, ObjectCompiler compiler) {
  std::lock_guard<std::mutex> lock(compilerMutex());
  if (compiler)
    objectCompilers()[target] = std::move(compiler);
  else
    objectCompilers().erase(target);
}

std::string kpool::kernelCacheKey(const KernelConfig &c,
                                  const CompileOptions &options) {
  bool cpu = c.target == Target::CPU;
  bool all = !c.poolOffsetsOnly;
  std::string summary = std::string(targetWord(c.target)) + " ";
  if (all)
    summary += std::string(elementTypeName(c.elementType)) + " d" +
               std::to_string(c.headDim) + " ";
  else
    summary += "pool_offsets ";
  summary += "k" + std::to_string(c.kpool);
  if (all && c.cache.entry != CacheEntry::None) {
    summary +=
        c.cache.entry == CacheEntry::FP8 ? " cache fp8" : " cache element";
    summary += c.cache.rotate == CacheRotate::Hadamard ? "-hadamard" : "-none";
    if (c.cache.entry == CacheEntry::FP8)
      summary += c.cache.scale == CacheScale::Pow2 ? "-pow2" : "-absmax";
  }
  if (cpu && c.openmp)
    summary += " openmp";
  if (cpu && all)
    summary += " vector " + std::to_string(c.vectorSize);
  summary += " (kpool " KPOOL_VERSION_STRING ")";
  std::string key = summary + "\n";
  key += "kpool-kernel-object 1\n";
  key += "kpool " KPOOL_VERSION_STRING "\n";
  key += "compiler " KPOOL_COMPILER_ID "\n";
  key += "llvm " KPOOL_LLVM_VERSION "\n";
  key += "host " + cache::detail::hostCpu() + "\n";
  if (!cpu) {
    const std::string &tk = options.cudaToolkit;
    key += "cuda-toolkit " + (tk.empty() ? std::string("none") : tk);
    if (!tk.empty())
      key += " ptxas " + fileStamp(tk + "/bin/ptxas") + " libdevice " +
             fileStamp(tk + "/nvvm/libdevice/libdevice.10.bc");
    key += "\n";
  }
  return key;
}

Status kpool::loadKernelObject(const KernelConfig &config,
                               const KernelObject &object,
                               KernelBackend &backend) {
  bool cuda = config.target == Target::CUDA;
  void *runtime = nullptr;
  if (cuda) {
    std::string why;
    runtime = cudaRuntime(&why);
    if (!runtime)
      return Status::error("CUDA kernels: " + why);
  }
  void *openmp = nullptr;
  auto resolve = [&](const char *name) -> void * {
    if (runtime)
      if (void *p = dlsym(runtime, name))
        return p;
    if (void *p = dlsym(RTLD_DEFAULT, name))
      return p;
    // OpenMP kernels call libomp's runtime (__kmpc_*): open it once.
    if (!std::strncmp(name, "__kmpc_", 7) || !std::strncmp(name, "omp_", 4)) {
      if (!openmp)
        for (const char *lib : {KPOOL_LIBOMP_PATH, "libomp.so.5", "libomp.so"})
          if ((openmp = dlopen(lib, RTLD_NOW | RTLD_GLOBAL)))
            break;
      if (openmp)
        return dlsym(openmp, name);
    }
    return nullptr;
  };
  std::string error;
  std::unique_ptr<LoadedObject> loaded = LoadedObject::load(
      object.object.data(), object.object.size(), resolve, error);
  if (!loaded)
    return Status::error("loading the compiled kernels failed: " + error);
  KernelBackend out;
  for (auto &[kernel, symbol] : object.entries) {
    void *fn = loaded->symbol(symbol);
    if (!fn)
      return Status::error("the compiled kernels have no symbol '" + symbol +
                           "' (kernel " + kernel + ")");
    bool known = false;
    for (const abi::Kernel &k : abi::kernels)
      if (kernel == k.name) {
        out.setEntry(k.id, fn);
        known = true;
      }
    if (!known)
      return Status::error("the compiled kernels name an unknown kernel '" +
                           kernel + "'");
  }
  if (cuda) {
    out.deviceResident = true;
    out.prepare = cudaPrepare;
  }
  out.owner = std::shared_ptr<LoadedObject>(std::move(loaded));
  backend = std::move(out);
  return Status();
}

bool detail::compileKernels(const KernelConfig &config, KernelBackend &backend,
                            Status &status, std::string &why) {
  bool cuda = config.target == Target::CUDA;
  CompileOptions options;
  if (cuda)
    options.cudaToolkit = cudaToolkit();
  // Without the CUDA layer no CUDA kernel set can run: say so before
  // loading or compiling anything.
  auto noCudaLayer = [&] {
    std::string missing;
    if (!cuda || cudaRuntime(&missing))
      return false;
    status = Status::error("CUDA kernels: " + missing);
    return true;
  };
  std::string key = kernelCacheKey(config, options);
  std::string dir = cache::directory();
  KernelObject object;
  if (!dir.empty()) {
    std::string contents, problem;
    if (cache::detail::read(dir, key, contents, &problem)) {
      if (noCudaLayer())
        return true;
      if (deserialize(contents, object)) {
        status = loadKernelObject(config, object, backend);
        if (status.ok()) {
          ++hits;
          return true;
        }
        problem = cache::detail::entryPath(dir, key) + ": " + status.message();
      } else {
        problem = cache::detail::entryPath(dir, key) +
                  ": the contents are not a compiled kernel object";
      }
    }
    if (!problem.empty()) {
      ++rejected;
      noteProblem(problem);
    }
    ++misses;
  }
  ObjectCompiler compiler = compilerFor(config.target, why);
  if (!compiler)
    return false;
  if (noCudaLayer())
    return true;
  object = KernelObject();
  status = compiler(config, options, object);
  if (!status.ok())
    return true;
  ++compiled;
  if (!dir.empty()) {
    std::string problem;
    if (cache::detail::write(dir, key, serialize(object), &problem))
      ++stored;
    else
      noteProblem(problem);
  }
  status = loadKernelObject(config, object, backend);
  return true;
}

cache::Statistics cache::statistics() {
  Statistics s;
  s.hits = hits;
  s.misses = misses;
  s.compiled = compiled;
  s.stored = stored;
  s.rejected = rejected;
  std::lock_guard<std::mutex> lock(problemMutex);
  s.lastProblem = lastProblem();
  return s;
}
