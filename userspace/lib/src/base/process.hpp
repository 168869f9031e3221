// Placement of the calling process and handing it over to a command: the
// one place libmltune sets CPU affinity and memory policy for itself, calls
// execvp (mltunectl exec, feeder run) and runs other programs (modprobe,
// nvidia-smi, noise's command).  Library-private.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune::detail {

// sched_setaffinity(0, cpus): the calling thread, and what it execs.
Status set_affinity(const CpuSet &cpus);
// set_mempolicy(MPOL_BIND, nodes): allocations only from `nodes`.
Status bind_memory(const std::vector<int> &nodes);
// set_mempolicy(MPOL_PREFERRED_MANY, nodes), or MPOL_PREFERRED on the first
// node where the kernel lacks MPOL_PREFERRED_MANY (before 5.15).
Status prefer_memory(const std::vector<int> &nodes);
// execvp(argv[0], argv); returns only on failure, with the error.
Status exec_argv(const std::vector<std::string> &argv);

// The path of this executable (/proc/self/exe).
Result<std::string> self_exe();

// A helper program of the package (mltune-nvml, mltune-gpu-loop): beside
// this executable (the build tree), else in MLTUNE_LIBEXEC_DIR (the
// package); "" when neither has it.
std::string find_helper(std::string_view name);

// What a program it ran did: its exit status (128 + signal when killed) and,
// when captured, its output.
struct CommandResult {
  int status = 0;
  std::string output;
};
enum class CommandOutput {
  inherit,       // the caller's stdout and stderr
  stdout_only,   // stdout captured, stderr to /dev/null
  stdout_stderr, // both captured, in the order written
};
// Runs argv (argv[0] looked up in PATH) and waits for it.  An error only
// when it cannot be started (ENOENT: not installed); a non-zero exit is a
// result.  The descriptors in keep_fds stay open in the program (their
// close-on-exec flag cleared there only): FileLock::passed_to_children().
Result<CommandResult> run_command(const std::vector<std::string> &argv, CommandOutput output,
                                  std::span<const int> keep_fds = {});
// Runs every argv side by side (all started, then each waited for): the
// wall time of the slowest, not of the sum. One result per argv, in order.
std::vector<Result<CommandResult>> run_commands(const std::vector<std::vector<std::string>> &argvs,
                                                CommandOutput output);

} // namespace mltune::detail
