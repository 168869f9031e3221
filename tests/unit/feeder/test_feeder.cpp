// Feeder cores on a fake node: feeder_on/off/check with a fake FeederOs
// (kthread affinity, the sched_ext scheduler, the kernel log) and the cgroup
// v2 files in a fake sysroot -- which kthreads move and back, what the
// cpuset partition gets, runtime CPU changes, rollback of a failed step, and
// the cpuset fallback after a scheduler ejection.
#include "fake_sysroot.hpp"
#include "feeder/busy.hpp"

#include "mltune/feeder.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <optional>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

constexpr unsigned k_pf_kthread = 0x00200000;
constexpr unsigned k_pf_no_setaffinity = 0x04000000;

CpuSet cpus(const std::string &s) {
  auto c = parse_cpuset(s);
  EXPECT_TRUE(c) << s;
  return c ? *c : CpuSet{};
}

class FakeOs final : public FeederOs {
public:
  std::vector<FeederTask> kthreads() override { return tasks; }
  bool get_affinity(int pid, CpuSet &out) override {
    auto it = affinity.find(pid);
    if (it == affinity.end()) {
      return false;
    }
    out = it->second;
    return true;
  }
  bool set_affinity(int pid, const CpuSet &c) override {
    calls.emplace_back(pid, c.str());
    affinity[pid] = c;
    return true;
  }
  Status scx_attach(const FeederState &s, bool update) override {
    attaches.emplace_back(s.cpus.str(), update);
    return {};
  }
  void scx_detach() override { ++detaches; }
  std::string scx_exit_reason() override { return "runtime error: stall on CPU 6"; }
  bool scx_stats(FeederScxStats & /*out*/) override { return false; }
  std::vector<FeederIntruder> scx_intruders() override { return intruders; }
  void scx_forget(int tid) override { forgotten.push_back(tid); }
  std::vector<FeederIntruder> threads(const std::string & /*feeder_cg*/) override { return users; }
  void start_watcher() override { ++watchers; }
  void kmsg(const std::string &line) override { log.push_back(line); }
  // Runs fn, then answers as the kernel would: refuse_isolated makes an
  // isolated partition read back invalid.
  Status while_busy(const CpuSet &c, const std::string & /*cg*/, const std::function<Status()> &fn,
                    std::string &note) override {
    busy.push_back(c.str());
    note = busy_note;
    Status st = fn();
    if (st && refuse_isolated) {
      st = root->write_value("/sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition",
                             "isolated invalid (Cpu list in cpuset.cpus not exclusive)");
    }
    return st;
  }

  void add(int pid, const std::string &comm, const std::string &aff, unsigned flags = k_pf_kthread) {
    tasks.push_back({pid, comm, flags});
    affinity[pid] = cpus(aff);
  }

  std::vector<FeederTask> tasks;
  std::map<int, CpuSet> affinity;
  std::vector<std::pair<int, std::string>> calls; // set_affinity(pid, cpus)
  std::vector<std::pair<std::string, bool>> attaches;
  std::vector<FeederIntruder> intruders; // what the scheduler's guard recorded
  std::vector<int> forgotten;
  std::vector<FeederIntruder> users; // what the sweep finds
  int detaches = 0;
  int watchers = 0;
  std::vector<std::string> log;
  std::vector<std::string> busy; // while_busy(cpus)
  std::string busy_note;
  bool refuse_isolated = false;
  std::optional<Sysroot> root; // where the kernel's answers go
};

class Feeder : public ::testing::Test {
protected:
  void SetUp() override {
    fake.set("/sys/devices/system/cpu/online", "0-7\n");
    fake.set("/sys/fs/cgroup/cgroup.subtree_control", "memory pids\n");
    fake.set("/sys/devices/virtual/workqueue/cpumask", "ff\n");
    // What the kernel creates with the cgroup directory.
    fake.set("/sys/fs/cgroup/mltune-feeder/cpuset.cpus", "\n");
    fake.set("/sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition", "member\n");
    os.add(10, "rcuo/0", "0-7");                                        // movable: off the feeder CPUs
    os.add(11, "ksoftirqd/6", "6", k_pf_kthread | k_pf_no_setaffinity); // per-CPU, not settable
    os.add(12, "kworker/6:1", "6");                                     // one CPU: left to the kernel
    os.add(13, "kswapd0", "0-3");                                       // not on feeder CPUs: kept
    os.root = fake.root();
  }
  [[nodiscard]] std::string cgfile(const std::string &f) const { return fake.get("/sys/fs/cgroup/mltune-feeder/" + f); }
  [[nodiscard]] bool state_exists() const { return std::filesystem::exists(fake.root().path(k_feeder_state)); }

  FakeSysroot fake;
  FakeOs os;
};

TEST_F(Feeder, OnMovesMovableKthreadsAndMakesThePartition) {
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->mechanism, "cpuset");
  EXPECT_EQ(s->housekeeping.str(), "0-5");
  // Only the movable kthread is moved, to the housekeeping CPUs, once.
  EXPECT_EQ(os.calls, (std::vector<std::pair<int, std::string>>{{10, "0-5"}}));
  EXPECT_EQ(s->kthreads, (std::vector<std::pair<int, std::string>>{{10, "0-7"}}));
  EXPECT_EQ(s->kthreads_kept, (std::vector<std::pair<int, std::string>>{{12, "6"}, {13, "0-3"}}));
  // cgroup v2: cpuset enabled, the feeder CPUs, a root partition.
  EXPECT_EQ(fake.get("/sys/fs/cgroup/cgroup.subtree_control"), "+cpuset");
  EXPECT_TRUE(s->cpuset_enabled_by_us);
  EXPECT_EQ(cgfile("cpuset.cpus"), "6-7");
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "root");
  // Unbound workqueues on CPUs 0-5 (hex mask), the old mask recorded.
  EXPECT_EQ(fake.get("/sys/devices/virtual/workqueue/cpumask"), "3f");
  EXPECT_EQ(s->wq_cpumask_before, "ff");
  EXPECT_TRUE(state_exists());
  EXPECT_TRUE(os.attaches.empty());
  EXPECT_EQ(os.watchers, 0);
}

TEST_F(Feeder, OffRestoresExactlyWhatWasThere) {
  ASSERT_TRUE(feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"}));
  os.calls.clear();
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(os.calls, (std::vector<std::pair<int, std::string>>{{10, "0-7"}}));
  EXPECT_EQ(os.affinity[10].str(), "0-7");
  EXPECT_EQ(os.affinity[13].str(), "0-3");
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "member");
  EXPECT_EQ(fake.get("/sys/devices/virtual/workqueue/cpumask"), "ff");
  EXPECT_EQ(fake.get("/sys/fs/cgroup/cgroup.subtree_control"), "-cpuset");
  EXPECT_FALSE(state_exists());
  ASSERT_TRUE(feeder_off(fake.root(), os)); // off again: nothing to do
  EXPECT_EQ(os.calls.size(), 1U);
}

TEST_F(Feeder, InputErrorsTouchNothing) {
  auto s = feeder_on(fake.root(), os, cpus("8"), {}, {"cpuset"});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, Errc::input);
  s = feeder_on(fake.root(), os, cpus("0-7"), {}, {"cpuset"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("no housekeeping CPU"), std::string::npos);
  s = feeder_on(fake.root(), os, cpus("0,4"), {}, {"cpuset"}); // the boot CPU, as boot refuses it
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, Errc::input);
  EXPECT_NE(s.error().message.find("include CPU 0"), std::string::npos) << s.error().message;
  s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"sched_ext"}); // no /sys/kernel/sched_ext here
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, Errc::input);
  EXPECT_TRUE(os.calls.empty());
  EXPECT_FALSE(state_exists());
}

// The partition cannot be written: everything done before is undone.
TEST_F(Feeder, FailingPartitionRollsBack) {
  const auto prs = fake.root().path("/sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition");
  std::filesystem::remove(prs);
  std::filesystem::create_directories(prs);
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("cpuset.cpus.partition"), std::string::npos) << s.error().message;
  EXPECT_EQ(os.calls, (std::vector<std::pair<int, std::string>>{{10, "0-5"}, {10, "0-7"}}));
  EXPECT_EQ(fake.get("/sys/devices/virtual/workqueue/cpumask"), "ff");
  EXPECT_FALSE(state_exists());
}

// 'feeder on' with other CPUs while on: kthreads follow the new CPUs, and
// 'off' still restores the originals.
TEST_F(Feeder, RuntimeCpuChangeFollowsAndOffRestores) {
  ASSERT_TRUE(feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"}));
  auto s = feeder_on(fake.root(), os, cpus("4-7"), {}, {"auto"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->cpus.str(), "4-7");
  EXPECT_EQ(os.affinity[10].str(), "0-3");
  EXPECT_EQ(cgfile("cpuset.cpus"), "4-7");
  EXPECT_EQ(fake.get("/sys/devices/virtual/workqueue/cpumask"), "f");
  auto again = feeder_on(fake.root(), os, cpus("4-7"), {}, {"sched_ext"});
  ASSERT_FALSE(again); // another mechanism while on
  EXPECT_EQ(again.error().kind, Errc::input);
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(os.affinity[10].str(), "0-7");
  EXPECT_EQ(fake.get("/sys/devices/virtual/workqueue/cpumask"), "ff");
}

// A sched_ext state whose scheduler is gone: cpuset fallback with the
// kernel's exit reason, logged once.
TEST_F(Feeder, EjectedSchedulerFallsBackToCpuset) {
  fake.set("/sys/kernel/sched_ext/state", "disabled\n");
  fake.set(k_feeder_state, R"({"active": true, "mechanism": "sched_ext", "cpus": "6-7", "housekeeping": "0-5"})");
  auto r = feeder_check(fake.root(), os);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(*r);
  EXPECT_EQ(os.detaches, 1);
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "root");
  ASSERT_EQ(os.log.size(), 1U);
  EXPECT_NE(os.log[0].find("ejected (runtime error: stall on CPU 6); cpuset partition fallback active on CPUs 6-7"),
            std::string::npos);
  auto st = feeder_status(fake.root());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state.mechanism, "cpuset");
  EXPECT_EQ(st->state.fallback, "runtime error: stall on CPU 6");
  // Already fallen back: nothing more.
  r = feeder_check(fake.root(), os);
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(os.detaches, 1);
}

TEST_F(Feeder, RunningSchedulerIsLeftAlone) {
  fake.set("/sys/kernel/sched_ext/state", "enabled\n");
  fake.set("/sys/kernel/sched_ext/root/ops", "mltune_feeder\n");
  fake.set(k_feeder_state, R"({"active": true, "mechanism": "sched_ext", "cpus": "6-7", "housekeeping": "0-5"})");
  auto r = feeder_check(fake.root(), os);
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(os.detaches, 0);
  EXPECT_TRUE(os.log.empty());
}

// sched_ext schedules only the fair class: real-time threads the guard saw
// on a feeder CPU are moved off, each recorded once and given back by 'feeder
// off' unless their owner changed their affinity meanwhile; a DEADLINE
// thread, whose affinity cannot be narrowed, is reported once; a thread
// confined to one CPU, or gone, is left alone.  Every record is consumed.
TEST_F(Feeder, GuardedRealTimeThreadsMoveOffAndBack) {
  fake.set("/sys/kernel/sched_ext/state", "enabled\n");
  fake.set("/sys/kernel/sched_ext/root/ops", "mltune_feeder\n");
  fake.set(k_feeder_state, R"({"active": true, "mechanism": "sched_ext", "cpus": "6-7", "housekeeping": "0-5"})");
  os.affinity[100] = cpus("0-7");
  os.affinity[101] = cpus("7");
  os.affinity[104] = cpus("4-7");
  os.intruders = {
      {100, 6, 1, "spin"}, {101, 7, 2, "pinned"}, {102, 6, 6, "dl"}, {103, 6, 1, "gone"}, {104, 7, 1, "own"}};
  auto moved = feeder_contain(fake.root(), os);
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_EQ(*moved, 2);
  EXPECT_EQ(os.affinity[100].str(), "0-5");
  EXPECT_EQ(os.affinity[101].str(), "7");
  EXPECT_EQ(os.affinity[104].str(), "4-5");
  EXPECT_EQ(os.forgotten, (std::vector<int>{100, 101, 102, 103, 104}));
  ASSERT_EQ(os.log.size(), 1U);
  EXPECT_NE(os.log[0].find("SCHED_DEADLINE thread 102 (dl)"), std::string::npos) << os.log[0];
  EXPECT_NE(os.log[0].find("--mechanism cpuset"), std::string::npos) << os.log[0];
  auto st = feeder_status(fake.root());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state.threads, (std::vector<FeederThread>{{100, "0-7", "0-5"}, {104, "4-7", "4-5"}}));
  EXPECT_EQ(st->state.dl_reported, (std::vector<int>{102}));
  // Seen again (the guard records every start): no second record or report.
  os.affinity[100] = cpus("0-7");
  os.intruders = {{100, 6, 1, "spin"}, {102, 7, 6, "dl"}};
  ASSERT_TRUE(feeder_contain(fake.root(), os));
  EXPECT_EQ(os.affinity[100].str(), "0-5");
  EXPECT_EQ(os.log.size(), 1U);
  st = feeder_status(fake.root());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state.threads.size(), 2U);
  // The owner of 104 pins it itself; off gives 100 back and leaves 104.
  os.affinity[104] = cpus("2");
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(os.affinity[100].str(), "0-7");
  EXPECT_EQ(os.affinity[104].str(), "2");
}

TEST_F(Feeder, ContainDoesNothingWithoutTheSchedExtMechanism) {
  os.affinity[100] = cpus("0-7");
  os.intruders = {{100, 6, 1, "spin"}};
  auto moved = feeder_contain(fake.root(), os); // feeder off
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, 0);
  fake.set(k_feeder_state, R"({"active": true, "mechanism": "cpuset", "cpus": "6-7", "housekeeping": "0-5"})");
  moved = feeder_contain(fake.root(), os);
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, 0);
  EXPECT_EQ(os.affinity[100].str(), "0-7");
  EXPECT_TRUE(os.forgotten.empty());
}

// cpuset: a partition change resets user affinities on kernels before 6.2.
// Threads their owner narrowed are recorded before the partition, set again
// (off the feeder CPUs) after it, and given back at off; an owner's own
// change meanwhile stays.
TEST_F(Feeder, CpusetKeepsNarrowedUserThreads) {
  os.affinity[200] = cpus("2-7"); // narrowed, on the feeder CPUs
  os.affinity[201] = cpus("0-3"); // narrowed, off them
  os.affinity[202] = cpus("0-7"); // not narrowed
  os.affinity[203] = cpus("5-7");
  os.users = {{200, -1, 1, "rt"}, {201, -1, 0, "a"}, {202, -1, 0, "b"}, {203, -1, 0, "c"}};
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->threads, (std::vector<FeederThread>{{200, "2-7", "2-5"}, {201, "0-3", "0-3"}, {203, "5-7", "5"}}));
  EXPECT_EQ(os.affinity[200].str(), "2-5");
  EXPECT_EQ(os.affinity[202].str(), "0-7");
  // What a 6.1 kernel does when the partition goes: the root's CPUs.
  os.affinity[200] = cpus("0-7");
  os.affinity[201] = cpus("0-7");
  os.affinity[203] = cpus("1"); // its owner's choice
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(os.affinity[200].str(), "2-7");
  EXPECT_EQ(os.affinity[201].str(), "0-3");
  EXPECT_EQ(os.affinity[203].str(), "1");
}

// --partition isolated: made while a loop holds each feeder CPU busy (so no
// idle feeder CPU stays a target of the idle load balancer's kicks), said
// in the state, and undone by off.
TEST_F(Feeder, IsolatedPartitionIsMadeWhileTheFeederCpusAreBusy) {
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset", "isolated"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(os.busy, std::vector<std::string>{"6-7"});
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "isolated");
  EXPECT_EQ(s->partition, "isolated");
  EXPECT_NE(s->partition_note.find("no load balancing"), std::string::npos) << s->partition_note;
  EXPECT_EQ(s->partition_note.find("not every feeder CPU"), std::string::npos) << s->partition_note;
  EXPECT_EQ(os.affinity[10].str(), "0-5") << "kthreads moved as with a root partition";
  auto st = feeder_status(fake.root());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state.partition, "isolated");
  EXPECT_EQ(st->partition, "isolated");
  // Another type while on: off first.
  auto again = feeder_on(fake.root(), os, cpus("4-7"), {}, {"cpuset", "root"});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, Errc::input);
  EXPECT_NE(again.error().message.find("feeder off"), std::string::npos) << again.error().message;
  EXPECT_EQ(cgfile("cpuset.cpus"), "6-7");
  // New CPUs, same type: made again, busy again.
  s = feeder_on(fake.root(), os, cpus("5-7"), {}, {"auto", "isolated"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(os.busy, (std::vector<std::string>{"6-7", "5-7"}));
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "isolated");
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "member");
  EXPECT_EQ(os.affinity[10].str(), "0-7");
  EXPECT_FALSE(state_exists());
}

TEST_F(Feeder, RootPartitionNeedsNoBusyLoops) {
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(os.busy.empty());
  EXPECT_EQ(s->partition, "root");
  EXPECT_NE(s->partition_note.find("--partition isolated"), std::string::npos) << s->partition_note;
}

// A feeder CPU that could not be held busy is named in the state.
TEST_F(Feeder, IsolatedPartitionSaysWhichCpusWereNotBusy) {
  os.busy_note = "CPU 7: this process cannot run there (sched_setaffinity: Invalid argument)";
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"auto", "isolated"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->mechanism, "cpuset");
  EXPECT_NE(s->partition_note.find(
                "not every feeder CPU was held busy while it was made (CPU 7: this process cannot run there"),
            std::string::npos)
      << s->partition_note;
}

// The kernel refuses an isolated partition: a root one instead, and why.
TEST_F(Feeder, RefusedIsolatedPartitionFallsBackToRoot) {
  os.refuse_isolated = true;
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset", "isolated"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "root");
  EXPECT_NE(s->partition_note.find("refused an isolated partition (isolated invalid (Cpu list"), std::string::npos)
      << s->partition_note;
  ASSERT_TRUE(feeder_off(fake.root(), os));
  EXPECT_EQ(cgfile("cpuset.cpus.partition"), "member");
}

TEST_F(Feeder, PartitionRequestErrors) {
  auto s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"cpuset", "shared"});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, Errc::input);
  EXPECT_EQ(s.error().message, "partition must be root or isolated, not 'shared'");
  s = feeder_on(fake.root(), os, cpus("6-7"), {}, {"sched_ext", "isolated"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("belongs to the cpuset mechanism"), std::string::npos) << s.error().message;
  EXPECT_TRUE(os.calls.empty());
  EXPECT_FALSE(state_exists());
}

// 'feeder status' lists the kthreads that stay on the feeder CPUs: per-CPU
// ones and those whose affinity cannot be set; not movable ones, not other
// CPUs' ones, not user tasks.
TEST_F(Feeder, PinnedKthreadsOfTheFeederCpus) {
  const auto task = [&](int pid, const std::string &comm, unsigned flags, const std::string &cpus) {
    const std::string dir = "/proc/" + std::to_string(pid);
    fake.set(dir + "/stat", std::to_string(pid) + " (" + comm + ") S 2 0 0 0 -1 " + std::to_string(flags) + " 0 0\n");
    fake.set(dir + "/status", "Name:\t" + comm + "\nCpus_allowed:\tff\nCpus_allowed_list:\t" + cpus + "\n");
  };
  task(20, "ksoftirqd/6", k_pf_kthread, "6");
  task(21, "kworker/u16:1", k_pf_kthread, "0-7");
  task(22, "irq/30-nvme0q2", k_pf_kthread | k_pf_no_setaffinity, "6-7");
  task(23, "ksoftirqd/3", k_pf_kthread, "3");
  task(24, "python3", 0, "6");
  task(25, "kworker/7:1H", k_pf_kthread, "7");
  const auto got = feeder_pinned_kthreads(fake.root(), cpus("6-7"));
  std::vector<std::string> names;
  names.reserve(got.size());
  for (const auto &k : got) {
    names.push_back(k.comm + "@" + k.cpus.str());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ksoftirqd/6@6", "irq/30-nvme0q2@6-7", "kworker/7:1H@7"}));
}

// /proc/schedstat (version 15, and 17 with domain names): the CPUs listed
// with a domain; a CPU of an isolated partition has none.
TEST(FeederBusy, CpusInDomainsFromSchedstat) {
  const std::string v15 = "version 15\ntimestamp 4295\n"
                          "cpu0 0 0 0 0 0 0 1 2 3\ndomain0 03 1 2 3\ndomain1 0f 1 2\n"
                          "cpu1 0 0 0 0 0 0 1 2 3\ndomain0 03 1 2 3\n"
                          "cpu2 0 0 0 0 0 0 1 2 3\n"
                          "cpu3 0 0 0 0 0 0 1 2 3\n";
  EXPECT_EQ(feeder::cpus_in_domains(v15).str(), "0-1");
  const std::string v17 = "version 17\ntimestamp 1\ncpu12 0 0 0\ndomain0 SMT 00003000 1 2\ncpu13 0 0 0\n";
  EXPECT_EQ(feeder::cpus_in_domains(v17).str(), "12");
  EXPECT_TRUE(feeder::cpus_in_domains("").empty());
  EXPECT_TRUE(feeder::cpus_in_domains("domain0 03 1\n").empty()) << "a domain line before any cpu line";
}

} // namespace
