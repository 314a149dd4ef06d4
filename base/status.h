// SPDX-License-Identifier: Apache-2.0
// The one error type of stripefs. Every layer returns Status or Result<T>; it
// lives in base/, below every layer, so the I/O seam needs nothing of meta/.
// fs/ converts a Status to an errno at the FUSE edge, tools/ prints message().
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace stripefs {

enum class Code {
  kOk = 0,
  kNotFound,         // ENOENT
  kExists,           // EEXIST
  kInvalidArgument,  // EINVAL
  kNoSpace,          // ENOSPC
  kIOError,          // EIO
  kCorruption,       // EIO (checksum or encoding mismatch)
  kNotEmpty,         // ENOTEMPTY
  kNotDirectory,     // ENOTDIR
  kIsDirectory,      // EISDIR
  kNameTooLong,      // ENAMETOOLONG
  kPermission,       // EPERM
  kNoData,           // ENODATA (missing xattr)
  kRange,            // ERANGE (buffer too small)
  kTooBig,           // E2BIG / EFBIG
  kNotSupported,     // EOPNOTSUPP
  kBusy,             // EBUSY (pool in use)
  kCrossLink,        // EXDEV
  kPastEnd,          // ENXIO (SEEK_DATA/SEEK_HOLE at or past the end)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return {}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Exists(std::string m) { return {Code::kExists, std::move(m)}; }
  static Status Invalid(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NoSpace(std::string m) { return {Code::kNoSpace, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status. Cheap to move; value() asserts success.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

// The errno a Status stands for, at the edges (FUSE replies, the object API).
int ToErrno(const Status& s);

}  // namespace stripefs

// Early-return helpers, used so error paths stay one line.
#define SFS_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::stripefs::Status _st = (expr);       \
    if (!_st.ok()) return _st;             \
  } while (0)

#define SFS_CONCAT_INNER(a, b) a##b
#define SFS_CONCAT(a, b) SFS_CONCAT_INNER(a, b)
#define SFS_ASSIGN_OR_RETURN(lhs, expr) SFS_ASSIGN_OR_RETURN_IMPL(SFS_CONCAT(_res_, __LINE__), lhs, expr)
#define SFS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
