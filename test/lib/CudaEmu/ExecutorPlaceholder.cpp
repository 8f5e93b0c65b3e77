//===- ExecutorPlaceholder.cpp - Executor.h without an executor -----------===//
//
// TEMPORARY. The emulated CUDA driver links this until the PTX executor
// (KPoolCudaEmuExecutor) is merged; delete this file then (CMakeLists.txt
// links the real executor as soon as this file is gone). It parses what the
// driver needs to marshal a launch -- each .entry's name, .param list and
// .maxntid -- and fails every launch with "PTX executor not built", so
// everything up to the first kernel launch runs through the real driver
// code.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Executor.h"

#include <cctype>
#include <sstream>

using namespace kpool::emu;

namespace {

class PlaceholderFunction final : public Function {
public:
  std::string entry;
  std::vector<Param> parameters;
  uint32_t maxThreads = 1024;
  const std::string &name() const override { return entry; }
  const std::vector<Param> &params() const override { return parameters; }
  uint32_t staticSharedBytes() const override { return 0; }
  uint32_t maxThreadsPerBlock() const override { return maxThreads; }
};

class PlaceholderModule final : public Module {
public:
  std::vector<std::unique_ptr<PlaceholderFunction>> functions;
  const Function *function(std::string_view name) const override {
    for (const auto &f : functions)
      if (f->entry == name)
        return f.get();
    return nullptr;
  }
  std::vector<std::string> functionNames() const override {
    std::vector<std::string> names;
    for (const auto &f : functions)
      names.push_back(f->entry);
    return names;
  }
};

/// One ".param <type-and-attributes> <name>[<n>]" of an entry.
bool parseParam(const std::string &decl, Param &p, uint32_t &offset) {
  std::istringstream in(decl);
  std::string token;
  uint32_t elementBytes = 0, align = 0, count = 1;
  bool pointer = false;
  while (in >> token) {
    if (token == ".param")
      continue;
    if (token == ".ptr") {
      pointer = true;
    } else if (token == ".align") {
      uint32_t a = 0;
      in >> a;
      if (!pointer)
        align = a; // after .ptr it is the pointee's alignment
    } else if (token.size() >= 3 && token[0] == '.' &&
               std::isdigit(static_cast<unsigned char>(token.back()))) {
      size_t digits = token.find_first_of("0123456789");
      elementBytes = uint32_t(std::stoul(token.substr(digits))) / 8;
    } else if (token[0] != '.') {
      size_t bracket = token.find('[');
      if (bracket != std::string::npos)
        count = uint32_t(std::stoul(token.substr(bracket + 1)));
    }
  }
  if (!elementBytes)
    return false;
  p.size = elementBytes * count;
  p.align = align ? align : elementBytes;
  offset = (offset + p.align - 1) / p.align * p.align;
  p.offset = offset;
  offset += p.size;
  return true;
}

} // namespace

Counters &Counters::operator+=(const Counters &o) {
  integer += o.integer;
  integer64 += o.integer64;
  floating += o.floating;
  special += o.special;
  memory += o.memory;
  control += o.control;
  sync += o.sync;
  warpInstructions += o.warpInstructions;
  activeLanes += o.activeLanes;
  globalLoadSectors += o.globalLoadSectors;
  globalStoreSectors += o.globalStoreSectors;
  globalLoadLines += o.globalLoadLines;
  globalStoreLines += o.globalStoreLines;
  globalLoadBytes += o.globalLoadBytes;
  globalStoreBytes += o.globalStoreBytes;
  threads += o.threads;
  return *this;
}

std::unique_ptr<Module> kpool::emu::loadModule(std::string_view ptx,
                                               std::string &error) {
  auto module = std::make_unique<PlaceholderModule>();
  std::string s(ptx);
  for (size_t c = s.find("//"); c != std::string::npos; c = s.find("//", c))
    for (; c < s.size() && s[c] != '\n'; ++c)
      s[c] = ' ';
  for (size_t at = s.find(".entry"); at != std::string::npos;
       at = s.find(".entry", at + 6)) {
    auto f = std::make_unique<PlaceholderFunction>();
    size_t i = at + 6;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    size_t begin = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) ||
                            s[i] == '_' || s[i] == '$'))
      ++i;
    f->entry = s.substr(begin, i - begin);
    size_t open = s.find_first_not_of(" \t\r\n", i);
    if (open != std::string::npos && s[open] == '(') {
      size_t close = s.find(')', open);
      if (close == std::string::npos) {
        error = "unterminated .param list of " + f->entry;
        return nullptr;
      }
      std::string list = s.substr(open + 1, close - open - 1);
      std::istringstream decls(list);
      std::string decl;
      uint32_t offset = 0;
      while (std::getline(decls, decl, ',')) {
        Param p;
        if (!parseParam(decl, p, offset)) {
          error = "cannot read parameter '" + decl + "' of " + f->entry;
          return nullptr;
        }
        f->parameters.push_back(p);
      }
      i = close;
    }
    size_t body = s.find('{', i);
    size_t maxntid = s.find(".maxntid", i);
    if (maxntid != std::string::npos && maxntid < body) {
      unsigned x = 1, y = 1, z = 1;
      std::sscanf(s.c_str() + maxntid + 8, "%u , %u , %u", &x, &y, &z);
      f->maxThreads = x * y * z;
    }
    if (f->entry.empty()) {
      error = ".entry without a name";
      return nullptr;
    }
    module->functions.push_back(std::move(f));
  }
  return module;
}

LaunchResult kpool::emu::launch(const Function &function, Dim3, Dim3, uint32_t,
                                void *const *, const MemoryMap &,
                                const Options &) {
  LaunchResult result;
  result.completed = false;
  result.findings.push_back(
      {Finding::Kind::Execution,
       "PTX executor not built: this build links the placeholder "
       "test/lib/CudaEmu/ExecutorPlaceholder.cpp, which runs no kernel (" +
           function.name() + " not run)"});
  return result;
}
