// CpuPlan building, backend choice and the direct (user-space transaction) backend.
#include "mltune/compare.hpp"
#include "mltune/switch.hpp"

#include "base/state_file.hpp"
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

struct Baseline {
  std::string active;
  std::vector<std::pair<std::string, std::string>> values; // path, value before mltune
};

void to_json(json &j, const Baseline &b) {
  j = {{"active", b.active}, {"baseline", json::array()}};
  for (const auto &[path, value] : b.values) {
    j["baseline"].push_back({{"path", path}, {"value", value}});
  }
}

void from_json(const json &j, Baseline &b) {
  b.active = j.value("active", "");
  b.values.clear();
  for (const auto &e : j.at("baseline")) {
    b.values.emplace_back(e.at("path").get<std::string>(), e.at("value").get<std::string>());
  }
}

// Not fsynced (see Documentation/mltunectl.rst): the file records values of
// the running kernel, which do not survive the power failure fsync guards
// against; the rename still replaces it atomically.  An empty file (left by
// a power failure) is no record: the kernel's values were reset too.
constexpr StateFile<Baseline> k_state(k_state_file, 1, false);

Result<Baseline> load_state(const Sysroot &root) {
  auto b = k_state.load(root);
  if (!b) {
    return b.error();
  }
  return b->value_or(Baseline{});
}

Status save_state(const Sysroot &root, const Baseline &b) {
  return k_state.save(root, b);
}

struct Write {
  std::string key, path, value, old;
  bool optional;
};

// Writes in order; on the first failure of a required write restores every
// write done so far, in reverse, and returns the error naming the knob.
Result<SwitchReport> transact(const std::string &profile, const std::vector<Write> &writes, const Sysroot &root) {
  SwitchReport rep{Backend::direct, profile, {}, {}, {}};
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
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  std::vector<Write> writes;
  SwitchReport skipped_rep;
  const size_t known_before = state->values.size();
  for (const auto &s : plan.steps) {
    if (s.action == PlanStep::Action::skip) {
      skipped_rep.skipped.push_back(s.key + ": " + s.note);
      continue;
    }
    const bool known =
        std::any_of(state->values.begin(), state->values.end(), [&](const auto &v) { return v.first == s.path; });
    if (!known) {
      state->values.emplace_back(s.path, s.current);
    }
    if (s.action == PlanStep::Action::write) {
      writes.push_back({s.key, s.path, s.value, s.current, s.optional});
    }
  }
  // New baseline values are recorded before the first write, so they
  // survive a crash of mltunectl half-way through. The state names the
  // profile being switched to; a failed switch writes back the previous one.
  const std::string previous = state->active;
  const bool grew = state->values.size() != known_before || !root.exists(k_state_file);
  state->active = profile.name;
  if (grew || previous != profile.name) {
    if (auto st = save_state(root, *state); !st) {
      return st.error();
    }
  }
  auto rep = transact(profile.name, writes, root);
  if (!rep) {
    if (previous != profile.name) {
      state->active = previous;
      (void)save_state(root, *state);
    }
    return rep;
  }
  rep->skipped.insert(rep->skipped.begin(), skipped_rep.skipped.begin(), skipped_rep.skipped.end());
  return rep;
}

Result<std::vector<std::pair<std::string, std::string>>> direct_baseline(const Sysroot &root) {
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  return std::move(state->values);
}

Result<SwitchReport> restore_baseline_direct(const Sysroot &root) {
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  std::vector<Write> writes;
  SwitchReport skipped;
  for (const auto &[path, value] : std::views::reverse(state->values)) {
    auto cur = root.read_value(path);
    if (!cur) {
      skipped.skipped.push_back(path + ": " + cur.error().message);
      continue;
    }
    if (!values_equal(*cur, value)) {
      writes.push_back({path, path, value, *cur, false});
    }
  }
  auto rep = transact(std::string(k_baseline), writes, root);
  if (!rep) {
    return rep;
  }
  rep->skipped = std::move(skipped.skipped);
  if (auto st = root.remove_file(k_state_file); !st) {
    return st.error();
  }
  return rep;
}

namespace detail {

Result<std::string> direct_active(const Sysroot &root) {
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  return state->active;
}

Status direct_set_active(const Sysroot &root, const std::string &name) {
  auto state = load_state(root);
  if (!state) {
    return state.error();
  }
  if (state->active == name) {
    return {};
  }
  state->active = name;
  return save_state(root, *state);
}

} // namespace detail

} // namespace mltune
