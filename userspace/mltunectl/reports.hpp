// One JSON shape per domain report, whichever command prints it (nic,
// sched, switch): Documentation/mltunectl.rst, "JSON output".
#pragma once

#include "mltune/nic.hpp"
#include "mltune/sched.hpp"

#include <nlohmann/json.hpp>

namespace mltune::cli {

// {"interface", "setting", "from", "to", "origin"}
nlohmann::json nic_change_json(const NicChange &c);
// {"applied" (applied) or "changes" (planned): [CHANGE], "skipped":
// [{"interface", "setting", "why"}], "notes"}
nlohmann::json nic_report_json(const NicReport &r, bool applied);
// {"policy", "reset_on_fork", and "runtime_ns", "deadline_ns",
// "period_ns", "overrun_signal" | "priority" | "nice" by policy}
nlohmann::json sched_attr_json(const SchedAttr &a);
// {"pid", "tid", "comm", "rule", "result", "before": ATTR, "after": ATTR,
// "cgroup", "message"}
nlohmann::json sched_action_json(const SchedAction &a);

} // namespace mltune::cli
