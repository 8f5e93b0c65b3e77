//===- kpool-ptx-run.cpp - run one PTX kernel on the emulator -------------===//
//
// Test support for test/Emulator: loads a .ptx file with the PTX executor
// (test/lib/CudaEmu), allocates the buffers named on the command line as
// "device" memory, launches one kernel and prints the buffers asked for and
// every finding, so that lit tests are PTX programs plus FileCheck.
//
//   kpool-ptx-run FILE.ptx --kernel k --grid 2 --block 32,2 \
//       --buf out=u32[64] --buf in=f32[64]:iota \
//       --arg buf:out --arg buf:in --arg u32:64 --print out
//
// Buffers: --buf NAME=TYPE[COUNT][:INIT], TYPE one of u8 u16 u32 u64 s32
// s64 f32 f64 bf16 f16, INIT one of zero (default), iota, fill=V,
// values=V,V,..., random=SEED (raw bits). Values are numbers of the type
// (bf16/f16 as floats) or 0x bit patterns.
// Arguments, one per kernel parameter in order: buf:NAME[+BYTES] (its
// address), u8/u16/u32/u64/s32/s64/f32/f64:VALUE.
// Options: --order forward|reverse|random, --seed N, --approx
// nominal|adversarial, --approx-seed N, --quantum N,
// --max-warp-instructions N, --no-memcheck,
// --no-racecheck, --no-synccheck, --no-initcheck, --profile (prints the
// emulated counters), --list (the module's kernels), --parse-only.
//
// Output: "NAME[i] = VALUE" per element printed, "finding: ..." per
// finding, and "launch: completed" or "launch: failed" (with "(illegal
// address)" or "(misaligned address)" after a memory error, with or without
// memcheck). Exit status 0 when
// the launch completed without findings, 1 otherwise, 2 on bad usage or
// PTX that does not parse.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#include "PtxNumerics.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace kpool::emu;

namespace {

struct Buffer {
  std::string name, type;
  size_t count = 0, elemBytes = 0;
  std::unique_ptr<uint8_t[]> storage;
  uint8_t *data = nullptr;
  size_t bytes() const { return count * elemBytes; }
};

class Buffers final : public MemoryMap {
public:
  std::vector<std::unique_ptr<Buffer>> all;
  std::vector<Allocation> allocations;
  const Allocation *find(uint64_t address, uint64_t bytes) const override {
    for (const Allocation &a : allocations)
      if (address >= a.base && address + bytes <= a.base + a.bytes &&
          address + bytes >= address)
        return &a;
    return nullptr;
  }
  Buffer *named(const std::string &n) {
    for (auto &b : all)
      if (b->name == n)
        return b.get();
    return nullptr;
  }
};

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr, "kpool-ptx-run: %s\n", why.c_str());
  std::exit(2);
}

size_t typeBytes(const std::string &t) {
  if (t == "u8")
    return 1;
  if (t == "u16" || t == "bf16" || t == "f16")
    return 2;
  if (t == "u32" || t == "s32" || t == "f32")
    return 4;
  if (t == "u64" || t == "s64" || t == "f64")
    return 8;
  return 0;
}

/// The bits of `text` as a value of `type` (numbers of the type or 0x...).
uint64_t parseValue(const std::string &type, const std::string &text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
    return std::strtoull(text.c_str(), nullptr, 16);
  char *end = nullptr;
  if (type == "f32" || type == "bf16" || type == "f16") {
    float f = std::strtof(text.c_str(), &end);
    uint32_t bits = numerics::bitsOf(f);
    if (type == "bf16")
      return numerics::f32ToBF16(bits, numerics::Mode::RN, false, false);
    if (type == "f16")
      return numerics::f32ToF16(bits, numerics::Mode::RN, false, false);
    return bits;
  }
  if (type == "f64")
    return numerics::bitsOf(std::strtod(text.c_str(), &end));
  if (text[0] == '-')
    return uint64_t(std::strtoll(text.c_str(), &end, 0));
  return std::strtoull(text.c_str(), &end, 0);
}

std::string formatValue(const std::string &type, uint64_t bits) {
  char buf[96];
  if (type == "f32") {
    std::snprintf(buf, sizeof(buf), "%.9g (0x%08" PRIx32 ")",
                  double(numerics::floatOf(uint32_t(bits))), uint32_t(bits));
  } else if (type == "f64") {
    std::snprintf(buf, sizeof(buf), "%.17g (0x%016" PRIx64 ")",
                  numerics::doubleOf(bits), bits);
  } else if (type == "bf16" || type == "f16") {
    uint32_t f = type == "bf16" ? numerics::bf16ToF32(uint16_t(bits))
                                : numerics::f16ToF32(uint16_t(bits));
    std::snprintf(buf, sizeof(buf), "%.9g (0x%04" PRIx32 ")",
                  double(numerics::floatOf(f)), uint32_t(bits));
  } else if (type == "s32") {
    std::snprintf(buf, sizeof(buf), "%" PRId32, int32_t(uint32_t(bits)));
  } else if (type == "s64") {
    std::snprintf(buf, sizeof(buf), "%" PRId64, int64_t(bits));
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " (0x%" PRIx64 ")", bits, bits);
  }
  return buf;
}

Buffer *makeBuffer(Buffers &bufs, const std::string &spec) {
  // NAME=TYPE[COUNT][:INIT]
  size_t eq = spec.find('='), lb = spec.find('['), rb = spec.find(']');
  if (eq == std::string::npos || lb == std::string::npos ||
      rb == std::string::npos || lb < eq || rb < lb)
    usage("bad --buf '" + spec + "' (expected NAME=TYPE[COUNT][:INIT])");
  auto b = std::make_unique<Buffer>();
  b->name = spec.substr(0, eq);
  b->type = spec.substr(eq + 1, lb - eq - 1);
  b->elemBytes = typeBytes(b->type);
  if (!b->elemBytes)
    usage("unknown buffer type '" + b->type + "'");
  b->count =
      std::strtoull(spec.substr(lb + 1, rb - lb - 1).c_str(), nullptr, 0);
  // Exactly the asked bytes, 256-aligned, so that one byte more is outside.
  b->storage.reset(new uint8_t[b->bytes() + 256]());
  b->data = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(b->storage.get()) + 255) & ~uintptr_t(255));
  std::string init = rb + 1 < spec.size() && spec[rb + 1] == ':'
                         ? spec.substr(rb + 2)
                         : "zero";
  auto put = [&](size_t i, uint64_t v) {
    std::memcpy(b->data + i * b->elemBytes, &v, b->elemBytes);
  };
  if (init == "zero") {
  } else if (init == "iota") {
    for (size_t i = 0; i < b->count; ++i)
      put(i, parseValue(b->type, std::to_string(i)));
  } else if (init.rfind("fill=", 0) == 0) {
    uint64_t v = parseValue(b->type, init.substr(5));
    for (size_t i = 0; i < b->count; ++i)
      put(i, v);
  } else if (init.rfind("values=", 0) == 0) {
    std::stringstream ss(init.substr(7));
    std::string item;
    size_t i = 0;
    while (std::getline(ss, item, ',')) {
      if (i >= b->count)
        usage("too many values for buffer '" + b->name + "'");
      put(i++, parseValue(b->type, item));
    }
  } else if (init.rfind("random=", 0) == 0) {
    uint64_t x = std::strtoull(init.c_str() + 7, nullptr, 0);
    for (size_t i = 0; i < b->bytes(); ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      b->data[i] = uint8_t(x >> 56);
    }
  } else {
    usage("unknown buffer initializer '" + init + "'");
  }
  bufs.allocations.push_back(
      Allocation{reinterpret_cast<uint64_t>(b->data), b->bytes()});
  bufs.all.push_back(std::move(b));
  return bufs.all.back().get();
}

Dim3 parseDim(const std::string &s) {
  Dim3 d;
  uint32_t v[3] = {1, 1, 1};
  std::stringstream ss(s);
  std::string item;
  int n = 0;
  while (std::getline(ss, item, ',') && n < 3)
    v[n++] = uint32_t(std::strtoul(item.c_str(), nullptr, 0));
  d.x = v[0];
  d.y = v[1];
  d.z = v[2];
  return d;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, kernel;
  Dim3 grid, block;
  uint32_t shared = 0;
  Options options;
  Buffers bufs;
  std::vector<std::string> args, prints;
  bool list = false, parseOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        usage("'" + a + "' needs a value");
      return argv[++i];
    };
    if (a == "--kernel")
      kernel = next();
    else if (a == "--grid")
      grid = parseDim(next());
    else if (a == "--block")
      block = parseDim(next());
    else if (a == "--shared")
      shared = uint32_t(std::strtoul(next().c_str(), nullptr, 0));
    else if (a == "--buf")
      makeBuffer(bufs, next());
    else if (a == "--arg")
      args.push_back(next());
    else if (a == "--print")
      prints.push_back(next());
    else if (a == "--seed")
      options.seed = std::strtoull(next().c_str(), nullptr, 0);
    else if (a == "--approx-seed")
      options.approxSeed = std::strtoull(next().c_str(), nullptr, 0);
    else if (a == "--quantum")
      options.quantum = uint32_t(std::strtoul(next().c_str(), nullptr, 0));
    else if (a == "--max-warp-instructions")
      options.maxWarpInstructions = std::strtoull(next().c_str(), nullptr, 0);
    else if (a == "--order") {
      std::string o = next();
      options.order = o == "reverse"  ? Order::Reverse
                      : o == "random" ? Order::Random
                      : o == "forward"
                          ? Order::Forward
                          : (usage("bad --order '" + o + "'"), Order::Forward);
    } else if (a == "--approx") {
      std::string o = next();
      if (o != "nominal" && o != "adversarial")
        usage("bad --approx '" + o + "'");
      options.approx =
          o == "adversarial" ? Approx::Adversarial : Approx::Nominal;
    } else if (a == "--no-memcheck")
      options.memcheck = false;
    else if (a == "--no-racecheck")
      options.racecheck = false;
    else if (a == "--no-synccheck")
      options.synccheck = false;
    else if (a == "--no-initcheck")
      options.initcheck = false;
    else if (a == "--profile")
      options.profile = true;
    else if (a == "--list")
      list = true;
    else if (a == "--parse-only")
      parseOnly = true;
    else if (!a.empty() && a[0] == '-')
      usage("unknown option '" + a + "'");
    else if (file.empty())
      file = a;
    else
      usage("more than one input file");
  }
  if (file.empty())
    usage("no input file");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    usage("cannot read '" + file + "'");
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  std::unique_ptr<Module> module = loadModule(text.str(), error);
  if (!module) {
    std::fprintf(stderr, "kpool-ptx-run: %s: %s\n", file.c_str(),
                 error.c_str());
    return 2;
  }
  if (list || parseOnly) {
    for (const std::string &n : module->functionNames()) {
      const Function *f = module->function(n);
      std::printf("kernel %s: %zu parameters, %u bytes of static shared "
                  "memory, at most %u threads per block\n",
                  n.c_str(), f->params().size(), f->staticSharedBytes(),
                  f->maxThreadsPerBlock());
    }
    return 0;
  }
  if (kernel.empty() && module->functionNames().size() == 1)
    kernel = module->functionNames()[0];
  const Function *fn = module->function(kernel);
  if (!fn)
    usage("no kernel '" + kernel + "' in '" + file + "'");
  if (args.size() != fn->params().size())
    usage("kernel '" + kernel + "' takes " +
          std::to_string(fn->params().size()) + " parameters, got " +
          std::to_string(args.size()) + " --arg");
  std::vector<std::vector<uint8_t>> values;
  std::vector<void *> pointers;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    size_t colon = a.find(':');
    if (colon == std::string::npos)
      usage("bad --arg '" + a + "'");
    std::string kind = a.substr(0, colon), v = a.substr(colon + 1);
    uint64_t bits;
    size_t size;
    if (kind == "buf") {
      size_t plus = v.find_first_of("+-");
      Buffer *b = bufs.named(v.substr(0, plus));
      if (!b)
        usage("no buffer '" + v.substr(0, plus) + "'");
      bits = reinterpret_cast<uint64_t>(b->data);
      if (plus != std::string::npos)
        bits += uint64_t(std::strtoll(v.c_str() + plus, nullptr, 0));
      size = 8;
    } else {
      size = typeBytes(kind == "s32" ? "u32" : kind == "s64" ? "u64" : kind);
      if (!size)
        usage("bad --arg kind '" + kind + "'");
      bits = parseValue(kind, v);
    }
    if (size != fn->params()[i].size)
      usage("parameter " + std::to_string(i) + " has " +
            std::to_string(fn->params()[i].size) + " bytes, --arg '" + a +
            "' gives " + std::to_string(size));
    values.emplace_back(size);
    std::memcpy(values.back().data(), &bits, size);
  }
  for (auto &v : values)
    pointers.push_back(v.data());
  LaunchResult r =
      launch(*fn, grid, block, shared, pointers.data(), bufs, options);
  for (const std::string &p : prints) {
    Buffer *b = bufs.named(p);
    if (!b)
      usage("no buffer '" + p + "' to print");
    for (size_t i = 0; i < b->count; ++i) {
      uint64_t v = 0;
      std::memcpy(&v, b->data + i * b->elemBytes, b->elemBytes);
      std::printf("%s[%zu] = %s\n", b->name.c_str(), i,
                  formatValue(b->type, v).c_str());
    }
  }
  for (const Finding &f : r.findings)
    std::printf("finding: %s\n", f.message.c_str());
  if (options.profile) {
    const Counters &c = r.counters;
    std::printf("emulated counters: threads %" PRIu64 ", thread-instructions: "
                "integer %" PRIu64 ", integer64 %" PRIu64 ", float %" PRIu64
                ", special %" PRIu64 ", memory %" PRIu64 ", control %" PRIu64
                ", sync %" PRIu64 "\n",
                c.threads, c.integer, c.integer64, c.floating, c.special,
                c.memory, c.control, c.sync);
    std::printf("emulated warp-instructions %" PRIu64 ", active lanes %" PRIu64
                "\n",
                c.warpInstructions, c.activeLanes);
    std::printf("emulated global loads: %" PRIu64 " sectors, %" PRIu64
                " lines, %" PRIu64 " bytes; stores: %" PRIu64
                " sectors, %" PRIu64 " lines, %" PRIu64 " bytes\n",
                c.globalLoadSectors, c.globalLoadLines, c.globalLoadBytes,
                c.globalStoreSectors, c.globalStoreLines, c.globalStoreBytes);
  }
  std::printf("launch: %s\n", r.completed        ? "completed"
                              : r.misaligned     ? "failed (misaligned address)"
                              : r.illegalAddress ? "failed (illegal address)"
                                                 : "failed");
  return r.completed && r.findings.empty() ? 0 : 1;
}
