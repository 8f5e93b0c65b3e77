//===- StatusWord.cpp - decoding the kernels' status word -----------------===//
//
// The host side of the status word (kpool/ABI/StatusWord.h):
// the message a word's finding stands for, in the words host validation
// uses for the same mistake.
//
//===----------------------------------------------------------------------===//

#include "kpool/Runtime/KernelSet.h"

#include "kpool/ABI/KernelABI.h"
#include "kpool/ABI/StatusWord.h"

#include <cstdio>

using namespace kpool;

/// `what` with the placeholders "[b+1]" and "[b]" replaced by the indices
/// of request `b`.
static std::string forRequest(const char *what, uint64_t b) {
  std::string out(what);
  auto replace = [&](const std::string &from, uint64_t value) {
    for (size_t at = out.find(from); at != std::string::npos;
         at = out.find(from, at))
      out.replace(at, from.size(), "[" + std::to_string(value) + "]");
  };
  replace("[b+1]", b + 1);
  replace("[b]", b);
  return out;
}

Status kpool::statusWordError(uint64_t word) {
  if (word == 0)
    return Status();
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)word);
  uint8_t finding = status::findingOf(word);
  uint64_t request = status::requestOf(word);
  const char *what = status::describe(finding);
  if (!what)
    return Status::error(std::string("the status word ") + hex +
                         " holds no finding the kernels record (finding " +
                         std::to_string(finding) + ")");
  if (finding == uint8_t(status::Finding::Extent)) {
    uint64_t id = status::extentOperandOf(word);
    unsigned dim = status::extentDimOf(word);
    const char *operand = abi::operandName(int64_t(id));
    std::string name = operand ? "'" + std::string(operand) + "'"
                               : "operand " + std::to_string(id);
    std::string what =
        dim == status::kExtentRank ? name + " has the wrong rank (or is null)"
        : dim == status::kExtentData
            ? name + " has elements but no data pointer"
            : name + " dimension " + std::to_string(dim) +
                  " contradicts the op (the other operands' extents) or the "
                  "kernels' configuration (head_dim, kpool)";
    // Recorded by the kernels' own checks (ExtentChecks: they then write
    // only their outputs' defined values) or by kpool-aot's C entry points,
    // which check every view before the launch (and then nothing runs).
    return Status::error(what +
                         " (found by the kernels or their entry point; "
                         "status word " +
                         hex + ")");
  }
  std::string where =
      finding == uint8_t(status::Finding::NumRequests)
          ? std::string()
          : "request " + std::to_string(request) + ": ";
  return Status::error(where + forRequest(what, request) +
                       " (found by the kernels; status word " + hex + ")");
}
