// persist: the node configuration written, refused over a hand-written
// file, and the files of older versions of persist removed (only theirs).
#include "fake_sysroot.hpp"

#include "mltune/persist.hpp"

#include <filesystem>
#include <gtest/gtest.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

NodeConfig training_config() {
  NodeConfig c;
  c.profile = "training";
  c.watcher = true;
  c.pool = {{0, 32}, {1, 32}};
  c.user_quota = 4;
  c.feeder_cpus = "2-3,6-7";
  return c;
}

} // namespace

TEST(Persist, WritesTheConfigurationAndRemovesIt) {
  FakeSysroot fake;
  const Sysroot root = fake.root();
  auto written = persist_config(training_config(), root);
  ASSERT_TRUE(written) << written.error().message;
  EXPECT_EQ(written->written, std::vector<std::string>{"/etc/mltune/mltune.toml"});
  const std::string text = fake.get("/etc/mltune/mltune.toml");
  EXPECT_TRUE(text.starts_with(k_config_marker));
  auto back = load_config(root);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->profile, "training");
  EXPECT_EQ(back->pool, (std::vector<std::pair<int, std::uint64_t>>{{0, 32}, {1, 32}}));
  EXPECT_EQ(back->user_quota, 4U);
  EXPECT_EQ(back->feeder_cpus, "2-3,6-7");
  EXPECT_TRUE(back->watcher);

  auto removed = remove_persist(root);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, std::vector<std::string>{"/etc/mltune/mltune.toml"});
  EXPECT_FALSE(root.exists("/etc/mltune/mltune.toml"));
  auto again = remove_persist(root); // idempotent
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
}

TEST(Persist, RefusesAnUnknownProfileAndAHandWrittenFile) {
  FakeSysroot fake;
  NodeConfig c = training_config();
  c.profile = "no-such-profile";
  auto r = persist_config(c, fake.root());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  EXPECT_FALSE(fake.root().exists("/etc/mltune/mltune.toml"));

  fake.set("/etc/mltune/mltune.toml", "# mine\nprofile = \"inference\"\n");
  r = persist_config(training_config(), fake.root());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--replace"), std::string::npos) << r.error().message;
  EXPECT_EQ(fake.get("/etc/mltune/mltune.toml"), "# mine\nprofile = \"inference\"\n");
  ASSERT_TRUE(persist_config(training_config(), fake.root(), true));
  EXPECT_TRUE(fake.get("/etc/mltune/mltune.toml").starts_with(k_config_marker));
  // remove_persist leaves a hand-written file alone.
  fake.set("/etc/mltune/mltune.toml", "profile = \"inference\"\n");
  auto removed = remove_persist(fake.root());
  ASSERT_FALSE(removed);
  EXPECT_NE(removed.error().message.find("not written by mltunectl persist"), std::string::npos);
  EXPECT_TRUE(fake.root().exists("/etc/mltune/mltune.toml"));
}

// Older versions of persist wrote a unit of their own in /etc, which would
// shadow the packaged one: persist removes it, with its sysctl.d, limits.d
// and mltune.conf files, but only files that carry the marker.
TEST(Persist, RemovesTheFilesOfOlderVersions) {
  FakeSysroot fake;
  const Sysroot root = fake.root();
  const std::string marker = std::string(k_config_marker) + " (profile training)\n";
  for (const auto &f : legacy_persist_files()) {
    if (f.ends_with(".wants/mltune.service")) {
      ASSERT_TRUE(root.symlink("../mltune.service", f));
    } else {
      fake.set(f, marker + "x\n");
    }
  }
  fake.set("/etc/sysctl.d/90-mltune.conf", "vm.swappiness = 5\n"); // the administrator's now
  auto r = persist_config(training_config(), root);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("90-mltune.conf: not written by mltunectl persist"), std::string::npos);
  fake.set("/etc/sysctl.d/90-mltune.conf", marker);
  r = persist_config(training_config(), root);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->removed.size(), legacy_persist_files().size());
  for (const auto &f : legacy_persist_files()) {
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(root.path(f)))) << f;
  }
  // A link systemctl enable made to the packaged unit is systemd's.
  ASSERT_TRUE(root.symlink("/usr/lib/systemd/system/mltune.service",
                           "/etc/systemd/system/multi-user.target.wants/mltune.service"));
  auto removed = remove_persist(root);
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, std::vector<std::string>{"/etc/mltune/mltune.toml"});
  EXPECT_TRUE(std::filesystem::is_symlink(root.path("/etc/systemd/system/multi-user.target.wants/mltune.service")));
}
