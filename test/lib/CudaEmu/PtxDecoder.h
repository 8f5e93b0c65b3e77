//===- PtxDecoder.h - PTX statements to predecoded instructions -*- C++ -*-===//
//
// Internal: the parser (PtxParser.cpp, with PtxScanner.cpp) splits the text
// into statements and keeps a function's declarations in a FunctionBuilder
// (PtxOperands.cpp); the decoder (PtxDecoder.cpp, PtxDecodeArithmetic.cpp)
// turns one instruction statement into an Inst, resolving its operands
// through the builder and choosing its handler from the instruction files
// (PtxOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXDECODER_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXDECODER_H

#include "PtxOps.h"
#include "PtxProgram.h"

#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kpool::emu::ptx {

/// One instruction statement: `@!%p opcode a, b, c;` at `line`.
struct Statement {
  std::string guard; // "%p1", "" for none
  bool guardNeg = false;
  std::string opcode;                // "ld.global.nc.v4.b32"
  std::vector<std::string> operands; // top-level comma split, trimmed
  uint32_t line = 0;
};

/// A variable's address as an instruction operand sees it.
struct Symbol {
  Space space = Space::Global;
  uint64_t address = 0; // state-space address (host address for global)
  uint64_t bytes = 0;
};

/// A resolved `[base + offset]` operand.
struct AddressOperand {
  uint32_t reg = kNoSlot;
  int64_t offset = 0;
  /// The space of the symbol named in it, if any.
  bool hasSymbol = false;
  Space symbolSpace = Space::Global;
};

class FunctionBuilder {
public:
  FunctionBuilder(FunctionImpl &fn,
                  const std::map<std::string, Symbol> &globals)
      : fn(fn), globals(globals) {}

  FunctionImpl &fn;
  const std::map<std::string, Symbol> &globals;
  std::map<std::string, Symbol> locals; // .param/.shared/.local of the body

  struct RegRange {
    uint32_t base = 0, count = 0;
    bool pred = false;
    unsigned width = 32;
  };
  /// "%r" for `.reg .b32 %r<10>`; full names for `.reg .b32 %x`. Nested
  /// scopes push a new map.
  std::vector<std::map<std::string, RegRange>> ranges{1};
  std::vector<std::map<std::string, RegRange>> named{1};

  std::map<std::string, uint32_t> labels;
  /// (instruction index, label, line) to resolve at the end of the body.
  std::vector<std::tuple<size_t, std::string, uint32_t>> fixups;

  /// Declares registers; false on a redefinition.
  bool declareRegisters(const std::string &spec, bool pred, unsigned width,
                        std::string &error);

  /// A register's slot (kPredBit set for predicates) and width, or false.
  bool lookupRegister(const std::string &name, uint32_t &slot,
                      unsigned &width) const;

  /// A source operand: register, immediate (as an integer of `bits` bits,
  /// or an f32/f64 constant for float types), special register or a
  /// variable's address. `expectPred`: a predicate operand (immediates are
  /// 0/1 predicate constants). Returns the slot, or kNoSlot with `error`.
  uint32_t source(const std::string &text, Ty type, bool expectPred,
                  std::string &error);
  /// A destination operand: a register or `_` (a scratch slot).
  uint32_t dest(const std::string &text, bool expectPred, std::string &error,
                unsigned *width = nullptr);
  /// `{a, b, ...}`: the element texts, or false when `text` is no vector.
  static bool vectorElements(const std::string &text,
                             std::vector<std::string> &out);
  /// `[reg]`, `[reg+imm]`, `[sym]`, `[sym+imm]`, `[imm]`.
  bool address(const std::string &text, AddressOperand &out,
               std::string &error);

  uint32_t constant(uint64_t value);
  uint32_t predConstant(bool value);
  uint32_t special(ConstSlot::Kind kind);
  uint32_t sinkSlot();
  uint32_t sinkPred();

private:
  std::map<uint64_t, uint32_t> valueConstants;
  std::map<int, uint32_t> specials;
  uint32_t predConsts[2] = {kNoSlot, kNoSlot};
  uint32_t sink = kNoSlot, sinkP = kNoSlot;
  const Symbol *findSymbol(const std::string &name) const;
};

/// Parses an integer literal (decimal, 0x hex, 0 octal, 0b binary, optional
/// U suffix, leading '-'); false if `text` is none.
bool parseInteger(const std::string &text, uint64_t &value);
/// Parses a float literal: 0fXXXXXXXX (f32 bits), 0dXXXXXXXXXXXXXXXX (f64
/// bits) or decimal; `asF64` selects the result's format. False if none.
bool parseFloat(const std::string &text, bool asF64, uint64_t &bits);

/// The type named by a modifier ("b32", "f16x2", ...), Ty::None if none.
Ty parseType(const std::string &s);

/// The decoding of one statement (PtxDecoder.cpp: operands, memory,
/// control and warp instructions; PtxDecodeArithmetic.cpp: arithmetic,
/// logic, comparisons, moves and conversions).
struct Decoder {
  FunctionBuilder &b;
  const Statement &st;
  std::string &error;
  Inst in;
  std::vector<std::string> mods; // opcode parts after the base
  std::string base;
  std::set<size_t> used; // indices of mods consumed

  Decoder(FunctionBuilder &b, const Statement &st, std::string &e)
      : b(b), st(st), error(e) {}

  bool fail(const std::string &what) {
    error = what;
    return false;
  }
  /// Consumes modifier `m` if present.
  bool take(const char *m) {
    for (size_t i = 0; i < mods.size(); ++i)
      if (!used.count(i) && mods[i] == m) {
        used.insert(i);
        return true;
      }
    return false;
  }
  /// Consumes the first of `options` present; returns its index or -1.
  int takeOne(std::initializer_list<const char *> options) {
    int k = 0;
    for (const char *o : options) {
      if (take(o))
        return k;
      ++k;
    }
    return -1;
  }
  /// Consumes the last modifier as a type.
  Ty takeType() {
    for (size_t i = mods.size(); i-- > 0;)
      if (!used.count(i)) {
        Ty t = parseType(mods[i]);
        if (t != Ty::None) {
          used.insert(i);
          return t;
        }
        return Ty::None;
      }
    return Ty::None;
  }
  /// Fails on any modifier not consumed.
  bool allUsed() {
    for (size_t i = 0; i < mods.size(); ++i)
      if (!used.count(i))
        return fail("unsupported modifier '." + mods[i] + "' in '" + st.opcode +
                    "'");
    return true;
  }
  bool operands(size_t lo, size_t hi) {
    if (st.operands.size() < lo || st.operands.size() > hi)
      return fail("'" + st.opcode + "' expects " + std::to_string(lo) +
                  (hi != lo ? "-" + std::to_string(hi) : "") +
                  " operands, got " + std::to_string(st.operands.size()));
    return true;
  }
  bool src(size_t i, const std::string &text, Ty type, bool pred = false) {
    uint32_t s = b.source(text, type, pred, error);
    if (s == kNoSlot)
      return false;
    in.s[i] = s;
    in.ns = uint8_t(std::max<size_t>(in.ns, i + 1));
    return true;
  }
  bool dst(size_t i, const std::string &text, bool pred = false) {
    unsigned width = 64;
    uint32_t d = b.dest(text, pred, error, &width);
    if (d == kNoSlot)
      return false;
    in.d[i] = d;
    in.nd = uint8_t(std::max<size_t>(in.nd, i + 1));
    if (i == 0)
      in.dmask = width >= 64 ? ~0ull : (uint64_t(1) << width) - 1;
    return true;
  }
  Round takeRound(bool integerRounding = false) {
    int r = integerRounding ? takeOne({"rni", "rzi", "rmi", "rpi"})
                            : takeOne({"rn", "rz", "rm", "rp", "rna"});
    return r < 0 ? Round::None : Round(r);
  }
  OpClass intClass(Ty t) const {
    return bitsOf(t) == 64 ? OpClass::Integer64 : OpClass::Integer;
  }

  bool arithmetic();
  bool logic();
  bool compare();
  bool move();
  bool convert();
  bool memory();
  bool atomic();
  bool control();
  bool warp();
  bool floatUnary();
  bool run();
};

/// Decodes `stmt` into `fn.code` (appending); false with `error` ("line N:
/// ..." is added by the caller).
bool decodeInstruction(FunctionBuilder &b, const Statement &stmt,
                       std::string &error);

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXDECODER_H
