// Sysroot: every path libmltune touches goes through one of these.
//
// Paths passed in are absolute node paths ("/proc/sys/vm/swappiness"); the
// Sysroot maps them below its root directory ("/" on a live node, a fake tree
// in tests, "/host" in a container).  Paths with ".." components are refused.
//
// Below a root other than "/", every path is resolved inside the tree, as
// if the tree were the root of its own machine (base/beneath.hpp): an
// absolute symlink of the node leads to the node's file, not the container's
// or the build host's, and no symlink, "..", or loop in the tree reaches a
// file outside it.
#pragma once

#include "mltune/result.hpp"

#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace mltune {

// How Sysroot::write_file() writes a file.
struct WriteOptions {
  // fsync the data before the rename, and the directory after it.
  bool durable = true;
  // Create the missing directories above the file (mode 0755), for the
  // directories that belong to mltune (/run/mltune, /var/lib/mltune,
  // /etc/mltune); everywhere else a missing directory is an error.
  bool make_parents = false;
  // The file's mode, whatever the umask.
  mode_t mode = 0644;
};

// For a process that lives across many switches (mltunectl serve, while
// its Caches are current: mltune/caches.hpp): the knob files it reads and
// writes (sysctls, sysfs attributes, /proc/irq/N) stay open, so that a read
// is one pread(2) and a write one pwrite(2) at offset 0 instead of an open,
// a read or write and a close.  A descriptor whose file went away (ENODEV,
// ENOENT, EIO: a device removed, an IRQ freed) is closed and the path
// opened afresh.  The live root only; the caches close them all when they
// go.  How many knob files the current caches keep open now:
size_t kept_knob_files();

class Sysroot {
public:
  explicit Sysroot(std::filesystem::path root = "/");

  // The directory descriptor (O_PATH) of the tree's top, -1 for the live
  // root (or a tree that could not be opened): for base/'s *at() calls.
  [[nodiscard]] int tree_fd() const { return top_ ? *top_ : -1; }

  [[nodiscard]] const std::filesystem::path &root() const { return root_; }
  [[nodiscard]] bool is_live() const { return root_ == "/"; }
  // Whether this process shares namespace `ns` ("net", "pid", "cgroup") with
  // the node below the root: true on the live root and for a root whose init
  // process (<root>/proc/1/ns/<ns>) is in this process's namespace (a
  // container that mounts the host at /host with the host's network and
  // PIDs); false for a fixture tree and for a container with its own.
  [[nodiscard]] bool shares_namespace(std::string_view ns) const;
  // Netlink sockets (ethtool, the proc connector) reach the node's devices.
  [[nodiscard]] bool shares_network() const { return shares_namespace("net"); }
  // The tree is a running node's root (it has <root>/proc/1/ns), not a
  // fixture: the live root, or the host mounted into a container.
  [[nodiscard]] bool is_node() const;
  // Thread policies, affinities, kernel modules and BPF act on the node below
  // the root: the live root, or a container sharing its PID and network
  // namespaces (container mode: `--sysroot /host`, hostPID, hostNetwork).
  [[nodiscard]] bool acts_on_node() const { return shares_namespace("pid") && shares_namespace("net"); }
  // Ok when this process shares every namespace in `nss` with the node; else
  // the error for `what` that names the namespace the container lacks, or
  // that the root is a file tree.
  [[nodiscard]] Status require_namespaces(std::string_view what, std::initializer_list<std::string_view> nss) const;
  // Host path of an absolute node path: for messages and for programs
  // started from the tree.  Not to be opened: a symlink of the tree would
  // resolve on this machine (open(), read() and the others resolve inside).
  [[nodiscard]] std::filesystem::path path(std::string_view abs) const;
  [[nodiscard]] bool exists(std::string_view abs) const;
  [[nodiscard]] bool is_dir(std::string_view abs) const;
  // A symlink itself (not what it points to).
  [[nodiscard]] bool is_symlink(std::string_view abs) const;
  // The node path `abs` leads to with every symlink resolved (inside the
  // tree), or nullopt when a component does not exist.
  [[nodiscard]] std::optional<std::string> resolve(std::string_view abs) const;
  // The target of the symlink `abs`, as written in it.
  [[nodiscard]] Result<std::string> read_link(std::string_view abs) const;

  // Whole file (up to 1 MiB), unmodified.
  [[nodiscard]] Result<std::string> read(std::string_view abs) const;
  // Knob value: read() normalised with normalize_value().
  [[nodiscard]] Result<std::string> read_value(std::string_view abs) const;
  // Knob write: open an existing file O_WRONLY|O_TRUNC and write the value in
  // one write(2) call, as sysctl(8) does.  Never creates files.
  [[nodiscard]] Status write_value(std::string_view abs, std::string_view value) const;
  // The one writer of whole files (state, configuration, drop-ins, the
  // metrics textfile): the content goes to a new temporary file in the
  // target's directory (O_TMPFILE, or a random name created O_EXCL), which
  // is renamed over the target.  The directory is opened without following
  // a symlink at its last component; a target that is a symlink or not a
  // regular file is refused; no symlink planted at any name is followed.
  [[nodiscard]] Status write_file(std::string_view abs, std::string_view content, WriteOptions opts = {}) const;
  [[nodiscard]] Status remove_file(std::string_view abs) const;
  // mkdir(2) of `abs` and every missing directory above it, mode 0755.
  [[nodiscard]] Status make_dirs(std::string_view abs) const;
  // rmdir(2); an absent directory is not an error.
  [[nodiscard]] Status remove_dir(std::string_view abs) const;
  [[nodiscard]] Status symlink(std::string_view target, std::string_view abs) const;
  // Names in a directory, sorted; empty when it does not exist.
  [[nodiscard]] std::vector<std::string> list_dir(std::string_view abs) const;

  // Test hook: the next write_value() calls for `abs` fail with `err`.
  void inject_write_failure(std::string abs, int err) { faults_[std::move(abs)] = err; }

private:
  // path(abs) as a plain string, for the hot open(2) paths.
  [[nodiscard]] std::string host_path(std::string_view abs) const;

  std::filesystem::path root_;
  std::string prefix_; // root_ without a trailing '/'; empty for "/"
  // The tree's top, opened once and shared by the copies; null for "/".
  std::shared_ptr<const int> top_;
  std::string top_path_; // where /proc/self/fd showed top_ when it was opened
  std::map<std::string, int, std::less<>> faults_;
};

// Canonical form of a knob value for comparison: surrounding whitespace
// trimmed, inner whitespace runs collapsed to one space, and for sysfs choice
// files ("always [madvise] never") only the selected word.
std::string normalize_value(std::string_view raw);

} // namespace mltune
