// The node as one unit (mltune/node.hpp) on a fake node, fake NICs and fake
// threads: a profile switch over knobs, NIC settings and scheduler rules in
// one transaction, check_node over every domain, status, and off returning
// every domain to what was there before.
#include "base/baseline.hpp"
#include "mltune/modules.hpp"
#include "mltune/node.hpp"
#include "node/domains.hpp"

#include "fake_nic.hpp"
#include "fake_sched.hpp"
#include "fake_sysroot.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <sys/utsname.h>

using namespace mltune;
using mltune::test::FakeSched;
using mltune::test::FakeSysroot;

namespace {

// modprobe on a fake kernel: `available` can be loaded, `busy` cannot be
// unloaded.
class FakeModules final : public ModuleLoader {
public:
  std::set<std::string> available{"tcp_bbr"};
  std::set<std::string> in_kernel;
  std::set<std::string> busy;
  [[nodiscard]] bool loaded(const std::string &name) const override { return in_kernel.contains(name); }
  Status load(const std::string &name) override {
    if (!available.contains(name)) {
      return failure("modprobe: FATAL: Module " + name + " not found in directory /lib/modules/6.12", ENOENT);
    }
    in_kernel.insert(name);
    return {};
  }
  Status unload(const std::string &name) override {
    if (busy.contains(name)) {
      return failure("modprobe: FATAL: Module " + name + " is in use.", EBUSY);
    }
    in_kernel.erase(name);
    return {};
  }
};

class Node : public ::testing::Test {
protected:
  void SetUp() override {
    seams.nic = [this] { return std::make_unique<test::SharedBackend>(nic); };
    // Every setting the shipped training profile names, as the guests' NICs
    // report them.
    for (auto *d : {&nic.devs["eth0"], &nic.devs["eth1"]}) {
      for (const char *k : {"features.tx-generic-segmentation", "features.rx-checksum",
                            "features.tx-checksum-ip-generic", "features.tx-tcp-segmentation"}) {
        d->current[k] = "off";
      }
      for (const char *k : {"coalesce.adaptive-rx", "coalesce.adaptive-tx"}) {
        d->current[k] = "on";
      }
      d->current["coalesce.tx-usecs"] = "3";
      d->current["coalesce.rx-frames"] = "4";
    }
    seams.sched = &sched;
    seams.modules = &mods;
    sched.add(100, 101, "NCCL Progress 0");
    sched.add(100, 102, "python3");
    sched.add(100, 103, "NCCL Service 0");
  }

  // Every setting of every domain: knob files, NIC values, thread policies.
  struct Snapshot {
    std::vector<std::pair<std::string, std::string>> files;
    std::map<std::string, NicValues> nics;
    std::map<int, std::string> threads;
    std::set<std::string> modules;
    bool operator==(const Snapshot &) const = default;
  };
  Snapshot snapshot() const {
    Snapshot s{fake.snapshot(), {}, {}, mods.in_kernel};
    for (const auto &[name, d] : nic.devs) {
      s.nics[name] = d.current;
    }
    s.nics["globals"] = nic.globals;
    for (int tid : {101, 102, 103}) {
      s.threads[tid] = sched.attr(tid).describe();
    }
    return s;
  }
  Result<TransactionReport> switch_to(const Profile &p) {
    ProfileSwitch sw(p, root, Backend::direct, seams);
    return sw.run({});
  }

  FakeSysroot fake;
  Sysroot root = fake.root();
  test::FakeBackend nic = test::two_nics();
  FakeModules mods;
  FakeSched sched{root};
  NodeSeams seams;
  Profile training = *ProfileLoader().load("training");
  Profile inference = *ProfileLoader().load("inference");
};

} // namespace

TEST_F(Node, SwitchAppliesEveryDomainAndOffRestoresThem) {
  const Snapshot before = snapshot();
  auto r = switch_to(training);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->applied, (std::vector<std::string>{"modules", "knobs", "nic", "sched", "boot"}));
  EXPECT_TRUE(mods.in_kernel.contains("tcp_bbr"));
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "1");
  EXPECT_EQ(nic.devs["eth0"].current["rings.rx"], "4096");
  EXPECT_NE(sched.attr(101), SchedAttr{}); // DEADLINE, or its fallback where admission refuses
  EXPECT_EQ(sched.attr(102), SchedAttr{});
  auto c = check_node(training, root, seams);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->matches());
  for (const auto &d : c->domains) {
    // training has no [hugepages]
    EXPECT_EQ(d.state, d.domain == "hugepages" ? "not-applicable" : "match") << d.domain << ": " << d.note;
  }
  EXPECT_NE(snapshot(), before);

  auto off = node_off(root, seams);
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_TRUE(off->ok());
  EXPECT_EQ(snapshot(), before);
  EXPECT_FALSE(root.exists(k_baseline_file));
}

// inference then training: nothing of either is left over in any domain.
TEST_F(Node, SwitchingBackAndForthLeavesNoDrift) {
  const Snapshot before = snapshot();
  ASSERT_TRUE(switch_to(inference));
  ASSERT_TRUE(switch_to(training));
  auto c = check_node(training, root, seams);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->matches());
  EXPECT_TRUE(c->differences.empty());
  ASSERT_TRUE(node_off(root, seams));
  EXPECT_EQ(snapshot(), before);
}

// A failure in the last domain rolls back the others: the node is as before
// and the error names the step.
TEST_F(Node, FailureInTheLastStepRollsBackEveryDomain) {
  const Snapshot before = snapshot();
  sched.refuse = {101, 103};
  auto r = switch_to(training);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("sched apply"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("rolled back: nic, knobs, modules"), std::string::npos) << r.error().message;
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Node, FailureInTheNicStepRollsBackTheKnobs) {
  const Snapshot before = snapshot();
  nic.fail_dev = "eth1";
  nic.fail_group = "coalesce";
  auto r = switch_to(training);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nic apply"), std::string::npos) << r.error().message;
  EXPECT_EQ(snapshot(), before);
}

// Drift in each domain is one difference of the same shape.
TEST_F(Node, CheckReportsEveryDomainAlike) {
  ASSERT_TRUE(switch_to(training));
  fake.set("/proc/sys/vm/swappiness", "60");
  nic.devs["eth0"].current["coalesce.rx-usecs"] = "3";
  ASSERT_TRUE(sched.set(101, SchedAttr{}));
  auto c = check_node(training, root, seams);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->matches());
  std::map<std::string, std::string> by_domain;
  for (const auto &d : c->differences) {
    by_domain[d.domain] = d.key + "=" + d.current + " want " + d.expected;
  }
  EXPECT_EQ(by_domain["knobs"], "vm.swappiness=60 want 1");
  EXPECT_EQ(by_domain["nic"], "eth0 coalesce.rx-usecs=3 want 50");
  EXPECT_NE(by_domain["sched"].find("101 \"NCCL Progress 0\"=other"), std::string::npos) << by_domain["sched"];
}

// Without seams on a --sysroot tree, NIC and threads are not touched and the
// check says so instead of calling them a match.
TEST_F(Node, SysrootWithoutSeamsLeavesLiveDomainsUnchecked) {
  auto c = check_node(training, root);
  ASSERT_TRUE(c);
  std::map<std::string, std::string> state;
  for (const auto &d : c->domains) {
    state[d.domain] = d.state;
  }
  EXPECT_EQ(state["nic"], "unchecked");
  EXPECT_EQ(state["sched"], "unchecked");
  const auto off = node_off(root);
  ASSERT_TRUE(off);
  EXPECT_TRUE(off->ok());
}

TEST_F(Node, StatusNamesTheActiveProfileAndEachDomain) {
  auto s = node_status(root, seams);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->profile, "");
  ASSERT_TRUE(switch_to(training));
  s = node_status(root, seams);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->profile, "training");
  std::map<std::string, std::string> state;
  for (const auto &d : s->domains) {
    state[d.domain] = d.state;
  }
  EXPECT_EQ(state["knobs"], "applied");
  EXPECT_EQ(state["nic"], "applied");
  EXPECT_EQ(state["sched"], "applied");
  EXPECT_EQ(state["feeder"], "off");
  EXPECT_EQ(state["boot"], "off");
  fake.set("/proc/sys/vm/swappiness", "60");
  s = node_status(root, seams);
  ASSERT_TRUE(s);
  for (const auto &d : s->domains) {
    state[d.domain] = d.state;
  }
  EXPECT_EQ(state["knobs"], "drifted");
  fake.set("/etc/default/grub.d/mltune.cfg",
           "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT nohz_full=2-3\"\n");
  fake.set("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda quiet\n");
  s = node_status(root, seams);
  ASSERT_TRUE(s);
  for (const auto &d : s->domains) {
    state[d.domain] = d.state;
  }
  EXPECT_EQ(state["boot"], "pending-reboot");
}

// A NIC setting recorded before a reboot-like change (the interface gone)
// is skipped by off and reported, not a failure.
TEST_F(Node, OffSkipsNicsThatAreGone) {
  ASSERT_TRUE(switch_to(training));
  nic.devs.erase("eth1");
  auto off = node_off(root, seams);
  ASSERT_TRUE(off);
  EXPECT_TRUE(off->ok());
  for (const auto &d : off->domains) {
    if (d.domain == "nic") {
      EXPECT_EQ(d.state, "restored");
      EXPECT_NE(d.detail.find("gone since (eth1"), std::string::npos) << d.detail;
    }
  }
  EXPECT_EQ(nic.devs["eth0"].current["rings.rx"], "256");
}

// A module the node cannot load is skipped and reported; a required one
// fails the switch before any knob is written; one in use stays after off.
TEST_F(Node, ModulesSkippedRequiredAndInUse) {
  const Snapshot before = snapshot();
  mods.available.clear();
  ProfileSwitch sw(training, root, Backend::direct, seams);
  ASSERT_TRUE(sw.run({}));
  ASSERT_EQ(sw.modules().skipped().size(), 1U);
  EXPECT_NE(sw.modules().skipped()[0].find("tcp_bbr: modprobe: FATAL"), std::string::npos);
  // Not loaded, so not mltune's to unload: off has no module to report.
  auto skipped_off = node_off(root, seams);
  ASSERT_TRUE(skipped_off);
  EXPECT_EQ(skipped_off->domains.back().domain, "modules");
  EXPECT_EQ(skipped_off->domains.back().state, "off") << skipped_off->domains.back().detail;
  EXPECT_EQ(snapshot(), before);

  Profile req = training;
  req.modules[0].required = true;
  auto r = switch_to(req);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("modules apply: tcp_bbr"), std::string::npos) << r.error().message;
  EXPECT_EQ(snapshot(), before);

  mods.available = {"tcp_bbr"};
  ASSERT_TRUE(switch_to(training));
  mods.busy = {"tcp_bbr"};
  auto off = node_off(root, seams);
  ASSERT_TRUE(off);
  EXPECT_TRUE(off->ok());
  EXPECT_EQ(off->domains.back().domain, "modules");
  EXPECT_EQ(off->domains.back().state, "pending");
  EXPECT_TRUE(mods.in_kernel.contains("tcp_bbr"));
  mods.busy.clear(); // the last user went: the next off unloads it
  off = node_off(root, seams);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->domains.back().state, "restored");
  EXPECT_EQ(off->domains.back().detail, "unloaded tcp_bbr");
  EXPECT_EQ(snapshot(), before);
}

// follow_module(): after a plain write to the module's profile file, the
// user-space domains follow; when they fail the module goes back.
TEST_F(Node, FollowTheModule) {
  fake.add_module();
  const Snapshot before = snapshot();
  fake.set("/sys/kernel/mltune/profile", "training\n");
  fake.set("/sys/kernel/mltune/generation", "5\n");
  auto f = follow_module(root, seams);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->last.result, "ok");
  EXPECT_EQ(f->last.in_line, "training");
  // Each domain of the follow says what it did, in the list's order.
  EXPECT_EQ(f->last.detail.rfind("modules: 1 loaded; knobs: switched to 'training' (kernel backend", 0), 0U)
      << f->last.detail;
  EXPECT_NE(f->last.detail.find("; nic: "), std::string::npos) << f->last.detail;
  EXPECT_NE(f->last.detail.find("; sched: "), std::string::npos) << f->last.detail;
  EXPECT_TRUE(mods.in_kernel.contains("tcp_bbr"));
  EXPECT_EQ(nic.devs["eth0"].current["coalesce.rx-usecs"], "50");
  EXPECT_NE(sched.attr(101), SchedAttr{});
  // The module saw the profile once more, for the knobs of the new module.
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "training");

  // The same generation again: nothing to do.
  const int sets = nic.sets;
  f = follow_module(root, seams);
  ASSERT_TRUE(f);
  EXPECT_EQ(nic.sets, sets);

  // A profile whose NIC settings fail: the module goes back to training.
  fake.set("/etc/mltune/profiles/bad.toml", "include = [\"training\"]\n[nic.\"eth1\"]\ncoalesce = { rx-usecs = 7 }\n");
  nic.fail_dev = "eth1";
  nic.fail_group = "coalesce";
  fake.set("/sys/kernel/mltune/profiles/bad/knobs", "/proc/sys/vm/swappiness 1\n"); // defined in the module
  fake.set("/sys/kernel/mltune/profiles/bad/state", "committed\n");
  fake.set("/sys/kernel/mltune/profile", "bad\n");
  fake.set("/sys/kernel/mltune/generation", "7\n");
  f = follow_module(root, seams);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->last.result, "rolled-back") << f->last.error;
  EXPECT_EQ(f->last.in_line, "training");
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "training");
  ASSERT_TRUE(f->last_failure);
  EXPECT_NE(f->last_failure->error.find("nic apply"), std::string::npos) << f->last_failure->error;
  nic.fail_dev.clear();

  // The rollback's own uevent: training, in line already.
  fake.set("/sys/kernel/mltune/generation", "8\n");
  f = follow_module(root, seams);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->last.result, "ok");
  ASSERT_TRUE(f->last_failure); // still shown
  auto st = node_status(root, seams);
  ASSERT_TRUE(st);
  const auto fl =
      std::find_if(st->domains.begin(), st->domains.end(), [](const DomainState &d) { return d.domain == "follow"; });
  ASSERT_NE(fl, st->domains.end());
  EXPECT_NE(fl->detail.find("last failure at generation 7"), std::string::npos) << fl->detail;

  // The module back on its baseline: so are the user-space domains.
  fake.set("/sys/kernel/mltune/profile", "baseline\n");
  fake.set("/sys/kernel/mltune/generation", "9\n");
  f = follow_module(root, seams);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->last.in_line, "baseline");
  Snapshot now = snapshot();
  now.files = before.files; // the fake module does not write the knobs
  EXPECT_EQ(now, before);
}

// switch baseline: every running domain of the switch back, through either
// backend, the profile forgotten; a domain that fails is reported while the
// others are still restored.
TEST_F(Node, SwitchBaselineRestoresEveryRunningDomain) {
  const Snapshot before = snapshot();
  ASSERT_TRUE(switch_to(training));
  ASSERT_NE(snapshot(), before);
  auto rep = switch_to_baseline(root, Backend::direct, seams);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_TRUE(rep->ok());
  std::map<std::string, std::string> state;
  for (const auto &d : rep->domains) {
    state[d.domain] = d.state;
  }
  EXPECT_EQ(state, (std::map<std::string, std::string>{{"hugepages", "off"},
                                                       {"sched", "restored"},
                                                       {"nic", "restored"},
                                                       {"knobs", "restored"},
                                                       {"modules", "restored"}}));
  EXPECT_EQ(rep->knobs.profile, "baseline");
  EXPECT_FALSE(rep->knobs.written.empty());
  Snapshot now = snapshot();
  now.files = before.files; // the state files under /run/mltune stay (off removes them)
  EXPECT_EQ(now, before);
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "60");
  auto rec = recorded_profile(root);
  ASSERT_TRUE(rec);
  EXPECT_FALSE(*rec);
  auto st = node_status(root, seams);
  ASSERT_TRUE(st);
  for (const auto &d : st->domains) {
    if (d.domain == "nic" || d.domain == "sched") {
      EXPECT_NE(d.state, "applied") << d.domain << ": " << d.detail;
    }
  }
  // Once more: nothing left to do, every domain off.
  rep = switch_to_baseline(root, Backend::direct, seams);
  ASSERT_TRUE(rep);
  for (const auto &d : rep->domains) {
    EXPECT_EQ(d.state, "off") << d.domain << ": " << d.detail;
  }

  // The threads cannot be put back: reported, the rest still restored.
  ASSERT_TRUE(switch_to(training));
  sched.refuse = {101};
  rep = switch_to_baseline(root, Backend::direct, seams);
  ASSERT_TRUE(rep);
  EXPECT_FALSE(rep->ok());
  const auto sched_state =
      std::find_if(rep->domains.begin(), rep->domains.end(), [](const DomainState &d) { return d.domain == "sched"; });
  ASSERT_NE(sched_state, rep->domains.end());
  EXPECT_EQ(sched_state->state, "failed");
  EXPECT_EQ(nic.devs["eth0"].current["rings.rx"], "256");
  EXPECT_EQ(fake.get("/proc/sys/vm/swappiness"), "60");
  EXPECT_FALSE(mods.in_kernel.contains("tcp_bbr"));
}

// Through the module: it goes to its baseline, the user-space domains with
// it, and the follower its uevent wakes has nothing left to do.
TEST_F(Node, SwitchBaselineThroughTheModule) {
  fake.add_module();
  const Snapshot before = snapshot();
  ProfileSwitch sw(training, root, Backend::kernel, seams);
  ASSERT_TRUE(sw.run({}));
  auto rep = switch_to_baseline(root, Backend::kernel, seams);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_TRUE(rep->ok());
  EXPECT_EQ(fake.get("/sys/kernel/mltune/profile"), "baseline");
  Snapshot now = snapshot();
  now.files = before.files; // the fake module does not write the knobs
  EXPECT_EQ(now, before);
  auto f = follow_state(root);
  ASSERT_TRUE(f && *f);
  EXPECT_EQ((*f)->last.in_line, "baseline");
  const int sets = nic.sets;
  auto fl = follow_module(root, seams);
  ASSERT_TRUE(fl) << fl.error().message;
  EXPECT_EQ(nic.sets, sets);
}

// A profile the module has but no file names: active says so, no error.
TEST_F(Node, StatusOfAModuleOnlyProfile) {
  fake.add_module();
  fake.set("/sys/kernel/mltune/profiles/ghost/knobs", "/proc/sys/vm/swappiness 7\n");
  fake.set("/sys/kernel/mltune/profile", "ghost\n");
  auto s = node_status(root, seams);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->profile, "ghost");
  ASSERT_FALSE(s->domains.empty());
  EXPECT_EQ(s->domains[0].state, "unchecked");
  EXPECT_NE(s->domains[0].detail.find("unknown profile 'ghost'"), std::string::npos) << s->domains[0].detail;
}

// The modprobe loader on a node's tree: a module of modules.builtin counts as
// loaded (a built-in module without parameters has no /sys/module entry),
// '-' and '_' alike; without the kernel's modules.dep a load fails at once,
// saying why, without starting modprobe.
TEST(ModuleLoader, BuiltinModulesAndAMissingTree) {
  FakeSysroot fake;
  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  const std::string tree = std::string("/lib/modules/") + u.release;
  fake.set("/proc/1/ns/pid", ""); // a running node's root (container mode)
  fake.set(tree + "/modules.builtin", "kernel/net/ipv4/tcp_bbr.ko\nkernel/drivers/net/dummy-x.ko\n");
  fake.set("/sys/module/nvme/parameters/io_timeout", "30");
  // tcp_cubic_x is no built-in profile's module: this node allows it.
  fake.set("/etc/mltune/mltune.toml", "[modules]\nallow = [\"tcp_bbr\", \"tcp_cubic_x\"]\n");
  const Sysroot root = fake.root();
  auto loader = mltune::make_live_module_loader(root);
  ASSERT_NE(loader, nullptr);
  EXPECT_TRUE(loader->loaded("tcp_bbr"));
  EXPECT_TRUE(loader->loaded("dummy_x"));
  EXPECT_TRUE(loader->loaded("nvme"));
  EXPECT_FALSE(loader->loaded("tcp_cubic_x"));
  auto st = loader->load("tcp_cubic_x");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("no module tree"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("modules.dep"), std::string::npos) << st.error().message;

  // The step knows it at plan time: an optional module is skipped there,
  // and apply records nothing in the baseline; a required one fails the plan.
  Profile p;
  p.modules = {{"tcp_cubic_x", false, "t.toml:1"}, {"tcp_bbr", false, "t.toml:2"}};
  ModuleStep step(p.modules, root, loader.get());
  ASSERT_TRUE(step.plan());
  ASSERT_EQ(step.skipped().size(), 1U);
  EXPECT_NE(step.skipped()[0].find("tcp_cubic_x: this kernel has no module tree"), std::string::npos)
      << step.skipped()[0];
  ASSERT_TRUE(step.apply());
  EXPECT_FALSE(std::filesystem::exists(fake.dir() / "run/mltune/baseline.json"));
  p.modules[0].required = true;
  ModuleStep required(p.modules, root, loader.get());
  auto planned = required.plan();
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message.find("tcp_cubic_x (t.toml:1, required)"), std::string::npos)
      << planned.error().message;
}

// The one ordered domain list (node/domains.cpp): each operation takes its
// domains from it, in its order, and only those with settings here.
TEST(NodeDomains, EveryOperationTakesItsStepsFromTheOneList) {
  FakeSysroot fake;
  const Sysroot root = fake.root();
  auto names = [](const std::vector<Step *> &steps) {
    std::vector<std::string> out;
    out.reserve(steps.size());
    for (const Step *s : steps) {
      out.emplace_back(s->name());
    }
    return out;
  };
  using V = std::vector<std::string>;
  const Profile p;
  NodeConfig cfg;
  cfg.feeder_cpus = "1";
  cfg.pool = {{0, 16}};
  detail::NodeDomains all(root, &p, Backend::direct, {}, &cfg);
  EXPECT_EQ(names(all.steps(detail::NodeOp::profile_switch)), (V{"modules", "knobs", "nic", "sched", "boot"}));
  EXPECT_EQ(names(all.steps(detail::NodeOp::follow)), (V{"modules", "knobs", "nic", "sched"}));
  EXPECT_EQ(names(all.steps(detail::NodeOp::follow_reset)), (V{"sched", "nic", "modules"}));
  EXPECT_EQ(names(all.steps(detail::NodeOp::config)), (V{"modules", "knobs", "feeder", "nic", "pool"}));
  ASSERT_NE(all.feeder(), nullptr);
  ASSERT_NE(all.pool(), nullptr);

  // No profile: none of its domains; no feeder or pool setting: neither.
  NodeConfig only_pool;
  only_pool.user_quota = 0;
  detail::NodeDomains pool_only(root, nullptr, Backend::direct, {}, &only_pool);
  EXPECT_EQ(names(pool_only.steps(detail::NodeOp::config)), V{"pool"});
  EXPECT_EQ(pool_only.feeder(), nullptr);
  detail::NodeDomains bare(root, nullptr, Backend::direct, {});
  EXPECT_TRUE(bare.steps(detail::NodeOp::config).empty());
  EXPECT_EQ(bare.pool(), nullptr);

  // What reads or restores the node takes its domains whatever is set:
  // verify, active (with the domains that have a state of their own),
  // off and switch baseline, the last two newest first.
  EXPECT_EQ(names(bare.steps(detail::NodeOp::check)), (V{"modules", "knobs", "nic", "sched", "hugepages"}));
  EXPECT_EQ(names(bare.steps(detail::NodeOp::status)), (V{"feeder", "pool", "boot"}));
  EXPECT_EQ(names(bare.steps(detail::NodeOp::off)),
            (V{"boot", "pool", "hugepages", "sched", "nic", "feeder", "knobs", "modules"}));
  EXPECT_EQ(names(bare.steps(detail::NodeOp::to_baseline)), (V{"hugepages", "sched", "nic", "knobs", "modules"}));

  // A profile with [hugepages]: its step takes part where the profile's
  // domains do, after the threads and before the pool.
  Profile hp;
  hp.hugepages.push_back({2048, 0, 16, "t.toml:1"});
  detail::NodeDomains with_hp(root, &hp, Backend::direct, {}, &cfg);
  EXPECT_EQ(names(with_hp.steps(detail::NodeOp::profile_switch)),
            (V{"modules", "knobs", "nic", "sched", "hugepages", "boot"}));
  EXPECT_EQ(names(with_hp.steps(detail::NodeOp::config)),
            (V{"modules", "knobs", "feeder", "nic", "hugepages", "pool"}));
  EXPECT_EQ(names(with_hp.steps(detail::NodeOp::follow_reset)), (V{"hugepages", "sched", "nic", "modules"}));
  EXPECT_TRUE(detail::NodeDomains::takes("pool", detail::NodeOp::config));
  EXPECT_FALSE(detail::NodeDomains::takes("sched", detail::NodeOp::config));
}
