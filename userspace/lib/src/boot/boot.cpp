#include "mltune/boot.hpp"

#include "mltune/node_info.hpp"

#include <algorithm>
#include <map>

namespace mltune {

namespace {

bool cpulist_key(std::string_view k) {
  return k == "nohz_full" || k == "isolcpus" || k == "rcu_nocbs" || k == "irqaffinity";
}

// "managed_irq,domain,8-15" -> flags {domain, managed_irq} and the list.
struct CpuArg {
  std::vector<std::string> flags;
  std::string list;
};
CpuArg split_flags(std::string_view v) {
  CpuArg a;
  while (!v.empty() && (v.front() < '0' || v.front() > '9')) {
    const auto comma = v.find(',');
    a.flags.emplace_back(v.substr(0, comma));
    if (comma == std::string_view::npos) {
      v = {};
      break;
    }
    v.remove_prefix(comma + 1);
  }
  std::ranges::sort(a.flags);
  a.list = std::string(v);
  return a;
}

// Equal as kernel parameters: CPU lists as sets, flags in any order.
bool same_value(std::string_view key, std::string_view a, std::string_view b) {
  if (!cpulist_key(key)) {
    return a == b;
  }
  const CpuArg x = split_flags(a);
  const CpuArg y = split_flags(b);
  if (x.flags != y.flags) {
    return false;
  }
  auto sx = parse_cpuset(x.list);
  auto sy = parse_cpuset(y.list);
  return sx && sy && *sx == *sy;
}

} // namespace

const std::vector<std::string_view> &boot_managed_keys() {
  static const std::vector<std::string_view> keys = {"nohz_full",
                                                     "isolcpus",
                                                     "rcu_nocbs",
                                                     "irqaffinity",
                                                     "skew_tick",
                                                     "nosoftlockup",
                                                     "transparent_hugepage",
                                                     "numa_balancing",
                                                     "intel_idle.max_cstate",
                                                     "processor.max_cstate"};
  return keys;
}

BootOptions boot_options_for(const Profile &profile) {
  BootOptions o;
  o.profile = profile.name;
  if (const Knob *k = profile.find("kernel/mm/transparent_hugepage/enabled")) {
    o.thp = k->value;
  }
  if (const Knob *k = profile.find("kernel.numa_balancing")) {
    o.numa_balancing_off = k->value == "0";
  }
  o.low_latency = profile.name.find("inference") != std::string::npos;
  return o;
}

Result<std::vector<BootParam>> boot_params(const Topology &topo, const CpuPlan &plan, const BootOptions &opts) {
  std::vector<BootParam> out;
  auto iso = resolve_cpuset(opts.isolate, plan);
  if (!iso) {
    return iso.error();
  }
  if (iso->test(plan.online.first())) {
    return input_error("cannot isolate CPU 0 (" + opts.isolate + " = " + iso->str() +
                       "): it keeps timers and interrupts that cannot move");
  }
  if (!iso->empty() && !(plan.online - *iso).intersects(plan.housekeeping)) {
    return input_error("isolating " + iso->str() + " leaves no housekeeping CPU");
  }
  if (!iso->empty()) {
    const std::string l = iso->str();
    CpuSet hk = plan.online - *iso;
    if (!plan.housekeeping.empty() && (plan.housekeeping - *iso) == plan.housekeeping) {
      hk = plan.housekeeping;
    }
    out.push_back({"isolcpus", "managed_irq,domain," + l,
                   "keep the scheduler's load balancing (domain) and managed device IRQs (managed_irq) off the "
                   "feeder CPUs"});
    out.push_back({"nohz_full", l, "no periodic scheduler tick on a feeder CPU running one thread"});
    out.push_back({"rcu_nocbs", l, "RCU callbacks of the feeder CPUs run on housekeeping CPUs"});
    out.push_back({"irqaffinity", hk.str(), "default IRQ affinity: housekeeping CPUs only"});
    out.push_back({"skew_tick", "1", "offset the ticks of the remaining CPUs so they do not contend on jiffies locks"});
    out.push_back({"nosoftlockup", "",
                   "no soft-lockup watchdog thread waking on the isolated CPUs (as tuned's cpu-partitioning)"});
  }
  if (!opts.thp.empty()) {
    out.push_back({"transparent_hugepage", opts.thp,
                   "profile " + opts.profile + " sets THP to " + opts.thp + " from the first allocation on"});
  }
  if (opts.numa_balancing_off) {
    out.push_back({"numa_balancing", "disable",
                   "profile " + opts.profile + " turns automatic NUMA page migration off; off from boot on"});
  }
  if (opts.low_latency) {
    const bool amd = topo.cpu_vendor == "AuthenticAMD" || topo.cpu_vendor == "HygonGenuine";
    if (!amd) {
      out.push_back({"intel_idle.max_cstate", "1",
                     "inference: no deep C-states, whose exit latency (up to hundreds of us) adds to requests"});
    }
    out.push_back({"processor.max_cstate", "1", "inference: the ACPI idle driver's equivalent C-state limit"});
  }
  return out;
}

std::string boot_fragment(const std::vector<BootParam> &params) {
  std::string s;
  for (const auto &p : params) {
    s += (s.empty() ? "" : " ") + p.str();
  }
  return s;
}

std::string grub_dropin(const std::vector<BootParam> &params, std::string_view profile) {
  std::string s = "# Written by 'mltunectl boot apply' (profile " + std::string(profile) +
                  "). Remove with 'mltunectl boot remove'.\n"
                  "# Takes effect after update-grub and a reboot; check with 'mltunectl boot verify'.\n";
  for (const auto &p : params) {
    s += "#   " + p.str() + ": " + p.reason + "\n";
  }
  s += "GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} " + boot_fragment(params) + "\"\n";
  return s;
}

Result<std::vector<BootDiff>> verify_boot(const Sysroot &root, const std::vector<BootParam> &params) {
  auto cmdline = kernel_cmdline(root);
  if (!cmdline) {
    return cmdline.error();
  }
  const KernelCmdline &actual = *cmdline;
  std::vector<BootDiff> diffs;
  std::map<std::string, const BootParam *, std::less<>> expected;
  for (const auto &p : params) {
    expected[p.key] = &p;
  }
  for (const auto key : boot_managed_keys()) {
    const auto e = expected.find(key);
    const auto a = actual.find(key);
    const std::string ev = e == expected.end() ? "" : e->second->str();
    const std::string av = a == actual.end() ? "" : (a->second.empty() ? a->first : a->first + "=" + a->second);
    if (e == expected.end() && a == actual.end()) {
      continue;
    }
    if (e == expected.end() || a == actual.end() || !same_value(key, e->second->value, a->second)) {
      diffs.push_back({std::string(key), ev, av});
    }
  }
  // What the kernel made of them.
  auto kernel_set = [&](std::string_view file, std::string_view key, bool need_domain) {
    CpuSet want;
    if (auto e = expected.find(key); e != expected.end()) {
      const CpuArg a = split_flags(e->second->value);
      const bool domain = a.flags.empty() || std::ranges::find(a.flags, "domain") != a.flags.end();
      if (auto l = parse_cpuset(a.list); l && (!need_domain || domain)) {
        want = *l;
      }
    }
    auto txt = root.read(file);
    if (!txt) {
      if (!want.empty()) {
        diffs.push_back({std::string(file), want.str(), "(unreadable: " + txt.error().message + ")"});
      }
      return;
    }
    std::string v = normalize_value(*txt);
    if (v == "(null)") {
      v.clear();
    }
    auto got = parse_cpuset(v, file);
    if (!got) {
      diffs.push_back({std::string(file), want.str(), "(" + got.error().message + ")"});
    } else if (!(*got == want)) {
      diffs.push_back({std::string(file), want.str(), got->str()});
    }
  };
  kernel_set("/sys/devices/system/cpu/isolated", "isolcpus", true);
  kernel_set("/sys/devices/system/cpu/nohz_full", "nohz_full", false);
  return diffs;
}

} // namespace mltune
