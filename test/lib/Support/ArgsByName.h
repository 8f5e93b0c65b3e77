//===- ArgsByName.h - argument structs from a call's operands ---*- C++ -*-===//
//
// The tests hold a call's operands once, by their kernel-table names, and
// make each kernel's argument struct from them: the fields come from the
// table (kpool::abi::setView), so one set of operands serves the four ops,
// the fused step and the pool-cache kernels alike. A name the kernel does
// not have is skipped; an operand of the kernel missing here stays an empty
// view, which validation names. Test-only.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_TEST_SUPPORT_ARGSBYNAME_H
#define KPOOL_TEST_SUPPORT_ARGSBYNAME_H

#include "kpool/ABI/KernelABI.h"

#include <initializer_list>
#include <utility>

namespace kpool::test {

/// One operand by name.
using Named = std::pair<const char *, KPoolView>;

/// Kernel A's argument struct with each of `views` that it has, and
/// `num_requests` when it has that scalar.
template <typename A>
A argsByName(std::initializer_list<Named> views, int32_t numRequests = 0) {
  constexpr abi::KernelId id = abi::KernelOf<A>::value;
  A args{};
  for (const Named &v : views)
    abi::setView(id, &args, v.first, v.second);
  abi::setScalar(id, &args, "num_requests", numRequests);
  return args;
}

/// `args` with the views of `views` set over it (e.g. a cache kernel's
/// group, or an op's own output under a shared name).
template <typename A> A with(A args, std::initializer_list<Named> views) {
  for (const Named &v : views)
    abi::setView(abi::KernelOf<A>::value, &args, v.first, v.second);
  return args;
}

} // namespace kpool::test

#endif // KPOOL_TEST_SUPPORT_ARGSBYNAME_H
