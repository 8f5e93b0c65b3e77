//===- PtxMemoryOps.cpp - ld, st, atom/red, cvta and memcheck -------------===//
//
// Every access of a warp is resolved lane by lane to a host address: global
// and generic addresses are host addresses (the driver's allocations, the
// module's variables); a generic address inside the block's shared window,
// a thread's local frame or the parameter buffer is that space. Before any
// byte moves the whole warp access is checked (memcheck): alignment to the
// access size, bounds of the state space, and for global memory a live
// allocation that holds it (one MemoryMap::find over the warp's span, lane
// by lane only when that fails). A failing access stops the launch, as the
// illegal address stops a real kernel, and nothing outside the checked
// ranges is ever touched, whatever Options::memcheck says; memcheck makes
// it a sanitizer finding (else an execution error) and adds the view check
// (buildViews below): an access inside an allocation but outside every
// view the kernel's memref parameters describe there is reported.
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

const AllocationViews *viewsOf(Launch &L, const Allocation &a) {
  if (L.lastViews < L.views.size() && L.views[L.lastViews].base == a.base)
    return &L.views[L.lastViews];
  for (size_t i = 0; i < L.views.size(); ++i)
    if (L.views[i].base == a.base) {
      L.lastViews = i;
      return &L.views[i];
    }
  return nullptr;
}

bool inRanges(const AllocationViews &v, uint64_t lo, uint64_t hi) {
  for (const ViewRange &range : v.ranges)
    if (lo >= range.lo && hi <= range.hi)
      return true;
  return false;
}

/// memcheck's view check of the `lanes`' accesses in allocation `a`, whose
/// addresses span [lo, hi): reports the first lane outside every view the
/// kernel's memref parameters describe in it (the access itself is inside
/// the allocation and goes on).
void checkViews(Launch &L, Warp &w, const Inst &in, const Allocation &a,
                uint32_t lanes, const Resolved &r, uint32_t bytes,
                const char *verb, uint64_t lo, uint64_t hi) {
  const AllocationViews *v = viewsOf(L, a);
  if (!v || !v->checked || inRanges(*v, lo, hi))
    return;
  bool reported = false;
  forLanes(lanes, [&](uint32_t l) {
    uint64_t x = r.address[l];
    if (reported || inRanges(*v, x, x + bytes))
      return;
    reported = true;
    std::string views;
    for (const ViewRange &range : v->ranges)
      views += (views.empty() ? "" : ", ") + std::string("param ") +
               std::to_string(range.param) + ": bytes " +
               std::to_string(range.lo - a.base) + ".." +
               std::to_string(range.hi - a.base);
    L.report(
        Finding::Kind::Memcheck, false, &w, l, &in,
        std::string("global ") + verb + " of " + std::to_string(bytes) +
            " bytes at " + formatAddress(x) + " (byte " +
            std::to_string(x - a.base) + " of the " + std::to_string(a.bytes) +
            "-byte allocation at " + formatAddress(a.base) +
            ") outside every view the kernel's memref parameters "
            "describe in it (" +
            (views.empty() ? std::string("none: empty views") : views) + ")");
  });
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
    // The access stops the launch whether or not memcheck reports it.
    L.illegalAddress = true;
    L.report(L.options.memcheck ? Finding::Kind::Memcheck
                                : Finding::Kind::Execution,
             true, &w, l, &in,
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
      L.misaligned = true;
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
  if (hi > lo) {
    if (const Allocation *a = L.memory.find(lo, hi - lo)) {
      if (!L.views.empty())
        checkViews(L, w, in, *a, r.global, r, bytes, verb, lo, hi);
      return true;
    }
  }
  forLanes(r.global, [&](uint32_t l) {
    if (!ok)
      return;
    uint64_t a = r.address[l];
    const Allocation *in_ = a + bytes < a ? nullptr : L.memory.find(a, bytes);
    if (a + bytes < a || (!in_ && !L.module.variableAt(a, bytes))) {
      ok = bad(l, Space::Global,
               a + bytes < a ? std::string("the range wraps around")
                             : "outside every live allocation");
      return;
    }
    if (in_ && !L.views.empty())
      checkViews(L, w, in, *in_, 1u << l, r, bytes, verb, a, a + bytes);
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

void kpool::emu::ptx::buildViews(Launch &L) {
  const FunctionImpl &fn = L.fn;
  L.views.clear();
  L.lastViews = 0;
  if (!L.options.memcheck || fn.descriptors.empty())
    return;
  auto word = [&](uint32_t i) {
    uint64_t v = 0;
    std::memcpy(&v, L.params.data() + fn.params_[i].offset, 8);
    return v;
  };
  auto entry = [&](const Allocation &a) -> AllocationViews & {
    for (AllocationViews &v : L.views)
      if (v.base == a.base)
        return v;
    L.views.push_back(AllocationViews{a.base, a.bytes, true, {}});
    return L.views.back();
  };
  std::vector<bool> explained(fn.params_.size(), false);
  for (const FunctionImpl::Descriptor &d : fn.descriptors) {
    uint64_t aligned = word(d.first + 1);
    const Allocation *a = L.memory.find(aligned, 1);
    if (!a)
      continue; // null, or not device memory: the allocation check only
    explained[d.first] = explained[d.first + 1] = true;
    AllocationViews &v = entry(*a);
    // The PTX says only that `plain` .u64 parameters follow the pointers:
    // the offset, sizes and strides of some rank r, then maybe .u64
    // scalars. Every reading (r = 0, 1, ...) whose view fits the
    // allocation for some element size counts, the true one among them,
    // so the union of their ranges holds every access the true view
    // allows. The element size is not in the PTX either: each reading
    // takes the hull of its ranges for element sizes 1 up to the largest
    // of 8, 4, 2, 1 that fits, which holds the true one. A view that fits
    // no reading (it overruns its allocation) leaves the allocation
    // unchecked.
    int64_t offset = int64_t(word(d.first + 2));
    bool readable = false;
    ViewRange hull{~0ull, 0, d.first + 1};
    for (uint32_t rank = 0; 1 + 2 * rank <= d.plain; ++rank) {
      __int128 first = offset, last = offset; // elements, inclusive
      bool empty = false, sane = true;
      for (uint32_t k = 0; k < rank; ++k) {
        int64_t size = int64_t(word(d.first + 3 + k));
        int64_t stride = int64_t(word(d.first + 3 + rank + k));
        if (size < 0 || size > (int64_t(1) << 48)) {
          sane = false;
          break;
        }
        if (size == 0) {
          empty = true;
          continue;
        }
        __int128 extent = __int128(size - 1) * stride;
        (extent < 0 ? first : last) += extent;
      }
      if (!sane)
        continue;
      if (empty) {
        readable = true; // an empty view: nothing to add
        continue;
      }
      for (int64_t e : {8, 4, 2, 1}) {
        // The hull over element sizes 1..e (a smaller one fits when e
        // does).
        __int128 lo = __int128(aligned) + (first < 0 ? e * first : first);
        __int128 hi =
            __int128(aligned) + (last < 0 ? last + 1 : e * (last + 1));
        if (lo < __int128(a->base) || hi > __int128(a->base) + a->bytes)
          continue;
        hull.lo = std::min(hull.lo, uint64_t(lo));
        hull.hi = std::max(hull.hi, uint64_t(hi));
        readable = true;
        break;
      }
    }
    // One range per descriptor: the hull of its readings' (a superset of
    // their union).
    if (hull.lo < hull.hi)
      v.ranges.push_back(hull);
    if (!readable)
      v.checked = false;
  }
  // Any other parameter that points into an allocation with views: the
  // kernel may reach it through that pointer, anywhere.
  for (uint32_t i = 0; i < fn.params_.size(); ++i) {
    if (explained[i] || fn.params_[i].size != 8)
      continue;
    if (const Allocation *a = L.memory.find(word(i), 1))
      for (AllocationViews &v : L.views)
        if (v.base == a->base)
          v.checked = false;
  }
}

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
