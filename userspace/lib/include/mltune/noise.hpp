// Noise on CPUs: every interruption of a set of CPUs over a window, by
// source (Documentation/noise.rst).
//
// Two probes count: the BPF programs of bpf/mltune_noise.bpf.c (exact counts
// and the CPU time each source took) and, where BPF cannot load, the kernel's
// own counters in /proc/interrupts, /proc/softirqs and
// /proc/PID/task/TID/schedstat (counts only; a task is charged to the CPU it
// last ran on).  measure_noise() says which one counted and why.
//
// A source is an *interruption* when it takes the CPU away from its task: a
// device IRQ, a local timer interrupt, an IPI or other APIC vector, or a
// task other than the CPU's own work (the tasks of `own_cgroup`, by default
// the feeder cgroup, and the idle task) being switched in.  Softirqs run on
// the exit of an interruption or in ksoftirqd and are listed with their
// counts and time, but are not interruptions of their own; with BPF their
// time is also charged to the interruption whose exit ran them (bh_ns).
// Known kernel noise sources are named, with what removes them.
#pragma once

#include "mltune/catalog.hpp"
#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

enum class NoiseKind {
  irq,     // device IRQ
  timer,   // local timer interrupt (named by the first hrtimer it expired)
  ipi,     // reschedule, function call, irq_work
  vector,  // other APIC vectors (thermal, MCE threshold, errors, ...)
  softirq, // not an interruption of its own
  task,    // a task switched in
};
std::string_view to_string(NoiseKind k);

struct NoiseSource {
  NoiseKind kind = NoiseKind::irq;
  std::string id;     // stable: "irq:25", "timer:tick_nohz_handler", "timer-task:812", "ipi:reschedule",
                      // "softirq:NET_RX", "task:812"
  std::string name;   // for people: "IRQ 25 virtio2-input.0", "local timer: scheduler tick", "task kworker/2:1"
  int irq = -1;       // irq
  int pid = 0;        // task, timer-task: thread id
  int tgid = 0;       // task: process id
  std::string comm;   // task (the name it last switched in with), timer-task
  std::string cgroup; // task: cgroup v2 path ("" unknown)
  bool kthread = false;
  bool own = false;                // the CPU's own work (own_cgroup): not noise
  bool interruption = true;        // false for softirqs
  std::uint64_t count = 0;         // occurrences (tasks: switch-ins in the window)
  std::optional<std::uint64_t> ns; // CPU time, nested interruptions excluded (nullopt: unknown)
  std::uint64_t bh_ns = 0;         // softirqs run on this interruption's exit
  std::string known;               // the known noise source it is, "" when none
  std::string fix;                 // what removes it
  // Ranking weight: time taken (with its softirqs) where known, else count.
  [[nodiscard]] std::uint64_t cost() const { return ns ? *ns + bh_ns : count; }
};

// What ran inside the interruptions: hrtimer, work item and timer callback
// functions, remote TLB flushes; and NUMA balancing scans, which the CPU's
// task runs after the reschedule IPI that queued them.  Counts only.
struct NoiseDetail {
  std::string what;     // "hrtimer", "work", "timer", "tlb_shootdown", "task_work"
  std::string function; // symbol name ("" for tlb_shootdown; "dl_server" for the fair deadline server's hrtimer)
  std::uint64_t count = 0;
  std::string known;
  std::string fix;
};

struct CpuNoise {
  unsigned cpu = 0;
  std::vector<NoiseSource> sources;      // worst first (by cost() where every interruption has a time, else by
                                         // count), softirqs after them, own work last
  std::vector<NoiseDetail> details;      // most frequent first
  std::optional<std::uint64_t> switches; // sched_switch events (BPF only)
  std::uint64_t interruptions = 0;       // foreign ones (not own, not softirqs)
  double per_second = 0;                 // interruptions / window
  std::uint64_t foreign_ns = 0;          // time taken by foreign sources (BPF)
  // The foreign interruption sources, worst first; at most `n`.
  [[nodiscard]] std::vector<const NoiseSource *> offenders(size_t n) const;
};

struct NoiseReport {
  std::string probe;    // "bpf" or "proc"
  std::string fallback; // why not BPF ("" with BPF)
  std::string missing;  // BPF programs this kernel has no hook for
  double seconds = 0;   // the window
  CpuSet cpus;
  std::string own_cgroup;
  std::vector<CpuNoise> per_cpu;
  std::uint64_t dropped = 0; // events lost (BPF map full)
  std::vector<std::string> notes;
};

// ---- the probes (the seam) -------------------------------------------------

enum class RawKind {
  irq,
  vector,
  timer,
  timer_task,
  timer_dl_server,
  softirq,
  task,
  hrtimer,
  hrtimer_dl_server,
  work,
  timer_cb,
  numa_scan
};

struct RawNoiseEntry {
  unsigned cpu = 0;
  RawKind kind = RawKind::irq;
  std::uint64_t id = 0; // irq, enum mltune_noise_vec, function address, softirq vector, pid
  std::string name;     // irq: action name; task, timer_task: comm; vector from /proc: its label
  std::uint64_t count = 0;
  std::optional<std::uint64_t> ns;
  std::uint64_t bh_ns = 0;
  std::uint64_t cgid = 0; // task: cgroup id (BPF)
  std::string cgroup;     // task: cgroup path (/proc)
  int tgid = 0;
  unsigned flags = 0; // task: PF_*
};

struct RawNoise {
  std::vector<RawNoiseEntry> entries;
  std::map<unsigned, std::uint64_t> switches; // BPF only
  std::uint64_t dropped = 0;
  std::string missing;
  std::vector<std::string> notes;
};

// Where counts come from.  start() opens the window on `cpus`, stop()
// closes it and returns what was counted.
class NoiseProbe {
public:
  virtual ~NoiseProbe() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual Status start(const CpuSet &cpus) = 0;
  [[nodiscard]] virtual Result<RawNoise> stop() = 0;
};

// The /proc counters (any sysroot: tests use fake trees).
std::unique_ptr<NoiseProbe> make_proc_noise_probe(const Sysroot &root);
// The BPF programs; an error saying why when this build or node cannot.
Result<std::unique_ptr<NoiseProbe>> make_bpf_noise_probe(const Sysroot &root);
bool noise_bpf_built();

// ---- measuring -------------------------------------------------------------

struct NoiseOptions {
  CpuSet cpus;                // empty: every online CPU
  double seconds = 1;         // the window, unless `exec` is given
  std::string probe = "auto"; // "auto" (BPF, else /proc), "bpf" or "proc"
  std::string own_cgroup = "/mltune-feeder";
  std::vector<std::string> exec; // the window is this command's run (its exit status is kept)
  // Processes that are the CPUs' own work too, wherever their cgroup; read
  // after the window, so a window may add those it starts.
  std::vector<int> own_tgids;
};

// Called between start() and stop(): sleeps, or runs a command.
using NoiseWindow = std::function<Status()>;

// With the given probes (bpf may be null: unavailable, `bpf_error` says why).
Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, NoiseProbe *bpf,
                                  const std::string &bpf_error, NoiseProbe &proc, const NoiseWindow &window);
// On the node: makes the probes; the window sleeps opt.seconds or runs
// opt.exec (whose exit status goes to *exec_status when given).
Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, int *exec_status = nullptr);
// On the node, over the caller's window (the feeding loop of mltune/prove.hpp).
Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, const NoiseWindow &window);

// The report of raw counts (measure_noise's last step; also for tests).
// `kallsyms` maps function addresses to names (load_kallsyms()).
// Tasks of `own_cgroup` or of a process in `own_tgids` are own work.
NoiseReport build_noise_report(const Sysroot &root, const RawNoise &raw, const CpuSet &cpus, double seconds,
                               const std::string &own_cgroup, const std::map<std::uint64_t, std::string> &kallsyms,
                               const std::vector<int> &own_tgids = {});
// Names of the given addresses from <sysroot>/proc/kallsyms.
std::map<std::uint64_t, std::string> load_kallsyms(const Sysroot &root, const std::vector<std::uint64_t> &addrs);

// audit --noise: per CPU one finding with its rate against `budget`
// (interruptions per second), and when over it one warning per offender
// (at most `per_cpu`) with the fix, e.g. the IRQ to move, the kthread to
// pin, the boot parameter that removes the tick.
std::vector<Finding> noise_findings(const NoiseReport &r, double budget, size_t per_cpu = 5);

// ---- known kernel noise sources -------------------------------------------

struct KnownNoise {
  std::string_view name; // "scheduler tick"
  std::string_view fix;  // what removes it
};
// By source (a timer's function, a task's comm, a softirq vector, ...).
std::optional<KnownNoise> known_noise(const NoiseSource &s);
// By detail (hrtimer/timer/work function).
std::optional<KnownNoise> known_noise(const NoiseDetail &d);
// The scheduler tick: the local timer sources known_noise() names as the
// tick (its hrtimer, tick_nohz_handler, before 6.7 tick_sched_timer, or an
// interrupt that expired no hrtimer).  /proc's LOC row ("timer:all") is every
// cause together, not the tick.
[[nodiscard]] bool is_scheduler_tick(const NoiseSource &s);

} // namespace mltune
