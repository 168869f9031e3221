#include "mltune/sysroot.hpp"

#include "base/beneath.hpp"
#include "base/dirents.hpp"
#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"
#include "mltune/caches.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <sys/mman.h>
#include <sys/random.h>
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

// The knob files (sysctls, sysfs attributes, /proc/irq/N/ files) a
// resident process keeps open, by host path, -1 for a file that cannot be
// opened for both reading and writing (it takes the plain path): a slot of
// the current Caches (mltune/caches.hpp), closed with it.
struct KnobFiles {
  std::map<std::string, int, std::less<>> fds;
  KnobFiles() = default;
  KnobFiles(const KnobFiles &) = delete;
  KnobFiles &operator=(const KnobFiles &) = delete;
  KnobFiles(KnobFiles &&) = delete;
  KnobFiles &operator=(KnobFiles &&) = delete;
  ~KnobFiles() {
    for (const auto &[host, fd] : fds) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
};
constexpr size_t k_max_kept = 4096;

// The kept knob files of this thread's caches, or null (none current).
// The live node's knob files only: a file tree (--sysroot, the tests'
// fakes) has regular files, which a pwrite at offset 0 would not truncate.
KnobFiles *kept_files(const Sysroot &root, std::string_view abs) {
  Caches *c = Caches::current();
  return c != nullptr && root.is_live() && whole_in_one_read(abs) ? &c->slot<KnobFiles>() : nullptr;
}

// The kept descriptor of `host`, opened now if need be; -1: not kept.
int kept_fd(KnobFiles &kept, const std::string &host) {
  if (auto it = kept.fds.find(host); it != kept.fds.end()) {
    return it->second;
  }
  if (kept.fds.size() >= k_max_kept) {
    return -1;
  }
  const int fd = ::open(host.c_str(), O_RDWR | O_CLOEXEC);
  // Only a file that exists is remembered (a knob of a device to come is
  // looked for again next time); a read-only or write-only one as -1.
  if (fd >= 0 || errno == EACCES || errno == EPERM) {
    kept.fds.emplace(host, fd);
  }
  return fd;
}

// The file behind a kept descriptor went away (a device removed, an IRQ
// freed, a network namespace's sysctls unregistered): drop it, so the plain
// path opens what is there now.
bool gone(int err) {
  return err == ENODEV || err == ENOENT || err == EIO || err == ESTALE || err == EBADF;
}

void drop_kept(KnobFiles &kept, const std::string &host) {
  if (auto it = kept.fds.find(host); it != kept.fds.end()) {
    if (it->second >= 0) {
      ::close(it->second);
    }
    kept.fds.erase(it);
  }
}

} // namespace

size_t kept_knob_files() {
  const Caches *c = Caches::current();
  const KnobFiles *kept = c != nullptr ? c->find<KnobFiles>() : nullptr;
  return kept == nullptr ? 0 : static_cast<size_t>(std::count_if(kept->fds.begin(), kept->fds.end(), [](const auto &e) {
    return e.second >= 0;
  }));
}

Sysroot::Sysroot(fs::path root) : root_(std::move(root)) {
  if (root_.empty()) {
    root_ = "/";
  }
  prefix_ = root_.string();
  while (!prefix_.empty() && prefix_.back() == '/') {
    prefix_.pop_back();
  }
  if (!is_live()) {
    // A tree that is not there (yet) is opened at each use instead.
    if (const int fd = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
      top_ = std::shared_ptr<const int>(new int(fd), [](const int *p) { // NOLINT(cppcoreguidelines-owning-memory)
        ::close(*p);
        delete p; // NOLINT(cppcoreguidelines-owning-memory)
      });
      top_path_ = detail::fd_path(fd);
    }
  }
}

namespace detail {

UniqueFd open_node(const Sysroot &root, std::string_view abs, int flags, mode_t mode) {
  if (root.is_live()) {
    return UniqueFd(::open(std::string(abs).c_str(), flags | O_CLOEXEC, mode));
  }
  if (const int top = root.tree_fd(); top >= 0) {
    return UniqueFd(open_beneath(top, abs, flags, mode));
  }
  const UniqueFd top(::open(root.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!top) {
    return {};
  }
  return UniqueFd(open_beneath(top.get(), abs, flags, mode));
}

bool for_each_line(const Sysroot &root, std::string_view abs, const std::function<bool(std::string_view)> &f) {
  const UniqueFd fd = open_node(root, abs, O_RDONLY);
  if (!fd) {
    return false;
  }
  // A large regular file (a fixture's /proc/interrupts of 1024 columns is
  // 45 MB) is mapped, not copied through read(2): the copy alone took 30 ms.
  // /proc files report size 0 and are read as a stream.
  if (struct stat st{}; ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (1 << 20)) {
    const auto size = static_cast<size_t>(st.st_size);
    if (void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0); m != MAP_FAILED) {
      const std::string_view text(static_cast<const char *>(m), size);
      size_t start = 0;
      bool more = true;
      while (more && start < text.size()) {
        const void *nl = std::memchr(text.data() + start, '\n', text.size() - start);
        const size_t end =
            nl == nullptr ? text.size() : static_cast<size_t>(static_cast<const char *>(nl) - text.data());
        more = f(text.substr(start, end - start));
        start = end + 1;
      }
      ::munmap(m, size);
      return true;
    }
  }
  std::string pending;
  std::array<char, 65536> buf{};
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return false;
    }
    if (n == 0) {
      return pending.empty() || (f(pending), true);
    }
    pending.append(buf.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
      if (!f(std::string_view(pending).substr(start, nl - start))) {
        return true;
      }
      start = nl + 1;
    }
    pending.erase(0, start);
  }
}

} // namespace detail

namespace {

using detail::open_node;

// "/a/b/c" -> {"/a/b", "c"}; {"", ""} for a path without a last name.
std::pair<std::string, std::string> split_last(std::string_view abs) {
  while (abs.size() > 1 && abs.back() == '/') {
    abs.remove_suffix(1);
  }
  const size_t slash = abs.rfind('/');
  if (slash == std::string_view::npos || abs.substr(slash + 1).empty() || abs.substr(slash + 1) == ".") {
    return {};
  }
  return {slash == 0 ? std::string("/") : std::string(abs.substr(0, slash)), std::string(abs.substr(slash + 1))};
}

// The directory holding `abs`, for the *at() calls on its last name.  For
// a change (a write, a removal) `follow` is false: the directory's own last
// component is not followed, so a directory that another user may replace
// by a symlink leads nowhere else.
struct Parent {
  UniqueFd dir;
  std::string name;
};
Result<Parent> open_parent(const Sysroot &root, std::string_view abs, int flags = O_PATH, bool follow = true) {
  auto [dir, name] = split_last(abs);
  if (name.empty()) {
    return input_error(std::string(abs) + ": not a path to a file");
  }
  UniqueFd fd = open_node(root, dir, flags | O_DIRECTORY | (follow ? 0 : O_NOFOLLOW));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return failure(dir + ": not a directory (a symlink is not followed here)", err);
    }
    return sys_error(dir + ": open directory", err);
  }
  return Parent{std::move(fd), std::move(name)};
}

} // namespace

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
  // The namespace file itself is a magic link: followed from its own
  // directory, which is found inside the tree.
  const UniqueFd dir = open_node(*this, "/proc/1/ns", O_PATH | O_DIRECTORY);
  struct stat theirs {};
  struct stat ours {};
  return dir && ::fstatat(dir.get(), std::string(ns).c_str(), &theirs, 0) == 0 &&
         ::stat(("/proc/self/ns/" + std::string(ns)).c_str(), &ours) == 0 && theirs.st_dev == ours.st_dev &&
         theirs.st_ino == ours.st_ino;
}

bool Sysroot::is_node() const {
  if (is_live()) {
    return true;
  }
  // The namespace file itself (a magic link on a node), not followed.
  auto parent = open_parent(*this, "/proc/1/ns/pid");
  struct stat st {};
  return parent && ::fstatat(parent->dir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
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
    const UniqueFd dir = is_live() ? UniqueFd() : open_node(*this, "/proc/1/ns", O_PATH | O_DIRECTORY);
    if (dir && ::fstatat(dir.get(), std::string(ns).c_str(), &st, 0) != 0 && (errno == EACCES || errno == EPERM)) {
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
  if (has_dotdot(abs)) {
    return false;
  }
  if (is_live()) {
    return ::access(host_path(abs).c_str(), F_OK) == 0;
  }
  return open_node(*this, abs, O_PATH).valid();
}

bool Sysroot::is_dir(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return false;
  }
  return open_node(*this, abs, O_PATH | O_DIRECTORY).valid();
}

bool Sysroot::is_symlink(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return false;
  }
  auto parent = open_parent(*this, abs);
  struct stat st {};
  return parent && ::fstatat(parent->dir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISLNK(st.st_mode);
}

std::optional<std::string> Sysroot::resolve(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return std::nullopt;
  }
  if (is_live()) {
    // open(O_PATH) and a readlink of /proc/self/fd/N: three system calls,
    // where realpath(3) reads each component's link (a dozen for a device
    // under /sys/class/net); realpath(3) where /proc cannot show it.
    const UniqueFd fd(::open(std::string(abs).c_str(), O_PATH | O_CLOEXEC));
    if (!fd) {
      return std::nullopt;
    }
    std::array<char, PATH_MAX> buf{};
    const std::string link = "/proc/self/fd/" + std::to_string(fd.get());
    const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
    if (n > 0 && static_cast<size_t>(n) < buf.size() && buf[0] == '/') {
      return std::string(buf.data(), static_cast<size_t>(n));
    }
    if (::realpath(std::string(abs).c_str(), buf.data()) == nullptr) {
      return std::nullopt;
    }
    return std::string(buf.data());
  }
  UniqueFd hold;
  int top = tree_fd();
  if (top < 0) {
    hold.reset(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    top = hold.get();
  }
  std::string out = top >= 0 ? detail::resolve_beneath(top, abs, hold ? std::string_view() : top_path_) : std::string();
  if (out.empty()) {
    return std::nullopt;
  }
  return out;
}

Result<std::string> Sysroot::read_link(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  auto parent = open_parent(*this, abs);
  if (!parent) {
    return parent.error();
  }
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlinkat(parent->dir.get(), parent->name.c_str(), buf.data(), buf.size());
  if (n < 0) {
    return sys_error(std::string(abs) + ": readlink", errno);
  }
  if (static_cast<size_t>(n) >= buf.size()) {
    return sys_error(std::string(abs) + ": readlink", ENAMETOOLONG);
  }
  return std::string(buf.data(), static_cast<size_t>(n));
}

Result<std::string> Sysroot::read(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  if (KnobFiles *kept = kept_files(*this, abs); kept != nullptr) {
    // One pread(2) at offset 0: the attribute shown anew, as a fresh open reads it.
    const std::string host = host_path(abs);
    if (const int kfd = kept_fd(*kept, host); kfd >= 0) {
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
          drop_kept(*kept, host);
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
  const UniqueFd fd = open_node(*this, abs, O_RDONLY);
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
  if (KnobFiles *kept = kept_files(*this, abs); kept != nullptr) {
    // One pwrite(2) at offset 0, as a fresh open and write(2) would do.
    // /proc/irq/N/* are seq files, which refuse pwrite (seq_open clears
    // FMODE_PWRITE; kernfs puts it back for sysfs): write(2), whose
    // handlers there take no offset.
    const std::string host = host_path(abs);
    if (const int kfd = kept_fd(*kept, host); kfd >= 0) {
      const bool seq = abs.starts_with("/proc/irq/");
      ssize_t n = 0;
      do {
        n = seq ? ::write(kfd, value.data(), value.size()) : ::pwrite(kfd, value.data(), value.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (std::cmp_equal(n, value.size())) {
        return {};
      }
      if (n >= 0) {
        return failure(std::string(abs) + ": short write");
      }
      if (!gone(errno)) {
        return sys_error(std::string(abs) + ": write", errno);
      }
      drop_kept(*kept, host); // the plain path below
    }
  }
  const UniqueFd fd = open_node(*this, abs, O_WRONLY | O_TRUNC);
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

namespace {

std::function<std::string(std::string_view)> g_temp_names;
bool g_use_tmpfile = true;

// ".NAME.mltune-XXXXXXXX", the Xs random (getrandom(2)).
std::string temp_name(std::string_view target) {
  if (g_temp_names) {
    return g_temp_names(target);
  }
  static constexpr std::string_view k_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::array<unsigned char, 10> rnd{};
  size_t got = 0;
  while (got < rnd.size()) {
    const ssize_t n = ::getrandom(rnd.data() + got, rnd.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      break; // the name then has zeros; O_EXCL still refuses a clash
    }
  }
  std::string out = "." + std::string(target) + ".mltune-";
  for (const unsigned char c : rnd) {
    out.push_back(k_chars[c % k_chars.size()]);
  }
  return out;
}

constexpr int k_name_tries = 100;

Status write_all(int fd, std::string_view content, const std::string &what) {
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return sys_error(what + ": write", n < 0 ? errno : EIO);
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

// The content in a new file of `dir`, by a name no other file had: an
// O_TMPFILE file linked in (linkat(2) never replaces a name), or a file
// created O_EXCL|O_NOFOLLOW.  Returns the name.
Result<std::string> write_temp(int dir, const std::string &target, std::string_view content, const WriteOptions &o,
                               const std::string &where) {
  const auto fill = [&](int fd) -> Status {
    if (auto st = write_all(fd, content, where); !st) {
      return st;
    }
    if (::fchmod(fd, o.mode) != 0) {
      return sys_error(where + ": chmod", errno);
    }
    if (o.durable && ::fsync(fd) != 0) {
      return sys_error(where + ": fsync", errno);
    }
    return {};
  };
  if (g_use_tmpfile) {
    const UniqueFd fd(::openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, o.mode));
    if (fd) {
      if (auto st = fill(fd.get()); !st) {
        return st.error();
      }
      const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
      for (int i = 0; i < k_name_tries; ++i) {
        std::string name = temp_name(target);
        if (::linkat(fd.get(), "", dir, name.c_str(), AT_EMPTY_PATH) == 0 ||
            (errno != EEXIST && ::linkat(AT_FDCWD, self.c_str(), dir, name.c_str(), AT_SYMLINK_FOLLOW) == 0)) {
          return name;
        }
        if (errno != EEXIST) {
          break; // no way to link it here (no /proc): a named file below
        }
      }
    } else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT) {
      return sys_error(where + ": open a temporary file", errno);
    }
  }
  for (int i = 0; i < k_name_tries; ++i) {
    std::string name = temp_name(target);
    const UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, o.mode));
    if (!fd) {
      if (errno == EEXIST) {
        continue; // a file, or a symlink planted at the name: another name
      }
      return sys_error(where + ": create a temporary file", errno);
    }
    if (auto st = fill(fd.get()); !st) {
      ::unlinkat(dir, name.c_str(), 0);
      return st.error();
    }
    return name;
  }
  return failure(where + ": no free temporary name after " + std::to_string(k_name_tries) + " tries");
}

} // namespace

namespace detail {

void set_temp_names(std::function<std::string(std::string_view)> names) {
  g_temp_names = std::move(names);
}

void use_tmpfile(bool use) {
  g_use_tmpfile = use;
}

} // namespace detail

Status Sysroot::write_file(std::string_view abs, std::string_view content, WriteOptions opts) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  const std::string what(abs);
  if (opts.make_parents) {
    if (auto st = make_dirs(split_last(abs).first); !st) {
      return st;
    }
  }
  auto parent = open_parent(*this, abs, O_RDONLY, false);
  if (!parent) {
    return with_context(parent.error(), "write " + what);
  }
  const int dir = parent->dir.get();
  const std::string &name = parent->name;
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return failure(what + ": is a symbolic link: not replaced (remove it, or write the file it points to)", ELOOP);
    }
    if (!S_ISREG(st.st_mode)) {
      return failure(what + ": not a regular file: not replaced", EEXIST);
    }
  } else if (errno != ENOENT) {
    return sys_error(what + ": stat", errno);
  }
  auto tmp = write_temp(dir, name, content, opts, what);
  if (!tmp) {
    return tmp.error();
  }
  if (::renameat(dir, tmp->c_str(), dir, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir, tmp->c_str(), 0);
    return sys_error(what + ": rename", err);
  }
  if (opts.durable && ::fsync(dir) != 0 && errno != EINVAL) {
    return sys_error(split_last(abs).first + ": fsync", errno);
  }
  return {};
}

Status Sysroot::remove_file(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  auto parent = open_parent(*this, abs, O_PATH, false);
  if (!parent) {
    if (parent.error().sys_errno == ENOENT) {
      return {};
    }
    return parent.error();
  }
  if (::unlinkat(parent->dir.get(), parent->name.c_str(), 0) != 0 && errno != ENOENT) {
    return sys_error(std::string(abs) + ": unlink", errno);
  }
  return {};
}

Status Sysroot::make_dirs(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  // Each component below the last that exists, made in the directory
  // before it (opened inside the tree).
  for (size_t pos = 1; pos <= abs.size();) {
    const size_t end = std::min(abs.find('/', pos), abs.size());
    const std::string_view upto = abs.substr(0, end);
    pos = end + 1;
    if (upto.empty() || upto.back() == '/' || is_dir(upto)) {
      continue;
    }
    auto parent = open_parent(*this, upto); // as mkdir -p: every directory followed
    if (!parent) {
      return parent.error();
    }
    if (::mkdirat(parent->dir.get(), parent->name.c_str(), 0755) != 0 && errno != EEXIST) {
      return sys_error(std::string(upto) + ": mkdir", errno);
    }
    if (!is_dir(upto)) {
      return failure(std::string(upto) + ": not a directory", ENOTDIR);
    }
  }
  return {};
}

Status Sysroot::remove_dir(std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  auto parent = open_parent(*this, abs);
  if (!parent) {
    return parent.error().sys_errno == ENOENT ? Status{} : Status(parent.error());
  }
  if (::unlinkat(parent->dir.get(), parent->name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return sys_error(std::string(abs) + ": rmdir", errno);
  }
  return {};
}

Status Sysroot::symlink(std::string_view target, std::string_view abs) const {
  if (has_dotdot(abs)) {
    return input_error(std::string(abs) + ": path contains '..'");
  }
  if (auto st = make_dirs(split_last(abs).first); !st) {
    return st;
  }
  auto parent = open_parent(*this, abs);
  if (!parent) {
    return parent.error();
  }
  ::unlinkat(parent->dir.get(), parent->name.c_str(), 0);
  if (::symlinkat(std::string(target).c_str(), parent->dir.get(), parent->name.c_str()) != 0) {
    return sys_error(std::string(abs) + ": symlink", errno);
  }
  return {};
}

std::vector<std::string> Sysroot::list_dir(std::string_view abs) const {
  std::vector<std::string> out;
  if (has_dotdot(abs)) {
    return out;
  }
  const UniqueFd fd = open_node(*this, abs, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return out;
  }
  detail::for_each_dirent(fd.get(), [&](std::string_view name) { out.emplace_back(name); });
  std::ranges::sort(out);
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
