// Profiles: TOML files with optional `include`, merged into one knob list.
// Schema: Documentation/profiles.rst.
#pragma once

#include "mltune/nic.hpp"
#include "mltune/result.hpp"
#include "mltune/sched.hpp"
#include "mltune/sysroot.hpp"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

// The largest profile file read (a profile, or a file it includes).
inline constexpr size_t k_max_profile_bytes = size_t{1} << 20;

enum class KnobKind { sysctl, sysfs };

// How a knob's value is held: `value` exactly, or `at_least` / `at_most`,
// a bound (a decimal integer) that a node value already beyond it
// satisfies, so that a limit set higher by the site is never lowered.
enum class KnobCmp { exact, at_least, at_most };
// The profile key of each: "value", "at_least", "at_most".
std::string_view to_string(KnobCmp c);

struct Knob {
  KnobKind kind = KnobKind::sysctl;
  std::string key;         // "vm.swappiness" or "kernel/mm/transparent_hugepage/enabled"
  std::string value;       // as written in the profile (integers in decimal)
  bool optional = false;   // optional = true: skipped where missing or where the value is refused
  bool if_present = false; // optional = "missing": skipped only where the kernel lacks the file
  std::string reason;
  std::string origin;           // "training.toml:7" - where the effective value came from
  KnobCmp cmp = KnobCmp::exact; // with at_least / at_most, `value` is the bound
  // The CPU whose model-specific register the kernel reads to show the file
  // (energy_perf_bias of cpuN, a HWP or CPPC energy_performance_preference
  // of policyN: rdmsrl_on_cpu(), an IPI there); -1 for every other file.
  int read_on_cpu = -1;

  // Absolute node path: /proc/sys/vm/swappiness, /sys/kernel/mm/...
  [[nodiscard]] std::string path() const;
  // The value as people read it: "madvise", ">= 2097152", "<= 10".
  [[nodiscard]] std::string wanted() const;
  // Whether a value read from the node (normalised) satisfies the knob.
  [[nodiscard]] bool satisfied_by(std::string_view current) const;
};

// A kernel module the profile loads before its knobs (modules = [...]).
struct KernelModule {
  std::string name;      // as modprobe takes it: "tcp_bbr"
  bool required = false; // false: a module the node cannot load is skipped and reported
  std::string origin;    // "base.toml:27"
};

// One setting of [cpu] or of a [block."GLOB"] table (expanded into sysfs
// knobs on a node: device_knobs.hpp).
struct DeviceSetting {
  std::string key;    // "governor", "scheduler"
  std::string value;  // as written to sysfs ("performance", "1", "0")
  std::string origin; // "training.toml:70"
};

struct BlockRule {
  std::string glob; // fnmatch on the disk's name: "nvme*", "sd[a-d]"
  std::vector<DeviceSetting> settings;
  std::string origin;
};

// [boot]: the kernel command line the profile wants, written as the GRUB
// drop-in by a switch (BootStep, pending until the next boot).
struct BootSettings {
  std::string isolate = "feeder"; // CPUs for isolcpus/nohz_full/rcu_nocbs: a cpulist, a plan role, or "none"
  std::string origin;             // "site.toml:3"
};

// [gate]: how a gated switch (switch --gate, gate = true in the node
// configuration) judges the node after it applied against before
// (mltune/prove.hpp): per measured figure, the most it may grow, as a ratio
// (1.5: half as much again), or 0 where the figure is not gated; and how
// long to measure.  Absent keys keep the defaults (prove.hpp).
inline constexpr std::array<std::string_view, 10> k_gate_figures{
    "interruptions", "involuntary_switches", "step_p50_us", "step_p99_us", "step_p999_us",
    "step_max_us",   "gpu_p50_us",           "gpu_p99_us",  "gpu_p999_us", "gpu_register_ms_per_gib"};
struct GateSettings {
  std::vector<std::pair<std::string, double>> limits; // figure -> ratio (0: not gated), as the file states them
  unsigned rounds = 0;                                // 0: the default
  double seconds = 0;                                 // per round; 0: the default
  std::string origin;                                 // "site.toml:3"
};

// [hugepages]: persistent hugetlbfs pages of one size on one NUMA node
// ("2M" = { 0 = 1024, 1 = 1024 }), set by a switch (HugePageStep,
// hugetlb.hpp) through /sys/devices/system/node/nodeN/hugepages.
struct HugePageSetting {
  std::uint64_t page_kib = 0; // 2048 for "2M", 1048576 for "1G"
  int node = 0;
  std::uint64_t pages = 0;
  std::string origin; // "site.toml:3"
  // "2M", "1G", "64K": the size as a [hugepages] key writes it.
  [[nodiscard]] std::string size() const;
  // "node0 2M": how verify and diff name it.
  [[nodiscard]] std::string key() const;
};

struct Profile {
  std::string name;
  // Given by path: the file, absolute (what a switch records, so that
  // status, verify and follow check this file, never a profile of the same
  // name elsewhere); "" when found by name.
  std::string file;
  std::string description;
  std::vector<Knob> knobs;                // in apply order: included files first
  std::vector<std::string> sources;       // files merged, outermost last
  std::vector<SchedRule> sched_rules;     // [[sched.rule]], included files first
  std::vector<NicRule> nic;               // [nic."GLOB"] tables, included files first
  std::vector<KernelModule> modules;      // modules = [...], included files first, each name once
  std::vector<DeviceSetting> cpu;         // [cpu]: each key once, a later file's value wins
  std::vector<BlockRule> block;           // [block."GLOB"] tables, included files first
  std::optional<BootSettings> boot;       // [boot]: absent, the switch leaves the boot drop-in alone
  std::vector<HugePageSetting> hugepages; // [hugepages]: each size and node once, a later file's value wins
  std::optional<GateSettings> gate;       // [gate]: a later file's keys over an earlier one's

  [[nodiscard]] const Knob *find(std::string_view key) const;
};

struct BuiltinProfile {
  std::string_view name;
  std::string_view text;
};
std::span<const BuiltinProfile> builtin_profiles();

// Where profiles live on the node (below the sysroot), searched in this
// order before the built-ins: the site's own profiles, which override the
// packaged ones of the same name, then the packaged ones
// (${datadir}/mltune/profiles of the build: /usr/share/mltune/profiles in
// the Debian package).
inline constexpr std::string_view k_user_profile_dir = "/etc/mltune/profiles";
std::string_view packaged_profile_dir();

class ProfileLoader {
public:
  // `sysroot` (may be null) is used to find profiles in
  // <sysroot>/etc/mltune/profiles and <sysroot><packaged_profile_dir()>;
  // built-ins are compiled in.  While Caches are current on the thread
  // (mltunectl serve: mltune/caches.hpp), each profile text parsed is kept
  // there, keyed by its name and whole text, so a file that changed is
  // parsed again.
  explicit ProfileLoader(const Sysroot *sysroot = nullptr) : sysroot_(sysroot) {}

  // A name ("training") or a file path (contains '/' or ends in ".toml").
  // Names resolve to <sysroot>/etc/mltune/profiles/NAME.toml, then
  // <sysroot><packaged_profile_dir()>/NAME.toml, then built-ins. A file's
  // name without ".toml" is the profile's name and follows the one name
  // rule (letters, digits, '-', '_'; a letter or digit first).
  [[nodiscard]] Result<Profile> load(std::string_view name_or_path) const;
  // Parse TOML text; `display` names it in errors.  Includes resolve to
  // built-ins and user profiles only.
  [[nodiscard]] Result<Profile> load_text(std::string_view text, std::string_view display) const;
  // Names of every loadable profile (site, packaged and built-in), sorted.
  [[nodiscard]] std::vector<std::string> list() const;

private:
  struct Source;
  [[nodiscard]] Result<Source> resolve(std::string_view ref, const Source *from) const;
  [[nodiscard]] Status load_into(const Source &src, Profile &out, std::vector<std::string> &stack) const;

  const Sysroot *sysroot_;
};

} // namespace mltune
