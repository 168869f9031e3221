// A profile switch as one transaction over steps, one step per domain.
//
// Every domain a profile touches (kernel knobs, NIC settings, ...) is a Step
// with one lifecycle:
//
//   plan()      reads the node and decides what apply() will do; writes
//               nothing.  A profile that cannot be applied here fails now,
//               before any step has written anything.
//   apply()     applies the plan; a step that fails leaves nothing of its
//               own changed (each backend is itself all or nothing).
//   verify()    reads back what apply() wrote; the error names the first
//               difference.
//   rollback()  undoes a successful apply(): the node is as plan() found it.
//   baseline()  restores the values from before mltune's first switch, for
//               the domains that record them.
//
// run_transaction() plans every step, then applies them in order; when a
// step fails (or, with verify, does not read back), the steps applied before
// it are rolled back newest first and the error names the step, keeps the
// kind and errno of the failure, and says what was rolled back.
#pragma once

#include "mltune/nic.hpp"
#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/switch.hpp"
#include "mltune/sysroot.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

class Step {
public:
  Step() = default;
  Step(const Step &) = delete;
  Step &operator=(const Step &) = delete;
  Step(Step &&) = delete;
  Step &operator=(Step &&) = delete;
  virtual ~Step() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  virtual Status plan() = 0;
  virtual Status apply() = 0;
  virtual Status verify() = 0;
  virtual Status rollback() = 0;
  virtual Status baseline() = 0;
};

struct TransactionOptions {
  bool dry_run = false; // plan only
  bool verify = false;  // read every step back after the last apply
  // Called before each phase of each step ("plan", "apply", "verify",
  // "rollback"), for progress output.
  std::function<void(std::string_view step, std::string_view phase)> progress;
  // Fault injection for tests (mltunectl: MLTUNE_FAIL_STEP): the named step
  // fails right after its apply() succeeded, so it and every step before it
  // are rolled back.
  std::string fail_after;
  // A test hook (mltunectl: MLTUNE_STOP_AT): the process stops itself
  // (SIGSTOP) at the named point, "STEP/applied" after a step's apply(), so
  // a test can kill it there (the modules step has "modules/recorded" too,
  // ModuleStep::stop_at()).
  std::string stop_at;
};

// The process stops itself (SIGSTOP) when `point` is `stop_at`: the
// TransactionOptions::stop_at test hook.
void stop_point(std::string_view stop_at, std::string_view point);

struct TransactionReport {
  std::vector<std::string> applied; // step names, in order
};

Result<TransactionReport> run_transaction(std::span<Step *const> steps, const TransactionOptions &opt);

// The kernel knobs of a profile through the kernel or the direct backend
// (switch.hpp), with the knobs of its [cpu] and [block] settings on this
// node (device_knobs.hpp).  plan() expands those, runs plan_switch and notes
// the profile active now, which rollback() switches back to.
class KnobStep final : public Step {
public:
  KnobStep(const Profile &profile, const Sysroot &root, Backend backend);
  [[nodiscard]] std::string_view name() const override { return "knobs"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  [[nodiscard]] const SwitchPlan &switch_plan() const { return plan_; }
  [[nodiscard]] const SwitchReport &report() const { return report_; }
  // Settings of [cpu] and [block] this node has no file for.
  [[nodiscard]] const std::vector<std::string> &notes() const { return notes_; }

private:
  const Profile &profile_;
  const Sysroot &root_;
  Backend backend_;
  Profile node_profile_; // profile_ with its device settings as knobs of this node
  std::vector<std::string> notes_;
  SwitchPlan plan_;
  SwitchReport report_;
  ActiveProfile previous_;
};

// The profile's [nic] tables (nic.hpp).  Without a backend given, plan()
// uses the live one when the sysroot is the live node and does nothing
// otherwise, or when the profile has no [nic] table.  apply() records the
// value of every setting it changes for the first time in the node
// baseline (base/baseline.hpp) before writing; rollback() applies the
// inverse of what apply() changed; baseline() puts every recorded setting
// back (restore_nic_baseline()).
class NicStep final : public Step {
public:
  NicStep(const Profile &profile, const Sysroot &root, std::unique_ptr<NicBackend> backend = nullptr);
  [[nodiscard]] std::string_view name() const override { return "nic"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  // The feeder CPUs the NIC plan keeps IRQs and RPS off: by default those
  // in force (nic_feeder_cpus()); a transaction that also turns feeder
  // cores on or off names the ones it will leave (called in plan()).
  void feeders_from(std::function<std::vector<unsigned>()> f) { feeders_ = std::move(f); }
  // What plan() found to change (nullopt when the step has nothing to do).
  [[nodiscard]] const std::optional<NicReport> &planned() const { return planned_; }
  // What apply() changed.
  [[nodiscard]] const std::optional<NicReport> &applied() const { return applied_; }

private:
  Status ensure_backend();

  const Profile &profile_;
  const Sysroot &root_;
  std::unique_ptr<NicBackend> backend_;
  std::function<std::vector<unsigned>()> feeders_;
  std::optional<NicReport> planned_;
  std::optional<NicReport> applied_;
};

} // namespace mltune
