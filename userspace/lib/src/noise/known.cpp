// Known kernel noise sources and what removes them (Documentation/noise.rst
// has the same table for people).  Matched by the function an hrtimer, timer
// or work item ran, by a task's comm, by a softirq or IPI kind.
#include "mltune/noise.hpp"

#include <array>

namespace mltune {

namespace {

struct Entry {
  std::string_view match; // exact function/kind name, or a comm prefix ending in '/' or '*'
  KnownNoise known;
};

constexpr KnownNoise k_dl_server{
    "deadline server for fair tasks (fair_server, kernels from 6.12; on a nohz_full CPU its replenishment timer "
    "kicks the running task once a period with a reschedule IPI, on 6.12 also a nohz kick and a tick)",
    "echo 0 > /sys/kernel/debug/sched/fair_server/cpuN/runtime turns it off on CPU N (fair tasks there lose "
    "their protection from RT starvation; on Debian's 6.12.117 that write can warn in dl_server_stop, which it "
    "calls whether or not the server runs, so mltune does not make it)"};

constexpr std::string_view k_tick_fix =
    "nohz_full=CPUS (mltunectl boot) stops the tick while a single task runs there; an idle CPU has none";

// Functions run by hrtimers, timer-wheel callbacks and work items.
constexpr std::array k_functions{
    Entry{"tick_nohz_handler", {"scheduler tick", k_tick_fix}},
    Entry{"tick_sched_timer", {"scheduler tick", k_tick_fix}},
    Entry{"dl_task_timer",
          {"SCHED_DEADLINE replenishment timer",
           "the CPU's own deadline tasks (e.g. NCCL proxy threads) need it; a foreign deadline task: move it"}},
    Entry{"inactive_task_timer", {"SCHED_DEADLINE bandwidth reclaim timer", "follows the deadline tasks on the CPU"}},
    Entry{
        "hrtimer_wakeup",
        {"a task's sleep timeout (nanosleep, poll, futex)", "move the sleeping task: its timers fire where it sleeps"}},
    Entry{"watchdog_timer_fn",
          {"soft-lockup watchdog",
           "sysctl kernel.watchdog_cpumask=HOUSEKEEPING (nohz_full CPUs are left out by default), or nosoftlockup"}},
    Entry{"sched_rt_period_timer",
          {"RT throttling period timer", "keep real-time tasks off the CPU; it stops with no RT task there"}},
    Entry{"it_real_fn", {"setitimer/alarm of a process", "move the process that armed it"}},
    Entry{"posix_timer_fn", {"POSIX timer of a process", "move the process that armed it"}},
    Entry{"timerfd_tmrproc", {"timerfd of a process", "move the process that armed it"}},
    Entry{"perf_mux_hrtimer_handler", {"perf event multiplexing", "stop the perf session that monitors this CPU"}},
    Entry{"vmstat_update",
          {"vmstat per-CPU counter folding",
           "sysctl vm.stat_interval=10 (or more); on nohz_full CPUs vmstat_shepherd skips quiet CPUs"}},
    Entry{"vmstat_shepherd", {"vmstat shepherd", "sysctl vm.stat_interval=10 (or more)"}},
    Entry{"lru_add_drain_per_cpu",
          {"LRU drain on every CPU (mlock, page migration, large munmap)",
           "avoid mlock/munlock churn elsewhere on the node; isolcpus= does not stop it"}},
    Entry{"drain_local_pages_wq", {"per-CPU page list drain", "caused by memory pressure or offlining elsewhere"}},
    Entry{"clocksource_watchdog", {"clocksource watchdog", "tsc=reliable on the kernel command line"}},
    Entry{"mce_timer_fn", {"machine-check polling", "mce=ignore_ce on the kernel command line"}},
    Entry{"delayed_work_timer_fn", {"delayed work timer (the work item follows)", "see the work items"}},
    Entry{"process_timeout", {"a task's schedule_timeout()", "move the sleeping task"}},
    Entry{"flush_to_ldisc", {"tty input processing", "keep consoles and terminals off feeder cores"}},
    Entry{"blk_mq_run_work_fn", {"block I/O dispatch", "move the disk's IRQs and I/O submitters"}},
    Entry{"rcu_core", {"RCU callback processing", "rcu_nocbs=CPUS (mltunectl boot) offloads callbacks"}},
    Entry{"task_numa_work",
          {"NUMA balancing scan (the remote tick of a nohz_full CPU queues it on the running task and kicks the CPU "
           "with a reschedule IPI, about once a second; the scan then takes NUMA hinting faults)",
           "sysctl kernel.numa_balancing=0 (mltune's base profile sets it), or numa_balancing=disable on the kernel "
           "command line (mltunectl boot)"}},
};

// Tasks, by comm prefix.
constexpr std::array k_comms{
    Entry{"ksoftirqd/", {"softirq thread", "see the softirqs of the CPU"}},
    Entry{"kworker/",
          {"workqueue worker",
           "unbound ones follow the workqueue cpumask (mltunectl feeder on sets it); per-CPU ones run the work items "
           "listed"}},
    Entry{"rcuc/", {"RCU core kthread", "rcu_nocbs=CPUS (mltunectl boot)"}},
    Entry{"rcuo", {"RCU callback offload kthread", "mltunectl feeder on moves rcuo* kthreads to housekeeping CPUs"}},
    Entry{"rcu_preempt", {"RCU grace-period kthread", "pin it to housekeeping CPUs (mltunectl feeder on moves it)"}},
    Entry{"rcu_sched", {"RCU grace-period kthread", "pin it to housekeeping CPUs (mltunectl feeder on moves it)"}},
    Entry{"migration/",
          {"CPU stopper (migration, stop_machine)", "frequent only with affinity churn or CPU hotplug elsewhere"}},
    Entry{"watchdog/", {"soft-lockup watchdog kthread", "nosoftlockup, or sysctl kernel.watchdog_cpumask"}},
    Entry{"kcompactd", {"memory compaction", "sysctl vm.compaction_proactiveness=0; pin it to housekeeping CPUs"}},
    Entry{"kswapd", {"memory reclaim", "pin it to housekeeping CPUs (mltunectl feeder on moves it)"}},
    Entry{"irq/", {"threaded IRQ handler", "move the IRQ's affinity off the CPU"}},
    Entry{"cpuhp/", {"CPU hotplug thread", "runs only on CPU hotplug"}},
    Entry{"khugepaged", {"transparent huge page collapse", "pin it to housekeeping CPUs"}},
};

// Softirq vectors (/proc/softirqs names).
constexpr std::array k_softirqs{
    Entry{"TIMER", {"timer wheel callbacks", "see the timer callbacks; nohz_full CPUs defer most of them"}},
    Entry{"RCU",
          {"RCU callback processing", "rcu_nocbs=CPUS (mltunectl boot) offloads the callbacks to rcuo kthreads"}},
    Entry{"SCHED",
          {"scheduler load balancing", "a cpuset partition or isolcpus=domain takes the CPU out of balancing"}},
    Entry{"NET_RX", {"network receive", "move the NIC's queue IRQs and RPS off the CPU (mltunectl nic, feeder on)"}},
    Entry{"NET_TX", {"network transmit completion", "move the NIC's queue IRQs off the CPU"}},
    Entry{"BLOCK", {"block I/O completion", "move the disk's IRQs off the CPU"}},
    Entry{"HRTIMER", {"soft hrtimers", "see the hrtimer functions"}},
    Entry{"TASKLET", {"tasklets (driver bottom halves)", "move the driver's IRQs off the CPU"}},
    Entry{"HI", {"high-priority tasklets", "move the driver's IRQs off the CPU"}},
    Entry{"IRQ_POLL", {"block IRQ polling", "move the disk's IRQs off the CPU"}},
};

// IPIs and vectors, by the id after "ipi:"/"vector:".
constexpr std::array k_vectors{
    Entry{"reschedule",
          {"reschedule IPI (wake-ups, load balancing, task work such as the NUMA balancing scan)",
           "keep other tasks off the CPU (mltunectl feeder on: cpuset partition or sched_ext); with task_numa_work "
           "in the details, sysctl kernel.numa_balancing=0"}},
    Entry{"call_function",
          {"function-call IPI (TLB shootdowns, cross-CPU calls)",
           "a process spanning feeder and other CPUs shoots down TLBs: keep the feeder's processes on feeder cores"}},
    Entry{"call_function_single",
          {"single-CPU function-call IPI (on an idle feeder core beside busy CPUs, mostly the idle load "
           "balancer's kick, nohz_csd_func, about once a tick; also perf, cpufreq, MSR reads)",
           "the kick goes to the first idle housekeeping CPU with a scheduling domain: nohz_full=CPUS "
           "(mltunectl boot) or isolcpus=domain removes the core from its choice; at runtime, mltunectl "
           "feeder on --partition isolated (an isolated cpuset partition made while the core is busy)"}},
    Entry{"irq_work", {"irq_work IPI (perf, printk, nohz_full kicks)", "stop perf sessions watching the CPU"}},
    Entry{"tlb_shootdown",
          {"remote TLB flush", "threads of one process on feeder and other CPUs: keep the process on feeder cores"}},
    Entry{"thermal", {"thermal interrupt", "hardware; none"}},
    Entry{"threshold", {"MCE threshold interrupt", "hardware errors; check the machine-check log"}},
    Entry{"deferred_error", {"deferred MCE error interrupt", "hardware errors; check the machine-check log"}},
};

bool match(std::string_view pattern, std::string_view s) {
  if (pattern.ends_with('/')) {
    return s.starts_with(pattern);
  }
  if (pattern == "rcuo" || pattern == "kswapd" || pattern == "kcompactd") {
    return s.starts_with(pattern);
  }
  return s == pattern;
}

template <size_t N> std::optional<KnownNoise> find(const std::array<Entry, N> &table, std::string_view s) {
  for (const auto &e : table) {
    if (match(e.match, s)) {
      return e.known;
    }
  }
  return std::nullopt;
}

std::string_view after_colon(std::string_view id) {
  const auto pos = id.find(':');
  return pos == std::string_view::npos ? id : id.substr(pos + 1);
}

} // namespace

std::optional<KnownNoise> known_noise(const NoiseSource &s) {
  switch (s.kind) {
  case NoiseKind::timer:
    if (s.id.starts_with("timer-task:")) {
      return find(k_functions, "hrtimer_wakeup");
    }
    if (s.id == "timer:dl_server") {
      return k_dl_server;
    }
    if (s.id == "timer:0") {
      return KnownNoise{"local timer interrupt that expired no hrtimer (periodic tick, early or spurious)", k_tick_fix};
    }
    return find(k_functions, after_colon(s.id));
  case NoiseKind::task: return find(k_comms, s.comm);
  case NoiseKind::softirq: return find(k_softirqs, after_colon(s.id));
  case NoiseKind::ipi:
  case NoiseKind::vector: return find(k_vectors, after_colon(s.id));
  case NoiseKind::irq:
    return KnownNoise{"device interrupt", "echo HOUSEKEEPING > /proc/irq/N/smp_affinity_list (mltunectl feeder on "
                                          "steers movable IRQs); managed IRQs need isolcpus=managed_irq,CPUS"};
  }
  return std::nullopt;
}

std::optional<KnownNoise> known_noise(const NoiseDetail &d) {
  if (d.what == "tlb_shootdown") {
    return find(k_vectors, "tlb_shootdown");
  }
  if (d.what == "hrtimer" && d.function == "dl_server") {
    return k_dl_server;
  }
  return find(k_functions, d.function);
}

bool is_scheduler_tick(const NoiseSource &s) {
  if (s.kind != NoiseKind::timer) {
    return false;
  }
  const auto k = known_noise(s);
  return k && k->fix == k_tick_fix;
}

} // namespace mltune
