// The proof's parts (mltune/prove.hpp): the Poisson interval, before against
// after and the gate's limits, the [gate] table, the transaction's measuring
// hooks, and the feeding loop and neighbour on this machine's CPUs.
#include "mltune/noise.hpp"
#include "mltune/profile.hpp"
#include "mltune/prove.hpp"
#include "mltune/step.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <sched.h>

#include <cerrno>

using namespace mltune;

TEST(ProvePoisson, GarwoodIntervalAtKnownCounts) {
  const auto [lo0, hi0] = poisson_interval(0);
  EXPECT_EQ(lo0, 0.0);
  EXPECT_NEAR(hi0, 3.689, 0.001);
  // Exact Garwood bounds: k=10 [4.795, 18.390], k=100 [81.36, 121.63].
  const auto [lo10, hi10] = poisson_interval(10);
  EXPECT_NEAR(lo10, 4.795, 0.02);
  EXPECT_NEAR(hi10, 18.390, 0.05);
  const auto [lo100, hi100] = poisson_interval(100);
  EXPECT_NEAR(lo100, 81.36, 0.1);
  EXPECT_NEAR(hi100, 121.63, 0.1);
}

namespace {

Figure count(const char *name, double v, double lo, double hi) {
  return Figure{name, "/s per core", v, lo, hi, "poisson-95", 0};
}

Measurement with(std::vector<Figure> f) {
  Measurement m;
  m.figures = std::move(f);
  return m;
}

} // namespace

TEST(ProveTicks, TheSchedulerTickIsCountedApart) {
  const auto src = [](NoiseKind k, const char *id) {
    NoiseSource s;
    s.kind = k;
    s.id = id;
    return s;
  };
  EXPECT_TRUE(is_scheduler_tick(src(NoiseKind::timer, "timer:tick_nohz_handler")));
  EXPECT_TRUE(is_scheduler_tick(src(NoiseKind::timer, "timer:tick_sched_timer")));
  EXPECT_TRUE(is_scheduler_tick(src(NoiseKind::timer, "timer:0")));
  // hrtick and the watchdog are hrtimers of their own; "timer:all" is
  // /proc's LOC row, every cause together
  EXPECT_FALSE(is_scheduler_tick(src(NoiseKind::timer, "timer:hrtick")));
  EXPECT_FALSE(is_scheduler_tick(src(NoiseKind::timer, "timer:watchdog_timer_fn")));
  EXPECT_FALSE(is_scheduler_tick(src(NoiseKind::timer, "timer:all")));
  EXPECT_FALSE(is_scheduler_tick(src(NoiseKind::timer, "timer-task:812")));
  EXPECT_FALSE(is_scheduler_tick(src(NoiseKind::irq, "timer:0")));
}

TEST(ProveCompare, VerdictsFollowTheIntervals) {
  const Measurement b = with(
      {count("interruptions", 40, 35, 45), count("involuntary_switches", 5, 3, 8), count("step_p99_us", 100, 90, 110)});
  const Measurement a = with(
      {count("interruptions", 2, 1, 4), count("involuntary_switches", 6, 4, 9), count("step_p99_us", 300, 250, 350)});
  GateLimits g;
  g.limits = {{"interruptions", 1.5}, {"step_p99_us", 2}};
  const auto c = compare_measurements(b, a, g);
  ASSERT_EQ(c.size(), 3U);
  EXPECT_EQ(c[0].verdict, "better");
  EXPECT_FALSE(c[0].failed);
  EXPECT_EQ(c[1].verdict, "same");
  EXPECT_EQ(c[1].limit, 0);
  EXPECT_EQ(c[2].verdict, "worse");
  EXPECT_TRUE(c[2].failed) << "250 > 110 * 2";
  EXPECT_EQ(overall_verdict(c), "mixed");
  EXPECT_NE(c[0].describe().find("interruptions 40.00 [35.00, 45.00] -> 2.00 [1.00, 4.00]"), std::string::npos)
      << c[0].describe();
}

TEST(ProveCompare, WorseWithinTheLimitDoesNotFailTheGate) {
  const Measurement b = with({count("interruptions", 10, 8, 12)});
  const Measurement a = with({count("interruptions", 16, 14, 18)});
  GateLimits g;
  g.limits = {{"interruptions", 1.5}};
  const auto c = compare_measurements(b, a, g);
  ASSERT_EQ(c.size(), 1U);
  EXPECT_EQ(c[0].verdict, "worse");
  EXPECT_FALSE(c[0].failed) << "14 is not above 12 * 1.5";
  EXPECT_EQ(overall_verdict(c), "worse");
  EXPECT_EQ(overall_verdict({}), "same");
}

TEST(ProveCompare, ACountFailsOnlyWhenItAlsoRoseByTheMinimum) {
  GateLimits g;
  g.limits = {{"interruptions", 1.5}};
  // a quiet core: 3x, beyond both intervals, but 4 a second more than before's bound
  auto c = compare_measurements(with({count("interruptions", 2, 1, 3)}), with({count("interruptions", 9, 7, 11)}), g);
  ASSERT_EQ(c.size(), 1U);
  EXPECT_EQ(c[0].verdict, "worse");
  EXPECT_FALSE(c[0].failed) << "7 - 3 is below min_rise " << g.min_rise;
  // the same ratio 20 a second higher fails
  c = compare_measurements(with({count("interruptions", 8, 6, 10)}), with({count("interruptions", 40, 32, 48)}), g);
  EXPECT_TRUE(c[0].failed);
  g.min_rise = 30;
  c = compare_measurements(with({count("interruptions", 8, 6, 10)}), with({count("interruptions", 40, 32, 48)}), g);
  EXPECT_FALSE(c[0].failed) << "32 - 10 is below 30";
}

TEST(ProveGate, DefaultsAndTheProfilesTable) {
  auto p = ProfileLoader().load_text("[gate]\ninterruptions = 3\nstep_p99_us = 2.5\ninvoluntary_switches = false\n"
                                     "rounds = 5\nseconds = 0.5\n",
                                     "g.toml");
  ASSERT_TRUE(p) << p.error().message;
  const GateLimits g = gate_limits(*p);
  EXPECT_EQ(g.limit("interruptions"), 3);
  EXPECT_EQ(g.limit("involuntary_switches"), 0);
  EXPECT_EQ(g.limit("step_p99_us"), 2.5);
  EXPECT_EQ(g.limit("step_max_us"), 0);
  EXPECT_EQ(g.rounds, 5U);
  EXPECT_EQ(g.seconds, 0.5);
  auto plain = ProfileLoader().load_text("", "p.toml");
  ASSERT_TRUE(plain);
  const GateLimits d = gate_limits(*plain);
  EXPECT_EQ(d.limit("interruptions"), 1.5);
  EXPECT_EQ(d.limit("involuntary_switches"), 1.5);
  EXPECT_EQ(d.limit("step_p99_us"), 3);
  EXPECT_EQ(d.limit("step_p999_us"), 0);
  EXPECT_EQ(d.rounds, 3U);
}

TEST(ProveGate, BadTablesNameTheKey) {
  const std::pair<const char *, const char *> cases[] = {
      {"[gate]\nirqs = 2\n", "unknown key 'irqs'"},
      {"[gate]\ninterruptions = true\n", "interruptions = true"},
      {"[gate]\ninterruptions = 0.5\n", "interruptions must be a ratio from 1 to 1000"},
      {"[gate]\nrounds = 0\n", "rounds must be an integer from 1 to 50"},
      {"[gate]\nseconds = 100\n", "seconds must be a number from 0.2 to 60"},
      {"gate = 3\n", "[gate] must be a table"},
  };
  for (const auto &[text, want] : cases) {
    auto p = ProfileLoader().load_text(text, "bad.toml");
    ASSERT_FALSE(p) << text;
    EXPECT_NE(p.error().message.find(want), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("bad.toml:"), std::string::npos) << p.error().message;
  }
}

namespace {

// A step that records what was done to it.
class Recorder final : public Step {
public:
  Recorder(std::string name, std::vector<std::string> &log) : name_(std::move(name)), log_(log) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  Status plan() override { return {}; }
  Status apply() override {
    log_.push_back("apply " + name_);
    return {};
  }
  Status verify() override { return {}; }
  Status rollback() override {
    log_.push_back("rollback " + name_);
    return {};
  }
  Status baseline() override { return {}; }
  [[nodiscard]] std::string summary() const override { return name_; }
  [[nodiscard]] DomainState off(bool /*dry_run*/) override { return {name_, "off", ""}; }

private:
  std::string name_;
  std::vector<std::string> &log_;
};

} // namespace

TEST(ProveTransaction, AfterApplyFalseRollsEveryStepBackNewestFirst) {
  std::vector<std::string> log;
  Recorder a("knobs", log), b("nic", log);
  Step *steps[] = {&a, &b};
  TransactionOptions t;
  t.before_apply = [&] {
    log.emplace_back("before");
    return Status{};
  };
  t.after_apply = [&]() -> Result<bool> {
    log.emplace_back("after");
    return false;
  };
  auto r = run_transaction(steps, t);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->rolled_back);
  EXPECT_EQ(r->rollback_failed, "");
  EXPECT_EQ(
      log, (std::vector<std::string>{"before", "apply knobs", "apply nic", "after", "rollback nic", "rollback knobs"}));
}

TEST(ProveTransaction, AfterApplyTrueKeepsAndErrorsRollBack) {
  std::vector<std::string> log;
  Recorder a("knobs", log);
  Step *steps[] = {&a};
  TransactionOptions keep;
  keep.after_apply = []() -> Result<bool> { return true; };
  auto r = run_transaction(steps, keep);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->rolled_back);
  EXPECT_EQ(log, (std::vector<std::string>{"apply knobs"}));

  log.clear();
  TransactionOptions err;
  err.after_apply = []() -> Result<bool> { return failure("the probe broke"); };
  auto e = run_transaction(steps, err);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("the probe broke"), std::string::npos) << e.error().message;
  EXPECT_NE(e.error().message.find("rolled back: knobs"), std::string::npos) << e.error().message;
  EXPECT_EQ(log, (std::vector<std::string>{"apply knobs", "rollback knobs"}));

  log.clear();
  TransactionOptions before;
  before.before_apply = [] { return Status{failure("no probe")}; };
  auto n = run_transaction(steps, before);
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("nothing was changed"), std::string::npos) << n.error().message;
  EXPECT_TRUE(log.empty());
}

namespace {

int first_allowed_cpu() {
  cpu_set_t s;
  CPU_ZERO(&s);
  if (::sched_getaffinity(0, sizeof s, &s) != 0) {
    return 0;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &s)) {
      return c;
    }
  }
  return 0;
}

} // namespace

TEST(ProveLoop, StepsOnTheCpuItWasGiven) {
  const Sysroot root("/");
  LoopOptions o;
  o.cpus.set(static_cast<unsigned>(first_allowed_cpu()));
  o.seconds = 0.3;
  o.period_us = 1000;
  o.work_iterations = calibrate_work(50);
  auto loop = FeederLoop::prepare(root, o);
  ASSERT_TRUE(loop) << loop.error().message;
  ASSERT_EQ(loop->pids().size(), 1U);
  const int pid = loop->pids()[0];
  EXPECT_EQ(::kill(pid, 0), 0) << "waiting for its start";
  auto run = loop->run();
  ASSERT_TRUE(run) << run.error().message;
  // Counts, not times: at most one step per period, and at least one.
  EXPECT_GE(run->step_ns.size(), 1U);
  EXPECT_LE(run->step_ns.size() + run->missed, 301U);
  EXPECT_GE(run->voluntary, 1U) << "it sleeps between steps";
  EXPECT_EQ(::kill(pid, 0), -1) << "reaped";
}

TEST(ProveLoop, RefusesBadOptionsAndCpusItCannotUse) {
  const Sysroot root("/");
  LoopOptions none;
  auto a = FeederLoop::prepare(root, none);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("at least one CPU"), std::string::npos);
  LoopOptions o;
  o.cpus.set(4000); // no such CPU: sched_setaffinity fails in the child
  o.seconds = 0.2;
  auto loop = FeederLoop::prepare(root, o);
  ASSERT_TRUE(loop) << loop.error().message;
  auto run = loop->run();
  ASSERT_FALSE(run);
  EXPECT_NE(run.error().message.find("CPU 4000: sched_setaffinity"), std::string::npos) << run.error().message;
}

TEST(ProveNeighbour, BusyProcessesGoneWhenItIs) {
  std::vector<int> pids;
  {
    auto n = Neighbour::start(2);
    ASSERT_TRUE(n) << n.error().message;
    pids = n->pids();
    ASSERT_EQ(pids.size(), 2U);
    for (int p : pids) {
      EXPECT_EQ(::kill(p, 0), 0);
    }
  }
  for (int p : pids) {
    errno = 0;
    EXPECT_EQ(::kill(p, 0), -1);
    EXPECT_EQ(errno, ESRCH);
  }
  auto big = Neighbour::start(5000);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("--neighbour"), std::string::npos);
}
