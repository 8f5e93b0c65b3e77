//===- ObjectLoader.h - relocatable objects loaded in process ---*- C++ -*-===//
//
// Loads a relocatable ELF object for this host (x86-64) into the process:
// its allocated sections are laid out in one mapping, relocated against
// themselves and against the process's symbols, write-protected (code
// read-execute, constants read-only), and their initializers
// (.init_array) run. This is how kernels compiled by the JIT, or read back
// from the disk cache, become callable without LLVM or MLIR in the
// process: loading an object takes well under a millisecond, loading
// libLLVM.so alone about a hundred.
//
// Scope: the objects kpool's compiler emits (position-independent, small
// code model, no thread-local storage). Anything else -- another machine,
// an unknown relocation, a symbol that resolves nowhere, a malformed or
// truncated file -- is an error with a message, never a crash: every offset
// and index read from the file is checked first. Objects stay loaded for
// the life of the process (kernel sets are never torn down), so their
// destructors (.fini_array) are not run.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_CORE_OBJECTLOADER_H
#define KPOOL_LIB_RUNTIME_CORE_OBJECTLOADER_H

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace kpool::detail {

/// An object loaded into the process.
class LoadedObject {
public:
  /// Resolves a symbol the object uses but does not define; null when
  /// there is none.
  using Resolver = std::function<void *(const char *name)>;

  /// Loads the `size` bytes at `data` (copied: the caller may free them).
  /// Returns null and sets `error` on failure.
  static std::unique_ptr<LoadedObject> load(const void *data, size_t size,
                                            const Resolver &resolve,
                                            std::string &error);

  /// The address of the global symbol `name` the object defines, or null.
  void *symbol(const std::string &name) const;

  ~LoadedObject();
  LoadedObject(const LoadedObject &) = delete;
  LoadedObject &operator=(const LoadedObject &) = delete;

  struct Impl;

private:
  explicit LoadedObject(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_CORE_OBJECTLOADER_H
