// GPU-feeder cores at runtime (Documentation/feeder.rst).
//
// feeder_on() keeps the feeder CPUs for the feeder cgroup
// (/sys/fs/cgroup/mltune-feeder) with one of two mechanisms, chosen and
// explained by choose_mechanism():
//   sched_ext - the project's BPF scheduler (bpf/), pinned in bpffs so it
//               outlives the CLI; needs CONFIG_SCHED_CLASS_EXT, a build with
//               the BPF toolchain, and no isolcpus= domain isolation;
//   cpuset    - a cgroup v2 cpuset partition on the feeder CPUs: `root`
//               (the scheduler balances load among them), or `isolated`
//               when asked for (FeederRequest::partition: no scheduling
//               domain, so neither load balancing nor the idle load
//               balancer's kicks) and where they include isolcpus= CPUs;
//               where the kernel refuses that and all of them are
//               boot-isolated, cpuset.cpus alone (FeederState::cpuset_note).
// Both move movable kthreads (rcuo* included) and the unbound workqueue
// cpumask to housekeeping CPUs and steer IRQs off the feeder CPUs; feeder_off()
// restores exactly what was there.  The state lives in /run/mltune/feeder.json.
// If the kernel ejects the sched_ext scheduler, feeder_check() (run by the
// watcher that feeder_on() starts, and by every status call) switches to the
// cpuset partition and records the exit reason.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mltune {

inline constexpr const char *k_feeder_cgroup = "/mltune-feeder"; // below /sys/fs/cgroup
inline constexpr const char *k_feeder_state = "/run/mltune/feeder.json";

struct BootIsolation {
  CpuSet isolated;       // /sys/devices/system/cpu/isolated: domain isolation
  CpuSet nohz_full;      // /sys/devices/system/cpu/nohz_full
  std::string isolcpus;  // isolcpus= on /proc/cmdline ("" when absent)
  std::string rcu_nocbs; // rcu_nocbs= on /proc/cmdline
  [[nodiscard]] bool domain() const { return !isolated.empty(); }
  [[nodiscard]] bool any() const { return domain() || !nohz_full.empty() || !isolcpus.empty() || !rcu_nocbs.empty(); }
};
BootIsolation read_boot_isolation(const Sysroot &root);

// What 'feeder on' is asked for: the mechanism ("auto", "sched_ext" or
// "cpuset") and the cpuset partition type ("root" or "isolated"; an
// isolated partition asks for the cpuset mechanism).
struct FeederRequest {
  std::string mechanism = "auto";
  std::string partition = "root";
};

struct MechanismChoice {
  std::string mechanism; // "sched_ext" or "cpuset"
  bool sched_ext_usable = false;
  std::string sched_ext_refused;    // why not, when not usable
  std::vector<std::string> reasons; // every decision, in order
};
// Errc::input when sched_ext is demanded but refused (the error says why),
// or a value of `want` is not one of those above.
Result<MechanismChoice> choose_mechanism(const Sysroot &root, const BootIsolation &boot,
                                         const FeederRequest &want = {});

struct FeederScxStats {
  std::uint64_t foreign = 0, stray = 0, forced = 0, preempted = 0;
  std::uint64_t feeder_enq = 0, normal_enq = 0, kthread_enq = 0;
  // Real-time (FIFO/RR) and DEADLINE threads outside the feeder cgroup
  // switched in on a feeder CPU: sched_ext does not schedule them.
  std::uint64_t rt_foreign = 0, dl_foreign = 0;
};

// A user thread whose affinity feeder set or keeps: what it was before and
// what feeder made it ("" when feeder left it to the kernel).  Given back at
// 'feeder off' when the thread is still where feeder put it, or where the
// kernel widened it to (a cpuset partition change resets user affinities on
// kernels before 6.2).
struct FeederThread {
  int tid = 0;
  std::string before;
  std::string after;
  bool operator==(const FeederThread &) const = default;
};

struct FeederState {
  bool active = false;
  std::string mechanism; // "sched_ext" | "cpuset"
  CpuSet cpus;
  CpuSet housekeeping;
  std::string cgroup = k_feeder_cgroup;
  std::string wq_cpumask_before;                          // "" when not changed
  std::vector<std::pair<int, std::string>> kthreads;      // pid, affinity before (moved)
  std::vector<std::pair<int, std::string>> kthreads_kept; // pid, affinity (not moved; restored after partitions)
  std::string irq_mode;                                   // "kmod" | "proc" | ""
  std::vector<std::pair<std::string, std::string>> irqs;  // /proc/irq file, value before
  std::vector<FeederThread> threads;                      // user threads: real-time ones moved off (sched_ext),
                                                          // narrowed ones kept across partitions (cpuset)
  std::vector<int> dl_reported;                           // DEADLINE threads reported (affinity cannot move them)
  std::string fallback;                                   // sched_ext ejection: exit reason, "" otherwise
  bool cpuset_enabled_by_us = false;
  std::string cpuset_note; // cpuset without a partition: why ("" with one)
  std::string partition;   // cpuset: the type asked for ("root", "isolated")
  // cpuset: the partition made and what it does (the isolated one: whether
  // every feeder CPU was held busy while it was made, see make_partition()).
  std::string partition_note;
};

struct FeederStatus {
  FeederState state;
  BootIsolation boot;
  MechanismChoice choice;
  std::string scx_state;     // /sys/kernel/sched_ext/state ("" absent)
  std::string scx_ops;       // /sys/kernel/sched_ext/root/ops
  bool scx_attached = false; // our scheduler is the active one
  bool scx_built = false;    // this build has the BPF scheduler
  FeederScxStats stats;      // valid when scx_attached
  std::string partition;     // cpuset.cpus.partition of the cgroup
  // cpuset.cpus.isolated of the root cgroup: the CPUs of every isolated
  // partition, which the kernel keeps unbound workqueues off (and, since
  // 7.0, the domain housekeeping set); "" where the kernel has no such file.
  std::string kernel_isolated;
};

// A kernel thread as /proc/PID/stat shows it.
struct FeederTask {
  int pid = 0;
  std::string comm;
  unsigned flags = 0; // PF_* (PF_KTHREAD, PF_NO_SETAFFINITY)
};

// A real-time or DEADLINE thread outside the feeder cgroup that may run on a
// feeder CPU: found by the sweep at 'feeder on' (cpu -1) or recorded by the
// scheduler's real-time guard when it started on feeder CPU `cpu`.
struct FeederIntruder {
  int tid = 0;
  int cpu = -1;
  int policy = 0; // SCHED_FIFO 1, SCHED_RR 2, SCHED_DEADLINE 6
  std::string comm;
};

// What feeder does to the node besides file writes through the Sysroot:
// CPU affinity of kthreads, the sched_ext BPF scheduler, the ejection
// watcher process and the kernel log.  make_live_feeder_os() is the real
// one; tests use a fake.
class FeederOs {
public:
  virtual ~FeederOs() = default;
  // Kernel threads (empty where the sysroot is not the live node).
  [[nodiscard]] virtual std::vector<FeederTask> kthreads() = 0;
  [[nodiscard]] virtual bool get_affinity(int pid, CpuSet &out) = 0;
  [[nodiscard]] virtual bool set_affinity(int pid, const CpuSet &cpus) = 0;
  // Loads and attaches the scheduler for s (update: rewrites the running
  // one's CPU map in place).
  [[nodiscard]] virtual Status scx_attach(const FeederState &s, bool update) = 0;
  virtual void scx_detach() = 0;
  // Why the kernel ejected the scheduler (its exit info).
  [[nodiscard]] virtual std::string scx_exit_reason() = 0;
  [[nodiscard]] virtual bool scx_stats(FeederScxStats &out) = 0;
  // Threads the guard recorded; scx_forget() drops one once handled.
  [[nodiscard]] virtual std::vector<FeederIntruder> scx_intruders() = 0;
  virtual void scx_forget(int tid) = 0;
  // Every user thread outside cgroup `feeder_cg`, with its policy (empty
  // where the sysroot is not the live node).
  [[nodiscard]] virtual std::vector<FeederIntruder> threads(const std::string &feeder_cg) = 0;
  // Forks the detached 'mltunectl feeder watch' process.
  virtual void start_watcher() = 0;
  // A warning line for the kernel log (and stderr).
  virtual void kmsg(const std::string &line) = 0;
  // Runs `fn` while a process of cgroup `cg` holds each CPU of `cpus` busy,
  // each having taken a timer tick busy (feeder/busy.hpp); `note` names the
  // CPUs that were not.
  [[nodiscard]] virtual Status while_busy(const CpuSet &cpus, const std::string &cg, const std::function<Status()> &fn,
                                          std::string &note) = 0;
};

// The live one; kthreads() and start_watcher() do nothing unless `root` is
// the live node.
std::unique_ptr<FeederOs> make_live_feeder_os(const Sysroot &root);

// The feeder CPUs of `spec` -- a cpulist ("2-3,6-7"), or a role of the CPU
// plan of this node ("feeder", "feeder:N") -- with the plan's housekeeping
// CPUs (empty for a cpulist: feeder_on() then keeps every other online CPU).
// A role the plan has no CPUs for is an input error saying why; a cpulist
// must name online CPUs. `what` names the setting in errors ("--cpus",
// "[feeder] cpus").
Result<std::pair<CpuSet, CpuSet>> resolve_feeder_cpus(const Sysroot &root, const std::string &spec,
                                                      std::string_view what = "--cpus");

// CPUs a read-only command should leave alone: the feeder cores (the
// recorded state of `feeder on`, and the module's feeder/cpus) and the
// CPUs isolated at boot (isolated, nohz_full).  Reading some sysfs files
// runs code on the CPU they describe (energy_perf_bias reads a model-specific
// register there through an IPI), which a feeder core should not see from a
// job prolog.  Best effort: a file that cannot be read adds nothing.
CpuSet quiet_cpus(const Sysroot &root);

// The housekeeping CPUs for feeder CPUs `cpus`: the online ones of
// `housekeeping`, else every other online CPU.  Input errors: no feeder
// CPU, one that is not online, none left for housekeeping.
Result<CpuSet> feeder_housekeeping(const Sysroot &root, const CpuSet &cpus, const CpuSet &housekeeping);

bool feeder_scx_built();

// sched_ext mechanism: moves the real-time threads the scheduler's guard
// recorded off the feeder CPUs (recorded in the state, given back by 'feeder
// off'); DEADLINE threads, whose affinity must span their root domain, are
// reported once to the kernel log with the cpuset mechanism as the fix.
// Returns how many threads were moved.  Run by 'feeder watch'.
Result<int> feeder_contain(const Sysroot &root, FeederOs &os);
Result<FeederStatus> feeder_status(const Sysroot &root);
// A kernel thread that stays on feeder CPUs: a per-CPU one (ksoftirqd/N,
// migration/N, cpuhp/N, bound kworkers) or one whose affinity cannot be set
// (PF_NO_SETAFFINITY); 'feeder on' leaves them, 'feeder status' lists them.
struct FeederPinnedKthread {
  int pid = 0;
  std::string comm;
  CpuSet cpus; // its affinity (/proc/PID/status Cpus_allowed_list)
};
// Those of `cpus`, by pid: a scan of /proc (tens of milliseconds on a
// large node), so not part of feeder_status().
std::vector<FeederPinnedKthread> feeder_pinned_kthreads(const Sysroot &root, const CpuSet &cpus);
// The recorded state only (off when none): reads one file, checks nothing,
// changes nothing (metrics).
Result<FeederState> feeder_recorded(const Sysroot &root);
// Applies.  When already on with other CPUs, changes them at runtime with
// either mechanism: IRQs, kthreads and the workqueue mask follow the new CPUs
// (released to the recorded originals first, so feeder_off() stays exact);
// sched_ext rewrites the scheduler's map in place (no reload), cpuset makes
// the partition again on the new CPUs.  Asking for another mechanism or
// partition type while on is an input error.
Result<FeederState> feeder_on(const Sysroot &root, const CpuSet &cpus, const CpuSet &housekeeping,
                              const FeederRequest &want = {});
Result<FeederState> feeder_on(const Sysroot &root, FeederOs &os, const CpuSet &cpus, const CpuSet &housekeeping,
                              const FeederRequest &want = {});
Status feeder_off(const Sysroot &root);
Status feeder_off(const Sysroot &root, FeederOs &os);
// Ejection check: switches to the cpuset fallback when the scheduler is gone.
// Returns true when a fallback happened now.
Result<bool> feeder_check(const Sysroot &root);
Result<bool> feeder_check(const Sysroot &root, FeederOs &os);
// Polls feeder_check() every `period_ms` until feeder is off or fell back.
Status feeder_watch(const Sysroot &root, unsigned period_ms = 50);
// Test hook: makes the BPF scheduler report an error (ejection).
Status feeder_inject_error(const Sysroot &root);
// Joins the feeder cgroup, prefers the feeder CPUs' NUMA nodes, execs argv.
// Returns only on failure.
Status feeder_exec(const Sysroot &root, const std::vector<std::string> &argv);

// The feeder cores (feeder.hpp): `cpus` is a cpulist or a plan role, ""
// turns the feeder off.  plan() resolves the CPUs, checks the mechanism and
// records the feeder state found; apply() is feeder_on() (or feeder_off());
// rollback() brings the recorded state back; baseline() is feeder_off().
class FeederStep final : public Step {
public:
  FeederStep(const Sysroot &root, std::string cpus, FeederRequest request, FeederOs *os = nullptr);
  [[nodiscard]] std::string_view name() const override { return "feeder"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  // The feeder cores in force (feeder status).
  [[nodiscard]] std::optional<DomainState> state() override;
  // feeder_off(), reported.
  [[nodiscard]] DomainState off(bool dry_run) override;

  [[nodiscard]] std::string summary() const override;
  // After plan(): the feeder CPUs this step puts in force (none: off).
  [[nodiscard]] const CpuSet &planned_cpus() const { return cpus_; }

private:
  FeederOs &os();

  const Sysroot &root_;
  std::string spec_;
  FeederRequest request_;
  FeederOs *os_;
  std::unique_ptr<FeederOs> live_os_;
  CpuSet cpus_;
  CpuSet housekeeping_;
  FeederState before_;
  FeederState after_;
};

} // namespace mltune
