// Transaction steps (mltune/transaction.hpp) beside the KnobStep and
// NicStep: the profile's scheduler rules, and the parts of the node
// configuration that are not a profile (the huge-page pool and the feeder
// cores).  apply_config() (config.hpp) runs them after the profile's
// steps.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/feeder.hpp"
#include "mltune/profile.hpp"
#include "mltune/sched.hpp"
#include "mltune/transaction.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

// Loads and unloads kernel modules: modprobe on the live node; tests fake it.
class ModuleLoader {
public:
  virtual ~ModuleLoader() = default;
  // Whether NAME is in the kernel now: loaded (/sys/module/NAME) or built in
  // (modules.builtin of the running kernel's module tree).
  [[nodiscard]] virtual bool loaded(const std::string &name) const = 0;
  // Whether NAME can be loaded at all, asked at plan time: an error, saying
  // why, where a load cannot even be tried (no module tree for the running
  // kernel); whether modprobe then finds it is load()'s answer.
  [[nodiscard]] virtual Status loadable(const std::string & /*name*/) const { return {}; }
  // modprobe NAME / modprobe -r NAME; the error carries modprobe's message.
  [[nodiscard]] virtual Status load(const std::string &name) = 0;
  [[nodiscard]] virtual Status unload(const std::string &name) = 0;
};
// modprobe through run_command(); `root` answers loaded().  Null on a
// --sysroot tree (a module would load into this machine's kernel).
std::unique_ptr<ModuleLoader> make_live_module_loader(const Sysroot &root);

// The kernel modules a profile may load on this node: `allow` of the node
// configuration's [modules] table (config.hpp), else the modules the
// built-in profiles name (base.toml: tcp_bbr).  Names compare as modprobe
// compares them ('-' and '_' alike).  Whoever may edit a profile (a site
// profile, a ConfigMap of the DaemonSet) cannot make the node load another
// module: ModuleStep refuses it at plan time.
struct ModuleAllowlist {
  std::vector<std::string> names;
  std::string source; // "/etc/mltune/mltune.toml:12 [modules] allow", or the default's description
  [[nodiscard]] bool allows(std::string_view name) const;
  // "tcp_bbr, nvidia_peermem" ("none" for an empty list).
  [[nodiscard]] std::string listed() const;
};
// The modules of the built-in profiles, each once, in profile order.
[[nodiscard]] const std::vector<std::string> &default_module_allowlist();
// The allowlist of the node below `root`: its configuration's [modules]
// allow when the file names one, else the default.  A configuration that
// does not load is an error (no module is allowed then, rather than more
// than the administrator meant).
[[nodiscard]] Result<ModuleAllowlist> load_module_allowlist(const Sysroot &root);

// The profile's kernel modules (modules = [...], profile.hpp), the first
// step of a switch, so that the knobs a module brings
// (tcp_congestion_control = bbr needs tcp_bbr) exist when the knob step
// applies.  plan() refuses a module the node's ModuleAllowlist does not
// list (on a --sysroot tree too), then finds the modules not in the kernel; apply() records each in the node baseline
// (base/baseline.hpp), then loads it; a module the node cannot load is
// skipped and reported, unless the profile marks it required (then the step
// fails).  rollback() unloads what apply() loaded; baseline() unloads every
// module the node baseline lists (one still in use stays, reported).
// Without a loader given, the live one on the live node, nothing on a tree.
class ModuleStep final : public Step {
public:
  ModuleStep(const Profile &profile, const Sysroot &root, ModuleLoader *loader = nullptr);
  [[nodiscard]] std::string_view name() const override { return "modules"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  [[nodiscard]] const std::vector<std::string> &loaded() const { return loaded_; }
  [[nodiscard]] const std::vector<std::string> &skipped() const { return skipped_; } // "name: why"
  // Modules baseline() left loaded because they are in use: "name: why".
  [[nodiscard]] const std::vector<std::string> &in_use() const { return in_use_; }
  // Modules baseline() unloaded (one already gone is not listed).
  [[nodiscard]] const std::vector<std::string> &unloaded() const { return unloaded_; }
  // The modules the node baseline listed when baseline() ran, in load order.
  [[nodiscard]] const std::vector<std::string> &recorded() const { return recorded_; }
  // TransactionOptions::stop_at inside apply(): "modules/recorded" (the
  // modules to load are recorded, none is loaded yet).
  void stop_at(std::string point) { stop_at_ = std::move(point); }

private:
  const Profile &profile_;
  const Sysroot &root_;
  std::string stop_at_;
  std::unique_ptr<ModuleLoader> live_;
  ModuleLoader *loader_;
  std::vector<const KernelModule *> todo_;
  std::vector<std::string> loaded_;
  std::vector<std::string> skipped_;
  std::vector<std::string> in_use_;
  std::vector<std::string> unloaded_;
  std::vector<std::string> recorded_;
};

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

// The profile's [[sched.rule]]s (sched.hpp).  plan() checks that every
// rule's placement resolves; apply() is sched_apply() over every thread, and
// a thread the kernel refused (no fallback admitted either) fails the step;
// rollback() resets the threads apply() changed; verify() checks that every
// thread a rule matches holds the rule's attributes (or its fallback's);
// baseline() resets every thread mltune recorded (sched_reset()).  Without
// a SchedSystem given, the live one is used on the live node only: on a
// --sysroot tree the step does nothing (no host thread is touched).
class SchedStep final : public Step {
public:
  SchedStep(const Profile &profile, const Sysroot &root, SchedSystem *sys = nullptr);
  [[nodiscard]] std::string_view name() const override { return "sched"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  // What apply() did (nullopt when the step had nothing to do).
  [[nodiscard]] const std::optional<SchedReport> &applied() const { return applied_; }
  // Whether the step acts here: rules and a scheduler to talk to.
  [[nodiscard]] bool active() const { return sys_ != nullptr && !profile_.sched_rules.empty(); }

private:
  const Profile &profile_;
  std::unique_ptr<SchedSystem> live_;
  SchedSystem *sys_;
  // Why the rules cannot act on this root (a container without the node's
  // PID or network namespace); plan() refuses with it when there are rules.
  Status unreachable_;
  std::optional<SchedReport> applied_;
};

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
  FeederStep(const Sysroot &root, std::string cpus, FeederRequest request, FeederOs *os = nullptr);
  [[nodiscard]] std::string_view name() const override { return "feeder"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;

  [[nodiscard]] std::string summary() const;
  // After plan(): the feeder CPUs this step puts in force (none: off).
  [[nodiscard]] const CpuSet &planned_cpus() const { return cpus_; }

private:
  FeederOs &os();

  const Sysroot &root_;
  std::string spec_;
  FeederRequest request_;
  FeederOs *os_;
  std::unique_ptr<FeederOs> live_os_;
  CpuSet cpus_;
  CpuSet housekeeping_;
  FeederState before_;
  FeederState after_;
};

} // namespace mltune
