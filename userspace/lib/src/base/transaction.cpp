// run_transaction() (step.hpp).
#include "mltune/step.hpp"

#include <cerrno>
#include <csignal>
#include <ranges>

namespace mltune {

Result<DomainCheck> Step::check(std::vector<NodeDifference> & /*out*/) {
  return DomainCheck{std::string(name()), "not-applicable", 0, {}};
}

std::optional<DomainState> Step::state() {
  return std::nullopt;
}

namespace {

void progress(const TransactionOptions &opt, const Step &s, std::string_view phase) {
  if (opt.progress) {
    opt.progress(s.name(), phase);
  }
}

// Rolls back `done` newest first; "" when every rollback succeeded, else
// what failed.
std::string roll_back(std::span<Step *const> done, const TransactionOptions &opt) {
  std::string failed;
  for (Step *s : std::views::reverse(done)) {
    progress(opt, *s, "rollback");
    if (auto st = s->rollback(); !st) {
      failed += "; rollback of " + std::string(s->name()) + " failed: " + st.error().message;
    }
  }
  return failed;
}

// The steps' names in the order they were rolled back: newest first.
std::string names_rolled_back(std::span<Step *const> steps) {
  std::string out;
  for (const Step *s : std::views::reverse(steps)) {
    out += (out.empty() ? "" : ", ") + std::string(s->name());
  }
  return out;
}

// The step's error with its name in front and what the rollback did behind.
Error abort_with(const Error &e, const Step &at, std::string_view phase, std::span<Step *const> done,
                 const TransactionOptions &opt) {
  Error out = with_context(e, std::string(at.name()) + " " + std::string(phase));
  const std::string failed = roll_back(done, opt);
  if (!failed.empty()) {
    out.message += failed;
  } else if (!done.empty()) {
    out.message += "; rolled back: " + names_rolled_back(done);
  } else {
    out.message += "; nothing was changed";
  }
  return out;
}

} // namespace

void stop_point(std::string_view stop_at, std::string_view point) {
  if (!stop_at.empty() && stop_at == point) {
    (void)::raise(SIGSTOP);
  }
}

Result<TransactionReport> run_transaction(std::span<Step *const> steps, const TransactionOptions &opt) {
  for (Step *s : steps) {
    progress(opt, *s, "plan");
    if (auto st = s->plan(); !st) {
      return with_context(st.error(), std::string(s->name()) + " plan");
    }
  }
  TransactionReport rep;
  if (opt.dry_run) {
    return rep;
  }
  if (opt.before_apply) {
    if (auto st = opt.before_apply(); !st) {
      return with_context(st.error(), "before the first step applied; nothing was changed");
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    progress(opt, *steps[i], "apply");
    if (auto st = steps[i]->apply(); !st) {
      return abort_with(st.error(), *steps[i], "apply", steps.first(i), opt);
    }
    rep.applied.emplace_back(steps[i]->name());
    stop_point(opt.stop_at, std::string(steps[i]->name()) + "/applied");
    if (!opt.fail_after.empty() && steps[i]->name() == opt.fail_after) {
      return abort_with(failure("fault injected after it applied (MLTUNE_FAIL_STEP)", EIO), *steps[i], "apply",
                        steps.first(i + 1), opt);
    }
  }
  if (opt.verify) {
    for (Step *s : steps) {
      progress(opt, *s, "verify");
      if (auto st = s->verify(); !st) {
        return abort_with(st.error(), *s, "verify", steps, opt);
      }
    }
  }
  if (opt.after_apply) {
    auto keep = opt.after_apply();
    if (!keep) {
      Error out = with_context(keep.error(), "after every step applied");
      const std::string failed = roll_back(steps, opt);
      out.message += failed.empty() ? "; rolled back: " + names_rolled_back(steps) : failed;
      return out;
    }
    if (!*keep) {
      rep.rolled_back = true;
      rep.rollback_failed = roll_back(steps, opt);
      if (rep.rollback_failed.starts_with("; ")) {
        rep.rollback_failed.erase(0, 2);
      }
    }
  }
  return rep;
}

} // namespace mltune
