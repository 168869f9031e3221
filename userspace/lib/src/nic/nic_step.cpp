// NicStep: the profile's [nic] tables as a transaction step (nic.hpp).
#include "mltune/nic.hpp"

#include <ranges>

namespace mltune {

NicStep::NicStep(std::span<const NicRule> rules, const Sysroot &root, std::unique_ptr<NicBackend> backend)
    : rules_(rules), root_(root), backend_(std::move(backend)) {}

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
  if (rules_.empty()) {
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
  auto rep = nic_apply(rules_, *backend_, NicOptions{}, true);
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
  auto rep = nic_apply(rules_, *backend_, NicOptions{}, true);
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
