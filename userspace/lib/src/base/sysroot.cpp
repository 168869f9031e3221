#include "mltune/sysroot.hpp"

#include "base/dirents.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace mltune {

namespace fs = std::filesystem;

Error sys_error(const std::string &what, int err) {
  return failure(what + ": " + std::strerror(err), err);
}

namespace {

constexpr size_t k_max_read = 1 << 20;

bool has_dotdot(std::string_view p) {
  // A component-wise scan: "a/../b" and "/.." are refused, "a..b" is not.
  size_t pos = 0;
  while (pos <= p.size()) {
    const size_t end = std::min(p.find('/', pos), p.size());
    if (p.substr(pos, end - pos) == "..") {
      return true;
    }
    pos = end + 1;
  }
  return false;
}

// A sysfs attribute or a sysctl is produced whole by the first read (one
// show() into a page): a read shorter than the buffer is the end of it.
// Not so the other file systems mounted under /sys, whose files may hand
// out a record at a time (cgroup.procs, a pinned BPF iterator, tracefs).
bool whole_in_one_read(std::string_view abs) {
  // /proc/irq/N/* are single_open() seq files: one show() too.
  return abs.starts_with("/proc/sys/") || abs.starts_with("/proc/irq/") ||
         (abs.starts_with("/sys/") && !abs.starts_with("/sys/fs/") && !abs.starts_with("/sys/kernel/debug/") &&
          !abs.starts_with("/sys/kernel/tracing/") && !abs.starts_with("/sys/kernel/security/") &&
          !abs.starts_with("/sys/kernel/config/"));
}

// keep_knob_files(): the open descriptors of knob files (sysctls, sysfs
// attributes, /proc/irq/N/ files) by host path, -1 for a file that cannot
// be opened for both reading and writing (it takes the plain path).  One
// per process, used from one thread (mltunectl serve).
bool g_keep_knobs = false;
std::map<std::string, int, std::less<>> g_knob_fds;
constexpr size_t k_max_kept = 4096;

// The live node's knob files only: a file tree (--sysroot, the tests'
// fakes) has regular files, which a pwrite at offset 0 would not truncate.
bool keepable(const Sysroot &root, std::string_view abs) {
  return g_keep_knobs && root.is_live() && whole_in_one_read(abs);
}

// The kept descriptor of `host`, opened now if need be; -1: not kept.
int kept_fd(const std::string &host) {
  if (auto it = g_knob_fds.find(host); it != g_knob_fds.end()) {
    return it->second;
  }
  if (g_knob_fds.size() >= k_max_kept) {
    return -1;
  }
  const int fd = ::open(host.c_str(), O_RDWR | O_CLOEXEC);
  // Only a file that exists is remembered (a knob of a device to come is
  // looked for again next time); a read-only or write-only one as -1.
  if (fd >= 0 || errno == EACCES || errno == EPERM) {
    g_knob_fds.emplace(host, fd);
  }
  return fd;
}

// The file behind a kept descriptor went away (a device removed, an IRQ
// freed, a network namespace's sysctls unregistered): drop it, so the plain
// path opens what is there now.
bool gone(int err) {
  return err == ENODEV || err == ENOENT || err == EIO || err == ESTALE || err == EBADF;
}

void drop_kept(const std::string &host) {
  if (auto it = g_knob_fds.find(host); it != g_knob_fds.end()) {
    if (it->second >= 0) {
      ::close(it->second);
    }
    g_knob_fds.erase(it);
  }
}

} // namespace

void keep_knob_files(bool keep) {
  g_keep_knobs = keep;
  if (!keep) {
    for (const auto &[host, fd] : g_knob_fds) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    g_knob_fds.clear();
  }
}

size_t kept_knob_files() {
  return static_cast<size_t>(
      std::count_if(g_knob_fds.begin(), g_knob_fds.end(), [](const auto &e) { return e.second >= 0; }));
}

Sysroot::Sysroot(fs::path root) : root_(std::move(root)) {
  if (root_.empty()) {
    root_ = "/";
  }
  prefix_ = root_.string();
  while (!prefix_.empty() && prefix_.back() == '/') {
    prefix_.pop_back();
  }
}

std::string Sysroot::host_path(std::string_view abs) const {
  while (!abs.empty() && abs.front() == '/') {
    abs.remove_prefix(1);
  }
  std::string out;
  out.reserve(prefix_.size() + 1 + abs.size());
  out.append(prefix_).append("/").append(abs);
  return out;
}

bool Sysroot::shares_namespace(std::string_view ns) const {
  if (is_live()) {
    return true;
  }
  const std::string rel = "/proc/1/ns/" + std::string(ns);
  struct stat theirs {};
  struct stat ours {};
  return ::stat(host_path(rel).c_str(), &theirs) == 0 &&
         ::stat(("/proc/self/ns/" + std::string(ns)).c_str(), &ours) == 0 && theirs.st_dev == ours.st_dev &&
         theirs.st_ino == ours.st_ino;
}

bool Sysroot::is_node() const {
  struct stat st {};
  return is_live() || ::lstat(host_path("/proc/1/ns/pid").c_str(), &st) == 0;
}

Status Sysroot::require_namespaces(std::string_view what, std::initializer_list<std::string_view> nss) const {
  if (!is_node()) {
    return input_error(std::string(what) + ": --sysroot " + root_.string() +
                       " is a file tree, not a running node; this acts on the live node only (or in a container "
                       "that mounts the host there and shares its PID and network namespaces)");
  }
  // The namespace, and how a container gets the host's.
  static const std::map<std::string_view, std::pair<std::string_view, std::string_view>, std::less<>> k_how = {
      {"net", {"network", "hostNetwork: true, docker --network host"}},
      {"pid", {"PID", "hostPID: true, docker --pid host"}},
      {"cgroup", {"cgroup", "docker --cgroupns host"}},
  };
  for (const auto ns : nss) {
    struct stat st {};
    const std::string theirs = "/proc/1/ns/" + std::string(ns);
    if (!is_live() && ::stat(host_path(theirs).c_str(), &st) != 0 && (errno == EACCES || errno == EPERM)) {
      // Following the link is a ptrace access check on the node's init.
      return input_error(std::string(what) + ": --sysroot " + root_.string() +
                         ": cannot compare namespaces: " + theirs + ": " + std::strerror(errno) +
                         " (reading another process's namespaces takes CAP_SYS_PTRACE: add it to the container)");
    }
    if (!shares_namespace(ns)) {
      const auto it = k_how.find(ns);
      const std::string name(it != k_how.end() ? it->second.first : ns);
      const std::string how(it != k_how.end() ? it->second.second : "");
      return input_error(std::string(what) + ": --sysroot " + root_.string() + ": this process has its own " + name +
                         " namespace, not the node's: run the container in the host's (" + how + ")");
    }
  }
  return {};
}

fs::path Sysroot::path(std::string_view abs) const {
  return host_path(abs);
}

bool Sysroot::exists(std::string_view abs) const {
  std::error_code ec;
  return !has_dotdot(abs) && fs::exists(path(abs), ec);
}

bool Sysroot::is_dir(std::string_view abs) const {
  std::error_code ec;
  return !has_dotdot(abs) && fs::is_directory(path(abs), ec);
}

Result<std::string> Sysroot::read(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  if (keepable(*this, abs)) {
    // One pread(2) at offset 0: the attribute shown anew, as a fresh open reads it.
    const std::string host = host_path(abs);
    if (const int kfd = kept_fd(host); kfd >= 0) {
      std::array<char, 4096> page{};
      std::string whole;
      for (;;) {
        const ssize_t n = ::pread(kfd, page.data(), page.size(), static_cast<off_t>(whole.size()));
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n < 0) {
          if (!gone(errno)) {
            return sys_error(std::string(abs) + ": read", errno);
          }
          drop_kept(host);
          break; // the plain path below: the file as it is now, or its error
        }
        whole.append(page.data(), static_cast<size_t>(n));
        if (n == 0 || (static_cast<size_t>(n) < page.size() && whole_in_one_read(abs)) || whole.size() > k_max_read) {
          if (whole.size() > k_max_read) {
            return failure(std::string(abs) + ": file larger than 1 MiB");
          }
          return whole;
        }
      }
    }
  }
  const UniqueFd fd(::open(host_path(abs).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return sys_error(std::string(abs) + ": open", errno);
  }
  std::string out;
  char buf[4096];
  // The read that would return 0 is saved where the first is whole (a
  // switch reads dozens of knobs).
  const bool whole_first = whole_in_one_read(abs);
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sys_error(std::string(abs) + ": read", errno);
    }
    if (n == 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > k_max_read) {
      return failure(std::string(abs) + ": file larger than 1 MiB");
    }
    if (whole_first && static_cast<size_t>(n) < sizeof buf) {
      break;
    }
  }
  return out;
}

Result<std::string> Sysroot::read_value(std::string_view abs) const {
  auto raw = read(abs);
  if (!raw) {
    return raw.error();
  }
  return normalize_value(*raw);
}

Status Sysroot::write_value(std::string_view abs, std::string_view value) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  if (auto it = faults_.find(abs); it != faults_.end()) {
    return sys_error(std::string(abs) + ": write", it->second);
  }
  if (keepable(*this, abs)) {
    // One pwrite(2) at offset 0, as a fresh open and write(2) would do.
    // /proc/irq/N/* are seq files, which refuse pwrite (seq_open clears
    // FMODE_PWRITE; kernfs puts it back for sysfs): write(2), whose
    // handlers there take no offset.
    const std::string host = host_path(abs);
    if (const int kfd = kept_fd(host); kfd >= 0) {
      const bool seq = abs.starts_with("/proc/irq/");
      ssize_t n = 0;
      do {
        n = seq ? ::write(kfd, value.data(), value.size()) : ::pwrite(kfd, value.data(), value.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(value.size())) {
        return {};
      }
      if (n >= 0) {
        return failure(std::string(abs) + ": short write");
      }
      if (!gone(errno)) {
        return sys_error(std::string(abs) + ": write", errno);
      }
      drop_kept(host); // the plain path below
    }
  }
  const UniqueFd fd(::open(host_path(abs).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (fd.get() < 0) {
    return sys_error(std::string(abs) + ": open", errno);
  }
  // One write(2) for sysctls; sysfs binary attributes may take less per call.
  size_t off = 0;
  do {
    const ssize_t n = ::write(fd.get(), value.data() + off, value.size() - off);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return sys_error(std::string(abs) + ": write", errno);
    }
    if (n == 0 && off < value.size()) {
      return failure(std::string(abs) + ": short write");
    }
    off += static_cast<size_t>(n);
  } while (off < value.size());
  return {};
}

Status Sysroot::write_file(std::string_view abs, std::string_view content, bool durable) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  const fs::path target = path(abs);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    return sys_error(target.parent_path().string() + ": mkdir", ec.value());
  }
  const fs::path tmp = target.string() + ".mltune-tmp";
  {
    const UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      return sys_error(tmp.string() + ": open", errno);
    }
    size_t off = 0;
    while (off < content.size()) {
      const ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return sys_error(tmp.string() + ": write", err);
      }
      off += static_cast<size_t>(n);
    }
    if (durable && ::fsync(fd.get()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return sys_error(tmp.string() + ": fsync", err);
    }
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return sys_error(target.string() + ": rename", err);
  }
  return {};
}

Status Sysroot::remove_file(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  if (::unlink(host_path(abs).c_str()) != 0 && errno != ENOENT) {
    return sys_error(std::string(abs) + ": unlink", errno);
  }
  return {};
}

Status Sysroot::symlink(std::string_view target, std::string_view abs) const {
  const fs::path link = path(abs);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  ::unlink(link.c_str());
  if (::symlink(std::string(target).c_str(), link.c_str()) != 0) {
    return sys_error(std::string(abs) + ": symlink", errno);
  }
  return {};
}

std::vector<std::string> Sysroot::list_dir(std::string_view abs) const {
  std::vector<std::string> out;
  if (has_dotdot(abs)) {
    return out;
  }
  const UniqueFd fd(::open(host_path(abs).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    return out;
  }
  detail::for_each_dirent(fd.get(), [&](std::string_view name) { out.emplace_back(name); });
  std::sort(out.begin(), out.end());
  return out;
}

std::string normalize_value(std::string_view raw) {
  if (const auto open = raw.find('['); open != std::string_view::npos) {
    if (const auto close = raw.find(']', open); close != std::string_view::npos) {
      raw = raw.substr(open + 1, close - open - 1);
    }
  }
  std::string out;
  bool space = false;
  for (const char c : raw) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) {
      out.push_back(' ');
      space = false;
    }
    out.push_back(c);
  }
  return out;
}

} // namespace mltune
