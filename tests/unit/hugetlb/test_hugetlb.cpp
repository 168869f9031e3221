// The hugetlbfs page domain (hugetlb.hpp) on a fake two-node machine: the
// [hugepages] table parsed, planned against each node's free memory, set
// and read back, rolled back exactly with the other domains of a switch,
// checked by verify and put back by off.
#include "fake_sysroot.hpp"
#include "mltune/config.hpp"
#include "mltune/hugetlb.hpp"
#include "mltune/node.hpp"
#include "mltune/parse.hpp"
#include "mltune/profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

// Two NUMA nodes with 2 MiB and 1 GiB pages, 4 GiB free on each.
class HugePages : public ::testing::Test {
protected:
  void SetUp() override {
    for (int n = 0; n < 2; ++n) {
      for (const std::uint64_t kib : {2048ULL, 1048576ULL}) {
        fake.set(hugepages_file(n, kib), "0\n");
      }
      fake.set("/sys/devices/system/node/node" + std::to_string(n) + "/meminfo",
               "Node " + std::to_string(n) + " MemTotal:       8388608 kB\nNode " + std::to_string(n) +
                   " MemFree:        4194304 kB\n");
    }
    fake.set("/proc/sys/vm/swappiness", "60\n");
  }
  [[nodiscard]] Result<Profile> profile(const std::string &text) const {
    const Sysroot r = fake.root();
    auto p = ProfileLoader(&r).load_text(text, "hp.toml");
    if (p) {
      p->name = "hp";
    }
    return p;
  }
  [[nodiscard]] std::string count(int node, std::uint64_t kib) const {
    return std::string(trim(fake.get(hugepages_file(node, kib))));
  }

  FakeSysroot fake;
};

} // namespace

TEST_F(HugePages, TheTableParsesAndALaterFileWins) {
  auto p = profile("[hugepages]\n\"2M\" = { 0 = 1024, 1 = 512 }\n\"1G\" = { 1 = 2 }\n\"2M\" = { 0 = 8 }\n");
  // TOML refuses a key defined twice: the same size twice is an error.
  ASSERT_FALSE(p);
  p = profile("[hugepages]\n\"2M\" = { 0 = 1024, 1 = 512 }\n\"1G\" = { 1 = 2 }\n");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->hugepages.size(), 3U);
  auto find = [](const Profile &pr, std::string_view key) {
    const auto it = std::ranges::find_if(pr.hugepages, [&](const HugePageSetting &h) { return h.key() == key; });
    return it == pr.hugepages.end() ? HugePageSetting{} : *it;
  };
  EXPECT_EQ(find(*p, "node0 2M").pages, 1024U);
  EXPECT_EQ(find(*p, "node1 2M").pages, 512U);
  EXPECT_EQ(find(*p, "node1 1G").pages, 2U);
  EXPECT_EQ(find(*p, "node1 1G").page_kib, 1048576U);

  // An included file's count is replaced by the including file's.
  fake.set("/etc/mltune/profiles/base.toml", "[hugepages]\n\"2M\" = { 0 = 100, 1 = 100 }\n");
  p = profile("include = \"base\"\n[hugepages]\n\"2048kB\" = { 1 = 7 }\n");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->hugepages.size(), 2U);
  EXPECT_EQ(find(*p, "node0 2M").pages, 100U);
  EXPECT_EQ(find(*p, "node1 2M").pages, 7U);
}

TEST_F(HugePages, BadTablesAreRefusedNamingTheLine) {
  auto err = [&](const std::string &t) {
    auto p = profile(t);
    return p ? std::string("(accepted)") : p.error().message;
  };
  EXPECT_NE(err("[hugepages]\n\"3M\" = { 0 = 1 }\n").find("hp.toml:2: [hugepages] '3M' is not a huge page size"),
            std::string::npos);
  EXPECT_NE(err("[hugepages]\n\"2M\" = 5\n").find("must be a table of NUMA node = pages"), std::string::npos);
  EXPECT_NE(err("[hugepages]\n\"2M\" = { x = 1 }\n").find("'x' is not a NUMA node"), std::string::npos);
  EXPECT_NE(err("[hugepages]\n\"2M\" = { 0 = -1 }\n").find("pages must be an integer"), std::string::npos);
  EXPECT_NE(err("[hugepages]\n\"2M\" = { 0 = \"8\" }\n").find("pages must be an integer"), std::string::npos);
  EXPECT_NE(err("hugepages = 1\n").find("[hugepages] must be a table"), std::string::npos);
}

TEST_F(HugePages, SwitchSetsVerifyReadsOffPutsBack) {
  fake.set(hugepages_file(1, 2048), "3\n"); // set before mltune
  auto p = profile("[hugepages]\n\"2M\" = { 0 = 1024, 1 = 512 }\n\"1G\" = { 1 = 2 }\n");
  ASSERT_TRUE(p) << p.error().message;
  const Sysroot root = fake.root(); // ProfileSwitch keeps a reference
  ProfileSwitch sw(*p, root, Backend::direct);
  auto r = sw.run({});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(std::find(r->applied.begin(), r->applied.end(), "hugepages"), r->applied.end());
  EXPECT_EQ(count(0, 2048), "1024");
  EXPECT_EQ(count(1, 2048), "512");
  EXPECT_EQ(count(1, 1048576), "2");

  auto c = check_node(*p, fake.root());
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->matches());
  // Drift: the kernel's count changed behind mltune's back.
  fake.set(hugepages_file(0, 2048), "1000\n");
  c = check_node(*p, fake.root());
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->matches());
  const auto d = std::find_if(c->differences.begin(), c->differences.end(),
                              [](const NodeDifference &x) { return x.domain == "hugepages"; });
  ASSERT_NE(d, c->differences.end());
  EXPECT_EQ(d->key, "node0 2M");
  EXPECT_EQ(d->expected, "1024");
  EXPECT_EQ(d->current, "1000");

  auto off = node_off(fake.root());
  ASSERT_TRUE(off) << off.error().message;
  const auto h = std::find_if(off->domains.begin(), off->domains.end(),
                              [](const DomainState &x) { return x.domain == "hugepages"; });
  ASSERT_NE(h, off->domains.end());
  EXPECT_EQ(h->state, "restored") << h->detail;
  EXPECT_EQ(count(0, 2048), "0");
  EXPECT_EQ(count(1, 2048), "3");
  EXPECT_EQ(count(1, 1048576), "0");
  // Nothing left to put back.
  off = node_off(fake.root());
  ASSERT_TRUE(off);
  for (const auto &x : off->domains) {
    EXPECT_NE(x.state, "restored") << x.domain << ": " << x.detail;
  }
}

TEST_F(HugePages, PlanRefusesWhatTheNodeCannotHoldBeforeAnythingChanges) {
  const auto before = fake.snapshot();
  const Sysroot root = fake.root(); // the steps keep a reference
  // 4 GiB free on node 1: 3 GiB of 1G pages and 1 GiB of 2M pages is 4 GiB
  // and fits; one more 2M page does not.
  auto fits = profile("[hugepages]\n\"1G\" = { 1 = 3 }\n\"2M\" = { 1 = 512 }\n");
  ASSERT_TRUE(fits) << fits.error().message;
  HugePageStep ok(fits->hugepages, root);
  const auto planned = ok.plan();
  EXPECT_TRUE(planned) << planned.error().message;
  auto p = profile("[sysctl]\n\"vm.swappiness\" = { value = 1, reason = \"t\" }\n[hugepages]\n\"1G\" = { 1 = 3 "
                   "}\n\"2M\" = { 1 = 513 }\n");
  ASSERT_TRUE(p) << p.error().message;
  ProfileSwitch sw(*p, root, Backend::direct);
  auto r = sw.run({});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("[hugepages] node1: the pages to add need 4098 MiB, the node has 4096 MiB free"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(fake.snapshot(), before);

  auto missing = profile("[hugepages]\n\"64K\" = { 0 = 1 }\n");
  ASSERT_TRUE(missing);
  HugePageStep no_size(missing->hugepages, root);
  auto st = no_size.plan();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("hp.toml:2: [hugepages] node0 64K: the kernel has no 64 kB pages here"),
            std::string::npos)
      << st.error().message;
  auto far = profile("[hugepages]\n\"2M\" = { 5 = 1 }\n");
  ASSERT_TRUE(far);
  HugePageStep no_node(far->hugepages, root);
  st = no_node.plan();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("NUMA node 5 is not on this machine"), std::string::npos) << st.error().message;
}

// The kernel refuses an allocation when it is made: the step puts back the
// counts it wrote, and the switch rolls back every domain before it.
TEST_F(HugePages, ARefusedAllocationRollsBackEveryDomain) {
  auto p = profile(
      "[sysctl]\n\"vm.swappiness\" = { value = 1, reason = \"t\" }\n[hugepages]\n\"2M\" = { 0 = 16, 1 = 16 }\n");
  ASSERT_TRUE(p) << p.error().message;
  Sysroot root = fake.root();
  root.inject_write_failure(hugepages_file(1, 2048), ENOMEM);
  ProfileSwitch sw(*p, root, Backend::direct);
  auto r = sw.run({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, ENOMEM);
  EXPECT_NE(r.error().message.find("hugepages node1 2M"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("rolled back: sched, nic, knobs, modules"), std::string::npos) << r.error().message;
  EXPECT_EQ(count(0, 2048), "0");
  EXPECT_EQ(count(1, 2048), "0");
  EXPECT_EQ(trim(fake.get("/proc/sys/vm/swappiness")), "60");
  // No record of a change that did not happen.
  auto off = node_off(fake.root());
  ASSERT_TRUE(off);
  const auto h = std::find_if(off->domains.begin(), off->domains.end(),
                              [](const DomainState &x) { return x.domain == "hugepages"; });
  ASSERT_NE(h, off->domains.end());
  EXPECT_EQ(h->state, "off") << h->detail;
}

// A failure after the step (here the boot step, planted) puts the counts
// back as plan() found them.
TEST_F(HugePages, AFailureAfterTheStepPutsTheCountsBack) {
  fake.set(hugepages_file(0, 2048), "5\n");
  auto p = profile("[hugepages]\n\"2M\" = { 0 = 16 }\n");
  ASSERT_TRUE(p);
  const Sysroot root = fake.root(); // ProfileSwitch keeps a reference
  ProfileSwitch sw(*p, root, Backend::direct);
  TransactionOptions o;
  o.fail_after = "hugepages";
  auto r = sw.run(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(count(0, 2048), "5");
  auto off = node_off(fake.root());
  ASSERT_TRUE(off);
  for (const auto &x : off->domains) {
    if (x.domain == "hugepages") {
      EXPECT_EQ(x.state, "off") << x.detail;
    }
  }
}

// The node configuration's [hugepages] go over the profile's, per size and
// node: applied with the rest of the configuration, written back by
// persist's renderer as they were read, put back by revert.
TEST_F(HugePages, TheNodeConfigurationsCountsGoOverTheProfiles) {
  fake.set("/etc/mltune/profiles/hp.toml", "[hugepages]\n\"2M\" = { 0 = 8, 1 = 8 }\n");
  auto cfg = parse_config("profile = \"hp\"\n[hugepages]\n\"2M\" = { 1 = 32 }\n\"1G\" = { 0 = 1 }\n", "mltune.toml");
  ASSERT_TRUE(cfg) << cfg.error().message;
  ASSERT_EQ(cfg->hugepages.size(), 2U);
  EXPECT_FALSE(cfg->empty());

  auto again = parse_config(render_config(*cfg), "rendered");
  ASSERT_TRUE(again) << again.error().message << "\n" << render_config(*cfg);
  ASSERT_EQ(again->hugepages.size(), 2U);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again->hugepages[i].key(), cfg->hugepages[i].key());
    EXPECT_EQ(again->hugepages[i].pages, cfg->hugepages[i].pages);
  }

  auto r = apply_config(fake.root(), *cfg, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(std::find(r->applied.begin(), r->applied.end(), "hugepages"), r->applied.end());
  EXPECT_EQ(count(0, 2048), "8");
  EXPECT_EQ(count(1, 2048), "32");
  EXPECT_EQ(count(0, 1048576), "1");

  auto back = revert_config(fake.root());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(count(0, 2048), "0");
  EXPECT_EQ(count(1, 2048), "0");
  EXPECT_EQ(count(0, 1048576), "0");
}

TEST_F(HugePages, TheNodeConfigurationRefusesABadTableNamingTheLine) {
  auto cfg = parse_config("[hugepages]\n\"2M\" = { 0 = -4 }\n", "mltune.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("mltune.toml:2: [hugepages] \"2M\" node 0: pages must be an integer"),
            std::string::npos)
      << cfg.error().message;
  cfg = parse_config("hugepages = 3\n", "mltune.toml");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("[hugepages] must be a table"), std::string::npos) << cfg.error().message;
}
