// FileLock (see base/file_lock.hpp).
#include "base/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace mltune {

Result<FileLock> FileLock::acquire(const Sysroot &root, std::string_view abs) {
  const std::filesystem::path p = root.path(abs);
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) {
    return sys_error(p.parent_path().string() + ": mkdir", ec.value());
  }
  UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) {
    return sys_error(std::string(abs) + ": open lock file", errno);
  }
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      return sys_error(std::string(abs) + ": flock", errno);
    }
  }
  return FileLock(std::move(fd));
}

} // namespace mltune
