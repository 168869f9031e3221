// The feeder CPUs' isolation (feeder/internal.hpp): the cpuset partition,
// and the housekeeping moved off them and given back: kthreads, user
// threads, unbound workqueues, IRQs.  Affinity goes through the FeederOs.
#include "feeder/internal.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "feeder/busy.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#include <algorithm>
#include <ranges>
#include <string>

namespace mltune::feeder {

namespace {

// ---- cgroup / cpuset ------------------------------------------------------

// The partition type for the feeder CPUs: `isolated` when asked for or when
// isolcpus= domain isolation covers any of them (a `root` partition on such
// CPUs is invalid since 6.10, "partition config conflicts with housekeeping
// setup", and they have no load balancing anyway), `root` otherwise.
std::string partition_type(const BootIsolation &boot, const FeederState &s) {
  return s.partition == "isolated" || boot.isolated.intersects(s.cpus) ? "isolated" : "root";
}

// What the partition made does, for 'feeder status'.
std::string describe_partition(const std::string &type, const std::string &busy_note) {
  if (type == "root") {
    return "root: the scheduler balances load among the feeder CPUs; an idle one still takes the idle load "
           "balancer's kicks from busy CPUs (--partition isolated stops them)";
  }
  std::string d = "isolated: no scheduling domain on the feeder CPUs, so no load balancing among them (a thread "
                  "stays on the CPU it starts on: place one per CPU) and no idle load balancer kicks";
  if (!busy_note.empty()) {
    d += "; not every feeder CPU was held busy while it was made (" + busy_note +
         "), and one idle then may still take those kicks until 'feeder off'";
  }
  return d;
}

void reassert_kthreads(FeederOs &os, const FeederState &s);
void keep_threads(FeederOs &os, FeederState &s);
void reassert_threads(FeederOs &os, const FeederState &s);

// An isolated partition is made while every feeder CPU is busy.  Busy CPUs
// kick the idle load balancer (kick_ilb(), a function-call IPI) on the first
// idle CPU of the scheduler's nohz.idle_cpus_mask.  A CPU enters that mask
// when its tick stops in idle while it has a scheduling domain and leaves it
// only at a tick while busy and still in a domain: a CPU idle when the
// partition takes its domain away stays in the mask and keeps being kicked,
// one busy then never enters it again (6.1, 6.12 and 7.2:
// bench/noise/README.md).  So a process of the feeder cgroup spins on each
// CPU (one outside it would be moved off by the partition itself, before the
// domains go) until the kernel has taken the CPUs out of their domains,
// which it may do after the write returns.  CPUs boot-isolated from domains
// never had one.
} // namespace

Status make_partition(const Sysroot &root, FeederOs &os, FeederState &s) {
  auto en = cgroup::enable_cpuset(root);
  if (!en) {
    return en.error();
  }
  s.cpuset_enabled_by_us = s.cpuset_enabled_by_us || *en;
  if (auto st = root.write_value(cgroup::path(s.cgroup, "cpuset.cpus"), s.cpus.str()); !st) {
    return st.error();
  }
  keep_threads(os, s);
  const BootIsolation boot = read_boot_isolation(root);
  const std::string type = partition_type(boot, s);
  Result<std::string> prs = std::string();
  const auto set = [&](const std::string &t) {
    prs = cgroup::set_partition(root, s.cgroup, t);
    return prs ? Status{} : Status{prs.error()};
  };
  std::string busy_note;
  if (type == "isolated") {
    const CpuSet busy = s.cpus - boot.isolated;
    const auto set_and_wait = [&] {
      Status st = set(type);
      if (st && prs && cgroup::is_valid(*prs, type)) {
        if (const auto gone = feeder::wait_domains_gone(root, busy); gone && !*gone) {
          busy_note = "the kernel had not taken them out of their scheduling domains within seconds";
        }
      }
      return st;
    };
    std::string loops_note;
    if (os.while_busy(busy, s.cgroup, set_and_wait, loops_note)) {
      // What the kernel says once the loops are gone.
      prs = root.read_value(cgroup::path(s.cgroup, "cpuset.cpus.partition"));
    }
    if (!loops_note.empty()) {
      busy_note = loops_note + (busy_note.empty() ? "" : "; " + busy_note);
    }
  } else {
    (void)set(type);
  }
  if (!prs) {
    return prs.error();
  }
  s.cpuset_note.clear();
  s.partition_note = describe_partition(type, busy_note);
  if (!cgroup::is_valid(*prs, type)) {
    // Taken out of prs: set() below reads the partition again into it.
    const std::string got = std::move(*prs);
    (void)cgroup::clear_partition(root, s.cgroup);
    // Some kernels (6.12) refuse every partition on isolcpus= CPUs.  When all
    // feeder CPUs are boot-isolated the boot isolation already keeps other
    // tasks off them (their default affinity is the housekeeping CPUs), so
    // cpuset.cpus alone, confining the feeder cgroup, is enough.
    if (type == "isolated" && boot.isolated.contains(s.cpus)) {
      s.cpuset_note = "no partition (the kernel refused one: " + got +
                      "): cpuset.cpus confines the feeder cgroup, isolcpus= keeps other tasks off";
      s.partition_note.clear();
      return {};
    }
    // An isolated partition asked for and refused: a root one keeps the
    // CPUs for the feeder cgroup all the same.
    if (type == "isolated" && !boot.isolated.intersects(s.cpus)) {
      (void)set("root");
      if (!prs) {
        return prs.error();
      }
      if (cgroup::is_valid(*prs, "root")) {
        s.partition_note = "root, as the kernel refused an isolated partition (" + got +
                           "): the scheduler balances load among the feeder CPUs";
        reassert_kthreads(os, s);
        reassert_threads(os, s);
        return {};
      }
      (void)cgroup::clear_partition(root, s.cgroup);
    }
    return failure(cgroup::path(s.cgroup, "cpuset.cpus.partition") + ": " + got);
  }
  reassert_kthreads(os, s); // the kernel just reset the root cpuset's kthreads
  reassert_threads(os, s);  // and, before 6.2, every user-set affinity
  return {};
}

void remove_partition(const Sysroot &root, FeederState &s) {
  (void)cgroup::clear_partition(root, s.cgroup);
  (void)root.write_value(cgroup::path(s.cgroup, "cpuset.cpus"), "");
}

namespace {

// ---- kthreads, workqueues, IRQs --------------------------------------------

using Task = FeederTask;

// Where a thread (a kthread, or a user thread feeder moves or keeps) whose
// affinity was `aff` belongs while s.cpus are feeder CPUs: off them when it
// may run elsewhere; a single feeder CPU is someone's choice and left to the
// kernel (empty result).
CpuSet thread_target(const CpuSet &aff, const FeederState &s) {
  if (!aff.intersects(s.cpus)) {
    return aff;
  }
  if (aff.count() <= 1) {
    return {};
  }
  CpuSet to = aff & s.housekeeping;
  return to.empty() ? s.housekeeping : to;
}

void set_if_differs(FeederOs &os, int pid, const CpuSet &want) {
  CpuSet cur;
  if (!want.empty() && os.get_affinity(pid, cur) && cur != want) {
    (void)os.set_affinity(pid, want);
  }
}

// Movable kthreads (rcuo*, unbound kworkers, ...) off the feeder CPUs.  Every
// other kthread whose affinity can be set is recorded too (kthreads_kept): a
// cpuset partition change resets the affinity of every task of the root
// cpuset that has no user-set mask (per-CPU kthreads aside), so kthreads the
// kernel placed itself (kswapdN on its node, IRQ threads) would lose theirs.
void move_kthreads(FeederOs &os, FeederState &s) {
  for (const auto &t : os.kthreads()) {
    CpuSet aff;
    if ((t.flags & proc::k_pf_no_setaffinity) != 0 || !os.get_affinity(t.pid, aff)) {
      continue;
    }
    if (aff.count() <= 1 || !aff.intersects(s.cpus)) {
      s.kthreads_kept.emplace_back(t.pid, aff.str());
    } else if (os.set_affinity(t.pid, thread_target(aff, s))) {
      s.kthreads.emplace_back(t.pid, aff.str());
    }
  }
}

// After a cpuset partition was made: every recorded kthread back where
// feeder wants it.
void reassert_kthreads(FeederOs &os, const FeederState &s) {
  for (const auto *list : {&s.kthreads, &s.kthreads_kept}) {
    for (const auto &[pid, aff] : *list) {
      if (auto c = parse_cpuset(aff)) {
        set_if_differs(os, pid, thread_target(*c, s));
      }
    }
  }
}

void restore_kthreads(FeederOs &os, FeederState &s) {
  for (const auto *list : {&s.kthreads, &s.kthreads_kept}) {
    for (const auto &[pid, aff] : *list) {
      if (auto c = parse_cpuset(aff)) {
        set_if_differs(os, pid, *c);
      }
    }
  }
  s.kthreads.clear();
  s.kthreads_kept.clear();
}

// ---- user threads -------------------------------------------------------------
//
// sched_ext schedules only the fair class: SCHED_FIFO/RR and DEADLINE threads
// run wherever their affinity lets them.  With the sched_ext mechanism the
// real-time ones outside the feeder cgroup get an affinity without the feeder
// CPUs: at 'feeder on' for those that exist (the sweep), afterwards for those
// the scheduler's guard sees start on a feeder CPU ('feeder watch').  A
// DEADLINE thread's affinity must span its root domain (sched_setaffinity:
// EBUSY), so those are reported.
//
// A cpuset partition change resets the affinity of every task of the root
// cpuset on kernels before 6.2 (no user_cpus_ptr): threads narrowed by their
// owner are recorded before the partition is made and set again after it.
//
// Either way 'feeder off' gives each recorded thread its affinity back.

constexpr int k_sched_deadline = 6;

bool recorded(const FeederState &s, int tid) {
  return std::ranges::any_of(s.threads, [&](const FeederThread &t) { return t.tid == tid; });
}

} // namespace

int contain(FeederOs &os, FeederState &s, const std::vector<FeederIntruder> &threads) {
  int moved = 0;
  for (const auto &t : threads) {
    if (t.policy == k_sched_deadline) {
      if (std::ranges::find(s.dl_reported, t.tid) == s.dl_reported.end()) {
        s.dl_reported.push_back(t.tid);
        os.kmsg("feeder: SCHED_DEADLINE thread " + std::to_string(t.tid) + " (" + t.comm + ") may run on feeder CPUs " +
                s.cpus.str() +
                ": sched_ext does not schedule DEADLINE threads and their affinity must span the root "
                "domain; the cpuset mechanism keeps them off ('mltunectl feeder off', then 'feeder on "
                "--mechanism cpuset')");
      }
      continue;
    }
    if (t.policy != 1 && t.policy != 2) {
      continue; // the scheduler places fair threads itself
    }
    CpuSet aff;
    if (!os.get_affinity(t.tid, aff) || !aff.intersects(s.cpus) || aff.count() <= 1) {
      continue; // gone, already off, or confined to one CPU by its owner
    }
    const CpuSet to = thread_target(aff, s);
    if (!os.set_affinity(t.tid, to)) {
      continue;
    }
    ++moved;
    if (!recorded(s, t.tid)) {
      s.threads.push_back({t.tid, aff.str(), to.str()});
    }
  }
  return moved;
}

namespace {

void keep_threads(FeederOs &os, FeederState &s) {
  const CpuSet online = s.cpus | s.housekeeping;
  for (const auto &t : os.threads(s.cgroup)) {
    CpuSet aff;
    if (recorded(s, t.tid) || !os.get_affinity(t.tid, aff) || !online.contains(aff) || aff == online) {
      continue; // gone, or not narrowed by its owner
    }
    s.threads.push_back({t.tid, aff.str(), thread_target(aff, s).str()});
  }
}

void reassert_threads(FeederOs &os, const FeederState &s) {
  for (const auto &t : s.threads) {
    if (auto c = parse_cpuset(t.after)) {
      set_if_differs(os, t.tid, *c);
    }
  }
}

// Each recorded thread back on its own CPUs if it is still where feeder put
// it or where the kernel widened it to; an owner's own change stays.
void restore_threads(FeederOs &os, FeederState &s) {
  for (const auto &t : s.threads) {
    auto before = parse_cpuset(t.before);
    auto after = parse_cpuset(t.after);
    CpuSet cur;
    if (!before || !os.get_affinity(t.tid, cur) || cur == *before) {
      continue;
    }
    if ((after && cur == *after) || cur.contains(*before)) {
      (void)os.set_affinity(t.tid, *before);
    }
  }
  s.threads.clear();
  s.dl_reported.clear();
}

Status move_workqueues(const Sysroot &root, FeederState &s) {
  auto cur = root.read_value(k_wq_mask);
  if (!cur) {
    return {}; // no unbound workqueue cpumask on this kernel
  }
  if (auto st = root.write_value(k_wq_mask, s.housekeeping.mask_str()); !st) {
    return st.error();
  }
  s.wq_cpumask_before = *cur;
  return {};
}

// IRQs: the module steers them atomically; without it, /proc/irq one by one
// with rollback.
Status steer_irqs(const Sysroot &root, FeederState &s) {
  if (root.exists(k_kmod_feeder)) {
    if (auto st = root.write_value(k_kmod_feeder, s.cpus.str()); !st) {
      return st.error();
    }
    s.irq_mode = "kmod";
    return {};
  }
  s.irq_mode = "proc";
  std::vector<std::string> files{"/proc/irq/default_smp_affinity"};
  for (const auto &n : root.list_dir("/proc/irq")) {
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) {
      files.push_back("/proc/irq/" + n + "/smp_affinity_list");
    }
  }
  for (const auto &f : files) {
    const bool hex = f.ends_with("default_smp_affinity");
    auto cur = root.read_value(f);
    if (!cur) {
      continue;
    }
    CpuSet aff;
    if (hex) {
      aff = s.cpus; // always rewrite the default
    } else if (auto c = parse_cpuset(*cur, f)) {
      aff = *c;
    }
    if (!aff.intersects(s.cpus)) {
      continue;
    }
    CpuSet to = hex ? s.housekeeping : aff - s.cpus;
    if (to.empty()) {
      to = s.housekeeping;
    }
    if (auto st = root.write_value(f, hex ? to.mask_str() : to.str()); !st) {
      const int e = st.error().sys_errno;
      if (e == EIO || e == EINVAL || e == EPERM) {
        continue; // not movable (managed or per-CPU IRQ)
      }
      return st.error();
    }
    s.irqs.emplace_back(f, *cur);
  }
  return {};
}

void restore_irqs(const Sysroot &root, FeederState &s) {
  if (s.irq_mode == "kmod") {
    (void)root.write_value(k_kmod_feeder, "\n"); // sysfs drops empty writes
  }
  for (const auto &[file, before] : std::views::reverse(s.irqs)) {
    (void)root.write_value(file, before);
  }
  s.irqs.clear();
  s.irq_mode.clear();
}

// Housekeeping for s.cpus, in this order: IRQs, the unbound workqueue
// cpumask, movable kthreads.  What changed is recorded in s.
} // namespace

Status apply_housekeeping(const Sysroot &root, FeederOs &os, FeederState &s) {
  if (auto st = steer_irqs(root, s); !st) {
    return st;
  }
  if (auto st = move_workqueues(root, s); !st) {
    return st;
  }
  move_kthreads(os, s);
  return {};
}

namespace {

// Undoes apply_housekeeping() exactly, in reverse order.  With the cpuset
// mechanism the partition must be gone first: a kthread restored to CPUs a
// partition still holds would get only the rest.
} // namespace

void release_housekeeping(const Sysroot &root, FeederOs &os, FeederState &s) {
  restore_threads(os, s);
  restore_kthreads(os, s);
  if (!s.wq_cpumask_before.empty()) {
    (void)root.write_value(k_wq_mask, s.wq_cpumask_before);
    s.wq_cpumask_before.clear();
  }
  restore_irqs(root, s);
}

} // namespace mltune::feeder
