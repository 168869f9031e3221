// Reading a directory with getdents64(2): the entry names without a stat
// per entry and without opendir()'s fstat and fcntl calls (std::filesystem's
// directory_iterator makes seven system calls for a small directory, this
// three plus the open and close).
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <dirent.h>
#include <string_view>
#include <sys/syscall.h>
#include <unistd.h>

namespace mltune::detail {

// Calls f(name) for every entry of the open directory `fd` but "." and "..".
template <class F> void for_each_dirent(int fd, F &&f) {
  alignas(8) std::array<char, 16384> buf{};
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    for (long off = 0; off < n;) {
      dirent64 d{};
      // d_name may run past sizeof(dirent64) in the buffer: copy the fixed
      // part, then read the name in place.
      std::memcpy(&d, buf.data() + off, offsetof(dirent64, d_name));
      const std::string_view name(buf.data() + off + offsetof(dirent64, d_name));
      if (name != "." && name != "..") {
        f(name);
      }
      off += d.d_reclen;
    }
  }
}

} // namespace mltune::detail
