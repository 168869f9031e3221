#include "fake_sysroot.hpp"

#include "mltune/profile.hpp"
#include "mltune/switch.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mltune::test {

namespace fs = std::filesystem;

namespace {

// Stock values of a Debian 6.1 kernel (as read from the files).
constexpr std::pair<std::string_view, std::string_view> k_defaults[] = {
    {"/proc/sys/vm/swappiness", "60"},
    {"/proc/sys/vm/overcommit_memory", "0"},
    {"/proc/sys/vm/dirty_ratio", "20"},
    {"/proc/sys/vm/dirty_background_ratio", "10"},
    {"/proc/sys/vm/zone_reclaim_mode", "0"},
    {"/proc/sys/vm/max_map_count", "65530"},
    {"/proc/sys/vm/stat_interval", "1"},
    {"/proc/sys/kernel/numa_balancing", "1"},
    {"/proc/sys/kernel/sched_autogroup_enabled", "1"},
    {"/proc/sys/kernel/osrelease", "6.1.0-27-amd64"},
    {"/proc/sys/net/core/rmem_max", "212992"},
    {"/proc/sys/net/core/wmem_max", "212992"},
    {"/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456"},
    {"/proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t4194304"},
    {"/proc/sys/net/core/netdev_max_backlog", "1000"},
    {"/proc/sys/net/core/somaxconn", "4096"},
    {"/proc/sys/net/ipv4/tcp_max_syn_backlog", "512"},
    {"/proc/sys/net/ipv4/tcp_congestion_control", "cubic"},
    {"/proc/sys/net/ipv4/tcp_slow_start_after_idle", "1"},
    {"/proc/sys/net/ipv4/tcp_fastopen", "1"},
    {"/proc/sys/net/core/busy_poll", "0"},
    {"/proc/sys/net/core/busy_read", "0"},
    {"/proc/sys/fs/file-max", "9223372036854775807"},
    {"/proc/sys/fs/inotify/max_user_watches", "122880"},
    {"/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never"},
    {"/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never"},
    {"/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs", "10000"},
    {"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave"},
    {"/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave"},
    {"/sys/devices/system/cpu/cpu0/power/energy_perf_bias", "6"},
    {"/sys/devices/system/cpu/cpu1/power/energy_perf_bias", "6"},
    // cpufreq policies (intel_pstate), cpuidle states (intel_idle), disks
    {"/sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "powersave"},
    {"/sys/devices/system/cpu/cpufreq/policy1/scaling_governor", "powersave"},
    {"/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference", "balance_performance"},
    {"/sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference", "balance_performance"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state0/latency", "0"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state0/disable", "0"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state1/latency", "2"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state1/disable", "0"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state2/latency", "170"},
    {"/sys/devices/system/cpu/cpu0/cpuidle/state2/disable", "0"},
    {"/sys/devices/system/cpu/cpu1/cpuidle/state2/latency", "170"},
    {"/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "0"},
    {"/sys/block/nvme0n1/queue/scheduler", "[none] mq-deadline"},
    {"/sys/block/nvme0n1/queue/wbt_lat_usec", "2000"},
    {"/sys/block/nvme0n1/queue/read_ahead_kb", "128"},
    {"/sys/block/sda/queue/scheduler", "[mq-deadline] none"},
    {"/sys/block/sda/queue/wbt_lat_usec", "75000"},
    {"/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"},
    {"/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"
                          "Max open files            1024                 524288               files     \n"
                          "Max locked memory         8388608              8388608              bytes     \n"},
    {"/proc/1/comm", "systemd\n"},
    {"/proc/812/comm", "irqbalance\n"},
    {"/usr/sbin/irqbalance", ""},
    {"/etc/security/limits.conf", "# /etc/security/limits.conf\n"},
};

} // namespace

FakeSysroot::FakeSysroot() {
  const char *tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/mltune-test-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  dir_ = templ;
  for (const auto &[path, value] : k_defaults) {
    set(path, value);
  }
}

FakeSysroot::~FakeSysroot() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void FakeSysroot::set(std::string_view abs, std::string_view content) const {
  const fs::path p = root().path(abs);
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
}

std::string FakeSysroot::get(std::string_view abs) const {
  std::ifstream in(root().path(abs), std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::pair<std::string, std::string>> FakeSysroot::snapshot() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &[path, value] : k_defaults) {
    out.emplace_back(path, normalize_value(get(path)));
  }
  return out;
}

void FakeSysroot::add_module() const {
  const std::string d(k_kmod_dir);
  set(d + "/version", "0.1 1\n");
  set(d + "/profile", "none\n");
  set(d + "/generation", "0\n");
  set(d + "/last_switch", "none\n");
  set(d + "/profiles/control", "");
  const ProfileLoader loader;
  for (const auto *name : {"training", "inference"}) {
    set(d + "/profiles/" + name + "/knobs", kernel_knob_list(*loader.load(name), root()));
    set(d + "/profiles/" + name + "/state", "committed\n");
  }
}

} // namespace mltune::test
