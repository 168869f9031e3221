// The confined sysroot and the one safe writer: no symlink, "..", or loop in
// a tree reaches a file outside it, and no symlink planted at a target or
// temporary name is ever followed by a write.
#include "base/beneath.hpp"
#include "base/file_lock.hpp"
#include "base/process.hpp"
#include "base/sysroot_fd.hpp"
#include "fake_sysroot.hpp"
#include "mltune/sysroot.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using mltune::Sysroot;
using mltune::test::FakeSysroot;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path &p, const std::string &text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A file outside every tree, which no test may change.
class Outside {
public:
  Outside() : dir_(fs::temp_directory_path() / ("mltune-outside-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    put(file(), "victim\n");
  }
  ~Outside() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Outside(const Outside &) = delete;
  Outside &operator=(const Outside &) = delete;
  [[nodiscard]] fs::path dir() const { return dir_; }
  [[nodiscard]] fs::path file() const { return dir_ / "victim"; }
  // Nothing in the directory but the untouched victim.
  void expect_untouched() const {
    EXPECT_EQ(slurp(file()), "victim\n");
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir_)) {
      names.push_back(e.path().filename().string());
    }
    EXPECT_EQ(names, std::vector<std::string>{"victim"});
  }

private:
  fs::path dir_;
};

// Every confinement test runs with openat2(2) and with the user-space walk
// older kernels take.
class Confined : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override { mltune::detail::force_user_space_walk(GetParam()); }
  void TearDown() override { mltune::detail::force_user_space_walk(false); }
  FakeSysroot fake;
  Outside outside;
};

INSTANTIATE_TEST_SUITE_P(Resolve, Confined, ::testing::Values(false, true),
                         [](const auto &info) { return info.param ? "UserSpaceWalk" : "Openat2"; });

} // namespace

TEST_P(Confined, AbsoluteSymlinkResolvesInsideTheTree) {
  const Sysroot root = fake.root();
  fs::remove(fake.dir() / "proc/sys/vm/swappiness");
  fs::create_symlink(outside.file(), fake.dir() / "proc/sys/vm/swappiness");
  // Not in the tree: the write fails, the file outside is not touched.
  auto st = root.write_value("/proc/sys/vm/swappiness", "7");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().sys_errno, ENOENT) << st.error().message;
  EXPECT_FALSE(root.exists("/proc/sys/vm/swappiness"));
  EXPECT_FALSE(root.read("/proc/sys/vm/swappiness"));
  // In the tree, as on the node whose root it is: the tree's file.
  put(fake.dir() / outside.file().relative_path(), "60\n");
  ASSERT_TRUE(root.write_value("/proc/sys/vm/swappiness", "7"));
  EXPECT_EQ(slurp(fake.dir() / outside.file().relative_path()), "7");
  EXPECT_EQ(root.read("/proc/sys/vm/swappiness").value_or(""), "7");
  EXPECT_EQ(root.resolve("/proc/sys/vm/swappiness").value_or(""), outside.file().string());
  outside.expect_untouched();
}

TEST_P(Confined, DotDotInASymlinkStopsAtTheTop) {
  const Sysroot root = fake.root();
  std::string up;
  for (int i = 0; i < 40; ++i) {
    up += "../";
  }
  fs::remove(fake.dir() / "proc/sys/vm/swappiness");
  fs::create_symlink(up + outside.file().relative_path().string(), fake.dir() / "proc/sys/vm/swappiness");
  EXPECT_FALSE(root.write_value("/proc/sys/vm/swappiness", "7"));
  put(fake.dir() / outside.file().relative_path(), "60\n");
  ASSERT_TRUE(root.write_value("/proc/sys/vm/swappiness", "7"));
  EXPECT_EQ(slurp(fake.dir() / outside.file().relative_path()), "7");
  outside.expect_untouched();
}

TEST_P(Confined, DirectorySymlinkAndListingStayInside) {
  const Sysroot root = fake.root();
  put(outside.dir() / "secret", "x");
  fs::create_symlink(outside.dir(), fake.dir() / "etc/outside");
  EXPECT_TRUE(root.list_dir("/etc/outside").empty());
  EXPECT_FALSE(root.is_dir("/etc/outside"));
  EXPECT_FALSE(root.write_file("/etc/outside/new.conf", "x\n"));
  EXPECT_FALSE(root.remove_file("/etc/outside/secret").ok() && !fs::exists(outside.dir() / "secret"));
  EXPECT_TRUE(fs::exists(outside.dir() / "secret"));
  fs::remove(outside.dir() / "secret");
  outside.expect_untouched();
}

TEST_P(Confined, SymlinkLoopsEndWithELOOP) {
  const Sysroot root = fake.root();
  fs::create_symlink("b", fake.dir() / "etc/a");
  fs::create_symlink("a", fake.dir() / "etc/b");
  fs::create_symlink("/etc/self", fake.dir() / "etc/self");
  for (const char *p : {"/etc/a", "/etc/self", "/etc/a/x"}) {
    auto r = root.read(p);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().sys_errno, ELOOP) << p << ": " << r.error().message;
    EXPECT_FALSE(root.write_value(p, "1")) << p;
  }
  EXPECT_FALSE(root.resolve("/etc/a"));
}

TEST_P(Confined, TreeRelativeSymlinksResolveAsOnTheNode) {
  const Sysroot root = fake.root();
  put(fake.dir() / "sys/devices/pci0000:00/0000:00:02.0/net/eth0/mtu", "1500\n");
  fs::create_directories(fake.dir() / "sys/class/net");
  fs::create_symlink("../../devices/pci0000:00/0000:00:02.0/net/eth0", fake.dir() / "sys/class/net/eth0");
  EXPECT_EQ(root.read_value("/sys/class/net/eth0/mtu").value_or(""), "1500");
  EXPECT_EQ(root.resolve("/sys/class/net/eth0").value_or(""), "/sys/devices/pci0000:00/0000:00:02.0/net/eth0");
  EXPECT_EQ(root.read_link("/sys/class/net/eth0").value_or(""), "../../devices/pci0000:00/0000:00:02.0/net/eth0");
  EXPECT_TRUE(root.is_symlink("/sys/class/net/eth0"));
  EXPECT_TRUE(root.is_dir("/sys/class/net/eth0"));
}

// The tree named through a symlink (its path is not the kernel's name for
// it), its top and a link to an absolute path: the same tree paths either way.
TEST_P(Confined, ResolveGivesTreePathsWhateverTheTreeIsCalled) {
  put(fake.dir() / "sys/devices/pci0000:00/0000:00:02.0/net/eth0/mtu", "1500\n");
  fs::create_directories(fake.dir() / "sys/class/net");
  fs::create_symlink("/sys/devices/pci0000:00/0000:00:02.0/net/eth0", fake.dir() / "sys/class/net/eth0");
  const fs::path alias = fake.dir().string() + "-alias";
  fs::create_symlink(fake.dir(), alias);
  for (const Sysroot &root : {fake.root(), Sysroot(alias)}) {
    EXPECT_EQ(root.resolve("/sys/class/net/eth0").value_or(""), "/sys/devices/pci0000:00/0000:00:02.0/net/eth0");
    EXPECT_FALSE(root.resolve("/sys/class/net/eth0/../eth0/mtu")); // ".." is refused
    EXPECT_EQ(root.resolve("/").value_or(""), "/");
    EXPECT_FALSE(root.resolve("/sys/class/net/eth1"));
  }
  fs::remove(alias);
}

// A file past 1 MiB (a 1024-CPU fixture's /proc/interrupts) is read by
// mapping it: every line, the last one without its newline too.
TEST(SysrootLines, LargeRegularFileGivesEveryLine) {
  FakeSysroot fake;
  std::string text;
  const std::string row(4000, ' ');
  for (int i = 0; i < 600; ++i) {
    text += std::to_string(i) + ":" + row + "name" + std::to_string(i) + "\n";
  }
  text += "tail";
  ASSERT_GT(text.size(), 1U << 21);
  put(fake.dir() / "proc/interrupts", text);
  std::vector<std::string> lines;
  EXPECT_TRUE(mltune::detail::for_each_line(fake.root(), "/proc/interrupts", [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }));
  ASSERT_EQ(lines.size(), 601U);
  EXPECT_EQ(lines[0], "0:" + row + "name0");
  EXPECT_EQ(lines[599], "599:" + row + "name599");
  EXPECT_EQ(lines[600], "tail");
  lines.clear(); // stopping early
  mltune::detail::for_each_line(fake.root(), "/proc/interrupts", [&](std::string_view l) {
    lines.emplace_back(l);
    return lines.size() < 3;
  });
  EXPECT_EQ(lines.size(), 3U);
}

TEST_P(Confined, StateWritesAndLocksStayInside) {
  const Sysroot root = fake.root();
  // /run itself a symlink out of the tree: the state and the lock go to the
  // tree's own directory of that name.
  fs::remove_all(fake.dir() / "run");
  fs::create_symlink(outside.dir(), fake.dir() / "run");
  EXPECT_FALSE(root.write_file("/run/mltune/state.json", "{}\n", {.make_parents = true})); // not in the tree
  fs::create_directories(fake.dir() / outside.dir().relative_path());
  ASSERT_TRUE(root.write_file("/run/mltune/state.json", "{}\n", {.make_parents = true}));
  EXPECT_EQ(slurp(fake.dir() / outside.dir().relative_path() / "mltune/state.json"), "{}\n");
  auto lock = mltune::FileLock::acquire(root, "/run/mltune/node.lock");
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_TRUE(fs::exists(fake.dir() / outside.dir().relative_path() / "mltune/node.lock"));
  outside.expect_untouched();
}

// ---- the safe writer --------------------------------------------------------------

namespace {

class Writer : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override { mltune::detail::use_tmpfile(GetParam()); }
  void TearDown() override {
    mltune::detail::use_tmpfile(true);
    mltune::detail::set_temp_names(nullptr);
  }
  // Names of files in `dir` other than `keep`.
  static std::vector<std::string> others(const fs::path &dir, const std::string &keep) {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(dir)) {
      if (e.path().filename() != keep) {
        out.push_back(e.path().filename().string());
      }
    }
    return out;
  }
  FakeSysroot fake;
  Outside outside;
};

INSTANTIATE_TEST_SUITE_P(Temp, Writer, ::testing::Values(true, false),
                         [](const auto &info) { return info.param ? "Tmpfile" : "NamedTemp"; });

} // namespace

// Both a tree and the live root (on a scratch directory of this machine).
TEST_P(Writer, RefusesATargetThatIsASymlink) {
  fs::create_directories(fake.dir() / "var/lib/prometheus/node-exporter");
  fs::create_symlink(outside.file(), fake.dir() / "var/lib/prometheus/node-exporter/mltune.prom");
  for (const Sysroot &root : {fake.root(), Sysroot("/")}) {
    const std::string abs = root.is_live() ? (fake.dir() / "var/lib/prometheus/node-exporter/mltune.prom").string()
                                           : "/var/lib/prometheus/node-exporter/mltune.prom";
    auto st = root.write_file(abs, "metrics\n", {.durable = false});
    ASSERT_FALSE(st) << abs;
    EXPECT_NE(st.error().message.find("symbolic link"), std::string::npos) << st.error().message;
  }
  EXPECT_TRUE(fs::is_symlink(fake.dir() / "var/lib/prometheus/node-exporter/mltune.prom"));
  EXPECT_EQ(others(fake.dir() / "var/lib/prometheus/node-exporter", "mltune.prom"), std::vector<std::string>{});
  outside.expect_untouched();
}

TEST_P(Writer, NeverFollowsASymlinkAtATemporaryName) {
  const fs::path dir = fake.dir() / "var/lib/prometheus/node-exporter";
  fs::create_directories(dir);
  // The name every earlier version used, and the first names this one will
  // try: each a symlink to the file outside (as another user of the
  // directory could plant them).
  fs::create_symlink(outside.file(), dir / "mltune.prom.mltune-tmp");
  int n = 0;
  mltune::detail::set_temp_names([&n](std::string_view) { return "planted-" + std::to_string(n++ % 4); });
  for (int i = 0; i < 3; ++i) {
    fs::create_symlink(outside.file(), dir / ("planted-" + std::to_string(i)));
  }
  for (const Sysroot &root : {fake.root(), Sysroot("/")}) {
    n = 0;
    const std::string abs =
        root.is_live() ? (dir / "mltune.prom").string() : "/var/lib/prometheus/node-exporter/mltune.prom";
    auto st = root.write_file(abs, "metrics " + std::to_string(root.is_live()) + "\n");
    ASSERT_TRUE(st) << st.error().message;
    EXPECT_EQ(slurp(dir / "mltune.prom"), "metrics " + std::to_string(root.is_live()) + "\n");
    EXPECT_FALSE(fs::is_symlink(dir / "mltune.prom"));
    EXPECT_EQ(n, 4); // three names taken, the fourth free
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(fs::is_symlink(dir / ("planted-" + std::to_string(i))));
  }
  EXPECT_FALSE(fs::exists(dir / "planted-3")); // renamed into place
  outside.expect_untouched();
}

TEST_P(Writer, ModeIsTheRequestedOneWhateverTheUmask) {
  const mode_t old = ::umask(077);
  const Sysroot root = fake.root();
  ASSERT_TRUE(root.write_file("/etc/a.conf", "a\n"));
  ASSERT_TRUE(root.write_file("/etc/b.conf", "b\n", {.mode = 0600}));
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat((fake.dir() / "etc/a.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644U);
  ASSERT_EQ(::stat((fake.dir() / "etc/b.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600U);
  for (const auto &e : fs::directory_iterator(fake.dir() / "etc")) {
    EXPECT_EQ(e.path().filename().string().find(".mltune-"), std::string::npos) << e.path(); // no temporary left
  }
}

TEST_P(Writer, MissingDirectoriesAreMadeOnlyWhenAsked) {
  const Sysroot root = fake.root();
  auto st = root.write_file("/srv/new/dir/x.conf", "x\n");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().sys_errno, ENOENT) << st.error().message;
  EXPECT_FALSE(fs::exists(fake.dir() / "srv"));
  ASSERT_TRUE(root.write_file("/srv/new/dir/x.conf", "x\n", {.make_parents = true}));
  EXPECT_EQ(slurp(fake.dir() / "srv/new/dir/x.conf"), "x\n");
}

TEST_P(Writer, RefusesADirectoryThatIsASymlinkAndNonRegularTargets) {
  const Sysroot root = fake.root();
  fs::create_directories(fake.dir() / "var/lib/real");
  fs::create_symlink("real", fake.dir() / "var/lib/link");
  auto st = root.write_file("/var/lib/link/x", "x\n");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("symlink is not followed"), std::string::npos) << st.error().message;
  EXPECT_FALSE(fs::exists(fake.dir() / "var/lib/real/x"));
  fs::create_directories(fake.dir() / "var/lib/real/d");
  EXPECT_FALSE(root.write_file("/var/lib/real/d", "x\n"));
  ASSERT_EQ(::mkfifo((fake.dir() / "var/lib/real/fifo").c_str(), 0600), 0);
  EXPECT_FALSE(root.write_file("/var/lib/real/fifo", "x\n"));
}

// ---- the lock file --------------------------------------------------------------

TEST(FileLockFile, MissingSkipCreatesNothing) {
  FakeSysroot fake;
  auto lock = mltune::FileLock::acquire(fake.root(), "/run/mltune/x.lock", mltune::FileLock::Missing::skip);
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_FALSE(lock->held());
  EXPECT_FALSE(fs::exists(fake.dir() / "run/mltune"));
}

// Whether process `pid` waits in flock(2) (/proc/locks lists its request
// with "->").
bool waits_on_flock(pid_t pid) {
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("->") != std::string::npos && line.find(" " + std::to_string(pid) + " ") != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(FileLockFile, RemovedOnReleaseAndNeverHeldTwice) {
  FakeSysroot fake;
  const Sysroot root = fake.root();
  const fs::path path = fake.dir() / "run/mltune/x.lock";
  auto first = mltune::FileLock::acquire(root, "/run/mltune/x.lock");
  ASSERT_TRUE(first);
  first->remove_on_release();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Opens the file the parent holds, waits, and must end holding the
    // file that is at the path then (a new one), not the removed one.  The
    // parent's descriptors go first: one shares the parent's lock.
    ::close_range(3, ~0U, 0);
    const Sysroot mine(fake.dir());
    auto second = mltune::FileLock::acquire(mine, "/run/mltune/x.lock");
    const int other = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const bool ok =
        second && second->held() && other >= 0 && ::flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::_exit(ok ? 0 : 1);
  }
  // The event, not a time: the child's request shows in /proc/locks.
  for (int i = 0; i < 200000 && !waits_on_flock(child); ++i) {
    ::usleep(100);
  }
  ASSERT_TRUE(waits_on_flock(child));
  *first = mltune::FileLock::acquire(root, "/run/mltune/unrelated.lock").value(); // releases x.lock
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A lock passed to children: a program run with it keeps the lock after
// this process lets go (a killed switch's modprobe holds the node lock until
// it ends); a program run without it does not have the descriptor.
TEST(FileLockFile, PassedToChildrenOutlivesTheHolder) {
  FakeSysroot fake;
  const fs::path path = fake.dir() / "run/mltune/x.lock";
  auto lock = mltune::FileLock::acquire(fake.root(), "/run/mltune/x.lock");
  ASSERT_TRUE(lock);
  EXPECT_TRUE(mltune::FileLock::passed_to_children().empty());
  lock->pass_to_children();
  const std::vector<int> fds = mltune::FileLock::passed_to_children();
  ASSERT_EQ(fds.size(), 1U);
  const std::string fd = std::to_string(fds[0]);
  using mltune::detail::CommandOutput;
  using mltune::detail::run_command;

  auto without = run_command({"sh", "-c", "test -e /proc/self/fd/" + fd}, CommandOutput::stdout_stderr);
  ASSERT_TRUE(without);
  EXPECT_EQ(without->status, 1) << "a close-on-exec descriptor reached the program";
  EXPECT_EQ(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC) << "still close-on-exec here";

  // The program leaves a child behind that has the descriptor, as modprobe
  // would be left running by a killed switch.
  auto orphan =
      run_command({"sh", "-c", "test -e /proc/self/fd/" + fd + " && { sleep 600 >/dev/null 2>&1 & echo $!; }"},
                  CommandOutput::stdout_only, fds);
  ASSERT_TRUE(orphan);
  ASSERT_EQ(orphan->status, 0) << "the kept descriptor did not reach the program";
  const pid_t pid = std::stoi(orphan->output);
  EXPECT_EQ(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC) << "close-on-exec cleared here";

  lock = mltune::FileLock::acquire(fake.root(), "/run/mltune/other.lock").value(); // lets x.lock go
  EXPECT_TRUE(mltune::FileLock::passed_to_children().empty());
  const int probe = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  EXPECT_NE(::flock(probe, LOCK_EX | LOCK_NB), 0) << "the orphan does not hold the lock";
  EXPECT_EQ(errno, EWOULDBLOCK);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // The event, not a time: the lock is free once the orphan is gone.
  bool taken = false;
  for (int i = 0; i < 200000 && !taken; ++i) {
    taken = ::flock(probe, LOCK_EX | LOCK_NB) == 0;
    if (!taken) {
      ::usleep(100);
    }
  }
  EXPECT_TRUE(taken);
  ::close(probe);
}

TEST(RunCommand, RefusesToKeepTheStandardDescriptors) {
  const std::vector<int> fds{1};
  auto r = mltune::detail::run_command({"true"}, mltune::detail::CommandOutput::inherit, fds);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("descriptor 1 cannot be kept"), std::string::npos) << r.error().message;
}

TEST(FileLockFile, RemovalLeavesNoFile) {
  FakeSysroot fake;
  {
    auto lock = mltune::FileLock::acquire(fake.root(), "/run/mltune/x.lock");
    ASSERT_TRUE(lock);
    lock->remove_on_release();
    EXPECT_TRUE(fs::exists(fake.dir() / "run/mltune/x.lock"));
  }
  EXPECT_FALSE(fs::exists(fake.dir() / "run/mltune/x.lock"));
}
