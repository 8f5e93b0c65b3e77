//===- PtxScanner.cpp - PTX text to raw statements and declarations -------===//

#include "PtxScanner.h"
#include "PtxDecoder.h"

#include <algorithm>
#include <cctype>
#include <cstring>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

std::string kpool::emu::ptx::trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

bool kpool::emu::ptx::startsWith(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

static bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

static bool lineTerminated(const std::string &pending) {
  std::string t = trim(pending);
  for (const char *d :
       {".version", ".target", ".address_size", ".file", ".loc"})
    if (startsWith(t, d))
      return true;
  return false;
}

/// Splits `text` into raw statements; false with `error` on an unbalanced
/// brace or unterminated comment or string.
bool kpool::emu::ptx::scan(std::string_view text,
                           std::vector<RawStatement> &out, std::string &error) {
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
      bool owned =
          stmtBraces > 0 ||
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
std::vector<std::string> kpool::emu::ptx::words(const std::string &text) {
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
unsigned kpool::emu::ptx::typeBytes(const std::string &t) {
  static const std::pair<const char *, unsigned> table[] = {
      {".b8", 1},  {".u8", 1},  {".s8", 1},    {".b16", 2},    {".u16", 2},
      {".s16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".u32", 4},
      {".s32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
      {".u64", 8}, {".s64", 8}, {".f64", 8},   {".b128", 16},  {".pred", 1}};
  for (auto &[name, bytes] : table)
    if (t == name)
      return bytes;
  return 0;
}

uint64_t kpool::emu::ptx::alignUp(uint64_t v, uint64_t a) {
  return a ? (v + a - 1) / a * a : v;
}

bool kpool::emu::ptx::parseDeclaration(const std::vector<std::string> &w,
                                       size_t &i, Declaration &d,
                                       std::string &error) {
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
      d.pointer = true;
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
bool kpool::emu::ptx::initialize(const Declaration &d, uint8_t *storage,
                                 std::string &error) {
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
