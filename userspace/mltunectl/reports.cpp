#include "reports.hpp"

namespace mltune::cli {

nlohmann::json nic_change_json(const NicChange &c) {
  return {{"interface", c.ifname}, {"setting", c.key}, {"from", c.from}, {"to", c.to}, {"origin", c.origin}};
}

nlohmann::json nic_report_json(const NicReport &r, bool applied) {
  nlohmann::json ch = nlohmann::json::array();
  for (const auto &c : applied ? r.applied : r.plan.changes) {
    ch.push_back(nic_change_json(c));
  }
  nlohmann::json sk = nlohmann::json::array();
  for (const auto &s : r.skipped) {
    sk.push_back({{"interface", s.ifname}, {"setting", s.key}, {"why", s.why}});
  }
  return {{applied ? "applied" : "changes", ch}, {"skipped", sk}, {"notes", r.notes}};
}

nlohmann::json sched_attr_json(const SchedAttr &a) {
  nlohmann::json j{{"policy", std::string(to_string(a.policy))},
                   {"reset_on_fork", (a.flags & k_sched_flag_reset_on_fork) != 0}};
  if (a.policy == SchedPolicy::deadline) {
    j["runtime_ns"] = a.runtime;
    j["deadline_ns"] = a.deadline;
    j["period_ns"] = a.period;
    j["overrun_signal"] = (a.flags & k_sched_flag_dl_overrun) != 0;
  } else if (a.policy == SchedPolicy::fifo || a.policy == SchedPolicy::rr) {
    j["priority"] = a.priority;
  } else {
    j["nice"] = a.nice;
  }
  return j;
}

nlohmann::json sched_action_json(const SchedAction &a) {
  return {{"pid", a.pid},
          {"tid", a.tid},
          {"comm", a.comm},
          {"rule", a.rule},
          {"result", a.result},
          {"before", sched_attr_json(a.before)},
          {"after", sched_attr_json(a.after)},
          {"cgroup", a.cgroup},
          {"message", a.message}};
}

} // namespace mltune::cli
