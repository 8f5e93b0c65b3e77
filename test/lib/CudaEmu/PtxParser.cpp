//===- PtxParser.cpp - PTX text to modules, functions and statements ------===//
//
// A scanner splits the text into statements (`;`-terminated, or
// line-terminated for .version/.target/.address_size/.file/.loc), labels and
// braces, dropping comments; the module level handles directives, variables
// and function headers, and each .entry body is declared (.reg, .local,
// .shared, .param) and decoded instruction by instruction (PtxDecoder.cpp).
// .func bodies are skipped: `call` is not supported (kpool's kernels and
// nvcc's PTX for the hand-written kernel have none).
//
//===----------------------------------------------------------------------===//

#include "PtxDecoder.h"
#include "PtxScanner.h"

#include <algorithm>
#include <cctype>
#include <cstring>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

struct Parser {
  std::unique_ptr<ModuleImpl> module = std::make_unique<ModuleImpl>();
  std::map<std::string, Symbol> globals;
  std::vector<RawStatement> raw;
  size_t pos = 0;
  uint32_t moduleShared = 0, moduleSharedAlign = 16;
  std::string error;

  bool fail(uint32_t line, const std::string &what) {
    error = "line " + std::to_string(line) + ": " + what;
    return false;
  }

  bool moduleVariable(const RawStatement &r);
  bool function(const RawStatement &header);
  bool body(FunctionBuilder &b, uint32_t headerLine);
  bool bodyDeclaration(FunctionBuilder &b, const RawStatement &r);
  bool skipBlock();
  bool run(std::string_view text);
};

bool Parser::skipBlock() {
  int depth = 1;
  while (pos < raw.size() && depth > 0) {
    const RawStatement &r = raw[pos++];
    if (r.kind == RawStatement::Open)
      ++depth;
    else if (r.kind == RawStatement::Close)
      --depth;
  }
  return depth == 0;
}

bool Parser::moduleVariable(const RawStatement &r) {
  std::vector<std::string> w = words(r.text);
  size_t i = 0;
  Declaration d;
  if (!parseDeclaration(w, i, d, error))
    return fail(r.line, error);
  if (d.space == ".shared") {
    if (d.isExtern || d.unsized) {
      moduleSharedAlign = std::max<uint32_t>(moduleSharedAlign, d.align);
      globals[d.name] = Symbol{Space::Shared, ~0ull, 0}; // dynamic: resolved
      return true;                                       // per function
    }
    moduleShared = uint32_t(alignUp(moduleShared, d.align));
    globals[d.name] = Symbol{Space::Shared, moduleShared, d.bytes()};
    moduleShared += uint32_t(d.bytes());
    moduleSharedAlign = std::max<uint32_t>(moduleSharedAlign, d.align);
    return true;
  }
  if (d.space != ".global" && d.space != ".const")
    return fail(r.line,
                "unsupported module-scope declaration '" + r.text + "'");
  if (d.isExtern)
    return fail(r.line, "external variable '" + d.name + "' is not supported");
  auto v = std::make_unique<ModuleVariable>();
  v->name = d.name;
  v->space = d.space == ".const" ? Space::Const : Space::Global;
  v->bytes = d.bytes();
  v->align = d.align;
  v->storage.reset(new uint8_t[v->bytes + v->align]());
  uint64_t base = reinterpret_cast<uint64_t>(v->storage.get());
  v->address = alignUp(base, v->align);
  if (!initialize(d, reinterpret_cast<uint8_t *>(v->address), error))
    return fail(r.line, error);
  globals[d.name] = Symbol{v->space, v->address, v->bytes};
  module->variables.push_back(std::move(v));
  return true;
}

bool Parser::bodyDeclaration(FunctionBuilder &b, const RawStatement &r) {
  const std::string &t = r.text;
  if (startsWith(t, ".reg")) {
    // .reg .type %a<N>, %b;  (names may carry <N>)
    std::vector<std::string> w = words(t);
    std::string type;
    bool isPred = false;
    unsigned width = 0;
    size_t i = 1;
    for (; i < w.size() && w[i][0] == '.'; ++i) {
      if (w[i] == ".pred")
        isPred = true, width = 1;
      else if (typeBytes(w[i]))
        width = typeBytes(w[i]) * 8;
      else if (w[i] == ".v2" || w[i] == ".v4")
        return fail(r.line, "vector registers are not supported");
    }
    if (!width)
      return fail(r.line, "'.reg' without a type");
    for (; i < w.size(); ++i) {
      if (w[i] == ",")
        continue;
      std::string spec = w[i];
      if (i + 3 < w.size() + 1 && i + 1 < w.size() && w[i + 1] == "<") {
        if (i + 3 >= w.size() || w[i + 3] != ">")
          return fail(r.line, "bad register range in '" + t + "'");
        spec += "<" + w[i + 2] + ">";
        i += 3;
      }
      if (!b.declareRegisters(spec, isPred, width, error))
        return fail(r.line, error);
    }
    return true;
  }
  if (startsWith(t, ".local") || startsWith(t, ".shared") ||
      startsWith(t, ".param")) {
    std::vector<std::string> w = words(t);
    size_t i = 0;
    Declaration d;
    if (!parseDeclaration(w, i, d, error))
      return fail(r.line, error);
    FunctionImpl &fn = b.fn;
    if (d.space == ".local") {
      fn.localBytes = uint32_t(alignUp(fn.localBytes, d.align));
      b.locals[d.name] = Symbol{Space::Local, fn.localBytes, d.bytes()};
      fn.localBytes += uint32_t(d.bytes());
    } else if (d.space == ".shared") {
      if (d.isExtern || d.unsized) {
        fn.dynamicSharedOffset =
            uint32_t(alignUp(fn.dynamicSharedOffset, d.align));
        b.locals[d.name] = Symbol{Space::Shared, ~0ull, 0};
      } else {
        fn.staticShared = uint32_t(alignUp(fn.staticShared, d.align));
        b.locals[d.name] = Symbol{Space::Shared, fn.staticShared, d.bytes()};
        fn.staticShared += uint32_t(d.bytes());
      }
    } else {
      return fail(r.line, "'.param' in a kernel body (calls) is not supported");
    }
    return true;
  }
  if (startsWith(t, ".pragma") || startsWith(t, ".loc") ||
      startsWith(t, ".file") || startsWith(t, ".maxnreg"))
    return true;
  return fail(r.line, "unsupported directive '" + t + "' in a function body");
}

bool Parser::body(FunctionBuilder &b, uint32_t headerLine) {
  FunctionImpl &fn = b.fn;
  int depth = 1;
  while (pos < raw.size()) {
    const RawStatement &r = raw[pos++];
    switch (r.kind) {
    case RawStatement::Open:
      if (!r.text.empty())
        return fail(r.line, "unexpected '" + r.text + " {' in a function body");
      ++depth;
      b.ranges.emplace_back();
      b.named.emplace_back();
      continue;
    case RawStatement::Close:
      if (--depth == 0)
        goto done;
      b.ranges.pop_back();
      b.named.pop_back();
      continue;
    case RawStatement::Label:
      if (!b.labels.emplace(r.text, uint32_t(fn.code.size())).second)
        return fail(r.line, "label '" + r.text + "' defined twice");
      continue;
    case RawStatement::Stmt:
      break;
    }
    if (r.text.empty())
      continue;
    if (r.text[0] == '.') {
      if (!bodyDeclaration(b, r))
        return false;
      continue;
    }
    Statement s;
    s.line = r.line;
    std::string t = r.text;
    size_t k = 0;
    if (t[0] == '@') {
      k = 1;
      if (k < t.size() && t[k] == '!') {
        s.guardNeg = true;
        ++k;
      }
      size_t e = k;
      while (e < t.size() && !std::isspace(static_cast<unsigned char>(t[e])))
        ++e;
      s.guard = t.substr(k, e - k);
      k = e;
      while (k < t.size() && std::isspace(static_cast<unsigned char>(t[k])))
        ++k;
    }
    size_t e = k;
    while (e < t.size() && !std::isspace(static_cast<unsigned char>(t[e])))
      ++e;
    s.opcode = t.substr(k, e - k);
    std::string rest = t.substr(e);
    int nest = 0;
    std::string cur;
    for (char c : rest) {
      if (c == '[' || c == '{' || c == '(')
        ++nest;
      else if (c == ']' || c == '}' || c == ')')
        --nest;
      if (c == ',' && nest == 0) {
        s.operands.push_back(trim(cur));
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!trim(cur).empty())
      s.operands.push_back(trim(cur));
    std::string why;
    if (!decodeInstruction(b, s, why))
      return fail(r.line, why);
  }
  return fail(headerLine, "function '" + fn.name_ + "' has no closing '}'");
done:
  for (auto &[index, label, line] : b.fixups) {
    auto it = b.labels.find(label);
    if (it == b.labels.end())
      return fail(line, "branch to undefined label '" + label + "'");
    fn.code[index].target = it->second;
  }
  // A body that falls off its end exits (ret is implicit there).
  Inst exit;
  exit.kind = Kind::Exit;
  exit.cls = OpClass::Control;
  exit.line = fn.code.empty() ? headerLine : fn.code.back().line;
  fn.code.push_back(exit);
  return true;
}

bool Parser::function(const RawStatement &header) {
  std::vector<std::string> w = words(header.text);
  size_t i = 0;
  bool isEntry = false, isFunc = false;
  for (; i < w.size(); ++i) {
    if (w[i] == ".entry") {
      isEntry = true;
      ++i;
      break;
    }
    if (w[i] == ".func") {
      isFunc = true;
      ++i;
      break;
    }
    if (w[i] != ".visible" && w[i] != ".weak" && w[i] != ".extern")
      break;
  }
  if (isFunc)
    return skipBlock() || fail(header.line, "unbalanced braces in a .func");
  if (!isEntry || i >= w.size())
    return fail(header.line, "unsupported block '" + header.text + "'");
  auto fn = std::make_unique<FunctionImpl>();
  fn->name_ = w[i++];
  fn->module = module.get();
  FunctionBuilder b(*fn, globals);
  // Per parameter: 1 a .u64 with .ptr, 2 a .u64 without, 0 anything else.
  std::vector<uint8_t> shapes;
  if (i < w.size() && w[i] == "(") {
    ++i;
    while (i < w.size() && w[i] != ")") {
      if (w[i] == ",") {
        ++i;
        continue;
      }
      Declaration d;
      if (!parseDeclaration(w, i, d, error))
        return fail(header.line, error);
      if (d.space != ".param")
        return fail(header.line,
                    "kernel parameter '" + d.name + "' is not a .param");
      Param p;
      p.size = uint32_t(d.bytes());
      p.align = d.align ? d.align : 1;
      p.offset = uint32_t(alignUp(fn->paramBytes, p.align));
      fn->paramBytes = p.offset + p.size;
      b.locals[d.name] = Symbol{Space::Param, p.offset, p.size};
      fn->params_.push_back(p);
      bool u64 = d.vec == 1 && d.count == 1 && d.bytes() == 8 &&
                 (d.type == ".u64" || d.type == ".b64" || d.type == ".s64");
      shapes.push_back(u64 ? (d.pointer ? 1 : 2) : 0);
    }
    ++i;
  }
  for (size_t k = 0; k + 1 < shapes.size(); ++k) {
    if (shapes[k] != 1 || shapes[k + 1] != 1)
      continue;
    size_t e = k + 2;
    while (e < shapes.size() && shapes[e] == 2)
      ++e;
    if (e > k + 2)
      fn->descriptors.push_back({uint32_t(k), uint32_t(e - k - 2)});
  }
  uint32_t ntid[3] = {0, 0, 0};
  for (; i < w.size(); ++i) {
    const std::string &t = w[i];
    if (t == ".maxntid" || t == ".reqntid") {
      uint32_t dims[3] = {1, 1, 1};
      int n = 0;
      for (++i; i < w.size() && n < 3; ++i) {
        uint64_t v;
        if (w[i] == ",")
          continue;
        if (!parseInteger(w[i], v))
          break;
        dims[n++] = uint32_t(v);
      }
      --i;
      uint32_t product = dims[0] * dims[1] * dims[2];
      fn->maxThreads = std::min(fn->maxThreads, product);
      if (t == ".reqntid")
        std::copy(dims, dims + 3, fn->reqntid);
      std::copy(dims, dims + 3, ntid);
    } else if (t == ".minnctapersm" || t == ".maxnreg" ||
               t == ".maxclusterrank" || t == ".reqnctapercluster" ||
               t == ".pragma" || t == ".noreturn" || t == ".explicitcluster") {
      // Performance hints: no effect on what a kernel computes.
    } else if (t == "," || t[0] == '"' ||
               std::isdigit(static_cast<unsigned char>(t[0]))) {
    } else {
      return fail(header.line, "unsupported kernel attribute '" + t + "'");
    }
  }
  (void)ntid;
  fn->staticShared = moduleShared;
  if (!body(b, header.line))
    return false;
  fn->dynamicSharedOffset = uint32_t(alignUp(
      std::max(fn->staticShared, fn->dynamicSharedOffset), moduleSharedAlign));
  module->functions.push_back(std::move(fn));
  return true;
}

bool Parser::run(std::string_view text) {
  if (!scan(text, raw, error))
    return false;
  bool sawVersion = false;
  while (pos < raw.size()) {
    const RawStatement &r = raw[pos++];
    if (r.kind == RawStatement::Close)
      return fail(r.line, "unmatched '}'");
    if (r.kind == RawStatement::Label)
      return fail(r.line, "label '" + r.text + "' outside a function");
    if (r.kind == RawStatement::Open) {
      if (startsWith(r.text, ".section")) {
        if (!skipBlock())
          return fail(r.line, "unbalanced braces in a .section");
        continue;
      }
      if (!function(r))
        return false;
      continue;
    }
    const std::string &t = r.text;
    if (t.empty())
      continue;
    if (startsWith(t, ".version")) {
      sawVersion = true;
      continue;
    }
    if (startsWith(t, ".address_size")) {
      if (trim(t.substr(13)) != "64")
        return fail(r.line, "only '.address_size 64' is supported");
      continue;
    }
    if (startsWith(t, ".target") || startsWith(t, ".file") ||
        startsWith(t, ".loc") || startsWith(t, ".pragma"))
      continue;
    std::vector<std::string> w = words(t);
    bool isPrototype = std::find(w.begin(), w.end(), ".entry") != w.end() ||
                       std::find(w.begin(), w.end(), ".func") != w.end();
    if (isPrototype)
      continue; // a declaration without a body
    if (!moduleVariable(r))
      return false;
  }
  if (!sawVersion)
    return fail(1, "no '.version' directive: not PTX text");
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Modules.
//===----------------------------------------------------------------------===//

const Function *ModuleImpl::function(std::string_view name) const {
  for (const auto &f : functions)
    if (f->name_ == name)
      return f.get();
  return nullptr;
}

std::vector<std::string> ModuleImpl::functionNames() const {
  std::vector<std::string> names;
  for (const auto &f : functions)
    names.push_back(f->name_);
  return names;
}

const ModuleVariable *ModuleImpl::variableAt(uint64_t address,
                                             uint64_t bytes) const {
  for (const auto &v : variables)
    if (address >= v->address && address + bytes <= v->address + v->bytes &&
        address + bytes >= address)
      return v.get();
  return nullptr;
}

std::unique_ptr<ModuleImpl> kpool::emu::ptx::parseModule(std::string_view ptx,
                                                         std::string &error) {
  Parser p;
  if (!p.run(ptx)) {
    error = p.error;
    return nullptr;
  }
  size_t begin = 0;
  while (begin <= ptx.size()) {
    size_t end = ptx.find('\n', begin);
    if (end == std::string_view::npos)
      end = ptx.size();
    p.module->lines.emplace_back(ptx.substr(begin, end - begin));
    begin = end + 1;
  }
  return std::move(p.module);
}

std::unique_ptr<Module> kpool::emu::loadModule(std::string_view ptx,
                                               std::string &error) {
  return ptx::parseModule(ptx, error);
}

std::string FunctionImpl::registerName(uint32_t slot) const {
  bool pred = slot & kPredBit;
  uint32_t index = slot & ~kPredBit;
  for (const RegisterName &r : registerNames)
    if (r.pred == pred && index >= r.base && index < r.base + r.count)
      return r.ranged ? r.name + std::to_string(index - r.base) : r.name;
  return "a constant";
}
