//===- OperandChecks.h - host validation of each kernel's operands -*- C++ -*-//
//
// What host validation checks for each kernel of the ABI table, on its
// argument struct: the op's own rules (the shapes that relate operands to
// each other, then with `check` the metadata, request by request; see
// Validation.h), then the table's rule for every view (its rank and the
// extents its shape string fixes: head_dim, kpool, numbers), and the
// overlap rule for every operand the table says is written, so that an
// operand added to the table is checked without code here.
//
//===----------------------------------------------------------------------===//

#ifndef KPOOL_LIB_RUNTIME_OPERANDCHECKS_H
#define KPOOL_LIB_RUNTIME_OPERANDCHECKS_H

#include "Validation.h"

#include "kpool/Runtime/KernelSet.h"

namespace kpool::detail {

/// Checks the operands in `args` (kernel `id`'s argument struct) for a set
/// of `config`: shapes always; with `check` the metadata too (host memory);
/// then that no operand the kernel writes (the table's outputs, and the
/// status word `status` when not null) overlaps another operand, by their
/// address ranges alone (nothing is read: device memory too).
Status checkOperands(const KernelConfig &config, Validator &v, abi::KernelId id,
                     const void *args, bool check,
                     const uint64_t *status = nullptr);

} // namespace kpool::detail

#endif // KPOOL_LIB_RUNTIME_OPERANDCHECKS_H
