// The node as one unit (Documentation/admin-guide.rst, "One profile, one
// transaction"): a profile switched in one transaction over every domain it
// touches, one check of every domain against a profile, what is active, and
// `off`, which returns every domain to what mltune found.
//
//   ProfileSwitch   modules -> knobs -> nic -> sched -> boot, one transaction (step.hpp)
//   check_node      the same domains read back: one list of differences
//   node_status     the active profile and each domain's state
//   node_off        every domain back on its baseline (base/baseline.hpp)
//   follow_module   after a plain write to /sys/kernel/mltune/profile, the
//                   user-space domains brought in line with the module
//
// Switches, `off` and configuration applies serialize on the node lock, a
// FileLock below the sysroot (a --sysroot run never locks the live host).
#pragma once

#include "mltune/boot.hpp"
#include "mltune/feeder.hpp"
#include "mltune/modules.hpp"
#include "mltune/nic.hpp"
#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/sched.hpp"
#include "mltune/switch.hpp"
#include "mltune/sysroot.hpp"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

namespace detail {
class NodeDomains;
} // namespace detail
struct NodeConfig; // mltune/config.hpp

inline constexpr std::string_view k_node_lock = "/run/mltune/node.lock";

// Where domains reach the kernel other than through files.  Unset: the live
// interfaces, used on the live node only; on a --sysroot tree those domains
// are left out and say so (no netlink, no thread of the host is touched).
struct NodeSeams {
  std::function<std::unique_ptr<NicBackend>()> nic;
  SchedSystem *sched = nullptr;
  FeederOs *feeder = nullptr;
  ModuleLoader *modules = nullptr;
};

// Holds the node lock for its lifetime.
class NodeLock {
public:
  static Result<NodeLock> acquire(const Sysroot &root);
  // The lock for what changes the node, none for what only looks (a dry
  // run, a diff): nullopt when `changes` is false.
  static Result<std::optional<NodeLock>> acquire_if(const Sysroot &root, bool changes);
  // The lock file goes with the lock (`off`: nothing of mltune is left).
  void remove_on_release();
  NodeLock(NodeLock &&) noexcept;
  NodeLock &operator=(NodeLock &&) noexcept;
  NodeLock(const NodeLock &) = delete;
  NodeLock &operator=(const NodeLock &) = delete;
  ~NodeLock();

private:
  struct Held;
  explicit NodeLock(std::unique_ptr<Held> h);
  std::unique_ptr<Held> held_;
};

// A profile switch: the kernel modules, the knob step (kernel or direct
// backend), the NIC step, the scheduler-rule step and the boot parameters
// (written for the next boot), run as one transaction under the node lock.
class ProfileSwitch {
public:
  ProfileSwitch(const Profile &profile, const Sysroot &root, Backend backend, const NodeSeams &seams = {});
  // The measured switch of `mltunectl prove`: the profile's domains that act
  // on the running node (no boot parameters) and, where `feeder` names feeder
  // CPUs (a cpulist or plan role, FeederRequest in `feeder_request`), the
  // feeder cores too, as one transaction.
  struct Measured {
    std::optional<std::string> feeder;
    FeederRequest feeder_request;
  };
  ProfileSwitch(const Profile &profile, const Sysroot &root, Backend backend, const Measured &measured,
                const NodeSeams &seams = {});
  [[nodiscard]] Result<TransactionReport> run(const TransactionOptions &opt);

  ~ProfileSwitch();
  ProfileSwitch(const ProfileSwitch &) = delete;
  ProfileSwitch &operator=(const ProfileSwitch &) = delete;

  [[nodiscard]] ModuleStep &modules();
  [[nodiscard]] KnobStep &knobs();
  [[nodiscard]] NicStep &nic();
  [[nodiscard]] SchedStep &sched();
  [[nodiscard]] BootStep &boot();

private:
  const Profile &profile_;
  const Sysroot &root_;
  Backend backend_;
  std::unique_ptr<NodeConfig> measured_; // the feeder settings of a measured switch
  // The steps, from the node's ordered domain list (node/domains.hpp).
  std::unique_ptr<detail::NodeDomains> domains_;
};

struct NodeCheck {
  std::vector<DomainCheck> domains;
  std::vector<NodeDifference> differences;
  [[nodiscard]] bool matches() const;
};

// Compares the node with `profile` in every domain the profile has.  Domains
// that cannot be read here (NIC and threads on a --sysroot tree) are
// "unchecked" with the reason, never a silent match.
[[nodiscard]] Result<NodeCheck> check_node(const Profile &profile, const Sysroot &root, const NodeSeams &seams = {});
// The domains check_node() compares, in its order (node/domains.cpp).
[[nodiscard]] std::vector<std::string_view> checked_domains();

struct NodeStatus {
  std::string profile; // active profile, "" when none
  Backend backend = Backend::direct;
  std::vector<DomainState> domains;
  std::vector<NodeDifference> differences; // of the active profile
  std::string fingerprint;                 // profile_fingerprint() of it, "" when it does not load

  // A profile is active, it was checked (its file loads, unchanged since
  // the switch) and no domain is drifted, failed or rolled back (what
  // verify checks).
  [[nodiscard]] bool in_line() const;
  // The domains that keep it out of line ("knobs drifted, nic failed").
  [[nodiscard]] std::string out_of_line() const;
  // What a scheduler can match a node on: the fingerprint while in line, ""
  // otherwise (no profile, or drifted).
  [[nodiscard]] std::string conformance() const { return in_line() ? fingerprint : std::string(); }
};

[[nodiscard]] Result<NodeStatus> node_status(const Sysroot &root, const NodeSeams &seams = {});

// The profile a switch made active, as switched: its name, the file it was
// loaded from when given by path (Profile::file; "" by name) and its
// fingerprint. Every successful switch and configuration apply writes it;
// off removes it.
inline constexpr std::string_view k_profile_record = "/run/mltune/profile.json";
struct ProfileRecord {
  std::string name;
  std::string file;
  std::string fingerprint;
};
[[nodiscard]] Status record_profile(const Sysroot &root, const Profile &p);
[[nodiscard]] Status forget_profile(const Sysroot &root);
[[nodiscard]] Result<std::optional<ProfileRecord>> recorded_profile(const Sysroot &root);
// The profile `name` as the node's active one (status, verify, follow,
// metrics, conformance): where the last switch to `name` took it from a
// file, that file, and a failure saying so when it is gone or has changed
// since (never a profile of the same name elsewhere); else by name.
[[nodiscard]] Result<Profile> load_active_profile(const Sysroot &root, std::string_view name);

struct OffReport {
  std::vector<DomainState>
      domains; // state "restored", "off" (nothing to do), "kept" (not mltune's), "failed", "unchecked"
  [[nodiscard]] bool ok() const;
};

// Returns every domain to what mltune found: the GRUB drop-in removed
// (pending reboot), the persisted configuration removed, the pool and quota
// as the configuration's first apply found them, the feeder off, every
// thread policy and partition restored, every recorded NIC setting, IRQ
// affinity and RPS mask restored, the knobs on their baseline (module and
// direct).  Every domain is tried even when one fails.  Errors only when
// the lock cannot be taken.
[[nodiscard]] Result<OffReport> node_off(const Sysroot &root, const NodeSeams &seams = {});

// What `switch baseline` did: the knob report of the backend it went
// through, and each domain as off reports it ("sched", "nic", "knobs",
// "modules", and "follow" or "profile" where recording it failed).
struct BaselineReport {
  SwitchReport knobs;
  // A dry run: the knobs the direct backend would write back (none through
  // the module, which keeps its own baseline); the domains say "planned".
  SwitchPlan plan;
  std::vector<DomainState> domains;
  [[nodiscard]] bool ok() const;
};

// `switch baseline`: the running-kernel domains a switch changes back on
// their baseline, newest first (thread policies and partitions, NIC
// settings, the knobs through BACKEND, the modules mltune loaded), as `echo
// baseline` and the follower do; under the node lock, the switched profile
// forgotten and, through the module, the switch recorded as followed.  The
// GRUB drop-in, feeder cores, pool and persisted configuration stay: they
// are not the running profile's (node_off() takes them too).  Every domain
// is tried even when one fails.  Errors only when the lock cannot be taken.
// `dry_run`: each domain says what it would restore ("planned", or "off"
// with nothing recorded); nothing is written and the node lock is not taken.
[[nodiscard]] Result<BaselineReport> switch_to_baseline(const Sysroot &root, Backend backend,
                                                        const NodeSeams &seams = {}, bool dry_run = false);

// ---- following the module ---------------------------------------------------
//
// `echo training > /sys/kernel/mltune/profile` switches the kernel knobs
// atomically; the module then sends a change uevent, on which the package's
// udev rule runs `mltunectl follow` (follow_module()).  It brings the
// user-space domains of the module's active profile in line: the kernel
// modules (and then the knobs once more, for knobs that need them), the NIC
// settings and the thread rules, as one transaction; for "baseline" it puts
// them back on their baseline.  When they fail, it writes the profile they
// are still in line with back to the module, so the kernel part rolls back
// too, and records why.  A `mltunectl switch` through the module records
// what it did, so the follower it wakes has nothing to do.

inline constexpr std::string_view k_follow_state = "/run/mltune/follow.json";

struct FollowRecord {
  std::uint64_t generation = 0; // the module's generation when it was followed
  std::string profile;          // the module's active profile then
  std::string result;           // "ok", "rolled-back", "failed"
  std::string error;            // why, when not ok
  std::string in_line;          // the profile the user-space domains are in line with now
  std::string detail;           // what it did, one line
};

struct FollowState {
  FollowRecord last;
  std::optional<FollowRecord> last_failure; // kept while later follows succeed
};

// Nothing to do when the module's generation is the one followed last.
[[nodiscard]] Result<FollowState> follow_module(const Sysroot &root, const NodeSeams &seams = {});
// What the last follow recorded (nullopt: none since boot).
[[nodiscard]] Result<std::optional<FollowState>> follow_state(const Sysroot &root);
// Records that the user-space domains are in line with `profile` at the
// module's current generation (ProfileSwitch and node_off do, so that the
// follower their switch wakes skips).  Takes no lock: the caller holds it.
[[nodiscard]] Status note_followed(const Sysroot &root, const std::string &profile);
// Runs follow_module() on every mltune uevent of the kernel (a netlink
// socket: the stand-in for the udev rule where there is no udev), once at
// the start, until `stop` returns true (checked at least every 200 ms).
[[nodiscard]] Status follow_listen(const Sysroot &root, const std::function<bool()> &stop,
                                   const std::function<void(const FollowState &)> &log);

} // namespace mltune
