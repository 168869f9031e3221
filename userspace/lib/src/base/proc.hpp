// /proc/PID/stat: the one parser of a task's stat line in libmltune (used by
// the thread rules in sched/ and the kthread placement in feeder/), and the
// one parser of /proc/interrupts and /proc/softirqs tables (the /proc noise
// probe in noise/, the tick wait in feeder/).
//
// The line is "PID (COMM) STATE PPID ...": COMM may itself hold spaces and
// parentheses, so it runs from the first '(' to the last ')'; the fields
// after it are numbered as in proc(5), field 3 (state) being the first.
#pragma once

#include "mltune/caches.hpp"
#include "mltune/parse.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune::proc {

struct Stat {
  std::string comm;
  std::vector<std::string> fields; // fields[0] is field 3 of proc(5)

  // Field `n` (proc(5) numbering, n >= 3) as an integer; nullopt when the
  // line is shorter or the field is not a number.
  template <std::integral T> [[nodiscard]] std::optional<T> field(size_t n) const {
    if (n < 3 || n - 3 >= fields.size()) {
      return std::nullopt;
    }
    return parse_int<T>(fields[n - 3]);
  }
};

// nullopt when `text` is not a stat line.
std::optional<Stat> parse_stat(std::string_view text);

// proc(5) field numbers used by the library.
inline constexpr size_t k_stat_flags = 9;      // PF_* flags
inline constexpr size_t k_stat_starttime = 22; // clock ticks after boot
inline constexpr size_t k_stat_processor = 39; // CPU it last ran on

// Task flags (include/linux/sched.h).
inline constexpr unsigned k_pf_kthread = 0x00200000;
inline constexpr unsigned k_pf_no_setaffinity = 0x04000000;

// A per-CPU counter table (/proc/interrupts, /proc/softirqs): a header of
// CPU columns ("CPU0 CPU1 CPU3", offline CPUs left out), then one row per
// counter, "LABEL: COUNT... [DESCRIPTION...]".  Views into the parsed text.
struct CounterRow {
  std::string_view label;             // "LOC", "CAL", "24", "TIMER"
  std::vector<std::uint64_t> counts;  // one per column of CounterTable::cpus
  std::vector<std::string_view> desc; // the words after the counts
};
struct CounterTable {
  std::vector<unsigned> cpus; // the CPU of each column
  std::vector<CounterRow> rows;
  // The row labelled `label`; nullptr when absent.
  [[nodiscard]] const CounterRow *row(std::string_view label) const;
  // The count of `label` on CPU `cpu`; nullopt when either is absent.
  [[nodiscard]] std::optional<std::uint64_t> count(std::string_view label, unsigned cpu) const;
};
// Rows with fewer counts than columns (ERR:, MIS: hold one for all CPUs) are
// left out.  `what` names the file in errors: no header with CPU columns.
Result<CounterTable> parse_counters(std::string_view text, std::string_view what);

// The numeric names in a /proc or /proc/PID/task listing, ascending.
std::vector<int> pids(const std::vector<std::string> &names);

// A thread and its name (/proc/PID/task/TID/comm, without the newline).
struct TaskName {
  int pid = 0;
  int tid = 0;
  std::string comm;
};

// Every thread under <root>/proc, by pid then tid, with its name: the scan
// behind the thread rules, which test a thread's name before reading the
// rest of it.  Directories are read with getdents64 and files opened
// relative to them, three system calls per thread and four per process
// (a third fewer than std::filesystem and paths from the root; procfs
// lookups are most of what is left: about 500 us for 70 processes on a
// small VM).  Threads that exit during the scan are left out; threads
// created during it may be.
std::vector<TaskName> scan_task_names(const Sysroot &root);
// The canonical host path of `p` (symbolic links resolved): the live
// root's Sysroot::resolve().
std::filesystem::path real_path(const std::filesystem::path &p, std::error_code &ec);

// A source of the node's thread names other than the scan: the resident
// thread index a long-lived process keeps (mltunectl serve's ThreadIndex,
// mltune/service.hpp, installs one).  names(): the list for `root` in any
// order, or nullopt where the source does not cover that tree or cannot
// answer now (then the scan runs).
class TaskNameSource {
public:
  TaskNameSource() = default;
  TaskNameSource(const TaskNameSource &) = delete;
  TaskNameSource &operator=(const TaskNameSource &) = delete;
  virtual ~TaskNameSource() = default;
  virtual std::optional<std::vector<TaskName>> names(const Sysroot &root) = 0;
};

// The source task_names() asks while `caches` are current on the thread
// (nullptr: none); the caches' owner keeps the source alive as long.
void install_task_name_source(Caches &caches, TaskNameSource *source);

// The same list from the installed source where it answers for `root`,
// else the scan.
std::vector<TaskName> task_names(const Sysroot &root);

} // namespace mltune::proc
