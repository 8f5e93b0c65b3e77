//===- PtxMemoryOps.cpp - ld, st, atom/red, cvta and memcheck -------------===//
//
// Every access of a warp is resolved lane by lane to a host address: global
// and generic addresses are host addresses (the driver's allocations, the
// module's variables); a generic address inside the block's shared window,
// a thread's local frame or the parameter buffer is that space. Before any
// byte moves the whole warp access is checked (memcheck): alignment to the
// access size, bounds of the state space, and for global memory a live
// allocation that holds it (one MemoryMap::find over the warp's span, lane
// by lane only when that fails). A failing access is reported and stops
// the launch, as the illegal address stops a real kernel, and nothing
// outside the checked ranges is ever touched.
//
//===----------------------------------------------------------------------===//

#include "PtxMachine.h"
#include "PtxNumerics.h"
#include "PtxOps.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

using namespace kpool::emu;
using namespace kpool::emu::ptx;

namespace {

struct Resolved {
  uint8_t *host[32];
  uint64_t address[32]; // for reports: the address as the kernel saw it
  uint64_t shadow[32];  // host address (global) or offset (shared)
  uint8_t space[32];    // Space of each lane
  uint32_t global = 0, shared = 0;
};

const char *spaceName(Space s) {
  switch (s) {
  case Space::Global:
    return "global";
  case Space::Shared:
    return "shared";
  case Space::Local:
    return "local";
  case Space::Param:
    return "param";
  case Space::Const:
    return "const";
  case Space::Generic:
    return "generic";
  }
  return "?";
}

/// Resolves and checks the lanes' accesses of `bytes` each; false (after
/// a fatal report) when one is invalid.
bool resolve(Launch &L, Warp &w, const Inst &in, uint32_t lanes, uint32_t bytes,
             const char *verb, bool write, Resolved &r) {
  const uint64_t *base = in.addrReg != kNoSlot ? w.reg(in.addrReg) : nullptr;
  uint64_t sharedBase = reinterpret_cast<uint64_t>(L.shared);
  uint64_t localBase = reinterpret_cast<uint64_t>(w.local);
  uint64_t paramBase = reinterpret_cast<uint64_t>(L.params.data());
  uint64_t lo = ~0ull, hi = 0;
  auto bad = [&](uint32_t l, Space sp, const std::string &why) {
    L.report(Finding::Kind::Memcheck, true, &w, l, &in,
             std::string("invalid ") + spaceName(sp) + " " + verb + " of " +
                 std::to_string(bytes) + " bytes at " +
                 formatAddress(r.address[l]) + ": " + why);
    return false;
  };
  bool ok = true;
  forLanes(lanes, [&](uint32_t l) {
    if (!ok)
      return;
    uint64_t a = (base ? base[l] : 0) + uint64_t(in.addrOff);
    r.address[l] = a;
    Space sp = in.space;
    uint64_t off = a;
    if (sp == Space::Generic) {
      if (L.sharedBytes && a - sharedBase < L.sharedBytes) {
        sp = Space::Shared;
        off = a - sharedBase;
      } else if (L.localStride && a - localBase < 32ull * L.localStride) {
        sp = Space::Local;
        off = a - localBase - uint64_t(l) * L.localStride;
        if ((a - localBase) / L.localStride != l) {
          ok = bad(l, sp, "the address is in another thread's local memory");
          return;
        }
      } else if (a - paramBase < L.params.size() && !L.params.empty()) {
        sp = Space::Param;
        off = a - paramBase;
      } else {
        sp = Space::Global;
      }
    }
    r.space[l] = uint8_t(sp);
    if (off % bytes != 0) {
      ok = bad(l, sp,
               "misaligned: the address must be a multiple of " +
                   std::to_string(bytes));
      return;
    }
    switch (sp) {
    case Space::Shared:
      if (off + bytes > L.sharedBytes || off + bytes < off) {
        ok = bad(l, sp,
                 "outside the block's " + std::to_string(L.sharedBytes) +
                     " bytes of shared memory");
        return;
      }
      r.host[l] = L.shared + off;
      r.shadow[l] = off;
      r.shared |= 1u << l;
      break;
    case Space::Local:
      if (off + bytes > L.fn.localBytes || off + bytes < off) {
        ok = bad(l, sp,
                 "outside the thread's " + std::to_string(L.fn.localBytes) +
                     " bytes of local memory");
        return;
      }
      r.host[l] = w.local + uint64_t(l) * L.localStride + off;
      break;
    case Space::Param:
      if (write) {
        ok = bad(l, sp, "kernel parameters are read-only");
        return;
      }
      if (off + bytes > L.params.size() || off + bytes < off) {
        ok = bad(l, sp,
                 "outside the " + std::to_string(L.params.size()) +
                     " bytes of kernel parameters");
        return;
      }
      r.host[l] = L.params.data() + off;
      break;
    case Space::Const: {
      const ModuleVariable *v = L.module.variableAt(a, bytes);
      if (!v || v->space != Space::Const) {
        ok = bad(l, sp, "outside every .const variable of the module");
        return;
      }
      r.host[l] = reinterpret_cast<uint8_t *>(a);
      break;
    }
    default:
      r.host[l] = reinterpret_cast<uint8_t *>(a);
      r.shadow[l] = a;
      r.global |= 1u << l;
      lo = std::min(lo, a);
      hi = std::max(hi, a + bytes);
      break;
    }
  });
  if (!ok || !r.global)
    return ok;
  if (hi > lo && L.memory.find(lo, hi - lo))
    return true;
  forLanes(r.global, [&](uint32_t l) {
    if (!ok)
      return;
    uint64_t a = r.address[l];
    if (a + bytes < a ||
        (!L.memory.find(a, bytes) && !L.module.variableAt(a, bytes))) {
      ok = bad(l, Space::Global,
               a + bytes < a ? std::string("the range wraps around")
                             : "outside every live allocation");
    }
  });
  return ok;
}

/// Counts the sectors (32 B) and lines (128 B) the lanes' global accesses
/// touch, and the bytes they ask for.
void countGlobal(Launch &L, const Resolved &r, uint32_t bytes, bool store) {
  if (!r.global)
    return;
  uint64_t sectors[64], lines[64];
  unsigned ns = 0, nl = 0, n = 0;
  forLanes(r.global, [&](uint32_t l) {
    uint64_t a = r.address[l];
    for (uint64_t s = a >> 5; s <= (a + bytes - 1) >> 5 && ns < 64; ++s)
      sectors[ns++] = s;
    for (uint64_t s = a >> 7; s <= (a + bytes - 1) >> 7 && nl < 64; ++s)
      lines[nl++] = s;
    ++n;
  });
  std::sort(sectors, sectors + ns);
  std::sort(lines, lines + nl);
  uint64_t ds = uint64_t(std::unique(sectors, sectors + ns) - sectors);
  uint64_t dl = uint64_t(std::unique(lines, lines + nl) - lines);
  Counters &c = L.counters;
  (store ? c.globalStoreSectors : c.globalLoadSectors) += ds;
  (store ? c.globalStoreLines : c.globalLoadLines) += dl;
  (store ? c.globalStoreBytes : c.globalLoadBytes) += uint64_t(n) * bytes;
}

void sanitize(Launch &L, Warp &w, const Inst &in, const Resolved &r,
              uint32_t bytes, AccessKind kind) {
  if (!L.sanitizer.tracking())
    return;
  forLanes(r.global | r.shared, [&](uint32_t l) {
    checkAccess(L, w, l, in, (r.shared >> l) & 1, r.shadow[l], bytes, kind);
  });
}

void load(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  uint32_t size = in.size, total = size * in.vec;
  Resolved r;
  if (!resolve(L, w, in, lanes, total, "read", false, r))
    return;
  bool sign = isSigned(in.type);
  uint64_t signBit = size < 8 ? uint64_t(1) << (size * 8 - 1) : 0;
  uint64_t valueMask = size < 8 ? (signBit << 1) - 1 : ~0ull;
  forLanes(lanes, [&](uint32_t l) {
    for (unsigned v = 0; v < in.vec; ++v) {
      uint64_t x = 0;
      std::memcpy(&x, r.host[l] + v * size, size);
      if (sign && (x & signBit))
        x |= ~valueMask;
      w.reg(in.d[v])[l] = x & in.dmask;
    }
  });
  if (L.options.profile)
    countGlobal(L, r, total, false);
  sanitize(L, w, in, r, total,
           in.nc ? AccessKind::ReadNonCoherent : AccessKind::Read);
}

void store(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  uint32_t size = in.size, total = size * in.vec;
  Resolved r;
  if (!resolve(L, w, in, lanes, total, "write", true, r))
    return;
  sanitize(L, w, in, r, total, AccessKind::Write);
  forLanes(lanes, [&](uint32_t l) {
    for (unsigned v = 0; v < in.vec; ++v) {
      uint64_t x = w.reg(in.s[v])[l];
      std::memcpy(r.host[l] + v * size, &x, size);
    }
  });
  if (L.options.profile)
    countGlobal(L, r, total, true);
}

template <class T>
T applyAtomic(AtomOp op, T old, T b, T c, bool sg, bool isFloat, bool ftz) {
  using S = std::make_signed_t<T>;
  switch (op) {
  case AtomOp::And:
    return old & b;
  case AtomOp::Or:
    return old | b;
  case AtomOp::Xor:
    return old ^ b;
  case AtomOp::Cas:
    return old == b ? c : old;
  case AtomOp::Exch:
    return b;
  case AtomOp::Add:
    if (isFloat) {
      if constexpr (sizeof(T) == 4) {
        // atom.add.f32 on global memory flushes subnormals (ISA).
        return T(numerics::addF32(uint32_t(old), uint32_t(b),
                                  numerics::Mode::RN, ftz, false));
      } else {
        double x =
            numerics::doubleOf(uint64_t(old)) + numerics::doubleOf(uint64_t(b));
        return T(numerics::canonicalF64(x));
      }
    }
    return T(old + b);
  case AtomOp::Inc:
    return old >= b ? T(0) : T(old + 1);
  case AtomOp::Dec:
    return (old == 0 || old > b) ? b : T(old - 1);
  case AtomOp::Min:
    return (sg ? S(b) < S(old) : b < old) ? b : old;
  case AtomOp::Max:
    return (sg ? S(b) > S(old) : b > old) ? b : old;
  }
  return old;
}

template <class T, bool Signed, bool Float>
void atomic(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  Resolved r;
  if (!resolve(L, w, in, lanes, sizeof(T), "atomic", true, r))
    return;
  sanitize(L, w, in, r, sizeof(T), AccessKind::Atomic);
  AtomOp op = AtomOp(in.mode);
  const uint64_t *b = w.reg(in.s[0]);
  const uint64_t *c = op == AtomOp::Cas ? w.reg(in.s[1]) : b;
  uint64_t *d = w.reg(in.d[0]);
  // The order of the lanes' operations is the launch's order.
  uint32_t order[32], n = 0;
  forLanes(lanes, [&](uint32_t l) { order[n++] = l; });
  if (L.options.order == Order::Reverse)
    std::reverse(order, order + n);
  else if (L.options.order == Order::Random)
    for (uint32_t i = n; i > 1; --i)
      std::swap(order[i - 1], order[L.random() % i]);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t l = order[k];
    T *p = reinterpret_cast<T *>(r.host[l]);
    T bv = T(b[l]), cv = T(c[l]);
    bool ftz = Float && sizeof(T) == 4 && !((r.shared >> l) & 1);
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST), desired;
    do {
      desired = applyAtomic<T>(op, old, bv, cv, Signed, Float, ftz);
    } while (!__atomic_compare_exchange_n(p, &old, desired, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    d[l] = uint64_t(old) & in.dmask;
  }
  if (L.options.profile) {
    countGlobal(L, r, sizeof(T), false);
    countGlobal(L, r, sizeof(T), true);
  }
}

void cvta(Launch &L, Warp &w, const Inst &in, uint32_t lanes) {
  uint64_t *d = w.reg(in.d[0]);
  const uint64_t *a = w.reg(in.s[0]);
  bool to = in.flag;
  forLanes(lanes, [&](uint32_t l) {
    uint64_t base = 0;
    switch (in.space) {
    case Space::Shared:
      base = reinterpret_cast<uint64_t>(L.shared);
      break;
    case Space::Local:
      base = reinterpret_cast<uint64_t>(w.local) + uint64_t(l) * L.localStride;
      break;
    case Space::Param:
      base = reinterpret_cast<uint64_t>(L.params.data());
      break;
    default:
      break; // global and const addresses are host addresses
    }
    d[l] = to ? a[l] - base : a[l] + base;
  });
}

} // namespace

Handler kpool::emu::ptx::selectLoad() { return load; }
Handler kpool::emu::ptx::selectStore() { return store; }
Handler kpool::emu::ptx::selectCvta() { return cvta; }

Handler kpool::emu::ptx::selectAtomic(AtomOp op, Ty t) {
  bool fl = t == Ty::F32 || t == Ty::F64;
  if (fl && op != AtomOp::Add && op != AtomOp::Exch && op != AtomOp::Cas)
    return nullptr;
  if ((op == AtomOp::Inc || op == AtomOp::Dec) && t != Ty::U32)
    return nullptr;
  switch (bitsOf(t)) {
  case 32:
    if (fl)
      return op == AtomOp::Add ? atomic<uint32_t, false, true>
                               : atomic<uint32_t, false, false>;
    return isSigned(t) ? atomic<uint32_t, true, false>
                       : atomic<uint32_t, false, false>;
  case 64:
    if (fl)
      return op == AtomOp::Add ? atomic<uint64_t, false, true>
                               : atomic<uint64_t, false, false>;
    return isSigned(t) ? atomic<uint64_t, true, false>
                       : atomic<uint64_t, false, false>;
  default:
    return nullptr;
  }
}
