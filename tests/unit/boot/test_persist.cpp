#include "fake_sysroot.hpp"

#include "mltune/persist.hpp"

#include <filesystem>
#include <gtest/gtest.h>

using namespace mltune;
using mltune::test::FakeSysroot;

TEST(Persist, WritesAndRemoves) {
  FakeSysroot fake;
  const Sysroot root = fake.root();
  auto p = ProfileLoader().load("training");
  ASSERT_TRUE(p);
  auto written = persist(*p, root);
  ASSERT_TRUE(written) << written.error().message;
  EXPECT_EQ(written->size(), 5U);
  const std::string sysctl = fake.get("/etc/sysctl.d/90-mltune.conf");
  EXPECT_TRUE(sysctl.starts_with(k_persist_marker));
  EXPECT_NE(sysctl.find("\nvm.swappiness = 1\n"), std::string::npos);
  EXPECT_NE(sysctl.find("\n-net.ipv4.tcp_congestion_control = bbr\n"), std::string::npos);
  EXPECT_EQ(sysctl.find("transparent_hugepage"), std::string::npos);
  EXPECT_NE(fake.get("/etc/security/limits.d/90-mltune.conf").find("memlock    unlimited"), std::string::npos);
  EXPECT_NE(fake.get("/etc/mltune/mltune.conf").find("PROFILE=training\n"), std::string::npos);
  const std::string unit = fake.get("/etc/systemd/system/mltune.service");
  EXPECT_NE(unit.find("ExecStart="), std::string::npos);
  EXPECT_NE(unit.find("mltunectl switch ${PROFILE}"), std::string::npos);
  EXPECT_EQ(std::filesystem::read_symlink(root.path("/etc/systemd/system/multi-user.target.wants/mltune.service")),
            "../mltune.service");

  auto removed = remove_persist(root);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(removed->size(), 5U);
  EXPECT_FALSE(root.exists("/etc/sysctl.d/90-mltune.conf"));
  EXPECT_FALSE(std::filesystem::is_symlink(root.path("/etc/systemd/system/multi-user.target.wants/mltune.service")));
  EXPECT_TRUE(remove_persist(root)); // idempotent
}

TEST(Persist, RemoveLeavesForeignFilesAlone) {
  FakeSysroot fake;
  fake.set("/etc/sysctl.d/90-mltune.conf", "vm.swappiness = 5\n");
  auto removed = remove_persist(fake.root());
  ASSERT_FALSE(removed);
  EXPECT_NE(removed.error().message.find("not written by mltunectl"), std::string::npos);
  EXPECT_TRUE(fake.root().exists("/etc/sysctl.d/90-mltune.conf"));
}
