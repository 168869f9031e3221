// The node configuration: /etc/mltune/mltune.toml, what mltune.service
// applies at every boot (Documentation/admin-guide.rst, "The node
// configuration").
//
//   profile = "training"            # profile applied at boot (absent: knobs untouched)
//   watcher = true                  # mltune-watch.service runs the sched watcher
//   [pool]
//   reserve = { 0 = "512M", 1 = "512M" }   # 2 MiB pages per NUMA node
//   user_quota = "256M"             # per-user limit of mapped pool memory, "0" = none
//   [feeder]
//   cpus = "2-3,6-7"                # a cpulist or a plan role ("feeder", "feeder:N")
//   mechanism = "auto"              # auto, sched_ext or cpuset
//   partition = "root"              # cpuset partition type: root or isolated
//   [hugepages]                     # persistent hugetlbfs pages per size and NUMA node,
//   "2M" = { 0 = 1024, 1 = 1024 }   # over the profile's own [hugepages] (this file wins)
//   [modules]
//   allow = ["tcp_bbr"]             # the kernel modules profiles may load (absent: those
//                                   # of the built-in profiles; ModuleAllowlist, modules.hpp)
//
// Every key is optional; what the file does not name, apply_config() leaves
// alone.  The text goes through the profile loader's input checks (ASCII,
// nesting, escapes; errors as file:line, Errc::input).
#pragma once

#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

inline constexpr std::string_view k_config_file = "/etc/mltune/mltune.toml";
// What apply_config() changed that revert_config() puts back.
inline constexpr std::string_view k_config_state = "/run/mltune/config.json";
// First line of a configuration written by mltunectl persist.
inline constexpr std::string_view k_config_marker = "# Managed by mltunectl persist";

struct NodeConfig {
  std::string source;                                   // file it was read from ("" = built in code)
  std::optional<std::string> profile;                   // profile name or file
  bool watcher = false;                                 // mltune-watch.service runs
  std::vector<std::pair<int, std::uint64_t>> pool;      // NUMA node, 2 MiB pages; ascending nodes
  std::optional<std::uint64_t> user_quota;              // pages, 0 = no limit
  std::optional<std::string> feeder_cpus;               // cpulist or plan role, "" = feeder off
  std::string feeder_mechanism = "auto";                // auto, sched_ext, cpuset
  std::string feeder_partition = "root";                // root, isolated
  std::optional<std::vector<std::string>> module_allow; // [modules] allow; absent: the built-in default
  std::string module_allow_origin;                      // "mltune.toml:12", where allow was read
  std::vector<HugePageSetting> hugepages;               // [hugepages]: over the profile's, per size and node

  [[nodiscard]] bool empty() const {
    return !profile && pool.empty() && !user_quota && !feeder_cpus && !watcher && hugepages.empty();
  }
};

// Parses configuration text; `display` names it in errors (file:line).
[[nodiscard]] Result<NodeConfig> parse_config(std::string_view text, const std::string &display);
// Reads `path` (default k_config_file) below the sysroot.  A missing file
// is Errc::input naming it.
[[nodiscard]] Result<NodeConfig> load_config(const Sysroot &root, std::string_view path = k_config_file);
// The file persist writes: the marker line, then every setting, commented.
[[nodiscard]] std::string render_config(const NodeConfig &cfg);

struct ConfigApplyOptions {
  // After a failure: true puts every domain the file names back on its
  // baseline (boot, 'systemctl start'); false leaves the node as the
  // transaction's rollback left it, i.e. as before this apply (reload).
  bool baseline_on_failure = true;
  bool dry_run = false;
  std::function<void(std::string_view step, std::string_view phase)> progress;
};

struct ConfigReport {
  std::vector<std::string> applied;  // steps, in order ("knobs", "feeder", "nic", "pool")
  std::vector<std::string> lines;    // what each step did, for the journal
  std::vector<std::string> restored; // after a failure: what went back to its baseline
};

// Applies the configuration as one transaction (mltune/step.hpp,
// each domain's step): the profile's knobs, the feeder cores, the profile's NIC
// settings (planned for the feeder cores it leaves), the pool reservations
// and quota.  Every step is planned (profile loaded,
// NIC settings validated, feeder CPUs online, pool nodes present) before
// any is applied.  On failure the error names the step; see
// ConfigApplyOptions::baseline_on_failure for what the node is left on.
// After a success, k_config_state records what revert_config() puts back.
[[nodiscard]] Result<ConfigReport> apply_config(const Sysroot &root, const NodeConfig &cfg,
                                                const ConfigApplyOptions &opt);
// Puts back what the apply_config() calls of this boot changed (recorded in
// k_config_state, whatever the file says now): the knobs on their baseline,
// the NIC settings as the first apply found them, the feeder cores off, the
// pool reservations and quota as the first apply found them.  Every domain
// is tried; the error lists those that failed.
// Nothing recorded: nothing to do.
[[nodiscard]] Result<ConfigReport> revert_config(const Sysroot &root);

} // namespace mltune
