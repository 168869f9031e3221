// The phases of run_plans (sched/apply.cpp), one function each, so unit tests
// can exercise every phase on a fake SchedSystem: the admission ledger (cached
// for the watcher), admission per root domain, then per thread the refusal,
// unchanged and dry-run verdicts, the partition, the placement, the
// sched_setattr with its retries and fallback, and the bookkeeping.  Also the
// ledger, plan and state types they share with the rest of apply.cpp.
// Library-private: not part of the installed API.
#pragma once

#include "mltune/result.hpp"
#include "mltune/sched.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mltune::detail {

// Root domains with their DEADLINE bandwidth: what admission checks against.
struct Ledger {
  std::vector<RootDomain> domains; // [0] is the default domain
  long long rt_runtime = 950000;
  long long rt_period = 1000000;
  double reserved_per_cpu = 0;

  RootDomain *find(const std::string &name) {
    for (auto &d : domains) {
      if (d.name == name) {
        return &d;
      }
    }
    return nullptr;
  }
  // The domain of a thread in cgroup `cg`.
  RootDomain &of_cgroup(const std::string &cg) {
    RootDomain *best = &domains[0];
    size_t best_len = 0;
    for (auto &d : domains) {
      if (d.name != "default" && (cg == d.name || cg.starts_with(d.name + "/")) && d.name.size() > best_len) {
        best = &d;
        best_len = d.name.size();
      }
    }
    return *best;
  }
  RootDomain make(std::string name, CpuSet cpus) const {
    RootDomain d;
    d.name = std::move(name);
    d.cpus = std::move(cpus);
    const auto n = static_cast<double>(d.cpus.count());
    d.limit = rt_runtime < 0 ? -1 : n * static_cast<double>(rt_runtime) / static_cast<double>(rt_period);
    d.reserved = n * reserved_per_cpu;
    return d;
  }
};

// What a rule wants for one thread.
struct ThreadPlan {
  ThreadInfo t;
  const SchedRule *rule = nullptr;
  SchedAttr before;
  SchedAttr want;
  std::string cpus;      // placement cpulist ("" none)
  std::string partition; // DEADLINE with placement: the partition cgroup
  std::string domain;    // admission domain
  bool refused = false;
  std::string message;
};

// The state file's contents.
struct StateEntry {
  int pid = 0;
  int tid = 0;
  uint64_t starttime = 0;
  std::string comm;
  std::string rule;
  SchedAttr before;
  SchedAttr after;
  std::string cgroup_before;
  std::string cgroup; // partition moved into, "" when not moved
};

struct State {
  std::vector<StateEntry> threads;
  std::vector<std::pair<std::string, std::string>> partitions; // cgroup, cpus (created by mltune)
};

// The recorded state (state.cpp); empty when there is none. An empty state
// removes the file.
[[nodiscard]] Result<State> load_state(const Sysroot &root);
[[nodiscard]] Status save_state(const Sysroot &root, const State &s);

// Whether the run defers its state-file writes to the watcher's cache
// (opt.defer_state with opt.watch; without a cache it writes them itself).
bool deferred(const SchedOptions &opt);

// The ledger to admit against: the watcher's cached one (opt.watch) while
// younger than opt.ledger_ttl_ms, else a fresh scan (cached again when the
// run has a watcher's cache and a TTL).
Ledger admission_ledger(const SchedSystem &sys, const SchedOptions &opt);

// Adds `bw` to `domain` in the watcher's cached ledger (opt.watch); an
// unknown domain (a new partition) makes the next run rescan.
void charge_cached_ledger(const SchedOptions &opt, const std::string &domain, double bw);

// The domain of every DEADLINE plan (new partitions added to the ledger) and
// the bandwidth each domain is asked for.
void assign_domains(Ledger &ledger, std::vector<ThreadPlan> &plans);

// Domains with bandwidth into the report; plans in a domain that does not fit are refused.
void refuse_overbooked(Ledger &ledger, std::vector<ThreadPlan> &plans, SchedReport &rep);

// One run of the apply phase over the admitted plans.
struct ApplyRun {
  SchedSystem &sys;
  const SchedOptions &opt;
  Ledger &ledger;
  SchedReport &rep;
  State st;
  std::set<std::string> partitions_ok;
  std::map<std::string, std::string> partitions_bad;
  // Logs the action (opt.log) and adds it to the report.
  void emit(SchedAction a);
};

// Where one thread stands while it is applied.
struct ThreadApply {
  SchedAttr want;
  std::string why;
  bool in_place = true;
  std::string moved_to;
};

// Refused (fallback or left), unchanged and dry-run verdicts; true when the
// thread is done with.
bool settle_without_change(ApplyRun &run, ThreadPlan &p, ThreadApply &ta);

// Creates the thread's partition once per run, noting it (and, when mltune
// created it, recording it in the state); a bad one is remembered and removed.
void ensure_partition_once(ApplyRun &run, const ThreadPlan &p);

// Moves the thread into its partition, or turns to the fallback when the
// partition is unusable; true when the thread is done with (failed, gone).
bool place_thread(ApplyRun &run, ThreadPlan &p, ThreadApply &ta);

// sched_setattr, retried after a move the kernel had not caught up with, and
// the fallback when the kernel refuses the bandwidth.
Status set_with_retries(ApplyRun &run, ThreadPlan &p, ThreadApply &ta);

// The verdict of the set (moving the thread back on failure), the ledger
// charge and the state record.
void finish_thread(ApplyRun &run, ThreadPlan &p, const ThreadApply &ta, const Status &s);

// Every phase of one thread.
void apply_plan(ApplyRun &run, ThreadPlan &p);

} // namespace mltune::detail
