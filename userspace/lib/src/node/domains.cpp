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
// baseline itself.
constexpr std::array k_domains{
    Domain{"modules", k_switch | k_follow | k_reset | k_config},
    Domain{"knobs", k_switch | k_follow | k_config},
    Domain{"feeder", k_config},
    Domain{"nic", k_switch | k_follow | k_reset | k_config},
    Domain{"sched", k_switch | k_follow | k_reset},
    Domain{"pool", k_config},
    Domain{"boot", k_switch},
};

} // namespace

NodeDomains::NodeDomains(const Sysroot &root, const Profile *profile, Backend backend, const NodeSeams &seams,
                         const NodeConfig *cfg)
    : profile_(profile != nullptr ? *profile : none_), has_profile_(profile != nullptr), cfg_(cfg),
      modules_(profile_.modules, root, seams.modules), knobs_(profile_, root, backend),
      nic_(profile_.nic, root, seams.nic ? seams.nic() : nullptr), sched_(profile_.sched_rules, root, seams.sched),
      boot_(profile_, root) {
  if (cfg_ != nullptr && cfg_->feeder_cpus) {
    feeder_.emplace(root, *cfg_->feeder_cpus, FeederRequest{cfg_->feeder_mechanism, cfg_->feeder_partition},
                    seams.feeder);
    // The NIC plan keeps IRQs and RPS off the feeder CPUs this transaction
    // puts in force (planned before either applies).
    nic_.feeders_from([this] { return feeder_->planned_cpus().cpus(); });
  }
  if (cfg_ != nullptr && (!cfg_->pool.empty() || cfg_->user_quota)) {
    pool_.emplace(root, cfg_->pool, cfg_->user_quota);
  }
}

bool NodeDomains::present(std::string_view domain) const {
  if (domain == "feeder") {
    return feeder_.has_value();
  }
  if (domain == "pool") {
    return pool_.has_value();
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
    return feeder();
  }
  if (domain == "nic") {
    return &nic_;
  }
  if (domain == "sched") {
    return &sched_;
  }
  if (domain == "pool") {
    return pool();
  }
  return &boot_;
}

std::vector<Step *> NodeDomains::steps(NodeOp op) {
  std::vector<Step *> out;
  for (const Domain &d : k_domains) {
    if ((d.ops & bit(op)) != 0 && present(d.name)) {
      out.push_back(step(d.name));
    }
  }
  if (op == NodeOp::follow_reset) {
    // Back to the baseline: newest first.
    std::ranges::reverse(out);
  }
  return out;
}

} // namespace mltune::detail
