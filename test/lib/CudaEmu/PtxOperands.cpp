//===- PtxOperands.cpp - a function's registers, symbols and operands -----===//
//
// FunctionBuilder: the declarations of one function body (registers in
// nested scopes, .local/.shared/.param symbols) and the resolution of an
// instruction's operand texts to slots: registers, immediates and special
// registers (as constant slots), variable addresses, `[base+offset]`.
//
//===----------------------------------------------------------------------===//

#include "PtxDecoder.h"
#include "PtxScanner.h"

#include <cctype>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

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
  while (digits > 0 &&
         std::isdigit(static_cast<unsigned char>(name[digits - 1])))
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
    {"%tid.x", ConstSlot::TidX},
    {"%tid.y", ConstSlot::TidY},
    {"%tid.z", ConstSlot::TidZ},
    {"%ntid.x", ConstSlot::NtidX},
    {"%ntid.y", ConstSlot::NtidY},
    {"%ntid.z", ConstSlot::NtidZ},
    {"%ctaid.x", ConstSlot::CtaidX},
    {"%ctaid.y", ConstSlot::CtaidY},
    {"%ctaid.z", ConstSlot::CtaidZ},
    {"%nctaid.x", ConstSlot::NctaidX},
    {"%nctaid.y", ConstSlot::NctaidY},
    {"%nctaid.z", ConstSlot::NctaidZ},
    {"%laneid", ConstSlot::LaneId},
    {"%warpid", ConstSlot::WarpId},
    {"%nwarpid", ConstSlot::NWarpId},
    {"%smid", ConstSlot::SmId},
    {"%nsmid", ConstSlot::NSmId},
    {"%gridid", ConstSlot::GridId},
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
                (expectPred ? "not a predicate" : "a predicate") + " where " +
                (expectPred ? "one" : "a value") + " is expected";
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
