// KnobStep: the kernel knobs of a profile as a transaction step (switch.hpp).
#include "mltune/compare.hpp"
#include "mltune/device_knobs.hpp"
#include "mltune/switch.hpp"

namespace mltune {

KnobStep::KnobStep(const Profile &profile, const Sysroot &root, Backend backend)
    : profile_(profile), root_(root), backend_(backend) {}

Status KnobStep::plan() {
  notes_.clear();
  auto node = profile_for_node(profile_, root_, &notes_);
  if (!node) {
    return node.error();
  }
  node_profile_ = std::move(*node);
  auto plan = plan_switch(node_profile_, root_);
  if (!plan) {
    return plan.error();
  }
  auto prev = active_profile(root_, backend_);
  if (!prev) {
    return with_context(prev.error(), "reading the active profile");
  }
  plan_ = std::move(*plan);
  previous_ = std::move(*prev);
  return {};
}

Status KnobStep::apply() {
  auto rep =
      backend_ == Backend::kernel ? switch_kernel(node_profile_, root_) : switch_direct(node_profile_, root_, plan_);
  if (!rep) {
    return rep.error();
  }
  report_ = std::move(*rep);
  return {};
}

Status KnobStep::verify() {
  std::string differs;
  size_t n = 0;
  for (const auto &k : compare(node_profile_, root_)) {
    if (k.counts()) {
      differs += (n++ == 0 ? "" : ", ") + k.knob->key + " reads '" + k.current + "', wanted '" + k.knob->wanted() + "'";
    }
  }
  if (n > 0) {
    return failure(std::to_string(n) + " knob(s) do not read back: " + differs);
  }
  return {};
}

Status KnobStep::rollback() {
  auto rep = undo_switch(root_, backend_, plan_, previous_);
  if (!rep) {
    return rep.error();
  }
  return {};
}

Status KnobStep::baseline() {
  auto rep = backend_ == Backend::kernel ? restore_baseline_kernel(root_) : restore_baseline_direct(root_);
  if (!rep) {
    return rep.error();
  }
  report_ = std::move(*rep);
  return {};
}

} // namespace mltune
