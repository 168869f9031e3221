// The ordered domain list of a node (node/domains.cpp): every domain a
// transaction over the node can take, each once, in the one order they
// apply in, with the operations that take it written beside it.  A switch,
// the follower and `config apply` take their steps from here; none builds a
// step list of its own.
//
// The order: the profile's kernel modules before its knobs (a knob may
// need a module: tcp_congestion_control = bbr needs tcp_bbr); the feeder
// cores before the NIC settings (the NIC plan places queue IRQs and RPS on
// the CPUs the feeder leaves, planned before either applies); the threads
// after both (a rule may place threads on the feeder cores); the memory
// reservations, hugetlbfs pages then the pool, last of what changes the
// running node (a reservation can fail only when it is made: the kernel
// may give fewer pages than asked, and then every step before goes back);
// the boot parameters after
// everything (they only write the next boot's drop-in).  Putting domains
// back on their baseline runs the list newest first.
#pragma once

#include "mltune/boot.hpp"
#include "mltune/config.hpp"
#include "mltune/feeder.hpp"
#include "mltune/hugetlb.hpp"
#include "mltune/modules.hpp"
#include "mltune/nic.hpp"
#include "mltune/node.hpp"
#include "mltune/pool.hpp"
#include "mltune/profile.hpp"
#include "mltune/sched.hpp"
#include "mltune/step.hpp"
#include "mltune/switch.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace mltune::detail {

// The operations over the node list, one bit each.
enum class NodeOp : unsigned {
  profile_switch = 1U << 0, // ProfileSwitch: `switch`
  follow = 1U << 1,         // the follower applying the module's profile
  follow_reset = 1U << 2,   // the follower putting user space on the baseline
  config = 1U << 3,         // apply_config(): `config apply`
  // What reads or restores the node, whatever the profile and the
  // configuration name: every domain listed takes part.
  check = 1U << 4,       // check_node(): verify, active, metrics (Step::check)
  status = 1U << 5,      // node_status(): the domains with a state of their own (Step::state)
  off = 1U << 6,         // node_off(): every domain back on its baseline (Step::off), newest first
  to_baseline = 1U << 7, // switch_to_baseline(): the running profile's domains (Step::off), newest first
  // `prove` and its measured switch: the running node's domains of the
  // profile and, when asked, the feeder cores; no boot parameters (they
  // act only after a reboot, which a measurement cannot wait for).
  prove = 1U << 8,
};

class NodeDomains {
public:
  // `profile` null: no profile, so none of its domains (modules, knobs, NIC,
  // threads, boot) takes part; `cfg` null: none of the node
  // configuration's (feeder, pool).
  NodeDomains(const Sysroot &root, const Profile *profile, Backend backend, const NodeSeams &seams,
              const NodeConfig *cfg = nullptr);

  // The steps `op` takes, in list order (newest first for off and
  // to_baseline); for a transaction, those of a domain without settings
  // here (no feeder in the configuration, no pool) are left out.
  [[nodiscard]] std::vector<Step *> steps(NodeOp op);
  // Whether the list gives `op` to `domain`.
  [[nodiscard]] static bool takes(std::string_view domain, NodeOp op);

  [[nodiscard]] ModuleStep &modules() { return modules_; }
  [[nodiscard]] KnobStep &knobs() { return knobs_; }
  [[nodiscard]] NicStep &nic() { return nic_; }
  [[nodiscard]] SchedStep &sched() { return sched_; }
  [[nodiscard]] BootStep &boot() { return boot_; }
  // Null where the node configuration has no such setting.
  [[nodiscard]] FeederStep *feeder() { return has_feeder_ ? &feeder_ : nullptr; }
  [[nodiscard]] PoolStep *pool() { return has_pool_ ? &pool_ : nullptr; }

private:
  [[nodiscard]] Step *step(std::string_view domain);
  [[nodiscard]] bool present(std::string_view domain, NodeOp op) const;

  const Profile none_;
  const Profile &profile_;
  bool has_profile_;
  const NodeConfig *cfg_;
  bool has_feeder_;
  bool has_pool_;
  // The profile's [hugepages] with the node configuration's over them.
  std::vector<HugePageSetting> hugepage_settings_;
  ModuleStep modules_;
  KnobStep knobs_;
  FeederStep feeder_;
  NicStep nic_;
  SchedStep sched_;
  HugePageStep hugepages_;
  PoolStep pool_;
  BootStep boot_;
};

} // namespace mltune::detail
