//===- PtxOps.h - the handlers the decoder chooses from ---------*- C++ -*-===//
//
// Internal. Each instruction family lives in its own file and exposes a
// function that returns the handler for one operation and type (null when
// the combination is not supported). Operand layout in Inst, as the decoder
// fills it:
//   d[0..]   destinations in PTX order (d[1]: setp's q, shfl's p)
//   s[0..]   sources in PTX order; memory instructions also list their
//            address register last; `target` is the index in s[] of a
//            warp-synchronous instruction's member mask
//   mode     setp's comparison, shfl/vote's mode, mov's pack/unpack, ...
//   mode2    setp's boolean operation
//   flag     setp/vote: the c / a predicate is negated; cvta: `.to`
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXOPS_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXOPS_H

#include "PtxProgram.h"

namespace kpool::emu::ptx {

//===- PtxIntegerOps.cpp
//---------------------------------------------------===//

enum class IntOp : uint8_t {
  Add,
  Sub,
  AddSat,
  SubSat,
  MulLo,
  MulHi,
  MulWide,
  MadLo,
  MadHi,
  MadWide,
  Mul24Lo,
  Mul24Hi,
  Div,
  Rem,
  Min,
  Max,
  Abs,
  Neg,
  And,
  Or,
  Xor,
  Not,
  Cnot,
  Shl,
  Shr,
  Popc,
  Clz,
  Brev,
  Bfind,
  BfindShift,
  Bfe,
  Bfi,
  Prmt,
  Lop3,
  Mov,
  Selp,
};
Handler selectInteger(IntOp op, Ty type);

enum class Cmp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
};
enum class BoolOp : uint8_t { None, And, Or, Xor };
/// setp.cmp[.bool].type: mode = Cmp, mode2 = BoolOp (integer and float).
Handler selectSetp(Ty type);
/// and/or/xor/not/mov on .pred.
Handler selectPredLogic(IntOp op);
/// mov.b32/b64 {a, b}, ... (mode 1: pack d <- s[0..n)), (mode 2: unpack
/// d[0..n) <- s[0]); `size` is the element's bits.
Handler selectPack(bool pack);

//===- PtxFloatOps.cpp
//-----------------------------------------------------===//

enum class FloatOp : uint8_t {
  Add,
  Sub,
  Mul,
  Fma,
  Div,
  Rcp,
  Sqrt,
  Min,
  Max,
  Abs,
  Neg,
  Copysign,
  Testp,
  ApproxEx2,
  ApproxLg2,
  ApproxRcp,
  ApproxSqrt,
  ApproxRsqrt,
  ApproxSin,
  ApproxCos,
  ApproxTanh,
  ApproxDiv,
  FullDiv,
};
/// With in.type, rnd, ftz, sat (and mode: testp's finite, infinite,
/// number, notanumber, normal, subnormal) already decoded.
Handler selectFloat(FloatOp op, const Inst &in);

//===- PtxConvertOps.cpp
//---------------------------------------------------===//

/// cvt with in.type = destination, in.type2 = source (and in.rnd, ftz,
/// sat, flag = relu, mode = 1 for .satfinite).
Handler selectConvert(const Inst &in);

//===- PtxMemoryOps.cpp
//----------------------------------------------------===//

Handler selectLoad();
Handler selectStore();
/// atom/red: mode = AtomOp, type = the operation's type.
enum class AtomOp : uint8_t {
  And,
  Or,
  Xor,
  Cas,
  Exch,
  Add,
  Inc,
  Dec,
  Min,
  Max
};
Handler selectAtomic(AtomOp op, Ty type);
/// cvta{.to}.space: flag = `.to`, space = the state space.
Handler selectCvta();

//===- PtxWarpOps.cpp
//------------------------------------------------------===//

enum class ShflMode : uint8_t { Up, Down, Bfly, Idx };
enum class VoteMode : uint8_t { All, Any, Uni, Ballot };
Handler selectShfl();
Handler selectVote();
Handler selectBarWarpSync();
Handler selectActivemask();
Handler selectClock(bool sixtyFour, bool high);
/// Instructions with no effect on results (membar, fence, nop, prefetch).
Handler selectNop();

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXOPS_H
