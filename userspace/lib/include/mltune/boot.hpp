// Kernel command-line parameters for a profile and a feeder-core plan, the
// GRUB drop-in that carries them, and their verification after a reboot.
#pragma once

#include "mltune/cpu_plan.hpp"
#include "mltune/cpulist.hpp"
#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"
#include "mltune/topology.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace mltune {

inline constexpr std::string_view k_grub_dropin = "/etc/default/grub.d/mltune.cfg";

struct BootOptions {
  std::string profile = "training";
  std::string isolate = "feeder"; // resolve_cpuset() spec of the CPUs to isolate
  std::string thp;                // transparent_hugepage= value; "" = not set
  bool numa_balancing_off = false;
  bool low_latency = false; // C-state limits (inference)
};

// Reads the profile's THP and NUMA-balancing knobs; inference profiles (name
// contains "inference") get C-state limits.
BootOptions boot_options_for(const Profile &profile);

struct BootParam {
  std::string key;   // "nohz_full"
  std::string value; // "8-15"; "" for flags (nosoftlockup)
  std::string reason;
  [[nodiscard]] std::string str() const { return value.empty() ? key : key + "=" + value; }
};

Result<std::vector<BootParam>> boot_params(const Topology &topo, const CpuPlan &plan, const BootOptions &opts);
// "nohz_full=8-15 isolcpus=managed_irq,domain,8-15 ..."
std::string boot_fragment(const std::vector<BootParam> &params);
// Content of /etc/default/grub.d/mltune.cfg.
std::string grub_dropin(const std::vector<BootParam> &params, std::string_view profile);

struct BootDiff {
  std::string what;     // "nohz_full" or "/sys/devices/system/cpu/isolated"
  std::string expected; // "" = must be absent
  std::string actual;   // "" = absent
};

// Compares the parameters with /proc/cmdline and with what the kernel made
// of them in /sys/devices/system/cpu/{isolated,nohz_full}.  Empty = match.
Result<std::vector<BootDiff>> verify_boot(const Sysroot &root, const std::vector<BootParam> &params);

// Every key mltune manages on the command line.
const std::vector<std::string_view> &boot_managed_keys();

// The profile's kernel command line ([boot], profile.hpp): the GRUB drop-in
// (boot.hpp) that carries it.  The parameters take effect at the next boot,
// so the step never half-applies anything: it writes the file or not, and
// the boot domain of `mltunectl active` says "pending-reboot" until the
// running command line has them.  plan() computes them from the topology
// and the CPU plan (a profile without [boot]: nothing to do); apply() writes
// the drop-in when its content changes, keeping the old one; rollback()
// puts the old content back (or removes the file); verify() reads it back;
// baseline() removes it.
class BootStep final : public Step {
public:
  BootStep(const Profile &profile, const Sysroot &root);
  [[nodiscard]] std::string_view name() const override { return "boot"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  // The drop-in's parameters, and whether the running kernel has them.
  [[nodiscard]] std::optional<DomainState> state() override;
  // baseline(), reported: the drop-in removed, its parameters pending a
  // reboot.
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;

  // The command-line fragment plan() computed ("" without [boot]).
  [[nodiscard]] const std::string &fragment() const { return fragment_; }
  // Whether apply() changed the drop-in (a reboot is pending).
  [[nodiscard]] bool changed() const { return changed_; }

private:
  const Profile &profile_;
  const Sysroot &root_;
  std::string fragment_;
  std::string content_;               // the drop-in plan() wants
  std::optional<std::string> before_; // the drop-in plan() found (nullopt: none)
  bool changed_ = false;
};

} // namespace mltune
