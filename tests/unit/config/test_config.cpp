// The node configuration: parsing (file:line errors), writing, and applying
// it as one transaction on a fake node with the module -- the state file
// for revert, rollback of every step when the last one fails, baseline or
// previous state after a failure.
#include "fake_sysroot.hpp"

#include "mltune/config.hpp"
#include "mltune/feeder.hpp"
#include "mltune/node.hpp"

#include <filesystem>
#include <gtest/gtest.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

constexpr std::string_view k_hp = "/sys/kernel/mltune/hugepool";

Result<NodeConfig> parse(std::string_view text) {
  return parse_config(text, "mltune.toml");
}

std::string error_of(std::string_view text) {
  auto c = parse(text);
  EXPECT_FALSE(c) << text;
  if (c) {
    return "";
  }
  EXPECT_EQ(c.error().kind, Errc::input) << text;
  return c.error().message;
}

} // namespace

TEST(Config, ParsesEverySetting) {
  auto c = parse("profile = \"training\"\nwatcher = true\n[pool]\nreserve = { 1 = \"1G\", 0 = 256 }\n"
                 "user_quota = \"64M\"\n[feeder]\ncpus = \"2-3,6-7\"\nmechanism = \"cpuset\"\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->profile, "training");
  EXPECT_TRUE(c->watcher);
  EXPECT_EQ(c->pool, (std::vector<std::pair<int, std::uint64_t>>{{0, 256}, {1, 512}})) << "sorted by node";
  EXPECT_EQ(c->user_quota, 32U);
  EXPECT_EQ(c->feeder_cpus, "2-3,6-7");
  EXPECT_EQ(c->feeder_mechanism, "cpuset");
  EXPECT_FALSE(c->empty());
}

TEST(Config, EverythingIsOptional) {
  auto c = parse("# nothing managed\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->empty());
  EXPECT_FALSE(c->profile);
  EXPECT_FALSE(c->feeder_cpus);
  c = parse("[feeder]\ncpus = \"\"\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->feeder_cpus, "") << "managed: off";
}

TEST(Config, ErrorsNameFileAndLine) {
  EXPECT_EQ(
      error_of("profile = \"training\"\nprofiel = \"x\"\n"),
      "mltune.toml:2: unknown key 'profiel' (expected profile, watcher, [pool], [feeder], [hugepages], [modules])");
  EXPECT_EQ(error_of("profile = \"\"\n").substr(0, 16), "mltune.toml:1: p");
  EXPECT_NE(error_of("watcher = \"yes\"\n").find("mltune.toml:1: watcher must be true or false"), std::string::npos);
  EXPECT_NE(error_of("\n[pool]\nreserve = { 0 = \"3M\" }\n").find("mltune.toml:3: pool.reserve.0: bad pool size '3M'"),
            std::string::npos);
  EXPECT_NE(error_of("[pool]\nreserve = { x = 1 }\n").find("mltune.toml:2: pool.reserve: 'x' is not a NUMA node"),
            std::string::npos);
  EXPECT_NE(error_of("[pool]\nreserve = { 0 = -1 }\n").find("cannot be negative"), std::string::npos);
  EXPECT_NE(error_of("[pool]\nquota = 1\n").find("mltune.toml:2: unknown key 'pool.quota'"), std::string::npos);
  EXPECT_NE(error_of("[feeder]\ncpus = \"3-1\"\n").find("mltune.toml:2:"), std::string::npos);
  EXPECT_NE(error_of("[feeder]\ncpus = \"feeder:x\"\n").find("expected feeder:GPU_INDEX"), std::string::npos);
  EXPECT_NE(error_of("[feeder]\nmechanism = \"magic\"\n").find("mltune.toml:2: feeder.mechanism"), std::string::npos);
  EXPECT_NE(error_of("[feeder]\npartition = \"shared\"\n")
                .find(R"(mltune.toml:2: feeder.partition must be "root" or "isolated")"),
            std::string::npos);
  EXPECT_NE(error_of("pool = 1\n").find("[pool] must be a table"), std::string::npos);
  EXPECT_NE(error_of("[modules]\nallow = \"tcp_bbr\"\n").find("mltune.toml:2: modules.allow must be a list"),
            std::string::npos);
  EXPECT_NE(error_of("[modules]\nallow = [\"tcp_bbr\", \"a/b\"]\n").find("'a/b' is not a module name"),
            std::string::npos);
  EXPECT_NE(error_of("[modules]\nallow = [3]\n").find("is not a module name"), std::string::npos);
  EXPECT_NE(error_of("[modules]\ndeny = []\n").find("mltune.toml:2: unknown key 'modules.deny' (expected allow)"),
            std::string::npos);
  // The profile loader's input checks: TOML syntax and hostile text.
  EXPECT_NE(error_of("profile = \n").find("mltune.toml:1:"), std::string::npos);
  EXPECT_NE(error_of("profile = \"tr\xc3\xa4ining\"\n").find("non-ASCII"), std::string::npos);
}

// [modules] allow: the kernel modules profiles may load (ModuleAllowlist);
// absent, the default applies; [] allows none.
TEST(Config, ModuleAllowlist) {
  auto c = parse("[modules]\nallow = [\"tcp_bbr\", \"nvidia-peermem\", \"tcp_bbr\"]\n");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c->module_allow);
  EXPECT_EQ(*c->module_allow, (std::vector<std::string>{"tcp_bbr", "nvidia-peermem"})) << "each name once";
  EXPECT_EQ(c->module_allow_origin, "mltune.toml:2");
  c = parse("[modules]\nallow = []\n");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->module_allow);
  EXPECT_TRUE(c->module_allow->empty());
  c = parse("profile = \"training\"\n");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->module_allow);
}

TEST(Config, RenderParsesBackToTheSame) {
  NodeConfig c;
  c.profile = "inference";
  c.pool = {{0, 16}, {3, 1}};
  c.user_quota = 0;
  c.feeder_cpus = "";
  c.feeder_mechanism = "cpuset";
  c.feeder_partition = "isolated";
  const std::string text = render_config(c);
  EXPECT_TRUE(text.starts_with(k_config_marker));
  auto back = parse(text);
  ASSERT_TRUE(back) << back.error().message << "\n" << text;
  EXPECT_EQ(back->profile, c.profile);
  EXPECT_EQ(back->pool, c.pool);
  EXPECT_EQ(back->user_quota, c.user_quota);
  EXPECT_EQ(back->feeder_cpus, c.feeder_cpus);
  EXPECT_EQ(back->feeder_mechanism, c.feeder_mechanism);
  EXPECT_EQ(back->feeder_partition, c.feeder_partition);
  EXPECT_FALSE(back->watcher);
  EXPECT_FALSE(back->module_allow);
  // persist keeps an allowlist it found.
  c.module_allow = std::vector<std::string>{"tcp_bbr", "nvidia_peermem"};
  back = parse(render_config(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->module_allow, c.module_allow);
  c.module_allow = std::vector<std::string>{};
  back = parse(render_config(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->module_allow, c.module_allow);
}

TEST(Config, LoadSaysWhenTheFileIsMissing) {
  FakeSysroot fake;
  auto c = load_config(fake.root());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, Errc::input);
  EXPECT_NE(c.error().message.find("/etc/mltune/mltune.toml: no such file"), std::string::npos);
}

namespace {

// A fake node with the module, a pool on two nodes and the cgroup files the
// feeder writes.
class ConfigApply : public ::testing::Test {
protected:
  void SetUp() override {
    fake.add_module();
    for (int n = 0; n < 2; ++n) {
      const std::string d = std::string(k_hp) + "/node" + std::to_string(n);
      fake.set(d + "/reserved", "0\n");
      fake.set(d + "/free", "0\n");
      fake.set(d + "/mapped", "0\n");
    }
    for (const char *f : {"pmd_mappings", "pte_mappings", "orphaned", "pmd_capable"}) {
      fake.set(std::string(k_hp) + "/" + f, "0\n");
    }
    // The module's default quota (half the reserved pages, at least one).
    fake.set(std::string(k_hp) + "/user_quota", "1\n");
    fake.set(std::string(k_hp) + "/user_quota_auto", "1\n");
    fake.set(std::string(k_hp) + "/users", "");
    fake.set("/sys/devices/system/cpu/online", "0-7\n");
    fake.set("/sys/fs/cgroup/cgroup.subtree_control", "memory pids\n");
    fake.set("/sys/devices/virtual/workqueue/cpumask", "ff\n");
    fake.set("/sys/fs/cgroup/mltune-feeder/cpuset.cpus", "\n");
    fake.set("/sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition", "member\n");
    cfg.profile = "training";
    cfg.pool = {{0, 32}, {1, 16}};
    cfg.user_quota = 4;
    cfg.feeder_cpus = "6-7";
    cfg.feeder_mechanism = "cpuset";
    cfg.source = "mltune.toml";
  }
  [[nodiscard]] std::string get(std::string_view f) const { return normalize_value(fake.get(f)); }
  [[nodiscard]] bool state_exists() const { return std::filesystem::exists(fake.root().path(k_config_state)); }
  [[nodiscard]] bool feeder_active() const {
    auto st = feeder_status(fake.root());
    return st && st->state.active;
  }

  FakeSysroot fake;
  NodeConfig cfg;
};

} // namespace

TEST_F(ConfigApply, AppliesEveryPartAndRevertPutsItBack) {
  auto r = apply_config(fake.root(), cfg, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->applied, (std::vector<std::string>{"modules", "knobs", "feeder", "nic", "pool"}));
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "training");
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "32");
  EXPECT_EQ(get(std::string(k_hp) + "/node1/reserved"), "16");
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "4");
  EXPECT_TRUE(feeder_active());
  EXPECT_EQ(get("/sys/fs/cgroup/mltune-feeder/cpuset.cpus"), "6-7");
  ASSERT_EQ(r->lines.size(), 5U);
  EXPECT_EQ(r->lines[0].rfind("modules: 0 loaded", 0), 0U) << r->lines[0]; // a tree loads none
  EXPECT_EQ(r->lines[1].rfind("knobs: switched to 'training' (kernel backend", 0), 0U) << r->lines[1];
  EXPECT_TRUE(state_exists());

  // A second apply (reload) with another pool keeps the boot's "before".
  cfg.pool = {{0, 8}};
  ASSERT_TRUE(apply_config(fake.root(), cfg, {}));
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "8");

  auto back = revert_config(fake.root());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "baseline");
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "0");
  EXPECT_EQ(get(std::string(k_hp) + "/node1/reserved"), "0");
  // Back to the module's default, not to the number it came to at boot.
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "auto");
  EXPECT_FALSE(feeder_active());
  EXPECT_EQ(get("/sys/devices/virtual/workqueue/cpumask"), "ff");
  EXPECT_FALSE(state_exists());
  auto nothing = revert_config(fake.root());
  ASSERT_TRUE(nothing);
  EXPECT_TRUE(nothing->restored.empty());
}

TEST_F(ConfigApply, PlanningFailsBeforeAnythingChanges) {
  const auto before = fake.snapshot();
  cfg.feeder_cpus = "8-9"; // not online
  auto r = apply_config(fake.root(), cfg, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("feeder"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("[feeder] cpus 8-9: CPUs 8-9 are not online on this node (online: 0-7)"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "none");
  EXPECT_EQ(fake.snapshot(), before);

  cfg.feeder_cpus = "6-7";
  cfg.pool = {{5, 1}}; // no such node
  r = apply_config(fake.root(), cfg, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  EXPECT_NE(r.error().message.find("NUMA node 5 has no huge-page pool"), std::string::npos);
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "none");

  cfg.profile = "nonexistent";
  r = apply_config(fake.root(), cfg, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("mltune.toml: profile 'nonexistent'"), std::string::npos);
}

// The pool step runs last; when the kernel cannot supply the pages, every
// step before is rolled back and the node is on its baseline.
TEST_F(ConfigApply, AFailedReservationRollsBackEverything) {
  Sysroot root = fake.root();
  root.inject_write_failure(std::string(k_hp) + "/node1/reserved", ENOMEM);
  auto r = apply_config(root, cfg, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, ENOMEM);
  EXPECT_NE(r.error().message.find("pool"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("rolled back"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("back on its baseline"), std::string::npos) << r.error().message;
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "baseline");
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "0");
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "1");
  EXPECT_FALSE(feeder_active());
  EXPECT_FALSE(state_exists());
  // The pool's record of the node baseline went with the rollback.
  const auto baseline = fake.root().path("/run/mltune/baseline.json");
  EXPECT_FALSE(std::filesystem::exists(baseline) &&
               fake.get("/run/mltune/baseline.json").find("\"pool\"") != std::string::npos)
      << fake.get("/run/mltune/baseline.json");
}

// `off` puts the pool back from its record of the node baseline (the
// values the first apply of the boot found), then drops the record.
TEST_F(ConfigApply, OffPutsThePoolBackFromItsBaselineRecord) {
  ASSERT_TRUE(apply_config(fake.root(), cfg, {}));
  ASSERT_NE(fake.get("/run/mltune/baseline.json").find("\"pool\""), std::string::npos);
  auto off = node_off(fake.root());
  ASSERT_TRUE(off) << off.error().message;
  const auto pool =
      std::find_if(off->domains.begin(), off->domains.end(), [](const DomainState &d) { return d.domain == "pool"; });
  ASSERT_NE(pool, off->domains.end());
  EXPECT_EQ(pool->state, "restored") << pool->detail;
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "0");
  EXPECT_EQ(get(std::string(k_hp) + "/node1/reserved"), "0");
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "auto");
  EXPECT_FALSE(state_exists());
  auto again = node_off(fake.root());
  ASSERT_TRUE(again);
  for (const auto &d : again->domains) {
    EXPECT_NE(d.state, "failed") << d.domain << ": " << d.detail;
    EXPECT_NE(d.state, "restored") << d.domain << ": " << d.detail;
  }
}

// A state file of an earlier version kept the pool as the first apply
// found it: revert still puts that back.
TEST_F(ConfigApply, RevertReadsThePoolOfAnEarlierVersionsStateFile) {
  fake.set(std::string(k_hp) + "/node0/reserved", "40\n");
  fake.set(std::string(k_config_state),
           R"({"version": 1, "profile": "", "knobs": false, "feeder": false, "pool": [[0, 12]], "user_quota": 3})");
  auto back = revert_config(fake.root());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "12");
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "3");
  EXPECT_FALSE(state_exists());
}

// A quota set before mltune's configuration is put back as it was.
TEST_F(ConfigApply, RevertPutsBackAQuotaSetByHand) {
  fake.set(std::string(k_hp) + "/user_quota", "7\n");
  fake.set(std::string(k_hp) + "/user_quota_auto", "0\n");
  ASSERT_TRUE(apply_config(fake.root(), cfg, {}));
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "4");
  ASSERT_TRUE(revert_config(fake.root()));
  EXPECT_EQ(get(std::string(k_hp) + "/user_quota"), "7");
}

// A reload that fails keeps the configuration in force; a start that fails
// also puts back what the earlier applies of the boot did.
TEST_F(ConfigApply, AfterAFailureReloadKeepsThePreviousStateStartTheBaseline) {
  ASSERT_TRUE(apply_config(fake.root(), cfg, {}));
  NodeConfig bigger = cfg;
  bigger.pool = {{0, 64}, {1, 64}};
  Sysroot root = fake.root();
  root.inject_write_failure(std::string(k_hp) + "/node1/reserved", ENOMEM);
  ConfigApplyOptions reload;
  reload.baseline_on_failure = false;
  ASSERT_FALSE(apply_config(root, bigger, reload));
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "training");
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "32");
  EXPECT_EQ(get(std::string(k_hp) + "/node1/reserved"), "16");
  EXPECT_TRUE(feeder_active());
  EXPECT_TRUE(state_exists());

  bigger.profile = "nonexistent";
  auto r = apply_config(fake.root(), bigger, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("back on its baseline"), std::string::npos) << r.error().message;
  EXPECT_EQ(get("/sys/kernel/mltune/profile"), "baseline");
  EXPECT_EQ(get(std::string(k_hp) + "/node0/reserved"), "0");
  EXPECT_EQ(get(std::string(k_hp) + "/node1/reserved"), "0");
  EXPECT_FALSE(feeder_active());
  EXPECT_FALSE(state_exists());
}

TEST_F(ConfigApply, DryRunChangesNothing) {
  const auto before = fake.snapshot();
  ConfigApplyOptions opt;
  opt.dry_run = true;
  auto r = apply_config(fake.root(), cfg, opt);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(fake.snapshot(), before);
  EXPECT_FALSE(state_exists());
}
