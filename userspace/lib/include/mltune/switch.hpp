// Switching a node to a profile: the plan and the two backends.
//
//  - kernel backend (kernel_backend.cpp): used when <sysroot>/sys/kernel/mltune
//    exists.  Loads/updates the profile in the module and writes its name to
//    /sys/kernel/mltune/profile; the module switches atomically.
//  - direct backend (direct_backend.cpp): a user-space transaction.  Captures
//    every knob, records the pre-mltune baseline in
//    <sysroot>/run/mltune/baseline.json, writes in profile order and on
//    the first failure restores everything written so far in reverse.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/node_info.hpp"
#include "mltune/profile.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mltune {

inline constexpr std::string_view k_baseline = "baseline";

enum class Backend { automatic, kernel, direct };
std::string_view to_string(Backend b);

struct PlanStep {
  std::string key;
  std::string path;
  std::string value;
  std::string current; // normalised, empty when missing
  bool optional = false;
  enum class Action { write, unchanged, skip } action = Action::write;
  std::string note; // why skipped
};

struct SwitchPlan {
  std::string profile;
  std::vector<PlanStep> steps;
};

// Validates the profile against the node: fails (Errc::failed) when a
// required knob does not exist, before anything is written.
Result<SwitchPlan> plan_switch(const Profile &profile, const Sysroot &root);

struct SwitchReport {
  Backend backend = Backend::direct;
  std::string profile;
  std::vector<std::string> written; // keys written
  std::vector<std::string> skipped; // optional keys skipped, "key: why"
  std::string detail;               // e.g. the module's last_switch
  std::vector<std::string> kept;    // kernel backend: bounds (at_least, at_most) the node already met
};

Backend choose_backend(const Sysroot &root, Backend wanted);

// The direct backend.  On failure nothing stays changed; the error names the
// knob and carries its errno.
Result<SwitchReport> switch_direct(const Profile &profile, const Sysroot &root);
// The same with the plan plan_switch() made for `profile` just before (its
// current values are the ones captured for the rollback).
Result<SwitchReport> switch_direct(const Profile &profile, const Sysroot &root, const SwitchPlan &plan);
Result<SwitchReport> restore_baseline_direct(const Sysroot &root);
// The direct backend's recorded baseline: (path, value before mltune) pairs;
// empty when the node was never switched by the direct backend.
Result<std::vector<std::pair<std::string, std::string>>> direct_baseline(const Sysroot &root);
// What restore_baseline_direct() would write: every recorded knob, newest
// first, with its value now ("write", or "unchanged" where it already
// holds the baseline; "skip" where it no longer reads).
Result<SwitchPlan> plan_baseline_direct(const Sysroot &root);

// The kernel backend.
bool kernel_backend_present(const Sysroot &root);
Result<SwitchReport> switch_kernel(const Profile &profile, const Sysroot &root);
Result<SwitchReport> restore_baseline_kernel(const Sysroot &root);
// The module's generation: the number of switches that ran since it loaded.
Result<std::uint64_t> kernel_generation(const Sysroot &root);
// Writes NAME (a profile the module has committed, or "baseline") to the
// module's profile file: the module switches its knobs, nothing else.
Result<SwitchReport> kernel_activate(const Sysroot &root, const std::string &name);
// The module's knob-list format for a profile on this node ("[FLAGS]PATH
// VALUE" lines; '?' = skipped where missing or refused, '>' / '<' = at
// least / at most VALUE).
std::string kernel_knob_list(const Profile &profile, const Sysroot &root);

// What a backend has active, which undo_switch() goes back to.
struct ActiveProfile {
  std::string name;      // "" when nothing was switched yet ("none" in the module)
  std::string knob_list; // kernel backend: the module's knob list of `name`
};
Result<ActiveProfile> active_profile(const Sysroot &root, Backend backend);

// Undoes a switch that succeeded (`plan` is the one it ran with): the kernel
// backend switches the module back to `previous` (its knob list reloaded
// when the switch had replaced it; the baseline when nothing was active),
// the direct backend names `previous` active again; then both write back,
// newest first, the value `plan` captured for every written knob that no
// longer has it.  Every write is tried; the error lists those that failed.
Result<SwitchReport> undo_switch(const Sysroot &root, Backend backend, const SwitchPlan &plan,
                                 const ActiveProfile &previous);

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
  // The profile's knobs on this node against what they read; a knob read
  // on a CPU that spare_cpus() names is left unread (said in the note).
  [[nodiscard]] Result<DomainCheck> check(std::vector<NodeDifference> &out) override;
  // Through Backend::kernel or direct: baseline() reported (a dry run:
  // switch_plan() holds what the direct backend would write back).  Through
  // Backend::automatic: every backend's record (`off`).
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;
  // The CPUs whose knobs check() does not read (the feeder cores and
  // boot-isolated CPUs: reading interrupts them); none when unset.
  void spare_cpus(std::function<CpuSet()> f) { spare_ = std::move(f); }

  [[nodiscard]] const SwitchPlan &switch_plan() const { return plan_; }
  [[nodiscard]] const SwitchReport &report() const { return report_; }
  // Settings of [cpu] and [block] this node has no file for.
  [[nodiscard]] const std::vector<std::string> &notes() const { return notes_; }

private:
  const Profile &profile_;
  const Sysroot &root_;
  Backend backend_;
  DomainState off_every_backend(bool dry_run);

  Profile node_profile_; // profile_ with its device settings as knobs of this node
  std::function<CpuSet()> spare_;
  std::vector<std::string> notes_;
  SwitchPlan plan_;
  SwitchReport report_;
  ActiveProfile previous_;
};

} // namespace mltune
