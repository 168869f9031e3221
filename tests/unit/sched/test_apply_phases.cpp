// Unit tests of each phase of run_plans (sched/apply_phases.hpp) on a small
// fake SchedSystem over a fake sysroot: the ledger and its cache, admission per
// root domain, and per thread the verdicts without change, the partition, the
// placement, sched_setattr with its fallback, and the bookkeeping.
#include "sched/apply_phases.hpp"
#include "sched/internal.hpp"

#include "fake_sysroot.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <map>

using namespace mltune;
using namespace mltune::detail;
using mltune::test::FakeSysroot;

namespace {

// Threads in memory; set() and ensure_partition() answer what a test asks.
class PhaseSched final : public SchedSystem {
public:
  explicit PhaseSched(Sysroot root) : root_(std::move(root)) {}
  [[nodiscard]] const Sysroot &root() const override { return root_; }
  [[nodiscard]] std::vector<int> pids() const override { return {}; }
  [[nodiscard]] std::vector<int> tids(int) const override { return {}; }
  [[nodiscard]] Result<ThreadInfo> thread(int, int) const override { return failure("gone", ESRCH); }
  [[nodiscard]] Result<SchedAttr> get(int tid) const override {
    const auto it = attrs.find(tid);
    return it == attrs.end() ? Result<SchedAttr>(failure("gone", ESRCH)) : Result<SchedAttr>(it->second);
  }
  Status set(int tid, const SchedAttr &a) override {
    if (!set_errnos.empty()) {
      const int e = set_errnos.front();
      set_errnos.erase(set_errnos.begin());
      return failure("sched_setattr: error " + std::to_string(e), e);
    }
    attrs[tid] = a;
    return {};
  }
  Status move_thread(int tid, const std::string &cg) override {
    moves.emplace_back(tid, cg);
    return {};
  }
  Result<std::string> ensure_partition(const std::string &, const std::string &) override {
    ++ensured;
    if (partition_state != "root") {
      return partition_state;
    }
    return std::string("root");
  }
  Status remove_partition(const std::string &cg) override {
    removed.push_back(cg);
    return {};
  }

  std::map<int, SchedAttr> attrs;
  std::vector<int> set_errnos; // errors for the next set() calls
  std::vector<std::pair<int, std::string>> moves;
  std::vector<std::string> removed;
  std::string partition_state = "root";
  int ensured = 0;

private:
  Sysroot root_;
};

SchedAttr deadline(uint64_t runtime_us, uint64_t period_us) {
  SchedAttr a;
  a.policy = SchedPolicy::deadline;
  a.runtime = runtime_us * 1000;
  a.deadline = period_us * 1000;
  a.period = period_us * 1000;
  return a;
}

SchedAttr fifo(int prio) {
  SchedAttr a;
  a.policy = SchedPolicy::fifo;
  a.priority = prio;
  return a;
}

ThreadPlan plan(int tid, const SchedRule &rule, SchedAttr want, std::string partition = "", std::string cpus = "") {
  ThreadPlan p;
  p.t.pid = 100;
  p.t.tid = tid;
  p.t.comm = "NCCL Progress";
  p.t.cgroup = "/";
  p.t.starttime = 5000 + static_cast<uint64_t>(tid);
  p.rule = &rule;
  p.want = want;
  p.partition = std::move(partition);
  p.cpus = std::move(cpus);
  return p;
}

Ledger four_cpus() {
  Ledger l;
  l.domains.push_back(l.make("default", CpuSet{0, 1, 2, 3}));
  return l;
}

// One apply run on `sys` with a ledger of four CPUs.
struct ApplyHarness {
  explicit ApplyHarness(PhaseSched &sys, SchedOptions o = {})
      : opt(std::move(o)), ledger(four_cpus()), run{sys, opt, ledger, rep, {}, {}, {}} {}
  SchedOptions opt;
  Ledger ledger;
  SchedReport rep;
  ApplyRun run;
};

} // namespace

TEST(SchedApplyPhases, LedgerDomains) {
  Ledger l = four_cpus();
  l.domains.push_back(l.make("/mltune.feeder", CpuSet{2, 3}));
  EXPECT_NEAR(l.domains[0].limit, 3.8, 1e-9);
  EXPECT_NEAR(l.domains[1].limit, 1.9, 1e-9);
  EXPECT_EQ(l.of_cgroup("/mltune.feeder/x").name, "/mltune.feeder");
  EXPECT_EQ(l.of_cgroup("/mltune.feederx").name, "default");
  EXPECT_EQ(l.find("nope"), nullptr);
}

TEST(SchedApplyPhases, AdmissionLedgerFreshAndCached) {
  FakeSysroot fs;
  fs.set("/sys/devices/system/cpu/online", "0-3\n");
  PhaseSched sys(fs.root());
  const Ledger fresh = admission_ledger(sys, {});
  ASSERT_EQ(fresh.domains.size(), 1U);
  EXPECT_EQ(fresh.domains[0].cpus, (CpuSet{0, 1, 2, 3}));
  SchedOptions no_cache;
  no_cache.ledger_ttl_ms = 60000; // a TTL without a watcher's cache: always a fresh scan
  SchedOptions cached;
  cached.ledger_ttl_ms = 60000;
  cached.watch = sched_watch_cache();
  (void)admission_ledger(sys, cached);
  charge_cached_ledger(cached, "default", 0.5);
  fs.set("/sys/devices/system/cpu/online", "0-7\n");
  const Ledger again = admission_ledger(sys, cached);
  EXPECT_EQ(again.domains[0].cpus, (CpuSet{0, 1, 2, 3})) << "the cache, not a rescan";
  EXPECT_NEAR(again.domains[0].used, 0.5, 1e-9);
  EXPECT_EQ(admission_ledger(sys, no_cache).domains[0].cpus.count(), 8U);
  charge_cached_ledger(cached, "/mltune.new", 0.1); // unknown domain: rescan next time
  EXPECT_EQ(admission_ledger(sys, cached).domains[0].cpus.count(), 8U);
}

TEST(SchedApplyPhases, AssignDomainsAddsPartitionsAndSumsRequests) {
  SchedRule rule;
  Ledger l = four_cpus();
  std::vector<ThreadPlan> plans{plan(1, rule, deadline(500, 1000), "/mltune.feeder", "2-3"),
                                plan(2, rule, deadline(250, 1000)), plan(3, rule, fifo(10))};
  plans[1].before = deadline(100, 1000); // already DEADLINE in the default domain
  assign_domains(l, plans);
  ASSERT_EQ(l.domains.size(), 2U);
  EXPECT_EQ(l.domains[0].cpus, (CpuSet{0, 1}));
  EXPECT_EQ(plans[0].domain, "/mltune.feeder");
  EXPECT_EQ(plans[1].domain, "default");
  EXPECT_TRUE(plans[2].domain.empty());
  EXPECT_NEAR(l.find("/mltune.feeder")->requested, 0.5, 1e-9);
  EXPECT_NEAR(l.find("default")->requested, 0.15, 1e-9);
}

TEST(SchedApplyPhases, RefuseOverbookedDomains) {
  SchedRule rule;
  Ledger l;
  l.domains.push_back(l.make("default", CpuSet{0}));
  std::vector<ThreadPlan> plans{plan(7, rule, deadline(600, 1000)), plan(8, rule, deadline(600, 1000)),
                                plan(9, rule, fifo(5))};
  assign_domains(l, plans);
  SchedReport rep;
  refuse_overbooked(l, plans, rep);
  EXPECT_TRUE(plans[0].refused);
  EXPECT_TRUE(plans[1].refused);
  EXPECT_FALSE(plans[2].refused);
  ASSERT_EQ(rep.domains.size(), 1U);
  ASSERT_EQ(rep.notes.size(), 1U);
  EXPECT_EQ(rep.notes[0].rfind("admission refused: ", 0), 0U);
  EXPECT_NE(rep.notes[0].find("; threads 7 \"NCCL Progress\", 8 \"NCCL Progress\""), std::string::npos);
}

TEST(SchedApplyPhases, SettleRefusedUnchangedDryRun) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule plain;
  plain.name = "r";
  SchedRule with_fallback = plain;
  with_fallback.fallback = fifo(50);
  {
    ApplyHarness r(sys);
    ThreadPlan p = plan(1, plain, deadline(100, 1000));
    p.refused = true;
    ThreadApply ta;
    EXPECT_TRUE(settle_without_change(r.run, p, ta));
    ASSERT_EQ(r.rep.actions.size(), 1U);
    EXPECT_EQ(r.rep.actions[0].result, "refused");
  }
  {
    ApplyHarness r(sys);
    ThreadPlan p = plan(1, with_fallback, deadline(100, 1000), "/mltune.feeder", "2");
    p.refused = true;
    p.before = fifo(50);
    ThreadApply ta;
    EXPECT_TRUE(settle_without_change(r.run, p, ta));
    EXPECT_TRUE(p.partition.empty());
    EXPECT_EQ(r.rep.actions.at(0).result, "fallback");
    EXPECT_NE(r.rep.actions[0].message.find("fallback already in effect"), std::string::npos);
  }
  {
    SchedOptions o;
    o.dry_run = true;
    ApplyHarness r(sys, o);
    ThreadPlan p = plan(1, plain, fifo(10));
    ThreadApply ta;
    EXPECT_TRUE(settle_without_change(r.run, p, ta));
    EXPECT_EQ(r.rep.actions.at(0).result, "dry-run");
  }
  {
    ApplyHarness r(sys);
    ThreadPlan p = plan(1, plain, fifo(10));
    ThreadApply ta;
    EXPECT_FALSE(settle_without_change(r.run, p, ta));
    EXPECT_EQ(ta.want, fifo(10));
    EXPECT_TRUE(ta.in_place);
    EXPECT_TRUE(r.rep.actions.empty());
  }
}

TEST(SchedApplyPhases, PartitionOnceGoodAndBad) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  ApplyHarness r(sys);
  const ThreadPlan p = plan(1, rule, deadline(100, 1000), "/mltune.feeder", "2-3");
  ensure_partition_once(r.run, p);
  ensure_partition_once(r.run, p);
  EXPECT_EQ(sys.ensured, 1);
  EXPECT_TRUE(r.run.partitions_ok.contains("/mltune.feeder"));
  ASSERT_EQ(r.run.st.partitions.size(), 1U);
  EXPECT_EQ(r.run.st.partitions[0].second, "2-3");
  EXPECT_EQ(r.rep.notes.at(0),
            "partition /sys/fs/cgroup/mltune.feeder: cpus 2-3, cpuset.cpus.partition reads \"root\"");

  sys.partition_state = "root invalid (Cpu list in cpuset.cpus not exclusive)";
  const ThreadPlan q = plan(2, rule, deadline(100, 1000), "/mltune.cpus-5", "5");
  ensure_partition_once(r.run, q);
  EXPECT_EQ(r.run.partitions_bad.at("/mltune.cpus-5"),
            "cpuset.cpus.partition reads \"root invalid (Cpu list in cpuset.cpus not exclusive)\"");
  EXPECT_EQ(sys.removed, std::vector<std::string>{"/mltune.cpus-5"});
}

TEST(SchedApplyPhases, PlaceThreadMovesOrFallsBack) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  rule.fallback = fifo(50);
  ApplyHarness r(sys);
  ThreadPlan p = plan(1, rule, deadline(100, 1000), "/mltune.feeder", "2-3");
  ThreadApply ta;
  ta.want = p.want;
  ta.in_place = false;
  EXPECT_FALSE(place_thread(r.run, p, ta));
  EXPECT_EQ(ta.moved_to, "/mltune.feeder");
  EXPECT_EQ(sys.moves.back(), (std::pair<int, std::string>{1, "/mltune.feeder"}));

  sys.partition_state = "member";
  ThreadPlan q = plan(2, rule, deadline(100, 1000), "/mltune.cpus-5", "5");
  ThreadApply tb;
  tb.want = q.want;
  tb.in_place = false;
  EXPECT_FALSE(place_thread(r.run, q, tb));
  EXPECT_TRUE(q.refused);
  EXPECT_EQ(tb.want, fifo(50));
  EXPECT_TRUE(tb.moved_to.empty());
  EXPECT_EQ(tb.why, "placement on CPUs 5 failed: cpuset.cpus.partition reads \"member\"");

  SchedRule no_fallback;
  ThreadPlan s = plan(3, no_fallback, deadline(100, 1000), "/mltune.cpus-5", "5");
  ThreadApply tc;
  tc.in_place = false;
  EXPECT_TRUE(place_thread(r.run, s, tc));
  EXPECT_EQ(r.rep.actions.back().result, "failed");
}

TEST(SchedApplyPhases, SetFallsBackOnEbusy) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  rule.fallback = fifo(50);
  ApplyHarness r(sys);
  ThreadPlan p = plan(1, rule, deadline(100, 1000));
  ThreadApply ta;
  ta.want = p.want;
  sys.set_errnos = {EBUSY};
  ASSERT_TRUE(set_with_retries(r.run, p, ta).ok());
  EXPECT_TRUE(p.refused);
  EXPECT_EQ(sys.attrs.at(1), fifo(50));
  EXPECT_EQ(ta.why.rfind("the kernel refused the bandwidth (EBUSY) for ", 0), 0U);

  ThreadPlan q = plan(2, rule, deadline(100, 1000));
  ThreadApply tb;
  tb.want = q.want;
  tb.moved_to = "/mltune.feeder";
  sys.set_errnos = {EPERM};
  ASSERT_TRUE(set_with_retries(r.run, q, tb).ok());
  EXPECT_FALSE(q.refused);
  EXPECT_EQ(sys.attrs.at(2), deadline(100, 1000));
  // A sleeping thread still in the old root domain: set where it is, then in.
  ASSERT_EQ(sys.moves.size(), 2U);
  EXPECT_EQ(sys.moves[0], (std::pair<int, std::string>{2, "/"}));
  EXPECT_EQ(sys.moves[1], (std::pair<int, std::string>{2, "/mltune.feeder"}));
}

TEST(SchedApplyPhases, EpermFollowsTheThreadBetweenDomains) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  ApplyHarness r(sys);
  ThreadPlan q = plan(2, rule, deadline(100, 1000));
  ThreadApply tb;
  tb.want = q.want;
  tb.moved_to = "/mltune.feeder";
  // Refused inside and outside: it had woken up inside meanwhile.
  sys.set_errnos = {EPERM, EPERM};
  ASSERT_TRUE(set_with_retries(r.run, q, tb).ok());
  EXPECT_EQ(sys.attrs.at(2), deadline(100, 1000));
  ASSERT_EQ(sys.moves.size(), 2U);
  EXPECT_EQ(sys.moves.back().second, "/mltune.feeder");

  // Refused every time: it fails, inside the partition (finish_thread puts
  // it back from there), with no policy changed.
  ThreadPlan w = plan(3, rule, deadline(100, 1000));
  ThreadApply tw;
  tw.want = w.want;
  tw.moved_to = "/mltune.feeder";
  sys.moves.clear();
  sys.set_errnos = std::vector<int>(20, EPERM);
  const Status s = set_with_retries(r.run, w, tw);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().sys_errno, EPERM);
  EXPECT_EQ(sys.attrs.count(3), 0U);
  ASSERT_FALSE(sys.moves.empty());
  EXPECT_EQ(sys.moves.back().second, "/mltune.feeder");
}

TEST(SchedApplyPhases, FinishRecordsOrReports) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  rule.name = "r";
  ApplyHarness r(sys);
  ThreadPlan p = plan(1, rule, fifo(10));
  ThreadApply ta;
  ta.want = p.want;
  ta.moved_to = "/mltune.feeder";
  finish_thread(r.run, p, ta, failure("sched_setattr: No such process", ESRCH));
  EXPECT_EQ(r.rep.actions.back().result, "gone");
  EXPECT_EQ(sys.moves.back(), (std::pair<int, std::string>{1, "/"})) << "put back";

  ThreadApply ok;
  ok.want = p.want;
  finish_thread(r.run, p, ok, Status{});
  EXPECT_EQ(r.rep.actions.back().result, "applied");
  ASSERT_EQ(r.run.st.threads.size(), 1U);
  EXPECT_EQ(r.run.st.threads[0].rule, "r");
  EXPECT_NE(fs.get(k_sched_state_path).find("\"rule\""), std::string::npos);
}

TEST(SchedApplyPhases, ApplyPlanEndToEnd) {
  FakeSysroot fs;
  PhaseSched sys(fs.root());
  SchedRule rule;
  rule.name = "r";
  std::vector<SchedAction> logged;
  SchedOptions o;
  o.log = [&](const SchedAction &a) { logged.push_back(a); };
  ApplyHarness r(sys, o);
  ThreadPlan p = plan(4, rule, deadline(100, 1000), "/mltune.feeder", "2-3");
  apply_plan(r.run, p);
  ASSERT_EQ(logged.size(), 1U);
  EXPECT_EQ(logged[0].result, "applied");
  EXPECT_EQ(logged[0].cgroup, "/mltune.feeder");
  EXPECT_EQ(sys.attrs.at(4), deadline(100, 1000));
  EXPECT_EQ(r.rep.actions.size(), 1U);
}
