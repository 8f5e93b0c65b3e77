//===- PtxDecoder.cpp - one PTX instruction to one predecoded Inst --------===//
//
// Splits the opcode into its base and modifiers, checks every modifier is
// one the emulator implements for that instruction (an unknown one is an
// error naming it, never a silent approximation), resolves the operands to
// slots and picks the handler.
//
//===----------------------------------------------------------------------===//

#include "PtxDecoder.h"
#include "PtxOps.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

//===----------------------------------------------------------------------===//
// Types and literals.
//===----------------------------------------------------------------------===//

unsigned kpool::emu::ptx::bitsOf(Ty t) {
  switch (t) {
  case Ty::Pred:
    return 1;
  case Ty::B8:
  case Ty::U8:
  case Ty::S8:
    return 8;
  case Ty::B16:
  case Ty::U16:
  case Ty::S16:
  case Ty::F16:
  case Ty::BF16:
  case Ty::E4M3x2:
  case Ty::E5M2x2:
    return 16;
  case Ty::B32:
  case Ty::U32:
  case Ty::S32:
  case Ty::F32:
  case Ty::F16x2:
  case Ty::BF16x2:
    return 32;
  case Ty::B64:
  case Ty::U64:
  case Ty::S64:
  case Ty::F64:
    return 64;
  case Ty::B128:
    return 128;
  case Ty::None:
    return 0;
  }
  return 0;
}

bool kpool::emu::ptx::isSigned(Ty t) {
  return t == Ty::S8 || t == Ty::S16 || t == Ty::S32 || t == Ty::S64;
}

bool kpool::emu::ptx::isFloat(Ty t) {
  return t == Ty::F16 || t == Ty::F16x2 || t == Ty::BF16 || t == Ty::BF16x2 ||
         t == Ty::F32 || t == Ty::F64 || t == Ty::E4M3x2 || t == Ty::E5M2x2;
}

Ty kpool::emu::ptx::parseType(const std::string &s) {
  static const std::pair<const char *, Ty> table[] = {
      {"pred", Ty::Pred},    {"b8", Ty::B8},     {"b16", Ty::B16},
      {"b32", Ty::B32},      {"b64", Ty::B64},   {"b128", Ty::B128},
      {"u8", Ty::U8},        {"u16", Ty::U16},   {"u32", Ty::U32},
      {"u64", Ty::U64},      {"s8", Ty::S8},     {"s16", Ty::S16},
      {"s32", Ty::S32},      {"s64", Ty::S64},   {"f16", Ty::F16},
      {"f16x2", Ty::F16x2},  {"bf16", Ty::BF16}, {"bf16x2", Ty::BF16x2},
      {"f32", Ty::F32},      {"f64", Ty::F64},   {"e4m3x2", Ty::E4M3x2},
      {"e5m2x2", Ty::E5M2x2}};
  for (auto &[name, ty] : table)
    if (s == name)
      return ty;
  return Ty::None;
}

bool kpool::emu::ptx::parseInteger(const std::string &text, uint64_t &value) {
  std::string t = text;
  bool negative = false;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    negative = t[0] == '-';
    t = t.substr(1);
  }
  if (!t.empty() && (t.back() == 'U' || t.back() == 'u'))
    t.pop_back();
  if (t.empty())
    return false;
  int base = 10;
  size_t start = 0;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    start = 2;
  } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'b' || t[1] == 'B')) {
    base = 2;
    start = 2;
  } else if (t.size() > 1 && t[0] == '0') {
    base = 8;
    start = 1;
  }
  uint64_t v = 0;
  for (size_t i = start; i < t.size(); ++i) {
    char c = t[i];
    int digit;
    if (std::isdigit(static_cast<unsigned char>(c)))
      digit = c - '0';
    else if (base == 16 && std::isxdigit(static_cast<unsigned char>(c)))
      digit = std::tolower(c) - 'a' + 10;
    else
      return false;
    if (digit >= base)
      return false;
    v = v * uint64_t(base) + uint64_t(digit);
  }
  value = negative ? ~v + 1 : v;
  return true;
}

bool kpool::emu::ptx::parseFloat(const std::string &text, bool asF64,
                                 uint64_t &bits) {
  std::string t = text;
  bool negative = false;
  if (!t.empty() && t[0] == '-') {
    negative = true;
    t = t.substr(1);
  }
  auto hexBits = [](const std::string &h, size_t digits, uint64_t &out) {
    if (h.size() != digits)
      return false;
    out = 0;
    for (char c : h) {
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        return false;
      out = out * 16 + uint64_t(std::isdigit(static_cast<unsigned char>(c))
                                    ? c - '0'
                                    : std::tolower(c) - 'a' + 10);
    }
    return true;
  };
  double d;
  uint64_t raw;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F')) {
    if (!hexBits(t.substr(2), 8, raw))
      return false;
    if (negative)
      raw ^= 0x80000000u;
    if (!asF64) {
      bits = raw;
      return true;
    }
    float f;
    uint32_t r32 = uint32_t(raw);
    std::memcpy(&f, &r32, 4);
    d = f;
  } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'd' || t[1] == 'D')) {
    if (!hexBits(t.substr(2), 16, raw))
      return false;
    if (negative)
      raw ^= 0x8000000000000000ull;
    std::memcpy(&d, &raw, 8);
    if (asF64) {
      bits = raw;
      return true;
    }
  } else {
    if (t.empty() ||
        !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.'))
      return false;
    char *end = nullptr;
    d = std::strtod(t.c_str(), &end);
    if (!end || *end)
      return false;
    if (negative)
      d = -d;
  }
  if (asF64) {
    std::memcpy(&bits, &d, 8);
  } else {
    float f = float(d);
    uint32_t r32;
    std::memcpy(&r32, &f, 4);
    bits = r32;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Decoding.
//===----------------------------------------------------------------------===//

bool Decoder::memory() {
  bool isStore = base == "st";
  take("weak");
  take("volatile");
  takeOne({"relaxed", "acquire", "release", "mmio"});
  takeOne({"cta", "gpu", "sys", "cluster"});
  int sp = takeOne({"global", "shared", "local", "param", "const"});
  if (sp < 0 && take("shared::cta"))
    sp = 1;
  in.nc = take("nc");
  takeOne({"ca", "cg", "cs", "lu", "cv", "wb", "wt"});
  takeOne({"L1::evict_normal", "L1::evict_unchanged", "L1::evict_first",
           "L1::evict_last", "L1::no_allocate"});
  takeOne({"L2::64B", "L2::128B", "L2::256B"});
  bool hint = take("L2::cache_hint");
  int v = takeOne({"v2", "v4", "v8"});
  Ty t = takeType();
  if (t == Ty::None || t == Ty::Pred)
    return fail("'" + st.opcode + "' needs a data type");
  if (!allUsed())
    return false;
  if (t == Ty::B128)
    return fail("'" + st.opcode + "': 128-bit accesses are not supported");
  in.space = sp < 0 ? Space::Generic : Space(sp + 1);
  in.vec = uint8_t(v < 0 ? 1 : 2 << v);
  in.size = uint8_t(bitsOf(t) / 8);
  in.type = t;
  in.cls = OpClass::Memory;
  size_t need = 2 + (hint ? 1 : 0);
  if (!operands(need, need))
    return false;
  const std::string &addrText = isStore ? st.operands[0] : st.operands[1];
  const std::string &valText = isStore ? st.operands[1] : st.operands[0];
  AddressOperand addr;
  if (!b.address(addrText, addr, error))
    return false;
  if (addr.hasSymbol && in.space == Space::Generic)
    return fail("a variable's address in a generic access: '" + st.opcode +
                "' needs its state space");
  in.addrReg = addr.reg;
  in.addrOff = addr.offset;
  std::vector<std::string> elems;
  if (in.vec > 1) {
    if (!FunctionBuilder::vectorElements(valText, elems) ||
        elems.size() != in.vec)
      return fail("'" + st.opcode + "' expects a vector of " +
                  std::to_string(in.vec) + " registers, got '" + valText + "'");
  } else {
    elems.push_back(valText);
  }
  for (size_t i = 0; i < elems.size(); ++i) {
    if (isStore ? !src(i, elems[i], t) : !dst(i, elems[i]))
      return false;
  }
  if (addr.reg != kNoSlot) {
    in.s[in.ns] = addr.reg;
    ++in.ns;
  }
  if (isStore && in.space == Space::Param)
    return fail("stores to kernel parameters are not supported");
  if (isStore && in.space == Space::Const)
    return fail("stores to the constant space are not allowed");
  in.fn = isStore ? selectStore() : selectLoad();
  return true;
}

bool Decoder::atomic() {
  bool isRed = base == "red";
  takeOne({"relaxed", "acquire", "release", "acq_rel"});
  takeOne({"cta", "gpu", "sys", "cluster"});
  int sp = takeOne({"global", "shared"});
  if (sp < 0 && take("shared::cta"))
    sp = 1;
  int op = takeOne(
      {"and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max"});
  take("noftz");
  Ty t = takeType();
  if (op < 0 || t == Ty::None)
    return fail("'" + st.opcode + "' needs an operation and a type");
  if (!allUsed())
    return false;
  in.space = sp < 0 ? Space::Generic : Space(sp + 1);
  in.size = uint8_t(bitsOf(t) / 8);
  in.type = t;
  in.mode = uint8_t(op);
  in.cls = OpClass::Memory;
  bool cas = AtomOp(op) == AtomOp::Cas;
  size_t n = (isRed ? 2 : 3) + (cas ? 1 : 0);
  if (!operands(n, n))
    return false;
  size_t k = 0;
  if (!isRed) {
    if (!dst(0, st.operands[0]))
      return false;
    ++k;
  } else {
    in.d[0] = b.sinkSlot();
    in.nd = 1;
  }
  AddressOperand addr;
  if (!b.address(st.operands[k], addr, error))
    return false;
  in.addrReg = addr.reg;
  in.addrOff = addr.offset;
  if (!src(0, st.operands[k + 1], t))
    return false;
  if (cas && !src(1, st.operands[k + 2], t))
    return false;
  if (addr.reg != kNoSlot)
    in.s[in.ns++] = addr.reg;
  in.fn = selectAtomic(AtomOp(op), t);
  return in.fn || fail("'" + st.opcode + "' is not supported");
}

bool Decoder::control() {
  in.cls = OpClass::Control;
  if (base == "bra") {
    in.flag = take("uni");
    if (!allUsed() || !operands(1, 1))
      return false;
    in.kind = Kind::Branch;
    b.fixups.emplace_back(b.fn.code.size(), st.operands[0], st.line);
    return true;
  }
  if (base == "ret" || base == "exit") {
    take("uni");
    if (!allUsed() || !operands(0, 0))
      return false;
    in.kind = Kind::Exit;
    return true;
  }
  if (base == "trap" || base == "brkpt") {
    in.kind = Kind::Trap;
    return allUsed();
  }
  return fail("'" + st.opcode + "' is not supported");
}

bool Decoder::warp() {
  in.cls = OpClass::Sync;
  if (base == "bar" || base == "barrier") {
    take("cta");
    if (take("warp")) {
      if (!take("sync") || !allUsed() || !operands(1, 1))
        return fail("expected 'bar.warp.sync membermask'");
      if (!src(0, st.operands[0], Ty::B32))
        return false;
      in.kind = Kind::WarpSync;
      in.target = 0;
      in.fn = selectBarWarpSync();
      return true;
    }
    bool arrive = take("arrive");
    bool sync = take("sync");
    take("aligned");
    if (arrive == sync || !allUsed())
      return fail("unsupported barrier '" + st.opcode +
                  "' (bar.sync, bar.arrive, barrier.sync are)");
    if (!operands(arrive ? 2 : 1, 2))
      return false;
    for (size_t i = 0; i < st.operands.size(); ++i)
      if (!src(i, st.operands[i], Ty::U32))
        return false;
    in.kind = Kind::Barrier;
    in.flag = arrive;
    return true;
  }
  if (base == "membar" || base == "fence") {
    takeOne({"cta", "gl", "gpu", "sys", "cluster"});
    takeOne({"sc", "acq_rel", "acquire", "release"});
    takeOne({"cta", "gpu", "sys", "cluster"});
    in.fn = selectNop();
    return allUsed();
  }
  if (base == "activemask") {
    if (takeType() != Ty::B32 || !allUsed() || !operands(1, 1) ||
        !dst(0, st.operands[0]))
      return error.empty() ? fail("expected 'activemask.b32 d'") : false;
    in.fn = selectActivemask();
    return true;
  }
  if (base == "shfl") {
    if (!take("sync"))
      return fail("'" + st.opcode + "': only shfl.sync is supported");
    int mode = takeOne({"up", "down", "bfly", "idx"});
    Ty t = takeType();
    if (mode < 0 || t != Ty::B32 || !allUsed() || !operands(5, 5))
      return error.empty() ? fail("expected 'shfl.sync.mode.b32 d[|p], a, b, "
                                  "c, membermask'")
                           : false;
    std::string dp = st.operands[0];
    size_t bar = dp.find('|');
    if (!dst(0, dp.substr(0, bar)))
      return false;
    if (bar != std::string::npos) {
      if (!dst(1, dp.substr(bar + 1), true))
        return false;
    } else {
      in.d[1] = b.sinkPred();
      in.nd = 2;
    }
    for (size_t i = 0; i < 4; ++i)
      if (!src(i, st.operands[i + 1], Ty::B32))
        return false;
    in.mode = uint8_t(mode);
    in.kind = Kind::WarpSync;
    in.target = 3;
    in.fn = selectShfl();
    return true;
  }
  if (base == "vote") {
    if (!take("sync"))
      return fail("'" + st.opcode + "': only vote.sync is supported");
    int mode = takeOne({"all", "any", "uni", "ballot"});
    Ty t = takeType();
    bool ballot = mode == 3;
    if (mode < 0 || t != (ballot ? Ty::B32 : Ty::Pred) || !allUsed() ||
        !operands(3, 3))
      return error.empty() ? fail("expected 'vote.sync.{all,any,uni}.pred' or "
                                  "'vote.sync.ballot.b32'")
                           : false;
    if (!dst(0, st.operands[0], !ballot))
      return false;
    std::string a = st.operands[1];
    if (!a.empty() && a[0] == '!') {
      in.flag = true;
      a = a.substr(1);
    }
    if (!src(0, a, Ty::Pred, true) || !src(1, st.operands[2], Ty::B32))
      return false;
    in.mode = uint8_t(mode);
    in.kind = Kind::WarpSync;
    in.target = 1;
    in.fn = selectVote();
    return true;
  }
  return fail("'" + st.opcode + "' is not supported");
}

bool Decoder::run() {
  size_t start = 0;
  for (size_t i = 0; i <= st.opcode.size(); ++i)
    if (i == st.opcode.size() || st.opcode[i] == '.') {
      std::string part = st.opcode.substr(start, i - start);
      if (start == 0)
        base = part;
      else
        mods.push_back(part);
      start = i + 1;
    }
  in.line = st.line;
  if (!st.guard.empty()) {
    uint32_t g = b.source(st.guard, Ty::Pred, true, error);
    if (g == kNoSlot)
      return false;
    in.guard = g & ~kPredBit;
    in.guardNeg = st.guardNeg;
  }
  bool ok;
  if (base == "add" || base == "sub" || base == "mul" || base == "mad" ||
      base == "fma" || base == "div" || base == "rem" || base == "min" ||
      base == "max" || base == "abs" || base == "neg" || base == "mul24")
    ok = arithmetic();
  else if (base == "and" || base == "or" || base == "xor" || base == "not" ||
           base == "cnot" || base == "shl" || base == "shr" || base == "popc" ||
           base == "clz" || base == "brev" || base == "bfe" || base == "bfi" ||
           base == "prmt" || base == "lop3" || base == "bfind")
    ok = logic();
  else if (base == "setp" || base == "selp")
    ok = compare();
  else if (base == "mov")
    ok = move();
  else if (base == "cvt" || base == "cvta")
    ok = convert();
  else if (base == "ld" || base == "st")
    ok = memory();
  else if (base == "atom" || base == "red")
    ok = atomic();
  else if (base == "bra" || base == "ret" || base == "exit" || base == "trap" ||
           base == "brkpt")
    ok = control();
  else if (base == "bar" || base == "barrier" || base == "membar" ||
           base == "fence" || base == "shfl" || base == "vote" ||
           base == "activemask")
    ok = warp();
  else if (base == "ex2" || base == "lg2" || base == "sin" || base == "cos" ||
           base == "tanh" || base == "rsqrt" || base == "rcp" || base == "sqrt")
    ok = floatUnary();
  else if (base == "testp") {
    int m = takeOne(
        {"finite", "infinite", "number", "notanumber", "normal", "subnormal"});
    Ty t = takeType();
    ok = m >= 0 && (t == Ty::F32 || t == Ty::F64) && allUsed() &&
         operands(2, 2) && src(0, st.operands[1], t) &&
         dst(0, st.operands[0], true);
    if (ok) {
      in.mode = uint8_t(m);
      in.type = t;
      in.cls = OpClass::Float;
      in.fn = selectFloat(FloatOp::Testp, in);
    } else if (error.empty()) {
      error = "expected 'testp.op.f32/f64 p, a'";
    }
  } else if (base == "copysign") {
    Ty t = takeType();
    ok = (t == Ty::F32 || t == Ty::F64) && allUsed() && operands(3, 3) &&
         src(0, st.operands[1], t) && src(1, st.operands[2], t) &&
         dst(0, st.operands[0]);
    if (ok) {
      in.type = t;
      in.cls = OpClass::Float;
      in.fn = selectFloat(FloatOp::Copysign, in);
    } else if (error.empty()) {
      error = "expected 'copysign.f32/f64 d, a, b'";
    }
  } else if (base == "nop" || base == "prefetch" || base == "prefetchu" ||
             base == "pmevent") {
    mods.clear();
    in.cls = OpClass::Control;
    in.fn = selectNop();
    ok = true; // no effect on results
  } else if (base == "call") {
    ok = fail("'call' is not supported by the emulator (no .func bodies run)");
  } else {
    ok = fail("unsupported instruction '" + st.opcode + "'");
  }
  if (!ok)
    return false;
  b.fn.code.push_back(in);
  return true;
}

bool kpool::emu::ptx::decodeInstruction(FunctionBuilder &b,
                                        const Statement &stmt,
                                        std::string &error) {
  error.clear();
  Decoder d(b, stmt, error);
  return d.run();
}
