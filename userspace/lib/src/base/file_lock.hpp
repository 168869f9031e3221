// FileLock: the one inter-process lock of libmltune, an exclusive flock(2) on
// a file below the Sysroot (so a --sysroot run never locks the live host).
// It fails loudly: when the lock file cannot be created or locked, acquire()
// returns the error and the caller does not go on unlocked.
//
// A lock file may be removed by its holder (remove_on_release(): `off`
// leaves none behind).  So that two processes never both hold "the" lock,
// one on the removed file and one on a new one, acquire() checks after
// flock(2) that the path still names the file it locked, and starts again
// when it does not.
#pragma once

#include "base/unique_fd.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace mltune {

class FileLock {
public:
  // What acquire() does when the lock file is not there.
  enum class Missing {
    create, // create it (with /run/mltune above it): for a change
    skip,   // hold nothing: for a read or a dry run, which then create nothing
  };

  // Blocks until the lock on `abs` (a node path such as
  // "/run/mltune/feeder.lock") is held.
  static Result<FileLock> acquire(const Sysroot &root, std::string_view abs, Missing missing = Missing::create);

  FileLock(FileLock &&) noexcept = default;
  FileLock &operator=(FileLock &&) noexcept;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;
  ~FileLock(); // closing the descriptor drops the lock

  // Whether a lock is held (false for Missing::skip on an absent file).
  [[nodiscard]] bool held() const { return fd_.valid(); }
  // The lock file is removed when the lock is released, while still held.
  void remove_on_release() { remove_ = true; }
  // The programs this process runs to change what the lock guards
  // (modprobe: run_command's keep_fds) inherit the locked descriptor, so
  // the lock stays held until they end, even when this process is killed
  // first: nothing that takes the lock (`off`, the next switch) runs beside
  // a modprobe its killed parent started.
  void pass_to_children();
  // The descriptors of the locks this process holds with pass_to_children().
  static std::vector<int> passed_to_children();

private:
  FileLock(Sysroot root, std::string abs, UniqueFd fd)
      : root_(std::move(root)), abs_(std::move(abs)), fd_(std::move(fd)) {}
  void release();

  Sysroot root_;
  std::string abs_;
  UniqueFd fd_;
  bool remove_ = false;
};

} // namespace mltune
