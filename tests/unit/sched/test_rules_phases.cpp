// Unit tests of each phase of policy_fields (sched/rules_phases.hpp) on TOML
// tables: the policy, the numeric fields, the keys a policy allows, booleans,
// and the DEADLINE, FIFO/RR and other-policy attributes.
#include "sched/rules_phases.hpp"

#include <gtest/gtest.h>

using namespace mltune;
using namespace mltune::detail;

namespace {

constexpr const char *k_display = "t.toml";
constexpr const char *k_ctx = "rule 'r'";

template <class T> std::string error_of(const T &r) {
  return r.ok() ? std::string("(ok)") : r.error().message;
}

} // namespace

TEST(SchedRulesPhases, Policy) {
  const toml::table ok = toml::parse("policy = \"fifo\"\n");
  EXPECT_EQ(*parse_policy({ok, k_display, k_ctx}, false), SchedPolicy::fifo);
  const toml::table none = toml::parse("priority = 3\n");
  EXPECT_EQ(error_of(parse_policy({none, k_display, k_ctx}, false)),
            "t.toml:1: rule 'r': missing policy (deadline, fifo, rr, other)");
  const toml::table batch = toml::parse("\n policy = \"batch\"\n");
  EXPECT_EQ(error_of(parse_policy({batch, k_display, k_ctx}, false)),
            "t.toml:2: rule 'r': unknown policy 'batch' (expected deadline, fifo, rr, other)");
  const toml::table dl = toml::parse("policy = \"deadline\"\n");
  EXPECT_TRUE(parse_policy({dl, k_display, k_ctx}, false).ok());
  EXPECT_EQ(error_of(parse_policy({dl, k_display, k_ctx}, true)), "t.toml:1: rule 'r': a fallback cannot be deadline");
}

TEST(SchedRulesPhases, NumbersInRange) {
  const toml::table t = toml::parse("priority = 10\nnice = -5\nruntime_us = 100\nperiod_us = 1000\n");
  const auto n = policy_numbers({t, k_display, k_ctx});
  ASSERT_TRUE(n.ok()) << error_of(n);
  EXPECT_EQ(n->prio, 10);
  EXPECT_EQ(n->nice, -5);
  EXPECT_EQ(n->runtime, 100);
  EXPECT_EQ(n->deadline, -1);
  EXPECT_EQ(n->period, 1000);
  const toml::table bad = toml::parse("priority = 10\n\nnice = 20\n");
  EXPECT_EQ(error_of(policy_numbers({bad, k_display, k_ctx})),
            "t.toml:3: rule 'r': nice must be an integer in [-20, 19]");
  const toml::table str = toml::parse("priority = \"10\"\n");
  EXPECT_EQ(error_of(policy_numbers({str, k_display, k_ctx})),
            "t.toml:1: rule 'r': priority must be an integer in [1, 99]");
}

TEST(SchedRulesPhases, OnlyKeysOfThePolicy) {
  const toml::table t = toml::parse("policy = \"fifo\"\npriority = 3\nnice = 1\n");
  EXPECT_TRUE(only_keys({t, k_display, k_ctx}, "fifo", {"priority", "nice"}).ok());
  EXPECT_EQ(error_of(only_keys({t, k_display, k_ctx}, "fifo", {"priority"})),
            "t.toml:3: rule 'r': nice does not apply to policy fifo");
}

TEST(SchedRulesPhases, Booleans) {
  const toml::table t = toml::parse("reset_on_fork = false\noverrun_signal = 1\n");
  EXPECT_FALSE(*policy_bool({t, k_display, k_ctx}, "reset_on_fork", true));
  EXPECT_TRUE(*policy_bool({t, k_display, k_ctx}, "absent", true));
  EXPECT_EQ(error_of(policy_bool({t, k_display, k_ctx}, "overrun_signal", false)),
            "t.toml:2: rule 'r': overrun_signal must be true or false");
}

TEST(SchedRulesPhases, DeadlineFields) {
  const toml::table t = toml::parse("policy = \"deadline\"\nruntime_us = 100\nperiod_us = 1000\n");
  const PolicyTable pt{t, k_display, k_ctx};
  SchedAttr a;
  ASSERT_TRUE(deadline_fields(pt, "deadline", *policy_numbers(pt), a).ok());
  EXPECT_EQ(a.runtime, 100'000U);
  EXPECT_EQ(a.deadline, 1'000'000U) << "deadline defaults to the period";
  EXPECT_EQ(a.period, 1'000'000U);
  EXPECT_EQ(a.flags, k_sched_flag_reset_on_fork);

  PolicyNumbers n;
  n.runtime = 500;
  n.deadline = 400;
  n.period = 1000;
  EXPECT_EQ(error_of(deadline_fields(pt, "deadline", n, a)),
            "t.toml:1: rule 'r': deadline needs runtime_us <= deadline_us <= period_us (got 500 <= 400 <= 1000)");
  EXPECT_EQ(error_of(deadline_fields(pt, "deadline", PolicyNumbers{}, a)),
            "t.toml:1: rule 'r': deadline needs runtime_us and period_us");
  const toml::table prio = toml::parse("policy = \"deadline\"\npriority = 3\n");
  EXPECT_EQ(error_of(deadline_fields({prio, k_display, k_ctx}, "deadline", n, a)),
            "t.toml:2: rule 'r': priority does not apply to policy deadline");
}

TEST(SchedRulesPhases, PriorityFields) {
  const toml::table t = toml::parse("policy = \"rr\"\npriority = 7\nreset_on_fork = false\n");
  const PolicyTable pt{t, k_display, k_ctx};
  SchedAttr a;
  ASSERT_TRUE(priority_fields(pt, "rr", *policy_numbers(pt), a).ok());
  EXPECT_EQ(a.priority, 7);
  EXPECT_EQ(a.flags, 0U);
  const toml::table none = toml::parse("policy = \"rr\"\n");
  EXPECT_EQ(error_of(priority_fields({none, k_display, k_ctx}, "rr", PolicyNumbers{}, a)),
            "t.toml:1: rule 'r': rr needs priority (1-99)");
}

TEST(SchedRulesPhases, NiceFields) {
  const toml::table t = toml::parse("policy = \"other\"\nnice = -3\n");
  const PolicyTable pt{t, k_display, k_ctx};
  SchedAttr a;
  ASSERT_TRUE(nice_fields(pt, "other", *policy_numbers(pt), a).ok());
  EXPECT_EQ(a.nice, -3);
  EXPECT_EQ(a.flags, 0U) << "reset_on_fork is off by default for other";
}

TEST(SchedRulesPhases, AllPhasesTogether) {
  const toml::table t = toml::parse("policy = \"deadline\"\nruntime_us = 50\ndeadline_us = 100\nperiod_us = 100\n"
                                    "overrun_signal = true\n");
  SchedAttr a;
  a.nice = 5; // reset first
  ASSERT_TRUE(policy_fields(t, k_display, k_ctx, a, false).ok());
  EXPECT_EQ(a.policy, SchedPolicy::deadline);
  EXPECT_EQ(a.nice, 0);
  EXPECT_EQ(a.flags, k_sched_flag_reset_on_fork | k_sched_flag_dl_overrun);
  EXPECT_FALSE(policy_fields(t, k_display, k_ctx, a, true).ok());
}
