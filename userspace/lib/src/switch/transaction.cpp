// run_transaction() and the steps of a profile switch (transaction.hpp).
#include "mltune/transaction.hpp"

#include "mltune/compare.hpp"
#include "mltune/device_knobs.hpp"

#include <cerrno>
#include <csignal>
#include <ranges>

namespace mltune {

namespace {

void progress(const TransactionOptions &opt, const Step &s, std::string_view phase) {
  if (opt.progress) {
    opt.progress(s.name(), phase);
  }
}

// Rolls back `done` newest first; "" when every rollback succeeded, else
// what failed.
std::string roll_back(std::span<Step *const> done, const TransactionOptions &opt) {
  std::string failed;
  for (Step *s : std::views::reverse(done)) {
    progress(opt, *s, "rollback");
    if (auto st = s->rollback(); !st) {
      failed += "; rollback of " + std::string(s->name()) + " failed: " + st.error().message;
    }
  }
  return failed;
}

// The steps' names in the order they were rolled back: newest first.
std::string names_rolled_back(std::span<Step *const> steps) {
  std::string out;
  for (const Step *s : std::views::reverse(steps)) {
    out += (out.empty() ? "" : ", ") + std::string(s->name());
  }
  return out;
}

// The step's error with its name in front and what the rollback did behind.
Error abort_with(const Error &e, const Step &at, std::string_view phase, std::span<Step *const> done,
                 const TransactionOptions &opt) {
  Error out = with_context(e, std::string(at.name()) + " " + std::string(phase));
  const std::string failed = roll_back(done, opt);
  if (!failed.empty()) {
    out.message += failed;
  } else if (!done.empty()) {
    out.message += "; rolled back: " + names_rolled_back(done);
  } else {
    out.message += "; nothing was changed";
  }
  return out;
}

} // namespace

void stop_point(std::string_view stop_at, std::string_view point) {
  if (!stop_at.empty() && stop_at == point) {
    (void)::raise(SIGSTOP);
  }
}

Result<TransactionReport> run_transaction(std::span<Step *const> steps, const TransactionOptions &opt) {
  for (Step *s : steps) {
    progress(opt, *s, "plan");
    if (auto st = s->plan(); !st) {
      return with_context(st.error(), std::string(s->name()) + " plan");
    }
  }
  TransactionReport rep;
  if (opt.dry_run) {
    return rep;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    progress(opt, *steps[i], "apply");
    if (auto st = steps[i]->apply(); !st) {
      return abort_with(st.error(), *steps[i], "apply", steps.first(i), opt);
    }
    rep.applied.emplace_back(steps[i]->name());
    stop_point(opt.stop_at, std::string(steps[i]->name()) + "/applied");
    if (!opt.fail_after.empty() && steps[i]->name() == opt.fail_after) {
      return abort_with(failure("fault injected after it applied (MLTUNE_FAIL_STEP)", EIO), *steps[i], "apply",
                        steps.first(i + 1), opt);
    }
  }
  if (opt.verify) {
    for (Step *s : steps) {
      progress(opt, *s, "verify");
      if (auto st = s->verify(); !st) {
        return abort_with(st.error(), *s, "verify", steps, opt);
      }
    }
  }
  return rep;
}

// ---- kernel knobs ------------------------------------------------------------

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

// ---- NIC settings ------------------------------------------------------------

NicStep::NicStep(const Profile &profile, const Sysroot &root, std::unique_ptr<NicBackend> backend)
    : profile_(profile), root_(root), backend_(std::move(backend)) {}

Status NicStep::ensure_backend() {
  if (backend_) {
    return {};
  }
  std::vector<unsigned> feeders;
  if (feeders_) {
    feeders = feeders_();
  } else {
    auto known = nic_feeder_cpus(root_);
    if (!known) {
      return known.error();
    }
    feeders = std::move(*known);
  }
  auto be = make_live_nic_backend(root_, feeders);
  if (!be) {
    return be.error();
  }
  backend_ = std::move(*be);
  return {};
}

Status NicStep::plan() {
  planned_.reset();
  applied_.reset();
  if (profile_.nic.empty()) {
    return {};
  }
  if (!backend_ && !root_.shares_network()) {
    // A file tree has no NICs to talk to; a node in another network
    // namespace has, and a switch that cannot reach them is refused.
    return root_.is_node() ? root_.require_namespaces("nic", {"net"}) : Status{};
  }
  if (auto st = ensure_backend(); !st) {
    return st;
  }
  auto rep = nic_apply(profile_.nic, *backend_, NicOptions{}, true);
  if (!rep) {
    return rep.error();
  }
  planned_ = std::move(*rep);
  return {};
}

Status NicStep::apply() {
  if (!planned_) {
    return {};
  }
  NicOptions o;
  o.record_baseline = &root_;
  auto rep = nic_commit(planned_->plan, *backend_, o);
  if (!rep) {
    return rep.error();
  }
  applied_ = std::move(*rep);
  return {};
}

Status NicStep::baseline() {
  if (!backend_ && !root_.shares_network()) {
    return {};
  }
  if (auto st = ensure_backend(); !st) {
    return st;
  }
  auto rep = restore_nic_baseline(root_, *backend_);
  return rep ? Status{} : Status(rep.error());
}

Status NicStep::verify() {
  if (!applied_) {
    return {};
  }
  auto rep = nic_apply(profile_.nic, *backend_, NicOptions{}, true);
  if (!rep) {
    return rep.error();
  }
  if (const auto &left = rep->plan.changes; !left.empty()) {
    std::string what;
    for (const auto &c : left) {
      what += (what.empty() ? "" : ", ") + c.ifname + " " + c.key + " reads " + c.from + ", wanted " + c.to;
    }
    return failure(std::to_string(left.size()) + " NIC setting(s) do not read back: " + what);
  }
  return {};
}

Status NicStep::rollback() {
  if (!applied_) {
    return {};
  }
  // The inverse of what was applied, newest first: one transaction again.
  NicPlan back;
  for (const auto &c : std::views::reverse(applied_->applied)) {
    back.changes.push_back({c.ifname, c.key, c.to, c.from, c.origin});
  }
  auto rep = nic_commit(back, *backend_, NicOptions{});
  if (!rep) {
    return rep.error();
  }
  applied_.reset();
  return {};
}

} // namespace mltune
