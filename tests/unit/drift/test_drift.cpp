// Drift attribution without a kernel: the watcher's records (bpf/mltune_drift.h)
// as DriftWrite (paths by file system, operations, old values, times), the
// last writer of a setting (an IRQ's two affinity files are one setting), the
// text verify prints, and the CLI on a node without the watcher.
#include "fake_sysroot.hpp"

#include "cli.hpp"
#include "drift/raw.hpp"
#include "mltune/drift.hpp"

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

constexpr unsigned k_proc = 0x9fa0;
constexpr unsigned k_sysfs = 0x62656572;
constexpr unsigned k_cgroup2 = 0x63677270;

// A record of `comm` (pid) writing `value` to the file whose path
// components (root first) are `parts`.
mltune_drift_rec rec(unsigned magic, std::vector<std::string> parts, const char *comm, unsigned pid, const char *value,
                     unsigned op, unsigned long long seq) {
  mltune_drift_rec r{};
  r.magic = magic;
  r.op = op;
  r.seq = seq;
  r.pid = pid;
  r.tgid = pid;
  r.depth = static_cast<unsigned>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) { // leaf first
    std::strncpy(r.path[i], parts[parts.size() - 1 - i].c_str(), MLTUNE_DRIFT_NAME_LEN - 1);
  }
  std::strncpy(r.comm, comm, sizeof r.comm - 1);
  std::strncpy(r.new_value, value, sizeof r.new_value - 1);
  r.boot_ns = 5000000000ULL;
  return r;
}

const mltune_drift_key k_file{MLTUNE_DRIFT_FILE, 3, 1234};

class UtcTime : public ::testing::Test {
protected:
  void SetUp() override {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};

} // namespace

TEST_F(UtcTime, RecordsBecomeWrites) {
  auto r = rec(k_proc, {"sys", "vm", "swappiness"}, "mlt-writer", 812, "60\n", MLTUNE_DRIFT_OP_SYSCTL, 7);
  std::strncpy(r.old_value, "1", sizeof r.old_value - 1);
  r.flags = MLTUNE_DRIFT_F_OLD;
  // boot time 5 s + offset 1795600928 s = 2026-11-25 10:02:13 UTC
  const DriftWrite w = drift_write_of(k_file, r, 1795600928LL * 1000000000LL, {});
  EXPECT_EQ(w.op, "sysctl");
  EXPECT_EQ(w.path, "/proc/sys/vm/swappiness");
  EXPECT_EQ(w.comm, "mlt-writer");
  EXPECT_EQ(w.tgid, 812);
  EXPECT_EQ(w.new_value, "60");
  ASSERT_TRUE(w.old_value);
  EXPECT_EQ(*w.old_value, "1");
  EXPECT_EQ(w.time, "2026-11-25 10:02:13");
  EXPECT_EQ(describe(w), "mlt-writer (pid 812) wrote '60' (was '1') at 2026-11-25 10:02:13");

  const auto s = drift_write_of(k_file,
                                rec(k_sysfs, {"kernel", "mm", "transparent_hugepage", "defrag"}, "tuned", 40, "always",
                                    MLTUNE_DRIFT_OP_KERNFS, 8),
                                0, {{77, "/system.slice/tuned.service"}});
  EXPECT_EQ(s.op, "sysfs");
  EXPECT_EQ(s.path, "/sys/kernel/mm/transparent_hugepage/defrag");
  EXPECT_FALSE(s.old_value);
  auto cg = rec(k_cgroup2, {"mltune-feeder", "cpuset.cpus"}, "bash", 41, "0-7", MLTUNE_DRIFT_OP_KERNFS, 9);
  cg.cgid = 77;
  const auto c = drift_write_of(k_file, cg, 0, {{77, "/system.slice/tuned.service"}});
  EXPECT_EQ(c.op, "cgroup");
  EXPECT_EQ(c.path, "/sys/fs/cgroup/mltune-feeder/cpuset.cpus");
  EXPECT_EQ(c.cgroup, "/system.slice/tuned.service");
  EXPECT_NE(describe(c).find("cgroup /system.slice/tuned.service"), std::string::npos);

  auto deep = rec(k_sysfs, {"a", "b"}, "x", 1, "1", MLTUNE_DRIFT_OP_KERNFS, 1);
  deep.flags = MLTUNE_DRIFT_F_DEEP | MLTUNE_DRIFT_F_KERNEL | MLTUNE_DRIFT_F_TRUNC;
  const auto d = drift_write_of(k_file, deep, 0, {});
  EXPECT_EQ(d.path, "/sys/.../a/b");
  EXPECT_TRUE(d.kernel);
  EXPECT_TRUE(d.truncated);
  EXPECT_NE(describe(d).find("from the kernel wrote '1...'"), std::string::npos);

  const mltune_drift_key sk{MLTUNE_DRIFT_SCHED, 0, 4321};
  auto sr = rec(0, {}, "chrt", 50, "policy=1 prio=5", MLTUNE_DRIFT_OP_SETSCHEDULER, 10);
  sr.target = 4321;
  const auto sw = drift_write_of(sk, sr, 0, {});
  EXPECT_EQ(sw.op, "sched_setscheduler");
  EXPECT_TRUE(sw.path.empty());
  EXPECT_EQ(sw.target, 4321);
  EXPECT_NE(describe(sw).find("on thread 4321"), std::string::npos);
}

TEST(DriftLog, LastWriterOfASetting) {
  std::vector<DriftWrite> ws;
  const auto add = [&ws](const char *comm, unsigned pid, std::vector<std::string> parts, unsigned long long seq,
                         unsigned op = MLTUNE_DRIFT_OP_SYSCTL) {
    ws.push_back(drift_write_of(k_file, rec(k_proc, std::move(parts), comm, pid, "v", op, seq), 0, {}));
  };
  add("first", 1, {"sys", "vm", "swappiness"}, 1);
  add("second", 2, {"sys", "vm", "swappiness"}, 5);
  add("older", 3, {"sys", "vm", "max_map_count"}, 2);
  add("irqbalance", 4, {"irq", "25", "smp_affinity"}, 3, MLTUNE_DRIFT_OP_IRQ_AFFINITY);
  add("planted", 5, {"irq", "25", "smp_affinity_list"}, 6, MLTUNE_DRIFT_OP_IRQ_AFFINITY);
  add("other-irq", 6, {"irq", "26", "smp_affinity_list"}, 7, MLTUNE_DRIFT_OP_IRQ_AFFINITY);
  auto sched = rec(0, {}, "chrt", 9, "policy=1", MLTUNE_DRIFT_OP_SETATTR, 8);
  sched.target = 700;
  ws.push_back(drift_write_of({MLTUNE_DRIFT_SCHED, 0, 700}, sched, 0, {}));
  const DriftLog log(ws);
  EXPECT_EQ(log.writes().front().seq, 8U); // newest first
  EXPECT_EQ(log.last_write("/proc/sys/vm/swappiness")->comm, "second");
  EXPECT_EQ(log.last_write("/proc/sys/vm/max_map_count")->comm, "older");
  EXPECT_FALSE(log.last_write("/proc/sys/vm/dirty_ratio"));
  // smp_affinity and smp_affinity_list are one setting, either way round
  EXPECT_EQ(log.last_write("/proc/irq/25/smp_affinity")->comm, "planted");
  EXPECT_EQ(log.last_write("/proc/irq/25/smp_affinity_list")->comm, "planted");
  EXPECT_EQ(log.last_write("/proc/irq/26/smp_affinity")->comm, "other-irq");
  EXPECT_EQ(log.last_sched(700)->comm, "chrt");
  EXPECT_FALSE(log.last_sched(701));
}

TEST(DriftCli, WithoutTheWatcher) {
  FakeSysroot fake;
  auto run = [&fake](std::vector<std::string> args) {
    args.insert(args.begin(), {"--sysroot", fake.dir().string()});
    std::ostringstream o;
    std::ostringstream e;
    const int rc = cli::run(args, o, e);
    return std::tuple{rc, o.str(), e.str()};
  };
  auto [rc, out, err] = run({"--json", "drift", "status"});
  ASSERT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_FALSE(j["running"].get<bool>());
  EXPECT_EQ(j["built"].get<bool>(), drift_built());
  std::tie(rc, out, err) = run({"drift", "show"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("not running"), std::string::npos);
  std::tie(rc, out, err) = run({"drift", "start"});
  EXPECT_NE(rc, 0); // never on a --sysroot
  std::tie(rc, out, err) = run({"drift"});
  EXPECT_EQ(rc, 2);
  // verify reports every difference with a changed_by field (null: no record).
  std::tie(rc, out, err) = run({"--json", "verify", "training"});
  EXPECT_EQ(rc, 1) << err;
  j = nlohmann::json::parse(out);
  ASSERT_FALSE(j["differences"].empty());
  for (const auto &d : j["differences"]) {
    EXPECT_TRUE(d.contains("changed_by"));
    EXPECT_TRUE(d["changed_by"].is_null());
  }
}
