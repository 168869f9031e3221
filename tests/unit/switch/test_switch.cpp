#include "fake_sysroot.hpp"

#include "base/baseline.hpp"
#include "mltune/compare.hpp"
#include "mltune/switch.hpp"

#include <algorithm>
#include <cerrno>
#include <gtest/gtest.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

bool matches(const Profile &p, const Sysroot &root) {
  const auto st = compare(p, root);
  return std::ranges::none_of(st, [](const KnobStatus &s) { return s.counts(); });
}

class Switch : public ::testing::Test {
protected:
  FakeSysroot fake;
  Sysroot root = fake.root();
  Profile training = *ProfileLoader().load("training");
  Profile inference = *ProfileLoader().load("inference");
};

} // namespace

TEST_F(Switch, PlanShowsWritesAndUnchanged) {
  auto plan = plan_switch(training, root);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->steps.size(), training.knobs.size());
  const auto &sw =
      *std::find_if(plan->steps.begin(), plan->steps.end(), [](auto &s) { return s.key == "vm.swappiness"; });
  EXPECT_EQ(sw.action, PlanStep::Action::write);
  EXPECT_EQ(sw.current, "60");
  const auto &khp = *std::find_if(plan->steps.begin(), plan->steps.end(),
                                  [](auto &s) { return s.key.ends_with("scan_sleep_millisecs"); });
  EXPECT_EQ(khp.action, PlanStep::Action::unchanged);
}

TEST_F(Switch, DirectSwitchThenVerify) {
  EXPECT_FALSE(matches(training, root));
  auto rep = switch_direct(training, root);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_TRUE(matches(training, root));
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "1");
  EXPECT_EQ(fake.get("/sys/kernel/mm/transparent_hugepage/enabled"), "madvise");
  EXPECT_TRUE(root.exists(k_baseline_file));
}

// Limits are bounds (at_least): a switch never lowers a larger value and
// verify accepts it; a value below the bound is raised to it.
TEST_F(Switch, BoundsKeepLargerLimits) {
  fake.set("/proc/sys/fs/file-max", "9999999");
  auto plan = plan_switch(training, root);
  ASSERT_TRUE(plan) << plan.error().message;
  const auto step = [&](std::string_view key) {
    return std::find_if(plan->steps.begin(), plan->steps.end(), [&](auto &s) { return s.key == key; })->action;
  };
  EXPECT_EQ(step("fs.file-max"), PlanStep::Action::unchanged);
  EXPECT_EQ(step("vm.max_map_count"), PlanStep::Action::write);
  auto rep = switch_direct(training, root, *plan);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(fake.get("/proc/sys/fs/file-max"), "9999999");
  EXPECT_EQ(fake.get("/proc/sys/vm/max_map_count"), "1048576");
  EXPECT_TRUE(matches(training, root));
  fake.set("/proc/sys/vm/max_map_count", "2000000");
  EXPECT_TRUE(matches(training, root));
  fake.set("/proc/sys/fs/file-max", "2097151");
  EXPECT_FALSE(matches(training, root));
}

TEST_F(Switch, KernelListMarksBounds) {
  const std::string list = kernel_knob_list(training, root);
  EXPECT_NE(list.find("\n>/proc/sys/fs/file-max 2097152\n"), std::string::npos) << list;
  EXPECT_NE(list.find("\n/proc/sys/vm/swappiness 1\n"), std::string::npos) << list;
}

TEST_F(Switch, RequiredKnobMissingFailsBeforeAnyWrite) {
  std::filesystem::remove(root.path("/proc/sys/vm/overcommit_memory"));
  const auto before = fake.snapshot();
  auto rep = switch_direct(training, root);
  ASSERT_FALSE(rep);
  EXPECT_NE(rep.error().message.find("vm.overcommit_memory"), std::string::npos);
  EXPECT_EQ(fake.snapshot(), before);
}

// optional = "missing" (NUMA balancing, autogroup, THP): a kernel built
// without the feature (PREEMPT_RT) lacks the files; the switch skips them.
TEST_F(Switch, MissingOkKnobsAbsentAreSkipped) {
  for (const char *p : {"/proc/sys/kernel/numa_balancing", "/proc/sys/kernel/sched_autogroup_enabled"}) {
    std::filesystem::remove(root.path(p));
  }
  std::filesystem::remove_all(root.path("/sys/kernel/mm/transparent_hugepage"));
  auto rep = switch_direct(training, root);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(rep->skipped.size(), 5U);
  EXPECT_TRUE(matches(training, root));
  const auto st = compare(training, root);
  const auto numa =
      std::ranges::find_if(st, [](const KnobStatus &s) { return s.knob->key == "kernel.numa_balancing"; });
  ASSERT_NE(numa, st.end());
  EXPECT_EQ(numa->state, KnobState::missing);
  EXPECT_FALSE(numa->counts());
}

// Where the file exists such a knob is required: a refused value fails the
// switch (rolled back) and a drifted value is a difference.
TEST_F(Switch, MissingOkKnobsPresentAreRequired) {
  const auto before = fake.snapshot();
  root.inject_write_failure("/proc/sys/kernel/numa_balancing", EINVAL);
  auto rep = switch_direct(training, root);
  ASSERT_FALSE(rep);
  EXPECT_NE(rep.error().message.find("kernel.numa_balancing"), std::string::npos);
  EXPECT_EQ(fake.snapshot(), before);

  const Sysroot healthy = fake.root(); // no injected failure
  ASSERT_TRUE(switch_direct(training, healthy));
  EXPECT_TRUE(matches(training, healthy));
  fake.set("/proc/sys/kernel/numa_balancing", "1");
  EXPECT_FALSE(matches(training, healthy));
}

TEST_F(Switch, KernelListMarksMissingOkKnobsOnlyWhereAbsent) {
  EXPECT_NE(kernel_knob_list(training, root).find("\n/proc/sys/kernel/numa_balancing 0\n"), std::string::npos);
  std::filesystem::remove(root.path("/proc/sys/kernel/numa_balancing"));
  EXPECT_NE(kernel_knob_list(training, root).find("\n?/proc/sys/kernel/numa_balancing 0\n"), std::string::npos);
}

TEST_F(Switch, OptionalKnobMissingIsSkipped) {
  std::filesystem::remove(root.path("/proc/sys/net/ipv4/tcp_congestion_control"));
  auto rep = switch_direct(training, root);
  ASSERT_TRUE(rep) << rep.error().message;
  ASSERT_EQ(rep->skipped.size(), 1U);
  EXPECT_TRUE(rep->skipped[0].starts_with("net.ipv4.tcp_congestion_control"));
  EXPECT_TRUE(matches(training, root));
}

TEST_F(Switch, OptionalKnobWriteFailureIsSkipped) {
  root.inject_write_failure("/proc/sys/net/ipv4/tcp_congestion_control", ENOENT);
  auto rep = switch_direct(training, root);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(fake.get("/proc/sys/net/ipv4/tcp_congestion_control"), "cubic");
  EXPECT_TRUE(matches(training, root));
}

TEST_F(Switch, DirectRollbackOnInjectedFailure) {
  const auto before = fake.snapshot();
  // A knob in the middle of the profile refuses the write.
  root.inject_write_failure("/proc/sys/net/core/somaxconn", EINVAL);
  auto rep = switch_direct(training, root);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.error().kind, Errc::failed);
  EXPECT_EQ(rep.error().sys_errno, EINVAL);
  EXPECT_NE(rep.error().message.find("net.core.somaxconn"), std::string::npos) << rep.error().message;
  EXPECT_NE(rep.error().message.find("Invalid argument"), std::string::npos);
  EXPECT_NE(rep.error().message.find("rolled back"), std::string::npos);
  EXPECT_EQ(fake.snapshot(), before);
}

TEST_F(Switch, UnreadableKnobFailsBeforeAnyWrite) {
  // No hook: a directory where a knob file should be cannot be captured.
  const auto before = fake.snapshot();
  const auto p = root.path("/sys/kernel/mm/transparent_hugepage/defrag");
  std::filesystem::remove(p);
  std::filesystem::create_directory(p);
  auto rep = switch_direct(training, root);
  ASSERT_FALSE(rep);
  EXPECT_NE(rep.error().message.find("transparent_hugepage/defrag"), std::string::npos);
  std::filesystem::remove(p);
  fake.set("/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never");
  EXPECT_EQ(fake.snapshot(), before);
}

TEST_F(Switch, BaselineRestoresValuesFromBeforeFirstSwitch) {
  const auto before = fake.snapshot();
  ASSERT_TRUE(switch_direct(training, root));
  ASSERT_TRUE(switch_direct(inference, root));
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "0");
  EXPECT_EQ(fake.get("/proc/sys/net/core/busy_poll"), "50");
  auto base = direct_baseline(root);
  ASSERT_TRUE(base);
  EXPECT_EQ(base->front(), (std::pair<std::string, std::string>{"/proc/sys/vm/overcommit_memory", "0"}));
  auto rep = restore_baseline_direct(root);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(fake.snapshot(), before);
  EXPECT_FALSE(root.exists(k_baseline_file));
  // Restoring again is a no-op.
  EXPECT_TRUE(restore_baseline_direct(root));
}

TEST_F(Switch, KernelBackendUsesLoadedBuiltin) {
  fake.add_module();
  EXPECT_TRUE(kernel_backend_present(root));
  EXPECT_EQ(choose_backend(root, Backend::automatic), Backend::kernel);
  auto rep = switch_kernel(training, root);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(rep->backend, Backend::kernel);
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "training");
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profiles/control"), ""); // nothing reloaded
  ASSERT_TRUE(restore_baseline_kernel(root));
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "baseline");
}

TEST_F(Switch, KernelBackendLoadsChangedProfile) {
  fake.add_module();
  fake.set("/sys/kernel/mltune/profiles/custom/knobs", "/proc/sys/vm/swappiness 5\n");
  fake.set("/sys/kernel/mltune/profiles/custom/state", "committed\n");
  Profile custom = training;
  custom.name = "custom";
  ASSERT_TRUE(switch_kernel(custom, root));
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profiles/control"), ""); // updated in place
  const std::string list = fake.get("/sys/kernel/mltune/profiles/custom/knobs");
  EXPECT_NE(list.find("/proc/sys/vm/swappiness 1\n"), std::string::npos);
  EXPECT_NE(list.find("?/proc/sys/net/ipv4/tcp_congestion_control bbr\n"), std::string::npos);
  EXPECT_NE(list.find("/sys/kernel/mm/transparent_hugepage/enabled madvise\n"), std::string::npos);
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profiles/custom/state"), "commit");
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "custom");
}

TEST_F(Switch, KernelBackendCreatesNewProfile) {
  fake.add_module();
  root.inject_write_failure("/sys/kernel/mltune/profiles/fresh/knobs", ENOENT); // fake module makes no dir
  Profile fresh = training;
  fresh.name = "fresh";
  auto rep = switch_kernel(fresh, root);
  ASSERT_FALSE(rep);
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profiles/control"), "-fresh"); // created, then cleaned up
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "none\n");
}

TEST_F(Switch, KernelBackendReportsSwitchFailure) {
  fake.add_module();
  fake.set("/sys/kernel/mltune/last_switch", "training rolled back: -22 /proc/sys/vm/swappiness\n");
  root.inject_write_failure("/sys/kernel/mltune/profile", EINVAL);
  auto rep = switch_kernel(training, root);
  ASSERT_FALSE(rep);
  EXPECT_EQ(rep.error().sys_errno, EINVAL);
  EXPECT_NE(rep.error().message.find("rolled back: -22 /proc/sys/vm/swappiness"), std::string::npos);
}
