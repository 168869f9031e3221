// The proc-connector watcher (sched_watch) on scripted events: comm, fork,
// exec and exit events drive the rules on a fake node, lost events rescan,
// deferred state records reach the state file, and source errors end it.
#include "fake_sched.hpp"
#include "fake_sysroot.hpp"

#include "mltune/profile.hpp"
#include "mltune/sched.hpp"

#include <algorithm>
#include <cerrno>
#include <deque>
#include <gtest/gtest.h>
#include <map>
#include <set>

using namespace mltune;
using mltune::test::FakeSched;
using mltune::test::FakeSysroot;

namespace {

// Plays a script of waits; each step may first change the node (`before`).
// When the script is over the watcher is told to stop.
class ScriptedSource final : public ProcEventSource {
public:
  struct Step {
    std::function<void()> before;
    Result<ProcEventBatch> batch = ProcEventBatch{};
  };
  void events(std::vector<ProcEvent> evs, std::function<void()> before = {}) {
    ProcEventBatch b;
    b.events = std::move(evs);
    steps_.push_back({std::move(before), b});
  }
  void push(Step s) { steps_.push_back(std::move(s)); }

  Result<ProcEventBatch> wait(int timeout_ms) override {
    EXPECT_GT(timeout_ms, 0);
    if (steps_.empty()) {
      done = true;
      ProcEventBatch idle;
      idle.idle = true;
      return idle;
    }
    Step s = std::move(steps_.front());
    steps_.pop_front();
    if (s.before) {
      s.before();
    }
    return s.batch;
  }
  void unsubscribe() override { ++unsubscribed; }

  bool done = false;
  int unsubscribed = 0;

private:
  std::deque<Step> steps_;
};

ProcEvent ev(ProcEvent::Kind k, int pid, int tid) {
  return {k, pid, tid, 0, {}};
}

const char *const k_rules = R"(
[[sched.rule]]
name = "nccl-progress"
thread = "NCCL Progress*"
policy = "deadline"
runtime_us = 500
deadline_us = 1000
period_us = 1000
fallback = { policy = "other", nice = -10 }
)";

class Watch : public ::testing::Test {
protected:
  void SetUp() override {
    fake.set("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    fake.set("/proc/sys/kernel/sched_rt_period_us", "1000000\n");
    fake.set("/proc/sys/kernel/osrelease", "6.12.0-mltune\n");
    fake.set("/sys/devices/system/cpu/online", "0-3\n");
    auto p = ProfileLoader().load_text(k_rules, "test.toml");
    ASSERT_TRUE(p) << p.error().message;
    rules = p->sched_rules;
    opt.stop = [this] { return src.done; };
    opt.log = [this](const std::string &s) { lines.push_back(s); };
    opt.sched.ledger_ttl_ms = 60000; // as mltunectl sched watch
  }
  Status run() { return sched_watch(sys, rules, opt, src); }
  [[nodiscard]] bool logged(const std::string &part) const {
    return std::ranges::any_of(lines, [&](const std::string &l) { return l.find(part) != l.npos; });
  }

  FakeSysroot fake;
  FakeSched sys{fake};
  ScriptedSource src;
  WatchOptions opt;
  std::vector<SchedRule> rules;
  std::vector<std::string> lines;
};

TEST_F(Watch, CommEventForNcclProxyThreadAppliesTheRuleOnce) {
  sys.add(100, 100, "python3");
  sys.add(100, 101, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "NCCL Progress 3"); });
  // The same name again (a second prctl): nothing more to do.
  src.events({ev(ProcEvent::Kind::comm, 100, 101)});
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.attr(101).policy, SchedPolicy::deadline);
  EXPECT_EQ(sys.attr(101).runtime, 500000U);
  EXPECT_EQ(sys.sets_of[101], 1);
  EXPECT_EQ(sys.sets_of.count(100), 0U); // the main thread keeps its name and policy
  EXPECT_TRUE(logged("timing: comm event 100/101"));
  EXPECT_TRUE(logged("watcher stopped"));
  EXPECT_EQ(src.unsubscribed, 1);
}

TEST_F(Watch, CommEventForOtherNamesTouchesNothing) {
  sys.add(100, 100, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 100)}, [&] { sys.rename(100, "pt_autograd_0"); });
  ASSERT_TRUE(run());
  EXPECT_TRUE(sys.sets_of.empty());
  EXPECT_FALSE(logged("timing:"));
}

TEST_F(Watch, InitialScanAppliesToThreadsAlreadyNamed) {
  sys.add(100, 105, "NCCL Progress 0");
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.attr(105).policy, SchedPolicy::deadline);
  EXPECT_EQ(sys.sets_of[105], 1);
}

TEST_F(Watch, ForkLooksAtNewProcessesOnly) {
  // A new thread (tid != tgid) inherits its creator's name: left alone.
  src.events({ev(ProcEvent::Kind::fork, 200, 201)}, [&] {
    sys.add(200, 200, "python3");
    sys.add(200, 201, "NCCL Progress 1");
  });
  // A new process named like a proxy thread: applied.
  src.events({ev(ProcEvent::Kind::fork, 300, 300)}, [&] { sys.add(300, 300, "NCCL Progress 2"); });
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.sets_of.count(201), 0U);
  EXPECT_EQ(sys.attr(201).policy, SchedPolicy::other);
  EXPECT_EQ(sys.sets_of[300], 1);
}

TEST_F(Watch, ExecLooksAtEveryThreadOfTheProcess) {
  src.events({ev(ProcEvent::Kind::exec, 400, 400)}, [&] {
    sys.add(400, 400, "python3");
    sys.add(400, 401, "NCCL Progress 0");
    sys.add(400, 402, "NCCL Progress 1");
  });
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.sets_of[401], 1);
  EXPECT_EQ(sys.sets_of[402], 1);
  EXPECT_EQ(sys.sets_of.count(400), 0U);
}

// A managed thread that renames itself is still timed (it is known); after
// its exit event the watcher has forgotten it.
TEST_F(Watch, ManagedThreadIsKnownUntilItExits) {
  sys.add(100, 101, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "NCCL Progress 0"); });
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "renamed"); });
  ASSERT_TRUE(run());
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string &l) { return l.starts_with("timing: comm event 100/101"); }),
            2);
}

TEST_F(Watch, ExitEventForgetsTheThread) {
  sys.add(100, 101, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "NCCL Progress 0"); });
  src.events({ev(ProcEvent::Kind::exit, 100, 101)});
  // The TID comes back (reused) under a name no rule wants.
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "renamed"); });
  ASSERT_TRUE(run());
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string &l) { return l.starts_with("timing: comm event 100/101"); }),
            1);
  EXPECT_EQ(sys.sets_of[101], 1);
}

TEST_F(Watch, LostEventsRescanEveryThread) {
  ProcEventBatch lost;
  lost.lost = true;
  // Named while events were being dropped: only the rescan can see it.
  src.push({[&] { sys.add(500, 501, "NCCL Progress 0"); }, lost});
  ASSERT_TRUE(run());
  EXPECT_TRUE(logged("events lost (ENOBUFS)"));
  EXPECT_EQ(sys.sets_of[501], 1);
}

TEST_F(Watch, EventAppliesReachTheStateFile) {
  sys.add(100, 101, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "NCCL Progress 0"); });
  ASSERT_TRUE(run());
  const std::string state = fake.get(std::string(k_sched_state_path));
  EXPECT_NE(state.find("\"tid\": 101"), std::string::npos) << state;
}

TEST_F(Watch, SourceErrorEndsTheWatcherAndKeepsTheRecords) {
  sys.add(100, 101, "python3");
  src.events({ev(ProcEvent::Kind::comm, 100, 101)}, [&] { sys.rename(101, "NCCL Progress 0"); });
  src.push({{}, sys_error("proc connector: recv", EIO)});
  auto st = run();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().sys_errno, EIO);
  EXPECT_NE(st.error().message.find("proc connector: recv"), std::string::npos);
  EXPECT_EQ(src.unsubscribed, 0);
  EXPECT_NE(fake.get(std::string(k_sched_state_path)).find("\"tid\": 101"), std::string::npos);
}

// The cached admission ledger (ledger_ttl_ms): 7 x 0.5 CPU of DEADLINE
// fill the default domain (4 CPUs x 0.95); an 8th thread gets its fallback.
TEST_F(Watch, CachedLedgerRefusesBeyondTheLimit) {
  for (int i = 1; i <= 7; ++i) {
    sys.add(100, 100 + i, "NCCL Progress " + std::to_string(i));
  }
  src.events({ev(ProcEvent::Kind::comm, 100, 120)}, [&] { sys.add(100, 120, "NCCL Progress 8"); });
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.attr(107).policy, SchedPolicy::deadline);
  EXPECT_EQ(sys.attr(120).policy, SchedPolicy::other);
  EXPECT_EQ(sys.attr(120).nice, -10);
}

// The exit of a managed DEADLINE thread gives its bandwidth back to the
// cached ledger at once, so the next thread is admitted without a rescan.
TEST_F(Watch, ExitGivesBandwidthBackToTheCachedLedger) {
  for (int i = 1; i <= 7; ++i) {
    sys.add(100, 100 + i, "NCCL Progress " + std::to_string(i));
  }
  src.events({ev(ProcEvent::Kind::exit, 100, 101), ev(ProcEvent::Kind::comm, 100, 120)}, [&] {
    sys.kill(101);
    sys.add(100, 120, "NCCL Progress 8");
  });
  ASSERT_TRUE(run());
  EXPECT_EQ(sys.attr(120).policy, SchedPolicy::deadline);
}

} // namespace
