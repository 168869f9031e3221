// Internal to libmltune: the profile loader hands [[sched.rule]] tables here.
#pragma once

#include "mltune/sched.hpp"

#include <toml++/toml.h>

namespace mltune {

// Validates one [[sched.rule]] table; `display` names the file in errors.
Result<SchedRule> sched_rule_from_toml(const toml::table &t, const std::string &display);
// Validates the [sched] table and appends/overrides rules in `rules` by name.
Status sched_rules_merge(const toml::node &sched, const std::string &display, std::vector<SchedRule> &rules);

// The watcher's state (SchedWatchCache, defined in apply.cpp): its cached
// admission ledger (SchedOptions::ledger_ttl_ms) and the state-file records
// of runs with SchedOptions::defer_state.  One per watcher, handed to the
// apply calls through SchedOptions::watch.
std::shared_ptr<SchedWatchCache> sched_watch_cache();
// Rebuilds the cached ledger now (the watcher does this while idle).
void sched_ledger_refresh(SchedWatchCache &wc, const SchedSystem &sys);
// Adds `bw` (negative: gives back) to the cached ledger's domain.
void sched_ledger_charge(SchedWatchCache &wc, const std::string &domain, double bw);
// Age of the cached ledger in ms (-1: none).
int64_t sched_ledger_age_ms(const SchedWatchCache &wc);
// Writes what runs with SchedOptions::defer_state did to the state file
// (merged under the lock with what other mltunectl runs wrote meanwhile).
Status sched_state_flush(SchedWatchCache &wc, const Sysroot &root);

} // namespace mltune
