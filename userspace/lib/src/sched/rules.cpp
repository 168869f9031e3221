// [[sched.rule]] parsing, validation and matching.
#include "internal.hpp"
#include "sched/rules_phases.hpp"

#include <algorithm>
#include <cstdio>
#include <fnmatch.h>
#include <map>
#include <optional>
#include <regex>

namespace mltune {

namespace {

std::string where(const std::string &display, const toml::source_region &r) {
  return display + ":" + std::to_string(r.begin.line);
}

bool glob_match(const std::string &pattern, std::string_view s) {
  return fnmatch(pattern.c_str(), std::string(s).c_str(), 0) == 0;
}

std::string us(uint64_t ns) {
  if (ns % 1000 == 0) {
    return std::to_string(ns / 1000) + "us";
  }
  return std::to_string(ns) + "ns";
}

} // namespace

namespace detail {

Result<SchedPolicy> parse_policy(const PolicyTable &pt, bool fallback) {
  const auto pol = pt.t["policy"].value<std::string>();
  if (!pol) {
    return input_error(where(pt.display, pt.t.source()) + ": " + pt.ctx +
                       ": missing policy (deadline, fifo, rr, other)");
  }
  const auto p = sched_policy_from(*pol);
  if (!p || *p == SchedPolicy::batch || *p == SchedPolicy::idle) {
    return input_error(where(pt.display, pt.t["policy"].node()->source()) + ": " + pt.ctx + ": unknown policy '" +
                       *pol + "' (expected deadline, fifo, rr, other)");
  }
  if (fallback && *p == SchedPolicy::deadline) {
    return input_error(where(pt.display, pt.t.source()) + ": " + pt.ctx + ": a fallback cannot be deadline");
  }
  return *p;
}

Result<PolicyNumbers> policy_numbers(const PolicyTable &pt) {
  auto get_int = [&](const char *key, int64_t lo, int64_t hi, int64_t &out) -> Status {
    const auto *n = pt.t.get(key);
    if (n == nullptr) {
      return {};
    }
    const auto v = n->value<int64_t>();
    if (!n->is_integer() || !v || *v < lo || *v > hi) {
      return input_error(where(pt.display, n->source()) + ": " + pt.ctx + ": " + key + " must be an integer in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    out = *v;
    return {};
  };
  PolicyNumbers n;
  for (const auto &st :
       {get_int("priority", 1, 99, n.prio), get_int("nice", -20, 19, n.nice),
        get_int("runtime_us", 2, 10'000'000, n.runtime), get_int("deadline_us", 2, 10'000'000, n.deadline),
        get_int("period_us", 2, 10'000'000, n.period)}) {
    if (!st) {
      return st.error();
    }
  }
  return n;
}

Status only_keys(const PolicyTable &pt, const std::string &policy, std::initializer_list<const char *> allowed) {
  static const char *const all[] = {"priority",  "nice",          "runtime_us",    "deadline_us",
                                    "period_us", "reset_on_fork", "overrun_signal"};
  for (const char *k : all) {
    if (pt.t.contains(k) &&
        std::ranges::find_if(allowed, [&](const char *x) { return std::string_view(x) == k; }) == allowed.end()) {
      return input_error(where(pt.display, pt.t.get(k)->source()) + ": " + pt.ctx + ": " + k +
                         " does not apply to policy " + policy);
    }
  }
  return {};
}

Result<bool> policy_bool(const PolicyTable &pt, const char *key, bool dflt) {
  const auto *n = pt.t.get(key);
  if (n == nullptr) {
    return dflt;
  }
  if (!n->is_boolean()) {
    return input_error(where(pt.display, n->source()) + ": " + pt.ctx + ": " + key + " must be true or false");
  }
  return *n->value<bool>();
}

Status deadline_fields(const PolicyTable &pt, const std::string &policy, PolicyNumbers n, SchedAttr &a) {
  if (auto st = only_keys(pt, policy, {"runtime_us", "deadline_us", "period_us", "reset_on_fork", "overrun_signal"});
      !st) {
    return st;
  }
  const std::string at = where(pt.display, pt.t.source()) + ": " + pt.ctx;
  if (n.runtime < 0 || n.period < 0) {
    return input_error(at + ": deadline needs runtime_us and period_us");
  }
  if (n.deadline < 0) {
    n.deadline = n.period;
  }
  if (!(n.runtime <= n.deadline && n.deadline <= n.period)) {
    return input_error(at + ": deadline needs runtime_us <= deadline_us <= period_us (got " +
                       std::to_string(n.runtime) + " <= " + std::to_string(n.deadline) +
                       " <= " + std::to_string(n.period) + ")");
  }
  a.runtime = static_cast<uint64_t>(n.runtime) * 1000;
  a.deadline = static_cast<uint64_t>(n.deadline) * 1000;
  a.period = static_cast<uint64_t>(n.period) * 1000;
  // Threads that create threads (NCCL's service thread) need reset-on-fork:
  // without it clone() fails with EAGAIN.  On unless the profile says no.
  auto rof = policy_bool(pt, "reset_on_fork", true);
  auto ovr = policy_bool(pt, "overrun_signal", false);
  if (!rof) {
    return rof.error();
  }
  if (!ovr) {
    return ovr.error();
  }
  a.flags = (*rof ? k_sched_flag_reset_on_fork : 0) | (*ovr ? k_sched_flag_dl_overrun : 0);
  return {};
}

Status priority_fields(const PolicyTable &pt, const std::string &policy, const PolicyNumbers &n, SchedAttr &a) {
  if (auto st = only_keys(pt, policy, {"priority", "reset_on_fork"}); !st) {
    return st;
  }
  if (n.prio < 0) {
    return input_error(where(pt.display, pt.t.source()) + ": " + pt.ctx + ": " + policy + " needs priority (1-99)");
  }
  a.priority = static_cast<int>(n.prio);
  auto rof = policy_bool(pt, "reset_on_fork", true);
  if (!rof) {
    return rof.error();
  }
  a.flags = *rof ? k_sched_flag_reset_on_fork : 0;
  return {};
}

Status nice_fields(const PolicyTable &pt, const std::string &policy, const PolicyNumbers &n, SchedAttr &a) {
  if (auto st = only_keys(pt, policy, {"nice", "reset_on_fork"}); !st) {
    return st;
  }
  a.nice = static_cast<int>(n.nice);
  auto rof = policy_bool(pt, "reset_on_fork", false);
  if (!rof) {
    return rof.error();
  }
  a.flags = *rof ? k_sched_flag_reset_on_fork : 0;
  return {};
}

Status policy_fields(const toml::table &t, const std::string &display, const std::string &ctx, SchedAttr &a,
                     bool fallback) {
  const PolicyTable pt{t, display, ctx};
  const auto p = parse_policy(pt, fallback);
  if (!p) {
    return p.error();
  }
  a = {};
  a.policy = *p;
  const auto n = policy_numbers(pt);
  if (!n) {
    return n.error();
  }
  const std::string policy = *t["policy"].value<std::string>();
  switch (*p) {
  case SchedPolicy::deadline: return deadline_fields(pt, policy, *n, a);
  case SchedPolicy::fifo:
  case SchedPolicy::rr: return priority_fields(pt, policy, *n, a);
  default: return nice_fields(pt, policy, *n, a);
  }
}

} // namespace detail

namespace {

using detail::policy_fields;

bool valid_cpulist_chars(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return (c >= '0' && c <= '9') || c == ',' || c == '-'; });
}

} // namespace

std::string_view to_string(SchedPolicy p) {
  switch (p) {
  case SchedPolicy::other: return "other";
  case SchedPolicy::fifo: return "fifo";
  case SchedPolicy::rr: return "rr";
  case SchedPolicy::batch: return "batch";
  case SchedPolicy::idle: return "idle";
  case SchedPolicy::deadline: return "deadline";
  }
  return "unknown";
}

std::optional<SchedPolicy> sched_policy_from(std::string_view s) {
  for (auto p : {SchedPolicy::other, SchedPolicy::fifo, SchedPolicy::rr, SchedPolicy::batch, SchedPolicy::idle,
                 SchedPolicy::deadline}) {
    if (to_string(p) == s) {
      return p;
    }
  }
  return std::nullopt;
}

std::string SchedAttr::describe() const {
  std::string s(to_string(policy));
  switch (policy) {
  case SchedPolicy::deadline:
    s += " runtime=" + us(runtime) + " deadline=" + us(deadline) + " period=" + us(period);
    break;
  case SchedPolicy::fifo:
  case SchedPolicy::rr: s += " priority=" + std::to_string(priority); break;
  default: s += " nice=" + std::to_string(nice); break;
  }
  if ((flags & k_sched_flag_reset_on_fork) != 0) {
    s += " reset-on-fork";
  }
  if ((flags & k_sched_flag_dl_overrun) != 0) {
    s += " overrun-signal";
  }
  return s;
}

double SchedAttr::bandwidth() const {
  if (policy != SchedPolicy::deadline || period == 0) {
    return 0;
  }
  return static_cast<double>(runtime) / static_cast<double>(period);
}

namespace {

// Compiled thread_regex patterns: a scan tests every thread of the node
// against every rule, and compiling a std::regex costs far more than
// matching one.  Per thread, so no lock; an invalid pattern (refused when a
// profile loads) is kept as nullopt and matches nothing.
const std::optional<std::regex> &compiled(const std::string &pattern) {
  thread_local std::map<std::string, std::optional<std::regex>, std::less<>> cache;
  auto it = cache.find(pattern);
  if (it == cache.end()) {
    std::optional<std::regex> re;
    try {
      re.emplace(pattern);
    } catch (const std::regex_error &) {
      re.reset(); // refused when its profile loaded: matches nothing
    }
    it = cache.emplace(pattern, std::move(re)).first;
  }
  return it->second;
}

} // namespace

bool SchedRule::matches_name(std::string_view comm) const {
  if (!thread_regex.empty()) {
    const auto &re = compiled(thread_regex);
    return re && std::regex_match(comm.begin(), comm.end(), *re);
  }
  return glob_match(thread, comm);
}

bool sched_name_matches(std::span<const SchedRule> rules, std::string_view comm) {
  return std::ranges::any_of(rules, [&](const SchedRule &r) { return r.matches_name(comm); });
}

const SchedRule *sched_match(std::span<const SchedRule> rules, const ThreadInfo &t) {
  for (const auto &r : rules) {
    if (!r.matches_name(t.comm)) {
      continue;
    }
    if (!r.exe.empty() && !glob_match(r.exe, t.exe)) {
      continue;
    }
    if (!r.cmdline.empty() && !glob_match(r.cmdline, t.cmdline)) {
      continue;
    }
    if (!r.cgroup.empty() && !glob_match(r.cgroup, t.cgroup)) {
      continue;
    }
    return &r;
  }
  return nullptr;
}

Result<SchedRule> sched_rule_from_toml(const toml::table &t, const std::string &display) {
  const std::string at = where(display, t.source());
  SchedRule r;
  r.origin = at;
  static const char *const known[] = {
      "name",          "thread",         "thread_regex", "exe",        "cmdline",     "cgroup",
      "policy",        "priority",       "nice",         "runtime_us", "deadline_us", "period_us",
      "reset_on_fork", "overrun_signal", "cpus",         "fallback",   "reason"};
  for (const auto &[k, v] : t) {
    if (std::ranges::find_if(known, [&](const char *x) { return k == x; }) == std::end(known)) {
      return input_error(where(display, k.source()) + ": sched rule: unknown key '" + std::string(k.str()) + "'");
    }
    const bool stringy = k != "policy" && k != "priority" && k != "nice" && k != "runtime_us" && k != "deadline_us" &&
                         k != "period_us" && k != "reset_on_fork" && k != "overrun_signal" && k != "fallback";
    if (stringy && !v.is_string()) {
      return input_error(where(display, k.source()) + ": sched rule: " + std::string(k.str()) + " must be a string");
    }
  }
  r.name = t["name"].value_or(std::string());
  if (r.name.empty() || r.name.size() > 64 || !std::ranges::all_of(r.name, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    return input_error(at + ": sched rule: name must be 1-64 letters, digits, '-' or '_'");
  }
  const std::string ctx = "sched rule '" + r.name + "'";
  r.thread = t["thread"].value_or(std::string());
  r.thread_regex = t["thread_regex"].value_or(std::string());
  if (r.thread.empty() == r.thread_regex.empty()) {
    return input_error(at + ": " + ctx + ": set exactly one of thread (glob) or thread_regex");
  }
  if (!r.thread_regex.empty()) {
    try {
      (void)std::regex(r.thread_regex).mark_count(); // compiled to be checked, here, not per thread
    } catch (const std::regex_error &e) {
      return input_error(at + ": " + ctx + ": thread_regex: " + e.what());
    }
  }
  r.exe = t["exe"].value_or(std::string());
  r.cmdline = t["cmdline"].value_or(std::string());
  r.cgroup = t["cgroup"].value_or(std::string());
  r.reason = t["reason"].value_or(std::string());
  r.cpus = t["cpus"].value_or(std::string());
  const bool role = r.cpus == "feeder" || r.cpus == "housekeeping" || r.cpus == "workers" ||
                    (r.cpus.starts_with("feeder:") && r.cpus.size() > 7 &&
                     std::all_of(r.cpus.begin() + 7, r.cpus.end(), [](char c) { return c >= '0' && c <= '9'; }));
  if (!r.cpus.empty() && !role) {
    if (!valid_cpulist_chars(r.cpus) || !parse_cpuset(r.cpus) || parse_cpuset(r.cpus)->empty()) {
      return input_error(at + ": " + ctx +
                         ": cpus must be feeder, feeder:N, housekeeping, workers or a cpulist "
                         "like 2-5,8 (got '" +
                         r.cpus + "')");
    }
  }
  if (auto st = policy_fields(t, display, ctx, r.attr, false); !st) {
    return st.error();
  }
  if (!r.cpus.empty() && r.attr.policy != SchedPolicy::deadline) {
    // Placement is a root partition, which only DEADLINE threads get
    // (Documentation/sched.rst): a cpus on another policy would be ignored.
    return input_error(at + ": " + ctx + ": cpus places DEADLINE threads only (in a root partition); this rule's " +
                       "policy is not deadline, so its threads would not move: leave cpus out");
  }
  if (const auto *fb = t.get("fallback")) {
    const auto *ft = fb->as_table();
    if (ft == nullptr) {
      return input_error(where(display, fb->source()) + ": " + ctx + ": fallback must be a table { policy = ... }");
    }
    if (r.attr.policy != SchedPolicy::deadline) {
      return input_error(where(display, fb->source()) + ": " + ctx + ": fallback only applies to deadline rules");
    }
    for (const auto &[k, v] : *ft) {
      (void)v;
      if (k != "policy" && k != "priority" && k != "nice" && k != "reset_on_fork") {
        return input_error(where(display, k.source()) + ": " + ctx + ": fallback: unknown key '" +
                           std::string(k.str()) + "' (expected policy, priority, nice, reset_on_fork)");
      }
    }
    SchedAttr fa;
    if (auto st = policy_fields(*ft, display, ctx + " fallback", fa, true); !st) {
      return st.error();
    }
    r.fallback = fa;
  }
  if (r.cpus == "housekeeping" && r.attr.policy == SchedPolicy::deadline) {
    // Housekeeping CPUs stay in the default root domain: fine, no partition.
  }
  return r;
}

Status sched_rules_merge(const toml::node &sched, const std::string &display, std::vector<SchedRule> &rules) {
  const auto *tbl = sched.as_table();
  if (tbl == nullptr) {
    return input_error(where(display, sched.source()) + ": [sched] must be a table");
  }
  for (const auto &[k, v] : *tbl) {
    if (k != "rule") {
      return input_error(where(display, k.source()) + ": [sched]: unknown key '" + std::string(k.str()) +
                         "' (expected [[sched.rule]])");
    }
    const auto *arr = v.as_array();
    if (arr == nullptr || !arr->is_array_of_tables()) {
      return input_error(where(display, v.source()) + ": sched.rule must be an array of tables ([[sched.rule]])");
    }
    std::vector<std::string> seen;
    for (const auto &el : *arr) {
      auto r = sched_rule_from_toml(*el.as_table(), display);
      if (!r) {
        return r.error();
      }
      if (std::ranges::find(seen, r->name) != seen.end()) {
        return input_error(r->origin + ": sched rule '" + r->name + "' defined twice in this file");
      }
      seen.push_back(r->name);
      auto it = std::ranges::find_if(rules, [&](const SchedRule &x) { return x.name == r->name; });
      if (it != rules.end()) {
        *it = std::move(*r);
      } else {
        rules.push_back(std::move(*r));
      }
    }
  }
  return {};
}

} // namespace mltune
