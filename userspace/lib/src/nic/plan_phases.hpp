// The phases of nic_plan (nic/plan.cpp), one function each, so unit tests can
// exercise every phase on a fake backend: per device the ethtool-like
// settings (features apart), queue IRQ affinity and RPS; then, across devices,
// the global RPS flow table and irqbalance.  Library-private: not part of the
// installed API.
#pragma once

#include "mltune/nic.hpp"
#include "mltune/result.hpp"

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace mltune::detail {

using NicWanted = std::map<std::string, NicSetting>;

// The changes planned for one device, its skipped settings (into the plan)
// and its housekeeping CPUs, read from the backend once when first needed.
class DeviceChanges {
public:
  DeviceChanges(const NicDevice &dev, NicBackend &backend, NicPlan &plan) : dev_(dev), backend_(backend), plan_(plan) {}
  [[nodiscard]] const NicDevice &dev() const { return dev_; }
  void skip(const std::string &key, std::string why);
  // Plans key -> to when it differs from the current value.
  void change(const std::string &key, const std::string &to, const NicSetting &s);
  // Housekeeping CPUs of the device's NUMA node; a failure when it has none.
  Result<std::vector<unsigned>> housekeeping();
  std::vector<NicChange> changes;

private:
  const NicDevice &dev_;
  NicBackend &backend_;
  NicPlan &plan_;
  std::vector<unsigned> hk_;
};

// What the per-device phases gather for the global phases.
struct NicPlanTotals {
  std::uint64_t flow_entries = 0;
  bool want_flow = false;
  std::string flow_origin;
  std::set<int> irqbalance_irqs;
  std::set<unsigned> housekeeping_all;
  std::string irqbalance_mode;
};

// A device's wanted settings: every matching rule in order, later wins.
NicWanted nic_wanted_for(std::span<const NicRule> rules, const NicDevice &dev);

// features.NAME: every kernel feature the name expands to; `at` names the setting in errors.
Status plan_feature(DeviceChanges &d, const std::string &key, const NicSetting &s, const std::string &at);

// A rings/channels/coalesce/pause/link value, with max and local resolved and checked.
Status plan_value(DeviceChanges &d, const std::string &key, const NicSetting &s, const std::string &at);

// Every wanted setting but irq.* and rps.*.
Status plan_settings(DeviceChanges &d, const NicWanted &wanted);

// A note when the queue IRQs put more than this many on one CPU.
inline constexpr std::size_t k_irqs_per_cpu_note = 8;
// Notes CPUs that the plan gives more than k_irqs_per_cpu_note queue IRQs.
void plan_irq_load(NicPlan &plan);

// irq.affinity = housekeeping: queue IRQs round robin over the node's housekeeping CPUs.
Status plan_queue_irqs(DeviceChanges &d, const NicWanted &wanted, NicPlanTotals &totals);

// rps.cpus and rps.flow-entries on every rx queue.
Status plan_rps(DeviceChanges &d, const NicWanted &wanted, NicPlanTotals &totals);

// All the phases of one device; its changes are appended to the plan in apply order.
Status plan_device(std::span<const NicRule> rules, const NicDevice &dev, NicBackend &backend, NicPlan &plan,
                   NicPlanTotals &totals);

// sysctl.net.core.rps_sock_flow_entries when a device wants RPS flow entries.
Status plan_flow_entries(NicBackend &backend, const NicPlanTotals &totals, NicPlan &plan);

// irqbalance: the mode, the IRQs and the CPUs to ban, or a note that it is not running.
void plan_irqbalance(NicBackend &backend, const NicPlanTotals &totals, NicPlan &plan);

} // namespace mltune::detail
