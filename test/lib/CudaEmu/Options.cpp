//===- Options.cpp - the emulated CUDA driver's environment ---------------===//
//
// The variables cuInit reads (docs/gpu.md, "The emulated CUDA driver"):
//
//   KPOOL_EMU_ORDER=forward|reverse|random  the order runnable warps and
//                                           blocks are picked (forward)
//   KPOOL_EMU_SEED=<n>                      seeds random order; each launch
//                                           mixes in its number (0)
//   KPOOL_EMU_APPROX=nominal|adversarial    .approx instructions (nominal)
//   KPOOL_EMU_APPROX_SEED=<n>               adversarial mode's seed, one per
//                                           process (KPOOL_EMU_SEED)
//   KPOOL_EMU_CHECKS=<list>                 sanitizer checks: all (default),
//                                           none, or a list of memcheck,
//                                           racecheck, synccheck, initcheck;
//                                           -<check> removes one from all
//   KPOOL_EMU_ON_FINDING=exit|abort|report  after sanitizer findings: exit
//                                           with status 86 at exit
//                                           (default), abort at the first,
//                                           or only print them
//   KPOOL_EMU_PROFILE=<file>                append per-launch and per-kernel
//                                           counters (JSON lines)
//   KPOOL_PTX_DUMP=<dir>                    write each module's PTX there
//   KPOOL_PTX_OVERRIDE=<dir>                load <dir>/<module>.ptx instead
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Driver.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

using namespace kpool::emu;
using namespace kpool::emu::driver;

namespace {

const char *get(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool number(const char *name, const char *text, uint64_t &value,
            std::string &error) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 0);
  if (errno || *end || *text == '-') {
    error =
        std::string(name) + " must be an unsigned integer, got '" + text + "'";
    return false;
  }
  value = v;
  return true;
}

std::string directory(const char *text) {
  std::string s(text);
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

} // namespace

bool driver::readSettings(Settings &settings, std::string &error) {
  emu::Options &o = settings.launch;
  if (const char *v = get("KPOOL_EMU_ORDER")) {
    std::string s(v);
    if (s == "forward")
      o.order = Order::Forward;
    else if (s == "reverse")
      o.order = Order::Reverse;
    else if (s == "random")
      o.order = Order::Random;
    else {
      error =
          "KPOOL_EMU_ORDER must be forward, reverse or random, got '" + s + "'";
      return false;
    }
  }
  if (const char *v = get("KPOOL_EMU_SEED"))
    if (!number("KPOOL_EMU_SEED", v, o.seed, error))
      return false;
  o.approxSeed = o.seed;
  if (const char *v = get("KPOOL_EMU_APPROX")) {
    std::string s(v);
    if (s == "nominal")
      o.approx = Approx::Nominal;
    else if (s == "adversarial")
      o.approx = Approx::Adversarial;
    else {
      error =
          "KPOOL_EMU_APPROX must be nominal or adversarial, got '" + s + "'";
      return false;
    }
  }
  if (const char *v = get("KPOOL_EMU_APPROX_SEED"))
    if (!number("KPOOL_EMU_APPROX_SEED", v, o.approxSeed, error))
      return false;
  if (const char *v = get("KPOOL_EMU_CHECKS")) {
    std::string list(v);
    bool *checks[] = {&o.memcheck, &o.racecheck, &o.synccheck, &o.initcheck};
    const char *names[] = {"memcheck", "racecheck", "synccheck", "initcheck"};
    // A list that starts by removing a check starts from all of them.
    bool all = !list.empty() && list[0] == '-';
    for (bool *c : checks)
      *c = all;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
      bool remove = !item.empty() && item[0] == '-';
      std::string name = remove ? item.substr(1) : item;
      bool known = false;
      if (name == "all" || name == "none") {
        for (bool *c : checks)
          *c = (name == "all") != remove;
        known = true;
      }
      for (int i = 0; i < 4; ++i)
        if (name == names[i]) {
          *checks[i] = !remove;
          known = true;
        }
      if (!known) {
        error = "KPOOL_EMU_CHECKS: '" + item +
                "' is not all, none, memcheck, racecheck, synccheck or "
                "initcheck (with an optional '-')";
        return false;
      }
    }
  }
  if (const char *v = get("KPOOL_EMU_ON_FINDING")) {
    std::string s(v);
    if (s == "exit")
      settings.onFinding = OnFinding::Exit;
    else if (s == "abort")
      settings.onFinding = OnFinding::Abort;
    else if (s == "report")
      settings.onFinding = OnFinding::Report;
    else {
      error =
          "KPOOL_EMU_ON_FINDING must be exit, abort or report, got '" + s + "'";
      return false;
    }
  }
  if (const char *v = get("KPOOL_EMU_PROFILE")) {
    settings.profilePath = v;
    o.profile = true;
  }
  if (const char *v = get("KPOOL_PTX_DUMP"))
    settings.dumpDir = directory(v);
  if (const char *v = get("KPOOL_PTX_OVERRIDE"))
    settings.overrideDir = directory(v);
  return true;
}
