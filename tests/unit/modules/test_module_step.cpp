// The module allowlist (modules.hpp): which kernel modules a profile may
// load, from the node configuration's [modules] allow or the built-in
// profiles' modules, and the modules step refusing any other at plan time,
// before anything is loaded or written.
#include "fake_sysroot.hpp"

#include "mltune/config.hpp"
#include "mltune/modules.hpp"
#include "mltune/node.hpp"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <set>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

// modprobe on a fake kernel that has every module: what was asked to load.
class RecordingModules final : public ModuleLoader {
public:
  std::set<std::string> in_kernel;
  std::vector<std::string> loads;
  [[nodiscard]] bool loaded(const std::string &name) const override { return in_kernel.contains(name); }
  Status load(const std::string &name) override {
    loads.push_back(name);
    in_kernel.insert(name);
    return {};
  }
  Status unload(const std::string &name) override {
    in_kernel.erase(name);
    return {};
  }
};

Profile with_modules(std::vector<KernelModule> mods) {
  Profile p;
  p.name = "site";
  p.modules = std::move(mods);
  return p;
}

class ModuleAllowlistTest : public ::testing::Test {
protected:
  FakeSysroot fake;
  Sysroot root = fake.root();
  RecordingModules mods;
};

} // namespace

// The default is what userspace/profiles/*.toml name: every module of every
// shipped profile (base.toml: tcp_bbr), nothing else.
TEST(ModuleAllowlistDefault, IsTheModulesOfTheBuiltinProfiles) {
  std::set<std::string> expected;
  const ProfileLoader loader;
  for (const auto &e : std::filesystem::directory_iterator(MLTUNE_PROFILE_SRC_DIR)) {
    if (e.path().extension() != ".toml") {
      continue;
    }
    auto p = loader.load(e.path().string());
    ASSERT_TRUE(p) << p.error().message;
    for (const auto &m : p->modules) {
      expected.insert(m.name);
    }
  }
  const auto &def = default_module_allowlist();
  EXPECT_EQ(std::set<std::string>(def.begin(), def.end()), expected);
  EXPECT_TRUE(expected.contains("tcp_bbr"));
  EXPECT_EQ(def.size(), expected.size()) << "each name once";
}

// Without [modules] allow in the node configuration (no file at all here), a
// module no built-in profile names is refused at plan time: the error names
// the module, where the profile asked for it and the allowlist; modprobe is
// never run.
TEST_F(ModuleAllowlistTest, AModuleOffTheDefaultListIsRefusedAtPlanTime) {
  const Profile p = with_modules({{"tcp_bbr", false, "site.toml:1"}, {"evil_rootkit", false, "site.toml:2"}});
  ModuleStep step(p.modules, root, &mods);
  auto planned = step.plan();
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.error().kind, Errc::input);
  const std::string &m = planned.error().message;
  EXPECT_NE(m.find("module evil_rootkit (site.toml:2) is not on this node's module allowlist"), std::string::npos) << m;
  EXPECT_NE(m.find("the built-in profiles' modules"), std::string::npos) << m;
  EXPECT_NE(m.find(": tcp_bbr)"), std::string::npos) << m;
  EXPECT_NE(m.find("[modules] allow in /etc/mltune/mltune.toml"), std::string::npos) << m;
  EXPECT_TRUE(mods.loads.empty());

  // Already in the kernel or not required makes no difference.
  mods.in_kernel.insert("evil_rootkit");
  ModuleStep again(p.modules, root, &mods);
  EXPECT_FALSE(again.plan());
}

// A whole switch is refused before any step applies: no knob written, no
// module loaded.
TEST_F(ModuleAllowlistTest, ASwitchWithADisallowedModuleChangesNothing) {
  auto p = ProfileLoader().load_text("include = [\"training\"]\nmodules = [\"evil_rootkit\"]\n", "site.toml");
  ASSERT_TRUE(p) << p.error().message;
  const auto before = fake.snapshot();
  NodeSeams seams;
  seams.modules = &mods;
  ProfileSwitch sw(*p, root, Backend::direct, seams);
  auto r = sw.run({});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("evil_rootkit (site.toml:2) is not on this node's module allowlist"),
            std::string::npos)
      << r.error().message;
  EXPECT_TRUE(mods.loads.empty());
  EXPECT_EQ(fake.snapshot(), before);
  EXPECT_FALSE(std::filesystem::exists(fake.dir() / "run/mltune/baseline.json"));

  // The shipped profile itself switches (tcp_bbr is on the default list).
  const Profile training = *ProfileLoader().load("training");
  ProfileSwitch ok(training, root, Backend::direct, seams);
  ASSERT_TRUE(ok.run({}));
  EXPECT_EQ(mods.loads, std::vector<std::string>{"tcp_bbr"});
}

// [modules] allow replaces the default: what it lists may be loaded ('-' and
// '_' alike, as modprobe compares them), anything else, tcp_bbr included,
// is refused, and the error says where the list comes from.
TEST_F(ModuleAllowlistTest, TheNodeConfigurationsListReplacesTheDefault) {
  fake.set("/etc/mltune/mltune.toml", "profile = \"training\"\n[modules]\nallow = [\"nvidia-peermem\"]\n");
  auto allow = load_module_allowlist(root);
  ASSERT_TRUE(allow) << allow.error().message;
  EXPECT_EQ(allow->names, std::vector<std::string>{"nvidia-peermem"});
  EXPECT_TRUE(allow->allows("nvidia_peermem"));
  EXPECT_FALSE(allow->allows("tcp_bbr"));

  const Profile peer = with_modules({{"nvidia_peermem", true, "gpu.toml:3"}});
  ModuleStep step(peer.modules, root, &mods);
  ASSERT_TRUE(step.plan());
  ASSERT_TRUE(step.apply());
  EXPECT_EQ(mods.loads, std::vector<std::string>{"nvidia_peermem"});

  const Profile bbr = with_modules({{"tcp_bbr", false, "base.toml:8"}});
  ModuleStep refused(bbr.modules, root, &mods);
  auto planned = refused.plan();
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message.find("module tcp_bbr (base.toml:8) is not on this node's module allowlist "
                                         "(/etc/mltune/mltune.toml:3 [modules] allow: nvidia-peermem)"),
            std::string::npos)
      << planned.error().message;
}

// allow = [] lets profiles load no module at all; a profile without modules
// is not affected.
TEST_F(ModuleAllowlistTest, AnEmptyListAllowsNone) {
  fake.set("/etc/mltune/mltune.toml", "[modules]\nallow = []\n");
  const Profile bbr = with_modules({{"tcp_bbr", false, "base.toml:8"}});
  ModuleStep step(bbr.modules, root, &mods);
  auto planned = step.plan();
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message.find("[modules] allow: none)"), std::string::npos) << planned.error().message;
  const Profile none = with_modules({});
  ModuleStep nothing(none.modules, root, &mods);
  EXPECT_TRUE(nothing.plan());
}

// A node configuration that does not load allows nothing (rather than more
// than the administrator meant), and says why.
TEST_F(ModuleAllowlistTest, ABrokenConfigurationAllowsNothing) {
  fake.set("/etc/mltune/mltune.toml", "[modules]\nallow = [\"../x\"]\n");
  const Profile bbr = with_modules({{"tcp_bbr", false, "base.toml:8"}});
  ModuleStep step(bbr.modules, root, &mods);
  auto planned = step.plan();
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message.find("module allowlist ([modules] allow) cannot be read"), std::string::npos)
      << planned.error().message;
  EXPECT_NE(planned.error().message.find("mltune.toml:2: modules.allow: '../x' is not a module name"),
            std::string::npos)
      << planned.error().message;
  EXPECT_TRUE(mods.loads.empty());
}

// On a --sysroot tree (no loader: nothing is ever loaded there) the
// allowlist is still checked, so a tree shows what the node would refuse.
TEST_F(ModuleAllowlistTest, CheckedOnATreeToo) {
  const Profile p = with_modules({{"evil_rootkit", false, "site.toml:2"}});
  ModuleStep step(p.modules, root);
  EXPECT_FALSE(step.plan());
  const Profile ok = with_modules({{"tcp-bbr", false, "site.toml:2"}});
  ModuleStep fine(ok.modules, root);
  EXPECT_TRUE(fine.plan());
}
