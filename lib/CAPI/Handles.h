//===- Handles.h - what the runtime's C API handles hold --------*- C++ -*-===//
//
// Shared by the runtime's C API files: the handle structs, making and
// wrapping errors, the guard that keeps exceptions from crossing the C API,
// and the checks of what the C++ API takes for granted (a non-null view of
// a rank that fits KPoolView).
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_CAPI_HANDLES_H
#define KPOOL_LIB_CAPI_HANDLES_H

#include "kpool-c/Runtime.h"

#include "kpool/Runtime/KernelSet.h"

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

struct KPoolError {
  std::string message;
};

struct KPoolKernelSet {
  std::shared_ptr<kpool::KernelSet> kernels;
};

namespace kpool::capi {

inline KPoolError *makeError(std::string message) {
  return new KPoolError{std::move(message)};
}

inline KPoolError *wrap(const Status &status) {
  return status.ok() ? nullptr : makeError(status.message());
}

/// Runs `body`, turning an allocation failure (the only exception the
/// runtime lets escape) into an error: nothing thrown crosses the C API.
template <typename Body> KPoolError *guard(const char *op, Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return makeError(std::string(op) + ": out of memory");
}

/// Checks what the C++ validator takes for granted: the operand exists and
/// its rank fits a KPoolView.
inline KPoolError *checkView(const char *op, const char *name,
                             const KPoolView *view) {
  if (!view)
    return makeError(std::string(op) + ": '" + name + "' is a null view");
  if (view->rank < 0 || view->rank > KPOOL_MAX_RANK)
    return makeError(std::string(op) + ": '" + name + "' has rank " +
                     std::to_string(view->rank) + ", views have at most " +
                     std::to_string(KPOOL_MAX_RANK) + " dimensions");
  return nullptr;
}

/// A set that a C caller may pass: not null, and holding kernels.
inline KPoolError *checkKernels(const char *op, const KPoolKernelSet *k) {
  if (!k || !k->kernels)
    return makeError(std::string(op) + ": the kernel set is null");
  return nullptr;
}

} // namespace kpool::capi

#define KPOOL_CHECK(expr)                                                      \
  do {                                                                         \
    if (KPoolError *e_ = (expr))                                               \
      return e_;                                                               \
  } while (false)

#endif // KPOOL_LIB_CAPI_HANDLES_H
