//===- Modules.cpp - the emulated CUDA driver: modules and functions ------===//
//
// cuModuleLoadData(Ex) reduces the image to PTX (Fatbin.h), names the module
// after its first .entry (unique per module for kpool's kernels, whose
// names carry the configuration), applies KPOOL_PTX_OVERRIDE and
// KPOOL_PTX_DUMP, and hands the PTX to the executor's parser.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"
#include "CudaEmu/Fatbin.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace kpool::emu::driver;

namespace {

constexpr int kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxSharedOptIn = 232448;

/// The PTX with comments blanked out (same length), for scanning.
std::string withoutComments(std::string_view ptx) {
  std::string s(ptx);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        ;
    } else if (s[i] == '/' && s[i + 1] == '/') {
      for (; i < s.size() && s[i] != '\n'; ++i)
        s[i] = ' ';
    } else if (s[i] == '/' && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string::npos ? s.size() : end + 2;
      for (; i < end; ++i)
        if (s[i] != '\n')
          s[i] = ' ';
      --i;
    }
  }
  return s;
}

bool identifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%';
}

/// The module's name: its first .entry, else "module_<hash of the PTX>".
std::string moduleName(std::string_view ptx) {
  std::string s = withoutComments(ptx);
  for (size_t at = s.find(".entry"); at != std::string::npos;
       at = s.find(".entry", at + 6)) {
    size_t i = at + 6;
    if (i < s.size() && identifierChar(s[i]))
      continue; // e.g. ".entryfoo"
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    size_t begin = i;
    while (i < s.size() && identifierChar(s[i]))
      ++i;
    if (i > begin)
      return s.substr(begin, i - begin);
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : ptx)
    h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "module_%016llx", (unsigned long long)h);
  return buf;
}

/// ".version 8.0" -> 80 (0 when absent).
int ptxVersion(std::string_view ptx) {
  std::string s = withoutComments(ptx);
  size_t at = s.find(".version");
  int major = 0, minor = 0;
  if (at == std::string::npos ||
      std::sscanf(s.c_str() + at + 8, "%d.%d", &major, &minor) != 2)
    return 0;
  return major * 10 + minor;
}

bool readFile(const std::string &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream all;
  all << in.rdbuf();
  text = all.str();
  return bool(in) || in.eof();
}

/// Creates `dir` and its parents; false with errno set on failure.
bool makeDirectories(const std::string &dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string prefix = dir.substr(0, i);
      if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
        return false;
    }
  return true;
}

CUresult load(const Entry &e, CUmodule *handle, const void *image,
              std::string &log) {
  if (!handle)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "module is NULL");
  Driver &d = state();
  std::string ptx, error;
  if (CUresult r = ptxOfImage(image, ptx, error)) {
    log = error;
    return e.fail(r, error);
  }
  std::string name = moduleName(ptx);
  // KPOOL_PTX_OVERRIDE: <dir>/<name>.ptx replaces the embedded PTX.
  std::string overridden, embedded;
  if (!d.settings.overrideDir.empty()) {
    std::string path = d.settings.overrideDir + "/" + name + ".ptx";
    std::string text;
    if (readFile(path, text)) {
      say("module " + name + ": loading " + path + " (KPOOL_PTX_OVERRIDE)");
      overridden = path;
      embedded = std::move(ptx);
      ptx = std::move(text);
    }
  }
  // KPOOL_PTX_DUMP: <dir>/<name>.ptx gets the embedded PTX (never over the
  // override being loaded).
  if (!d.settings.dumpDir.empty()) {
    std::string path = d.settings.dumpDir + "/" + name + ".ptx";
    if (path != overridden) {
      std::ofstream out;
      if (makeDirectories(d.settings.dumpDir))
        out.open(path, std::ios::binary | std::ios::trunc);
      if (out)
        out << (overridden.empty() ? ptx : embedded);
      if (!out)
        say("KPOOL_PTX_DUMP: cannot write " + path + ": " +
            std::strerror(errno));
    }
  }
  std::string parseError;
  std::unique_ptr<kpool::emu::Module> parsed =
      kpool::emu::loadModule(ptx, parseError);
  if (!parsed) {
    log = "module " + name +
          (overridden.empty() ? "" : " (" + overridden + ")") + ": " +
          parseError;
    return e.fail(CUDA_ERROR_INVALID_PTX, log);
  }
  auto module = std::make_shared<Module>();
  module->name = name;
  module->ptxVersion = ptxVersion(ptx);
  module->parsed = std::move(parsed);
  for (const std::string &fn : module->parsed->functionNames()) {
    auto f = std::make_unique<CUfunc_st>();
    f->module = module.get();
    f->function = module->parsed->function(fn);
    if (!f->function)
      continue;
    f->maxDynamicShared = std::max(
        0, kDefaultDynamicShared - int(f->function->staticSharedBytes()));
    d.functions[f.get()] = f.get();
    module->functions[fn] = std::move(f);
  }
  *handle = reinterpret_cast<CUmodule>(module.get());
  d.modules[module.get()] = std::move(module);
  ++d.moduleLoads;
  ++d.loadsByModule[name];
  return CUDA_SUCCESS;
}

constexpr unsigned kLoading = Entry::Context | Entry::NotUnderCapture;

} // namespace

extern "C" {

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  Entry e("cuModuleLoadData", kLoading);
  if (e.failed())
    return e.status();
  std::string log;
  return load(e, module, image, log);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions,
                                    CUjit_option *options,
                                    void **optionValues) {
  Entry e("cuModuleLoadDataEx", kLoading);
  if (e.failed())
    return e.status();
  if (numOptions && (!options || !optionValues))
    return e.fail(CUDA_ERROR_INVALID_VALUE, "options or optionValues is NULL");
  char *errorLog = nullptr, *infoLog = nullptr;
  size_t errorSize = 0, infoSize = 0;
  int errorSizeAt = -1, infoSizeAt = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    switch (options[i]) {
    case CU_JIT_ERROR_LOG_BUFFER:
      errorLog = static_cast<char *>(optionValues[i]);
      break;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
      errorSize = reinterpret_cast<uintptr_t>(optionValues[i]);
      errorSizeAt = int(i);
      break;
    case CU_JIT_INFO_LOG_BUFFER:
      infoLog = static_cast<char *>(optionValues[i]);
      break;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
      infoSize = reinterpret_cast<uintptr_t>(optionValues[i]);
      infoSizeAt = int(i);
      break;
    default:
      // Optimization level, target, caches, ...: nothing to do when the
      // PTX itself is executed.
      break;
    }
  }
  std::string log;
  CUresult r = load(e, module, image, log);
  auto put = [&](char *buffer, size_t size, int at, const std::string &text) {
    if (!buffer || !size)
      return;
    size_t n = std::min(size - 1, text.size());
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
    if (at >= 0)
      optionValues[at] = reinterpret_cast<void *>(uintptr_t(n));
  };
  put(errorLog, errorSize, errorSizeAt, r ? log : std::string());
  put(infoLog, infoSize, infoSizeAt, std::string());
  return r;
}

CUresult CUDAAPI cuModuleUnload(CUmodule handle) {
  Entry e("cuModuleUnload", Entry::Healthy | Entry::NotUnderCapture);
  if (e.failed())
    return e.status();
  Driver &d = state();
  auto it = d.modules.find(handle);
  if (it == d.modules.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a module");
  // Launches enqueued or captured keep the module alive; its handles go.
  for (auto &[name, f] : it->second->functions)
    d.functions.erase(f.get());
  d.modules.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *function, CUmodule handle,
                                     const char *name) {
  Entry e("cuModuleGetFunction", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!function || !name)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "hfunc or name is NULL");
  auto it = state().modules.find(handle);
  if (it == state().modules.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a module");
  Module &m = *it->second;
  auto f = m.functions.find(std::string_view(name));
  if (f == m.functions.end())
    return e.fail(CUDA_ERROR_NOT_FOUND,
                  "module " + m.name + " has no kernel '" + name + "'");
  *function = f->second.get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int *value, CUfunction_attribute attribute,
                                    CUfunction function) {
  Entry e("cuFuncGetAttribute", Entry::Healthy);
  if (e.failed())
    return e.status();
  if (!value)
    return e.fail(CUDA_ERROR_INVALID_VALUE, "pi is NULL");
  auto it = state().functions.find(function);
  if (it == state().functions.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a function");
  const CUfunc_st &f = *it->second;
  switch (attribute) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *value = int(std::min<uint32_t>(1024, f.function->maxThreadsPerBlock()));
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    *value = int(f.function->staticSharedBytes());
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    *value = f.module->ptxVersion;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
    *value = 90;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    *value = f.maxDynamicShared;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    *value = f.preferredCarveout;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_NUM_REGS: // known to ptxas only
  case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
    *value = 0;
    return CUDA_SUCCESS;
  default:
    if (int(attribute) < 0 || attribute >= CU_FUNC_ATTRIBUTE_MAX)
      return e.fail(CUDA_ERROR_INVALID_VALUE, "not a function attribute");
    *value = 0;
    return CUDA_SUCCESS;
  }
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction function,
                                    CUfunction_attribute attribute, int value) {
  Entry e("cuFuncSetAttribute", Entry::Healthy);
  if (e.failed())
    return e.status();
  auto it = state().functions.find(function);
  if (it == state().functions.end())
    return e.fail(CUDA_ERROR_INVALID_HANDLE, "not a function");
  auto &f = const_cast<CUfunc_st &>(*it->second);
  switch (attribute) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: {
    int most = kMaxSharedOptIn - int(f.function->staticSharedBytes());
    if (value < 0 || value > most)
      return e.fail(CUDA_ERROR_INVALID_VALUE,
                    "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = " +
                        std::to_string(value) + " of " + f.function->name() +
                        ": outside [0, " + std::to_string(most) + "]");
    f.maxDynamicShared = value;
    return CUDA_SUCCESS;
  }
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    if (value < -1 || value > 100)
      return e.fail(CUDA_ERROR_INVALID_VALUE,
                    "carveout " + std::to_string(value) + " outside [-1, 100]");
    f.preferredCarveout = value;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    return CUDA_SUCCESS; // scheduling hints: nothing to emulate
  default:
    return e.fail(CUDA_ERROR_INVALID_VALUE, "attribute " +
                                                std::to_string(int(attribute)) +
                                                " cannot be set");
  }
}

} // extern "C"
