// Error handling for libmltune.
//
// Every fallible library function returns mltune::Result<T>: either a value or
// an mltune::Error.  Library code never throws across its API; exceptions from
// third-party parsers are caught at the boundary and turned into Errors.
//
// An Error carries:
//   kind     - Errc::input  : the caller's input is wrong (bad profile, unknown
//                             key, out-of-range value).  mltunectl exits 2.
//              Errc::failed : the operation failed on the node (I/O error,
//                             write refused, node differs).   mltunectl exits 1.
//   message  - complete, human-readable context ("training.toml:7: ...",
//              "/proc/sys/vm/swappiness: write: Invalid argument").
//   sys_errno- the errno behind a system-call failure, 0 otherwise.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mltune {

enum class Errc { failed = 1, input = 2 };

struct Error {
  Errc kind = Errc::failed;
  std::string message;
  int sys_errno = 0;
};

inline Error input_error(std::string msg) {
  return {Errc::input, std::move(msg), 0};
}
inline Error failure(std::string msg, int err = 0) {
  return {Errc::failed, std::move(msg), err};
}
// "what: strerror(err)" with errno kept.
Error sys_error(const std::string &what, int err);
// The same error seen from a wider context: "context: message", with its kind
// and errno kept.  The one way context is added to an error.
inline Error with_context(Error e, std::string_view context) {
  e.message = std::string(context) + ": " + e.message;
  return e;
}

template <class T> class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}     // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {} // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T &value() & { return std::get<0>(v_); }
  const T &value() const & { return std::get<0>(v_); }
  T &&value() && { return std::get<0>(std::move(v_)); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  [[nodiscard]] const Error &error() const { return std::get<1>(v_); }
  // The value, or `fallback` when this holds an error (which is dropped).
  [[nodiscard]] T value_or(T fallback) const & { return ok() ? value() : std::move(fallback); }
  [[nodiscard]] T value_or(T fallback) && { return ok() ? std::move(*this).value() : std::move(fallback); }

private:
  std::variant<T, Error> v_;
};

template <> class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Error error) : e_(std::move(error)) {} // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool ok() const { return !e_; }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] const Error &error() const { return e_.value(); } // only after !ok()

private:
  std::optional<Error> e_;
};

using Status = Result<void>;

} // namespace mltune
