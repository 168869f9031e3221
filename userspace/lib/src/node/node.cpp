// The node as one unit (mltune/node.hpp): the profile switch over every
// domain, the check of every domain, status, off and switch baseline.
#include "mltune/node.hpp"

#include "base/baseline.hpp"
#include "base/file_lock.hpp"
#include "mltune/boot.hpp"
#include "mltune/compare.hpp"
#include "mltune/config.hpp"
#include "mltune/device_knobs.hpp"
#include "mltune/feeder.hpp"
#include "mltune/parse.hpp"
#include "mltune/persist.hpp"
#include "mltune/pool.hpp"
#include "node/config_revert.hpp"
#include "node/domains.hpp"

#include <algorithm>
#include <cerrno>

namespace mltune {

// ---- the node lock -------------------------------------------------------------

struct NodeLock::Held {
  FileLock lock;
};

NodeLock::NodeLock(std::unique_ptr<Held> h) : held_(std::move(h)) {}
NodeLock::NodeLock(NodeLock &&) noexcept = default;
NodeLock &NodeLock::operator=(NodeLock &&) noexcept = default;
NodeLock::~NodeLock() = default;

Result<std::optional<NodeLock>> NodeLock::acquire_if(const Sysroot &root, bool changes) {
  if (!changes) {
    return std::optional<NodeLock>{};
  }
  auto l = acquire(root);
  if (!l) {
    return l.error();
  }
  return std::optional<NodeLock>(std::move(*l));
}

void NodeLock::remove_on_release() {
  held_->lock.remove_on_release();
}

Result<NodeLock> NodeLock::acquire(const Sysroot &root) {
  auto l = FileLock::acquire(root, k_node_lock);
  if (!l) {
    if (l.error().sys_errno == EACCES || l.error().sys_errno == EPERM) {
      // Not root: say what it takes, not which file refused.
      return Error{Errc::failed,
                   "changing the node needs root (CAP_SYS_ADMIN; the resident switcher takes the same) (" +
                       l.error().message + ")",
                   l.error().sys_errno};
    }
    return with_context(l.error(), "taking the node lock");
  }
  l->pass_to_children(); // modprobe keeps it (module_step.cpp)
  return NodeLock(std::make_unique<Held>(Held{std::move(*l)}));
}

// ---- switch ----------------------------------------------------------------------

ProfileSwitch::ProfileSwitch(const Profile &profile, const Sysroot &root, Backend backend, const NodeSeams &seams)
    : profile_(profile), root_(root), backend_(backend),
      domains_(std::make_unique<detail::NodeDomains>(root, &profile, backend, seams)) {}

namespace {
std::unique_ptr<NodeConfig> measured_config(const ProfileSwitch::Measured &m) {
  auto cfg = std::make_unique<NodeConfig>();
  cfg->source = "mltunectl prove";
  cfg->feeder_cpus = m.feeder;
  cfg->feeder_mechanism = m.feeder_request.mechanism;
  cfg->feeder_partition = m.feeder_request.partition;
  return cfg;
}
} // namespace

ProfileSwitch::ProfileSwitch(const Profile &profile, const Sysroot &root, Backend backend, const Measured &measured,
                             const NodeSeams &seams)
    : profile_(profile), root_(root), backend_(backend), measured_(measured_config(measured)),
      domains_(std::make_unique<detail::NodeDomains>(root, &profile, backend, seams, measured_.get())) {}

ProfileSwitch::~ProfileSwitch() = default;

ModuleStep &ProfileSwitch::modules() {
  return domains_->modules();
}
KnobStep &ProfileSwitch::knobs() {
  return domains_->knobs();
}
NicStep &ProfileSwitch::nic() {
  return domains_->nic();
}
SchedStep &ProfileSwitch::sched() {
  return domains_->sched();
}
BootStep &ProfileSwitch::boot() {
  return domains_->boot();
}

Result<TransactionReport> ProfileSwitch::run(const TransactionOptions &opt) {
  auto lock = NodeLock::acquire_if(root_, !opt.dry_run);
  if (!lock) {
    return lock.error();
  }
  domains_->modules().stop_at(opt.stop_at);
  auto r = run_transaction(
      domains_->steps(measured_ != nullptr ? detail::NodeOp::prove : detail::NodeOp::profile_switch), opt);
  if (r && r->rolled_back) {
    return r; // as before it: nothing to record
  }
  if (r && !opt.dry_run) {
    if (auto st = record_profile(root_, profile_); !st) {
      return with_context(st.error(), "recording the switched profile");
    }
  }
  if (r && !opt.dry_run && backend_ == Backend::kernel) {
    // The module's uevent wakes the follower: it has nothing left to do.
    if (auto st = note_followed(root_, profile_.name); !st) {
      return with_context(st.error(), "recording the switch for mltunectl follow");
    }
  }
  return r;
}

// ---- check -------------------------------------------------------------------------

bool NodeCheck::matches() const {
  return std::ranges::none_of(differences, [](const NodeDifference &d) { return d.counts; });
}

Result<NodeCheck> check_node(const Profile &profile, const Sysroot &root, const NodeSeams &seams) {
  detail::NodeDomains domains(root, &profile, Backend::automatic, seams);
  NodeCheck c;
  for (Step *step : domains.steps(detail::NodeOp::check)) {
    auto dc = step->check(c.differences);
    if (!dc) {
      return dc.error();
    }
    c.domains.push_back(std::move(*dc));
  }
  return c;
}

// ---- status ------------------------------------------------------------------------

namespace {

bool out_of_line_state(const DomainState &d) {
  return d.state == "drifted" || d.state == "failed" || d.state == "rolled-back";
}

// One domain's check as status reports it.
DomainState checked_state(const DomainCheck &d, const NodeCheck &c, const std::string &profile) {
  const std::string state = d.state == "match"            ? "applied"
                            : d.state == "differs"        ? "drifted"
                            : d.state == "not-applicable" ? "off"
                                                          : d.state;
  std::string detail = std::to_string(d.checked) + " checked";
  const auto n = std::count_if(c.differences.begin(), c.differences.end(),
                               [&](const NodeDifference &x) { return x.domain == d.domain && x.counts; });
  if (n > 0) {
    detail += ", " + std::to_string(n) + " differ";
  }
  if (d.state == "not-applicable") {
    detail = "nothing in profile " + profile;
  }
  if (!d.note.empty()) {
    detail += (detail.empty() ? "" : "; ") + d.note;
  }
  return {d.domain, state, detail};
}

// What the follower did last, as a status line (none before the first
// follow of the boot).
std::optional<DomainState> follow_line(const Sysroot &root) {
  if (!kernel_backend_present(root)) {
    return std::nullopt;
  }
  auto f = follow_state(root);
  if (!f || !*f) {
    return std::nullopt;
  }
  const FollowRecord &l = (*f)->last;
  std::string d = "generation " + std::to_string(l.generation) + ": in line with '" + l.in_line + "'";
  if ((*f)->last_failure && (*f)->last_failure->generation != l.generation) {
    d += "; last failure at generation " + std::to_string((*f)->last_failure->generation) + " ('" +
         (*f)->last_failure->profile + "'): " + (*f)->last_failure->error;
  } else if (!l.error.empty()) {
    d += ": " + l.error;
  }
  return DomainState{"follow", l.result == "ok" ? "applied" : l.result, d};
}

} // namespace

bool NodeStatus::in_line() const {
  // A profile that could not be checked (its file gone or changed, or
  // defined in the module only) is not in line: status, metrics and
  // conformance say the same.
  return !profile.empty() && !fingerprint.empty() && std::ranges::none_of(domains, out_of_line_state);
}

std::string NodeStatus::out_of_line() const {
  if (profile.empty()) {
    return "no profile active";
  }
  std::string out;
  if (fingerprint.empty()) {
    // The profile could not be checked: its domains say why, alike
    // ("profile 'gpunode': ... has changed since: switch to it again").
    const auto u = std::ranges::find_if(domains, [](const DomainState &d) { return d.state == "unchecked"; });
    out = u != domains.end() ? u->detail : "profile '" + profile + "' could not be checked";
  }
  for (const auto &d : domains) {
    if (out_of_line_state(d)) {
      out += (out.empty() ? "" : ", ") + d.domain + " " + d.state;
    }
  }
  return out;
}

Result<NodeStatus> node_status(const Sysroot &root, const NodeSeams &seams) {
  NodeStatus s;
  s.backend = choose_backend(root, Backend::automatic);
  auto active = active_profile(root, s.backend);
  if (!active) {
    return active.error();
  }
  s.profile = active->name == k_baseline ? "" : active->name;
  detail::NodeDomains none(root, nullptr, s.backend, seams);
  if (s.profile.empty()) {
    for (const Step *d : none.steps(detail::NodeOp::check)) {
      s.domains.push_back({std::string(d->name()), "off", "no profile active"});
    }
  } else if (auto p = load_active_profile(root, s.profile); !p) {
    // A profile defined in the module only, or a file that no longer loads.
    for (const Step *d : none.steps(detail::NodeOp::check)) {
      s.domains.push_back({std::string(d->name()), "unchecked", "profile '" + s.profile + "': " + p.error().message});
    }
  } else {
    s.fingerprint = profile_fingerprint(*p);
    auto c = check_node(*p, root, seams);
    if (!c) {
      return c.error();
    }
    for (const auto &d : c->domains) {
      s.domains.push_back(checked_state(d, *c, s.profile));
    }
    s.differences = std::move(c->differences);
  }
  if (auto f = follow_line(root)) {
    s.domains.push_back(std::move(*f));
  }
  for (Step *step : none.steps(detail::NodeOp::status)) {
    if (auto st = step->state()) {
      s.domains.push_back(std::move(*st));
    }
  }
  s.domains.push_back(persist_state(root));
  return s;
}

// ---- off ---------------------------------------------------------------------------

bool OffReport::ok() const {
  return std::ranges::none_of(domains, [](const DomainState &d) { return d.state == "failed"; });
}

bool BaselineReport::ok() const {
  return std::ranges::none_of(domains, [](const DomainState &d) { return d.state == "failed"; });
}

Result<BaselineReport> switch_to_baseline(const Sysroot &root, Backend backend, const NodeSeams &seams, bool dry_run) {
  auto lock = NodeLock::acquire_if(root, !dry_run);
  if (!lock) {
    return lock.error();
  }
  BaselineReport rep;
  rep.plan.profile = std::string(k_baseline);
  // The running profile's domains, newest first (node/domains.cpp): a knob
  // of a module mltune loaded goes back before the module.
  detail::NodeDomains domains(root, nullptr, backend, seams);
  for (Step *step : domains.steps(detail::NodeOp::to_baseline)) {
    rep.domains.push_back(step->off(dry_run));
  }
  rep.knobs = domains.knobs().report();
  rep.knobs.backend = backend;
  rep.knobs.profile = std::string(k_baseline);
  if (dry_run) {
    rep.plan = domains.knobs().switch_plan();
    rep.plan.profile = std::string(k_baseline);
    return rep;
  }
  if (backend == Backend::kernel) {
    // The module's uevent wakes the follower: it has nothing left to do.
    if (auto st = note_followed(root, std::string(k_baseline)); !st) {
      rep.domains.push_back({"follow", "failed", st.error().message});
    }
  }
  if (auto st = forget_profile(root); !st) {
    rep.domains.push_back({"profile", "failed", st.error().message});
  }
  return rep;
}

Result<OffReport> node_off(const Sysroot &root, const NodeSeams &seams) {
  auto lock = NodeLock::acquire(root);
  if (!lock) {
    return lock.error();
  }
  OffReport rep;
  rep.domains.push_back(persist_off(root));
  // The record of this boot's configuration applies goes: every domain it
  // changed goes back below.
  if (auto st = detail::forget_config(root); !st) {
    rep.domains.push_back({"config", "failed", st.error().message});
  }
  // Every domain, newest first (node/domains.cpp); the knobs through every
  // backend that changed one.
  detail::NodeDomains domains(root, nullptr, Backend::automatic, seams);
  for (Step *step : domains.steps(detail::NodeOp::off)) {
    rep.domains.push_back(step->off(false));
  }
  if (auto st = note_followed(root, std::string(k_baseline)); !st) {
    rep.domains.push_back({"follow", "failed", st.error().message});
  }
  if (auto st = forget_profile(root); !st) {
    rep.domains.push_back({"profile", "failed", st.error().message});
  }
  lock->remove_on_release();
  return rep;
}

} // namespace mltune
