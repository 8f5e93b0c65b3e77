//===- PtxScanner.h - PTX text to statements and declarations --*- C++ -*-===//
//
// Internal to the parser: splits PTX text into statements, labels and
// braces (comments and debug sections dropped), words of a header or
// declaration, and parses variable and parameter declarations.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXSCANNER_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXSCANNER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::emu::ptx {

struct RawStatement {
  enum Kind { Stmt, Open, Close, Label } kind = Stmt;
  std::string text; // the statement, the header before `{`, the label
  uint32_t line = 0;
};

std::string trim(std::string_view s);
bool startsWith(const std::string &s, const char *prefix);

/// Splits `text` into raw statements (`;`-terminated, or line-terminated
/// for .version/.target/.address_size/.file/.loc), labels and braces; false
/// with `error` on an unbalanced brace or an unterminated comment or string.
bool scan(std::string_view text, std::vector<RawStatement> &out,
          std::string &error);

/// Splits a header or declaration into words and single-character
/// punctuation ( ( ) , [ ] < > = { } ).
std::vector<std::string> words(const std::string &text);

/// Bytes of a declared scalar type (.b8 ... .f64, .pred), 0 if none.
unsigned typeBytes(const std::string &t);

uint64_t alignUp(uint64_t v, uint64_t a);

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
  bool pointer = false; // a parameter with `.ptr` (a pointer MLIR passed)
  std::vector<std::string> init; // flattened initializer literals
  uint64_t bytes() const { return uint64_t(typeBytes(type)) * vec * count; }
};

/// Parses a declaration from words[i...] up to ',' or ')' (or the end).
bool parseDeclaration(const std::vector<std::string> &w, size_t &i,
                      Declaration &d, std::string &error);

/// Writes a declaration's initializer into `storage`.
bool initialize(const Declaration &d, uint8_t *storage, std::string &error);

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXSCANNER_H
