// Kernel modules a profile loads (modules = [...], profile.hpp): the loader
// seam, the node's allowlist and the ModuleStep of a switch.
#pragma once

#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

// The kernel modules mltune loaded, as the node baseline records them (in
// load order); `off` and `switch baseline` unload those still loaded.
Result<std::vector<std::string>> recorded_modules(const Sysroot &root);

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
  ModuleStep(std::span<const KernelModule> modules, const Sysroot &root, ModuleLoader *loader = nullptr);
  [[nodiscard]] std::string_view name() const override { return "modules"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  // Every profile module loaded (an optional one missing is reported, not
  // counted).
  [[nodiscard]] Result<DomainCheck> check(std::vector<NodeDifference> &out) override;
  // baseline(), reported: the modules unloaded, those still in use.
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;

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
  std::span<const KernelModule> modules_;
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

} // namespace mltune
