//===- Status.h - success or an error message -------------------*- C++ -*-===//

#ifndef KPOOL_RUNTIME_STATUS_H
#define KPOOL_RUNTIME_STATUS_H

#include <string>
#include <utility>

namespace kpool {

/// Success, or an error message.
class Status {
public:
  Status() = default;
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.msg = std::move(message);
    return s;
  }
  bool ok() const { return !failed; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return msg; }

private:
  bool failed = false;
  std::string msg;
};

} // namespace kpool

#endif // KPOOL_RUNTIME_STATUS_H
