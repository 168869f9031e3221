// Thread scheduling rules: SCHED_DEADLINE / FIFO / RR / OTHER policies for
// named threads (NCCL proxy threads first of all), applied once or by a
// watcher on the proc connector.  Documentation/sched.rst describes the model.
//
//   rules (profile [[sched.rule]]) --match--> threads --plan--> admission per
//   root domain --> placement (cgroup v2 root partition) --> sched_setattr
//
// Everything that touches the node goes through a SchedSystem, so unit tests
// run the whole pipeline against an in-memory fake.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

// Kernel policy numbers (include/uapi/linux/sched.h).
enum class SchedPolicy : uint32_t { other = 0, fifo = 1, rr = 2, batch = 3, idle = 5, deadline = 6 };
std::string_view to_string(SchedPolicy p);
std::optional<SchedPolicy> sched_policy_from(std::string_view s);

inline constexpr uint64_t k_sched_flag_reset_on_fork = 0x01;
inline constexpr uint64_t k_sched_flag_dl_overrun = 0x04;

// What sched_getattr/sched_setattr carry (times in ns).
struct SchedAttr {
  SchedPolicy policy = SchedPolicy::other;
  uint64_t flags = 0;
  int nice = 0;
  int priority = 0;
  uint64_t runtime = 0;
  uint64_t deadline = 0;
  uint64_t period = 0;

  bool operator==(const SchedAttr &) const = default;
  // "deadline runtime=500us deadline=1000us period=1000us reset-on-fork"
  [[nodiscard]] std::string describe() const;
  // Bandwidth of a DEADLINE attr (runtime/period), 0 otherwise.
  [[nodiscard]] double bandwidth() const;
};

// One [[sched.rule]] of a profile.
struct SchedRule {
  std::string name;                  // unique within a profile; later files override
  std::string thread;                // glob on the thread name (comm, 15 bytes)
  std::string thread_regex;          // or an ECMAScript regex (full match)
  std::string exe;                   // optional glob on /proc/PID/exe
  std::string cmdline;               // optional glob on the command line (args joined by spaces)
  std::string cgroup;                // optional glob on the cgroup v2 path ("/user.slice/...")
  SchedAttr attr;                    // policy and parameters
  std::string cpus;                  // "", "feeder", "housekeeping" or a cpulist
  std::optional<SchedAttr> fallback; // when DEADLINE admission refuses
  std::string reason;
  std::string origin; // "training.toml:12"

  [[nodiscard]] bool matches_name(std::string_view comm) const;
};

// A thread as the rules see it.
struct ThreadInfo {
  int pid = 0;
  int tid = 0;
  std::string comm;
  std::string exe;
  std::string cmdline;
  std::string cgroup;     // cgroup v2 path of the thread ("/" when unknown)
  uint64_t starttime = 0; // field 22 of stat: tells a reused TID apart
};

// The first rule that matches `t`, or null.
const SchedRule *sched_match(std::span<const SchedRule> rules, const ThreadInfo &t);
// Whether some rule could match a thread called `comm` (the name is the one
// thing every rule tests): scans read the rest of a thread only then.
bool sched_name_matches(std::span<const SchedRule> rules, std::string_view comm);

// The node operations the scheduler code needs.  LiveSchedSystem is the real
// one (procfs through the Sysroot, sched_{get,set}attr syscalls, cgroupfs).
class SchedSystem {
public:
  virtual ~SchedSystem() = default;
  [[nodiscard]] virtual const Sysroot &root() const = 0;
  [[nodiscard]] virtual std::vector<int> pids() const = 0;
  [[nodiscard]] virtual std::vector<int> tids(int pid) const = 0;
  [[nodiscard]] virtual Result<ThreadInfo> thread(int pid, int tid) const = 0;
  // The thread's name alone (what a scan tests first); thread()'s by default.
  [[nodiscard]] virtual Result<std::string> comm(int pid, int tid) const {
    auto t = thread(pid, tid);
    if (!t) {
      return t.error();
    }
    return std::move(t->comm);
  }
  // Every thread with its name (pid, tid and comm set), by pid then tid:
  // what a scan of the node reads first.  From pids(), tids() and comm() by
  // default; the live system reads it in one cheaper pass.
  [[nodiscard]] virtual std::vector<ThreadInfo> thread_names() const;
  [[nodiscard]] virtual Result<SchedAttr> get(int tid) const = 0;
  // Errors keep the errno (ESRCH: thread gone, EBUSY: admission, EPERM, ...).
  [[nodiscard]] virtual Status set(int tid, const SchedAttr &a) = 0;
  // Moves one thread into the cgroup v2 directory `cg` ("/mltune.feeder").
  [[nodiscard]] virtual Status move_thread(int tid, const std::string &cg) = 0;
  // Creates (or reuses) a cgroup v2 cpuset partition of type root with `cpus`;
  // returns the partition state read back ("root", "root invalid (...)").
  [[nodiscard]] virtual Result<std::string> ensure_partition(const std::string &cg, const std::string &cpus) = 0;
  [[nodiscard]] virtual Status remove_partition(const std::string &cg) = 0;
};

std::unique_ptr<SchedSystem> make_live_sched_system(const Sysroot &root);

// Resolves a rule's `cpus` to a cpulist: a literal cpulist, or a role of the
// feeder-core plan ("feeder", "feeder:N", "housekeeping", "workers").  Roles
// come from `feeder` when given (mltunectl --feeder; housekeeping is then the
// other online CPUs), else /sys/kernel/mltune/feeder/cpus, else the topology
// planner (cpu_plan.hpp).
Result<std::string> resolve_placement(const Sysroot &root, std::string_view spec, std::string_view feeder);

// Bandwidth ledger of one root domain.
struct RootDomain {
  std::string name; // "default" or the partition cgroup ("/mltune.feeder")
  CpuSet cpus;
  double limit = 0;     // CPUs x sched_rt_runtime_us / sched_rt_period_us (-1: unlimited)
  double reserved = 0;  // kernel's own DEADLINE servers (fair server, 6.12+)
  double used = 0;      // existing DEADLINE threads
  double requested = 0; // this request
  [[nodiscard]] bool fits() const { return limit < 0 || used + requested <= limit - reserved + 1e-9; }
  // "root domain default (CPUs 0-7): limit 8 x 950000/1000000 = 7.600 ..."
  [[nodiscard]] std::string explain() const;
};

// One action the apply step took or would take.
struct SchedAction {
  int pid = 0;
  int tid = 0;
  std::string comm;
  std::string rule;
  SchedAttr before;
  SchedAttr after;
  std::string cgroup;  // partition the thread was moved to ("" when none)
  std::string result;  // applied | unchanged | fallback | failed | gone | dry-run
  std::string message; // why (admission numbers, errno text)
};

// A watcher's state between events (cached admission ledger, state-file
// records not written yet); opaque, made by sched_watch for its apply calls.
struct SchedWatchCache;

struct SchedOptions {
  std::optional<int> pid; // only this process
  std::vector<int> tids;  // sched_reset: only these threads (empty: every one)
  std::string feeder;     // feeder cpulist override
  bool dry_run = false;
  // Watcher: reuse the admission ledger (bandwidth of existing DEADLINE
  // threads) for this long, updated with what this process applies, instead
  // of rescanning every thread per event.  0: always rescan.
  int ledger_ttl_ms = 0;
  // Watcher: queue state-file records instead of writing the file per
  // thread; the watcher writes them while idle and when it stops.
  bool defer_state = false;
  // The watcher's state that the two above use; without it they do nothing.
  std::shared_ptr<SchedWatchCache> watch;
  // Threads whose rule check we skip (watcher: inherited names).
  std::function<void(const SchedAction &)> log; // called for each action
};

// The state file (<sysroot>/run/mltune/sched.json) records, per touched
// thread, its previous attributes and cgroup so `sched reset` can restore
// them, and the partitions mltune created.
inline constexpr std::string_view k_sched_state_path = "/run/mltune/sched.json";

struct SchedReport {
  std::vector<SchedAction> actions;
  std::vector<RootDomain> domains; // admission ledgers consulted
  std::vector<std::string> notes;  // partition states, refusals
};

// One-shot: matches every thread (or those of opt.pid) and applies the rules,
// with admission per root domain decided for the whole request first.
Result<SchedReport> sched_apply(SchedSystem &sys, std::span<const SchedRule> rules, const SchedOptions &opt);
// Applies rules to one thread (watcher path); admission for that thread alone.
Result<SchedReport> sched_apply_thread(SchedSystem &sys, std::span<const SchedRule> rules, int pid, int tid,
                                       const SchedOptions &opt);
// Restores every thread recorded in the state file (or those of opt.pid) and
// removes the partitions mltune created when they are empty.
Result<SchedReport> sched_reset(SchedSystem &sys, const SchedOptions &opt);

// Whether attributes read from a thread hold what `want` asks (policy, its
// parameters, and the reset-on-fork and overrun flags).
bool sched_attr_holds(const SchedAttr &cur, const SchedAttr &want);

// The threads that rules match now, with their current attributes.
struct SchedListEntry {
  ThreadInfo thread;
  SchedAttr attr;
  std::string rule;
  bool managed = false; // recorded in the state file
};
std::vector<SchedListEntry> sched_list(const SchedSystem &sys, std::span<const SchedRule> rules,
                                       std::optional<int> pid);

// Admission ledger for the domains on the node (no request).
std::vector<RootDomain> sched_domains(const SchedSystem &sys);

// One proc connector event (linux/cn_proc.h) as the watcher uses it.
struct ProcEvent {
  enum class Kind { fork, exec, comm, exit };
  Kind kind = Kind::comm;
  int pid = 0;               // tgid (fork: the child's)
  int tid = 0;               // thread (fork: the child; exec: = pid)
  uint64_t timestamp_ns = 0; // CLOCK_MONOTONIC at the event
  std::string comm;          // comm: the new name
};

// What one wait on the event source brought.
struct ProcEventBatch {
  bool idle = false; // the wait timed out with nothing
  bool lost = false; // the kernel dropped events (ENOBUFS): rescan
  std::vector<ProcEvent> events;
};

// Where the watcher's events come from: the proc connector socket
// (open_proc_connector) or, in tests, a scripted list.
class ProcEventSource {
public:
  virtual ~ProcEventSource() = default;
  // Waits up to `timeout_ms` for events; errors are fatal to the watcher.
  virtual Result<ProcEventBatch> wait(int timeout_ms) = 0;
  // Ends the subscription (the watcher calls it when it stops).
  virtual void unsubscribe() = 0;
  // A descriptor that polls readable when events wait (-1: none).
  [[nodiscard]] virtual int fd() const { return -1; }
};

// A NETLINK_CONNECTOR socket bound to CN_IDX_PROC and subscribed.
Result<std::unique_ptr<ProcEventSource>> open_proc_connector();

// Watcher: subscribes to the proc connector and applies rules to threads when
// they are named (comm events), created (fork) or exec.  Runs an initial
// one-shot apply.  Returns when `stop` returns true (checked at least every
// 200 ms) or on a fatal error.
struct WatchOptions {
  SchedOptions sched;
  std::function<bool()> stop;
  std::function<void(const std::string &)> log; // free-form log lines
};
Status sched_watch(SchedSystem &sys, std::span<const SchedRule> rules, const WatchOptions &opt);
// The same on the events of `src`.
Status sched_watch(SchedSystem &sys, std::span<const SchedRule> rules, const WatchOptions &opt, ProcEventSource &src);

// The profile's [[sched.rule]]s (sched.hpp).  plan() checks that every
// rule's placement resolves; apply() is sched_apply() over every thread, and
// a thread the kernel refused (no fallback admitted either) fails the step;
// rollback() resets the threads apply() changed; verify() checks that every
// thread a rule matches holds the rule's attributes (or its fallback's);
// baseline() resets every thread mltune recorded (sched_reset()).  Without
// a SchedSystem given, the live one is used on the live node only: on a
// --sysroot tree the step does nothing (no host thread is touched).
class SchedStep final : public Step {
public:
  SchedStep(std::span<const SchedRule> rules, const Sysroot &root, SchedSystem *sys = nullptr);
  [[nodiscard]] std::string_view name() const override { return "sched"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  // The threads the rules match now against the rules' policies.
  [[nodiscard]] Result<DomainCheck> check(std::vector<NodeDifference> &out) override;
  // Every thread policy and partition mltune changed put back (a dry run:
  // counted).
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;

  // What apply() did (nullopt when the step had nothing to do).
  [[nodiscard]] const std::optional<SchedReport> &applied() const { return applied_; }
  // Whether the step acts here: rules and a scheduler to talk to.
  [[nodiscard]] bool active() const { return sys_ != nullptr && !rules_.empty(); }

private:
  std::span<const SchedRule> rules_;
  const Sysroot &root_;
  std::unique_ptr<SchedSystem> live_;
  SchedSystem *sys_;
  // Why the rules cannot act on this root (a container without the node's
  // PID or network namespace); plan() refuses with it when there are rules.
  Status unreachable_;
  std::optional<SchedReport> applied_;
};

} // namespace mltune
