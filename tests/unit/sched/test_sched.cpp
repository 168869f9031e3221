// Thread scheduling rules on a fake node: rule parsing and matching,
// admission arithmetic (with the refusal text), fallback, reset, and the audit
// warning for NCCL processes without thread names.
#include "fake_sched.hpp"
#include "fake_sysroot.hpp"

#include "mltune/audit.hpp"
#include "mltune/profile.hpp"
#include "mltune/sched.hpp"

#include <cerrno>
#include <gtest/gtest.h>
#include <map>
#include <set>

using namespace mltune;
using mltune::test::FakeSched;
using mltune::test::FakeSysroot;

namespace {

const char *const k_rules = R"(
[[sched.rule]]
name = "nccl-progress"
thread = "NCCL Progress*"
policy = "deadline"
runtime_us = 500
deadline_us = 1000
period_us = 1000
fallback = { policy = "other", nice = -10 }

[[sched.rule]]
name = "nccl-service"
thread_regex = "NCCL Service +[0-9]+"
exe = "*/python3"
policy = "deadline"
runtime_us = 500
period_us = 1000
fallback = { policy = "other", nice = -10 }

[[sched.rule]]
name = "pinned"
thread = "pinned-*"
policy = "deadline"
runtime_us = 800
period_us = 1000
cpus = "3"
fallback = { policy = "other", nice = -10 }
)";

class Sched : public ::testing::Test {
protected:
  void SetUp() override {
    fake.set("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    fake.set("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
    fake.set("/proc/sys/kernel/osrelease", "6.12.0-mltune\n");
    fake.set("/sys/devices/system/cpu/online", "0-3\n");
    auto p = ProfileLoader().load_text(k_rules, "test.toml");
    ASSERT_TRUE(p) << p.error().message;
    rules = p->sched_rules;
  }
  FakeSysroot fake;
  std::vector<SchedRule> rules;
};

ThreadInfo named(const std::string &comm, const std::string &exe = "/usr/bin/python3") {
  ThreadInfo t;
  t.pid = 1;
  t.tid = 2;
  t.comm = comm;
  t.exe = exe;
  t.cgroup = "/";
  return t;
}

} // namespace

TEST_F(Sched, ParsesDeadlineRules) {
  ASSERT_EQ(rules.size(), 3U);
  const SchedRule &r = rules[0];
  EXPECT_EQ(r.name, "nccl-progress");
  EXPECT_EQ(r.attr.policy, SchedPolicy::deadline);
  EXPECT_EQ(r.attr.runtime, 500000U);
  EXPECT_EQ(r.attr.deadline, 1000000U);
  EXPECT_EQ(r.attr.period, 1000000U);
  // reset-on-fork is on by default for deadline (NCCL's service thread forks).
  EXPECT_EQ(r.attr.flags & k_sched_flag_reset_on_fork, k_sched_flag_reset_on_fork);
  ASSERT_TRUE(r.fallback);
  EXPECT_EQ(r.fallback.value().policy, SchedPolicy::other);
  EXPECT_EQ(r.fallback.value().nice, -10);
  EXPECT_DOUBLE_EQ(r.attr.bandwidth(), 0.5);
  // deadline_us defaults to the period.
  EXPECT_EQ(rules[1].attr.deadline, 1000000U);
}

TEST_F(Sched, RejectsBadParameters) {
  auto p = ProfileLoader().load_text(R"(
[[sched.rule]]
name = "bad"
thread = "x"
policy = "deadline"
runtime_us = 2000
period_us = 1000
)",
                                     "bad.toml");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("runtime_us <= deadline_us <= period_us"), std::string::npos) << p.error().message;
  auto q = ProfileLoader().load_text(R"(
[[sched.rule]]
name = "bad"
thread = "x"
policy = "sporadic"
)",
                                     "bad2.toml");
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("unknown policy"), std::string::npos) << q.error().message;
}

TEST_F(Sched, MatchesNamesRegexAndExe) {
  const SchedRule *r = sched_match(rules, named("NCCL Progress 8"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->name, "nccl-progress");
  r = sched_match(rules, named("NCCL Service  0"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->name, "nccl-service");
  // The service rule also wants a python3 executable.
  EXPECT_EQ(sched_match(rules, named("NCCL Service  0", "/usr/bin/torchrun")), nullptr);
  EXPECT_EQ(sched_match(rules, named("NCCL IbAsync  0")), nullptr);
  EXPECT_EQ(sched_match(rules, named("python3")), nullptr);
}

TEST_F(Sched, AppliesWithinAdmissionAndLeavesOthers) {
  FakeSched sys(fake.root());
  sys.add(100, 100, "python3");
  sys.add(100, 101, "NCCL Progress 8");
  sys.add(100, 102, "NCCL Service  0");
  SchedOptions opt;
  auto rep = sched_apply(sys, rules, opt);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(sys.attr(101).policy, SchedPolicy::deadline);
  EXPECT_EQ(sys.attr(101).runtime, 500000U);
  EXPECT_EQ(sys.attr(102).policy, SchedPolicy::deadline);
  EXPECT_EQ(sys.attr(100).policy, SchedPolicy::other);
  ASSERT_EQ(rep->actions.size(), 2U);
  for (const auto &a : rep->actions) {
    EXPECT_EQ(a.result, "applied");
  }
  // Default domain: 4 CPUs x 0.95 = 3.8, fair servers 4 x 0.05, 1.0 requested.
  ASSERT_FALSE(rep->domains.empty());
  const RootDomain &d = rep->domains[0];
  EXPECT_EQ(d.name, "default");
  EXPECT_NEAR(d.limit, 3.8, 1e-9);
  EXPECT_NEAR(d.reserved, 0.2, 1e-9);
  EXPECT_NEAR(d.requested, 1.0, 1e-9);
  EXPECT_TRUE(d.fits());
  // Idempotent: a second run changes nothing.
  const int sets = sys.sets;
  auto again = sched_apply(sys, rules, opt);
  ASSERT_TRUE(again);
  EXPECT_EQ(sys.sets, sets);
  for (const auto &a : again->actions) {
    EXPECT_EQ(a.result, "unchanged");
  }
}

TEST_F(Sched, RefusalExplainsNumbersAndAppliesFallback) {
  FakeSched sys(fake.root());
  sys.add(200, 200, "python3");
  sys.add(200, 201, "pinned-a");
  sys.add(200, 202, "pinned-b");
  auto rep = sched_apply(sys, rules, SchedOptions{});
  ASSERT_TRUE(rep) << rep.error().message;
  bool found = false;
  for (const auto &n : rep->notes) {
    if (n.starts_with("admission refused: ")) {
      found = true;
      EXPECT_EQ(n, "admission refused: root domain /mltune.cpus-3 (CPUs 3): limit 1 CPUs x rt_runtime/rt_period = "
                   "0.950, kernel fair servers 0.050, DEADLINE in use 0.000, requested 1.600 -> total 1.650 "
                   "exceeds the limit; threads 201 \"pinned-a\", 202 \"pinned-b\"");
    }
  }
  EXPECT_TRUE(found);
  for (int tid : {201, 202}) {
    EXPECT_EQ(sys.attr(tid).policy, SchedPolicy::other);
    EXPECT_EQ(sys.attr(tid).nice, -10);
    EXPECT_EQ(sys.cgroup(tid), "/");
  }
  for (const auto &a : rep->actions) {
    EXPECT_EQ(a.result, "fallback");
  }
  // Nothing else: no partition, the other thread untouched.
  EXPECT_EQ(sys.partitions_made, 0);
  EXPECT_EQ(sys.attr(200), SchedAttr{});
}

TEST_F(Sched, RootDomainExplainArithmetic) {
  RootDomain d;
  d.name = "default";
  d.cpus = *parse_cpuset("0-7");
  d.limit = 7.6;
  d.reserved = 0.4;
  d.used = 1.0;
  d.requested = 6.5;
  EXPECT_FALSE(d.fits());
  EXPECT_EQ(d.explain(), "root domain default (CPUs 0-7): limit 8 CPUs x rt_runtime/rt_period = 7.600, kernel fair "
                         "servers 0.400, DEADLINE in use 1.000, requested 6.500 -> total 7.900 exceeds the limit");
  d.requested = 6.2;
  EXPECT_TRUE(d.fits());
  d.limit = -1;
  EXPECT_TRUE(d.fits());
}

TEST_F(Sched, ResetRestoresPreviousState) {
  FakeSched sys(fake.root());
  SchedAttr niced;
  niced.nice = 5;
  sys.add(300, 300, "python3");
  sys.add(300, 301, "NCCL Progress 8", niced);
  sys.add(300, 302, "NCCL Service  0");
  ASSERT_TRUE(sched_apply(sys, rules, SchedOptions{}));
  EXPECT_EQ(sys.attr(301).policy, SchedPolicy::deadline);
  EXPECT_TRUE(fake.root().exists(k_sched_state_path));
  auto rep = sched_reset(sys, SchedOptions{});
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(sys.attr(301).policy, SchedPolicy::other);
  EXPECT_EQ(sys.attr(301).nice, 5);
  EXPECT_EQ(sys.attr(302), SchedAttr{});
  EXPECT_FALSE(fake.root().exists(k_sched_state_path));
  // A second reset has nothing to do.
  auto again = sched_reset(sys, SchedOptions{});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->actions.empty());
}

TEST(SchedAudit, NcclWithoutThreadNames) {
  FakeSysroot fake;
  // 100: libnccl mapped, no NCCL-named thread -> warning.
  fake.set("/proc/100/comm", "python3\n");
  fake.set("/proc/100/maps", "7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n");
  fake.set("/proc/100/task/100/comm", "python3\n");
  fake.set("/proc/100/task/101/comm", "python3\n");
  // 200: libnccl with named threads -> fine.
  fake.set("/proc/200/comm", "python3\n");
  fake.set("/proc/200/maps", "7f00-7f10 r-xp 00000000 08:01 42 /opt/nccl/lib/libnccl.so.2\n");
  fake.set("/proc/200/task/200/comm", "python3\n");
  fake.set("/proc/200/task/201/comm", "NCCL Progress 8\n");
  // 300: no NCCL at all.
  fake.set("/proc/300/comm", "bash\n");
  fake.set("/proc/300/maps", "5600-5610 r-xp 00000000 08:01 7 /usr/bin/bash\n");
  fake.set("/proc/300/task/300/comm", "bash\n");
  const Profile training = *ProfileLoader().load("training");
  AuditOptions opt;
  opt.run_nvidia_smi = false;
  const auto fs = audit(training, fake.root(), opt);
  int n = 0;
  for (const auto &f : fs) {
    if (!f.id.starts_with("sched:nccl-thread-names:")) {
      continue;
    }
    ++n;
    EXPECT_EQ(f.id, "sched:nccl-thread-names:100");
    EXPECT_EQ(f.severity, Severity::warning);
    EXPECT_NE(f.current.find("python3"), std::string::npos);
    EXPECT_EQ(f.recommended, "NCCL_SET_THREAD_NAME=1");
    EXPECT_NE(f.fix.find("NCCL_SET_THREAD_NAME=1"), std::string::npos);
  }
  EXPECT_EQ(n, 1);
}

// Placement (cpus) is a root partition, which only DEADLINE threads get: on
// another policy it would move nothing, so the profile is refused.
TEST(SchedRules, CpusOnlyWithDeadline) {
  auto fifo = ProfileLoader().load_text(R"(
[[sched.rule]]
name = "hog"
thread = "hog"
policy = "fifo"
priority = 1
cpus = "feeder"
)",
                                        "cpus.toml");
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message.find("cpus.toml:2: sched rule 'hog': cpus places DEADLINE threads only"),
            std::string::npos)
      << fifo.error().message;
  auto dl = ProfileLoader().load_text(R"(
[[sched.rule]]
name = "proxy"
thread = "proxy"
policy = "deadline"
runtime_us = 100
period_us = 1000
cpus = "feeder"
)",
                                      "cpus.toml");
  EXPECT_TRUE(dl) << dl.error().message;
}
