// FileLock: the one inter-process lock of libmltune, an exclusive flock(2) on
// a file below the Sysroot (so a --sysroot run never locks the live host).
// It fails loudly: when the lock file cannot be created or locked, acquire()
// returns the error and the caller does not go on unlocked.
#pragma once

#include "base/unique_fd.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <string_view>

namespace mltune {

class FileLock {
public:
  // Blocks until the lock on `abs` (a node path such as
  // "/run/mltune/feeder.lock", created with its directory) is held.
  static Result<FileLock> acquire(const Sysroot &root, std::string_view abs);

  FileLock(FileLock &&) noexcept = default;
  FileLock &operator=(FileLock &&) noexcept = default;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;
  ~FileLock() = default; // closing the descriptor drops the lock

private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

} // namespace mltune
