// Applying thread rules: CPU placement, admission per root domain, one-shot
// apply, reset and the state file (the live SchedSystem: live_system.cpp).
#include "mltune/sched.hpp"

#include "base/cgroup.hpp"
#include "base/file_lock.hpp"
#include "base/proc.hpp"
#include "mltune/cpu_plan.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"
#include "mltune/topology.hpp"
#include "sched/apply_phases.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

namespace mltune {

namespace {

using detail::Ledger;
using detail::State;
using detail::StateEntry;
using detail::ThreadPlan;

CpuSet cpus_or_empty(std::string_view s) {
  auto r = parse_cpuset(s);
  return r ? *r : CpuSet{};
}

int64_t mono_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

constexpr std::string_view k_lock_path = "/run/mltune/sched.lock";

using detail::load_state;
using detail::save_state;

// ---- comparison and domains ------------------------------------------------

bool same_attr(const SchedAttr &cur, const SchedAttr &want) {
  if (cur.policy != want.policy) {
    return false;
  }
  const uint64_t mask = k_sched_flag_reset_on_fork | k_sched_flag_dl_overrun;
  if ((cur.flags & mask) != (want.flags & mask)) {
    return false;
  }
  switch (want.policy) {
  case SchedPolicy::deadline:
    return cur.runtime == want.runtime && cur.deadline == want.deadline && cur.period == want.period;
  case SchedPolicy::fifo:
  case SchedPolicy::rr: return cur.priority == want.priority;
  default: return cur.nice == want.nice;
  }
}

std::string fmt3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

std::string partition_name(std::string_view spec, const std::string &cpus) {
  if (spec == "feeder" || spec == "housekeeping") {
    return "/mltune." + std::string(spec);
  }
  std::string n = "/mltune.cpus-" + cpus;
  std::ranges::replace(n, ',', '_');
  return n;
}

void find_partitions(const Sysroot &root, const std::string &cg, int depth,
                     std::vector<std::pair<std::string, CpuSet>> &out) {
  if (depth > 3) {
    return;
  }
  for (const auto &name : root.list_dir(cgroup::path(cg))) {
    const std::string child = (cg == "/" ? "" : cg) + "/" + name;
    if (!root.is_dir(cgroup::path(child))) {
      continue;
    }
    if (auto prs = root.read(cgroup::path(child, "cpuset.cpus.partition")); prs && trim(*prs) == "root") {
      if (auto eff = root.read_value(cgroup::path(child, "cpuset.cpus.effective"))) {
        if (auto cpus = parse_cpuset(*eff); cpus && !cpus->empty()) {
          out.emplace_back(child, *cpus);
        }
      }
    }
    find_partitions(root, child, depth + 1, out);
  }
}

Ledger build_ledger(const SchedSystem &sys, bool count_used) {
  const Sysroot &root = sys.root();
  Ledger l;
  if (auto v = root.read_value("/proc/sys/kernel/sched_rt_runtime_us")) {
    l.rt_runtime = parse_int<long long>(*v).value_or(950000);
  }
  if (auto v = root.read_value("/proc/sys/kernel/sched_rt_period_us")) {
    l.rt_period = std::max(1LL, parse_int<long long>(*v).value_or(1000000));
  }
  // Since 6.12 every CPU's fair server is a DEADLINE entity (50 ms / 1 s by
  // default) whose bandwidth counts against the root domain.
  if (auto kv = kernel_version(root); kv && (kv->major > 6 || (kv->major == 6 && kv->minor >= 12))) {
    l.reserved_per_cpu = 0.05;
  }
  CpuSet dflt;
  if (auto v = root.read_value("/sys/devices/system/cpu/online")) {
    dflt = cpus_or_empty(*v);
  }
  // Domain-isolated CPUs (isolcpus=) belong to no root domain we can use.
  if (auto v = root.read_value("/sys/devices/system/cpu/isolated")) {
    dflt -= cpus_or_empty(*v);
  }
  std::vector<std::pair<std::string, CpuSet>> parts;
  find_partitions(root, "/", 1, parts);
  for (const auto &[cg, cpus] : parts) {
    dflt -= cpus;
  }
  l.domains.push_back(l.make("default", dflt));
  for (const auto &[cg, cpus] : parts) {
    l.domains.push_back(l.make(cg, cpus));
  }
  if (count_used) {
    for (const auto &n : sys.thread_names()) {
      auto a = sys.get(n.tid);
      if (!a || a->policy != SchedPolicy::deadline) {
        continue;
      }
      auto t = sys.thread(n.pid, n.tid);
      l.of_cgroup(t ? t->cgroup : "/").used += a->bandwidth();
    }
  }
  return l;
}

// ---- planning and applying -------------------------------------------------

SchedAction action_of(const ThreadPlan &p, std::string result, std::string message) {
  SchedAction a;
  a.pid = p.t.pid;
  a.tid = p.t.tid;
  a.comm = p.t.comm;
  a.rule = p.rule != nullptr ? p.rule->name : "";
  a.before = p.before;
  a.after = p.want;
  a.cgroup = p.partition;
  a.result = std::move(result);
  a.message = std::move(message);
  return a;
}

void record(State &st, const ThreadPlan &p, const SchedAttr &after, const std::string &cg) {
  auto it = std::ranges::find_if(st.threads,
                                 [&](const StateEntry &e) { return e.tid == p.t.tid && e.starttime == p.t.starttime; });
  if (it == st.threads.end()) {
    // A reused TID's stale entry goes.
    std::erase_if(st.threads, [&](const StateEntry &e) { return e.tid == p.t.tid; });
    StateEntry e;
    e.pid = p.t.pid;
    e.tid = p.t.tid;
    e.starttime = p.t.starttime;
    e.before = p.before;
    e.cgroup_before = p.t.cgroup;
    st.threads.push_back(e);
    it = std::prev(st.threads.end());
  }
  it->comm = p.t.comm;
  it->rule = p.rule->name;
  it->after = after;
  if (!cg.empty()) {
    it->cgroup = cg;
  }
}

bool gone(const Error &e) {
  return e.sys_errno == ESRCH || e.sys_errno == ENOENT;
}

// Records the watcher has not written to the state file yet.
struct PendingState {
  struct Rec {
    ThreadPlan plan;
    SchedAttr after;
    std::string cgroup;
  };
  std::vector<Rec> records;
  std::vector<std::pair<std::string, std::string>> partitions;
};

} // namespace

// The watcher's state between events (one per watcher, sched_watch_cache()):
// the cached admission ledger, built by the watcher's initial scan and
// refreshed while it is idle (sched_ledger_refresh), with what this process
// applies charged to it incrementally so no event has to rescan every thread;
// and the records not written to the state file yet (sched_state_flush).
struct SchedWatchCache {
  PendingState pending;
  Ledger ledger;
  int64_t at = -1; // mono_ms() of the ledger, -1: none
};

namespace detail {

bool deferred(const SchedOptions &opt) {
  return opt.watch && opt.defer_state;
}

Ledger admission_ledger(const SchedSystem &sys, const SchedOptions &opt) {
  // Without a watcher's cache there is nothing to reuse: a fresh scan.
  if (!opt.watch || opt.ledger_ttl_ms <= 0) {
    return build_ledger(sys, true);
  }
  SchedWatchCache &wc = *opt.watch;
  const int64_t now = mono_ms();
  if (wc.at >= 0 && now - wc.at < opt.ledger_ttl_ms) {
    return wc.ledger;
  }
  wc.ledger = build_ledger(sys, true);
  wc.at = now;
  return wc.ledger;
}

void charge_cached_ledger(const SchedOptions &opt, const std::string &domain, double bw) {
  if (!opt.watch || opt.ledger_ttl_ms <= 0 || opt.watch->at < 0) {
    return;
  }
  if (RootDomain *d = opt.watch->ledger.find(domain)) {
    d->used += bw;
  } else {
    opt.watch->at = -1; // a new partition: rescan next time
  }
}

void assign_domains(Ledger &ledger, std::vector<ThreadPlan> &plans) {
  for (auto &p : plans) {
    if (p.want.policy != SchedPolicy::deadline) {
      continue;
    }
    if (!p.partition.empty()) {
      if (ledger.find(p.partition) == nullptr) {
        const CpuSet cpus = cpus_or_empty(p.cpus);
        ledger.domains.push_back(ledger.make(p.partition, cpus));
        // CPUs of the new partition leave the default domain.
        const double used = ledger.domains[0].used;
        ledger.domains[0] = ledger.make("default", ledger.domains[0].cpus - cpus);
        ledger.domains[0].used = used;
      }
      p.domain = p.partition;
    } else {
      p.domain = ledger.of_cgroup(p.t.cgroup).name;
    }
    RootDomain &d = *ledger.find(p.domain);
    // A thread that is DEADLINE already in this domain gives its old share back.
    const bool same_domain = ledger.of_cgroup(p.t.cgroup).name == p.domain;
    d.requested += p.want.bandwidth() - (same_domain ? p.before.bandwidth() : 0.0);
  }
}

void refuse_overbooked(Ledger &ledger, std::vector<ThreadPlan> &plans, SchedReport &rep) {
  for (auto &d : ledger.domains) {
    if (d.requested > 0 || d.used > 0) {
      rep.domains.push_back(d);
    }
    if (d.fits()) {
      continue;
    }
    std::string who;
    for (auto &p : plans) {
      if (p.want.policy == SchedPolicy::deadline && p.domain == d.name) {
        p.refused = true;
        who += (who.empty() ? "" : ", ") + std::to_string(p.t.tid) + " \"" + p.t.comm + "\"";
      }
    }
    rep.notes.push_back("admission refused: " + d.explain() + "; threads " + who);
  }
}

void ApplyRun::emit(SchedAction a) {
  if (opt.log) {
    opt.log(a);
  }
  rep.actions.push_back(std::move(a));
}

bool settle_without_change(ApplyRun &run, ThreadPlan &p, ThreadApply &ta) {
  ta.want = p.want;
  if (p.refused) {
    const RootDomain *d = run.ledger.find(p.domain);
    ta.why = "admission: " + (d != nullptr ? d->explain() : std::string("no room"));
    if (!p.rule->fallback) {
      run.emit(action_of(p, "refused", ta.why + "; no fallback configured, thread left as it is"));
      return true;
    }
    ta.want = *p.rule->fallback;
    p.partition.clear();
  }
  ta.in_place = p.partition.empty() || p.t.cgroup == p.partition;
  if (same_attr(p.before, ta.want) && ta.in_place) {
    ThreadPlan q = p;
    q.want = ta.want;
    run.emit(
        action_of(q, p.refused ? "fallback" : "unchanged", p.refused ? ta.why + "; fallback already in effect" : ""));
    return true;
  }
  if (run.opt.dry_run) {
    ThreadPlan q = p;
    q.want = ta.want;
    run.emit(action_of(q, "dry-run", p.refused ? ta.why + "; would apply fallback " + ta.want.describe() : ""));
    return true;
  }
  return false;
}

void ensure_partition_once(ApplyRun &run, const ThreadPlan &p) {
  if (run.partitions_ok.contains(p.partition) || run.partitions_bad.contains(p.partition)) {
    return;
  }
  const Sysroot &root = run.sys.root();
  const bool existed = root.is_dir(cgroup::path(p.partition));
  auto prs = run.sys.ensure_partition(p.partition, p.cpus);
  if (prs && *prs == "root") {
    run.partitions_ok.insert(p.partition);
    run.rep.notes.push_back("partition " + cgroup::path(p.partition) + ": cpus " + p.cpus +
                            ", cpuset.cpus.partition reads \"" + *prs + "\"");
    if (!existed && std::ranges::none_of(run.st.partitions, [&](const auto &x) { return x.first == p.partition; })) {
      run.st.partitions.emplace_back(p.partition, p.cpus);
      if (deferred(run.opt)) {
        run.opt.watch->pending.partitions.emplace_back(p.partition, p.cpus);
      }
    }
    return;
  }
  run.partitions_bad[p.partition] = prs ? "cpuset.cpus.partition reads \"" + *prs + "\"" : prs.error().message;
  run.rep.notes.push_back("partition " + cgroup::path(p.partition) + " unusable: " + run.partitions_bad[p.partition]);
  if (!existed) {
    (void)run.sys.remove_partition(p.partition);
  }
}

bool place_thread(ApplyRun &run, ThreadPlan &p, ThreadApply &ta) {
  if (p.partition.empty() || ta.in_place) {
    return false;
  }
  ensure_partition_once(run, p);
  if (run.partitions_bad.contains(p.partition)) {
    ta.why = "placement on CPUs " + p.cpus + " failed: " + run.partitions_bad[p.partition];
    if (!p.rule->fallback) {
      run.emit(action_of(p, "failed", ta.why));
      return true;
    }
    ta.want = *p.rule->fallback;
    p.refused = true;
    return false;
  }
  auto mv = run.sys.move_thread(p.t.tid, p.partition);
  if (!mv) {
    run.emit(action_of(p, gone(mv.error()) ? "gone" : "failed", mv.error().message));
    return true;
  }
  ta.moved_to = p.partition;
  return false;
}

Status set_with_retries(ApplyRun &run, ThreadPlan &p, ThreadApply &ta) {
  auto s = run.sys.set(p.t.tid, ta.want);
  // sched_setattr(DEADLINE) refuses (EPERM) a task whose affinity does not
  // cover the root domain of the CPU it is on.  A thread moved into a root
  // partition while asleep (a proxy thread blocked in poll()) stays on its
  // old CPU, in the old domain, until it wakes; one moved back out stays in
  // the partition's the same way.  So each EPERM says the thread sits in the
  // other domain: set it from the cgroup of that domain, and once the policy
  // is set outside, move it in (the cpuset carries its bandwidth over).
  bool inside = true;
  for (int tries = 0; tries < 8 && !s && s.error().sys_errno == EPERM && !ta.moved_to.empty(); ++tries) {
    if (!run.sys.move_thread(p.t.tid, inside ? p.t.cgroup : ta.moved_to)) {
      break;
    }
    inside = !inside;
    s = run.sys.set(p.t.tid, ta.want);
  }
  if (!inside) {
    if (auto in = run.sys.move_thread(p.t.tid, ta.moved_to); !in) {
      if (s) {
        (void)run.sys.set(p.t.tid, p.before); // not in the partition: not the new policy either
      }
      s = failure("moving it into " + ta.moved_to + ": " + in.error().message, in.error().sys_errno);
    }
  }
  if (!s && s.error().sys_errno == EBUSY && ta.want.policy == SchedPolicy::deadline && p.rule->fallback) {
    ta.why = "the kernel refused the bandwidth (EBUSY) for " + ta.want.describe();
    ta.want = *p.rule->fallback;
    p.refused = true;
    s = run.sys.set(p.t.tid, ta.want);
  }
  return s;
}

void finish_thread(ApplyRun &run, ThreadPlan &p, const ThreadApply &ta, const Status &s) {
  ThreadPlan q = p;
  q.want = ta.want;
  if (!s) {
    if (!ta.moved_to.empty()) {
      (void)run.sys.move_thread(p.t.tid, p.t.cgroup); // put it back
    }
    run.emit(action_of(q, s.error().sys_errno == ESRCH ? "gone" : "failed", s.error().message));
    return;
  }
  // Logged as soon as sched_setattr has returned (the watcher's latency
  // stamp), the bookkeeping follows.
  charge_cached_ledger(run.opt, p.domain.empty() ? "default" : p.domain, ta.want.bandwidth() - p.before.bandwidth());
  ThreadPlan r = q;
  r.partition = ta.moved_to.empty() ? (ta.in_place ? p.partition : "") : ta.moved_to;
  run.emit(action_of(r, p.refused ? "fallback" : "applied", ta.why));
  if (deferred(run.opt)) {
    run.opt.watch->pending.records.push_back({q, ta.want, ta.moved_to});
    return;
  }
  record(run.st, q, ta.want, ta.moved_to);
  if (auto ss = save_state(run.sys.root(), run.st); !ss) {
    run.rep.notes.push_back("cannot save state: " + ss.error().message);
  }
}

void apply_plan(ApplyRun &run, ThreadPlan &p) {
  ThreadApply ta;
  if (settle_without_change(run, p, ta)) {
    return;
  }
  // The thread's attributes and cgroup are recorded before anything of it
  // changes, so that `sched reset` (and `off`) can restore it even when
  // this process is killed between the change and the record.  (The
  // watcher records in batches; it has no such window to close.)
  if (!detail::deferred(run.opt)) {
    record(run.st, p, p.before, "");
    if (auto ss = save_state(run.sys.root(), run.st); !ss) {
      run.rep.notes.push_back("cannot save state: " + ss.error().message);
    }
  }
  if (place_thread(run, p, ta)) {
    return;
  }
  const Status s = set_with_retries(run, p, ta);
  finish_thread(run, p, ta, s);
}

} // namespace detail

namespace {

Result<SchedReport> run_plans(SchedSystem &sys, std::vector<ThreadPlan> plans, const SchedOptions &opt) {
  SchedReport rep;
  // Admission for the whole request, per root domain, before touching
  // anything; only DEADLINE asks for it (the ledger reads every thread).
  Ledger ledger;
  if (std::ranges::any_of(plans, [](const ThreadPlan &p) { return p.want.policy == SchedPolicy::deadline; })) {
    ledger = detail::admission_ledger(sys, opt);
    detail::assign_domains(ledger, plans);
    detail::refuse_overbooked(ledger, plans, rep);
  }
  // Deferred (watcher): the state file is written by sched_state_flush, off
  // the event path; what this run did is queued for it.
  State st;
  if (!detail::deferred(opt)) {
    auto loaded = load_state(sys.root());
    if (!loaded) {
      return loaded.error();
    }
    st = std::move(*loaded);
  }
  detail::ApplyRun run{sys, opt, ledger, rep, std::move(st), {}, {}};
  for (auto &p : plans) {
    detail::apply_plan(run, p);
  }
  return rep;
}

// The threads `tids` of `pid` that still have a name, appended to `out`.
void add_named_threads(const SchedSystem &sys, int pid, const std::vector<int> &tids, std::vector<ThreadInfo> &out) {
  for (int tid : tids) {
    if (auto c = sys.comm(pid, tid)) {
      ThreadInfo t;
      t.pid = pid;
      t.tid = tid;
      t.comm = std::move(*c);
      out.push_back(std::move(t));
    }
  }
}

// `n`: the thread with its name (what a scan reads first).
Result<ThreadPlan> plan_thread(SchedSystem &sys, std::span<const SchedRule> rules, const ThreadInfo &n,
                               const SchedOptions &opt, std::map<std::string, std::string> &placements) {
  if (!sched_name_matches(rules, n.comm)) {
    return failure("no rule");
  }
  const int tid = n.tid;
  auto t = sys.thread(n.pid, tid);
  if (!t) {
    return t.error();
  }
  const SchedRule *r = sched_match(rules, *t);
  if (r == nullptr) {
    return failure("no rule");
  }
  auto cur = sys.get(tid);
  if (!cur) {
    return cur.error();
  }
  ThreadPlan p;
  p.t = std::move(*t);
  p.rule = r;
  p.before = *cur;
  p.want = r->attr;
  if (!r->cpus.empty() && r->attr.policy == SchedPolicy::deadline) {
    auto it = placements.find(r->cpus);
    if (it == placements.end()) {
      auto cpus = resolve_placement(sys.root(), r->cpus, opt.feeder);
      if (!cpus) {
        return cpus.error();
      }
      it = placements.emplace(r->cpus, *cpus).first;
    }
    p.cpus = it->second;
    p.partition = partition_name(r->cpus, p.cpus);
  }
  return p;
}

} // namespace

std::string RootDomain::explain() const {
  std::string s = "root domain " + name + " (CPUs " + cpus.str() + "): ";
  if (limit < 0) {
    return s + "admission control disabled (sched_rt_runtime_us = -1)";
  }
  s += "limit " + std::to_string(cpus.count()) + " CPUs x rt_runtime/rt_period = " + fmt3(limit);
  if (reserved > 0) {
    s += ", kernel fair servers " + fmt3(reserved);
  }
  s += ", DEADLINE in use " + fmt3(used) + ", requested " + fmt3(requested) + " -> total " +
       fmt3(used + requested + reserved) + (fits() ? " fits" : " exceeds the limit");
  return s;
}

Result<std::string> resolve_placement(const Sysroot &root, std::string_view spec, std::string_view feeder) {
  const bool role = spec.starts_with("feeder") || spec == "housekeeping" || spec == "workers";
  if (!role) {
    auto l = parse_cpuset(spec, "sched rule cpus");
    if (!l) {
      return l.error();
    }
    return l->str();
  }
  std::string f(feeder);
  if (f.empty()) {
    if (auto v = root.read_value("/sys/kernel/mltune/feeder/cpus"); v && !v->empty()) {
      f = *v;
    }
  }
  if (!f.empty() && !spec.starts_with("feeder:")) {
    auto fl = parse_cpuset(f, "feeder cores");
    if (!fl) {
      return fl.error();
    }
    if (spec == "feeder") {
      return fl->str();
    }
    auto online = root.read_value("/sys/devices/system/cpu/online");
    auto ol = parse_cpuset(online ? *online : "", "/sys/devices/system/cpu/online");
    if (!ol) {
      return ol.error();
    }
    const CpuSet rest = *ol - *fl;
    if (rest.empty()) {
      return input_error("no " + std::string(spec) + " CPUs left outside the feeder cores " + fl->str());
    }
    return rest.str();
  }
  auto topo = discover_topology(root, {.pcie_state = false});
  if (!topo) {
    return input_error("placement '" + std::string(spec) + "': " + topo.error().message);
  }
  auto plan = make_cpu_plan(*topo);
  if (!plan) {
    return input_error("placement '" + std::string(spec) + "': " + plan.error().message);
  }
  if (plan->empty()) {
    return input_error("placement '" + std::string(spec) +
                       "': no feeder cores on this node (no GPU found); pass --feeder CPULIST or write "
                       "/sys/kernel/mltune/feeder/cpus");
  }
  auto set = resolve_cpuset(spec, *plan);
  if (!set) {
    return set.error();
  }
  if (set->empty()) {
    return input_error("placement '" + std::string(spec) + "' is empty on this node");
  }
  return set->str();
}

std::vector<RootDomain> sched_domains(const SchedSystem &sys) {
  return build_ledger(sys, true).domains;
}

std::shared_ptr<SchedWatchCache> sched_watch_cache() {
  return std::make_shared<SchedWatchCache>();
}

void sched_ledger_refresh(SchedWatchCache &wc, const SchedSystem &sys) {
  wc.ledger = build_ledger(sys, true);
  wc.at = mono_ms();
}

Status sched_state_flush(SchedWatchCache &wc, const Sysroot &root) {
  if (wc.pending.records.empty() && wc.pending.partitions.empty()) {
    return {};
  }
  auto lock = FileLock::acquire(root, k_lock_path);
  if (!lock) {
    return lock.error();
  }
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  State &st = *loaded;
  for (const auto &[cg, cpus] : wc.pending.partitions) {
    if (std::ranges::none_of(st.partitions, [&](const auto &x) { return x.first == cg; })) {
      st.partitions.emplace_back(cg, cpus);
    }
  }
  for (const auto &r : wc.pending.records) {
    record(st, r.plan, r.after, r.cgroup);
  }
  wc.pending = {};
  return save_state(root, st);
}

void sched_ledger_charge(SchedWatchCache &wc, const std::string &domain, double bw) {
  if (wc.at < 0) {
    return;
  }
  if (RootDomain *d = wc.ledger.find(domain)) {
    d->used = std::max(0.0, d->used + bw);
  }
}

int64_t sched_ledger_age_ms(const SchedWatchCache &wc) {
  return wc.at < 0 ? -1 : mono_ms() - wc.at;
}

Result<SchedReport> sched_apply(SchedSystem &sys, std::span<const SchedRule> rules, const SchedOptions &opt) {
  // A dry run changes nothing, and creates no lock file either.
  auto lock =
      FileLock::acquire(sys.root(), k_lock_path, opt.dry_run ? FileLock::Missing::skip : FileLock::Missing::create);
  if (!lock) {
    return lock.error();
  }
  std::vector<ThreadPlan> plans;
  std::map<std::string, std::string> placements;
  std::vector<ThreadInfo> threads;
  if (opt.pid) {
    const auto tids = sys.tids(*opt.pid);
    if (tids.empty()) {
      return input_error("no process " + std::to_string(*opt.pid));
    }
    add_named_threads(sys, *opt.pid, tids, threads);
  } else {
    threads = sys.thread_names();
  }
  for (const auto &t : threads) {
    auto p = plan_thread(sys, rules, t, opt, placements);
    if (p) {
      plans.push_back(std::move(*p));
    } else if (p.error().kind == Errc::input) {
      return p.error();
    }
  }
  return run_plans(sys, std::move(plans), opt);
}

Result<SchedReport> sched_apply_thread(SchedSystem &sys, std::span<const SchedRule> rules, int pid, int tid,
                                       const SchedOptions &opt) {
  auto lock = FileLock::acquire(sys.root(), k_lock_path);
  if (!lock) {
    return lock.error();
  }
  std::map<std::string, std::string> placements;
  std::vector<ThreadInfo> one;
  add_named_threads(sys, pid, {tid}, one);
  if (one.empty()) {
    return SchedReport{}; // gone
  }
  auto p = plan_thread(sys, rules, one.front(), opt, placements);
  if (!p) {
    if (p.error().kind == Errc::input) {
      return p.error();
    }
    return SchedReport{};
  }
  std::vector<ThreadPlan> plans;
  plans.push_back(std::move(*p));
  return run_plans(sys, std::move(plans), opt);
}

Result<SchedReport> sched_reset(SchedSystem &sys, const SchedOptions &opt) {
  // No lock file: no rule was applied since /run was made (an apply creates
  // it before it records a thread), so there is nothing to reset.
  auto lock = FileLock::acquire(sys.root(), k_lock_path, FileLock::Missing::skip);
  if (!lock) {
    return lock.error();
  }
  const Sysroot &root = sys.root();
  auto loaded = load_state(root);
  if (!loaded) {
    return loaded.error();
  }
  State &st = *loaded;
  SchedReport rep;
  std::vector<StateEntry> keep;
  for (const auto &e : st.threads) {
    if ((opt.pid && e.pid != *opt.pid) || (!opt.tids.empty() && std::ranges::find(opt.tids, e.tid) == opt.tids.end())) {
      keep.push_back(e);
      continue;
    }
    SchedAction a;
    a.pid = e.pid;
    a.tid = e.tid;
    a.comm = e.comm;
    a.rule = e.rule;
    a.before = e.after;
    a.after = e.before;
    a.cgroup = e.cgroup_before;
    auto t = sys.thread(e.pid, e.tid);
    if (!t || t->starttime != e.starttime) {
      a.result = "gone";
      a.message = "thread exited; nothing to restore";
    } else if (opt.dry_run) {
      a.result = "dry-run";
    } else {
      if (auto cur = sys.get(e.tid)) {
        a.before = *cur;
      }
      // Leave DEADLINE first, then the partition: the default domain need not
      // admit the thread's bandwidth.
      auto s = sys.set(e.tid, e.before);
      Status mv;
      if (s && !e.cgroup.empty() && t->cgroup != e.cgroup_before) {
        mv = sys.move_thread(e.tid, e.cgroup_before.empty() ? "/" : e.cgroup_before);
      }
      if (!s) {
        a.result = gone(s.error()) ? "gone" : "failed";
        a.message = s.error().message;
        if (a.result == "failed") {
          keep.push_back(e);
        }
      } else if (!mv && gone(mv.error())) {
        a.result = "gone";
        a.message = "thread exited while being restored";
      } else if (!mv) {
        a.result = "failed";
        a.message = "policy restored; moving back to " + e.cgroup_before + ": " + mv.error().message;
        keep.push_back(e);
      } else {
        a.result = "restored";
      }
    }
    if (opt.log) {
      opt.log(a);
    }
    rep.actions.push_back(std::move(a));
  }
  if (opt.dry_run) {
    return rep;
  }
  st.threads = keep;
  std::vector<std::pair<std::string, std::string>> parts;
  for (const auto &[cg, cpus] : st.partitions) {
    const bool used = std::ranges::any_of(keep, [&](const StateEntry &e) { return e.cgroup == cg; });
    auto threads = root.read(cgroup::path(cg, "cgroup.threads"));
    if (used || (threads && !trim(*threads).empty())) {
      parts.emplace_back(cg, cpus);
      rep.notes.push_back("partition " + cgroup::path(cg) + " kept: threads still in it");
      continue;
    }
    if (auto s = sys.remove_partition(cg); !s) {
      parts.emplace_back(cg, cpus);
      rep.notes.push_back("partition " + cgroup::path(cg) + ": " + s.error().message);
    } else {
      rep.notes.push_back("partition " + cgroup::path(cg) + " removed");
    }
  }
  st.partitions = parts;
  if (auto s = save_state(root, st); !s) {
    return s.error();
  }
  if (st.threads.empty() && st.partitions.empty()) {
    lock->remove_on_release(); // nothing of the rules is left, nor their lock
  }
  return rep;
}

std::vector<ThreadInfo> SchedSystem::thread_names() const {
  std::vector<ThreadInfo> out;
  for (int pid : pids()) {
    add_named_threads(*this, pid, tids(pid), out);
  }
  return out;
}

bool sched_attr_holds(const SchedAttr &cur, const SchedAttr &want) {
  return same_attr(cur, want);
}

std::vector<SchedListEntry> sched_list(const SchedSystem &sys, std::span<const SchedRule> rules,
                                       std::optional<int> pid) {
  // A state file that cannot be read lists every thread as unmanaged.
  const State st = load_state(sys.root()).value_or(State{});
  std::vector<SchedListEntry> out;
  std::vector<ThreadInfo> threads;
  if (pid) {
    add_named_threads(sys, *pid, sys.tids(*pid), threads);
  } else {
    threads = sys.thread_names();
  }
  for (const auto &n : threads) {
    // Only a thread some rule could name, or one the state file records,
    // is read in full.
    const bool recorded = std::ranges::any_of(st.threads, [&](const StateEntry &e) { return e.tid == n.tid; });
    if (!recorded && !sched_name_matches(rules, n.comm)) {
      continue;
    }
    auto t = sys.thread(n.pid, n.tid);
    if (!t) {
      continue;
    }
    const SchedRule *r = sched_match(rules, *t);
    const bool managed = std::ranges::any_of(
        st.threads, [&](const StateEntry &e) { return e.tid == n.tid && e.starttime == t->starttime; });
    if (r == nullptr && !managed) {
      continue;
    }
    SchedListEntry e;
    e.thread = *t;
    auto a = sys.get(n.tid);
    e.attr = a ? *a : SchedAttr{};
    e.rule = r != nullptr ? r->name : "";
    e.managed = managed;
    out.push_back(std::move(e));
  }
  return out;
}

} // namespace mltune
