// What the feeder's sources share: feeder.cpp (the recorded state, the
// mechanism, on/off/check/status), isolate.cpp (the cpuset partition and the
// housekeeping moved off the feeder CPUs: kthreads, user threads,
// workqueues, IRQs) and live_os.cpp (the live FeederOs: affinity, the
// sched_ext scheduler, the watcher).  Not installed.
#pragma once

#include "mltune/feeder.hpp"

#include <string_view>
#include <vector>

namespace mltune::feeder {

inline constexpr const char *k_scx_dir = "/sys/kernel/sched_ext";
inline constexpr const char *k_scx_name = "mltune_feeder";
inline constexpr const char *k_pin_dir = "/sys/fs/bpf/mltune";
inline constexpr const char *k_wq_mask = "/sys/devices/virtual/workqueue/cpumask";
inline constexpr const char *k_kmod_feeder = "/sys/kernel/mltune/feeder/cpus";
// on, off and the ejection check (the watcher's too) hold FileLock
// k_lock_path: without it the watcher could see the scheduler 'feeder off'
// had just detached as an ejection and write a cpuset fallback state after
// 'off' removed the state.
inline constexpr std::string_view k_lock_path = "/run/mltune/feeder.lock";

// The recorded state; off (a default FeederState) when there is none.
[[nodiscard]] Result<FeederState> load_state(const Sysroot &root);
[[nodiscard]] Status save_state(const Sysroot &root, const FeederState &s);

// ---- isolate.cpp ----
// The cpuset partition of s.cpus (s.partition: the type asked for), made
// while the CPUs are held busy where it is isolated; removed.
[[nodiscard]] Status make_partition(const Sysroot &root, FeederOs &os, FeederState &s);
void remove_partition(const Sysroot &root, FeederState &s);
// Real-time threads of `threads` moved off the feeder CPUs and recorded;
// returns how many.
int contain(FeederOs &os, FeederState &s, const std::vector<FeederIntruder> &threads);
// Kthreads, user threads, unbound workqueues and IRQs off s.cpus, each
// recorded in s; release gives each back what it had.
[[nodiscard]] Status apply_housekeeping(const Sysroot &root, FeederOs &os, FeederState &s);
void release_housekeeping(const Sysroot &root, FeederOs &os, FeederState &s);

// ---- live_os.cpp ----
// Every kthread of /proc with its flags.
std::vector<FeederTask> kthreads(const Sysroot &root);
// The sched_ext scheduler attached now is mltune's.
bool scx_is_ours(const Sysroot &root);

} // namespace mltune::feeder
