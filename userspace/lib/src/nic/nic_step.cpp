// NicStep: the profile's [nic] tables as a transaction step (nic.hpp).
#include "mltune/nic.hpp"

#include "base/baseline.hpp"

#include <algorithm>
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

namespace mltune {

Result<DomainCheck> NicStep::check(std::vector<NodeDifference> &out) {
  DomainCheck dc{"nic", "match", 0, {}};
  if (rules_.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  if (!backend_ && !root_.shares_network()) {
    dc.state = "unchecked";
    dc.note = "NIC settings are read over netlink from the live node only";
    return dc;
  }
  if (auto st = ensure_backend(); !st) {
    dc.state = "unchecked";
    dc.note = st.error().message;
    return dc;
  }
  auto rep = nic_apply(rules_, *backend_, NicOptions{}, true);
  if (!rep) {
    dc.state = "unchecked";
    dc.note = rep.error().message;
    return dc;
  }
  for (const auto &c : rep->plan.changes) {
    out.push_back({"nic", (c.ifname.empty() ? "" : c.ifname + " ") + c.key, c.to, c.from, "differs", true});
    dc.state = "differs";
  }
  dc.checked = rep->plan.compared;
  if (!rep->skipped.empty()) {
    dc.note = std::to_string(rep->skipped.size()) + " setting(s) the devices do not support were left out";
  }
  return dc;
}

DomainState NicStep::off(bool dry_run) {
  auto b = detail::load_baseline(root_);
  if (!b) {
    return {"nic", "failed", b.error().message};
  }
  if (!b->has("nic")) {
    return {"nic", "off", "no NIC setting changed by mltune"};
  }
  if (!backend_ && !root_.shares_network()) {
    if (root_.is_node()) {
      auto st = root_.require_namespaces("nic", {"net"});
      return {"nic", "failed", st ? "no netlink backend for the node's NICs" : st.error().message};
    }
    return {"nic", "unchecked", "NIC settings are restored over netlink on a running node only, not in a file tree"};
  }
  if (auto st = ensure_backend(); !st) {
    return {"nic", "failed", st.error().message};
  }
  auto r = restore_nic_baseline(root_, *backend_, dry_run);
  if (!r) {
    return {"nic", "failed", r.error().message};
  }
  std::string detail = std::to_string(dry_run ? r->plan.changes.size() : r->applied.size()) +
                       (dry_run ? " setting(s) to restore" : " setting(s) restored");
  for (size_t i = 0; dry_run && i < r->plan.changes.size(); ++i) {
    const auto &c = r->plan.changes[i];
    detail += (i == 0 ? ": " : ", ") + (c.ifname.empty() ? "" : c.ifname + " ") + c.key + " " + c.from + " -> " + c.to;
  }
  if (!r->skipped.empty()) {
    detail += ", " + std::to_string(r->skipped.size()) + " gone since (";
    for (size_t i = 0; i < r->skipped.size(); ++i) {
      detail += (i == 0 ? "" : ", ") + r->skipped[i].ifname + " " + r->skipped[i].key;
    }
    detail += ")";
  }
  return {"nic", dry_run ? "planned" : "restored", detail};
}

} // namespace mltune

namespace mltune {

std::string NicStep::summary() const {
  if (!applied_ || applied_->applied.empty()) {
    return "nic: nothing to change";
  }
  std::vector<std::string> devs;
  for (const auto &c : applied_->applied) {
    if (!c.ifname.empty() && std::ranges::find(devs, c.ifname) == devs.end()) {
      devs.push_back(c.ifname);
    }
  }
  std::string names;
  for (const auto &d : devs) {
    names += (names.empty() ? "" : ", ") + d;
  }
  return "nic: " + std::to_string(applied_->applied.size()) + " settings changed (" + names + ")";
}

} // namespace mltune
