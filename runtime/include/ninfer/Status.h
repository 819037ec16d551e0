// Error handling for the runtime: every call that can fail returns a Status
// (or a Result<T>) with a message meant for the user. No exceptions cross the
// runtime's API and library code never aborts or exits.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace ninfer {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const std::string& message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }

private:
  Status() = default;
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)), status_(Status::ok()) {}
  Result(Status status) : status_(std::move(status)) {}

  bool isOk() const { return status_.isOk(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

#define NINFER_RETURN_IF_ERROR(expr)                                                              \
  do {                                                                                            \
    ::ninfer::Status _st = (expr);                                                                \
    if (!_st.isOk()) return _st;                                                                  \
  } while (0)

} // namespace ninfer
