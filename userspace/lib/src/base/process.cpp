#include "base/process.hpp"

#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mltune::detail {

namespace {

// A nodemask for set_mempolicy(2): one bit per node, in unsigned longs.
struct NodeMask {
  std::vector<unsigned long> words;
  unsigned long maxnode = 0; // bits + 1, as libnuma passes it

  explicit NodeMask(const std::vector<int> &nodes) {
    constexpr int k_bits = 8 * sizeof(unsigned long);
    int top = 0;
    for (const int n : nodes) {
      top = std::max(top, n);
    }
    words.assign(static_cast<size_t>(top / k_bits) + 1, 0);
    for (const int n : nodes) {
      words[static_cast<size_t>(n / k_bits)] |= 1UL << static_cast<unsigned>(n % k_bits);
    }
    maxnode = words.size() * k_bits + 1;
  }
};

std::string node_list(const std::vector<int> &nodes) {
  std::string s;
  for (const int n : nodes) {
    s += (s.empty() ? "" : ",") + std::to_string(n);
  }
  return s;
}

Status set_policy(int mode, const char *name, const std::vector<int> &nodes) {
  for (const int n : nodes) {
    if (n < 0 || n >= 1 << 16) {
      return input_error(std::string(name) + ": invalid NUMA node " + std::to_string(n));
    }
  }
  if (nodes.empty()) {
    return input_error(std::string(name) + ": no NUMA node given");
  }
  const NodeMask m(nodes);
  if (::syscall(SYS_set_mempolicy, mode, m.words.data(), m.maxnode) != 0) {
    return sys_error("set_mempolicy(" + std::string(name) + ", nodes " + node_list(nodes) + ")", errno);
  }
  return {};
}

} // namespace

Status set_affinity(const CpuSet &cpus) {
  const auto set = cpus.native();
  if (::sched_setaffinity(0, CpuSet::Native::size(), set.get()) != 0) {
    return sys_error("sched_setaffinity(CPUs " + cpus.str() + ")", errno);
  }
  return {};
}

Status bind_memory(const std::vector<int> &nodes) {
  return set_policy(MPOL_BIND, "MPOL_BIND", nodes);
}

Status prefer_memory(const std::vector<int> &nodes) {
  if (auto st = set_policy(MPOL_PREFERRED_MANY, "MPOL_PREFERRED_MANY", nodes); st || st.error().sys_errno != EINVAL) {
    return st;
  }
  return set_policy(MPOL_PREFERRED, "MPOL_PREFERRED", {nodes.front()});
}

Status exec_argv(const std::vector<std::string> &argv) {
  if (argv.empty()) {
    return input_error("no command given");
  }
  std::vector<char *> args;
  args.reserve(argv.size() + 1);
  for (const auto &a : argv) {
    args.push_back(const_cast<char *>(a.c_str())); // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  return sys_error(argv[0], errno);
}

Result<std::string> self_exe() {
  std::array<char, 4096> self{};
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) {
    return sys_error("/proc/self/exe", n < 0 ? errno : ENOENT);
  }
  return std::string(self.data(), static_cast<size_t>(n));
}

std::string find_helper(std::string_view name) {
  if (const auto exe = self_exe()) {
    std::string beside = exe->substr(0, exe->rfind('/') + 1) + std::string(name);
    if (::access(beside.c_str(), X_OK) == 0) {
      return beside;
    }
  }
  std::string installed = std::string(MLTUNE_LIBEXEC_DIR) + "/" + std::string(name);
  return ::access(installed.c_str(), X_OK) == 0 ? installed : std::string();
}

namespace {

// A started program: its pid and, when its output is captured, the read
// end of its pipe.
struct Spawned {
  pid_t pid = -1;
  UniqueFd rd;
};

Result<Spawned> spawn(const std::vector<std::string> &argv, CommandOutput output, std::span<const int> keep_fds) {
  if (argv.empty()) {
    return input_error("run_command: no program");
  }
  for (const int fd : keep_fds) {
    if (fd <= STDERR_FILENO) {
      return input_error("run_command: descriptor " + std::to_string(fd) + " cannot be kept (0-2 are the program's)");
    }
  }
  UniqueFd rd;
  UniqueFd wr;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (output != CommandOutput::inherit) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      posix_spawn_file_actions_destroy(&fa);
      return sys_error("pipe2", errno);
    }
    rd = UniqueFd(fds[0]);
    wr = UniqueFd(fds[1]);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), STDOUT_FILENO);
    if (output == CommandOutput::stdout_stderr) {
      posix_spawn_file_actions_adddup2(&fa, wr.get(), STDERR_FILENO);
    } else {
      posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
  }
  // A dup2 onto itself clears close-on-exec in the child only (POSIX.1-2024,
  // glibc since 2.29).
  for (const int fd : keep_fds) {
    posix_spawn_file_actions_adddup2(&fa, fd, fd);
  }
  std::vector<char *> args;
  args.reserve(argv.size() + 1);
  for (const auto &a : argv) {
    args.push_back(const_cast<char *>(a.c_str())); // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) {
    return sys_error(argv[0], rc);
  }
  return Spawned{pid, std::move(rd)};
}

// Reads what the program writes until it closes its output, then reaps it.
Result<CommandResult> collect(Spawned &sp) {
  CommandResult res;
  if (sp.rd) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(sp.rd.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) {
        res.output.append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  while (::waitpid(sp.pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return sys_error("waitpid", errno);
    }
  }
  res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

} // namespace

Result<CommandResult> run_command(const std::vector<std::string> &argv, CommandOutput output,
                                  std::span<const int> keep_fds) {
  auto sp = spawn(argv, output, keep_fds);
  if (!sp) {
    return sp.error();
  }
  return collect(*sp);
}

std::vector<Result<CommandResult>> run_commands(const std::vector<std::vector<std::string>> &argvs,
                                                CommandOutput output) {
  // All started before any is read: they run side by side. A program
  // whose output fills its pipe waits until its turn to be read.
  std::vector<Result<Spawned>> started;
  started.reserve(argvs.size());
  for (const auto &argv : argvs) {
    started.push_back(spawn(argv, output, {}));
  }
  std::vector<Result<CommandResult>> out;
  out.reserve(argvs.size());
  for (auto &sp : started) {
    out.push_back(sp ? collect(*sp) : Result<CommandResult>(sp.error()));
  }
  return out;
}

} // namespace mltune::detail
