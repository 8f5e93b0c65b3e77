//===- Fatbin.cpp - the PTX of a CUDA module image ------------------------===//
//
// The fatbin container, as the CUDA 13.0 toolkit's `fatbinary` writes it
// (and MLIR's gpu-module-to-binary with format=fatbin, which runs it):
//
//   header (16 bytes): u32 magic 0xBA55ED50, u16 version 1, u16 header
//     size 16, u64 bytes of entries that follow;
//   entries, each: u16 kind (1 PTX, 2 ELF), u16 version, u32 entry header
//     size (64 or 80), u64 payload bytes (8-aligned), u32 compressed bytes,
//     u32, u32 (the PTX ISA version for PTX), u32 architecture (90 for
//     sm_90), u32 name offset, u32 name bytes, u64 flags (0x8000: zstd
//     compressed, 0x2000: LZ4-compressed), u64, u64 uncompressed bytes;
//     then the payload.
//
// Measured on this toolkit: PTX entries are zstd frames by default
// (`--compress-mode=speed` writes LZ4 blocks, `--compress=false` plain text
// with its NUL); ELF entries are plain unless `--compress-all`.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu/Fatbin.h"

#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <vector>

using namespace kpool::emu;
using namespace kpool::emu::driver;

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint32_t kWrapperMagic = 0x466243B1u;
constexpr uint16_t kKindPtx = 1;
constexpr uint64_t kFlagLz4 = 0x2000, kFlagZstd = 0x8000;
constexpr uint32_t kArch = 90;

/// Whether `p` starts with the `n` bytes of `prefix`; reads no further than
/// the first byte that differs (a short PTX string ends in a NUL).
bool startsWith(const uint8_t *p, const void *prefix, size_t n) {
  const auto *q = static_cast<const uint8_t *>(prefix);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != q[i])
      return false;
  return true;
}

template <typename T> T read(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Decodes one LZ4 block (the format of lz4's LZ4_decompress_safe) of
/// `size` bytes into exactly `out.size()` bytes.
bool lz4Block(const uint8_t *in, size_t size, std::vector<uint8_t> &out,
              std::string &error) {
  size_t i = 0, o = 0;
  auto length = [&](size_t base, size_t &n) {
    n = base;
    if (base != 15)
      return true;
    uint8_t b;
    do {
      if (i >= size)
        return false;
      b = in[i++];
      n += b;
    } while (b == 255);
    return true;
  };
  while (i < size) {
    uint8_t token = in[i++];
    size_t literals, match;
    if (!length(token >> 4, literals) || literals > size - i ||
        literals > out.size() - o) {
      error = "LZ4 literals run past the block or the output";
      return false;
    }
    std::memcpy(out.data() + o, in + i, literals);
    i += literals;
    o += literals;
    if (i == size)
      break; // the last sequence has no match
    if (size - i < 2) {
      error = "LZ4 block ends inside a match offset";
      return false;
    }
    size_t offset = read<uint16_t>(in + i);
    i += 2;
    if (!length(token & 15, match) || offset == 0 || offset > o ||
        match + 4 > out.size() - o) {
      error = "LZ4 match outside the output";
      return false;
    }
    match += 4;
    for (size_t k = 0; k < match; ++k, ++o)
      out[o] = out[o - offset];
  }
  if (o != out.size()) {
    error = "LZ4 block decodes to " + std::to_string(o) + " bytes, not " +
            std::to_string(out.size());
    return false;
  }
  return true;
}

/// Decodes one zstd frame into exactly `out.size()` bytes with the system's
/// libzstd.so.1 (loaded on first use; no build dependency).
bool zstdFrame(const uint8_t *in, size_t size, std::vector<uint8_t> &out,
               std::string &error) {
  using Decompress = size_t (*)(void *, size_t, const void *, size_t);
  using IsError = unsigned (*)(size_t);
  using ErrorName = const char *(*)(size_t);
  static void *lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    error = "the PTX is zstd-compressed and libzstd.so.1 cannot be loaded "
            "(install libzstd1, or build the fatbin with "
            "`fatbinary --compress=false`)";
    return false;
  }
  auto decompress = reinterpret_cast<Decompress>(dlsym(lib, "ZSTD_decompress"));
  auto isError = reinterpret_cast<IsError>(dlsym(lib, "ZSTD_isError"));
  auto errorName = reinterpret_cast<ErrorName>(dlsym(lib, "ZSTD_getErrorName"));
  if (!decompress || !isError || !errorName) {
    error = "libzstd.so.1 lacks ZSTD_decompress";
    return false;
  }
  size_t n = decompress(out.data(), out.size(), in, size);
  if (isError(n)) {
    error = std::string("zstd: ") + errorName(n);
    return false;
  }
  if (n != out.size()) {
    error = "zstd frame decodes to " + std::to_string(n) + " bytes, not " +
            std::to_string(out.size());
    return false;
  }
  return true;
}

/// The PTX entry of the fatbin at `p` for the highest architecture up to
/// sm_90.
CUresult fromFatbin(const uint8_t *p, std::string &ptx, std::string &error) {
  uint16_t headerSize = read<uint16_t>(p + 6);
  uint64_t bytes = read<uint64_t>(p + 8);
  if (headerSize < 16 || bytes > (uint64_t(1) << 32)) {
    error = "a fatbin with a header of " + std::to_string(headerSize) +
            " bytes and " + std::to_string(bytes) + " bytes of entries";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  const uint8_t *entry = p + headerSize, *end = entry + bytes;
  const uint8_t *best = nullptr;
  uint32_t bestArch = 0;
  std::string archs;
  while (entry + 64 <= end) {
    uint32_t size = read<uint32_t>(entry + 4);
    uint64_t payload = read<uint64_t>(entry + 8);
    if (size < 64 || payload > uint64_t(end - entry) - size) {
      error = "a fatbin entry runs past the container";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    uint16_t kind = read<uint16_t>(entry);
    uint32_t arch = read<uint32_t>(entry + 28);
    archs += std::string(archs.empty() ? "" : ", ") +
             (kind == kKindPtx ? "PTX"
              : kind == 2      ? "SASS"
                               : "kind " + std::to_string(kind)) +
             " for sm_" + std::to_string(arch);
    if (kind == kKindPtx && arch <= kArch && (!best || arch > bestArch)) {
      best = entry;
      bestArch = arch;
    }
    entry += size + payload;
  }
  if (!best) {
    error = "the fatbin holds no PTX for sm_90 or older (" +
            (archs.empty() ? std::string("no entries") : archs) +
            "); the emulated driver executes PTX only";
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  uint32_t size = read<uint32_t>(best + 4);
  uint64_t payload = read<uint64_t>(best + 8);
  uint32_t compressed = read<uint32_t>(best + 16);
  uint64_t flags = read<uint64_t>(best + 40);
  uint64_t plain = read<uint64_t>(best + 56);
  const uint8_t *data = best + size;
  if (!(flags & (kFlagLz4 | kFlagZstd))) {
    size_t n = 0;
    while (n < payload && data[n])
      ++n;
    ptx.assign(reinterpret_cast<const char *>(data), n);
    return CUDA_SUCCESS;
  }
  if (compressed > payload || plain > (uint64_t(1) << 32)) {
    error = "a compressed PTX entry of " + std::to_string(compressed) +
            " bytes in " + std::to_string(payload) + ", " +
            std::to_string(plain) + " uncompressed";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::vector<uint8_t> out(plain);
  bool ok = (flags & kFlagZstd) ? zstdFrame(data, compressed, out, error)
                                : lz4Block(data, compressed, out, error);
  if (!ok) {
    error = "the fatbin's PTX for sm_" + std::to_string(bestArch) +
            " does not decompress: " + error;
    return CUDA_ERROR_INVALID_IMAGE;
  }
  size_t n = 0;
  while (n < out.size() && out[n])
    ++n;
  ptx.assign(reinterpret_cast<const char *>(out.data()), n);
  return CUDA_SUCCESS;
}

} // namespace

CUresult driver::ptxOfImage(const void *image, std::string &ptx,
                            std::string &error) {
  if (!image) {
    error = "the image is NULL";
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto *p = static_cast<const uint8_t *>(image);
  if (startsWith(p, &kFatbinMagic, 4))
    return fromFatbin(p, ptx, error);
  if (startsWith(p, &kWrapperMagic, 4)) {
    // __fatBinC_Wrapper_t: {int magic, int version, const void *data, ...}.
    const void *data = read<const void *>(p + 8);
    if (!data ||
        read<uint32_t>(static_cast<const uint8_t *>(data)) != kFatbinMagic) {
      error = "a fatbin wrapper that points to no fatbin";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    return fromFatbin(static_cast<const uint8_t *>(data), ptx, error);
  }
  if (startsWith(p,
                 "\x7f"
                 "ELF",
                 4)) {
    uint16_t machine = read<uint16_t>(p + 18);
    if (machine != 190) { // EM_CUDA
      error = "an ELF image for machine " + std::to_string(machine) +
              ", not a cubin";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    error = "the image is a cubin: SASS only, no PTX; the emulated driver "
            "executes PTX (load PTX text or a fatbin with PTX, e.g. "
            "kpool-aot --format=fatbin or isa)";
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  const char *text = static_cast<const char *>(image);
  ptx.assign(text);
  if (ptx.find(".version") == std::string::npos ||
      ptx.find(".target") == std::string::npos) {
    error = "the image is neither a fatbin, a cubin nor PTX text (no "
            ".version and .target)";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return CUDA_SUCCESS;
}
