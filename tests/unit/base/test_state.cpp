// StateFile<T>, the node baseline and FileLock on a fake sysroot.
#include "base/baseline.hpp"
#include "base/cgroup.hpp"
#include "base/file_lock.hpp"
#include "base/state_file.hpp"
#include "fake_sysroot.hpp"

#include <gtest/gtest.h>

#include <sys/file.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

using namespace mltune;

namespace {

struct Demo {
  std::string name;
  int n = 0;
};
void to_json(nlohmann::json &j, const Demo &d) {
  j = {{"name", d.name}, {"n", d.n}};
}
void from_json(const nlohmann::json &j, Demo &d) {
  d.name = j.at("name").get<std::string>();
  d.n = j.at("n").get<int>();
}

constexpr StateFile<Demo> k_demo("/run/mltune/demo.json", 2, false);

} // namespace

TEST(StateFile, AbsentAndEmptyAreNoState) {
  test::FakeSysroot f;
  auto r = k_demo.load(f.root());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->has_value());
  f.set("/run/mltune/demo.json", " \n");
  r = k_demo.load(f.root());
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_value());
  EXPECT_TRUE(k_demo.remove(f.root())); // removing is fine, absent or not
  EXPECT_TRUE(k_demo.remove(f.root()));
}

TEST(StateFile, RoundTripWithVersion) {
  test::FakeSysroot f;
  ASSERT_TRUE(k_demo.save(f.root(), Demo{"training", 3}));
  const std::string text = f.get("/run/mltune/demo.json");
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos) << text;
  auto r = k_demo.load(f.root());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->name, "training");
  EXPECT_EQ((*r)->n, 3);
  // No temp file is left beside it.
  EXPECT_EQ(f.root().list_dir("/run/mltune"), std::vector<std::string>{"demo.json"});
}

TEST(StateFile, UnversionedFileIsVersionOne) {
  test::FakeSysroot f;
  f.set("/run/mltune/demo.json", R"({"name": "old", "n": 1})");
  auto r = k_demo.load(f.root());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)->name, "old");
}

TEST(StateFile, CorruptOrNewerIsALoudError) {
  test::FakeSysroot f;
  for (const char *bad : {"{", "[1,2]", R"({"name": 5, "n": 1})", R"({"n": 1})"}) {
    f.set("/run/mltune/demo.json", bad);
    auto r = k_demo.load(f.root());
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("/run/mltune/demo.json: corrupt state file"), std::string::npos)
        << r.error().message;
  }
  f.set("/run/mltune/demo.json", R"({"version": 3, "name": "x", "n": 1})");
  auto r = k_demo.load(f.root());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("version 3 is newer"), std::string::npos) << r.error().message;
}

TEST(NodeBaseline, OneRecordPerDomainByName) {
  test::FakeSysroot f;
  auto b = detail::load_baseline(f.root());
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(b->empty());
  b->set("nic", nlohmann::json::array({{{"ifname", "eth0"}, {"key", "rx"}, {"value", "512"}}}));
  b->set("modules", nlohmann::json::array({"tcp_bbr"}));
  ASSERT_TRUE(detail::save_baseline(f.root(), *b));
  auto again = detail::load_baseline(f.root());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->record("modules"), nlohmann::json::array({"tcp_bbr"}));
  EXPECT_EQ(again->record("nic")[0]["value"], "512");
  EXPECT_TRUE(again->record("knobs").is_null());
  EXPECT_EQ(nlohmann::json::parse(f.get(k_baseline_file))["version"], 3);
  // An empty record removes its domain; no record left removes the file.
  again->set("nic", nlohmann::json::array());
  again->set("modules", nullptr);
  EXPECT_TRUE(again->empty());
  ASSERT_TRUE(detail::save_baseline(f.root(), *again));
  EXPECT_FALSE(f.root().exists(k_baseline_file));
}

TEST(NodeBaseline, VersionTwoLoadsAsTheKnobsRecordAndUnknownDomainsAreKept) {
  test::FakeSysroot f;
  f.set(k_baseline_file, R"({"version": 2, "active": "training",
    "baseline": [{"path": "/proc/sys/vm/swappiness", "value": "60"}],
    "nic": [], "modules": ["tcp_bbr"]})");
  auto b = detail::load_baseline(f.root());
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->record("knobs")["active"], "training");
  EXPECT_EQ(b->record("knobs")["values"][0]["value"], "60");
  EXPECT_FALSE(b->has("nic")); // an empty record is none
  EXPECT_EQ(b->record("modules"), nlohmann::json::array({"tcp_bbr"}));
  EXPECT_FALSE(b->has("active"));
  EXPECT_FALSE(b->has("baseline"));

  // A record of a domain this build does not know survives a save.
  f.set(k_baseline_file, R"({"version": 3, "hugepages": {"2M": [1, 2]}})");
  auto newer = detail::load_baseline(f.root());
  ASSERT_TRUE(newer) << newer.error().message;
  newer->set("modules", nlohmann::json::array({"tcp_bbr"}));
  ASSERT_TRUE(detail::save_baseline(f.root(), *newer));
  EXPECT_EQ(nlohmann::json::parse(f.get(k_baseline_file))["hugepages"]["2M"][1], 2);

  f.set(k_baseline_file, R"({"version": 4})");
  EXPECT_FALSE(detail::load_baseline(f.root()));
}

TEST(NodeBaseline, ARecordOfAnotherShapeIsAnErrorNamingTheDomain) {
  test::FakeSysroot f;
  f.set(k_baseline_file, R"({"version": 3, "modules": 5, "nic": ["eth0"]})");
  auto b = detail::load_baseline(f.root());
  ASSERT_TRUE(b) << b.error().message;
  auto modules = b->get<std::vector<std::string>>("modules");
  ASSERT_FALSE(modules);
  EXPECT_NE(modules.error().message.find("baseline.json: corrupt modules record"), std::string::npos)
      << modules.error().message;
  auto none = b->get<std::vector<std::string>>("knobs");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  b->put("modules", std::vector<std::string>{});
  EXPECT_FALSE(b->has("modules")); // an empty list is no record
}

TEST(FileLock, LocksBelowTheSysrootAndExcludesOthers) {
  test::FakeSysroot f;
  auto lock = FileLock::acquire(f.root(), "/run/mltune/test.lock");
  ASSERT_TRUE(lock) << lock.error().message;
  const auto path = f.dir() / "run/mltune/test.lock";
  ASSERT_TRUE(std::filesystem::exists(path));
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0); // held by `lock`
  {
    auto moved = std::move(*lock); // the lock moves with its owner
    EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  }
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0); // released with it
  ::close(fd);
}

TEST(FileLock, FailsLoudlyWhenTheLockCannotBeCreated) {
  test::FakeSysroot f;
  f.set("/run/mltune", "a file where the directory should be");
  auto lock = FileLock::acquire(f.root(), "/run/mltune/test.lock");
  ASSERT_FALSE(lock);
  EXPECT_NE(lock.error().sys_errno, 0);
  EXPECT_NE(lock.error().message.find("/run/mltune"), std::string::npos) << lock.error().message;
}

TEST(Cgroup, PartitionOnAFakeCgroupTree) {
  test::FakeSysroot f;
  f.set("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n");
  f.set("/sys/fs/cgroup/feed/cpuset.cpus.partition", "member\n");
  EXPECT_EQ(cgroup::path("/feed", "cpuset.cpus"), "/sys/fs/cgroup/feed/cpuset.cpus");
  EXPECT_EQ(cgroup::path("/"), "/sys/fs/cgroup");
  auto en = cgroup::enable_cpuset(f.root());
  ASSERT_TRUE(en) << en.error().message;
  EXPECT_TRUE(*en);
  EXPECT_EQ(f.get("/sys/fs/cgroup/cgroup.subtree_control"), "+cpuset");
  auto st = cgroup::set_partition(f.root(), "/feed", "isolated");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(*st, "isolated");
  EXPECT_TRUE(cgroup::is_valid(*st, "isolated"));
  EXPECT_FALSE(cgroup::is_valid("root invalid (Cpu list in cpuset.cpus not exclusive)", "root"));
  EXPECT_FALSE(cgroup::is_valid("member", "root"));
  ASSERT_TRUE(cgroup::clear_partition(f.root(), "/feed"));
  EXPECT_EQ(f.get("/sys/fs/cgroup/feed/cpuset.cpus.partition"), "member");
}

TEST(Cgroup, NoCgroupV2IsANamedError) {
  test::FakeSysroot f;
  std::filesystem::remove_all(f.dir() / "sys/fs/cgroup");
  auto en = cgroup::enable_cpuset(f.root());
  ASSERT_FALSE(en);
  EXPECT_NE(en.error().message.find("cgroup v2 is not mounted at /sys/fs/cgroup"), std::string::npos);
}
