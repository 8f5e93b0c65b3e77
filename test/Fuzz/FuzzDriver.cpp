//===- FuzzDriver.cpp - a bounded, seeded driver for libFuzzer targets ----===//
//
// Runs a target's LLVMFuzzerTestOneInput without libFuzzer, so that the fuzz
// targets build and run on any machine (the lit suite runs them for a fixed
// seed and count) and the same sources link against libFuzzer when clang's
// fuzzer runtime is there (KPOOL_LIBFUZZER, scripts/fuzz.sh).
//
// Inputs come from the target's LLVMFuzzerCustomMutator when it has one
// (applied to a copy of a corpus entry), otherwise from random bytes. Each
// input runs under a per-input time limit; a crash, an abort or a timeout
// writes the input to <artifact_prefix>{crash,timeout}-<n> and exits
// non-zero, so that lit fails and the input is kept as a repro.
//
// Flags (libFuzzer's spelling): -runs=N -seed=N -max_total_time=S
// -timeout=S -max_len=N -artifact_prefix=P -split_mlir=1, then corpus files
// or directories. A file named on the command line with -runs=0 is replayed
// once (a repro). -split_mlir=1 splits corpus files at `// -----` lines and
// drops `//` comment lines (for the MLIR test files used as seeds).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KPOOL_FUZZ_ASAN 1
#endif
#endif
#ifdef KPOOL_FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc,
                                                           char ***argv);
extern "C" __attribute__((weak)) size_t
LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                        unsigned int seed);

namespace {

std::string artifactPrefix = "./";
// The input being run, for the signal handlers.
const std::vector<uint8_t> *current = nullptr;
volatile sig_atomic_t inHandler = 0;

void writeArtifact(const char *kind) {
  if (!current)
    return;
  std::string path = artifactPrefix + kind + "-" + std::to_string(getpid());
  // Signal context: plain POSIX calls only.
  FILE *f = fopen(path.c_str(), "wb");
  if (f) {
    fwrite(current->data(), 1, current->size(), f);
    fclose(f);
  }
  fprintf(stderr, "==fuzz== %s: input written to %s (%zu bytes)\n", kind,
          path.c_str(), current->size());
}

void onCrash(int sig) {
  if (inHandler)
    _exit(77);
  inHandler = 1;
  fprintf(stderr, "==fuzz== deadly signal %d\n", sig);
  writeArtifact("crash");
  signal(sig, SIG_DFL);
  raise(sig);
}

void onTimeout(int) {
  if (inHandler)
    _exit(77);
  inHandler = 1;
  fprintf(stderr, "==fuzz== timeout: one input ran past the time limit\n");
  writeArtifact("timeout");
  _exit(70);
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

/// Splits MLIR test files into their `// -----` cases, without comments.
void splitMLIR(const std::string &text, std::vector<std::string> &out) {
  std::string chunk;
  std::istringstream in(text);
  std::string line;
  auto flush = [&] {
    if (chunk.find_first_not_of(" \n\t") != std::string::npos)
      out.push_back(chunk);
    chunk.clear();
  };
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 6, "// ---") == 0) {
      flush();
      continue;
    }
    if (first != std::string::npos && line.compare(first, 2, "//") == 0)
      continue;
    chunk += line;
    chunk += '\n';
  }
  flush();
}

void addPath(const std::string &path, bool split,
             std::vector<std::string> &corpus) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    fprintf(stderr, "==fuzz== cannot read %s\n", path.c_str());
    exit(2);
  }
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    if (DIR *dir = opendir(path.c_str())) {
      while (dirent *e = readdir(dir))
        if (e->d_name[0] != '.')
          names.push_back(path + "/" + e->d_name);
      closedir(dir);
    }
    std::sort(names.begin(), names.end()); // deterministic order
    for (const std::string &n : names)
      addPath(n, split, corpus);
    return;
  }
  std::string text;
  if (!readFile(path, text))
    return;
  if (split)
    splitMLIR(text, corpus);
  else
    corpus.push_back(text);
}

bool flag(const char *arg, const char *name, std::string &value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=')
    return false;
  value = arg + n + 1;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);

  long long runs = -1, seed = 1, maxLen = 1 << 16;
  double maxTime = 0, timeout = 60;
  bool split = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (flag(argv[i], "-runs", v))
      runs = atoll(v.c_str());
    else if (flag(argv[i], "-seed", v))
      seed = atoll(v.c_str());
    else if (flag(argv[i], "-max_total_time", v))
      maxTime = atof(v.c_str());
    else if (flag(argv[i], "-timeout", v))
      timeout = atof(v.c_str());
    else if (flag(argv[i], "-max_len", v))
      maxLen = atoll(v.c_str());
    else if (flag(argv[i], "-artifact_prefix", v))
      artifactPrefix = v;
    else if (flag(argv[i], "-split_mlir", v))
      split = v != "0";
    else if (argv[i][0] == '-')
      fprintf(stderr, "==fuzz== ignoring flag %s\n", argv[i]);
    else
      paths.push_back(argv[i]);
  }
  if (runs < 0 && maxTime <= 0)
    runs = 1000;

  std::vector<std::string> corpus;
  for (const std::string &p : paths)
    addPath(p, split, corpus);

#ifdef KPOOL_FUZZ_ASAN
  // ASan reports deadly signals itself (with a stack); keep its handlers and
  // only save the input when it dies.
  __sanitizer_set_death_callback([] { writeArtifact("crash"); });
  signal(SIGABRT, onCrash);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
    signal(sig, onCrash);
#endif
  signal(SIGALRM, onTimeout);
  unsigned perInput = timeout > 0 ? static_cast<unsigned>(timeout + 0.999) : 0;

  std::vector<uint8_t> input;
  current = &input;
  auto runOne = [&] {
    alarm(perInput);
    int result = LLVMFuzzerTestOneInput(input.data(), input.size());
    alarm(0);
    return result;
  };

  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };

  // Every corpus entry once, unmutated, then the mutated inputs. As in
  // libFuzzer, a target returns -1 for an input it rejects (for the IR
  // target: it does not parse); accepted entries are mutated three times as
  // often, and accepted mutants join the corpus (up to kMaxCorpus), so that
  // mutations accumulate.
  std::vector<std::string> accepted, rejected;
  for (const std::string &c : corpus) {
    input.assign(c.begin(), c.end());
    (runOne() == -1 ? rejected : accepted).push_back(c);
  }
  fprintf(stderr,
          "==fuzz== ran %zu corpus inputs (%zu accepted) in %.1f s\n",
          corpus.size(), accepted.size(), elapsed());
  const size_t kMaxCorpus = 4096;

  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  long long n = 0, grown = 0;
  double lastReport = 0;
  for (; runs < 0 || n < runs; ++n) {
    if (maxTime > 0 && elapsed() >= maxTime)
      break;
    if (LLVMFuzzerCustomMutator && !corpus.empty()) {
      bool fromAccepted =
          !accepted.empty() && (rejected.empty() || rng() % 4 != 0);
      const std::vector<std::string> &pool = fromAccepted ? accepted : rejected;
      const std::string &base = pool[rng() % pool.size()];
      size_t cap = std::max<size_t>(static_cast<size_t>(maxLen), base.size());
      input.assign(base.begin(), base.end());
      input.resize(cap);
      size_t size = LLVMFuzzerCustomMutator(input.data(), base.size(), cap,
                                            static_cast<unsigned>(rng()));
      input.resize(std::min(size, cap));
      if (runOne() != -1 && rng() % 4 == 0) {
        std::string mutant(input.begin(), input.end());
        if (accepted.size() < kMaxCorpus)
          accepted.push_back(mutant);
        else
          accepted[rng() % accepted.size()] = mutant;
        ++grown;
      }
    } else {
      size_t size = rng() % (static_cast<size_t>(maxLen) + 1);
      input.resize(size);
      for (uint8_t &b : input)
        b = static_cast<uint8_t>(rng());
      runOne();
    }
    if (elapsed() - lastReport >= 60) {
      lastReport = elapsed();
      fprintf(stderr, "==fuzz== #%lld in %.0f s, corpus %zu\n", n + 1,
              lastReport, accepted.size() + rejected.size());
    }
  }
  fprintf(stderr,
          "==fuzz== done: %lld mutated inputs (seed %lld, %lld kept) in "
          "%.1f s\n",
          n, seed, grown, elapsed());
  printf("fuzz: %lld inputs, no crash, no timeout\n", n);
  return 0;
}
