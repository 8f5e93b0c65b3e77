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
  case Ty::Pred: return 1;
  case Ty::B8: case Ty::U8: case Ty::S8: return 8;
  case Ty::B16: case Ty::U16: case Ty::S16: case Ty::F16: case Ty::BF16:
  case Ty::E4M3x2: case Ty::E5M2x2: return 16;
  case Ty::B32: case Ty::U32: case Ty::S32: case Ty::F32: case Ty::F16x2:
  case Ty::BF16x2: return 32;
  case Ty::B64: case Ty::U64: case Ty::S64: case Ty::F64: return 64;
  case Ty::B128: return 128;
  case Ty::None: return 0;
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

static Ty parseType(const std::string &s) {
  static const std::pair<const char *, Ty> table[] = {
      {"pred", Ty::Pred}, {"b8", Ty::B8},       {"b16", Ty::B16},
      {"b32", Ty::B32},   {"b64", Ty::B64},     {"b128", Ty::B128},
      {"u8", Ty::U8},     {"u16", Ty::U16},     {"u32", Ty::U32},
      {"u64", Ty::U64},   {"s8", Ty::S8},       {"s16", Ty::S16},
      {"s32", Ty::S32},   {"s64", Ty::S64},     {"f16", Ty::F16},
      {"f16x2", Ty::F16x2}, {"bf16", Ty::BF16}, {"bf16x2", Ty::BF16x2},
      {"f32", Ty::F32},   {"f64", Ty::F64},     {"e4m3x2", Ty::E4M3x2},
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
    if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) ||
                       t[0] == '.'))
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

namespace {

struct Decoder {
  FunctionBuilder &b;
  const Statement &st;
  std::string &error;
  Inst in;
  std::vector<std::string> mods; // opcode parts after the base
  std::string base;
  std::set<size_t> used;         // indices of mods consumed

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
        return fail("unsupported modifier '." + mods[i] + "' in '" +
                    st.opcode + "'");
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

bool Decoder::arithmetic() {
  bool isMad = base == "mad" || base == "fma";
  int width = takeOne({"lo", "hi", "wide"});
  bool sat = take("sat");
  bool ftz = take("ftz");
  bool nan = take("NaN");
  bool approx = take("approx"), full = take("full");
  Round rnd = takeRound();
  Ty t = takeType();
  if (t == Ty::None)
    return fail("'" + st.opcode + "' has no type");
  if (!allUsed())
    return false;
  bool fl = t == Ty::F32 || t == Ty::F64;
  if (isFloat(t) && !fl)
    return fail("'" + st.opcode + "': f16/bf16 arithmetic is not supported");
  size_t nsrc = (base == "abs" || base == "neg") ? 1 : isMad ? 3 : 2;
  if (!operands(nsrc + 1, nsrc + 1))
    return false;
  for (size_t i = 0; i < nsrc; ++i) {
    Ty ty = t;
    if (width == 2 && i == 2) // mad.wide: c is as wide as d
      ty = bitsOf(t) == 16 ? (isSigned(t) ? Ty::S32 : Ty::U32)
                           : (isSigned(t) ? Ty::S64 : Ty::U64);
    if (!src(i, st.operands[i + 1], ty))
      return false;
  }
  if (!dst(0, st.operands[0]))
    return false;
  in.type = t;
  in.ftz = ftz;
  in.sat = sat;
  in.flag = nan;
  in.rnd = rnd == Round::None ? Round::RN : rnd;
  if (fl) {
    in.cls = OpClass::Float;
    FloatOp op;
    if (base == "add") op = FloatOp::Add;
    else if (base == "sub") op = FloatOp::Sub;
    else if (base == "mul") op = FloatOp::Mul;
    else if (isMad) op = FloatOp::Fma;
    else if (base == "div") {
      op = approx ? FloatOp::ApproxDiv : full ? FloatOp::FullDiv : FloatOp::Div;
      if (approx || full)
        in.cls = OpClass::Special;
      else if (rnd == Round::None)
        return fail("'" + st.opcode + "' needs .approx, .full or a rounding");
    } else if (base == "min") op = FloatOp::Min;
    else if (base == "max") op = FloatOp::Max;
    else if (base == "abs") op = FloatOp::Abs;
    else if (base == "neg") op = FloatOp::Neg;
    else return fail("'" + st.opcode + "' is not supported on floats");
    if (width >= 0 || ((approx || full) && base != "div"))
      return fail("unsupported modifiers in '" + st.opcode + "'");
    if (isMad && rnd == Round::None && base == "fma")
      return fail("'" + st.opcode + "' needs a rounding modifier");
    in.fn = selectFloat(op, in);
  } else {
    in.cls = intClass(t);
    IntOp op;
    if (base == "add") op = sat ? IntOp::AddSat : IntOp::Add;
    else if (base == "sub") op = sat ? IntOp::SubSat : IntOp::Sub;
    else if (base == "mul")
      op = width == 1 ? IntOp::MulHi : width == 2 ? IntOp::MulWide : IntOp::MulLo;
    else if (base == "mad")
      op = width == 1 ? IntOp::MadHi : width == 2 ? IntOp::MadWide : IntOp::MadLo;
    else if (base == "mul24")
      op = width == 1 ? IntOp::Mul24Hi : IntOp::Mul24Lo;
    else if (base == "div") op = IntOp::Div;
    else if (base == "rem") op = IntOp::Rem;
    else if (base == "min") op = IntOp::Min;
    else if (base == "max") op = IntOp::Max;
    else if (base == "abs") op = IntOp::Abs;
    else if (base == "neg") op = IntOp::Neg;
    else return fail("'" + st.opcode + "' is not supported on integers");
    if ((width >= 0 && base != "mul" && base != "mad" && base != "mul24") ||
        (sat && op != IntOp::AddSat && op != IntOp::SubSat) || ftz || nan ||
        approx || full || rnd != Round::None)
      return fail("unsupported modifiers in '" + st.opcode + "'");
    if ((base == "mul" || base == "mad") && width < 0)
      return fail("'" + st.opcode + "' needs .lo, .hi or .wide");
    if (width == 2)
      in.cls = OpClass::Integer64;
    in.fn = selectInteger(op, t);
  }
  if (!in.fn)
    return fail("'" + st.opcode + "' is not supported");
  return true;
}

bool Decoder::logic() {
  Ty t;
  if (base == "bfind") {
    bool shift = take("shiftamt");
    t = takeType();
    if (!allUsed() || !operands(2, 2) || !src(0, st.operands[1], t) ||
        !dst(0, st.operands[0]))
      return false;
    in.type = t;
    in.cls = intClass(t);
    in.fn = selectInteger(shift ? IntOp::BfindShift : IntOp::Bfind, t);
    return in.fn || fail("'" + st.opcode + "' is not supported");
  }
  int prmtMode = base == "prmt" ? takeOne({"f4e", "b4e", "rc8", "ecl", "ecr",
                                           "rc16"})
                                : -1;
  t = takeType();
  if (t == Ty::None)
    return fail("'" + st.opcode + "' has no type");
  if (!allUsed())
    return false;
  in.type = t;
  in.cls = intClass(t);
  if (t == Ty::Pred) {
    IntOp op = base == "and" ? IntOp::And : base == "or" ? IntOp::Or
             : base == "xor" ? IntOp::Xor : base == "not" ? IntOp::Not
                                                          : IntOp::Mov;
    if (base != "and" && base != "or" && base != "xor" && base != "not")
      return fail("'" + st.opcode + "' is not supported");
    size_t n = op == IntOp::Not ? 1 : 2;
    if (!operands(n + 1, n + 1))
      return false;
    for (size_t i = 0; i < n; ++i)
      if (!src(i, st.operands[i + 1], t, true))
        return false;
    if (!dst(0, st.operands[0], true))
      return false;
    in.cls = OpClass::Integer;
    in.fn = selectPredLogic(op);
    return true;
  }
  IntOp op;
  size_t n = 2;
  Ty bType = t; // shift amounts, positions and lengths are u32
  if (base == "and") op = IntOp::And;
  else if (base == "or") op = IntOp::Or;
  else if (base == "xor") op = IntOp::Xor;
  else if (base == "not") op = IntOp::Not, n = 1;
  else if (base == "cnot") op = IntOp::Cnot, n = 1;
  else if (base == "shl") op = IntOp::Shl, bType = Ty::U32;
  else if (base == "shr") op = IntOp::Shr, bType = Ty::U32;
  else if (base == "popc") op = IntOp::Popc, n = 1;
  else if (base == "clz") op = IntOp::Clz, n = 1;
  else if (base == "brev") op = IntOp::Brev, n = 1;
  else if (base == "bfe") op = IntOp::Bfe, n = 3, bType = Ty::U32;
  else if (base == "bfi") op = IntOp::Bfi, n = 4, bType = Ty::U32;
  else if (base == "prmt") op = IntOp::Prmt, n = 3;
  else if (base == "lop3") op = IntOp::Lop3, n = 4;
  else return fail("'" + st.opcode + "' is not supported");
  if (!operands(n + 1, n + 1))
    return false;
  for (size_t i = 0; i < n; ++i) {
    Ty ty = (i == 0 || (op == IntOp::Bfi && i == 1) || op == IntOp::Prmt ||
             (op == IntOp::Lop3 && i < 3))
                ? t
                : bType;
    if (op == IntOp::Lop3 && i == 3) {
      uint64_t lut;
      if (!parseInteger(st.operands[4], lut) || lut > 255)
        return fail("lop3's immLut must be an integer in [0, 255], got '" +
                    st.operands[4] + "'");
      in.target = uint32_t(lut);
      continue;
    }
    if (!src(i, st.operands[i + 1], ty))
      return false;
  }
  if (!dst(0, st.operands[0]))
    return false;
  if (op == IntOp::Prmt)
    in.mode = uint8_t(prmtMode + 1); // 0: the default mode
  in.fn = selectInteger(op, t);
  return in.fn || fail("'" + st.opcode + "' is not supported");
}

bool Decoder::compare() {
  if (base == "selp") {
    Ty t = takeType();
    if (t == Ty::None)
      return fail("'" + st.opcode + "' needs a type");
    if (!allUsed() || !operands(4, 4))
      return false;
    if (!src(0, st.operands[1], t) || !src(1, st.operands[2], t) ||
        !src(2, st.operands[3], t, true) || !dst(0, st.operands[0]))
      return false;
    in.type = t;
    in.cls = isFloat(t) ? OpClass::Float : intClass(t);
    in.fn = selectInteger(IntOp::Selp, t);
    return true;
  }
  static const char *cmps[] = {"eq",  "ne",  "lt",  "le",  "gt",  "ge",
                               "lo",  "ls",  "hi",  "hs",  "equ", "neu",
                               "ltu", "leu", "gtu", "geu", "num", "nan"};
  int cmp = -1;
  for (int k = 0; k < 18 && cmp < 0; ++k)
    if (take(cmps[k]))
      cmp = k;
  int boolOp = takeOne({"and", "or", "xor"});
  in.ftz = take("ftz");
  Ty t = takeType();
  if (cmp < 0 || t == Ty::None)
    return fail("'" + st.opcode + "' needs a comparison and a type");
  if (!allUsed())
    return false;
  bool fl = t == Ty::F32 || t == Ty::F64;
  if (isFloat(t) && !fl)
    return fail("'" + st.opcode + "': f16/bf16 comparisons are not supported");
  if (!fl && cmp >= int(Cmp::Equ))
    return fail("'" + st.opcode + "': unordered comparisons need a float type");
  size_t n = boolOp >= 0 ? 4 : 3;
  if (!operands(n, n))
    return false;
  std::string pq = st.operands[0];
  size_t bar = pq.find('|');
  if (!dst(0, pq.substr(0, bar), true))
    return false;
  if (bar != std::string::npos) {
    if (!dst(1, pq.substr(bar + 1), true))
      return false;
  } else {
    in.d[1] = b.sinkPred();
    in.nd = 2;
  }
  if (!src(0, st.operands[1], t) || !src(1, st.operands[2], t))
    return false;
  if (boolOp >= 0) {
    std::string c = st.operands[3];
    if (!c.empty() && c[0] == '!') {
      in.flag = true;
      c = c.substr(1);
    }
    if (!src(2, c, Ty::Pred, true))
      return false;
  }
  in.type = t;
  in.mode = uint8_t(cmp);
  in.mode2 = uint8_t(boolOp + 1);
  in.cls = fl ? OpClass::Float : intClass(t);
  in.fn = selectSetp(t);
  return in.fn || fail("'" + st.opcode + "' is not supported");
}

bool Decoder::move() {
  Ty t = takeType();
  if (t == Ty::None)
    return fail("'" + st.opcode + "' needs a type");
  if (!allUsed() || !operands(2, 2))
    return false;
  in.type = t;
  in.cls = intClass(t);
  const std::string &a = st.operands[1];
  std::vector<std::string> elems;
  if (t == Ty::Pred) {
    if (!src(0, a, t, true) || !dst(0, st.operands[0], true))
      return false;
    in.fn = selectPredLogic(IntOp::Mov);
    return true;
  }
  static const char *clocks[] = {"%clock", "%clock_hi", "%clock64",
                                 "%globaltimer", "%globaltimer_lo",
                                 "%globaltimer_hi"};
  for (int k = 0; k < 6; ++k)
    if (a == clocks[k]) {
      if (!dst(0, st.operands[0]))
        return false;
      in.fn = selectClock(k == 2 || k == 3, k == 1 || k == 5);
      return true;
    }
  if (FunctionBuilder::vectorElements(a, elems)) {
    unsigned eb = bitsOf(t) / unsigned(elems.size());
    if (elems.size() < 2 || elems.size() > 4 || eb < 8)
      return fail("bad vector in '" + st.opcode + "'");
    Ty et = eb == 8 ? Ty::B8 : eb == 16 ? Ty::B16 : eb == 32 ? Ty::B32 : Ty::B64;
    for (size_t i = 0; i < elems.size(); ++i)
      if (!src(i, elems[i], et))
        return false;
    if (!dst(0, st.operands[0]))
      return false;
    in.size = uint8_t(eb);
    in.vec = uint8_t(elems.size());
    in.fn = selectPack(true);
    return true;
  }
  if (FunctionBuilder::vectorElements(st.operands[0], elems)) {
    unsigned eb = bitsOf(t) / unsigned(elems.size());
    if (elems.size() < 2 || elems.size() > 4 || eb < 8)
      return fail("bad vector in '" + st.opcode + "'");
    for (size_t i = 0; i < elems.size(); ++i)
      if (!dst(i, elems[i]))
        return false;
    if (!src(0, a, t))
      return false;
    in.size = uint8_t(eb);
    in.vec = uint8_t(elems.size());
    in.fn = selectPack(false);
    return true;
  }
  if (!src(0, a, t) || !dst(0, st.operands[0]))
    return false;
  in.fn = selectInteger(IntOp::Mov, t);
  return true;
}

bool Decoder::convert() {
  if (base == "cvta") {
    in.flag = take("to");
    int sp = takeOne({"global", "shared", "local", "param", "const"});
    Ty t = takeType();
    if (sp < 0 || (t != Ty::U64 && t != Ty::B64))
      return fail("'" + st.opcode + "': expected cvta{.to}.space.u64");
    if (!allUsed())
      return false;
    in.space = Space(sp + 1);
    if (!operands(2, 2) || !src(0, st.operands[1], t) ||
        !dst(0, st.operands[0]))
      return false;
    in.cls = OpClass::Integer64;
    in.fn = selectCvta();
    return true;
  }
  Round rnd = takeRound();
  Round irnd = takeRound(true);
  in.ftz = take("ftz");
  in.sat = take("sat");
  in.mode = take("satfinite") ? 1 : 0;
  in.flag = take("relu");
  // The last two modifiers are the destination and source types.
  Ty src2 = takeType();
  Ty dstT = takeType();
  if (src2 == Ty::None || dstT == Ty::None)
    return fail("'" + st.opcode + "' needs a destination and a source type");
  if (!allUsed())
    return false;
  in.type = dstT;
  in.type2 = src2;
  in.rnd = irnd != Round::None ? irnd : rnd;
  in.mode2 = irnd != Round::None ? 1 : 0; // integer rounding
  bool pair = (dstT == Ty::F16x2 || dstT == Ty::BF16x2 ||
               dstT == Ty::E4M3x2 || dstT == Ty::E5M2x2) &&
              src2 == Ty::F32;
  if (!operands(pair ? 3 : 2, pair ? 3 : 2))
    return false;
  if (!dst(0, st.operands[0]) || !src(0, st.operands[1], src2))
    return false;
  if (pair && !src(1, st.operands[2], src2))
    return false;
  bool fl = isFloat(dstT) || isFloat(src2);
  in.cls = fl ? OpClass::Float
              : (bitsOf(dstT) == 64 || bitsOf(src2) == 64 ? OpClass::Integer64
                                                          : OpClass::Integer);
  in.fn = selectConvert(in);
  return in.fn || fail("'" + st.opcode + "' is not supported");
}

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
  int op = takeOne({"and", "or", "xor", "cas", "exch", "add", "inc", "dec",
                    "min", "max"});
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

bool Decoder::floatUnary() {
  bool approx = take("approx");
  Round rnd = takeRound();
  in.ftz = take("ftz");
  Ty t = takeType();
  if (t == Ty::None || !allUsed())
    return error.empty() ? fail("'" + st.opcode + "' needs a type") : false;
  in.type = t;
  in.rnd = rnd == Round::None ? Round::RN : rnd;
  FloatOp op;
  bool special = true;
  if (base == "ex2") op = FloatOp::ApproxEx2;
  else if (base == "lg2") op = FloatOp::ApproxLg2;
  else if (base == "sin") op = FloatOp::ApproxSin;
  else if (base == "cos") op = FloatOp::ApproxCos;
  else if (base == "tanh") op = FloatOp::ApproxTanh;
  else if (base == "rsqrt") op = FloatOp::ApproxRsqrt;
  else if (base == "rcp") op = approx ? FloatOp::ApproxRcp : FloatOp::Rcp;
  else if (base == "sqrt") op = approx ? FloatOp::ApproxSqrt : FloatOp::Sqrt;
  else return fail("'" + st.opcode + "' is not supported");
  if (op == FloatOp::Rcp || op == FloatOp::Sqrt) {
    special = false;
    if (rnd == Round::None)
      return fail("'" + st.opcode + "' needs .approx or a rounding modifier");
  } else if (!approx || rnd != Round::None) {
    return fail("'" + st.opcode + "': only the .approx form is supported");
  }
  if (t != Ty::F32 && !(t == Ty::F64 && !special))
    return fail("'" + st.opcode + "': only .f32 is supported");
  if (!operands(2, 2) || !src(0, st.operands[1], t) || !dst(0, st.operands[0]))
    return false;
  in.cls = special ? OpClass::Special : OpClass::Float;
  in.fn = selectFloat(op, in);
  return in.fn || fail("'" + st.opcode + "' is not supported");
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
           base == "cnot" || base == "shl" || base == "shr" ||
           base == "popc" || base == "clz" || base == "brev" ||
           base == "bfe" || base == "bfi" || base == "prmt" ||
           base == "lop3" || base == "bfind")
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
  else if (base == "bra" || base == "ret" || base == "exit" ||
           base == "trap" || base == "brkpt")
    ok = control();
  else if (base == "bar" || base == "barrier" || base == "membar" ||
           base == "fence" || base == "shfl" || base == "vote" ||
           base == "activemask")
    ok = warp();
  else if (base == "ex2" || base == "lg2" || base == "sin" || base == "cos" ||
           base == "tanh" || base == "rsqrt" || base == "rcp" ||
           base == "sqrt")
    ok = floatUnary();
  else if (base == "testp") {
    int m = takeOne({"finite", "infinite", "number", "notanumber", "normal",
                     "subnormal"});
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

} // namespace

bool kpool::emu::ptx::decodeInstruction(FunctionBuilder &b,
                                        const Statement &stmt,
                                        std::string &error) {
  error.clear();
  Decoder d(b, stmt, error);
  return d.run();
}
