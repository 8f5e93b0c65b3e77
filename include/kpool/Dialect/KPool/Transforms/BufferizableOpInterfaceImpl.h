//===- BufferizableOpInterfaceImpl.h - kpool bufferization ------*- C++ -*-===//

#ifndef KPOOL_DIALECT_KPOOL_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define KPOOL_DIALECT_KPOOL_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;

namespace kpool {
/// Attaches BufferizableOpInterface to the kpool ops, so that
/// `one-shot-bufferize` rewrites their tensor form into the memref form,
/// writing each `outs` operand in place.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace kpool
} // namespace mlir

#endif // KPOOL_DIALECT_KPOOL_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
