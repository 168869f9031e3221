// Drift attribution: who changed a setting mltune manages
// (Documentation/noise.rst, "Drift attribution").
//
// drift_start() loads the watcher of bpf/mltune_drift.bpf.c and pins it in
// bpffs (/sys/fs/bpf/mltune-drift): from then on the kernel records the last
// successful write of every sysctl, sysfs and cgroup2 file (cpusets), of
// every /proc/irq/N/smp_affinity(_list), and the last sched_setattr,
// sched_setscheduler, sched_setparam and sched_setaffinity of every thread:
// the writer (comm, pid, process, cgroup), the time, the new value and, for
// sysctls with plain int, long or string data, the old one.  Nothing runs in
// user space meanwhile; drift_stop() unpins it.  `verify` and `drift show`
// read the records with load_drift_log().
#pragma once

#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

inline constexpr const char *k_drift_state = "/run/mltune/drift.json";

struct DriftWrite {
  std::string op;   // "sysctl", "sysfs", "cgroup", "irq_affinity", "sched_setattr", "sched_setscheduler",
                    // "sched_setparam", "sched_setaffinity"
  std::string path; // node path of the file written ("" for the sched ops)
  int target = 0;   // sched ops: the thread acted on
  std::string comm; // the writer
  int pid = 0;      // its thread id
  int tgid = 0;     // its process id
  std::string cgroup;
  std::int64_t unix_ns = 0; // when
  std::string time;         // when, local time "YYYY-MM-DD HH:MM:SS"
  std::string new_value;    // as written (trailing newline removed)
  std::optional<std::string> old_value;
  bool kernel = false;    // written from inside the kernel (kernel_write: the mltune module's switch)
  bool truncated = false; // new_value is the first bytes only
  std::uint64_t seq = 0;  // order of the writes
};

// "mlt-writer (pid 1234, cgroup /user.slice) wrote '60' (was '1') at 2026-11-25 10:02:13"
std::string describe(const DriftWrite &w);

class DriftLog {
public:
  DriftLog() = default;
  explicit DriftLog(std::vector<DriftWrite> writes);
  // The last write of the setting at `node_path`; /proc/irq/N/smp_affinity
  // and smp_affinity_list are one setting.
  [[nodiscard]] std::optional<DriftWrite> last_write(std::string_view node_path) const;
  // The last scheduling change of thread `tid`.
  [[nodiscard]] std::optional<DriftWrite> last_sched(int tid) const;
  [[nodiscard]] const std::vector<DriftWrite> &writes() const { return writes_; } // newest first

private:
  std::vector<DriftWrite> writes_;
};

struct DriftStatus {
  bool built = false;   // this mltunectl has the watcher
  bool running = false; // pinned in bpffs
  std::string pin_dir;
  std::string started;           // local time of drift_start ("" unknown)
  std::string missing;           // programs this kernel has no hook for
  std::optional<size_t> records; // writes recorded (when running)
};

bool drift_built();
// Loads and pins the watcher (an error when it runs already, this build has
// no BPF, or `root` is not the live node).
Status drift_start(const Sysroot &root);
// Unpins it; true when it was running (not running: nothing to do, false).
Result<bool> drift_stop(const Sysroot &root);
Result<DriftStatus> drift_status(const Sysroot &root);
// The watcher's records, newest first; an empty log when it is not running.
DriftLog load_drift_log(const Sysroot &root);

} // namespace mltune
