// Internal to libmltune: the profile loader hands [[sched.rule]] tables here.
#pragma once

#include "mltune/sched.hpp"

#include <toml++/toml.h>

namespace mltune {

// Validates one [[sched.rule]] table; `display` names the file in errors.
Result<SchedRule> sched_rule_from_toml(const toml::table &t, const std::string &display);
// Validates the [sched] table and appends/overrides rules in `rules` by name.
Status sched_rules_merge(const toml::node &sched, const std::string &display, std::vector<SchedRule> &rules);

} // namespace mltune
