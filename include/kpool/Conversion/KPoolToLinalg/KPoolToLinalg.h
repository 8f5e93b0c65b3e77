//===- KPoolToLinalg.h - kpool to linalg conversion -------------*- C++ -*-===//

#ifndef KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
#define KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H

#include "llvm/ADT/StringRef.h"

namespace mlir {
class RewritePatternSet;

namespace kpool {
/// String attribute on each op's top-level `scf.parallel`: the name of the
/// kernel it becomes (`kpool_compress`, `kpool_compress_strided` for the
/// general-stride copy, ...). kpool-map-to-gpu names GPU kernels after it.
inline constexpr llvm::StringLiteral kKernelNameAttrName = "kpool.kernel";

/// Adds the patterns that lower the buffer form of the kpool ops to linalg,
/// scf, memref, arith and math (see `convert-kpool-to-linalg`).
void populateKPoolToLinalgPatterns(RewritePatternSet &patterns);
} // namespace kpool
} // namespace mlir

#endif // KPOOL_CONVERSION_KPOOLTOLINALG_KPOOLTOLINALG_H
