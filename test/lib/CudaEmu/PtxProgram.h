//===- PtxProgram.h - predecoded PTX, the executor's form -------*- C++ -*-===//
//
// What the parser (PtxParser.cpp, PtxScanner.cpp, PtxOperands.cpp,
// PtxDecoder.cpp, PtxDecodeArithmetic.cpp) makes of a module's PTX and the
// executor (PtxExecutor.cpp, PtxScheduler.cpp) runs: per kernel, a flat array
// of instructions whose operands are resolved to register slots, each with the
// handler that executes it for the active lanes of one warp.
//
// Registers: every value register (of any width up to 64 bits) is one
// 64-bit slot per lane, stored warp-major (slot * 32 + lane), narrower values
// zero-extended. Predicates are one 32-bit lane mask per warp. Immediates,
// special registers (%tid.x, ...) and symbol addresses are materialized into
// constant slots when a warp starts, so every source operand is a slot.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_LIB_CUDAEMU_PTXPROGRAM_H
#define KPOOL_TEST_LIB_CUDAEMU_PTXPROGRAM_H

#include "Executor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kpool::emu::ptx {

struct Launch;
struct Warp;
struct Inst;

/// Executes `inst` for the lanes of `lanes` (guard already applied).
using Handler = void (*)(Launch &, Warp &, const Inst &, uint32_t lanes);

/// A predicate slot index carries this bit; value slots do not.
constexpr uint32_t kPredBit = 0x80000000u;
constexpr uint32_t kNoSlot = 0xffffffffu;

enum class Space : uint8_t { Generic, Global, Shared, Local, Param, Const };

/// How the scheduler treats an instruction.
enum class Kind : uint8_t {
  Normal,   // handler, then next instruction
  Branch,   // bra: target
  Exit,     // ret (in an entry) / exit
  WarpSync, // shfl.sync, vote.sync, bar.warp.sync, match.sync, redux.sync
  Barrier,  // bar.sync / barrier.sync / bar.arrive
  Trap,     // trap: a fatal finding
};

/// Dynamic instruction classes of the counters.
enum class OpClass : uint8_t {
  Integer,
  Integer64,
  Float,
  Special,
  Memory,
  Control,
  Sync
};

/// Rounding modes (cvt's integer roundings map onto the same four).
enum class Round : uint8_t { RN, RZ, RM, RP, RNA, None };

/// Scalar types as PTX spells them.
enum class Ty : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  B128,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
  E4M3x2,
  E5M2x2,
};

unsigned bitsOf(Ty t);
bool isSigned(Ty t);
bool isFloat(Ty t);

/// One predecoded instruction.
struct Inst {
  Handler fn = nullptr;
  Kind kind = Kind::Normal;
  OpClass cls = OpClass::Integer;
  /// Guard predicate slot (kNoSlot: none) and whether it is negated.
  uint32_t guard = kNoSlot;
  bool guardNeg = false;
  /// Destinations and sources (slots; a predicate slot has kPredBit). The
  /// sources are what the instruction reads, for initcheck.
  uint8_t nd = 0, ns = 0;
  uint32_t d[4] = {kNoSlot, kNoSlot, kNoSlot, kNoSlot};
  uint32_t s[6] = {kNoSlot, kNoSlot, kNoSlot, kNoSlot, kNoSlot, kNoSlot};
  /// Memory operand: space, address register (kNoSlot: none) plus offset;
  /// bytes per element and elements (vector width).
  Space space = Space::Generic;
  uint32_t addrReg = kNoSlot;
  int64_t addrOff = 0;
  uint8_t size = 0, vec = 1;
  /// Operation details the handler reads.
  Ty type = Ty::None, type2 = Ty::None;
  Round rnd = Round::None;
  bool ftz = false, sat = false, flag = false, nc = false;
  uint8_t mode = 0, mode2 = 0;
  /// Bit mask of the destination register's width (loads and cvt extend
  /// to it).
  uint64_t dmask = ~0ull;
  /// Branch target (instruction index) or barrier id slot / member mask
  /// operand index into s[].
  uint32_t target = 0;
  /// The source line in the PTX text (1-based).
  uint32_t line = 0;
};

/// What a constant slot holds when a warp starts.
struct ConstSlot {
  enum Kind : uint8_t {
    Value, // `value`, every lane
    TidX,
    TidY,
    TidZ,
    NtidX,
    NtidY,
    NtidZ,
    CtaidX,
    CtaidY,
    CtaidZ,
    NctaidX,
    NctaidY,
    NctaidZ,
    LaneId,
    WarpId,
    NWarpId,
    SmId,
    NSmId,
    GridId,
    LanemaskEq,
    LanemaskLe,
    LanemaskLt,
    LanemaskGe,
    LanemaskGt,
    DynamicSmemSize,
    TotalSmemSize,
    DynamicSharedBase, // shared-space address of the .extern .shared window
  } kind = Value;
  uint32_t slot = 0;
  uint64_t value = 0;
};

/// A module-scope variable (.global or .const): host storage of the module.
struct ModuleVariable {
  std::string name;
  Space space = Space::Global;
  uint64_t bytes = 0;
  uint32_t align = 1;
  /// Host address of the variable (aligned inside `storage`).
  uint64_t address = 0;
  std::unique_ptr<uint8_t[]> storage;
};

class FunctionImpl final : public Function {
public:
  const std::string &name() const override { return name_; }
  const std::vector<Param> &params() const override { return params_; }
  uint32_t staticSharedBytes() const override { return staticShared; }
  uint32_t maxThreadsPerBlock() const override { return maxThreads; }

  std::string name_;
  std::vector<Param> params_;
  /// Candidate memref descriptors among the parameters (memcheck's view
  /// check): two `.ptr` .u64 parameters (MLIR's allocated and aligned
  /// pointers) at `first`, followed by `plain` .u64 parameters without
  /// `.ptr` -- the offset, sizes and strides (1 + 2 * rank of them), and
  /// possibly .u64 scalars after them, which the PTX cannot tell apart.
  struct Descriptor {
    uint32_t first = 0, plain = 0;
  };
  std::vector<Descriptor> descriptors;
  uint32_t paramBytes = 0;
  uint32_t staticShared = 0;
  /// Offset of the dynamic (.extern .shared) window: static bytes rounded up
  /// to the largest alignment declared.
  uint32_t dynamicSharedOffset = 0;
  uint32_t maxThreads = 1024;
  /// .reqntid (0: none).
  uint32_t reqntid[3] = {0, 0, 0};
  uint32_t localBytes = 0;
  uint32_t numSlots = 0, numPreds = 0;
  std::vector<ConstSlot> constants;
  std::vector<std::pair<uint32_t, uint32_t>> predConstants; // (slot, bits)
  std::vector<Inst> code;
  /// Declared registers, for reports: name prefix (or full name), first
  /// slot, count, whether predicates and whether `%p<N>`-style.
  struct RegisterName {
    std::string name;
    uint32_t base = 0, count = 0;
    bool pred = false, ranged = false;
  };
  std::vector<RegisterName> registerNames;
  /// "%r12" for a slot (kPredBit for predicates); "a constant" otherwise.
  std::string registerName(uint32_t slot) const;
  /// The module this function belongs to (its variables and source text).
  const class ModuleImpl *module = nullptr;
};

class ModuleImpl final : public Module {
public:
  const Function *function(std::string_view name) const override;
  std::vector<std::string> functionNames() const override;

  std::vector<std::unique_ptr<FunctionImpl>> functions;
  std::vector<std::unique_ptr<ModuleVariable>> variables;
  /// The PTX text's lines, for reports.
  std::vector<std::string> lines;
  /// The variable holding [address, address + bytes), or null.
  const ModuleVariable *variableAt(uint64_t address, uint64_t bytes) const;
};

/// Parses and predecodes `ptx` (PtxParser.cpp).
std::unique_ptr<ModuleImpl> parseModule(std::string_view ptx,
                                        std::string &error);

} // namespace kpool::emu::ptx

#endif // KPOOL_TEST_LIB_CUDAEMU_PTXPROGRAM_H
