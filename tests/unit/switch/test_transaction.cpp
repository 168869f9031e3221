// The switch transaction: run_transaction over scripted steps, and the knob
// and NIC steps together on a fake node and a fake NIC backend.
#include "mltune/step.hpp"

#include "base/baseline.hpp"
#include "mltune/compare.hpp"
#include "mltune/nic.hpp"
#include "mltune/switch.hpp"

#include "fake_nic.hpp"
#include "fake_sysroot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>
#include <vector>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

// A step that logs its phases into a shared journal and fails where told.
class Scripted final : public Step {
public:
  Scripted(std::string name, std::vector<std::string> &journal) : name_(std::move(name)), journal_(journal) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  Status plan() override { return run("plan"); }
  Status apply() override { return run("apply"); }
  Status verify() override { return run("verify"); }
  Status rollback() override { return run("rollback"); }
  Status baseline() override { return run("baseline"); }
  [[nodiscard]] std::string summary() const override { return name_ + ": done"; }
  DomainState off(bool /*dry_run*/) override {
    const bool ok = static_cast<bool>(run("off"));
    return {name_, ok ? "restored" : "failed", {}};
  }

  std::string fail_at;
  Error error = failure("boom", EIO);

private:
  Status run(const std::string &phase) {
    journal_.push_back(name_ + "." + phase);
    if (phase == fail_at) {
      return error;
    }
    return {};
  }
  std::string name_;
  std::vector<std::string> &journal_;
};

struct Three {
  std::vector<std::string> journal;
  Scripted a{"a", journal}, b{"b", journal}, c{"c", journal};
  std::array<Step *, 3> steps{&a, &b, &c};
};

using Journal = std::vector<std::string>;

} // namespace

TEST(Transaction, PlansEveryStepBeforeApplyingAny) {
  Three t;
  auto r = run_transaction(t.steps, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(t.journal, (Journal{"a.plan", "b.plan", "c.plan", "a.apply", "b.apply", "c.apply"}));
  EXPECT_EQ(r->applied, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Transaction, PlanFailureChangesNothing) {
  Three t;
  t.c.fail_at = "plan";
  t.c.error = input_error("c.toml:3: bad value");
  auto r = run_transaction(t.steps, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  EXPECT_EQ(r.error().message, "c plan: c.toml:3: bad value");
  EXPECT_EQ(t.journal, (Journal{"a.plan", "b.plan", "c.plan"}));
}

TEST(Transaction, DryRunPlansOnly) {
  Three t;
  TransactionOptions opt;
  opt.dry_run = true;
  ASSERT_TRUE(run_transaction(t.steps, opt));
  EXPECT_EQ(t.journal, (Journal{"a.plan", "b.plan", "c.plan"}));
}

TEST(Transaction, ApplyFailureRollsBackTheStepsBeforeNewestFirst) {
  Three t;
  t.c.fail_at = "apply";
  auto r = run_transaction(t.steps, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::failed);
  EXPECT_EQ(r.error().sys_errno, EIO);
  EXPECT_EQ(r.error().message, "c apply: boom; rolled back: b, a");
  EXPECT_EQ(t.journal,
            (Journal{"a.plan", "b.plan", "c.plan", "a.apply", "b.apply", "c.apply", "b.rollback", "a.rollback"}));
}

TEST(Transaction, FirstStepFailureSaysNothingChanged) {
  Three t;
  t.a.fail_at = "apply";
  auto r = run_transaction(t.steps, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "a apply: boom; nothing was changed");
}

TEST(Transaction, FailedRollbackIsReported) {
  Three t;
  t.c.fail_at = "apply";
  t.a.fail_at = "rollback";
  t.a.error = failure("/proc/sys/vm/swappiness: write: Permission denied", EACCES);
  auto r = run_transaction(t.steps, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EIO) << "the errno of the failure, not of the rollback";
  EXPECT_EQ(r.error().message,
            "c apply: boom; rollback of a failed: /proc/sys/vm/swappiness: write: Permission denied");
}

TEST(Transaction, VerifyFailureRollsBackEveryStep) {
  Three t;
  t.b.fail_at = "verify";
  TransactionOptions opt;
  opt.verify = true;
  std::vector<std::string> progress;
  opt.progress = [&](std::string_view s, std::string_view p) {
    progress.push_back(std::string(s) + ":" + std::string(p));
  };
  auto r = run_transaction(t.steps, opt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "b verify: boom; rolled back: c, b, a");
  EXPECT_EQ(t.journal, (Journal{"a.plan", "b.plan", "c.plan", "a.apply", "b.apply", "c.apply", "a.verify", "b.verify",
                                "c.rollback", "b.rollback", "a.rollback"}));
  EXPECT_EQ(progress.size(), t.journal.size()) << "one progress call per phase of each step";
}

namespace {

class SwitchTransaction : public ::testing::Test {
protected:
  FakeSysroot fake;
  Sysroot root = fake.root();
  Profile training = *ProfileLoader().load("training");
  Profile inference = *ProfileLoader().load("inference");
  // Knobs and NIC tables the fake NICs (fake_nic.hpp) all support.
  Profile nic_profile = *ProfileLoader().load_text("[sysctl]\n\"vm.swappiness\" = { value = 1 }\n"
                                                   "\"kernel.numa_balancing\" = { value = 0 }\n"
                                                   "[nic.\"*\"]\nrings = { rx = \"max\", tx = \"max\" }\n"
                                                   "[nic.\"e1000e\"]\ncoalesce = { rx-usecs = 50 }\n",
                                                   "nictest.toml");

  bool matches(const Profile &p) const {
    const auto st = compare(p, root);
    return std::ranges::none_of(st, [](const KnobStatus &s) { return s.counts(); });
  }
};

} // namespace

TEST_F(SwitchTransaction, NicFailureRollsBackTheKnobs) {
  ASSERT_FALSE(nic_profile.nic.empty());
  auto be = std::make_unique<test::FakeBackend>(test::two_nics());
  be->fail_dev = "eth0";
  be->fail_group = "coalesce";
  const test::FakeBackend &nics = *be;
  const auto nic_before = nics.devs;
  const auto node_before = fake.snapshot();

  KnobStep knobs(nic_profile, root, Backend::direct);
  NicStep nic(nic_profile.nic, root, std::move(be));
  const std::array<Step *, 2> steps{&knobs, &nic};
  auto r = run_transaction(steps, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nic apply: eth0: coalesce:"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("rolled back: knobs"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().sys_errno, EINVAL);
  EXPECT_FALSE(matches(nic_profile));
  // Every knob has its value back; baseline.json keeps the captured values
  // and names no profile active.
  auto without_state = [](auto snap) {
    std::erase_if(snap, [](const auto &kv) { return kv.first.ends_with(k_baseline_file); });
    return snap;
  };
  EXPECT_EQ(without_state(fake.snapshot()), without_state(node_before));
  auto active = active_profile(root, Backend::direct);
  ASSERT_TRUE(active);
  EXPECT_EQ(active->name, "");
  for (const auto &[name, dev] : nic_before) {
    EXPECT_EQ(nics.devs.at(name).current, dev.current) << name;
  }
}

TEST_F(SwitchTransaction, SecondSwitchRollsBackToTheFirst) {
  KnobStep first(training, root, Backend::direct);
  std::array<Step *, 1> one{&first};
  ASSERT_TRUE(run_transaction(one, {}));
  const auto after_training = fake.snapshot();

  std::vector<std::string> journal;
  Scripted failing("later", journal);
  failing.fail_at = "apply";
  KnobStep second(inference, root, Backend::direct);
  const std::array<Step *, 2> steps{&second, &failing};
  ASSERT_FALSE(run_transaction(steps, {}));
  EXPECT_TRUE(matches(training));
  EXPECT_EQ(fake.snapshot(), after_training);
  EXPECT_EQ(active_profile(root, Backend::direct)->name, "training");
}

TEST_F(SwitchTransaction, VerifyReadsTheKnobsBack) {
  KnobStep knobs(training, root, Backend::direct);
  std::array<Step *, 1> one{&knobs};
  TransactionOptions opt;
  opt.verify = true;
  ASSERT_TRUE(run_transaction(one, opt));
  EXPECT_FALSE(knobs.report().written.empty());
  // Something else writes a knob behind mltune's back.
  fake.set("/proc/sys/vm/swappiness", "60\n");
  auto v = knobs.verify();
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("vm.swappiness reads '60', wanted '1'"), std::string::npos) << v.error().message;
}

TEST_F(SwitchTransaction, KernelBackendRollbackSwitchesTheModuleBack) {
  fake.add_module();
  KnobStep knobs(training, root, Backend::kernel);
  std::vector<std::string> journal;
  Scripted failing("later", journal);
  failing.fail_at = "apply";
  const std::array<Step *, 2> steps{&knobs, &failing};
  ASSERT_FALSE(run_transaction(steps, {}));
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "baseline") << "nothing was active: back to the baseline";

  // From an active profile whose knob list the switch replaced: the old
  // list is loaded again and the profile re-activated.
  fake.set("/sys/kernel/mltune/profile", "training\n");
  const std::string old_list = fake.get("/sys/kernel/mltune/profiles/training/knobs");
  Profile changed = training;
  changed.knobs.pop_back();
  KnobStep again(changed, root, Backend::kernel);
  const std::array<Step *, 2> steps2{&again, &failing};
  ASSERT_FALSE(run_transaction(steps2, {}));
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profiles/training/knobs"), old_list);
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "training");
}

TEST_F(SwitchTransaction, NicStepWithoutTablesOrOffTheLiveNodeDoesNothing) {
  NicStep nic(training.nic, root); // a fake sysroot is not the live node
  std::array<Step *, 1> one{&nic};
  ASSERT_TRUE(run_transaction(one, {}));
  EXPECT_FALSE(nic.planned());
  EXPECT_FALSE(nic.applied());
}

TEST_F(SwitchTransaction, NicRollbackAppliesTheInverse) {
  auto be = std::make_unique<test::FakeBackend>(test::two_nics());
  const test::FakeBackend &nics = *be;
  const auto before = nics.devs;
  NicStep nic(nic_profile.nic, root, std::move(be));
  std::array<Step *, 1> one{&nic};
  TransactionOptions opt;
  opt.verify = true;
  auto r = run_transaction(one, opt);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(nic.applied());
  EXPECT_FALSE(nic.applied()->applied.empty());
  EXPECT_NE(nics.devs.at("eth0").current, before.at("eth0").current);
  ASSERT_TRUE(nic.rollback());
  for (const auto &[name, dev] : before) {
    EXPECT_EQ(nics.devs.at(name).current, dev.current) << name;
  }
}
