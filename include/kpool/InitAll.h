//===- InitAll.h - register everything kpool adds ---------------*- C++ -*-===//

#ifndef KPOOL_INITALL_H
#define KPOOL_INITALL_H

namespace mlir {
class DialectRegistry;

namespace kpool {
/// Adds the kpool dialect and its external interface models (bufferization)
/// to `registry`.
void registerAllDialects(DialectRegistry &registry);

/// Registers every kpool pass and pipeline with the global registry, for
/// command-line drivers such as kpool-opt.
void registerAllPasses();
} // namespace kpool
} // namespace mlir

#endif // KPOOL_INITALL_H
