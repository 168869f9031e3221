// CpuPlan building, backend choice and the direct (user-space transaction) backend.
#include "mltune/compare.hpp"
#include "mltune/switch.hpp"

#include "base/baseline.hpp"
#include "switch/undo.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <ranges>

namespace mltune {

using json = nlohmann::json;

std::string_view to_string(Backend b) {
  switch (b) {
  case Backend::automatic: return "auto";
  case Backend::kernel: return "kernel";
  case Backend::direct: return "direct";
  }
  return "?";
}

Backend choose_backend(const Sysroot &root, Backend wanted) {
  if (wanted != Backend::automatic) {
    return wanted;
  }
  return kernel_backend_present(root) ? Backend::kernel : Backend::direct;
}

Result<SwitchPlan> plan_switch(const Profile &profile, const Sysroot &root) {
  SwitchPlan plan{profile.name, {}};
  for (const auto &st : compare(profile, root)) {
    const Knob &k = *st.knob;
    PlanStep step{k.key, k.path(), k.value, st.current, k.optional, PlanStep::Action::write, {}};
    if (st.state == KnobState::missing || st.state == KnobState::unreadable) {
      if (!st.allowed()) {
        return failure(k.key + " (" + k.origin + "): required knob not available on this node: " + st.error, ENOENT);
      }
      step.action = PlanStep::Action::skip;
      step.note = "not available on this node";
    } else if (st.state == KnobState::match) {
      step.action = PlanStep::Action::unchanged;
    }
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

namespace {

// The knobs' record in the node baseline (base/baseline.hpp): the profile
// the direct backend names active, and each knob's value before mltune in
// first-write order.
struct KnobRecord {
  std::string active;
  std::vector<std::pair<std::string, std::string>> values; // path, value before mltune
};

// Found by ADL (NodeBaseline::get/put); "active" and "values" only when set.
void to_json(json &j, const KnobRecord &r) {
  j = json::object();
  if (!r.active.empty()) {
    j["active"] = r.active;
  }
  for (const auto &[path, value] : r.values) {
    j["values"].push_back({{"path", path}, {"value", value}});
  }
}

void from_json(const json &j, KnobRecord &r) {
  r.active = j.value("active", "");
  for (const auto &e : j.value("values", json::array())) {
    r.values.emplace_back(e.at("path").get<std::string>(), e.at("value").get<std::string>());
  }
}

struct Baseline {
  detail::NodeBaseline file;
  KnobRecord knobs;
};

constexpr std::string_view k_domain = "knobs";

Result<Baseline> load_knobs(const Sysroot &root) {
  auto file = detail::load_baseline(root);
  if (!file) {
    return file.error();
  }
  auto knobs = file->get<KnobRecord>(k_domain);
  if (!knobs) {
    return knobs.error();
  }
  return Baseline{std::move(*file), std::move(*knobs)};
}

Status save_knobs(const Sysroot &root, Baseline &b) {
  b.file.put(k_domain, b.knobs);
  return detail::save_baseline(root, b.file);
}

struct Write {
  std::string key, path, value, old;
  bool optional;
};

// Writes in order; on the first failure of a required write restores every
// write done so far, in reverse, and returns the error naming the knob.
Result<SwitchReport> transact(const std::string &profile, const std::vector<Write> &writes, const Sysroot &root) {
  SwitchReport rep{Backend::direct, profile, {}, {}, {}, {}};
  std::vector<const Write *> done;
  for (const auto &w : writes) {
    auto st = root.write_value(w.path, w.value);
    if (st) {
      done.push_back(&w);
      rep.written.push_back(w.key);
      continue;
    }
    if (w.optional) {
      rep.skipped.push_back(w.key + ": " + st.error().message);
      continue;
    }
    std::string undo_errors;
    for (const Write *d : std::views::reverse(done)) {
      if (auto u = root.write_value(d->path, d->old); !u) {
        undo_errors += "; restore failed: " + u.error().message;
      }
    }
    return Error{Errc::failed,
                 "switch to '" + profile + "' failed at " + w.key + " = " + w.value + " (" + st.error().message +
                     "); rolled back " + std::to_string(done.size()) + " knob(s)" + undo_errors,
                 st.error().sys_errno};
  }
  return rep;
}

} // namespace

Result<SwitchReport> switch_direct(const Profile &profile, const Sysroot &root) {
  auto plan = plan_switch(profile, root);
  if (!plan) {
    return plan.error();
  }
  return switch_direct(profile, root, *plan);
}

Result<SwitchReport> switch_direct(const Profile &profile, const Sysroot &root, const SwitchPlan &plan) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  std::vector<Write> writes;
  SwitchReport skipped_rep;
  const size_t known_before = state->knobs.values.size();
  for (const auto &s : plan.steps) {
    if (s.action == PlanStep::Action::skip) {
      skipped_rep.skipped.push_back(s.key + ": " + s.note);
      continue;
    }
    const bool known = std::any_of(state->knobs.values.begin(), state->knobs.values.end(),
                                   [&](const auto &v) { return v.first == s.path; });
    if (!known) {
      state->knobs.values.emplace_back(s.path, s.current);
    }
    if (s.action == PlanStep::Action::write) {
      writes.push_back({s.key, s.path, s.value, s.current, s.optional});
    }
  }
  // New baseline values are recorded before the first write, so they
  // survive a crash of mltunectl half-way through. The state names the
  // profile being switched to; a failed switch writes back the previous one.
  const std::string previous = state->knobs.active;
  const bool grew = state->knobs.values.size() != known_before || !root.exists(k_baseline_file);
  state->knobs.active = profile.name;
  if (grew || previous != profile.name) {
    if (auto st = save_knobs(root, *state); !st) {
      return st.error();
    }
  }
  auto rep = transact(profile.name, writes, root);
  if (!rep) {
    if (previous != profile.name) {
      state->knobs.active = previous;
      (void)save_knobs(root, *state);
    }
    return rep;
  }
  rep->skipped.insert(rep->skipped.begin(), skipped_rep.skipped.begin(), skipped_rep.skipped.end());
  return rep;
}

Result<std::vector<std::pair<std::string, std::string>>> direct_baseline(const Sysroot &root) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  return std::move(state->knobs.values);
}

Result<SwitchPlan> plan_baseline_direct(const Sysroot &root) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  SwitchPlan plan{std::string(k_baseline), {}};
  for (const auto &[path, value] : std::views::reverse(state->knobs.values)) {
    PlanStep s{path, path, value, {}, false, PlanStep::Action::write, {}};
    if (auto cur = root.read_value(path); !cur) {
      s.action = PlanStep::Action::skip;
      s.note = cur.error().message;
    } else {
      s.current = *cur;
      if (values_equal(*cur, value)) {
        s.action = PlanStep::Action::unchanged;
      }
    }
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

Result<SwitchReport> restore_baseline_direct(const Sysroot &root) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  auto plan = plan_baseline_direct(root);
  if (!plan) {
    return plan.error();
  }
  std::vector<Write> writes;
  std::vector<std::string> skipped;
  for (const auto &s : plan->steps) {
    if (s.action == PlanStep::Action::skip) {
      skipped.push_back(s.path + ": " + s.note);
    } else if (s.action == PlanStep::Action::write) {
      writes.push_back({s.path, s.path, s.value, s.current, false});
    }
  }
  auto rep = transact(std::string(k_baseline), writes, root);
  if (!rep) {
    return rep;
  }
  rep->skipped = std::move(skipped);
  // The knobs are back; the record of the other domains stays.
  state->knobs.values.clear();
  state->knobs.active.clear();
  if (auto st = save_knobs(root, *state); !st) {
    return st.error();
  }
  return rep;
}

namespace detail {

Result<std::string> direct_active(const Sysroot &root) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  return state->knobs.active;
}

Status direct_set_active(const Sysroot &root, const std::string &name) {
  auto state = load_knobs(root);
  if (!state) {
    return state.error();
  }
  if (state->knobs.active == name) {
    return {};
  }
  state->knobs.active = name;
  return save_knobs(root, *state);
}

} // namespace detail

} // namespace mltune
