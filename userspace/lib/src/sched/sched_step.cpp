// SchedStep: the profile's scheduler rules as a transaction step
// (sched.hpp).
#include "mltune/sched.hpp"

#include <algorithm>

namespace mltune {

SchedStep::SchedStep(std::span<const SchedRule> rules, const Sysroot &root, SchedSystem *sys)
    : rules_(rules), root_(root), sys_(sys) {
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
    const auto r = std::ranges::find_if(rules_, [&](const SchedRule &x) { return x.name == e.rule; });
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

namespace mltune {

Result<DomainCheck> SchedStep::check(std::vector<NodeDifference> &out) {
  DomainCheck dc{"sched", "match", 0, {}};
  if (rules_.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  if (sys_ == nullptr) {
    dc.state = "unchecked";
    dc.note = "thread policies are read on a running node that shares its PID namespace, not in a file tree";
    return dc;
  }
  for (const auto &e : sched_list(*sys_, rules_, std::nullopt)) {
    const auto r = std::ranges::find_if(rules_, [&](const SchedRule &x) { return x.name == e.rule; });
    if (r == rules_.end()) {
      continue;
    }
    ++dc.checked;
    if (sched_attr_holds(e.attr, r->attr) || (r->fallback && sched_attr_holds(e.attr, *r->fallback))) {
      continue;
    }
    out.push_back({"sched", std::to_string(e.thread.tid) + " \"" + e.thread.comm + "\"", r->attr.describe(),
                   e.attr.describe(), "differs", true});
    dc.state = "differs";
  }
  if (dc.checked == 0) {
    dc.note = "no thread matches a rule now";
  }
  return dc;
}

DomainState SchedStep::off(bool dry_run) {
  if (sys_ == nullptr) {
    auto st = root_.require_namespaces("sched", {"pid", "net"});
    return {"sched", root_.is_node() ? "failed" : "unchecked",
            st ? "thread policies are restored on a running node only" : st.error().message};
  }
  SchedOptions opt;
  opt.dry_run = dry_run;
  auto r = sched_reset(*sys_, opt);
  if (!r) {
    return {"sched", "failed", r.error().message};
  }
  if (r->actions.empty()) {
    return {"sched", "off", "no thread policy changed by mltune"};
  }
  if (dry_run) {
    const auto alive =
        std::count_if(r->actions.begin(), r->actions.end(), [](const SchedAction &a) { return a.result == "dry-run"; });
    return {"sched", "planned",
            std::to_string(alive) + " thread(s) to restore, " + std::to_string(r->actions.size() - alive) +
                " gone since"};
  }
  const auto restored =
      std::count_if(r->actions.begin(), r->actions.end(), [](const SchedAction &a) { return a.result == "restored"; });
  const auto failed =
      std::count_if(r->actions.begin(), r->actions.end(), [](const SchedAction &a) { return a.result == "failed"; });
  if (failed > 0) {
    return {"sched", "failed", std::to_string(failed) + " thread(s) could not be restored (see sched list)"};
  }
  return {"sched", "restored",
          std::to_string(restored) + " thread(s) restored, " + std::to_string(r->actions.size() - restored) +
              " gone since"};
}

} // namespace mltune

namespace mltune {

std::string SchedStep::summary() const {
  if (!applied_ || applied_->actions.empty()) {
    return "sched: no thread to change";
  }
  return "sched: " + std::to_string(applied_->actions.size()) + " thread(s) set";
}

} // namespace mltune
