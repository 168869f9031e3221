// KnobStep: the kernel knobs of a profile as a transaction step (switch.hpp).
#include "mltune/compare.hpp"
#include "mltune/device_knobs.hpp"
#include "mltune/switch.hpp"

#include <algorithm>

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

namespace mltune {

// Files whose reading interrupts a feeder core or boot-isolated CPU
// (energy_perf_bias, energy_performance_preference) are not read: verify,
// metrics and conformance run again and again; the switch wrote them and
// read them back.  The note says how many were left out.
Result<DomainCheck> KnobStep::check(std::vector<NodeDifference> &out) {
  auto node = profile_for_node(profile_, root_);
  if (!node) {
    return node.error();
  }
  DomainCheck dc{"knobs", "match", node->knobs.size(), {}};
  if (node->knobs.empty()) {
    dc.state = "not-applicable";
  }
  const bool any_on_cpu =
      std::any_of(node->knobs.begin(), node->knobs.end(), [](const Knob &k) { return k.read_on_cpu >= 0; });
  const CpuSet spare = any_on_cpu && spare_ ? spare_() : CpuSet{};
  CpuSet spared;
  for (const auto &st : compare(*node, root_, &spare)) {
    if (st.state == KnobState::not_read) {
      --dc.checked;
      spared.set(static_cast<unsigned>(st.knob->read_on_cpu));
      continue;
    }
    if (st.state == KnobState::match) {
      continue;
    }
    out.push_back(
        {"knobs", st.knob->key, st.knob->wanted(), st.current, std::string(to_string(st.state)), st.counts()});
    if (st.counts()) {
      dc.state = "differs";
    }
  }
  if (!spared.empty()) {
    dc.note = std::to_string(node->knobs.size() - dc.checked) + " knob(s) not read on feeder or isolated CPUs " +
              spared.str() + " (energy_perf_bias, energy_performance_preference: reading them interrupts the CPU)";
  }
  return dc;
}

namespace {

std::string plan_line(const SwitchPlan &plan) {
  const auto n = std::count_if(plan.steps.begin(), plan.steps.end(),
                               [](const PlanStep &p) { return p.action == PlanStep::Action::write; });
  return n == 0 ? "" : std::to_string(n) + " knob(s) to write back";
}

} // namespace

// Through one backend (`switch baseline -b`): that backend's baseline.
// Through Backend::automatic (`off`): every backend that changed a knob,
// the module's profile and the direct backend's record.
DomainState KnobStep::off(bool dry_run) {
  if (backend_ == Backend::automatic) {
    return off_every_backend(dry_run);
  }
  if (dry_run && backend_ == Backend::kernel) {
    return {"knobs", "planned", "the module writes back the values it captured"};
  }
  if (dry_run) {
    auto plan = plan_baseline_direct(root_);
    if (!plan) {
      return {"knobs", "failed", plan.error().message};
    }
    plan_ = std::move(*plan);
    const std::string line = plan_line(plan_);
    return {"knobs", line.empty() ? "off" : "planned", line.empty() ? "every knob on its baseline" : line};
  }
  report_ = SwitchReport{};
  if (auto st = baseline(); !st) {
    return {"knobs", "failed", st.error().message};
  }
  if (report_.written.empty()) {
    return {"knobs", "off", "every knob on its baseline"};
  }
  return {"knobs", "restored", std::to_string(report_.written.size()) + " knob(s) written back"};
}

DomainState KnobStep::off_every_backend(bool dry_run) {
  std::string detail;
  std::string failed;
  auto add = [](std::string &to, const std::string &what) { to += (to.empty() ? "" : "; ") + what; };
  if (kernel_backend_present(root_)) {
    auto a = active_profile(root_, Backend::kernel);
    if (a && !a->name.empty() && a->name != k_baseline) {
      if (dry_run) {
        add(detail, "module: the values it captured");
      } else if (auto r = restore_baseline_kernel(root_); !r) {
        add(failed, r.error().message);
      } else {
        add(detail, "module: baseline restored");
      }
    }
  }
  auto direct = direct_baseline(root_);
  if (!direct) {
    add(failed, direct.error().message);
  } else if (!direct->empty() && dry_run) {
    if (auto plan = plan_baseline_direct(root_); !plan) {
      add(failed, plan.error().message);
    } else if (const std::string line = plan_line(*plan); !line.empty()) {
      add(detail, "direct: " + line);
    }
  } else if (!direct->empty()) {
    if (auto r = restore_baseline_direct(root_); !r) {
      add(failed, r.error().message);
    } else {
      add(detail, "direct: " + std::to_string(r->written.size()) + " knob(s) written back");
      report_ = std::move(*r);
    }
  }
  if (!failed.empty()) {
    return {"knobs", "failed", failed};
  }
  if (detail.empty()) {
    return {"knobs", "off", "no knob changed by mltune"};
  }
  return {"knobs", dry_run ? "planned" : "restored", detail};
}

} // namespace mltune

namespace mltune {

std::string KnobStep::summary() const {
  const SwitchReport &r = report_;
  std::string s = "knobs: switched to '" + r.profile + "' (" + std::string(to_string(r.backend)) + " backend, " +
                  std::to_string(r.written.size()) + " knobs written";
  s += r.skipped.empty() ? ")" : ", " + std::to_string(r.skipped.size()) + " optional skipped)";
  return s;
}

} // namespace mltune
