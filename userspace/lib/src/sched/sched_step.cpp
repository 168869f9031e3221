// SchedStep: the profile's scheduler rules as a transaction step
// (sched.hpp).
#include "mltune/sched.hpp"

#include <algorithm>

namespace mltune {

SchedStep::SchedStep(std::span<const SchedRule> rules, const Sysroot &root, SchedSystem *sys)
    : rules_(rules), sys_(sys) {
  if (sys_ == nullptr && root.acts_on_node()) {
    live_ = make_live_sched_system(root);
    sys_ = live_.get();
  } else if (sys_ == nullptr && root.is_node() && !rules_.empty()) {
    unreachable_ = root.require_namespaces("sched rules", {"pid", "net"});
  }
}

Status SchedStep::plan() {
  applied_.reset();
  if (!unreachable_) {
    return unreachable_;
  }
  if (!active()) {
    return {};
  }
  for (const auto &r : rules_) {
    if (r.cpus.empty()) {
      continue;
    }
    if (auto c = resolve_placement(sys_->root(), r.cpus, ""); !c) {
      return with_context(c.error(), "rule " + r.name + " (" + r.origin + "): cpus '" + r.cpus + "'");
    }
  }
  return {};
}

Status SchedStep::apply() {
  if (!active()) {
    return {};
  }
  auto rep = sched_apply(*sys_, rules_, SchedOptions{});
  if (!rep) {
    return rep.error();
  }
  applied_ = std::move(*rep);
  const auto bad = std::find_if(applied_->actions.begin(), applied_->actions.end(),
                                [](const SchedAction &a) { return a.result == "failed"; });
  if (bad != applied_->actions.end()) {
    return failure("thread " + std::to_string(bad->tid) + " \"" + bad->comm + "\" (rule " + bad->rule +
                   "): " + bad->message);
  }
  return {};
}

Status SchedStep::verify() {
  if (!active()) {
    return {};
  }
  std::string differs;
  size_t n = 0;
  for (const auto &e : sched_list(*sys_, rules_, std::nullopt)) {
    const auto r = std::find_if(rules_.begin(), rules_.end(), [&](const SchedRule &x) { return x.name == e.rule; });
    if (r == rules_.end()) {
      continue;
    }
    if (sched_attr_holds(e.attr, r->attr) || (r->fallback && sched_attr_holds(e.attr, *r->fallback))) {
      continue;
    }
    differs += (n++ == 0 ? "" : ", ") + std::to_string(e.thread.tid) + " \"" + e.thread.comm + "\" is " +
               e.attr.describe() + ", rule " + r->name + " wants " + r->attr.describe();
  }
  if (n > 0) {
    return failure(std::to_string(n) + " thread(s) do not hold their rule: " + differs);
  }
  return {};
}

Status SchedStep::rollback() {
  if (!applied_) {
    return {};
  }
  SchedOptions o;
  for (const auto &a : applied_->actions) {
    if (a.result == "applied" || a.result == "fallback") {
      o.tids.push_back(a.tid);
    }
  }
  applied_.reset();
  if (o.tids.empty()) {
    return {};
  }
  auto rep = sched_reset(*sys_, o);
  return rep ? Status{} : Status(rep.error());
}

Status SchedStep::baseline() {
  if (sys_ == nullptr) {
    return {};
  }
  auto rep = sched_reset(*sys_, SchedOptions{});
  return rep ? Status{} : Status(rep.error());
}

} // namespace mltune
