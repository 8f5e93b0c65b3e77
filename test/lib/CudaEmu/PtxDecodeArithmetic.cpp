//===- PtxDecodeArithmetic.cpp - decoding arithmetic, logic, cvt ----------===//
//
// The Decoder's integer and float arithmetic (add ... fma, the .approx
// instructions), bit and predicate logic, setp/selp, mov (with vector pack
// and unpack, special and clock registers) and cvt/cvta: modifiers checked,
// operands resolved with their types, the handler chosen.
//
//===----------------------------------------------------------------------===//

#include "PtxDecoder.h"
#include "PtxOps.h"

using namespace kpool::emu;
using namespace kpool::emu::ptx;

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
    if (base == "add")
      op = FloatOp::Add;
    else if (base == "sub")
      op = FloatOp::Sub;
    else if (base == "mul")
      op = FloatOp::Mul;
    else if (isMad)
      op = FloatOp::Fma;
    else if (base == "div") {
      op = approx ? FloatOp::ApproxDiv : full ? FloatOp::FullDiv : FloatOp::Div;
      if (approx || full)
        in.cls = OpClass::Special;
      else if (rnd == Round::None)
        return fail("'" + st.opcode + "' needs .approx, .full or a rounding");
    } else if (base == "min")
      op = FloatOp::Min;
    else if (base == "max")
      op = FloatOp::Max;
    else if (base == "abs")
      op = FloatOp::Abs;
    else if (base == "neg")
      op = FloatOp::Neg;
    else
      return fail("'" + st.opcode + "' is not supported on floats");
    if (width >= 0 || ((approx || full) && base != "div"))
      return fail("unsupported modifiers in '" + st.opcode + "'");
    if (isMad && rnd == Round::None && base == "fma")
      return fail("'" + st.opcode + "' needs a rounding modifier");
    in.fn = selectFloat(op, in);
  } else {
    in.cls = intClass(t);
    IntOp op;
    if (base == "add")
      op = sat ? IntOp::AddSat : IntOp::Add;
    else if (base == "sub")
      op = sat ? IntOp::SubSat : IntOp::Sub;
    else if (base == "mul")
      op = width == 1   ? IntOp::MulHi
           : width == 2 ? IntOp::MulWide
                        : IntOp::MulLo;
    else if (base == "mad")
      op = width == 1   ? IntOp::MadHi
           : width == 2 ? IntOp::MadWide
                        : IntOp::MadLo;
    else if (base == "mul24")
      op = width == 1 ? IntOp::Mul24Hi : IntOp::Mul24Lo;
    else if (base == "div")
      op = IntOp::Div;
    else if (base == "rem")
      op = IntOp::Rem;
    else if (base == "min")
      op = IntOp::Min;
    else if (base == "max")
      op = IntOp::Max;
    else if (base == "abs")
      op = IntOp::Abs;
    else if (base == "neg")
      op = IntOp::Neg;
    else
      return fail("'" + st.opcode + "' is not supported on integers");
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
  int prmtMode = base == "prmt"
                     ? takeOne({"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"})
                     : -1;
  t = takeType();
  if (t == Ty::None)
    return fail("'" + st.opcode + "' has no type");
  if (!allUsed())
    return false;
  in.type = t;
  in.cls = intClass(t);
  if (t == Ty::Pred) {
    IntOp op = base == "and"   ? IntOp::And
               : base == "or"  ? IntOp::Or
               : base == "xor" ? IntOp::Xor
               : base == "not" ? IntOp::Not
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
  if (base == "and")
    op = IntOp::And;
  else if (base == "or")
    op = IntOp::Or;
  else if (base == "xor")
    op = IntOp::Xor;
  else if (base == "not")
    op = IntOp::Not, n = 1;
  else if (base == "cnot")
    op = IntOp::Cnot, n = 1;
  else if (base == "shl")
    op = IntOp::Shl, bType = Ty::U32;
  else if (base == "shr")
    op = IntOp::Shr, bType = Ty::U32;
  else if (base == "popc")
    op = IntOp::Popc, n = 1;
  else if (base == "clz")
    op = IntOp::Clz, n = 1;
  else if (base == "brev")
    op = IntOp::Brev, n = 1;
  else if (base == "bfe")
    op = IntOp::Bfe, n = 3, bType = Ty::U32;
  else if (base == "bfi")
    op = IntOp::Bfi, n = 4, bType = Ty::U32;
  else if (base == "prmt")
    op = IntOp::Prmt, n = 3;
  else if (base == "lop3")
    op = IntOp::Lop3, n = 4;
  else
    return fail("'" + st.opcode + "' is not supported");
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
  static const char *clocks[] = {"%clock",          "%clock_hi",
                                 "%clock64",        "%globaltimer",
                                 "%globaltimer_lo", "%globaltimer_hi"};
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
    Ty et = eb == 8    ? Ty::B8
            : eb == 16 ? Ty::B16
            : eb == 32 ? Ty::B32
                       : Ty::B64;
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
  bool pair = (dstT == Ty::F16x2 || dstT == Ty::BF16x2 || dstT == Ty::E4M3x2 ||
               dstT == Ty::E5M2x2) &&
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
  if (base == "ex2")
    op = FloatOp::ApproxEx2;
  else if (base == "lg2")
    op = FloatOp::ApproxLg2;
  else if (base == "sin")
    op = FloatOp::ApproxSin;
  else if (base == "cos")
    op = FloatOp::ApproxCos;
  else if (base == "tanh")
    op = FloatOp::ApproxTanh;
  else if (base == "rsqrt")
    op = FloatOp::ApproxRsqrt;
  else if (base == "rcp")
    op = approx ? FloatOp::ApproxRcp : FloatOp::Rcp;
  else if (base == "sqrt")
    op = approx ? FloatOp::ApproxSqrt : FloatOp::Sqrt;
  else
    return fail("'" + st.opcode + "' is not supported");
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
