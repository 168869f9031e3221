// The ordered domain list of a node (node/domains.hpp).
#include "node/domains.hpp"

#include <algorithm>
#include <array>

namespace mltune::detail {

namespace {

constexpr unsigned bit(NodeOp op) {
  return static_cast<unsigned>(op);
}

constexpr unsigned k_switch = bit(NodeOp::profile_switch);
constexpr unsigned k_follow = bit(NodeOp::follow);
constexpr unsigned k_reset = bit(NodeOp::follow_reset);
constexpr unsigned k_config = bit(NodeOp::config);
constexpr unsigned k_check = bit(NodeOp::check);
constexpr unsigned k_status = bit(NodeOp::status);
constexpr unsigned k_off = bit(NodeOp::off);
constexpr unsigned k_to_baseline = bit(NodeOp::to_baseline);
constexpr unsigned k_prove = bit(NodeOp::prove);
constexpr unsigned k_reads = k_check | k_status | k_off | k_to_baseline;

struct Domain {
  std::string_view name;
  unsigned ops; // the NodeOp bits that take it
};

// The one list, in apply order (why this order: node/domains.hpp).  The
// intended differences between the operations are the bits: the follower
// leaves the boot parameters to `switch` (it runs at every profile change
// the module makes, a reboot is the administrator's call); `config apply`
// sets no thread policies (the follower or a switch does, for the threads
// of the jobs) and no boot parameters (`persist` writes those); the feeder
// cores and the pool are settings of the node configuration only; the
// follower's reset leaves the knobs to the module, which went to its
// baseline itself.  A profile's domains are checked against it (verify);
// the node configuration's and the boot parameters have a state of their
// own (active); `off` takes every domain; `switch baseline` the running
// profile's (the boot parameters, the feeder cores and the pool are not
// the running profile's).
constexpr std::array k_domains{
    Domain{"modules", k_switch | k_follow | k_reset | k_config | k_check | k_off | k_to_baseline | k_prove},
    Domain{"knobs", k_switch | k_follow | k_config | k_check | k_off | k_to_baseline | k_prove},
    Domain{"feeder", k_config | k_status | k_off | k_prove},
    Domain{"nic", k_switch | k_follow | k_reset | k_config | k_check | k_off | k_to_baseline | k_prove},
    Domain{"sched", k_switch | k_follow | k_reset | k_check | k_off | k_to_baseline | k_prove},
    Domain{"hugepages", k_switch | k_follow | k_reset | k_config | k_check | k_off | k_to_baseline | k_prove},
    Domain{"pool", k_config | k_status | k_off},
    Domain{"boot", k_switch | k_status | k_off},
};

// The node configuration's counts over the profile's, per size and node.
std::vector<HugePageSetting> hugepages_over(const std::vector<HugePageSetting> &profile, const NodeConfig *cfg) {
  std::vector<HugePageSetting> out = profile;
  if (cfg == nullptr) {
    return out;
  }
  for (const auto &c : cfg->hugepages) {
    const auto it =
        std::ranges::find_if(out, [&](const auto &o) { return o.page_kib == c.page_kib && o.node == c.node; });
    if (it != out.end()) {
      *it = c;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

} // namespace

NodeDomains::NodeDomains(const Sysroot &root, const Profile *profile, Backend backend, const NodeSeams &seams,
                         const NodeConfig *cfg)
    : profile_(profile != nullptr ? *profile : none_), has_profile_(profile != nullptr), cfg_(cfg),
      has_feeder_(cfg_ != nullptr && cfg_->feeder_cpus),
      has_pool_(cfg_ != nullptr && (!cfg_->pool.empty() || cfg_->user_quota)),
      hugepage_settings_(hugepages_over(profile_.hugepages, cfg_)), modules_(profile_.modules, root, seams.modules),
      knobs_(profile_, root, backend),
      feeder_(root, has_feeder_ ? *cfg_->feeder_cpus : std::string(),
              has_feeder_ ? FeederRequest{cfg_->feeder_mechanism, cfg_->feeder_partition} : FeederRequest{},
              seams.feeder),
      nic_(profile_.nic, root, seams.nic ? seams.nic() : nullptr), sched_(profile_.sched_rules, root, seams.sched),
      hugepages_(hugepage_settings_, root),
      pool_(root, has_pool_ ? cfg_->pool : std::vector<std::pair<int, std::uint64_t>>{},
            has_pool_ ? cfg_->user_quota : std::nullopt),
      boot_(profile_, root) {
  // Verify and metrics leave the knobs read on the feeder cores and
  // boot-isolated CPUs unread (reading interrupts them).
  knobs_.spare_cpus([&root] { return quiet_cpus(root); });
  if (has_feeder_) {
    // The NIC plan keeps IRQs and RPS off the feeder CPUs this transaction
    // puts in force (planned before either applies).
    nic_.feeders_from([this] { return feeder_.planned_cpus().cpus(); });
  }
}

bool NodeDomains::present(std::string_view domain, NodeOp op) const {
  if ((bit(op) & k_reads) != 0) {
    return true;
  }
  if (domain == "feeder") {
    return has_feeder_;
  }
  if (domain == "pool") {
    return has_pool_;
  }
  if (domain == "hugepages") {
    // Without [hugepages] in the profile or the configuration, the counts
    // stay as they are.
    return !hugepage_settings_.empty();
  }
  return has_profile_;
}

Step *NodeDomains::step(std::string_view domain) {
  if (domain == "modules") {
    return &modules_;
  }
  if (domain == "knobs") {
    return &knobs_;
  }
  if (domain == "feeder") {
    return &feeder_;
  }
  if (domain == "nic") {
    return &nic_;
  }
  if (domain == "hugepages") {
    return &hugepages_;
  }
  if (domain == "sched") {
    return &sched_;
  }
  if (domain == "pool") {
    return &pool_;
  }
  return &boot_;
}

bool NodeDomains::takes(std::string_view domain, NodeOp op) {
  return std::ranges::any_of(k_domains, [&](const Domain &d) { return d.name == domain && (d.ops & bit(op)) != 0; });
}

std::vector<Step *> NodeDomains::steps(NodeOp op) {
  std::vector<Step *> out;
  for (const Domain &d : k_domains) {
    if ((d.ops & bit(op)) != 0 && present(d.name, op)) {
      out.push_back(step(d.name));
    }
  }
  if (op == NodeOp::follow_reset || op == NodeOp::off || op == NodeOp::to_baseline) {
    // Back to the baseline: newest first.
    std::ranges::reverse(out);
  }
  return out;
}

} // namespace mltune::detail

namespace mltune {

std::vector<std::string_view> checked_domains() {
  std::vector<std::string_view> out;
  for (const auto &d : detail::k_domains) {
    if ((d.ops & detail::k_check) != 0) {
      out.push_back(d.name);
    }
  }
  return out;
}

} // namespace mltune
