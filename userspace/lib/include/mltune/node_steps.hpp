// Transaction steps (mltune/transaction.hpp) for the parts of the node
// configuration that are not a profile: the huge-page pool and the feeder
// cores.  apply_config() (config.hpp) runs them after the profile's
// KnobStep and NicStep.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/feeder.hpp"
#include "mltune/transaction.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mltune {

// Pool reservations per NUMA node and the per-user quota (pool.hpp).
// plan() checks that the module is loaded and every node has a pool, and
// records the reservations and quota found; apply() sets the targets (all
// or nothing: a node the kernel cannot fill puts every node back);
// rollback() restores what plan() found.  The pool records no baseline, so
// baseline() changes nothing; revert_config() restores what the first
// apply of a boot found.
class PoolStep final : public Step {
public:
  PoolStep(const Sysroot &root, std::vector<std::pair<int, std::uint64_t>> reserve,
           std::optional<std::uint64_t> user_quota);
  [[nodiscard]] std::string_view name() const override { return "pool"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override { return {}; }

  // What plan() found: (node, pages) for the nodes the step sets, and the quota.
  [[nodiscard]] const std::vector<std::pair<int, std::uint64_t>> &before() const { return before_; }
  [[nodiscard]] std::optional<std::uint64_t> quota_before() const { return quota_before_; }
  // One line: what apply() set.
  [[nodiscard]] std::string summary() const;

private:
  Status set(const std::vector<std::pair<int, std::uint64_t>> &pages, std::optional<std::uint64_t> quota);

  const Sysroot &root_;
  std::vector<std::pair<int, std::uint64_t>> reserve_;
  std::optional<std::uint64_t> quota_;
  std::vector<std::pair<int, std::uint64_t>> before_;
  std::optional<std::uint64_t> quota_before_;
};

// The feeder cores (feeder.hpp): `cpus` is a cpulist or a plan role, ""
// turns the feeder off.  plan() resolves the CPUs, checks the mechanism and
// records the feeder state found; apply() is feeder_on() (or feeder_off());
// rollback() brings the recorded state back; baseline() is feeder_off().
class FeederStep final : public Step {
public:
  FeederStep(const Sysroot &root, std::string cpus, std::string mechanism, FeederOs *os = nullptr);
  [[nodiscard]] std::string_view name() const override { return "feeder"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  [[nodiscard]] std::string summary() const;

private:
  FeederOs &os();

  const Sysroot &root_;
  std::string spec_;
  std::string mechanism_;
  FeederOs *os_;
  std::unique_ptr<FeederOs> live_os_;
  CpuSet cpus_;
  CpuSet housekeeping_;
  FeederState before_;
  FeederState after_;
};

} // namespace mltune
