// GPU-feeder cores at runtime: see mltune/feeder.hpp and Documentation/feeder.rst.
// Affinity, the BPF scheduler and the watcher process go through a FeederOs
// (LiveFeederOs here), file writes through the Sysroot.
#include "mltune/feeder.hpp"

#include "base/cgroup.hpp"
#include "base/file_lock.hpp"
#include "base/proc.hpp"
#include "base/process.hpp"
#include "base/state_file.hpp"
#include "feeder/internal.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#ifdef MLTUNE_HAVE_SCX
#include "mltune_scx.h"
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <unistd.h>

namespace mltune {

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

// Running-kernel state: not fsynced (a power failure resets what it records).
constexpr StateFile<FeederState> k_state(k_feeder_state, 1, false);

Result<FeederState> feeder::load_state(const Sysroot &root) {
  return k_state.load_or(root);
}

Status feeder::save_state(const Sysroot &root, const FeederState &s) {
  return k_state.save(root, s);
}

using feeder::apply_housekeeping;
using feeder::contain;
using feeder::k_kmod_feeder;
using feeder::k_lock_path;
using feeder::k_scx_dir;
using feeder::kthreads;
using feeder::load_state;
using feeder::make_partition;
using feeder::release_housekeeping;
using feeder::remove_partition;
using feeder::save_state;
using feeder::scx_is_ours;

namespace {

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

Result<bool> feeder_check(const Sysroot &root) {
  auto live = make_live_feeder_os(root);
  FeederOs &os = *live;
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
  auto live = make_live_feeder_os(root);
  FeederOs &os = *live;
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
  auto live = make_live_feeder_os(root);
  FeederOs &os = *live;
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
  auto live = make_live_feeder_os(root);
  FeederOs &os = *live;
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
  auto live = make_live_feeder_os(root);
  FeederOs &os = *live;
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
  if (mltune_scx_read_cfg(feeder::k_pin_dir, &c, err, sizeof(err)) != 0) {
    return failure(err);
  }
  c.inject_error = 1;
  if (mltune_scx_update(feeder::k_pin_dir, &c, err, sizeof(err)) != 0) {
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
