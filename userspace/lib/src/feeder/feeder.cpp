// GPU-feeder cores at runtime: see mltune/feeder.hpp and Documentation/feeder.rst.
// Affinity, the BPF scheduler and the watcher process go through a FeederOs
// (LiveFeederOs here), file writes through the Sysroot.
#include "mltune/feeder.hpp"

#include "base/cgroup.hpp"
#include "base/file_lock.hpp"
#include "base/proc.hpp"
#include "base/process.hpp"
#include "base/state_file.hpp"
#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"
#include "feeder/busy.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#ifdef MLTUNE_HAVE_SCX
#include "mltune_scx.h"
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <ranges>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace mltune {

namespace {

constexpr const char *k_scx_dir = "/sys/kernel/sched_ext";
constexpr const char *k_scx_name = "mltune_feeder";
constexpr const char *k_pin_dir = "/sys/fs/bpf/mltune";
constexpr const char *k_wq_mask = "/sys/devices/virtual/workqueue/cpumask";
constexpr const char *k_kmod_feeder = "/sys/kernel/mltune/feeder/cpus";
constexpr std::string_view k_lock_path = "/run/mltune/feeder.lock";

} // namespace

void to_json(nlohmann::json &j, const FeederState &s) {
  nlohmann::json k = nlohmann::json::array();
  for (const auto &[pid, aff] : s.kthreads) {
    k.push_back({{"pid", pid}, {"cpus", aff}});
  }
  nlohmann::json irqs = nlohmann::json::array();
  for (const auto &[f, v] : s.irqs) {
    irqs.push_back({{"file", f}, {"before", v}});
  }
  nlohmann::json kept = nlohmann::json::array();
  for (const auto &[pid, aff] : s.kthreads_kept) {
    kept.push_back({{"pid", pid}, {"cpus", aff}});
  }
  nlohmann::json th = nlohmann::json::array();
  for (const auto &t : s.threads) {
    th.push_back({{"tid", t.tid}, {"before", t.before}, {"after", t.after}});
  }
  j = {{"active", s.active},
       {"mechanism", s.mechanism},
       {"cpus", s.cpus.str()},
       {"housekeeping", s.housekeeping.str()},
       {"cgroup", s.cgroup},
       {"wq_cpumask_before", s.wq_cpumask_before},
       {"kthreads", k},
       {"kthreads_kept", kept},
       {"irq_mode", s.irq_mode},
       {"irqs", irqs},
       {"threads", th},
       {"dl_reported", s.dl_reported},
       {"fallback", s.fallback},
       {"cpuset_enabled_by_us", s.cpuset_enabled_by_us},
       {"cpuset_note", s.cpuset_note},
       {"partition", s.partition},
       {"partition_note", s.partition_note}};
}

void from_json(const nlohmann::json &j, FeederState &s) {
  s = FeederState{};
  s.active = j.value("active", false);
  s.mechanism = j.value("mechanism", "");
  if (auto c = parse_cpuset(j.value("cpus", ""))) {
    s.cpus = *c;
  }
  if (auto c = parse_cpuset(j.value("housekeeping", ""))) {
    s.housekeeping = *c;
  }
  s.cgroup = j.value("cgroup", k_feeder_cgroup);
  s.wq_cpumask_before = j.value("wq_cpumask_before", "");
  for (const auto &k : j.value("kthreads", nlohmann::json::array())) {
    s.kthreads.emplace_back(k.value("pid", 0), k.value("cpus", ""));
  }
  for (const auto &k : j.value("kthreads_kept", nlohmann::json::array())) {
    s.kthreads_kept.emplace_back(k.value("pid", 0), k.value("cpus", ""));
  }
  s.irq_mode = j.value("irq_mode", "");
  for (const auto &i : j.value("irqs", nlohmann::json::array())) {
    s.irqs.emplace_back(i.value("file", ""), i.value("before", ""));
  }
  for (const auto &t : j.value("threads", nlohmann::json::array())) {
    s.threads.push_back({t.value("tid", 0), t.value("before", ""), t.value("after", "")});
  }
  s.dl_reported = j.value("dl_reported", std::vector<int>{});
  s.fallback = j.value("fallback", "");
  s.cpuset_enabled_by_us = j.value("cpuset_enabled_by_us", false);
  s.cpuset_note = j.value("cpuset_note", "");
  s.partition = j.value("partition", "");
  s.partition_note = j.value("partition_note", "");
}

namespace {

// Running-kernel state: not fsynced (a power failure resets what it records).
constexpr StateFile<FeederState> k_state(k_feeder_state, 1, false);

// The recorded state; off (a default FeederState) when there is none.
Result<FeederState> load_state(const Sysroot &root) {
  return k_state.load_or(root);
}

Status save_state(const Sysroot &root, const FeederState &s) {
  return k_state.save(root, s);
}

// on, off and the ejection check (the watcher's too) hold
// FileLock k_lock_path: without it the watcher could see the scheduler
// 'feeder off' had just detached as an ejection and write a cpuset fallback
// state after 'off' removed the state.

void live_kmsg(const std::string &line) {
  if (const UniqueFd fd(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC)); fd) {
    const std::string l = "<4>mltune: " + line + "\n";
    (void)!::write(fd.get(), l.data(), l.size());
  }
  std::fprintf(stderr, "mltune: %s\n", line.c_str());
}

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
    const std::string got = *prs;
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

// ---- kthreads, workqueues, IRQs --------------------------------------------

using Task = FeederTask;

std::vector<Task> kthreads(const Sysroot &root) {
  std::vector<Task> out;
  for (const int pid : proc::pids(root.list_dir("/proc"))) {
    auto st = root.read("/proc/" + std::to_string(pid) + "/stat");
    if (!st) {
      continue;
    }
    auto ps = proc::parse_stat(*st);
    const auto flags = ps ? ps->field<unsigned>(proc::k_stat_flags) : std::nullopt;
    if (flags && (*flags & proc::k_pf_kthread) != 0) {
      out.push_back({pid, ps->comm, *flags});
    }
  }
  return out;
}

bool get_affinity(int pid, CpuSet &out) {
  CpuSet::Native set;
  if (::sched_getaffinity(pid, CpuSet::Native::size(), set.get()) != 0) {
    return false;
  }
  out = CpuSet::from_native(set);
  return true;
}

bool set_affinity(int pid, const CpuSet &s) {
  const CpuSet::Native set = s.native();
  return ::sched_setaffinity(pid, CpuSet::Native::size(), set.get()) == 0;
}

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
  return std::any_of(s.threads.begin(), s.threads.end(), [&](const FeederThread &t) { return t.tid == tid; });
}

int contain(FeederOs &os, FeederState &s, const std::vector<FeederIntruder> &threads) {
  int moved = 0;
  for (const auto &t : threads) {
    if (t.policy == k_sched_deadline) {
      if (std::find(s.dl_reported.begin(), s.dl_reported.end(), t.tid) == s.dl_reported.end()) {
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

// The live sweep: user threads (kthreads are move_kthreads()'s) outside the
// feeder cgroup; /proc/PID/task/TID/stat field 41 is the policy.
std::vector<FeederIntruder> live_threads(const Sysroot &root, const std::string &feeder_cg) {
  constexpr size_t k_stat_policy = 41;
  std::vector<FeederIntruder> out;
  for (const int pid : proc::pids(root.list_dir("/proc"))) {
    const std::string pdir = "/proc/" + std::to_string(pid);
    for (const int tid : proc::pids(root.list_dir(pdir + "/task"))) {
      const std::string dir = pdir + "/task/" + std::to_string(tid);
      auto st = root.read(dir + "/stat");
      auto ps = st ? proc::parse_stat(*st) : std::nullopt;
      const auto policy = ps ? ps->field<int>(k_stat_policy) : std::nullopt;
      const auto flags = ps ? ps->field<unsigned>(proc::k_stat_flags) : std::nullopt;
      if (!policy || !flags || (*flags & (proc::k_pf_kthread | proc::k_pf_no_setaffinity)) != 0) {
        continue;
      }
      if (cgroup::is_within(cgroup::of_task(root, dir), feeder_cg)) {
        continue;
      }
      out.push_back({tid, -1, *policy, ps->comm});
    }
  }
  return out;
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

// Undoes apply_housekeeping() exactly, in reverse order.  With the cpuset
// mechanism the partition must be gone first: a kthread restored to CPUs a
// partition still holds would get only the rest.
void release_housekeeping(const Sysroot &root, FeederOs &os, FeederState &s) {
  restore_threads(os, s);
  restore_kthreads(os, s);
  if (!s.wq_cpumask_before.empty()) {
    (void)root.write_value(k_wq_mask, s.wq_cpumask_before);
    s.wq_cpumask_before.clear();
  }
  restore_irqs(root, s);
}

// ---- sched_ext --------------------------------------------------------------

#ifdef MLTUNE_HAVE_SCX
Result<mltune_feeder_cfg> scx_cfg(const Sysroot &root, const FeederState &s) {
  mltune_feeder_cfg c{};
  struct stat st {};
  const UniqueFd dir = detail::open_node(root, cgroup::path(s.cgroup), O_PATH | O_DIRECTORY);
  if (!dir || ::fstat(dir.get(), &st) != 0) {
    return sys_error(cgroup::path(s.cgroup), errno);
  }
  c.cgid = st.st_ino;
  unsigned level = 0;
  for (char ch : s.cgroup) {
    level += ch == '/' ? 1U : 0U;
  }
  c.level = level;
  for (unsigned cpu : s.cpus.cpus()) {
    if (cpu >= MLTUNE_FEEDER_MAX_CPUS) {
      return input_error("CPU " + std::to_string(cpu) + " beyond the scheduler's limit");
    }
    c.mask[cpu / 64] |= 1ULL << (cpu % 64);
  }
  return c;
}
#endif

Status live_scx_attach(const Sysroot &root, const FeederState &s, bool update) {
#ifdef MLTUNE_HAVE_SCX
  auto c = scx_cfg(root, s);
  if (!c) {
    return c.error();
  }
  char err[256] = "";
  mltune_feeder_cfg old{};
  if (update && mltune_scx_read_cfg(k_pin_dir, &old, err, sizeof(err)) == 0) {
    c->gen = old.gen + 1;
  }
  int ret = update ? mltune_scx_update(k_pin_dir, &*c, err, sizeof(err))
                   : mltune_scx_attach(k_pin_dir, &*c, err, sizeof(err));
  if (ret) {
    return failure(err, -ret);
  }
  return {};
#else
  (void)root;
  (void)s;
  (void)update;
  return failure("this mltunectl was built without the sched_ext scheduler");
#endif
}

void live_scx_detach() {
#ifdef MLTUNE_HAVE_SCX
  char err[256];
  (void)mltune_scx_detach(k_pin_dir, err, sizeof(err));
#endif
}

// Used only when the sched_ext scheduler is built (MLTUNE_HAVE_SCX).
[[maybe_unused]] std::string exit_kind_name(int k) {
  switch (k) {
  case 1: return "done";
  case 64: return "unregistered";
  case 65: return "unregistered from BPF";
  case 66: return "unregistered from the kernel";
  case 67: return "disabled by SysRq-S";
  case 1024: return "runtime error";
  case 1025: return "scheduler error";
  case 1026: return "watchdog stall";
  default: return "exit kind " + std::to_string(k);
  }
}

[[maybe_unused]] std::string read_scx_state() {
  std::string v;
  if (FILE *f = std::fopen("/sys/kernel/sched_ext/state", "re")) {
    char buf[64] = "";
    if (std::fgets(buf, sizeof(buf), f) != nullptr) {
      v = std::string(trim(buf));
    }
    std::fclose(f);
  }
  return v;
}

std::string live_scx_exit_reason() {
#ifdef MLTUNE_HAVE_SCX
  mltune_feeder_uei u{};
  char err[256] = "";
  // The kernel calls ops.exit while the state reads "disabling": wait for the
  // exit info (up to 3 s) rather than report an ejection without its reason.
  for (int i = 0; i < 150; ++i) {
    const bool disabled = read_scx_state() == "disabled";
    if (mltune_scx_read_uei(k_pin_dir, &u, err, sizeof(err)) != 0) {
      return std::string("exit reason unavailable (") + err + ")";
    }
    if (u.kind != 0 || disabled) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (u.kind == 0) {
    return "scheduler no longer active (no exit info)";
  }
  std::string r = exit_kind_name(u.kind);
  if (u.reason[0] != '\0') {
    r += ": " + std::string(u.reason, strnlen(u.reason, sizeof(u.reason)));
  }
  if (u.msg[0] != '\0') {
    r += " (" + std::string(u.msg, strnlen(u.msg, sizeof(u.msg))) + ")";
  }
  return r;
#else
  return "unknown";
#endif
}

bool scx_is_ours(const Sysroot &root) {
  auto st = root.read_value(std::string(k_scx_dir) + "/state");
  auto ops = root.read_value(std::string(k_scx_dir) + "/root/ops");
  return st && *st == "enabled" && ops && *ops == k_scx_name;
}

void live_start_watcher() {
  pid_t pid = ::fork();
  if (pid != 0) {
    return;
  }
  ::setsid();
  pid_t pid2 = ::fork(); // detach completely: reparented to init
  if (pid2 != 0) {
    ::_exit(0);
  }
  // No inherited descriptor may stay open: a caller reading our output
  // (sh's $(...)) waits for EOF on every copy of its pipe.
  int fd = ::open("/dev/null", O_RDWR);
  if (fd >= 0) {
    ::dup2(fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (fd > 2) {
      ::close(fd);
    }
  }
  for (int i = 3; i < 1024; ++i) {
    (void)::close(i);
  }
  ::execl("/proc/self/exe", "mltunectl", "feeder", "watch", static_cast<char *>(nullptr));
  ::_exit(127);
}

bool live_scx_stats(FeederScxStats &out) {
#ifdef MLTUNE_HAVE_SCX
  mltune_feeder_stats s{};
  char err[256];
  if (mltune_scx_read_stats(k_pin_dir, &s, err, sizeof(err)) == 0) {
    out = {s.foreign,    s.stray,       s.forced,     s.preempted, s.feeder_enq,
           s.normal_enq, s.kthread_enq, s.rt_foreign, s.dl_foreign};
    return true;
  }
#else
  (void)out;
#endif
  return false;
}

std::vector<FeederIntruder> live_scx_intruders() {
  std::vector<FeederIntruder> out;
#ifdef MLTUNE_HAVE_SCX
  std::vector<__u32> tids(MLTUNE_FEEDER_MAX_INTRUDERS);
  std::vector<mltune_feeder_intruder> recs(MLTUNE_FEEDER_MAX_INTRUDERS);
  char err[256];
  const int n = mltune_scx_read_intruders(k_pin_dir, tids.data(), recs.data(), tids.size(), err, sizeof(err));
  for (int i = 0; i < n; ++i) {
    const auto &r = recs[static_cast<size_t>(i)];
    out.push_back({static_cast<int>(tids[static_cast<size_t>(i)]), static_cast<int>(r.cpu), static_cast<int>(r.policy),
                   std::string(r.comm, ::strnlen(r.comm, sizeof(r.comm)))});
  }
#endif
  return out;
}

void live_scx_forget([[maybe_unused]] int tid) {
#ifdef MLTUNE_HAVE_SCX
  char err[256];
  (void)mltune_scx_forget_intruder(k_pin_dir, static_cast<__u32>(tid), err, sizeof(err));
#endif
}

class LiveFeederOs final : public FeederOs {
public:
  explicit LiveFeederOs(Sysroot root) : root_(std::move(root)), on_node_(root_.acts_on_node()) {}
  std::vector<FeederTask> kthreads() override { return on_node_ ? mltune::kthreads(root_) : std::vector<FeederTask>{}; }
  bool get_affinity(int pid, CpuSet &out) override { return mltune::get_affinity(pid, out); }
  bool set_affinity(int pid, const CpuSet &cpus) override { return mltune::set_affinity(pid, cpus); }
  Status scx_attach(const FeederState &s, bool update) override { return live_scx_attach(root_, s, update); }
  void scx_detach() override { live_scx_detach(); }
  std::string scx_exit_reason() override { return live_scx_exit_reason(); }
  bool scx_stats(FeederScxStats &out) override { return live_scx_stats(out); }
  std::vector<FeederIntruder> scx_intruders() override { return live_scx_intruders(); }
  void scx_forget(int tid) override { live_scx_forget(tid); }
  std::vector<FeederIntruder> threads(const std::string &feeder_cg) override {
    return on_node_ ? live_threads(root_, feeder_cg) : std::vector<FeederIntruder>{};
  }
  void start_watcher() override {
    if (on_node_) {
      live_start_watcher();
    }
  }
  void kmsg(const std::string &line) override { live_kmsg(line); }
  Status while_busy(const CpuSet &cpus, const std::string &cg, const std::function<Status()> &fn,
                    std::string &note) override {
    return feeder::while_busy(root_, cpus, cg, fn, note);
  }

private:
  Sysroot root_;
  bool on_node_; // root_.acts_on_node(), read once: each asks the kernel four times
};

// Runtime change of the feeder CPUs ('feeder on --cpus NEW' while on).
// sched_ext: the scheduler's map is rewritten first, in place (no reload;
// busy CPUs notice at their next tick).  cpuset: the partition is dissolved
// and made again on the new CPUs after the housekeeping moved (see
// release_housekeeping() for why it cannot simply move).  The housekeeping
// taken for the old CPUs is given back to the originals recorded at the
// first 'feeder on' and taken again for the new CPUs, so IRQs, kthreads and
// the workqueue mask follow the new set and 'feeder off' still restores
// exactly what was there before.  On failure the old CPUs are taken back and
// the error says so.
Result<FeederState> change_cpus(const Sysroot &root, FeederOs &os, const FeederState &s, const CpuSet &cpus,
                                const CpuSet &hk) {
  const bool scx = s.mechanism == "sched_ext";
  FeederState n = s;
  n.cpus = cpus;
  n.housekeeping = hk;
  if (scx) {
    if (auto st = os.scx_attach(n, true); !st) {
      return st.error(); // nothing changed
    }
  } else {
    remove_partition(root, n);
  }
  release_housekeeping(root, os, n);
  Status st = apply_housekeeping(root, os, n);
  if (st && !scx) {
    st = make_partition(root, os, n);
  }
  if (st && scx) {
    (void)contain(os, n, os.threads(n.cgroup));
  }
  if (st) {
    if (auto sv = save_state(root, n); !sv) {
      return sv.error();
    }
    return n;
  }
  // Take the old CPUs back.
  if (!scx) {
    remove_partition(root, n);
  }
  release_housekeeping(root, os, n);
  FeederState o = n;
  o.cpus = s.cpus;
  o.housekeeping = s.housekeeping;
  Status back = apply_housekeeping(root, os, o);
  if (back) {
    back = scx ? os.scx_attach(o, true) : make_partition(root, os, o);
  }
  (void)save_state(root, o);
  std::string msg =
      "changing the feeder CPUs from " + s.cpus.str() + " to " + cpus.str() + " failed: " + st.error().message;
  msg += back ? " (CPUs " + s.cpus.str() + " kept)"
              : "; taking CPUs " + s.cpus.str() + " back also failed: " + back.error().message;
  return Error{st.error().kind, msg, st.error().sys_errno};
}

} // namespace

bool feeder_scx_built() {
#ifdef MLTUNE_HAVE_SCX
  return true;
#else
  return false;
#endif
}

BootIsolation read_boot_isolation(const Sysroot &root) {
  BootIsolation b;
  if (auto v = root.read("/sys/devices/system/cpu/isolated")) {
    if (auto c = parse_cpuset(*v)) {
      b.isolated = *c;
    }
  }
  if (auto v = root.read("/sys/devices/system/cpu/nohz_full")) {
    if (auto c = parse_cpuset(*v)) {
      b.nohz_full = *c;
    }
  }
  if (auto cmdline = kernel_cmdline(root)) {
    const auto value = [&](std::string_view key) {
      const auto it = cmdline->find(key);
      return it == cmdline->end() ? std::string() : it->second;
    };
    b.isolcpus = value("isolcpus");
    b.rcu_nocbs = value("rcu_nocbs");
  }
  return b;
}

namespace {

Status check_request(const FeederRequest &req) {
  if (req.mechanism != "auto" && req.mechanism != "sched_ext" && req.mechanism != "cpuset") {
    return input_error("mechanism must be auto, sched_ext or cpuset, not '" + req.mechanism + "'");
  }
  if (req.partition != "root" && req.partition != "isolated") {
    return input_error("partition must be root or isolated, not '" + req.partition + "'");
  }
  if (req.partition == "isolated" && req.mechanism == "sched_ext") {
    return input_error("an isolated partition belongs to the cpuset mechanism, not sched_ext: ask for mechanism "
                       "cpuset (or auto)");
  }
  return {};
}

} // namespace

Result<MechanismChoice> choose_mechanism(const Sysroot &root, const BootIsolation &boot, const FeederRequest &req) {
  if (auto st = check_request(req); !st) {
    return st.error();
  }
  const std::string &want = req.mechanism;
  MechanismChoice m;
  if (!root.exists(std::string(k_scx_dir) + "/state")) {
    m.sched_ext_refused = "the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT): "
                          "/sys/kernel/sched_ext is absent";
  } else if (!feeder_scx_built()) {
    m.sched_ext_refused = "this mltunectl was built without the BPF scheduler "
                          "(clang-16, bpftool >= 7.4, libbpf >= 1.4 missing at build time)";
  } else if (boot.domain()) {
    m.sched_ext_refused = "isolcpus= domain isolation is active on CPUs " + boot.isolated.str() +
                          ": sched_ext refuses to attach (EINVAL) while scheduler domains are isolated";
  } else {
    m.sched_ext_usable = true;
  }
  if (want == "sched_ext" && !m.sched_ext_usable) {
    return input_error("sched_ext refused: " + m.sched_ext_refused);
  }
  if (boot.any()) {
    m.reasons.push_back("boot isolation present: isolated=" + boot.isolated.str() + " nohz_full=" +
                        boot.nohz_full.str() + " isolcpus=" + boot.isolcpus + " rcu_nocbs=" + boot.rcu_nocbs);
  }
  if (want == "cpuset") {
    m.mechanism = "cpuset";
    m.reasons.emplace_back("cpuset partition requested");
  } else if (req.partition == "isolated") {
    m.mechanism = "cpuset";
    m.reasons.emplace_back("isolated cpuset partition requested");
  } else if (m.sched_ext_usable) {
    m.mechanism = "sched_ext";
    m.reasons.emplace_back("sched_ext available: the feeder BPF scheduler keeps feeder CPUs for "
                           "feeder tasks (full switch)");
  } else {
    m.mechanism = "cpuset";
    m.reasons.push_back("sched_ext not used: " + m.sched_ext_refused);
    m.reasons.emplace_back("cgroup v2 cpuset root partition on the feeder CPUs");
  }
  if (m.mechanism == "cpuset" && req.partition == "isolated") {
    m.reasons.emplace_back("the partition is of type 'isolated': no load balancing among the feeder CPUs (place "
                           "one thread per CPU), no idle load balancer kicks on them; where the kernel refuses it, "
                           "a 'root' partition");
  }
  if (m.mechanism == "cpuset" && boot.domain()) {
    m.reasons.push_back("the partition is of type 'isolated' where the feeder CPUs include boot-isolated CPUs (" +
                        boot.isolated.str() +
                        "): a 'root' partition conflicts with isolcpus=; where the "
                        "kernel refuses that too and all feeder CPUs are boot-isolated, cpuset.cpus alone confines "
                        "the feeder cgroup");
  }
  return m;
}

namespace {

// feeder_check() with the lock held.
Result<bool> check_locked(const Sysroot &root, FeederOs &os) {
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  FeederState &s = *loaded;
  if (!s.active || s.mechanism != "sched_ext" || scx_is_ours(root)) {
    return false;
  }
  s.fallback = os.scx_exit_reason();
  os.scx_detach();
  s.mechanism = "cpuset";
  s.partition = "root";
  if (auto st = make_partition(root, os, s); !st) {
    s.fallback += "; cpuset fallback FAILED: " + st.error().message;
    os.kmsg("feeder: sched_ext scheduler ejected (" + s.fallback + ")");
    (void)save_state(root, s);
    return st.error();
  }
  os.kmsg("feeder: sched_ext scheduler ejected (" + s.fallback + "); cpuset partition fallback active on CPUs " +
          s.cpus.str());
  if (auto st = save_state(root, s); !st) {
    return st.error();
  }
  return true;
}

} // namespace

std::unique_ptr<FeederOs> make_live_feeder_os(const Sysroot &root) {
  return std::make_unique<LiveFeederOs>(root);
}

Result<bool> feeder_check(const Sysroot &root) {
  LiveFeederOs os(root);
  return feeder_check(root, os);
}

Result<bool> feeder_check(const Sysroot &root, FeederOs &os) {
  // No lock file: no feeder was turned on since /run was made; a check
  // (status, active) creates nothing.
  auto lock = FileLock::acquire(root, k_lock_path, FileLock::Missing::skip);
  if (!lock) {
    return lock.error();
  }
  return check_locked(root, os);
}

Result<int> feeder_contain(const Sysroot &root, FeederOs &os) {
  auto lock = FileLock::acquire(root, k_lock_path, FileLock::Missing::skip);
  if (!lock) {
    return lock.error();
  }
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  FeederState &s = *loaded;
  if (!s.active || s.mechanism != "sched_ext") {
    return 0;
  }
  const auto seen = os.scx_intruders();
  if (seen.empty()) {
    return 0;
  }
  const size_t before = s.threads.size() + s.dl_reported.size();
  const int moved = contain(os, s, seen);
  for (const auto &t : seen) {
    os.scx_forget(t.tid);
  }
  if (s.threads.size() + s.dl_reported.size() != before) {
    if (auto st = save_state(root, s); !st) {
      return st.error();
    }
  }
  return moved;
}

Status feeder_watch(const Sysroot &root, unsigned period_ms) {
  LiveFeederOs os(root);
  std::uint64_t seen = 0;
  for (;;) {
    auto s = load_state(root);
    if (!s) {
      return s.error();
    }
    if (!s->active || s->mechanism != "sched_ext") {
      return {};
    }
    auto r = feeder_check(root, os);
    if (!r || *r) {
      return r ? Status{} : Status{r.error()};
    }
    // The guard counts every real-time start on a feeder CPU: the map is
    // read only when the count moved.
    FeederScxStats st;
    if (os.scx_stats(st) && st.rt_foreign + st.dl_foreign != seen) {
      seen = st.rt_foreign + st.dl_foreign;
      (void)feeder_contain(root, os); // a failed move is retried at its next start
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
}

CpuSet quiet_cpus(const Sysroot &root) {
  const auto boot = read_boot_isolation(root);
  CpuSet out = boot.isolated | boot.nohz_full;
  if (auto s = load_state(root); s && s->active) {
    out = out | s->cpus;
  }
  if (auto v = root.read(k_kmod_feeder)) {
    if (auto c = parse_cpuset(*v)) {
      out = out | *c;
    }
  }
  return out;
}

std::vector<FeederPinnedKthread> feeder_pinned_kthreads(const Sysroot &root, const CpuSet &cpus) {
  std::vector<FeederPinnedKthread> out;
  for (const auto &t : kthreads(root)) {
    auto st = root.read("/proc/" + std::to_string(t.pid) + "/status");
    if (!st) {
      continue; // gone
    }
    std::optional<CpuSet> aff;
    for (const auto line : split_lines(*st)) {
      if (line.starts_with("Cpus_allowed_list:")) {
        if (auto c = parse_cpuset(trim(line.substr(line.find(':') + 1)))) {
          aff = *c;
        }
        break;
      }
    }
    if (!aff || !aff->intersects(cpus)) {
      continue;
    }
    if (aff->count() == 1 || (t.flags & proc::k_pf_no_setaffinity) != 0) {
      out.push_back({t.pid, t.comm, *aff});
    }
  }
  return out;
}

Result<FeederState> feeder_recorded(const Sysroot &root) {
  return load_state(root);
}

Result<FeederStatus> feeder_status(const Sysroot &root) {
  LiveFeederOs os(root);
  if (root.acts_on_node()) {
    (void)feeder_check(root, os);
  }
  FeederStatus st;
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  st.state = std::move(*state);
  st.boot = read_boot_isolation(root);
  auto ch = choose_mechanism(root, st.boot);
  if (ch) {
    st.choice = *ch;
  }
  st.scx_built = feeder_scx_built();
  if (auto v = root.read_value(std::string(k_scx_dir) + "/state")) {
    st.scx_state = *v;
  }
  if (auto v = root.read_value(std::string(k_scx_dir) + "/root/ops")) {
    st.scx_ops = *v;
  }
  st.scx_attached = scx_is_ours(root);
  if (st.scx_attached) {
    (void)os.scx_stats(st.stats);
  }
  if (auto v = root.read_value(cgroup::path(st.state.cgroup, "cpuset.cpus.partition"))) {
    st.partition = *v;
  }
  if (auto v = root.read_value(cgroup::path("/", "cpuset.cpus.isolated"))) {
    st.kernel_isolated = v->empty() ? "none" : *v;
  }
  return st;
}

Result<CpuSet> feeder_housekeeping(const Sysroot &root, const CpuSet &cpus, const CpuSet &housekeeping) {
  const CpuSet online = online_cpus(root).value_or(CpuSet{});
  if (cpus.empty()) {
    return input_error("no feeder CPUs given");
  }
  if (!online.contains(cpus)) {
    return input_error("feeder CPUs " + cpus.str() + " are not all online (online: " + online.str() + ")");
  }
  CpuSet hk = (housekeeping & online) - cpus;
  if (hk.empty()) {
    hk = online - cpus;
  }
  if (hk.empty()) {
    return input_error("feeder CPUs " + cpus.str() + " would leave no housekeeping CPU");
  }
  // The boot CPU, as `boot` refuses to isolate it.
  if (!online.empty() && cpus.test(online.first())) {
    return input_error("feeder CPUs " + cpus.str() + " include CPU " + std::to_string(online.first()) +
                       ", which keeps timers and interrupts that cannot move; choose others");
  }
  return hk;
}

namespace {

// Feeder off -> on: cgroup, housekeeping, then the scheduler or the
// partition, then the state file; a failing step undoes the ones before.
Result<FeederState> switch_on(const Sysroot &root, FeederOs &os, const CpuSet &cpus, const CpuSet &hk,
                              const std::string &mechanism, const std::string &partition) {
  FeederState s;
  s.cpus = cpus;
  s.housekeeping = hk;
  s.mechanism = mechanism;
  s.partition = mechanism == "cpuset" ? partition : "";
  s.active = true;
  if (auto st = cgroup::make(root, s.cgroup); !st) {
    return st.error();
  }
  auto undo = [&](const Error &e) -> Error {
    remove_partition(root, s);
    release_housekeeping(root, os, s);
    return e;
  };
  if (auto st = apply_housekeeping(root, os, s); !st) {
    return undo(st.error());
  }
  if (s.mechanism == "sched_ext") {
    if (auto st = os.scx_attach(s, false); !st) {
      return undo(st.error());
    }
    (void)contain(os, s, os.threads(s.cgroup));
  } else if (auto st = make_partition(root, os, s); !st) {
    return undo(st.error());
  }
  if (auto st = save_state(root, s); !st) {
    if (s.mechanism == "sched_ext") {
      os.scx_detach();
    }
    return undo(st.error());
  }
  if (s.mechanism == "sched_ext") {
    os.start_watcher();
  }
  return s;
}

// On a node (not a file tree), feeder cores move the node's tasks between
// its cgroups and set their affinities: in container mode that takes the
// node's PID, network and cgroup namespaces (a task outside this process's
// cgroup namespace cannot be moved: ENOENT).
Status feeder_reaches(const Sysroot &root) {
  return root.is_node() ? root.require_namespaces("feeder", {"pid", "net", "cgroup"}) : Status{};
}

} // namespace

Result<FeederState> feeder_on(const Sysroot &root, const CpuSet &cpus, const CpuSet &housekeeping,
                              const FeederRequest &want) {
  if (auto st = feeder_reaches(root); !st) {
    return st.error();
  }
  LiveFeederOs os(root);
  return feeder_on(root, os, cpus, housekeeping, want);
}

Result<FeederState> feeder_on(const Sysroot &root, FeederOs &os, const CpuSet &cpus, const CpuSet &housekeeping,
                              const FeederRequest &want) {
  if (auto st = check_request(want); !st) {
    return st.error();
  }
  auto hk = feeder_housekeeping(root, cpus, housekeeping);
  if (!hk) {
    return hk.error();
  }
  auto lock = FileLock::acquire(root, k_lock_path);
  if (!lock) {
    return lock.error();
  }
  auto loaded = load_state(root);
  if (loaded && loaded->active && loaded->mechanism == "sched_ext" && root.acts_on_node()) {
    (void)check_locked(root, os); // an ejected scheduler: the cpuset fallback first
    loaded = load_state(root);
  }
  if (!loaded) {
    return loaded.error();
  }
  const FeederState &s = *loaded;
  if (s.active) {
    if (want.mechanism != "auto" && want.mechanism != s.mechanism) {
      return input_error("feeder is on with " + s.mechanism + "; run 'mltunectl feeder off' before asking for " +
                         want.mechanism);
    }
    // Empty with sched_ext, and in a state from before partition types
    // were recorded (a root one was made then).
    const std::string had = s.partition.empty() ? "root" : s.partition;
    if (want.partition != had) {
      const std::string on = s.mechanism == "cpuset" ? "the " + had + " partition" : s.mechanism;
      return input_error("feeder is on with " + on + "; run 'mltunectl feeder off' before asking for partition type " +
                         want.partition);
    }
    if (s.cpus == cpus) {
      return s;
    }
    return change_cpus(root, os, s, cpus, *hk);
  }
  auto ch = choose_mechanism(root, read_boot_isolation(root), want);
  if (!ch) {
    return ch.error();
  }
  return switch_on(root, os, cpus, *hk, ch->mechanism, want.partition);
}

Status feeder_off(const Sysroot &root) {
  if (auto st = feeder_reaches(root); !st) {
    return st;
  }
  LiveFeederOs os(root);
  return feeder_off(root, os);
}

Status feeder_off(const Sysroot &root, FeederOs &os) {
  auto lock = FileLock::acquire(root, k_lock_path, FileLock::Missing::skip);
  if (!lock) {
    return lock.error();
  }
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  FeederState &s = *loaded;
  if (!s.active) {
    lock->remove_on_release();
    return {};
  }
  os.scx_detach();
  remove_partition(root, s);
  release_housekeeping(root, os, s);
  // Feeder tasks still running stay in the cgroup; rmdir fails then (EBUSY).
  (void)cgroup::remove(root, s.cgroup);
  if (s.cpuset_enabled_by_us) {
    (void)root.write_value(cgroup::path("/", "cgroup.subtree_control"), "-cpuset");
  }
  lock->remove_on_release();
  return k_state.remove(root);
}

Status feeder_inject_error(const Sysroot &root) {
#ifdef MLTUNE_HAVE_SCX
  (void)root;
  mltune_feeder_cfg c{};
  char err[256] = "";
  if (mltune_scx_read_cfg(k_pin_dir, &c, err, sizeof(err)) != 0) {
    return failure(err);
  }
  c.inject_error = 1;
  if (mltune_scx_update(k_pin_dir, &c, err, sizeof(err)) != 0) {
    return failure(err);
  }
  return {};
#else
  (void)root;
  return failure("built without the sched_ext scheduler");
#endif
}

Status feeder_exec(const Sysroot &root, const std::vector<std::string> &argv) {
  if (argv.empty()) {
    return input_error("no command given");
  }
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  const FeederState &s = *loaded;
  if (!s.active) {
    return input_error("feeder is off: run 'mltunectl feeder on' first");
  }
  if (auto st = root.write_value(cgroup::path(s.cgroup, "cgroup.procs"), std::to_string(::getpid())); !st) {
    return st.error();
  }
  // NUMA-local memory: prefer the nodes of the feeder CPUs.
  std::vector<int> nodes;
  for (int n = 0; n < 64; ++n) {
    auto v = root.read("/sys/devices/system/node/node" + std::to_string(n) + "/cpulist");
    if (!v) {
      continue;
    }
    if (auto c = parse_cpuset(*v); c && c->intersects(s.cpus)) {
      nodes.push_back(n);
    }
  }
  if (!nodes.empty()) {
    (void)detail::prefer_memory(nodes); // a preference: the command runs either way
  }
  return detail::exec_argv(argv);
}

} // namespace mltune
