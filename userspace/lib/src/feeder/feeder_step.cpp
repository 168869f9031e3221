// FeederStep: the feeder cores of the node configuration as a transaction
// step (feeder.hpp).
#include "mltune/feeder.hpp"

namespace mltune {

namespace {

Status in_context(const Status &st, std::string_view what) {
  return st ? st : Status(with_context(st.error(), what));
}

} // namespace

FeederStep::FeederStep(const Sysroot &root, std::string cpus, FeederRequest request, FeederOs *os)
    : root_(root), spec_(std::move(cpus)), request_(std::move(request)), os_(os) {}

FeederOs &FeederStep::os() {
  if (os_ == nullptr) {
    live_os_ = make_live_feeder_os(root_);
    os_ = live_os_.get();
  }
  return *os_;
}

Status FeederStep::plan() {
  auto st = feeder_status(root_);
  if (!st) {
    return with_context(st.error(), "feeder");
  }
  before_ = st->state;
  if (spec_.empty()) {
    return {};
  }
  // Named in the configuration file's terms: this step runs its [feeder].
  auto c = resolve_feeder_cpus(root_, spec_, "[feeder] cpus");
  if (!c) {
    return with_context(c.error(), "feeder");
  }
  cpus_ = c->first;
  auto hk = feeder_housekeeping(root_, cpus_, c->second);
  if (!hk) {
    return with_context(hk.error(), "feeder");
  }
  housekeeping_ = *hk;
  if (auto ch = choose_mechanism(root_, read_boot_isolation(root_), request_); !ch) {
    return with_context(ch.error(), "feeder");
  }
  return {};
}

Status FeederStep::apply() {
  if (spec_.empty()) {
    after_ = FeederState{};
    return in_context(feeder_off(root_, os()), "feeder off");
  }
  auto s = feeder_on(root_, os(), cpus_, housekeeping_, request_);
  if (!s) {
    return with_context(s.error(), "feeder on " + cpus_.str());
  }
  after_ = *s;
  return {};
}

Status FeederStep::verify() {
  auto st = feeder_status(root_);
  if (!st) {
    return with_context(st.error(), "feeder");
  }
  if (spec_.empty() ? st->state.active : !(st->state.active && st->state.cpus == cpus_)) {
    return failure("feeder: state is " + std::string(st->state.active ? "on " + st->state.cpus.str() : "off") +
                   ", not " + (spec_.empty() ? std::string("off") : "on " + cpus_.str()));
  }
  return {};
}

Status FeederStep::rollback() {
  if (!before_.active) {
    return in_context(feeder_off(root_, os()), "feeder: rollback");
  }
  const FeederRequest was{before_.mechanism, before_.partition.empty() ? "root" : before_.partition};
  auto s = feeder_on(root_, os(), before_.cpus, before_.housekeeping, was);
  return s ? Status{} : with_context(s.error(), "feeder: rollback to " + before_.cpus.str());
}

Status FeederStep::baseline() {
  return in_context(feeder_off(root_, os()), "feeder off");
}

std::string FeederStep::summary() const {
  if (spec_.empty()) {
    return "feeder: off";
  }
  const std::string how =
      after_.partition == "isolated" ? after_.mechanism + " (isolated partition)" : after_.mechanism;
  return "feeder: on, CPUs " + after_.cpus.str() + " with " + how + ", housekeeping " + after_.housekeeping.str();
}

} // namespace mltune

namespace mltune {

std::optional<DomainState> FeederStep::state() {
  auto st = feeder_status(root_);
  if (!st) {
    return DomainState{"feeder", "unchecked", st.error().message};
  }
  if (!st->state.active) {
    return DomainState{"feeder", "off", "no feeder cores"};
  }
  return DomainState{"feeder", "applied", "CPUs " + st->state.cpus.str() + " (" + st->state.mechanism + ")"};
}

DomainState FeederStep::off(bool dry_run) {
  auto st = feeder_status(root_);
  if (!st) {
    return {"feeder", "failed", st.error().message};
  }
  if (!st->state.active) {
    return {"feeder", "off", "no feeder cores"};
  }
  const std::string cpus = st->state.cpus.str();
  if (dry_run) {
    return {"feeder", "planned", "feeder cores " + cpus + " off"};
  }
  if (auto r = baseline(); !r) {
    return {"feeder", "failed", r.error().message};
  }
  return {"feeder", "restored", "feeder cores " + cpus + " off"};
}

} // namespace mltune
