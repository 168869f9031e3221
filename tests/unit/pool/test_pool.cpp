// Huge-page pool: size parsing, sysfs state and changes, mltunectl pool.
#include "cli.hpp"
#include "fake_sysroot.hpp"
#include "mltune/pool.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <sstream>
#include <string>

namespace mltune::test {
namespace {

constexpr std::string_view k_hp = "/sys/kernel/mltune/hugepool";

void add_pool(const FakeSysroot &fs, int node, int reserved, int free) {
  const std::string d = std::string(k_hp) + "/node" + std::to_string(node);
  fs.set(d + "/reserved", std::to_string(reserved) + "\n");
  fs.set(d + "/free", std::to_string(free) + "\n");
  fs.set(d + "/mapped", std::to_string(reserved - free) + "\n");
  fs.set(std::string(k_hp) + "/pmd_mappings", "3\n");
  fs.set(std::string(k_hp) + "/pte_mappings", "1024\n");
  fs.set(std::string(k_hp) + "/orphaned", "0\n");
  fs.set(std::string(k_hp) + "/pmd_capable", "1\n");
  fs.set(std::string(k_hp) + "/page_size", "2097152\n");
}

TEST(Pool, ParseSize) {
  EXPECT_EQ(256U, *parse_pool_size("256"));
  EXPECT_EQ(256U, *parse_pool_size("512M"));
  EXPECT_EQ(512U, *parse_pool_size("1G"));
  EXPECT_EQ(2U, *parse_pool_size("4096k"));
  EXPECT_EQ(0U, *parse_pool_size("0"));
  for (const char *bad : {"", "M", "3M", "1K", "-1", "12x", "1.5G", " 2"}) {
    auto r = parse_pool_size(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(Errc::input, r.error().kind) << bad;
  }
}

TEST(Pool, StatusSortsNodesNumerically) {
  FakeSysroot fs;
  add_pool(fs, 10, 4, 4);
  add_pool(fs, 2, 32, 30);
  auto st = pool_status(fs.root());
  ASSERT_TRUE(st) << st.error().message;
  ASSERT_EQ(2U, st->nodes.size());
  EXPECT_EQ(2, st->nodes[0].node);
  EXPECT_EQ(30U, st->nodes[0].free);
  EXPECT_EQ(2U, st->nodes[0].mapped);
  EXPECT_EQ(10, st->nodes[1].node);
  EXPECT_EQ(3U, st->pmd_mappings);
  EXPECT_EQ(1024U, st->pte_mappings);
  EXPECT_TRUE(st->pmd_capable);
}

TEST(Pool, MissingModule) {
  FakeSysroot fs;
  auto st = pool_status(fs.root());
  ASSERT_FALSE(st);
  EXPECT_EQ(ENOENT, st.error().sys_errno);
}

TEST(Pool, ReserveAndRelease) {
  FakeSysroot fs;
  add_pool(fs, 0, 32, 30);
  auto r = pool_reserve(fs.root(), 0, 64);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ("64", fs.get(std::string(k_hp) + "/node0/reserved"));
  add_pool(fs, 0, 32, 30);
  r = pool_release(fs.root(), 0, 2); // two free pages
  ASSERT_TRUE(r);
  EXPECT_EQ("30", fs.get(std::string(k_hp) + "/node0/reserved"));
  add_pool(fs, 0, 32, 30);
  r = pool_release(fs.root(), 0, UINT64_MAX); // every free page, not the mapped ones
  ASSERT_TRUE(r);
  EXPECT_EQ("2", fs.get(std::string(k_hp) + "/node0/reserved"));

  auto bad = pool_reserve(fs.root(), 3, 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(Errc::input, bad.error().kind);
}

TEST(Pool, ShortReservationSaysWhatItGot) {
  FakeSysroot fs;
  add_pool(fs, 1, 12, 12);
  Sysroot root = fs.root();
  root.inject_write_failure(std::string(k_hp) + "/node1/reserved", ENOMEM);
  auto r = pool_reserve(root, 1, 256);
  ASSERT_FALSE(r);
  EXPECT_EQ(ENOMEM, r.error().sys_errno);
  EXPECT_NE(std::string::npos, r.error().message.find("12 of 256")) << r.error().message;
}

TEST(Pool, CliStatusJsonAndDryRun) {
  FakeSysroot fs;
  add_pool(fs, 0, 32, 30);
  std::ostringstream out, err;
  ASSERT_EQ(0, cli::run({"--sysroot", fs.dir().string(), "--json", "pool", "status"}, out, err)) << err.str();
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(2097152U, j["page_size"].get<std::uint64_t>());
  EXPECT_EQ(30U, j["nodes"][0]["free"].get<std::uint64_t>());
  EXPECT_EQ(2U * 2097152U, j["nodes"][0]["mapped_bytes"].get<std::uint64_t>());

  std::ostringstream o2, e2;
  ASSERT_EQ(0, cli::run({"--sysroot", fs.dir().string(), "--dry-run", "pool", "reserve", "0", "1G"}, o2, e2));
  EXPECT_NE(std::string::npos, o2.str().find("32 -> 512")) << o2.str();
  EXPECT_EQ("32\n", fs.get(std::string(k_hp) + "/node0/reserved"));

  std::ostringstream o3, e3;
  EXPECT_EQ(2, cli::run({"--sysroot", fs.dir().string(), "pool", "reserve", "0", "3M"}, o3, e3));
}

// Per-user accounting and the quota: hugepool/users and user_quota.
TEST(Pool, UsersAndQuota) {
  FakeSysroot fs;
  add_pool(fs, 0, 32, 30);
  fs.set(std::string(k_hp) + "/user_quota", "4\n");
  fs.set(std::string(k_hp) + "/users", "0 1\n1000 2\n");
  auto st = pool_status(fs.root());
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(4U, st->user_quota);
  ASSERT_EQ(2U, st->users.size());
  EXPECT_EQ(1000U, st->users[1].uid);
  EXPECT_EQ(2U, st->users[1].pages);

  fs.set(std::string(k_hp) + "/users", "1000\n");
  st = pool_status(fs.root());
  ASSERT_FALSE(st);
  EXPECT_NE(std::string::npos, st.error().message.find("unexpected line '1000'"));
  fs.set(std::string(k_hp) + "/users", "");

  std::ostringstream out, err;
  ASSERT_EQ(0, cli::run({"--sysroot", fs.dir().string(), "pool", "quota", "64M"}, out, err)) << err.str();
  EXPECT_EQ("32", fs.get(std::string(k_hp) + "/user_quota"));
  std::ostringstream o2, e2;
  EXPECT_EQ(2, cli::run({"--sysroot", fs.dir().string(), "pool", "quota", "1M"}, o2, e2));
  EXPECT_EQ("32", fs.get(std::string(k_hp) + "/user_quota"));
  std::ostringstream o3, e3;
  ASSERT_EQ(0, cli::run({"--sysroot", fs.dir().string(), "--json", "pool", "status"}, o3, e3)) << e3.str();
  EXPECT_EQ(32U, nlohmann::json::parse(o3.str())["user_quota"].get<std::uint64_t>());

  // A module without per-user accounting: the quota cannot be set.
  FakeSysroot old;
  add_pool(old, 0, 1, 1);
  auto q = pool_set_user_quota(old.root(), 1);
  ASSERT_FALSE(q);
  EXPECT_NE(std::string::npos, q.error().message.find("no per-user quota"));
}

} // namespace
} // namespace mltune::test
