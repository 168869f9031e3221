// A profile switch as one transaction over steps, one step per domain.
// Each domain declares its step in its own header (KnobStep: switch.hpp,
// NicStep: nic.hpp, SchedStep: sched.hpp, ModuleStep: modules.hpp,
// BootStep: boot.hpp, PoolStep: pool.hpp, FeederStep: feeder.hpp).
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
// And what the node's read-only and restoring commands ask of each domain
// (verify, active, metrics, off, switch baseline):
//
//   check()     compares the node with the step's settings: what verify and
//               active report; writes nothing.  An error: the settings
//               cannot be compared here at all (verify fails with it).
//   state()     the domain as it is on the node, for a domain whose state is
//               not a profile's (the feeder cores, the pool, the boot
//               parameters): what active and metrics report.
//   summary()   one line for people: what apply() did ("nic: 3 settings
//               changed (eth0)").
//   off()       the domain back on its baseline, as a one-line report that
//               never errors (every domain is tried); with dry_run, what it
//               would restore.
//
// run_transaction() plans every step, then applies them in order; when a
// step fails (or, with verify, does not read back), the steps applied before
// it are rolled back newest first and the error names the step, keeps the
// kind and errno of the failure, and says what was rolled back.
#pragma once

#include "mltune/result.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

// One difference between the node and a profile, the same shape in every
// domain.  `state`: "differs", "missing" (the node lacks the setting),
// "unreadable".
struct NodeDifference {
  std::string domain;   // "modules", "knobs", "nic", "sched"
  std::string key;      // "vm.swappiness", "eth0 coalesce.rx-usecs", "1234 \"NCCL Progress 0\""
  std::string expected; // as the profile states it ("madvise", ">= 2097152", "deadline runtime=...")
  std::string current;  // as read ("" when missing)
  std::string state;
  bool counts = true; // false: an optional setting, reported and ignored
};

// What Step::check() compared in one domain.
struct DomainCheck {
  std::string domain;
  std::string state;       // "match", "differs", "not-applicable" (nothing in the profile), "unchecked"
  std::size_t checked = 0; // settings (knobs, NIC settings, threads) compared
  std::string note;        // why unchecked, what was left out
};

// One domain's state, one line (Step::state(), Step::off()).
struct DomainState {
  std::string domain; // "knobs", "nic", "sched", "feeder", "pool", "boot", "persist"
  // status: "applied", "drifted", "off", "pending-reboot", "unchecked";
  // off: "restored", "off" (nothing to do), "planned" (a dry run), "pending",
  // "pending-reboot", "kept", "failed", "unchecked"
  std::string state;
  std::string detail; // one line for people
};

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

  // The domain's part of verify, active and off (see the top of this
  // file).  A domain without profile settings checks nothing
  // ("not-applicable"); one whose state is its check has no state().
  [[nodiscard]] virtual Result<DomainCheck> check(std::vector<NodeDifference> &out);
  [[nodiscard]] virtual std::optional<DomainState> state();
  [[nodiscard]] virtual std::string summary() const = 0;
  [[nodiscard]] virtual DomainState off(bool dry_run) = 0;
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
  // Measuring hooks (mltunectl prove, switch --gate): `before_apply` runs
  // after every step planned and before the first applies (an error: nothing
  // was changed); `after_apply` after every step applied (and verified).
  // When it returns false, or an error, every step is rolled back newest
  // first: false is a decision (TransactionReport::rolled_back), an error a
  // failure.
  std::function<Status()> before_apply;
  std::function<Result<bool>()> after_apply;
};

// The process stops itself (SIGSTOP) when `point` is `stop_at`: the
// TransactionOptions::stop_at test hook.
void stop_point(std::string_view stop_at, std::string_view point);

struct TransactionReport {
  std::vector<std::string> applied; // step names, in order
  // after_apply decided against the transaction: every applied step was
  // rolled back ("" in rollback_failed) or some failed to (what failed).
  bool rolled_back = false;
  std::string rollback_failed;
};

Result<TransactionReport> run_transaction(std::span<Step *const> steps, const TransactionOptions &opt);

} // namespace mltune
