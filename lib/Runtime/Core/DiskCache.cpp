//===- DiskCache.cpp - the disk cache of compiled kernels -----------------===//
//
// The entries of kpool/Runtime/KernelCache.h. An entry file:
//
//   magic "KPOOLKC1"   8 bytes
//   key bytes          uint64
//   contents bytes     uint64
//   key checksum       uint64 (FNV-1a)
//   contents checksum  uint64
//   header checksum    uint64 (of the 40 bytes before it)
//   the key, then the contents
//
// A file is whole when its length is exactly the header's and every
// checksum and the key match; anything else is a miss.
//
//===----------------------------------------------------------------------===//

#include "DiskCache.h"

#include "kpool/Runtime/KernelCache.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

using namespace kpool;
using namespace kpool::cache;

namespace {

constexpr char kMagic[8] = {'K', 'P', 'O', 'O', 'L', 'K', 'C', '1'};
constexpr size_t kHeaderBytes = 48;
constexpr const char *kSuffix = ".kpool";
constexpr const char *kTempPrefix = ".tmp-";

struct Header {
  char magic[8];
  uint64_t keyBytes;
  uint64_t contentBytes;
  uint64_t keyHash;
  uint64_t contentHash;
  uint64_t headerHash;
};
static_assert(sizeof(Header) == kHeaderBytes, "packed header");

/// Reads the whole of `fd` (at most `limit` bytes) into `out`.
bool readAll(int fd, std::string &out, size_t limit) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      uint64_t(st.st_size) > limit)
    return false;
  out.resize(size_t(st.st_size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, &out[done], out.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

bool writeAll(int fd, const char *data, size_t size) {
  while (size) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

/// Checks `file` (a whole entry file) and splits it; `problem` says what
/// is wrong with a damaged one.
bool parse(const std::string &file, std::string &key, std::string &contents,
           std::string &problem) {
  if (file.size() < kHeaderBytes) {
    problem = "truncated: " + std::to_string(file.size()) +
              " bytes, shorter than the header";
    return false;
  }
  Header h;
  std::memcpy(&h, file.data(), kHeaderBytes);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    problem = "not a kpool cache entry (bad magic)";
    return false;
  }
  if (detail::hash64(&h, kHeaderBytes - 8) != h.headerHash) {
    problem = "the header's checksum does not match";
    return false;
  }
  if (h.keyBytes > file.size() || h.contentBytes > file.size() ||
      kHeaderBytes + h.keyBytes + h.contentBytes != file.size()) {
    problem = "truncated or padded: " + std::to_string(file.size()) +
              " bytes, the header says " +
              std::to_string(kHeaderBytes + h.keyBytes + h.contentBytes);
    return false;
  }
  key.assign(file, kHeaderBytes, h.keyBytes);
  if (detail::hash64(key.data(), key.size()) != h.keyHash) {
    problem = "the key's checksum does not match";
    return false;
  }
  const char *c = file.data() + kHeaderBytes + h.keyBytes;
  if (detail::hash64(c, h.contentBytes) != h.contentHash) {
    problem = "the contents' checksum does not match";
    return false;
  }
  contents.assign(c, h.contentBytes);
  return true;
}

bool makeDirectories(const std::string &path) {
  std::string partial;
  for (size_t at = 0; at <= path.size(); ++at) {
    if (at < path.size() && path[at] != '/')
      continue;
    partial = path.substr(0, at);
    if (partial.empty())
      continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// Entries and stale temporary files are at most this large; anything
/// bigger in the folder is not ours.
constexpr size_t kMaxEntryBytes = size_t(1) << 31;

} // namespace

uint64_t detail::hash64(const void *data, size_t size, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string detail::entryPath(const std::string &dir, const std::string &key) {
  char name[64];
  // Two seeds: 128 bits of name, so that distinct keys never share a file
  // in practice (a shared one would only be a miss: the key is compared).
  std::snprintf(
      name, sizeof name, "%016llx%016llx%s",
      (unsigned long long)hash64(key.data(), key.size()),
      (unsigned long long)hash64(key.data(), key.size(), 0x6b706f6f6c2d6b63ull),
      kSuffix);
  return dir + "/" + name;
}

bool detail::read(const std::string &dir, const std::string &key,
                  std::string &contents, std::string *problem) {
  std::string path = entryPath(dir, key);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  std::string file;
  bool ok = readAll(fd, file, kMaxEntryBytes);
  close(fd);
  std::string storedKey, why;
  if (!ok) {
    why = "unreadable";
  } else if (parse(file, storedKey, contents, why)) {
    if (storedKey == key)
      return true;
    why = "made for another key (another version, configuration or host)";
  }
  if (problem)
    *problem = path + ": " + why;
  contents.clear();
  return false;
}

bool detail::write(const std::string &dir, const std::string &key,
                   const std::string &contents, std::string *problem) {
  auto fail = [&](const std::string &what) {
    if (problem)
      *problem = what + ": " + std::strerror(errno);
    return false;
  };
  if (!makeDirectories(dir))
    return fail("cannot create the cache folder " + dir);
  Header h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.keyBytes = key.size();
  h.contentBytes = contents.size();
  h.keyHash = hash64(key.data(), key.size());
  h.contentHash = hash64(contents.data(), contents.size());
  h.headerHash = hash64(&h, kHeaderBytes - 8);

  std::string final = entryPath(dir, key);
  char suffix[64];
  static unsigned counter = 0;
  std::snprintf(suffix, sizeof suffix, "%ld-%u-%llx", (long)getpid(),
                __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED),
                (unsigned long long)h.contentHash);
  std::string temp = dir + "/" + kTempPrefix + suffix;
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot write in the cache folder " + dir);
  bool ok = writeAll(fd, reinterpret_cast<const char *>(&h), kHeaderBytes) &&
            writeAll(fd, key.data(), key.size()) &&
            writeAll(fd, contents.data(), contents.size());
  ok = (close(fd) == 0) && ok;
  if (!ok || rename(temp.c_str(), final.c_str()) != 0) {
    int saved = errno;
    unlink(temp.c_str());
    errno = saved;
    return fail("cannot write the cache entry " + final);
  }
  return true;
}

std::string cache::directory(std::string *why) {
  auto off = [&](const char *reason) {
    if (why)
      *why = reason;
    return std::string();
  };
  if (const char *d = std::getenv("KPOOL_DISABLE_CACHE"))
    if (*d && std::strcmp(d, "0") != 0)
      return off("KPOOL_DISABLE_CACHE is set");
  if (const char *d = std::getenv("KPOOL_CACHE_DIR")) {
    if (!*d)
      return off("KPOOL_CACHE_DIR is set and empty");
    return d;
  }
  if (const char *x = std::getenv("XDG_CACHE_HOME"))
    if (*x == '/')
      return std::string(x) + "/kpool";
  const char *home = std::getenv("HOME");
  if (!home || !*home) {
    struct passwd *pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (!home || !*home)
    return off("there is no home folder (set KPOOL_CACHE_DIR)");
  return std::string(home) + "/.cache/kpool";
}

Status cache::list(std::vector<EntryInfo> &entries) {
  entries.clear();
  std::string dir = directory();
  if (dir.empty())
    return Status();
  DIR *d = opendir(dir.c_str());
  if (!d)
    return errno == ENOENT ? Status()
                           : Status::error("cannot read the cache folder " +
                                           dir + ": " + std::strerror(errno));
  while (struct dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (!endsWith(name, kSuffix))
      continue;
    EntryInfo info;
    info.path = dir + "/" + name;
    int fd = open(info.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::string file, key, contents;
    bool read = fd >= 0 && readAll(fd, file, kMaxEntryBytes);
    if (fd >= 0)
      close(fd);
    info.bytes = file.size();
    if (!read) {
      info.problem = "unreadable";
    } else if (parse(file, key, contents, info.problem)) {
      info.valid = true;
      info.summary = key.substr(0, key.find('\n'));
    }
    entries.push_back(std::move(info));
  }
  closedir(d);
  return Status();
}

Status cache::clear(int64_t *removed) {
  if (removed)
    *removed = 0;
  std::string dir = directory();
  if (dir.empty())
    return Status();
  DIR *d = opendir(dir.c_str());
  if (!d)
    return errno == ENOENT ? Status()
                           : Status::error("cannot read the cache folder " +
                                           dir + ": " + std::strerror(errno));
  std::string failed;
  while (struct dirent *e = readdir(d)) {
    std::string name = e->d_name;
    bool entry = endsWith(name, kSuffix);
    if (!entry && name.rfind(kTempPrefix, 0) != 0)
      continue;
    std::string path = dir + "/" + name;
    if (unlink(path.c_str()) != 0) {
      if (failed.empty())
        failed = path + ": " + std::strerror(errno);
    } else if (entry && removed) {
      ++*removed;
    }
  }
  closedir(d);
  if (!failed.empty())
    return Status::error("cannot remove the cache entry " + failed);
  return Status();
}

std::string detail::hostCpu() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  char vendor[13] = {};
  __cpuid(0, a, b, c, d);
  unsigned maxLeaf = a;
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  char buf[256];
  std::string out = std::string("x86-64 ") + vendor;
  __cpuid(1, a, b, c, d);
  // Leaf 1's ebx (APIC id, logical count) differs between cores: left out.
  std::snprintf(buf, sizeof buf, " 1:%08x:%08x:%08x", a, c, d);
  out += buf;
  bool osxsave = c & (1u << 27);
  if (maxLeaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    unsigned sub = a;
    std::snprintf(buf, sizeof buf, " 7:%08x:%08x:%08x", b, c, d);
    out += buf;
    if (sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      std::snprintf(buf, sizeof buf, " 7.1:%08x:%08x:%08x", a, c, d);
      out += buf;
    }
  }
  if (maxLeaf >= 0xd) {
    __cpuid_count(0xd, 1, a, b, c, d);
    std::snprintf(buf, sizeof buf, " d.1:%08x", a);
    out += buf;
  }
  if (osxsave) {
    // The register state the OS enables (AVX, AVX-512): LLVM's host
    // features depend on it.
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    std::snprintf(buf, sizeof buf, " xcr0:%08x", lo);
    out += buf;
  }
  __cpuid(0x80000000, a, b, c, d);
  unsigned maxExt = a;
  if (maxExt >= 0x80000001) {
    __cpuid(0x80000001, a, b, c, d);
    std::snprintf(buf, sizeof buf, " e1:%08x:%08x", c, d);
    out += buf;
  }
  if (maxExt >= 0x80000004) {
    unsigned brand[12];
    for (unsigned i = 0; i < 3; ++i)
      __cpuid(0x80000002 + i, brand[4 * i], brand[4 * i + 1], brand[4 * i + 2],
              brand[4 * i + 3]);
    char name[49] = {};
    std::memcpy(name, brand, 48);
    out += std::string(" '") + name + "'";
  }
  return out;
#else
  // Elsewhere: the kernel's description of the processor.
  std::string out = "host";
  if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    int lines = 0;
    while (std::fgets(line, sizeof line, f) && lines < 32) {
      ++lines;
      out += " ";
      out += line;
    }
    std::fclose(f);
  }
  return out;
#endif
}
