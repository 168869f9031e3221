#include "mltune/boot.hpp"

#include "cli.hpp"
#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace mltune;
using mltune::test::FixtureCopy;

namespace {

struct Out {
  int rc;
  std::string out, err;
};

Out run(const std::filesystem::path &root, std::vector<std::string> args) {
  args.insert(args.begin(), {"--sysroot", root.string()});
  std::ostringstream o;
  std::ostringstream e;
  const int rc = cli::run(args, o, e);
  return {rc, o.str(), e.str()};
}

std::string guest_fragment() {
  return "isolcpus=managed_irq,domain,6-7 nohz_full=6-7 rcu_nocbs=6-7 "
         "irqaffinity=0-1,4-5 skew_tick=1 nosoftlockup transparent_hugepage=madvise "
         "numa_balancing=disable";
}

} // namespace

TEST(Boot, ShowForTrainingOnTheGuestLayout) {
  const auto root = mltune::test::fixture_dir("guest-q35");
  auto r = run(root, {"boot", "show", "--profile", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, guest_fragment() + "\n");
  r = run(root, {"--json", "boot", "show", "--profile", "training"});
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fragment"], guest_fragment());
  EXPECT_EQ(j["params"][0]["key"], "isolcpus");
  EXPECT_FALSE(j["params"][0]["reason"].get<std::string>().empty());
}

TEST(Boot, InferenceAddsCStateLimitsByCpuVendor) {
  auto r = run(mltune::test::fixture_dir("hgx-2s-8gpu"), {"boot", "show", "--profile", "inference"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("intel_idle.max_cstate=1 processor.max_cstate=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nohz_full=2-9,50-57,98-105,146-153"), std::string::npos) << r.out;
  r = run(mltune::test::fixture_dir("epyc-nps4-4gpu"), {"boot", "show", "--profile", "inference"});
  EXPECT_EQ(r.out.find("intel_idle"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("processor.max_cstate=1"), std::string::npos) << r.out;
  r = run(mltune::test::fixture_dir("hgx-2s-8gpu"), {"boot", "show", "--profile", "training"});
  EXPECT_EQ(r.out.find("max_cstate"), std::string::npos) << r.out;
}

TEST(Boot, EmptyPlanIsolatesNothing) {
  auto r = run(mltune::test::fixture_dir("vm-2cpu"), {"boot", "show", "--profile", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "transparent_hugepage=madvise numa_balancing=disable\n");
  EXPECT_NE(r.err.find("no CPU isolation: no GPU found"), std::string::npos) << r.err;
}

TEST(Boot, IsolateSpecFromThePlan) {
  const auto root = mltune::test::fixture_dir("hgx-2s-8gpu");
  auto r = run(root, {"boot", "show", "--profile", "training", "--isolate", "feeder:0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("nohz_full=2-3,98-99 "), std::string::npos) << r.out;
  r = run(root, {"boot", "show", "--profile", "training", "--isolate", "0-3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cannot isolate CPU 0"), std::string::npos) << r.err;
  r = run(root, {"boot", "show", "--profile", "training", "--isolate", "bogus"});
  EXPECT_EQ(r.rc, 2);
}

TEST(Boot, VerifyShowsADiffAndPassesWhenBooted) {
  FixtureCopy f("guest-q35");
  auto r = run(f.dir(), {"boot", "verify", "--profile", "training"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("boot parameters differ from the plan (10):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  nohz_full:\n    - expected: nohz_full=6-7\n    + running:  (absent)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  /sys/devices/system/cpu/isolated:\n    - expected: 6-7\n"), std::string::npos) << r.out;

  // Booted with the fragment (CPU lists may be written differently).
  f.set("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda ro nosoftlockup skew_tick=1 "
                         "isolcpus=domain,managed_irq,6,7 nohz_full=6-7 rcu_nocbs=6-7 irqaffinity=0,1,4,5 "
                         "transparent_hugepage=madvise numa_balancing=disable quiet\n");
  f.set("/sys/devices/system/cpu/isolated", "6-7\n");
  f.set("/sys/devices/system/cpu/nohz_full", "6-7\n");
  r = run(f.dir(), {"boot", "verify", "--profile", "training"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("boot parameters match the plan"), std::string::npos);

  // The kernel ignored nohz_full (e.g. CONFIG_NO_HZ_FULL off).
  f.set("/sys/devices/system/cpu/nohz_full", "(null)\n");
  r = run(f.dir(), {"--json", "boot", "verify", "--profile", "training"});
  EXPECT_EQ(r.rc, 1);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["differences"].size(), 1U);
  EXPECT_EQ(j["differences"][0]["what"], "/sys/devices/system/cpu/nohz_full");
  EXPECT_EQ(j["differences"][0]["actual"], "");

  // Unexpected managed parameter.
  f.set("/sys/devices/system/cpu/nohz_full", "6-7\n");
  f.set("/proc/cmdline", "isolcpus=managed_irq,domain,6-7 nohz_full=6-7 rcu_nocbs=6-7 irqaffinity=0-1,4-5 "
                         "skew_tick=1 nosoftlockup transparent_hugepage=madvise numa_balancing=disable "
                         "processor.max_cstate=1\n");
  r = run(f.dir(), {"boot", "verify", "--profile", "training"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("processor.max_cstate:\n    - expected: (absent)\n    + running:  processor.max_cstate=1"),
            std::string::npos)
      << r.out;
}

TEST(Boot, ApplyAndRemoveTheGrubDropin) {
  FixtureCopy f("guest-q35");
  auto r = run(f.dir(), {"--dry-run", "boot", "apply", "--profile", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(f.root().exists(k_grub_dropin));
  EXPECT_NE(r.out.find("GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} " + guest_fragment() + "\""),
            std::string::npos);
  r = run(f.dir(), {"boot", "apply", "--profile", "training"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("run 'update-grub'"), std::string::npos);
  EXPECT_NE(r.out.find("a reboot is pending"), std::string::npos);
  const std::string content = f.root().read(k_grub_dropin).value();
  EXPECT_NE(content.find(guest_fragment()), std::string::npos);
  r = run(f.dir(), {"boot", "apply", "--profile", "training"});
  EXPECT_NE(r.out.find("unchanged"), std::string::npos);
  r = run(f.dir(), {"boot", "remove"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_FALSE(f.root().exists(k_grub_dropin));
  EXPECT_NE(r.out.find("removed /etc/default/grub.d/mltune.cfg"), std::string::npos);
  r = run(f.dir(), {"boot", "remove"});
  EXPECT_NE(r.out.find("nothing to remove"), std::string::npos);
}

TEST(Boot, ParamsApi) {
  const Topology t = discover_topology(mltune::test::fixture("guest-q35")).value();
  const CpuPlan p = make_cpu_plan(t).value();
  BootOptions o;
  auto params = boot_params(t, p, o).value();
  EXPECT_EQ(boot_fragment(params), "isolcpus=managed_irq,domain,6-7 nohz_full=6-7 rcu_nocbs=6-7 "
                                   "irqaffinity=0-1,4-5 skew_tick=1 nosoftlockup");
  for (const auto &bp : params) {
    EXPECT_FALSE(bp.reason.empty()) << bp.key;
  }
}
