// The scheduler domain's record (/run/mltune/sched.json): each thread's
// policy before and after, and the partitions made (sched/apply_phases.hpp).
#include "mltune/sched.hpp"

#include "base/state_file.hpp"
#include "sched/apply_phases.hpp"

#include <nlohmann/json.hpp>

namespace mltune {

using detail::State;
using detail::StateEntry;

namespace {

nlohmann::json attr_json(const SchedAttr &a) {
  return {{"policy", std::string(to_string(a.policy))},
          {"flags", a.flags},
          {"nice", a.nice},
          {"priority", a.priority},
          {"runtime_ns", a.runtime},
          {"deadline_ns", a.deadline},
          {"period_ns", a.period}};
}

SchedAttr attr_from(const nlohmann::json &j) {
  SchedAttr a;
  a.policy = sched_policy_from(j.value("policy", "other")).value_or(SchedPolicy::other);
  a.flags = j.value("flags", uint64_t{0});
  a.nice = j.value("nice", 0);
  a.priority = j.value("priority", 0);
  a.runtime = j.value("runtime_ns", uint64_t{0});
  a.deadline = j.value("deadline_ns", uint64_t{0});
  a.period = j.value("period_ns", uint64_t{0});
  return a;
}

} // namespace

namespace detail {

void to_json(nlohmann::json &j, const StateEntry &e) {
  j = {{"pid", e.pid},
       {"tid", e.tid},
       {"starttime", e.starttime},
       {"comm", e.comm},
       {"rule", e.rule},
       {"before", attr_json(e.before)},
       {"after", attr_json(e.after)},
       {"cgroup_before", e.cgroup_before},
       {"cgroup", e.cgroup}};
}

void from_json(const nlohmann::json &j, StateEntry &e) {
  e.pid = j.value("pid", 0);
  e.tid = j.value("tid", 0);
  e.starttime = j.value("starttime", uint64_t{0});
  e.comm = j.value("comm", "");
  e.rule = j.value("rule", "");
  e.before = attr_from(j.value("before", nlohmann::json::object()));
  e.after = attr_from(j.value("after", nlohmann::json::object()));
  e.cgroup_before = j.value("cgroup_before", "");
  e.cgroup = j.value("cgroup", "");
}

void to_json(nlohmann::json &j, const State &s) {
  j = {{"threads", s.threads}, {"partitions", nlohmann::json::array()}};
  for (const auto &[cg, cpus] : s.partitions) {
    j["partitions"].push_back({{"cgroup", cg}, {"cpus", cpus}});
  }
}

void from_json(const nlohmann::json &j, State &s) {
  s.threads = j.value("threads", std::vector<StateEntry>{});
  for (const auto &p : j.value("partitions", nlohmann::json::array())) {
    s.partitions.emplace_back(p.value("cgroup", ""), p.value("cpus", ""));
  }
}

} // namespace detail

// Running-kernel state: not fsynced (a power failure resets the threads too).
constexpr StateFile<State> k_state(k_sched_state_path, 1, false);

Result<State> detail::load_state(const Sysroot &root) {
  return k_state.load_or(root);
}

Status detail::save_state(const Sysroot &root, const State &s) {
  if (s.threads.empty() && s.partitions.empty()) {
    return k_state.remove(root);
  }
  return k_state.save(root, s);
}

} // namespace mltune
