//===- Version.h - what the kpool tools print for --version -----*- C++ -*-===//
//
// One version message for every kpool tool (kpool-opt, kpool-aot): kpool's
// version first, then the LLVM/MLIR it was built against, instead of LLVM's
// message alone.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TOOLS_VERSION_H
#define KPOOL_TOOLS_VERSION_H

#include "kpool/Version.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir {
namespace kpool {

/// Makes `--version` print "<tool> (kpool) <version>" and the LLVM/MLIR
/// version. Call before the command line is parsed.
inline void setToolVersionPrinter(llvm::StringRef tool) {
  llvm::cl::SetVersionPrinter([name = tool.str()](llvm::raw_ostream &os) {
    os << name << " (kpool) " << KPOOL_VERSION_STRING << "\n"
       << "  built with LLVM and MLIR " << LLVM_VERSION_STRING << "\n";
  });
}

} // namespace kpool
} // namespace mlir

#endif // KPOOL_TOOLS_VERSION_H
