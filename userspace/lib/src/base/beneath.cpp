// Opening a path below a directory as if it were "/" (see base/beneath.hpp).
#include "base/beneath.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <deque>
#include <fcntl.h>
#include <linux/openat2.h>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mltune::detail {

namespace {

// As the kernel's MAXSYMLINKS: a longer chain is a loop.
constexpr int k_max_links = 40;

std::atomic<bool> g_force_walk{false};
// Set once openat2(2) answered ENOSYS: this kernel has none.
std::atomic<bool> g_no_openat2{false};

// Appends the components of `path` to `out` (at the back), or puts them
// before what `out` holds (at the front), without "" and ".".
void split_into(std::string_view path, std::deque<std::string> &out, bool front) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t end = std::min(path.find('/', pos), path.size());
    const std::string_view part = path.substr(pos, end - pos);
    if (!part.empty() && part != ".") {
      parts.emplace_back(part);
    }
    pos = end + 1;
  }
  if (front) {
    out.insert(out.begin(), parts.begin(), parts.end());
  } else {
    out.insert(out.end(), parts.begin(), parts.end());
  }
}

std::optional<std::string> link_target(int fd) {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlinkat(fd, "", buf.data(), buf.size());
  if (n < 0) {
    return std::nullopt;
  }
  if (static_cast<size_t>(n) >= buf.size()) {
    errno = ENAMETOOLONG;
    return std::nullopt;
  }
  return std::string(buf.data(), static_cast<size_t>(n));
}

// The user-space resolution: each component opened O_PATH|O_NOFOLLOW from
// the descriptor of the directory before it, symlinks read and resolved
// against the tree.  `names`, when given, receives the resolved path's
// components.
int walk(int top, std::string_view rel, int flags, mode_t mode, std::vector<std::string> *names) {
  std::deque<std::string> todo;
  split_into(rel, todo, false);
  std::vector<UniqueFd> dirs; // the directories below `top` walked into
  std::vector<std::string> seen;
  int links = 0;
  const auto cur = [&] { return dirs.empty() ? top : dirs.back().get(); };
  const auto done = [&](int fd, const std::string *last) {
    if (fd >= 0 && names != nullptr) {
      *names = std::move(seen);
      if (last != nullptr) {
        names->push_back(*last);
      }
    }
    return fd;
  };
  while (!todo.empty()) {
    std::string name = std::move(todo.front());
    todo.pop_front();
    if (name == "..") {
      if (!dirs.empty()) {
        dirs.pop_back();
        seen.pop_back();
      }
      continue;
    }
    const bool last = todo.empty();
    UniqueFd fd(::openat(cur(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      if (last && errno == ENOENT && (flags & O_CREAT) != 0) {
        return done(::openat(cur(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode), &name);
      }
      return -1;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      return -1;
    }
    if (S_ISLNK(st.st_mode)) {
      if (last && (flags & O_NOFOLLOW) != 0) {
        if ((flags & O_PATH) != 0) {
          return done(fd.release(), &name); // the link itself, as open(2) gives it
        }
        errno = ELOOP;
        return -1;
      }
      if (++links > k_max_links) {
        errno = ELOOP;
        return -1;
      }
      const auto target = link_target(fd.get());
      if (!target) {
        return -1;
      }
      if (target->starts_with('/')) {
        dirs.clear();
        seen.clear();
      }
      split_into(*target, todo, true);
      continue;
    }
    if (last) {
      if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
        errno = EEXIST;
        return -1;
      }
      // Opened again from its directory, not followed if it became a
      // symlink meanwhile.
      return done(::openat(cur(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode), &name);
    }
    if (!S_ISDIR(st.st_mode)) {
      errno = ENOTDIR;
      return -1;
    }
    dirs.push_back(std::move(fd));
    seen.push_back(std::move(name));
  }
  // The path ends at a directory: the tree's top, or one reached by "..".
  return done(::openat(cur(), ".", flags | O_CLOEXEC, mode), nullptr);
}

} // namespace

void force_user_space_walk(bool force) {
  g_force_walk = force;
}

int open_beneath(int top, std::string_view rel, int flags, mode_t mode) {
  while (rel.starts_with('/')) {
    rel.remove_prefix(1);
  }
  if (!g_force_walk && !g_no_openat2) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const std::string path = rel.empty() ? std::string(".") : std::string(rel);
    for (int tries = 0;; ++tries) {
      const long fd = ::syscall(SYS_openat2, top, path.c_str(), &how, sizeof how);
      if (fd >= 0) {
        return static_cast<int>(fd);
      }
      // EAGAIN: a rename raced with the lookup ("..", RESOLVE_IN_ROOT).
      if (errno == EAGAIN && tries < 8) {
        continue;
      }
      if (errno != ENOSYS) {
        return -1;
      }
      g_no_openat2 = true;
      break;
    }
  }
  return walk(top, rel, flags, mode, nullptr);
}

std::string fd_path(int fd) {
  std::array<char, 4096> buf{};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
  if (n <= 0 || static_cast<size_t>(n) >= buf.size() || buf[0] != '/') {
    return {};
  }
  std::string out(buf.data(), static_cast<size_t>(n));
  return out.ends_with(" (deleted)") ? std::string() : out;
}

namespace {

// `full` as a path below the tree whose top is at `base`; nullopt where it
// does not lie below it.
std::optional<std::string> below(const std::string &full, std::string_view base) {
  if (base == "/") {
    return full;
  }
  if (full == base) {
    return std::string("/");
  }
  if (full.size() > base.size() && full.starts_with(base) && full[base.size()] == '/') {
    return full.substr(base.size());
  }
  return std::nullopt;
}

// The kernel's resolution: openat2(2) in the tree's root, then the opened
// file's path relative to the tree's own. Four system calls, where the walk
// makes two per component and three per symlink (a device under
// /sys/class/net: a dozen components and links). nullopt where the kernel
// cannot answer this way (no openat2, no /proc, a path that does not lie
// below the tree's: then the walk decides); "" where the path does not
// resolve.
std::optional<std::string> resolve_in_kernel(int top, std::string_view rel, std::string_view top_path) {
  if (g_force_walk || g_no_openat2) {
    return std::nullopt;
  }
  open_how how{};
  how.flags = static_cast<uint64_t>(O_PATH | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string path = rel.empty() ? std::string(".") : std::string(rel);
  long fd = -1;
  for (int tries = 0; fd < 0; ++tries) {
    fd = ::syscall(SYS_openat2, top, path.c_str(), &how, sizeof how);
    if (fd < 0 && (errno != EAGAIN || tries >= 8)) {
      return errno == ENOSYS || errno == EAGAIN ? std::nullopt : std::optional<std::string>(std::string());
    }
  }
  const UniqueFd held(static_cast<int>(fd));
  const std::string full = fd_path(held.get());
  if (full.empty()) {
    return std::nullopt;
  }
  if (!top_path.empty()) {
    if (auto r = below(full, top_path)) {
      return r;
    }
  }
  const std::string base = fd_path(top);
  return base.empty() ? std::nullopt : below(full, base);
}

} // namespace

std::string resolve_beneath(int top, std::string_view rel, std::string_view top_path) {
  while (rel.starts_with('/')) {
    rel.remove_prefix(1);
  }
  if (auto fast = resolve_in_kernel(top, rel, top_path)) {
    return *fast;
  }
  std::vector<std::string> names;
  const UniqueFd fd(walk(top, rel, O_PATH, 0, &names));
  if (!fd) {
    return {};
  }
  std::string out;
  for (const auto &n : names) {
    out.append("/").append(n);
  }
  return out.empty() ? "/" : out;
}

} // namespace mltune::detail
