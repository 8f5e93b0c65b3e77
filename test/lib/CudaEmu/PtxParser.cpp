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

#include <algorithm>
#include <cctype>
#include <cstring>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

struct RawStatement {
  enum Kind { Stmt, Open, Close, Label } kind = Stmt;
  std::string text; // the statement, the header before `{`, the label
  uint32_t line = 0;
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

bool startsWith(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

bool lineTerminated(const std::string &pending) {
  std::string t = trim(pending);
  for (const char *d : {".version", ".target", ".address_size", ".file", ".loc"})
    if (startsWith(t, d))
      return true;
  return false;
}

/// Splits `text` into raw statements; false with `error` on an unbalanced
/// brace or unterminated comment or string.
bool scan(std::string_view text, std::vector<RawStatement> &out,
          std::string &error) {
  std::string pending;
  uint32_t line = 1, pendingLine = 0;
  int stmtBraces = 0; // braces that belong to the pending statement
  auto emit = [&](RawStatement::Kind kind) {
    RawStatement r;
    r.kind = kind;
    r.text = trim(pending);
    r.line = pendingLine ? pendingLine : line;
    out.push_back(std::move(r));
    pending.clear();
    pendingLine = 0;
  };
  auto blank = [&] { return trim(pending).empty(); };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      if (!blank() && stmtBraces == 0 && lineTerminated(pending))
        emit(RawStatement::Stmt);
      else
        pending += ' ';
      ++line;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) {
        error = "line " + std::to_string(line) + ": unterminated comment";
        return false;
      }
      line += std::count(text.begin() + i, text.begin() + end, '\n');
      i = end + 1;
      pending += ' ';
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c)) && !pendingLine)
      pendingLine = line;
    if (c == '"') {
      size_t end = text.find('"', i + 1);
      if (end == std::string_view::npos) {
        error = "line " + std::to_string(line) + ": unterminated string";
        return false;
      }
      pending.append(text.substr(i, end - i + 1));
      i = end;
      continue;
    }
    if (c == ';' && stmtBraces == 0) {
      emit(RawStatement::Stmt);
      continue;
    }
    if (c == '{') {
      std::string t = trim(pending);
      bool owned = stmtBraces > 0 ||
                   (!t.empty() && (t[0] != '.' || t.find('=') != std::string::npos));
      if (owned) {
        ++stmtBraces;
        pending += c;
        continue;
      }
      bool section = startsWith(t, ".section");
      emit(RawStatement::Open);
      if (section) {
        // Debug sections hold data lists, not statements: skip to the
        // matching brace.
        int depth = 1;
        while (depth > 0 && ++i < text.size()) {
          if (text[i] == '{')
            ++depth;
          else if (text[i] == '}')
            --depth;
          else if (text[i] == '\n')
            ++line;
        }
        if (depth > 0) {
          error = "unterminated .section";
          return false;
        }
        emit(RawStatement::Close);
      }
      continue;
    }
    if (c == '}') {
      if (stmtBraces > 0) {
        --stmtBraces;
        pending += c;
        continue;
      }
      if (!blank()) {
        error = "line " + std::to_string(pendingLine) +
                ": expected ';' after '" + trim(pending) + "'";
        return false;
      }
      emit(RawStatement::Close);
      continue;
    }
    if (c == ':' && stmtBraces == 0 &&
        (i + 1 >= text.size() || text[i + 1] != ':') &&
        (i == 0 || text[i - 1] != ':')) {
      std::string t = trim(pending);
      if (!t.empty() && std::all_of(t.begin(), t.end(), isIdentifierChar) &&
          t[0] != '.' && t[0] != '%') {
        emit(RawStatement::Label);
        continue;
      }
    }
    pending += c;
  }
  if (!blank()) {
    if (lineTerminated(pending)) {
      emit(RawStatement::Stmt);
    } else {
      error = "line " + std::to_string(pendingLine) +
              ": unterminated statement '" + trim(pending) + "'";
      return false;
    }
  }
  return true;
}

/// Splits a header or declaration into words and single-character
/// punctuation ( ( ) , [ ] < > = { } ).
std::vector<std::string> words(const std::string &text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty())
      out.push_back(cur);
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else if (std::strchr("(),[]<>={}", c)) {
      flush();
      out.push_back(std::string(1, c));
    } else if (c == '"') {
      flush();
      size_t end = text.find('"', i + 1);
      out.push_back(text.substr(i, end - i + 1));
      i = end == std::string::npos ? text.size() : end;
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

/// Bytes of a declared scalar type (.b8 ... .f64), 0 if not a type.
unsigned typeBytes(const std::string &t) {
  static const std::pair<const char *, unsigned> table[] = {
      {".b8", 1},  {".u8", 1},  {".s8", 1},  {".b16", 2}, {".u16", 2},
      {".s16", 2}, {".f16", 2}, {".bf16", 2}, {".b32", 4}, {".u32", 4},
      {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4},
      {".b64", 8}, {".u64", 8}, {".s64", 8}, {".f64", 8}, {".b128", 16},
      {".pred", 1}};
  for (auto &[name, bytes] : table)
    if (t == name)
      return bytes;
  return 0;
}

uint64_t alignUp(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

/// A variable or parameter declaration: `.space [.align N] [.vN] .type
/// name[dims] [= init]` (and `.ptr ...` attributes of parameters).
struct Declaration {
  std::string space; // ".global", ".shared", ...
  std::string type;
  std::string name;
  uint32_t align = 0;
  unsigned vec = 1;
  uint64_t count = 1; // elements (product of the dimensions)
  bool unsized = false;
  bool isExtern = false;
  std::vector<std::string> init; // flattened initializer literals
  uint64_t bytes() const { return uint64_t(typeBytes(type)) * vec * count; }
};

bool parseDeclaration(const std::vector<std::string> &w, size_t &i,
                      Declaration &d, std::string &error) {
  bool afterPtr = false;
  for (; i < w.size(); ++i) {
    const std::string &t = w[i];
    if (t == "," || t == ")" || t == "=")
      break;
    if (t == ".extern") {
      d.isExtern = true;
    } else if (t == ".visible" || t == ".weak" || t == ".common") {
    } else if (t == ".global" || t == ".shared" || t == ".const" ||
               t == ".local" || t == ".param" || t == ".reg") {
      if (afterPtr)
        continue; // `.ptr .global`: the pointee's space
      d.space = t;
    } else if (t == ".ptr") {
      afterPtr = true;
    } else if (t == ".align") {
      if (i + 1 >= w.size()) {
        error = "'.align' without a value";
        return false;
      }
      uint64_t a = 0;
      if (!parseInteger(w[++i], a) || a == 0 || (a & (a - 1))) {
        error = "bad alignment '" + w[i] + "'";
        return false;
      }
      if (!afterPtr)
        d.align = uint32_t(a);
    } else if (t == ".v2" || t == ".v4" || t == ".v8") {
      d.vec = unsigned(t[2] - '0');
    } else if (typeBytes(t)) {
      d.type = t;
    } else if (t == "[") {
      if (i + 1 < w.size() && w[i + 1] == "]") {
        d.unsized = true;
        d.count = 0;
        ++i;
        continue;
      }
      uint64_t n = 0;
      if (i + 2 >= w.size() || !parseInteger(w[i + 1], n) || w[i + 2] != "]") {
        error = "bad array dimension in '" + d.name + "'";
        return false;
      }
      d.count *= n;
      i += 2;
    } else if (t[0] != '.' && d.name.empty()) {
      d.name = t;
    } else if (t[0] == '.') {
      // Other attributes (.ptr's .global etc. handled above).
    } else {
      error = "unexpected '" + t + "' in a declaration";
      return false;
    }
  }
  if (i < w.size() && w[i] == "=") {
    for (++i; i < w.size(); ++i)
      if (w[i] != "{" && w[i] != "}" && w[i] != ",")
        d.init.push_back(w[i]);
  }
  if (d.name.empty() || d.type.empty()) {
    error = "a declaration needs a type and a name";
    return false;
  }
  if (!d.align)
    d.align = typeBytes(d.type) * d.vec;
  return true;
}

/// Writes a declaration's initializer into `storage`.
bool initialize(const Declaration &d, uint8_t *storage, std::string &error) {
  unsigned size = typeBytes(d.type);
  if (d.init.size() > d.count * d.vec) {
    error = "too many initializers for '" + d.name + "'";
    return false;
  }
  bool isFloat = d.type == ".f32" || d.type == ".f64";
  for (size_t k = 0; k < d.init.size(); ++k) {
    uint64_t v = 0;
    if (isFloat) {
      if (!parseFloat(d.init[k], d.type == ".f64", v)) {
        uint64_t iv;
        if (!parseInteger(d.init[k], iv)) {
          error = "bad initializer '" + d.init[k] + "'";
          return false;
        }
        parseFloat(std::to_string(int64_t(iv)), d.type == ".f64", v);
      }
    } else if (!parseInteger(d.init[k], v)) {
      error = "bad initializer '" + d.init[k] + "' (only numbers)";
      return false;
    }
    std::memcpy(storage + k * size, &v, size); // little-endian host
  }
  return true;
}

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
      return true;                                         // per function
    }
    moduleShared = uint32_t(alignUp(moduleShared, d.align));
    globals[d.name] = Symbol{Space::Shared, moduleShared, d.bytes()};
    moduleShared += uint32_t(d.bytes());
    moduleSharedAlign = std::max<uint32_t>(moduleSharedAlign, d.align);
    return true;
  }
  if (d.space != ".global" && d.space != ".const")
    return fail(r.line, "unsupported module-scope declaration '" + r.text + "'");
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
        return fail(header.line, "kernel parameter '" + d.name +
                                     "' is not a .param");
      Param p;
      p.size = uint32_t(d.bytes());
      p.align = d.align ? d.align : 1;
      p.offset = uint32_t(alignUp(fn->paramBytes, p.align));
      fn->paramBytes = p.offset + p.size;
      b.locals[d.name] = Symbol{Space::Param, p.offset, p.size};
      fn->params_.push_back(p);
    }
    ++i;
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
// FunctionBuilder.
//===----------------------------------------------------------------------===//

bool FunctionBuilder::declareRegisters(const std::string &spec, bool pred,
                                       unsigned width, std::string &error) {
  RegRange r;
  r.pred = pred;
  r.width = width;
  size_t lt = spec.find('<');
  if (lt != std::string::npos) {
    uint64_t n = 0;
    if (!parseInteger(spec.substr(lt + 1, spec.size() - lt - 2), n) ||
        n > (1u << 20)) {
      error = "bad register count in '" + spec + "'";
      return false;
    }
    r.count = uint32_t(n);
  } else {
    r.count = 1;
  }
  r.base = pred ? fn.numPreds : fn.numSlots;
  (pred ? fn.numPreds : fn.numSlots) += r.count;
  std::string name = lt == std::string::npos ? spec : spec.substr(0, lt);
  auto &table = lt == std::string::npos ? named.back() : ranges.back();
  if (!table.emplace(name, r).second) {
    error = "register '" + name + "' declared twice";
    return false;
  }
  fn.registerNames.push_back(
      {name, r.base, r.count, pred, lt != std::string::npos});
  return true;
}

bool FunctionBuilder::lookupRegister(const std::string &name, uint32_t &slot,
                                     unsigned &width) const {
  for (size_t s = named.size(); s-- > 0;) {
    auto it = named[s].find(name);
    if (it != named[s].end()) {
      slot = it->second.base | (it->second.pred ? kPredBit : 0);
      width = it->second.width;
      return true;
    }
  }
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1])))
    --digits;
  if (digits == name.size() || digits == 0)
    return false;
  std::string prefix = name.substr(0, digits);
  if (name.size() - digits > 9)
    return false;
  uint64_t index = 0;
  for (size_t k = digits; k < name.size(); ++k)
    index = index * 10 + uint64_t(name[k] - '0');
  for (size_t s = ranges.size(); s-- > 0;) {
    auto it = ranges[s].find(prefix);
    if (it != ranges[s].end() && index < it->second.count) {
      slot = (it->second.base + uint32_t(index)) |
             (it->second.pred ? kPredBit : 0);
      width = it->second.width;
      return true;
    }
  }
  return false;
}

uint32_t FunctionBuilder::constant(uint64_t value) {
  auto it = valueConstants.find(value);
  if (it != valueConstants.end())
    return it->second;
  uint32_t slot = fn.numSlots++;
  fn.constants.push_back(ConstSlot{ConstSlot::Value, slot, value});
  valueConstants[value] = slot;
  return slot;
}

uint32_t FunctionBuilder::predConstant(bool value) {
  uint32_t &slot = predConsts[value];
  if (slot == kNoSlot) {
    slot = fn.numPreds++;
    fn.predConstants.push_back({slot, value ? ~0u : 0u});
  }
  return slot | kPredBit;
}

uint32_t FunctionBuilder::special(ConstSlot::Kind kind) {
  auto it = specials.find(int(kind));
  if (it != specials.end())
    return it->second;
  uint32_t slot = fn.numSlots++;
  fn.constants.push_back(ConstSlot{kind, slot, 0});
  specials[int(kind)] = slot;
  return slot;
}

uint32_t FunctionBuilder::sinkSlot() {
  if (sink == kNoSlot)
    sink = fn.numSlots++;
  return sink;
}

uint32_t FunctionBuilder::sinkPred() {
  if (sinkP == kNoSlot)
    sinkP = fn.numPreds++;
  return sinkP | kPredBit;
}

const Symbol *FunctionBuilder::findSymbol(const std::string &name) const {
  auto it = locals.find(name);
  if (it != locals.end())
    return &it->second;
  auto g = globals.find(name);
  return g == globals.end() ? nullptr : &g->second;
}

bool FunctionBuilder::vectorElements(const std::string &text,
                                     std::vector<std::string> &out) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}')
    return false;
  out.clear();
  std::string cur;
  for (char c : text.substr(1, text.size() - 2)) {
    if (c == ',') {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return true;
}

bool FunctionBuilder::address(const std::string &text, AddressOperand &out,
                              std::string &error) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    error = "expected an address '[...]', got '" + text + "'";
    return false;
  }
  std::string inner = trim(text.substr(1, text.size() - 2));
  size_t split = std::string::npos;
  for (size_t k = 1; k < inner.size(); ++k)
    if (inner[k] == '+' || inner[k] == '-') {
      split = k;
      break;
    }
  std::string base = trim(inner.substr(0, split));
  if (split != std::string::npos) {
    std::string off = trim(inner.substr(split + (inner[split] == '+' ? 1 : 0)));
    uint64_t v = 0;
    if (!parseInteger(off, v)) {
      error = "bad address offset in '" + text + "'";
      return false;
    }
    out.offset += int64_t(v);
  }
  uint32_t slot;
  unsigned width;
  uint64_t v;
  if (lookupRegister(base, slot, width)) {
    if (slot & kPredBit) {
      error = "predicate '" + base + "' used as an address";
      return false;
    }
    out.reg = slot;
  } else if (const Symbol *s = findSymbol(base)) {
    out.hasSymbol = true;
    out.symbolSpace = s->space;
    if (s->address == ~0ull) {
      // Dynamic shared memory: its window starts after the static
      // variables, known once the body is parsed.
      out.reg = special(ConstSlot::DynamicSharedBase);
    } else {
      out.offset += int64_t(s->address);
    }
  } else if (parseInteger(base, v)) {
    out.offset += int64_t(v);
  } else {
    error = "unknown name '" + base + "' in address '" + text + "'";
    return false;
  }
  return true;
}

static const std::pair<const char *, ConstSlot::Kind> kSpecials[] = {
    {"%tid.x", ConstSlot::TidX},         {"%tid.y", ConstSlot::TidY},
    {"%tid.z", ConstSlot::TidZ},         {"%ntid.x", ConstSlot::NtidX},
    {"%ntid.y", ConstSlot::NtidY},       {"%ntid.z", ConstSlot::NtidZ},
    {"%ctaid.x", ConstSlot::CtaidX},     {"%ctaid.y", ConstSlot::CtaidY},
    {"%ctaid.z", ConstSlot::CtaidZ},     {"%nctaid.x", ConstSlot::NctaidX},
    {"%nctaid.y", ConstSlot::NctaidY},   {"%nctaid.z", ConstSlot::NctaidZ},
    {"%laneid", ConstSlot::LaneId},      {"%warpid", ConstSlot::WarpId},
    {"%nwarpid", ConstSlot::NWarpId},    {"%smid", ConstSlot::SmId},
    {"%nsmid", ConstSlot::NSmId},        {"%gridid", ConstSlot::GridId},
    {"%lanemask_eq", ConstSlot::LanemaskEq},
    {"%lanemask_le", ConstSlot::LanemaskLe},
    {"%lanemask_lt", ConstSlot::LanemaskLt},
    {"%lanemask_ge", ConstSlot::LanemaskGe},
    {"%lanemask_gt", ConstSlot::LanemaskGt},
    {"%dynamic_smem_size", ConstSlot::DynamicSmemSize},
    {"%total_smem_size", ConstSlot::TotalSmemSize},
};

uint32_t FunctionBuilder::source(const std::string &text, Ty type,
                                 bool expectPred, std::string &error) {
  if (text.empty()) {
    error = "missing operand";
    return kNoSlot;
  }
  if (text[0] == '%') {
    uint32_t slot;
    unsigned width;
    if (lookupRegister(text, slot, width)) {
      if (bool(slot & kPredBit) != expectPred) {
        error = "operand '" + text + "' is " +
                (expectPred ? "not a predicate" : "a predicate") +
                " where " + (expectPred ? "one" : "a value") + " is expected";
        return kNoSlot;
      }
      return slot;
    }
    for (auto &[name, kind] : kSpecials)
      if (text == name) {
        if (expectPred)
          break;
        return special(kind);
      }
    error = "unknown register '" + text + "'";
    return kNoSlot;
  }
  uint64_t v;
  if (expectPred) {
    if (parseInteger(text, v))
      return predConstant(v != 0);
    error = "expected a predicate, got '" + text + "'";
    return kNoSlot;
  }
  if (isFloat(type) && (type == Ty::F32 || type == Ty::F64)) {
    uint64_t bits;
    if (parseFloat(text, type == Ty::F64, bits))
      return constant(bits);
  }
  if (parseInteger(text, v)) {
    unsigned bits = bitsOf(type);
    if (type == Ty::F32 || type == Ty::F64) {
      uint64_t fbits;
      parseFloat(std::to_string(int64_t(v)), type == Ty::F64, fbits);
      return constant(fbits);
    }
    if (bits && bits < 64)
      v &= (uint64_t(1) << bits) - 1;
    return constant(v);
  }
  if (parseFloat(text, bitsOf(type) == 64, v))
    return constant(v);
  if (const Symbol *s = findSymbol(text))
    return s->address == ~0ull ? special(ConstSlot::DynamicSharedBase)
                               : constant(s->address);
  error = "unknown operand '" + text + "'";
  return kNoSlot;
}

uint32_t FunctionBuilder::dest(const std::string &text, bool expectPred,
                               std::string &error, unsigned *width) {
  if (text == "_") {
    if (width)
      *width = 64;
    return expectPred ? sinkPred() : sinkSlot();
  }
  uint32_t slot;
  unsigned w;
  if (!lookupRegister(text, slot, w)) {
    error = "unknown destination register '" + text + "'";
    return kNoSlot;
  }
  if (bool(slot & kPredBit) != expectPred) {
    error = "destination '" + text + "' is " +
            (expectPred ? "not a predicate" : "a predicate");
    return kNoSlot;
  }
  if (width)
    *width = w;
  return slot;
}

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
