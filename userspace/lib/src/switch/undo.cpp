// Going back from a switch that succeeded: the active profile before it, and
// undo_switch() (switch.hpp), used by the knob step's rollback.
#include "switch/undo.hpp"

#include "mltune/compare.hpp"

#include <ranges>

namespace mltune {

Result<ActiveProfile> active_profile(const Sysroot &root, Backend backend) {
  if (backend == Backend::kernel) {
    return detail::kernel_active(root);
  }
  auto name = detail::direct_active(root);
  if (!name) {
    return name.error();
  }
  return ActiveProfile{std::move(*name), {}};
}

Result<SwitchReport> undo_switch(const Sysroot &root, Backend backend, const SwitchPlan &plan,
                                 const ActiveProfile &previous) {
  SwitchReport rep{backend, previous.name, {}, {}, {}, {}};
  std::string failed;
  auto note_failure = [&failed](const Error &e) { failed += (failed.empty() ? "" : "; ") + e.message; };
  if (backend == Backend::kernel) {
    if (auto st = detail::kernel_reactivate(root, plan.profile, previous); !st) {
      note_failure(st.error());
    }
  } else if (auto st = detail::direct_set_active(root, previous.name); !st) {
    note_failure(st.error());
  }
  int first_errno = 0;
  for (const auto &s : std::views::reverse(plan.steps)) {
    if (s.action != PlanStep::Action::write) {
      continue;
    }
    auto cur = root.read_value(s.path);
    if (cur && values_equal(*cur, s.current)) {
      continue;
    }
    if (auto st = root.write_value(s.path, s.current); !st) {
      if (!s.optional) {
        first_errno = first_errno != 0 ? first_errno : st.error().sys_errno;
        note_failure(with_context(st.error(), s.key + " back to '" + s.current + "'"));
      }
      continue;
    }
    rep.written.push_back(s.key);
  }
  if (!failed.empty()) {
    return failure("undoing the switch to '" + plan.profile + "': " + failed, first_errno);
  }
  return rep;
}

} // namespace mltune
