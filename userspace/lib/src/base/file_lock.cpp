// FileLock (see base/file_lock.hpp).
#include "base/file_lock.hpp"

#include "base/sysroot_fd.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>

namespace mltune {

namespace {

std::string parent_of(std::string_view abs) {
  const size_t slash = abs.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string("/") : std::string(abs.substr(0, slash));
}

// The descriptors of held locks passed on to children (pass_to_children());
// an entry lives from pass_to_children() to release().
struct PassedFds {
  std::mutex mu;
  std::vector<int> fds; // guarded by mu
};
PassedFds &passed() {
  static PassedFds p;
  return p;
}

// Whether `fd` is still the file at `abs` (not removed or replaced since
// it was opened).
bool still_there(const Sysroot &root, std::string_view abs, int fd) {
  struct stat ours {};
  struct stat now {};
  const UniqueFd again = detail::open_node(root, abs, O_PATH | O_NOFOLLOW);
  return again && ::fstat(fd, &ours) == 0 && ::fstat(again.get(), &now) == 0 && ours.st_dev == now.st_dev &&
         ours.st_ino == now.st_ino;
}

} // namespace

Result<FileLock> FileLock::acquire(const Sysroot &root, std::string_view abs, Missing missing) {
  for (;;) {
    UniqueFd fd = detail::open_node(root, abs, O_RDONLY | O_NOFOLLOW);
    if (!fd && errno == ENOENT) {
      if (missing == Missing::skip) {
        return FileLock(root, std::string(abs), UniqueFd());
      }
      if (auto st = root.make_dirs(parent_of(abs)); !st) {
        return st.error();
      }
      fd = detail::open_node(root, abs, O_RDONLY | O_CREAT | O_NOFOLLOW, 0600);
    }
    if (!fd) {
      return sys_error(std::string(abs) + ": open lock file", errno);
    }
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) {
        return sys_error(std::string(abs) + ": flock", errno);
      }
    }
    if (still_there(root, abs, fd.get())) {
      return FileLock(root, std::string(abs), std::move(fd));
    }
    // Its holder removed it while this process waited: lock what is there now.
  }
}

FileLock &FileLock::operator=(FileLock &&o) noexcept {
  if (this != &o) {
    release();
    root_ = std::move(o.root_);
    abs_ = std::move(o.abs_);
    fd_ = std::move(o.fd_);
    remove_ = o.remove_;
  }
  return *this;
}

FileLock::~FileLock() {
  release();
}

void FileLock::pass_to_children() {
  if (fd_) {
    const std::scoped_lock g(passed().mu);
    passed().fds.push_back(fd_.get());
  }
}

std::vector<int> FileLock::passed_to_children() {
  const std::scoped_lock g(passed().mu);
  return passed().fds;
}

void FileLock::release() {
  if (fd_) {
    const std::scoped_lock g(passed().mu);
    std::erase(passed().fds, fd_.get());
  }
  if (fd_ && remove_ && still_there(root_, abs_, fd_.get())) {
    (void)root_.remove_file(abs_);
  }
  fd_.reset();
}

} // namespace mltune
