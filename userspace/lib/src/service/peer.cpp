// Who may have the resident switcher run a command (mltune/service.hpp):
// the kernel module's rule, capable(CAP_SYS_ADMIN), applied to the process
// at the other end of the socket.
#include "mltune/service.hpp"

#include "base/unique_fd.hpp"
#include "mltune/parse.hpp"

#include <array>
#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <linux/capability.h>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

// Linux 6.5; bookworm's headers (6.1) lack it.
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

namespace mltune {

namespace {

// A /proc file of a few kilobytes, whole; nullopt when it cannot be read.
std::optional<std::string> read_proc(const std::string &path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return std::nullopt;
  }
  std::string s;
  std::array<char, 4096> b{};
  while (true) {
    const ssize_t n = ::read(fd.get(), b.data(), b.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return std::nullopt;
    }
    if (n == 0) {
      return s;
    }
    s.append(b.data(), static_cast<size_t>(n));
  }
}

// The words after "<key>:" on its line of a /proc status or fdinfo file.
std::vector<std::string_view> field(std::string_view text, std::string_view key) {
  for (const std::string_view line : split_lines(text)) {
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') {
      return split_words(line.substr(key.size() + 1));
    }
  }
  return {};
}

// The inode of the initial user namespace in nsfs, fixed by the kernel
// (PROC_USER_INIT_INO, include/linux/proc_ns.h): the namespace whose
// capabilities capable() checks.  Reading /proc/1/ns/user instead needs
// ptrace access to init, which an LSM may refuse even to root.
constexpr ino_t k_init_user_ns_ino = 0xEFFFFFFDU;

} // namespace

bool holds_cap_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3> data{};
  if (::syscall(SYS_capget, &header, data.data()) != 0) {
    return false;
  }
  return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

Status authorize_peer(int conn_fd, PeerLookup how) {
  // The peer's pidfd: from the socket itself (it names the process that
  // connected, whatever happened to its pid since), else from its pid.
  UniqueFd pidfd;
  int pid = 0;
  int pfd = -1;
  socklen_t len = sizeof(pfd);
  int got = -1;
  int err = ENOPROTOOPT; // what kernels before 6.5 say to SO_PEERPIDFD
  if (how == PeerLookup::pidfd) {
    got = ::getsockopt(conn_fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len);
    err = errno;
  }
  if (got == 0) {
    pidfd.reset(pfd);
    const auto info = read_proc("/proc/self/fdinfo/" + std::to_string(pfd)).value_or("");
    const auto p = field(info, "Pid"); // -1 once it exited, 0 outside this pid namespace
    pid = p.size() == 1 ? parse_int<int>(p[0]).value_or(0) : 0;
  } else if (err == ENOPROTOOPT) {
    ucred cred{};
    len = sizeof(cred);
    if (::getsockopt(conn_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return sys_error("SO_PEERCRED", errno);
    }
    pid = cred.pid;
    if (pid > 0) {
      pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      if (!pidfd && errno != ESRCH) {
        return sys_error("pidfd_open " + std::to_string(pid), errno);
      }
    }
  } else if (err != ESRCH) { // ESRCH: the peer exited
    return sys_error("SO_PEERPIDFD", err);
  }
  if (pid <= 0 || !pidfd) {
    return input_error("refused: the client's process exited, or is not in the service's pid namespace");
  }
  const std::string who = "pid " + std::to_string(pid);
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::string status = read_proc(dir + "/status").value_or("");
  const auto cap_eff = field(status, "CapEff");
  const auto eff = cap_eff.size() == 1 ? parse_int<uint64_t>(cap_eff[0], 16) : std::nullopt;
  const auto uids = field(status, "Uid"); // real, effective, saved, filesystem
  const std::string uid = uids.size() == 4 ? std::string(uids[1]) : "?";
  struct stat ns {};
  const bool ns_ok = ::stat((dir + "/ns/user").c_str(), &ns) == 0;
  // Still the same process: then the pid was not reused while its files
  // were read (a pidfd polls readable once its process has exited).
  pollfd p{pidfd.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) {
    return input_error("refused " + who + ": it exited while its credentials were read");
  }
  if (!eff || !ns_ok) {
    return failure(who + ": cannot read its capabilities or user namespace from " + dir);
  }
  if ((*eff & (uint64_t{1} << CAP_SYS_ADMIN)) == 0) {
    return input_error("refused " + who + " (uid " + uid +
                       "): it lacks CAP_SYS_ADMIN, which the kernel module requires of a switch");
  }
  if (ns.st_ino != k_init_user_ns_ino) {
    return input_error("refused " + who + " (uid " + uid +
                       "): its CAP_SYS_ADMIN is in a user namespace other than the initial one");
  }
  return {};
}

} // namespace mltune
