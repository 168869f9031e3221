#include "fake_sysroot.hpp"

#include "mltune/compare.hpp"
#include "mltune/profile.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

std::string value_of(const Profile &p, std::string_view key) {
  const Knob *k = p.find(key);
  return k != nullptr ? k->value : "<unset>";
}

class ProfileFiles : public ::testing::Test {
protected:
  std::string write(const std::string &name, const std::string &text) {
    fake.set("/profiles/" + name, text);
    return (fake.dir() / "profiles" / name).string();
  }
  Result<Profile> load_text(const std::string &text) { return ProfileLoader().load_text(text, "t.toml"); }
  FakeSysroot fake;
};

} // namespace

TEST(Builtins, TrainingHasEveryRequiredValue) {
  auto p = ProfileLoader().load("training");
  ASSERT_TRUE(p) << p.error().message;
  const std::pair<const char *, const char *> want[] = {
      {"vm.swappiness", "1"},
      {"vm.overcommit_memory", "1"},
      {"vm.dirty_ratio", "40"},
      {"vm.dirty_background_ratio", "10"},
      {"vm.zone_reclaim_mode", "0"},
      {"kernel.numa_balancing", "0"},
      {"kernel.sched_autogroup_enabled", "0"},
      {"net.core.rmem_max", "134217728"},
      {"net.core.wmem_max", "134217728"},
      {"net.ipv4.tcp_rmem", "4096 87380 134217728"},
      {"net.ipv4.tcp_wmem", "4096 65536 134217728"},
      {"net.core.netdev_max_backlog", "300000"},
      {"net.core.somaxconn", "65535"},
      {"net.ipv4.tcp_max_syn_backlog", "65535"},
      {"fs.file-max", "2097152"},
      {"fs.inotify.max_user_watches", "1048576"},
      {"kernel/mm/transparent_hugepage/enabled", "madvise"},
      {"kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs", "10000"},
      {"net.ipv4.tcp_congestion_control", "bbr"},
  };
  for (const auto &[k, v] : want) {
    EXPECT_EQ(value_of(*p, k), v) << k;
  }
  EXPECT_TRUE(p->find("net.ipv4.tcp_congestion_control")->optional);
  EXPECT_FALSE(p->find("vm.swappiness")->optional);
  EXPECT_EQ(p->description, "Training nodes: throughput, large buffers, no swapping");
  EXPECT_EQ(p->sources, (std::vector<std::string>{"base.toml", "training.toml"}));
}

TEST(Builtins, InferenceOverridesSwappinessAndKeepsBase) {
  auto p = ProfileLoader().load("inference");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(value_of(*p, "vm.swappiness"), "0");
  EXPECT_EQ(value_of(*p, "net.core.busy_poll"), "50");
  EXPECT_EQ(value_of(*p, "net.core.rmem_max"), "134217728");
  EXPECT_TRUE(p->find("net.core.rmem_max")->origin.starts_with("base.toml:"));
  EXPECT_TRUE(p->find("vm.swappiness")->origin.starts_with("inference.toml:"));
  for (const auto &k : p->knobs) {
    EXPECT_FALSE(k.reason.empty()) << k.key;
  }
}

TEST(Builtins, KnobPaths) {
  Knob a{KnobKind::sysctl, "net.ipv4.tcp_rmem", "1", false, false, "", ""};
  EXPECT_EQ(a.path(), "/proc/sys/net/ipv4/tcp_rmem");
  Knob b{KnobKind::sysfs, "kernel/mm/transparent_hugepage/enabled", "x", false, false, "", ""};
  EXPECT_EQ(b.path(), "/sys/kernel/mm/transparent_hugepage/enabled");
}

TEST_F(ProfileFiles, IncludeByRelativePathOverridesInOrder) {
  write("a.toml", "description = \"A\"\n[sysctl]\n\"vm.swappiness\" = { value = 5, reason = \"r\" }\n"
                  "\"vm.dirty_ratio\" = { value = 30 }\n");
  const auto b = write("b.toml", "include = [\"a.toml\"]\n[sysctl]\n\"vm.swappiness\" = { value = 7 }\n");
  auto p = ProfileLoader().load(b);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "b");
  EXPECT_EQ(p->description, "A");
  ASSERT_EQ(p->knobs.size(), 2U);
  EXPECT_EQ(p->knobs[0].key, "vm.swappiness");
  EXPECT_EQ(p->knobs[0].value, "7");
  EXPECT_EQ(p->knobs[0].origin, b + ":3");
}

TEST_F(ProfileFiles, IncludeOfBuiltinName) {
  const auto f = write("c.toml", "include = \"training\"\n[sysctl]\n\"vm.swappiness\" = { value = 10 }\n");
  auto p = ProfileLoader().load(f);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(value_of(*p, "vm.swappiness"), "10");
  EXPECT_EQ(value_of(*p, "vm.dirty_ratio"), "40");
}

TEST_F(ProfileFiles, IncludeCycleNamesFileAndLine) {
  write("x.toml", "include = [\"y.toml\"]\n");
  const auto y = write("y.toml", "\n\ninclude = [\"x.toml\"]\n");
  auto p = ProfileLoader().load(y);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, Errc::input);
  EXPECT_NE(p.error().message.find("include cycle"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("x.toml:1"), std::string::npos) << p.error().message;
}

TEST_F(ProfileFiles, SelfInclude) {
  const auto s = write("s.toml", "include = [\"s\"]\n");
  auto p = ProfileLoader().load(s);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("include cycle"), std::string::npos);
}

TEST_F(ProfileFiles, MissingInclude) {
  auto p = load_text("include = [\"nope\"]\n");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("t.toml:1: include 'nope': unknown profile"), std::string::npos)
      << p.error().message;
}

TEST_F(ProfileFiles, MalformedTomlHasLineAndColumn) {
  auto p = load_text("description = \"x\"\n[sysctl\n");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, Errc::input);
  EXPECT_TRUE(p.error().message.starts_with("t.toml:2:")) << p.error().message;
}

TEST_F(ProfileFiles, UnknownKeys) {
  auto top = load_text("descripton = \"typo\"\n");
  ASSERT_FALSE(top);
  EXPECT_TRUE(top.error().message.starts_with("t.toml:1: unknown key 'descripton'")) << top.error().message;
  auto knob = load_text("[sysctl]\n\"vm.swappiness\" = { value = 1, resaon = \"x\" }\n");
  ASSERT_FALSE(knob);
  EXPECT_TRUE(knob.error().message.starts_with("t.toml:2: vm.swappiness: unknown key 'resaon'"))
      << knob.error().message;
}

TEST_F(ProfileFiles, OutOfRangeAndBadTypes) {
  const std::pair<const char *, const char *> bad[] = {
      {"[sysctl]\n\"vm.swappiness\" = { value = 201 }\n", "t.toml:2: vm.swappiness: 201 is out of range [0, 200]"},
      {"[sysctl]\n\"vm.swappiness\" = { value = \"many\" }\n", "t.toml:2: vm.swappiness: 'many' is not an integer"},
      {"[sysctl]\n\"vm.swappiness\" = { value = 1.5 }\n", "t.toml:2: vm.swappiness: value must be"},
      {"[sysctl]\n\"vm.swappiness\" = 1\n", "t.toml:2: vm.swappiness: expected {"},
      {"[sysctl]\n\"vm.swappiness\" = { reason = \"x\" }\n", "t.toml:2: vm.swappiness: missing value"},
      {"[sysctl]\n\"vm.swappiness\" = { value = 1, optional = \"yes\" }\n", "t.toml:2: vm.swappiness: optional"},
      {"[sysctl]\n\"net.ipv4.tcp_rmem\" = { value = \"1 2\" }\n", "expected three integers"},
      {"[sysctl]\n\"vm/../x\" = { value = 1 }\n", "invalid sysctl name"},
      {"[sysfs]\n\"kernel/mm/transparent_hugepage/enabled\" = { value = \"sometimes\" }\n", "is not one of"},
      {"[sysfs]\n\"kernel/mm/../../../etc/passwd\" = { value = \"x\" }\n", "invalid sysfs path"},
      {"[sysfs]\n\"power/state\" = { value = \"mem\" }\n", "outside the allowed subtrees"},
      {"[sysctl]\n\"vm.foo\" = { value = \"a  b\" }\n", "value has extra spaces"},
      {"sysctl = 3\n", "[sysctl] must be a table"},
      {"include = 3\n", "include must be"},
  };
  for (const auto &[text, msg] : bad) {
    auto p = load_text(text);
    ASSERT_FALSE(p) << text;
    EXPECT_EQ(p.error().kind, Errc::input);
    EXPECT_NE(p.error().message.find(msg), std::string::npos) << p.error().message;
  }
}

TEST_F(ProfileFiles, UncataloguedKnobAccepted) {
  auto p = load_text("[sysctl]\n\"net.ipv4.conf.all.rp_filter\" = { value = 2 }\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->knobs[0].path(), "/proc/sys/net/ipv4/conf/all/rp_filter");
}

TEST(Loader, ListIncludesUserProfiles) {
  FakeSysroot fake;
  fake.set("/etc/mltune/profiles/custom.toml", "include = [\"training\"]\n");
  const Sysroot root = fake.root();
  const ProfileLoader loader(&root);
  EXPECT_EQ(loader.list(), (std::vector<std::string>{"base", "custom", "inference", "training"}));
  auto p = loader.load("custom");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "custom");
  EXPECT_FALSE(loader.load("no-such"));
  EXPECT_FALSE(loader.load("bad name!"));
}

// Site profiles (/etc/mltune/profiles) override the packaged ones
// (packaged_profile_dir()), which override the built-ins; an include
// resolves the same way from a packaged profile's own directory first.
TEST(Loader, SiteThenPackagedThenBuiltin) {
  FakeSysroot fake;
  const std::string pkg(packaged_profile_dir());
  const Sysroot root = fake.root();
  const ProfileLoader loader(&root);
  EXPECT_EQ(loader.load("training")->sources, (std::vector<std::string>{"base.toml", "training.toml"}));

  fake.set(pkg + "/training.toml", "include = \"base\"\n[sysctl]\n\"vm.swappiness\" = { value = 5 }\n");
  fake.set(pkg + "/base.toml", "[sysctl]\n\"vm.dirty_ratio\" = { value = 33 }\n");
  fake.set(pkg + "/packaged-only.toml", "[sysctl]\n\"vm.swappiness\" = { value = 7 }\n");
  auto p = loader.load("training");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(value_of(*p, "vm.swappiness"), "5");
  EXPECT_EQ(value_of(*p, "vm.dirty_ratio"), "33") << "base.toml from the packaged directory";
  EXPECT_EQ(p->sources.back(), root.path(pkg + "/training.toml").string());

  fake.set("/etc/mltune/profiles/training.toml", "[sysctl]\n\"vm.swappiness\" = { value = 9 }\n");
  p = loader.load("training");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(value_of(*p, "vm.swappiness"), "9");
  EXPECT_EQ(p->sources.back(), root.path("/etc/mltune/profiles/training.toml").string());
  EXPECT_EQ(value_of(*loader.load("packaged-only"), "vm.swappiness"), "7");
  EXPECT_EQ(loader.list(), (std::vector<std::string>{"base", "inference", "packaged-only", "training"}));
}

TEST(Diff, TrainingVsInference) {
  const ProfileLoader loader;
  const auto d = diff_profiles(*loader.load("training"), *loader.load("inference"));
  auto has = [&](const std::string &key, const std::string &a, const std::string &b) {
    return std::ranges::any_of(d, [&](const auto &e) { return e.key == key && e.a == a && e.b == b; });
  };
  EXPECT_TRUE(has("vm.swappiness", "1", "0"));
  EXPECT_TRUE(has("net.core.busy_poll", "", "50"));
  // Every domain: NIC tables by GLOB and key, scheduler rules by name.
  EXPECT_TRUE(has("* coalesce.rx-usecs", "50", "0"));
  EXPECT_TRUE(std::ranges::any_of(d, [](const auto &e) {
    return e.domain == "sched" && e.key == "nccl-progress" && e.a.find("deadline runtime=500us") != std::string::npos &&
           e.b.empty();
  }));
  EXPECT_TRUE(diff_profiles(*loader.load("training"), *loader.load("training")).empty());
}

TEST(Normalize, Values) {
  EXPECT_EQ(normalize_value("always [madvise] never\n"), "madvise");
  EXPECT_EQ(normalize_value("4096\t87380\t134217728\n"), "4096 87380 134217728");
  EXPECT_EQ(normalize_value("  x  "), "x");
  EXPECT_TRUE(values_equal("4096\t1 2\n", "4096 1 2"));
}

// Profiles are ASCII; anything else is an input error with file:line:col,
// found before the TOML parser sees it (toml++ 3.3 reaches
// __builtin_unreachable for some non-ASCII code points).
TEST_F(ProfileFiles, NonAsciiKeyIsAnInputErrorWithLine) {
  auto p = load_text("description = \"ok\"\n[sysctl]\n\"vm.swappiness\" = { value = 1 }\nkernel\xcb\x8fsched = 1\n");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind, mltune::Errc::input);
  EXPECT_NE(p.error().message.find("t.toml:4:7: non-ASCII byte"), std::string::npos) << p.error().message;
}

TEST_F(ProfileFiles, NonAsciiInStringsAndCommentsIsAnInputError) {
  for (const char *text :
       {"# r\xc3\xa9glage\ndescription = \"x\"\n", "description = \"caf\xc3\xa9\"\n", "1= 1*[s\"\xef\xb3\xbf\"\n"}) {
    auto p = load_text(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().kind, mltune::Errc::input);
    EXPECT_NE(p.error().message.find("non-ASCII byte"), std::string::npos) << p.error().message;
  }
}
