// [cpu] and [block."GLOB"] (device_knobs.hpp): parsing with file:line
// errors, and expansion into the sysfs knobs of a fake node.
#include "mltune/device_knobs.hpp"

#include "fake_sysroot.hpp"
#include "mltune/compare.hpp"
#include "mltune/node.hpp"
#include "mltune/profile.hpp"
#include "mltune/switch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

std::map<std::string, std::string> knobs_of(const DeviceKnobs &dk) {
  std::map<std::string, std::string> m;
  for (const auto &k : dk.knobs) {
    m[k.key] = k.value;
  }
  return m;
}

} // namespace

TEST(DeviceKnobs, TrainingOnANodeWithCpufreqAndNvme) {
  const FakeSysroot fake;
  auto p = ProfileLoader().load("training");
  ASSERT_TRUE(p) << p.error().message;
  auto dk = expand_device_settings(*p, fake.root());
  ASSERT_TRUE(dk) << dk.error().message;
  const auto m = knobs_of(*dk);
  EXPECT_EQ(m.at("devices/system/cpu/cpufreq/policy0/scaling_governor"), "performance");
  EXPECT_EQ(m.at("devices/system/cpu/cpufreq/policy1/energy_performance_preference"), "performance");
  EXPECT_EQ(m.at("devices/system/cpu/cpu1/power/energy_perf_bias"), "0"); // "performance"
  EXPECT_EQ(m.at("block/nvme0n1/queue/scheduler"), "none");
  EXPECT_EQ(m.at("block/nvme0n1/queue/wbt_lat_usec"), "0");
  EXPECT_FALSE(m.contains("block/sda/queue/scheduler")); // "nvme*" only
  EXPECT_TRUE(dk->notes.empty()) << dk->notes.front();
  for (const auto &k : dk->knobs) {
    EXPECT_TRUE(k.if_present) << k.key; // skipped where the file goes away
    EXPECT_NE(k.origin.find("base.toml:"), std::string::npos) << k.origin;
  }
}

// idle_max_latency_us: every state that wakes slower than the bound is
// disabled, the others are left alone.
TEST(DeviceKnobs, InferenceDisablesDeepIdleStates) {
  const FakeSysroot fake;
  auto p = ProfileLoader().load("inference");
  ASSERT_TRUE(p);
  auto dk = expand_device_settings(*p, fake.root());
  ASSERT_TRUE(dk);
  const auto m = knobs_of(*dk);
  EXPECT_EQ(m.at("devices/system/cpu/cpu0/cpuidle/state2/disable"), "1");
  EXPECT_EQ(m.at("devices/system/cpu/cpu1/cpuidle/state2/disable"), "1");
  EXPECT_FALSE(m.contains("devices/system/cpu/cpu0/cpuidle/state1/disable"));
  EXPECT_FALSE(m.contains("devices/system/cpu/cpu0/cpuidle/state0/disable"));
}

// A node without the files (a VM without cpufreq, no NVMe): no knobs, a
// note per setting, never an error.
TEST(DeviceKnobs, MissingHardwareIsNoted) {
  const FakeSysroot fake;
  std::filesystem::remove_all(fake.root().path("/sys/devices/system/cpu/cpufreq"));
  std::filesystem::remove_all(fake.root().path("/sys/block/nvme0n1"));
  auto p = ProfileLoader().load("training");
  ASSERT_TRUE(p);
  std::vector<std::string> notes;
  auto node = profile_for_node(*p, fake.root(), &notes);
  ASSERT_TRUE(node);
  EXPECT_EQ(node->knobs.size(), p->knobs.size() + 2); // the two energy_perf_bias files
  ASSERT_EQ(notes.size(), 4U);
  EXPECT_NE(notes[0].find("[cpu] governor"), std::string::npos) << notes[0];
  EXPECT_NE(notes[2].find("[block.\"nvme*\"] scheduler"), std::string::npos) << notes[2];
}

// Switched with the direct backend: verify matches, the baseline restores
// every file.
TEST(DeviceKnobs, SwitchAndBaseline) {
  const FakeSysroot fake;
  const auto before = fake.snapshot();
  auto p = ProfileLoader().load("inference");
  ASSERT_TRUE(p);
  auto node = profile_for_node(*p, fake.root());
  ASSERT_TRUE(node);
  ASSERT_TRUE(switch_direct(*node, fake.root()));
  EXPECT_EQ(fake.get("/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"), "performance");
  EXPECT_EQ(fake.get("/sys/devices/system/cpu/cpu0/cpuidle/state2/disable"), "1");
  EXPECT_EQ(fake.get("/sys/block/nvme0n1/queue/wbt_lat_usec"), "0");
  const auto st = compare(*node, fake.root());
  EXPECT_TRUE(std::ranges::none_of(st, [](const KnobStatus &s) { return s.counts(); }));
  ASSERT_TRUE(restore_baseline_direct(fake.root()));
  EXPECT_EQ(fake.snapshot(), before);
}

// The kernel reads energy_perf_bias and a HWP/CPPC
// energy_performance_preference on the CPU itself (an IPI): verify leaves
// them unread on feeder cores and boot-isolated CPUs and says so; the
// switch and a plain compare() read every one.
TEST(DeviceKnobs, VerifySparesFeederAndIsolatedCpus) {
  const FakeSysroot fake;
  auto p = ProfileLoader().load("inference");
  ASSERT_TRUE(p);
  auto node = profile_for_node(*p, fake.root());
  ASSERT_TRUE(node);
  for (const auto &k : node->knobs) {
    SCOPED_TRACE(k.key);
    const bool msr = k.key.ends_with("/energy_perf_bias") || k.key.ends_with("/energy_performance_preference");
    EXPECT_EQ(k.read_on_cpu >= 0, msr);
  }
  ASSERT_TRUE(switch_direct(*node, fake.root()));
  fake.set("/sys/kernel/mltune/feeder/cpus", "1\n");
  fake.set("/sys/devices/system/cpu/cpu1/power/energy_perf_bias", "6"); // drift on the feeder core: not read
  fake.set("/sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference", "power");
  auto c = check_node(*p, fake.root());
  ASSERT_TRUE(c) << c.error().message;
  const auto knobs =
      std::find_if(c->domains.begin(), c->domains.end(), [](const auto &d) { return d.domain == "knobs"; });
  ASSERT_NE(knobs, c->domains.end());
  EXPECT_EQ(knobs->state, "match");
  EXPECT_EQ(knobs->checked, node->knobs.size() - 2);
  EXPECT_EQ(knobs->note, "2 knob(s) not read on feeder or isolated CPUs 1 (energy_perf_bias, "
                         "energy_performance_preference: reading them interrupts the CPU)");
  EXPECT_TRUE(
      std::none_of(c->differences.begin(), c->differences.end(), [](const auto &d) { return d.domain == "knobs"; }));
  // Without CPUs to spare, all are read: the drift shows.
  const auto all = compare(*node, fake.root());
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const KnobStatus &s) { return s.counts(); }), 2);
  // A CPU isolated at boot is spared too; a drift elsewhere still shows.
  fake.set("/sys/kernel/mltune/feeder/cpus", "\n");
  fake.set("/sys/devices/system/cpu/nohz_full", "1\n");
  fake.set("/sys/devices/system/cpu/cpu0/power/energy_perf_bias", "6");
  c = check_node(*p, fake.root());
  ASSERT_TRUE(c);
  std::vector<std::string> differs;
  for (const auto &d : c->differences) {
    if (d.domain == "knobs") {
      differs.push_back(d.key);
    }
  }
  EXPECT_EQ(differs, std::vector<std::string>{"devices/system/cpu/cpu0/power/energy_perf_bias"});
}

TEST(DeviceKnobs, BadInputNamesFileAndLine) {
  const std::pair<const char *, const char *> bad[] = {
      {"[cpu]\ngovernor = \"Perf ormance\"\n", "t.toml:2: [cpu] governor must be a governor's name"},
      {"[cpu]\nturbo = true\n", "t.toml:2: [cpu] unknown [cpu] key 'turbo'"},
      {"[cpu]\nenergy_perf_bias = 16\n", "t.toml:2: [cpu] energy_perf_bias must be an integer from 0 to 15"},
      {"[cpu]\nboost = \"yes\"\n", "t.toml:2: [cpu] boost must be true or false"},
      {"[cpu]\nidle_max_latency_us = -1\n", "t.toml:2: [cpu] idle_max_latency_us must be an integer from 0"},
      {"[block.\"nvme*\"]\nnr_requests = 2\n", "t.toml:2: [block.\"nvme*\"] nr_requests must be an integer from 4"},
      {"[block.\"nvme*\"]\nelevator = \"none\"\n", "t.toml:2: [block.\"nvme*\"] unknown [block] key 'elevator'"},
      {"[block.\"a/b\"]\nscheduler = \"none\"\n", "t.toml:1: invalid disk glob 'a/b'"},
      {"cpu = 3\n", "t.toml:1: [cpu] must be a table"},
  };
  for (const auto &[text, want] : bad) {
    SCOPED_TRACE(text);
    auto p = ProfileLoader().load_text(text, "t.toml");
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().kind, Errc::input);
    EXPECT_EQ(p.error().message.rfind(want, 0), 0U) << p.error().message;
  }
}
