#include "fake_sysroot.hpp"

#include "mltune/audit.hpp"
#include "mltune/compare.hpp"
#include "mltune/feeder.hpp"
#include "mltune/node_info.hpp"
#include "mltune/switch.hpp"

#include <filesystem>
#include <gtest/gtest.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

const Finding &find(const std::vector<Finding> &fs, const std::string &id) {
  static const Finding none{"<none>", "", Severity::ok, "", "", "", ""};
  for (const auto &f : fs) {
    if (f.id == id) {
      return f;
    }
  }
  return none;
}

class Audit : public ::testing::Test {
protected:
  FakeSysroot fake;
  Sysroot root = fake.root();
  Profile training = *ProfileLoader().load("training");
};

} // namespace

TEST_F(Audit, StockNodeFindings) {
  const auto fs = audit(training, root);
  EXPECT_EQ(worst(fs), Severity::warning);
  const auto &sw = find(fs, "sysctl:vm.swappiness");
  EXPECT_EQ(sw.severity, Severity::warning);
  EXPECT_EQ(sw.current, "60");
  EXPECT_EQ(sw.recommended, "1");
  EXPECT_NE(sw.fix.find("sysctl -w vm.swappiness='1'"), std::string::npos);
  EXPECT_FALSE(sw.impact.empty());
  EXPECT_EQ(find(fs, "sysfs:kernel/mm/transparent_hugepage/enabled").current, "always");
  EXPECT_EQ(find(fs, "sysctl:kernel.numa_balancing").severity, Severity::warning);
  const auto &gov = find(fs, "cpu:governor");
  EXPECT_EQ(gov.severity, Severity::warning);
  EXPECT_EQ(gov.current, "powersave on 2/2 CPUs");
  EXPECT_EQ(find(fs, "cpu:energy_perf_bias").current, "6 on 2/2 CPUs");
  EXPECT_EQ(find(fs, "memory:swap").current, "no swap");
  EXPECT_EQ(find(fs, "memory:swap").severity, Severity::ok);
  EXPECT_EQ(find(fs, "limits:memlock:configured").severity, Severity::warning);
  // The fix names what sets the limit, not a command that does not write it.
  EXPECT_EQ(find(fs, "limits:memlock:configured").fix,
            "add '* - memlock unlimited' to a file in /etc/security/limits.d/ (new login sessions); services and job "
            "daemons need LimitMEMLOCK=infinity in their unit");
  EXPECT_EQ(find(fs, "limits:memlock:effective").current, "soft 8388608, hard 8388608");
  EXPECT_EQ(find(fs, "limits:nofile:effective").severity, Severity::warning);
  EXPECT_EQ(find(fs, "kernel:version").current, "6.1.0-27-amd64");
  EXPECT_EQ(find(fs, "kernel:version").severity, Severity::ok);
  EXPECT_EQ(find(fs, "irq:irqbalance").current, "running");
  EXPECT_EQ(find(fs, "gpu:persistence_mode").id, "<none>"); // no nvidia-smi
}

TEST_F(Audit, TunedNodeIsClean) {
  ASSERT_TRUE(switch_direct(training, root));
  for (const auto *cpu : {"cpu0", "cpu1"}) {
    fake.set(std::string("/sys/devices/system/cpu/") + cpu + "/cpufreq/scaling_governor", "performance");
    fake.set(std::string("/sys/devices/system/cpu/") + cpu + "/power/energy_perf_bias", "0");
  }
  fake.set("/etc/security/limits.d/90-mltune.conf", "* - memlock unlimited\n* - nofile 1048576\n");
  fake.set("/proc/self/limits", "Max open files            1048576              1048576              files\n"
                                "Max locked memory         unlimited            unlimited            bytes\n");
  fake.set("/etc/default/irqbalance", "IRQBALANCE_BANNED_CPULIST=8-15\n");
  fake.set("/proc/swaps", "Filename Type Size Used Priority\n/dev/sda2 partition 1048572 0 -2\n");
  const auto fs = audit(training, root);
  for (const auto &f : fs) {
    EXPECT_LE(f.severity, Severity::info) << f.id << ": " << f.current;
  }
  EXPECT_EQ(find(fs, "memory:swap").current, "1 device(s), 1023 MiB");
  EXPECT_EQ(find(fs, "memory:swap").severity, Severity::info);
  EXPECT_EQ(find(fs, "limits:memlock:configured").current, "soft unlimited, hard unlimited");
}

TEST_F(Audit, MissingCpufreqOldKernelAndGpu) {
  std::filesystem::remove_all(root.path("/sys/devices/system/cpu/cpu0/cpufreq"));
  std::filesystem::remove_all(root.path("/sys/devices/system/cpu/cpu1/cpufreq"));
  fake.set("/proc/sys/kernel/osrelease", "5.10.0-30-amd64");
  // Answers the main --query-gpu only; the optional queries fail as on old drivers.
  fake.set("/usr/bin/nvidia-smi", "#!/bin/sh\ncase $1 in --query-gpu=pci.bus_id,persistence_mode,*)\n"
                                  "echo '00000000:18:00.0, Enabled, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], "
                                  "[N/A], [N/A]'\n"
                                  "echo '00000000:2A:00.0, Disabled, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], "
                                  "[N/A], [N/A]' ;;\n*) exit 1 ;; esac\n");
  std::filesystem::permissions(root.path("/usr/bin/nvidia-smi"), std::filesystem::perms::owner_all);
  const auto fs = audit(training, root);
  EXPECT_EQ(find(fs, "cpu:governor").severity, Severity::info);
  EXPECT_EQ(find(fs, "kernel:version").severity, Severity::warning);
  const auto &gpu = find(fs, "gpu:persistence_mode");
  EXPECT_EQ(gpu.current, "Enabled on 1/2 GPUs (off: 0000:2a:00.0)");
  EXPECT_EQ(gpu.severity, Severity::warning);
  AuditOptions no_smi;
  no_smi.run_nvidia_smi = false;
  EXPECT_EQ(find(audit(training, root, no_smi), "gpu:persistence_mode").id, "<none>");
}

// energy_perf_bias is read on the CPU itself (an IPI): feeder cores and
// isolated CPUs are left out, and the finding says how many.
TEST_F(Audit, EnergyPerfBiasLeavesFeederAndIsolatedCpusAlone) {
  fake.set("/sys/devices/system/cpu/cpu0/power/energy_perf_bias", "0");
  fake.set("/sys/devices/system/cpu/cpu1/power/energy_perf_bias", "6"); // would warn if read
  fake.set("/sys/kernel/mltune/feeder/cpus", "1\n");
  auto e = find(audit(training, root), "cpu:energy_perf_bias");
  EXPECT_EQ(e.current, "0 on 1/1 CPUs (1 feeder or isolated CPUs not read: reading it interrupts the CPU)");
  EXPECT_EQ(e.severity, Severity::ok);

  fake.set("/sys/kernel/mltune/feeder/cpus", "\n");
  fake.set("/sys/devices/system/cpu/nohz_full", "0-1\n");
  e = find(audit(training, root), "cpu:energy_perf_bias");
  EXPECT_EQ(e.current, "not read (2 feeder or isolated CPUs not read: reading it interrupts the CPU)");
  EXPECT_EQ(e.severity, Severity::info);

  fake.set("/sys/devices/system/cpu/nohz_full", "(null)\n");
  fake.set(k_feeder_state, R"({"active": true, "mechanism": "cpuset", "cpus": "0", "housekeeping": "1"})");
  e = find(audit(training, root), "cpu:energy_perf_bias");
  EXPECT_EQ(e.current, "6 on 1/1 CPUs (1 feeder or isolated CPUs not read: reading it interrupts the CPU)");
  EXPECT_EQ(e.severity, Severity::warning);
}

// A node without cpufreq policies has no governor to read (one directory
// read, not a file per CPU); energy_perf_bias is on every online CPU or
// none, so the first online CPU without it ends the search, and an offline
// CPU (which never has it) does not.
TEST_F(Audit, CpuFindingsReadOnlyWhatCanExist) {
  std::filesystem::remove_all(root.path("/sys/devices/system/cpu/cpufreq"));
  auto fs = audit(training, root);
  EXPECT_EQ(find(fs, "cpu:governor").current, "no cpufreq (firmware or hypervisor controls frequency)");

  fake.set("/sys/devices/system/cpu/online", "1\n");
  std::filesystem::remove(root.path("/sys/devices/system/cpu/cpu0/power/energy_perf_bias"));
  EXPECT_EQ(find(audit(training, root), "cpu:energy_perf_bias").current, "6 on 1/1 CPUs");

  fake.set("/sys/devices/system/cpu/online", "0-1\n");
  const auto after = audit(training, root);
  const auto &e = find(after, "cpu:energy_perf_bias");
  EXPECT_EQ(e.current, "not exposed");
  EXPECT_EQ(e.severity, Severity::info);
}

TEST_F(Audit, CustomProfileStillChecksThpAndNuma) {
  auto p = ProfileLoader().load_text("[sysctl]\n\"vm.swappiness\" = { value = 60 }\n", "c.toml");
  ASSERT_TRUE(p);
  const auto fs = audit(*p, root);
  EXPECT_EQ(find(fs, "sysfs:kernel/mm/transparent_hugepage/enabled").current, "always");
  EXPECT_EQ(find(fs, "sysctl:kernel.numa_balancing").current, "1");
}

TEST(Irqbalance, FoundByScanWhereInstalled) {
  FakeSysroot fake; // /proc/812/comm is irqbalance, /usr/sbin/irqbalance exists
  EXPECT_EQ(irqbalance_pid(fake.root()), 812);
}

TEST(Irqbalance, SystemdCgroupFirst) {
  FakeSysroot fake;
  fake.set("/proc/4242/comm", "irqbalance\n");
  fake.set("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "4242\n");
  EXPECT_EQ(irqbalance_pid(fake.root()), 4242);
}

TEST(Irqbalance, StaleCgroupPidIsNotTrusted) {
  FakeSysroot fake;
  fake.set("/proc/4242/comm", "bash\n");
  fake.set("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "4242\n");
  EXPECT_EQ(irqbalance_pid(fake.root()), 812); // falls back to the scan
}

TEST(Irqbalance, NotInstalledMeansNotRunning) {
  FakeSysroot fake;
  std::filesystem::remove(fake.dir() / "usr/sbin/irqbalance");
  EXPECT_EQ(irqbalance_pid(fake.root()), 0);
}

TEST(Irqbalance, MalformedCgroupPidsAreSkipped) {
  FakeSysroot fake;
  fake.set("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "99999999999\n-1\nabc\n\n");
  EXPECT_EQ(irqbalance_pid(fake.root()), 812); // falls back to the scan, no exception
}
