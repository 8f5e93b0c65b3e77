//===- ObjectLoader.cpp - relocatable objects loaded in process -----------===//
//
// A small run-time linker for one relocatable x86-64 ELF object (see
// ObjectLoader.h). Layout: one anonymous mapping with three page-aligned
// parts, code (plus a jump stub per external function), constants (plus a
// global offset table) and writable data (plus common symbols), so that
// every 32-bit PC-relative reference inside the object is in range; calls
// to functions elsewhere in the process go through the stubs.
//
//===----------------------------------------------------------------------===//

#include "ObjectLoader.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

using namespace kpool::detail;

namespace {

/// What a section becomes in the mapping.
enum Part { Code = 0, Constants = 1, Data = 2, NotLoaded = 3 };

/// A jump stub: jmp *[rip + disp32], padded to 8 bytes.
constexpr size_t kStubSize = 8;

size_t alignTo(size_t value, size_t align) {
  if (align <= 1)
    return value;
  return (value + align - 1) / align * align;
}

bool isPowerOfTwo(uint64_t x) { return x && !(x & (x - 1)); }

/// The priority of an .init_array section: `.init_array.N` runs in order of
/// N, before the plain `.init_array` (as a static linker sorts them).
unsigned initPriority(const char *name) {
  const char *dot = std::strchr(name + 1, '.');
  if (!dot)
    return 65536;
  return static_cast<unsigned>(std::strtoul(dot + 1, nullptr, 10));
}

/// Anchors __dso_handle for objects that register destructors with it.
char dsoHandle;

} // namespace

struct LoadedObject::Impl {
  char *base = nullptr;
  size_t mapped = 0;
  std::unordered_map<std::string, void *> symbols;

  ~Impl() {
    if (base)
      munmap(base, mapped);
  }
};

LoadedObject::LoadedObject(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
LoadedObject::~LoadedObject() = default;

void *LoadedObject::symbol(const std::string &name) const {
  auto it = impl->symbols.find(name);
  return it == impl->symbols.end() ? nullptr : it->second;
}

namespace {

/// The loader's state for one object; `fail` records the first error.
class Linker {
public:
  Linker(const uint8_t *data, size_t size,
         const LoadedObject::Resolver &resolve)
      : data(data), size(size), resolve(resolve) {}

  std::unique_ptr<LoadedObject::Impl> run(std::string &errorOut);

private:
  bool fail(const std::string &message) {
    if (error.empty())
      error = message;
    return false;
  }
  bool inFile(uint64_t offset, uint64_t bytes) const {
    return offset <= size && bytes <= size - offset;
  }
  const char *sectionName(const Elf64_Shdr &s) const {
    const Elf64_Shdr &names = sections[header->e_shstrndx];
    if (s.sh_name >= names.sh_size)
      return "";
    const char *p =
        reinterpret_cast<const char *>(data + names.sh_offset + s.sh_name);
    // NUL-terminated inside the table?
    if (!std::memchr(p, 0, names.sh_size - s.sh_name))
      return "";
    return p;
  }
  const char *symbolName(const Elf64_Sym &sym) const {
    if (sym.st_name >= strtabSize)
      return "";
    const char *p = strtab + sym.st_name;
    if (!std::memchr(p, 0, strtabSize - sym.st_name))
      return "";
    return p;
  }

  bool parse();
  bool layout();
  bool placeSymbols();
  bool relocate();
  bool protect();
  void runInitializers();
  bool symbolAddress(uint32_t index, uint64_t &address);

  const uint8_t *data;
  size_t size;
  const LoadedObject::Resolver &resolve;
  std::string error;

  const Elf64_Ehdr *header = nullptr;
  const Elf64_Shdr *sections = nullptr;
  unsigned numSections = 0;
  const Elf64_Sym *symtab = nullptr;
  size_t numSymbols = 0;
  const char *strtab = nullptr;
  size_t strtabSize = 0;

  std::vector<Part> part;         // per section
  std::vector<uint64_t> address;  // per section, once mapped
  std::vector<uint64_t> offsetIn; // per section: offset in its part
  size_t partSize[3] = {0, 0, 0};
  size_t partStart[3] = {0, 0, 0};
  std::map<uint32_t, size_t> gotSlot;  // symbol index -> slot
  std::map<uint32_t, size_t> stub;     // symbol index -> stub
  std::map<uint32_t, uint64_t> common; // symbol index -> offset in Data
  size_t stubsAt = 0, gotAt = 0;
  std::vector<uint64_t> symbolAddr; // resolved, per symbol
  std::vector<uint8_t> symbolDone;

  std::unique_ptr<LoadedObject::Impl> out;
};

bool Linker::parse() {
  if (size < sizeof(Elf64_Ehdr))
    return fail("not an ELF object (" + std::to_string(size) + " bytes)");
  header = reinterpret_cast<const Elf64_Ehdr *>(data);
  const unsigned char *id = header->e_ident;
  if (std::memcmp(id, ELFMAG, SELFMAG) != 0)
    return fail("not an ELF object (bad magic)");
  if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
    return fail("not a 64-bit little-endian ELF object");
  if (header->e_type != ET_REL)
    return fail("not a relocatable object (ELF type " +
                std::to_string(header->e_type) + ")");
  if (header->e_machine != EM_X86_64)
    return fail("an object for ELF machine " +
                std::to_string(header->e_machine) +
                "; kpool loads x86-64 objects only");
  if (header->e_shentsize != sizeof(Elf64_Shdr) || header->e_shnum == 0 ||
      !inFile(header->e_shoff, uint64_t(header->e_shnum) * sizeof(Elf64_Shdr)))
    return fail("the section header table is outside the object");
  if (header->e_shoff % alignof(Elf64_Shdr))
    return fail("the section header table is misaligned");
  sections = reinterpret_cast<const Elf64_Shdr *>(data + header->e_shoff);
  numSections = header->e_shnum;
  if (header->e_shstrndx >= numSections)
    return fail("the section name table index is out of range");
  for (unsigned i = 0; i < numSections; ++i) {
    const Elf64_Shdr &s = sections[i];
    if (s.sh_type != SHT_NOBITS && s.sh_type != SHT_NULL &&
        !inFile(s.sh_offset, s.sh_size))
      return fail("section " + std::to_string(i) + " lies outside the object");
  }
  const Elf64_Shdr &names = sections[header->e_shstrndx];
  if (names.sh_type != SHT_STRTAB)
    return fail("the section name table is not a string table");

  for (unsigned i = 0; i < numSections; ++i) {
    const Elf64_Shdr &s = sections[i];
    if (s.sh_type != SHT_SYMTAB)
      continue;
    if (symtab)
      return fail("more than one symbol table");
    if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_offset % alignof(Elf64_Sym))
      return fail("the symbol table has a bad entry size or alignment");
    symtab = reinterpret_cast<const Elf64_Sym *>(data + s.sh_offset);
    numSymbols = s.sh_size / sizeof(Elf64_Sym);
    if (s.sh_link >= numSections || sections[s.sh_link].sh_type != SHT_STRTAB)
      return fail("the symbol table has no string table");
    const Elf64_Shdr &str = sections[s.sh_link];
    strtab = reinterpret_cast<const char *>(data + str.sh_offset);
    strtabSize = str.sh_size;
  }
  if (!symtab)
    return fail("the object has no symbol table");
  return true;
}

bool Linker::layout() {
  part.assign(numSections, NotLoaded);
  offsetIn.assign(numSections, 0);
  address.assign(numSections, 0);
  size_t align[3] = {16, 16, 16};
  for (unsigned i = 0; i < numSections; ++i) {
    const Elf64_Shdr &s = sections[i];
    if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0)
      continue;
    const char *name = sectionName(s);
    // Unwind tables: nothing registers them and nothing unwinds through
    // kernels; they would only add relocations.
    if (!std::strcmp(name, ".eh_frame"))
      continue;
    if (s.sh_flags & SHF_TLS)
      return fail(std::string("section '") + name +
                  "' is thread-local storage, which the loader does not "
                  "support");
    if (!std::strncmp(name, ".ctors", 6) || !std::strncmp(name, ".dtors", 6))
      return fail(std::string("section '") + name +
                  "': the loader runs .init_array initializers only");
    Part p = (s.sh_flags & SHF_EXECINSTR) ? Code
             : (s.sh_flags & SHF_WRITE)   ? Data
                                          : Constants;
    uint64_t a = s.sh_addralign ? s.sh_addralign : 1;
    if (!isPowerOfTwo(a) || a > 4096)
      return fail(std::string("section '") + name + "' has alignment " +
                  std::to_string(a));
    if (s.sh_size > (uint64_t(1) << 30))
      return fail(std::string("section '") + name + "' is too large");
    part[i] = p;
    partSize[p] = alignTo(partSize[p], a);
    offsetIn[i] = partSize[p];
    partSize[p] += s.sh_size;
    align[p] = std::max<size_t>(align[p], a);
  }

  // What the relocations need: a GOT slot per symbol reached through the
  // GOT, a stub per undefined symbol that is called.
  for (unsigned i = 0; i < numSections; ++i) {
    const Elf64_Shdr &s = sections[i];
    if (s.sh_type == SHT_REL && s.sh_info < numSections &&
        part[s.sh_info] != NotLoaded)
      return fail("REL relocations (without addends) are not supported");
    if (s.sh_type != SHT_RELA || s.sh_info >= numSections ||
        part[s.sh_info] == NotLoaded)
      continue;
    if (s.sh_entsize != sizeof(Elf64_Rela) || s.sh_offset % alignof(Elf64_Rela))
      return fail("a relocation section has a bad entry size or alignment");
    if (s.sh_link >= numSections || sections[s.sh_link].sh_type != SHT_SYMTAB)
      return fail("a relocation section does not use the symbol table");
    auto *rela = reinterpret_cast<const Elf64_Rela *>(data + s.sh_offset);
    size_t count = s.sh_size / sizeof(Elf64_Rela);
    for (size_t r = 0; r < count; ++r) {
      uint32_t type = ELF64_R_TYPE(rela[r].r_info);
      uint32_t sym = ELF64_R_SYM(rela[r].r_info);
      if (sym >= numSymbols)
        return fail("a relocation names symbol " + std::to_string(sym) +
                    ", past the symbol table");
      if (type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
          type == R_X86_64_REX_GOTPCRELX)
        gotSlot.emplace(sym, gotSlot.size());
      else if ((type == R_X86_64_PLT32 || type == R_X86_64_PC32) &&
               symtab[sym].st_shndx == SHN_UNDEF)
        stub.emplace(sym, stub.size());
    }
  }
  for (auto &[sym, slot] : stub)
    gotSlot.emplace(sym, gotSlot.size());

  // Common symbols go to the data part.
  for (size_t i = 0; i < numSymbols; ++i)
    if (symtab[i].st_shndx == SHN_COMMON) {
      uint64_t a = symtab[i].st_value ? symtab[i].st_value : 1;
      if (!isPowerOfTwo(a) || a > 4096 || symtab[i].st_size > (1u << 30))
        return fail("a common symbol has a bad size or alignment");
      partSize[Data] = alignTo(partSize[Data], a);
      common[uint32_t(i)] = partSize[Data];
      partSize[Data] += symtab[i].st_size;
      align[Data] = std::max<size_t>(align[Data], a);
    }

  stubsAt = alignTo(partSize[Code], 16);
  partSize[Code] = stubsAt + stub.size() * kStubSize;
  gotAt = alignTo(partSize[Constants], 8);
  partSize[Constants] = gotAt + gotSlot.size() * 8;

  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t total = 0;
  for (int p = 0; p < 3; ++p) {
    partStart[p] = total;
    total = alignTo(total + std::max<size_t>(partSize[p], 1), page);
  }
  if (total >= (size_t(1) << 31))
    return fail("the object is too large to load (" + std::to_string(total) +
                " bytes)");
  void *mem = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    return fail("mapping " + std::to_string(total) + " bytes failed");
  out->base = static_cast<char *>(mem);
  out->mapped = total;
  for (unsigned i = 0; i < numSections; ++i) {
    if (part[i] == NotLoaded)
      continue;
    address[i] = reinterpret_cast<uint64_t>(out->base) + partStart[part[i]] +
                 offsetIn[i];
    if (sections[i].sh_type != SHT_NOBITS)
      std::memcpy(reinterpret_cast<void *>(address[i]),
                  data + sections[i].sh_offset, sections[i].sh_size);
  }
  return true;
}

bool Linker::symbolAddress(uint32_t index, uint64_t &result) {
  if (symbolDone[index]) {
    result = symbolAddr[index];
    return true;
  }
  const Elf64_Sym &sym = symtab[index];
  const char *name = symbolName(sym);
  uint64_t value = 0;
  if (sym.st_shndx == SHN_UNDEF) {
    if (!*name)
      return fail("a relocation names an undefined symbol without a name");
    void *p = nullptr;
    if (!std::strcmp(name, "_GLOBAL_OFFSET_TABLE_"))
      p = out->base + partStart[Constants] + gotAt;
    else if (!std::strcmp(name, "__dso_handle"))
      p = &dsoHandle;
    else
      p = resolve ? resolve(name) : nullptr;
    if (!p && ELF64_ST_BIND(sym.st_info) != STB_WEAK)
      return fail(std::string("undefined symbol '") + name + "'");
    value = reinterpret_cast<uint64_t>(p);
  } else if (sym.st_shndx == SHN_ABS) {
    value = sym.st_value;
  } else if (sym.st_shndx == SHN_COMMON) {
    value =
        reinterpret_cast<uint64_t>(out->base) + partStart[Data] + common[index];
  } else if (sym.st_shndx < numSections && sym.st_shndx != SHN_UNDEF) {
    if (part[sym.st_shndx] == NotLoaded)
      return fail(std::string("symbol '") + name + "' is in section '" +
                  sectionName(sections[sym.st_shndx]) +
                  "', which is not loaded");
    if (sym.st_value > sections[sym.st_shndx].sh_size)
      return fail(std::string("symbol '") + name +
                  "' lies past the end of its section");
    value = address[sym.st_shndx] + sym.st_value;
  } else {
    return fail(std::string("symbol '") + name + "' has section index " +
                std::to_string(sym.st_shndx) +
                ", which the loader does not support");
  }
  symbolAddr[index] = value;
  symbolDone[index] = 1;
  result = value;
  return true;
}

bool Linker::placeSymbols() {
  symbolAddr.assign(numSymbols, 0);
  symbolDone.assign(numSymbols, 0);
  // The GOT and the stubs.
  uint64_t got =
      reinterpret_cast<uint64_t>(out->base) + partStart[Constants] + gotAt;
  for (auto &[sym, slot] : gotSlot) {
    uint64_t value;
    if (!symbolAddress(sym, value))
      return false;
    std::memcpy(reinterpret_cast<void *>(got + 8 * slot), &value, 8);
  }
  uint64_t stubs =
      reinterpret_cast<uint64_t>(out->base) + partStart[Code] + stubsAt;
  for (auto &[sym, index] : stub) {
    uint8_t *code = reinterpret_cast<uint8_t *>(stubs + kStubSize * index);
    int64_t disp = int64_t(got + 8 * gotSlot.at(sym)) -
                   int64_t(reinterpret_cast<uint64_t>(code) + 6);
    int32_t disp32 = int32_t(disp);
    code[0] = 0xff; // jmp *disp32(%rip)
    code[1] = 0x25;
    std::memcpy(code + 2, &disp32, 4);
    code[6] = 0xcc; // int3 padding
    code[7] = 0xcc;
  }
  // The object's own symbols, by name.
  for (size_t i = 1; i < numSymbols; ++i) {
    const Elf64_Sym &sym = symtab[i];
    unsigned bind = ELF64_ST_BIND(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
      continue;
    const char *name = symbolName(sym);
    if (!*name)
      continue;
    if (sym.st_shndx < numSections && part[sym.st_shndx] == NotLoaded)
      continue;
    uint64_t value;
    if (!symbolAddress(uint32_t(i), value))
      return false;
    out->symbols[name] = reinterpret_cast<void *>(value);
  }
  return true;
}

bool Linker::relocate() {
  uint64_t got =
      reinterpret_cast<uint64_t>(out->base) + partStart[Constants] + gotAt;
  uint64_t stubs =
      reinterpret_cast<uint64_t>(out->base) + partStart[Code] + stubsAt;
  for (unsigned i = 0; i < numSections; ++i) {
    const Elf64_Shdr &s = sections[i];
    if (s.sh_type != SHT_RELA || s.sh_info >= numSections ||
        part[s.sh_info] == NotLoaded)
      continue;
    const Elf64_Shdr &target = sections[s.sh_info];
    const char *targetName = sectionName(target);
    if (target.sh_type == SHT_NOBITS)
      return fail(std::string("relocations in '") + targetName +
                  "', which has no contents");
    auto *rela = reinterpret_cast<const Elf64_Rela *>(data + s.sh_offset);
    size_t count = s.sh_size / sizeof(Elf64_Rela);
    for (size_t r = 0; r < count; ++r) {
      uint32_t type = ELF64_R_TYPE(rela[r].r_info);
      uint32_t sym = ELF64_R_SYM(rela[r].r_info);
      int64_t addend = rela[r].r_addend;
      if (type == R_X86_64_NONE)
        continue;
      size_t width = (type == R_X86_64_64 || type == R_X86_64_PC64 ||
                      type == R_X86_64_GOTOFF64)
                         ? 8
                         : 4;
      if (rela[r].r_offset > target.sh_size ||
          width > target.sh_size - rela[r].r_offset)
        return fail(std::string("a relocation lies outside '") + targetName +
                    "'");
      uint64_t place = address[s.sh_info] + rela[r].r_offset;
      uint64_t value;
      if (!symbolAddress(sym, value))
        return false;
      auto put32 = [&](int64_t v, bool isSigned) {
        bool fits = isSigned ? (v >= INT32_MIN && v <= INT32_MAX)
                             : (v >= 0 && v <= int64_t(UINT32_MAX));
        if (!fits)
          return fail(std::string("relocation type ") + std::to_string(type) +
                      " against '" + symbolName(symtab[sym]) + "' in '" +
                      targetName + "' is out of range");
        uint32_t bits = uint32_t(v);
        std::memcpy(reinterpret_cast<void *>(place), &bits, 4);
        return true;
      };
      int64_t pcrel = int64_t(value) + addend - int64_t(place);
      switch (type) {
      case R_X86_64_64: {
        uint64_t v = value + uint64_t(addend);
        std::memcpy(reinterpret_cast<void *>(place), &v, 8);
        break;
      }
      case R_X86_64_PC64: {
        std::memcpy(reinterpret_cast<void *>(place), &pcrel, 8);
        break;
      }
      case R_X86_64_PC32:
      case R_X86_64_PLT32: {
        auto s = stub.find(sym);
        if ((pcrel < INT32_MIN || pcrel > INT32_MAX) && s != stub.end())
          pcrel =
              int64_t(stubs + kStubSize * s->second) + addend - int64_t(place);
        if (!put32(pcrel, true))
          return false;
        break;
      }
      case R_X86_64_GOTPCREL:
      case R_X86_64_GOTPCRELX:
      case R_X86_64_REX_GOTPCRELX: {
        int64_t v =
            int64_t(got + 8 * gotSlot.at(sym)) + addend - int64_t(place);
        if (!put32(v, true))
          return false;
        break;
      }
      case R_X86_64_GOTPC32: {
        if (!put32(int64_t(got) + addend - int64_t(place), true))
          return false;
        break;
      }
      case R_X86_64_GOTOFF64: {
        int64_t v = int64_t(value) + addend - int64_t(got);
        std::memcpy(reinterpret_cast<void *>(place), &v, 8);
        break;
      }
      case R_X86_64_32:
        if (!put32(int64_t(value) + addend, false))
          return false;
        break;
      case R_X86_64_32S:
        if (!put32(int64_t(value) + addend, true))
          return false;
        break;
      default:
        return fail("relocation type " + std::to_string(type) + " in '" +
                    targetName + "' is not supported");
      }
    }
  }
  return true;
}

bool Linker::protect() {
  char *base = out->base;
  if (mprotect(base + partStart[Code], partStart[Constants] - partStart[Code],
               PROT_READ | PROT_EXEC) ||
      mprotect(base + partStart[Constants],
               partStart[Data] - partStart[Constants], PROT_READ))
    return fail("protecting the loaded code failed");
  return true;
}

void Linker::runInitializers() {
  std::vector<std::pair<unsigned, unsigned>> order; // priority, section
  for (unsigned i = 0; i < numSections; ++i)
    if (part[i] != NotLoaded && sections[i].sh_type == SHT_INIT_ARRAY)
      order.push_back({initPriority(sectionName(sections[i])), i});
  std::stable_sort(order.begin(), order.end());
  for (auto [priority, i] : order) {
    (void)priority;
    auto *fns = reinterpret_cast<void (**)()>(address[i]);
    for (size_t f = 0; f < sections[i].sh_size / sizeof(void *); ++f)
      if (fns[f])
        fns[f]();
  }
}

std::unique_ptr<LoadedObject::Impl> Linker::run(std::string &errorOut) {
  out = std::make_unique<LoadedObject::Impl>();
  if (!parse() || !layout() || !placeSymbols() || !relocate() || !protect()) {
    errorOut = error;
    return nullptr;
  }
  runInitializers();
  return std::move(out);
}

} // namespace

std::unique_ptr<LoadedObject> LoadedObject::load(const void *data, size_t size,
                                                 const Resolver &resolve,
                                                 std::string &error) {
  // The header tables are read in place: copy misaligned input once.
  std::vector<uint8_t> aligned;
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  if (reinterpret_cast<uintptr_t>(data) % 8) {
    aligned.assign(bytes, bytes + size);
    bytes = aligned.data();
  }
  Linker linker(bytes, size, resolve);
  std::unique_ptr<Impl> impl = linker.run(error);
  if (!impl)
    return nullptr;
  return std::unique_ptr<LoadedObject>(new LoadedObject(std::move(impl)));
}
