// One allowlist, two matchers: the kernel module's (kmod/mltune_allow.c, built
// into this test as C) and the library's (lib/src/profile/allow.cpp) read the
// same trees and limits (kmod/include/mltune_knobs_allow.h) and must give the
// same verdict on every path and profile name.
#include "mltune/parse.hpp"
#include "mltune/profile.hpp"
#include "mltune_allow.h"
#include "profile/allow.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mltune;

namespace {

bool module_allows(const std::string &path) {
  unsigned char tree = 0;
  return mltune_path_check(path.data(), path.size(), &tree) == MLTUNE_PATH_OK;
}

bool module_name_ok(const std::string &name) {
  return mltune_name_ok(name.data(), name.size());
}

std::vector<std::string> path_corpus() {
  std::vector<std::string> c = {
      // allowed
      "/proc/sys/vm/swappiness",
      "/proc/sys/net/ipv4/tcp_rmem",
      "/proc/sys/kernel/numa_balancing",
      "/sys/kernel/mm/transparent_hugepage/enabled",
      "/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs",
      "/sys/devices/system/cpu/cpufreq/boost",
      "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
      "/sys/devices/system/cpu/cpu3/cpufreq/scaling_max_freq",
      "/sys/devices/system/cpu/cpu0/cpuidle/state2/disable",
      "/sys/devices/system/cpu/cpu5/power/energy_perf_bias",
      // refused: the rest of a CPU's power directory
      "/sys/devices/system/cpu/cpu5/power/control",
      "/sys/devices/system/cpu/cpu5/power/pm_qos_resume_latency_us",
      "/sys/devices/system/cpu/cpu5/power/energy_perf_bias/x",
      "/sys/devices/system/cpu/cpuidle/current_governor",
      "/sys/devices/virtual/workqueue/cpumask",
      "/sys/devices/virtual/workqueue/writeback/cpumask",
      "/sys/block/nvme0n1/queue/nr_requests",
      "/sys/block/sda/queue/iosched/fifo_batch",
      // refused: hardware offline, outside the trees
      "/sys/devices/system/cpu/cpu1/online",
      "/sys/devices/system/cpu/cpu0/online",
      "/sys/devices/system/cpu/smt/control",
      "/sys/devices/system/cpu/hotplug/states",
      "/sys/devices/system/memory/memory8/online",
      "/sys/devices/system/cpu/cpufreq",
      "/sys/devices/system/cpu/cpu1/cpufreq",
      "/sys/kernel/mm/ksm/run",
      "/sys/kernel/mm/ksm/pages_to_scan",
      "/sys/bus/workqueue/devices/writeback/cpumask",
      "/sys/bus/pci/drivers/nvme/unbind",
      "/sys/block/sda/device/delete",
      "/sys/block/sda/queue",
      "/sys/block/sda",
      "/sys/kernel/mltune/profile",
      "/sys/kernel/mm/transparent_hugepage",
      "/sys/power/state",
      "/proc/sysrq-trigger",
      "/proc/irq/default_smp_affinity",
      "/proc/irq/24/smp_affinity",
      "/proc/sys",
      "/proc/sys/",
      "/proc/",
      "/sys/",
      "/proc",
      "/sys",
      "",
      "/",
      "proc/sys/vm/swappiness",
      "sys/kernel/mm/transparent_hugepage/enabled",
      "/dev/mltune",
      "/etc/passwd",
      "/procx/sys/vm/swappiness",
      // refused: traversal and odd components
      "/proc/sys/../sysrq-trigger",
      "/proc/sys/vm/../../sysrq-trigger",
      "/proc/sys/./vm/swappiness",
      "/proc/sys//vm/swappiness",
      "/proc/sys/vm/swappiness/",
      "/proc//sys/vm/swappiness",
      "/sys/kernel/mm/transparent_hugepage/../ksm/run",
      "/sys/block/../devices/system/cpu/cpu1/online",
      "/sys/devices/system/cpu/cpu1/cpufreq/../online",
      "/sys/devices/system/cpu/cpu1/cpufreq/..",
      "/sys/block/sda/queue/.",
  };
  // Lengths around MLTUNE_PATH_MAX (with NUL): 255 bytes pass, 256 do not.
  for (const size_t len : {size_t{254}, size_t{255}, size_t{256}, size_t{257}, size_t{4096}}) {
    std::string p = "/proc/sys/vm/";
    p += std::string(len - p.size(), 'x');
    c.push_back(p);
    std::string q = "/sys/kernel/mm/transparent_hugepage/";
    q += std::string(len - q.size(), 'y');
    c.push_back(q);
  }
  return c;
}

std::vector<std::string> name_corpus() {
  std::vector<std::string> c = {
      "training", "inference", "base",  "a",       "0",        "my-profile", "my_profile",  "A9_-z",
      "",         "-lead",     "_lead", "none ok", "bad/name", "bad.name",   "caf\xc3\xa9", "x\n",
  };
  for (const size_t len : {size_t{30}, size_t{31}, size_t{32}, size_t{33}, size_t{64}, size_t{65}}) {
    c.emplace_back(len, 'n');
  }
  return c;
}

} // namespace

TEST(Allowlist, ModuleAndLibraryAgreeOnPaths) {
  for (const auto &p : path_corpus()) {
    EXPECT_EQ(module_allows(p), knob_path_allowed(p)) << "path '" << p << "' (" << p.size() << " bytes)";
  }
}

TEST(Allowlist, ModuleAndLibraryAgreeOnNames) {
  for (const auto &n : name_corpus()) {
    EXPECT_EQ(module_name_ok(n), profile_name_allowed(n)) << "name '" << n << "' (" << n.size() << " bytes)";
  }
}

// Knob bounds (at_least / at_most): the module's comparison and the library's.
TEST(Allowlist, ModuleAndLibraryCompareBoundsAlike) {
  const std::vector<std::string> nums = {"0",
                                         "-0",
                                         "1",
                                         "-1",
                                         "007",
                                         "10",
                                         "9",
                                         "2097152",
                                         "2097151",
                                         "-2097152",
                                         "9223372036854775807",
                                         "9223372036854775808",
                                         "18446744073709551615",
                                         "99999999999999999999999",
                                         "",
                                         "-",
                                         "+1",
                                         "1 2",
                                         "0x10",
                                         "1a",
                                         "--1"};
  for (const auto &a : nums) {
    for (const auto &b : nums) {
      int res = 7;
      const bool ok = mltune_int_cmp(a.data(), a.size(), b.data(), b.size(), &res);
      const auto lib = compare_decimal(a, b);
      ASSERT_EQ(ok, lib.has_value()) << "'" << a << "' vs '" << b << "'";
      if (ok) {
        EXPECT_EQ(res, *lib) << "'" << a << "' vs '" << b << "'";
      }
    }
  }
}

TEST(Allowlist, CpuOnlineIsRefusedByBoth) {
  for (const std::string p : {"/sys/devices/system/cpu/cpu1/online", "/sys/devices/system/cpu/cpu0/online"}) {
    EXPECT_FALSE(module_allows(p)) << p;
    EXPECT_FALSE(knob_path_allowed(p)) << p;
  }
}

TEST(Allowlist, ExpectedVerdicts) {
  for (const std::string p : {"/proc/sys/vm/swappiness", "/sys/kernel/mm/transparent_hugepage/defrag",
                              "/sys/block/sda/queue/nr_requests", "/sys/devices/virtual/workqueue/cpumask"}) {
    EXPECT_TRUE(module_allows(p)) << p;
  }
  for (const std::string p : {"/sys/kernel/mm/ksm/run", "/sys/bus/workqueue/devices/writeback/cpumask",
                              "/proc/sys/../sysrq-trigger", "/proc/irq/default_smp_affinity"}) {
    EXPECT_FALSE(module_allows(p)) << p;
  }
  EXPECT_TRUE(module_name_ok(std::string(MLTUNE_NAME_MAX - 1, 'a')));
  EXPECT_FALSE(module_name_ok(std::string(MLTUNE_NAME_MAX, 'a')));
}

// Every knob of every built-in profile is accepted by both matchers, and the
// profile names by both name checks.
TEST(Allowlist, BuiltinProfilesPassBoth) {
  const ProfileLoader loader;
  const auto names = loader.list();
  ASSERT_FALSE(names.empty());
  for (const auto &name : names) {
    EXPECT_TRUE(module_name_ok(name)) << name;
    auto p = loader.load(name);
    ASSERT_TRUE(p) << name << ": " << p.error().message;
    for (const auto &k : p->knobs) {
      EXPECT_TRUE(module_allows(k.path())) << name << ": " << k.path();
      EXPECT_TRUE(knob_path_allowed(k.path())) << name << ": " << k.path();
    }
  }
}

// The library refuses a profile that would write outside the trees.
TEST(Allowlist, LoaderRefusesCpuOnline) {
  auto p = ProfileLoader().load_text("[sysfs]\n\"devices/system/cpu/cpu1/online\" = { value = 0 }\n", "t.toml");
  ASSERT_FALSE(p);
  EXPECT_NE(std::string::npos, p.error().message.find("outside the allowed")) << p.error().message;
  auto q = ProfileLoader().load_text("[sysfs]\n\"kernel/mm/ksm/run\" = { value = 1 }\n", "t.toml");
  EXPECT_FALSE(q);
  auto r = ProfileLoader().load_text("[sysfs]\n\"block/sda/queue/nr_requests\" = { value = 256 }\n", "t.toml");
  EXPECT_TRUE(r) << r.error().message;
}
