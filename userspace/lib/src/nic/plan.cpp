// NIC settings: key catalog, planning against probed devices, and the
// all-devices transaction.  Hardware-free; the kernel side is a NicBackend.
#include "mltune/nic.hpp"

#include "mltune/cpulist.hpp"
#include "mltune/parse.hpp"
#include "nic/baseline.hpp"
#include "nic/plan_phases.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <fnmatch.h>
#include <ranges>

namespace mltune {

namespace {

enum class VKind { count, count_max, count_max_local, boolean, choice_irq, choice_irqbalance, choice_rps };

struct KeySpec {
  std::string_view key;
  VKind kind;
  std::uint64_t limit; // largest count accepted in a profile
};

constexpr std::uint64_t k_ring_limit = 1U << 20; // no NIC has rings this deep
constexpr std::uint64_t k_chan_limit = 1U << 16;
constexpr std::uint64_t k_u32 = 0xffffffffULL;

constexpr std::array k_keys{
    KeySpec{"rings.rx", VKind::count_max, k_ring_limit},
    KeySpec{"rings.rx-mini", VKind::count_max, k_ring_limit},
    KeySpec{"rings.rx-jumbo", VKind::count_max, k_ring_limit},
    KeySpec{"rings.tx", VKind::count_max, k_ring_limit},
    KeySpec{"channels.rx", VKind::count_max_local, k_chan_limit},
    KeySpec{"channels.tx", VKind::count_max_local, k_chan_limit},
    KeySpec{"channels.other", VKind::count_max_local, k_chan_limit},
    KeySpec{"channels.combined", VKind::count_max_local, k_chan_limit},
    KeySpec{"coalesce.rx-usecs", VKind::count, k_u32},
    KeySpec{"coalesce.rx-frames", VKind::count, k_u32},
    KeySpec{"coalesce.rx-usecs-irq", VKind::count, k_u32},
    KeySpec{"coalesce.rx-frames-irq", VKind::count, k_u32},
    KeySpec{"coalesce.tx-usecs", VKind::count, k_u32},
    KeySpec{"coalesce.tx-frames", VKind::count, k_u32},
    KeySpec{"coalesce.tx-usecs-irq", VKind::count, k_u32},
    KeySpec{"coalesce.tx-frames-irq", VKind::count, k_u32},
    KeySpec{"coalesce.stats-block-usecs", VKind::count, k_u32},
    KeySpec{"coalesce.adaptive-rx", VKind::boolean, 1},
    KeySpec{"coalesce.adaptive-tx", VKind::boolean, 1},
    KeySpec{"coalesce.pkt-rate-low", VKind::count, k_u32},
    KeySpec{"coalesce.rx-usecs-low", VKind::count, k_u32},
    KeySpec{"coalesce.rx-frames-low", VKind::count, k_u32},
    KeySpec{"coalesce.tx-usecs-low", VKind::count, k_u32},
    KeySpec{"coalesce.tx-frames-low", VKind::count, k_u32},
    KeySpec{"coalesce.pkt-rate-high", VKind::count, k_u32},
    KeySpec{"coalesce.rx-usecs-high", VKind::count, k_u32},
    KeySpec{"coalesce.rx-frames-high", VKind::count, k_u32},
    KeySpec{"coalesce.tx-usecs-high", VKind::count, k_u32},
    KeySpec{"coalesce.tx-frames-high", VKind::count, k_u32},
    KeySpec{"coalesce.sample-interval", VKind::count, k_u32},
    KeySpec{"pause.autoneg", VKind::boolean, 1},
    KeySpec{"pause.rx", VKind::boolean, 1},
    KeySpec{"pause.tx", VKind::boolean, 1},
    KeySpec{"link.mtu", VKind::count, 1U << 20},
    KeySpec{"link.txqueuelen", VKind::count, 1U << 24},
    KeySpec{"irq.affinity", VKind::choice_irq, 0},
    KeySpec{"irq.irqbalance", VKind::choice_irqbalance, 0},
    KeySpec{"rps.cpus", VKind::choice_rps, 0},
    KeySpec{"rps.flow-entries", VKind::count, 1U << 29},
};

const KeySpec *find_key(std::string_view key) {
  for (const auto &k : k_keys) {
    if (k.key == key) {
      return &k;
    }
  }
  return nullptr;
}

bool is_bool_word(std::string_view v) {
  return v == "on" || v == "off" || v == "true" || v == "false";
}

bool valid_feature_name(std::string_view n) {
  return !n.empty() && n.size() <= 64 && std::ranges::all_of(n, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

constexpr std::array k_group_order{"channels", "rings", "coalesce", "pause", "features", "link", "irq", "rps"};

int group_rank(std::string_view g) {
  for (size_t i = 0; i < k_group_order.size(); ++i) {
    if (g == k_group_order[i]) {
      return static_cast<int>(i);
    }
  }
  return static_cast<int>(k_group_order.size());
}

std::uint64_t roundup_pow2(std::uint64_t v) {
  std::uint64_t r = 1;
  while (r < v) {
    r <<= 1;
  }
  return r;
}

// A device's wanted settings: every matching rule in order, later wins.
std::map<std::string, NicSetting> wanted_for(std::span<const NicRule> rules, const NicDevice &dev) {
  std::map<std::string, NicSetting> out;
  for (const auto &r : rules) {
    const bool hit = fnmatch(r.glob.c_str(), dev.name.c_str(), 0) == 0 ||
                     (!dev.driver.empty() && fnmatch(r.glob.c_str(), dev.driver.c_str(), 0) == 0);
    if (!hit) {
      continue;
    }
    for (const auto &s : r.settings) {
      out[s.key] = s;
    }
  }
  return out;
}

struct FeatureAlias {
  std::string_view short_name;
  std::string_view long_name;
  std::string_view match; // kernel name, or prefix ending in '*'
  std::string_view match2;
};

constexpr std::array k_feature_aliases{
    FeatureAlias{"rx", "rx-checksumming", "rx-checksum", ""},
    FeatureAlias{"tx", "tx-checksumming", "tx-checksum-*", ""},
    FeatureAlias{"sg", "scatter-gather", "tx-scatter-gather*", ""},
    FeatureAlias{"tso", "tcp-segmentation-offload", "tx-tcp*segmentation", ""},
    FeatureAlias{"ufo", "udp-fragmentation-offload", "tx-udp-fragmentation", ""},
    FeatureAlias{"gso", "generic-segmentation-offload", "tx-generic-segmentation", ""},
    FeatureAlias{"gro", "generic-receive-offload", "rx-gro", ""},
    FeatureAlias{"lro", "large-receive-offload", "rx-lro", ""},
    FeatureAlias{"rxvlan", "rx-vlan-offload", "rx-vlan-hw-parse", ""},
    FeatureAlias{"txvlan", "tx-vlan-offload", "tx-vlan-hw-insert", ""},
    FeatureAlias{"ntuple", "ntuple-filters", "rx-ntuple-filter", ""},
    FeatureAlias{"rxhash", "receive-hashing", "rx-hashing", ""},
};

} // namespace

std::string nic_group(std::string_view key) {
  return std::string(key.substr(0, key.find('.')));
}

std::string nic_normalize_value(std::string_view v) {
  if (v == "true" || v == "on") {
    return "on";
  }
  if (v == "false" || v == "off") {
    return "off";
  }
  if (const auto n = parse_int<std::uint64_t>(v)) {
    return std::to_string(*n);
  }
  return std::string(v);
}

std::string nic_check_setting(std::string_view key, std::string_view value) {
  const std::string k(key);
  if (key.starts_with("features.")) {
    if (!valid_feature_name(key.substr(9))) {
      return "invalid feature name '" + std::string(key.substr(9)) + "'";
    }
    if (!is_bool_word(value)) {
      return k + ": expected true/false (on/off), got '" + std::string(value) + "'";
    }
    return {};
  }
  const KeySpec *spec = find_key(key);
  if (spec == nullptr) {
    return "unknown NIC setting '" + k + "'";
  }
  const auto num = parse_int<std::uint64_t>(value);
  switch (spec->kind) {
  case VKind::boolean:
    if (!is_bool_word(value)) {
      return k + ": expected true/false (on/off), got '" + std::string(value) + "'";
    }
    return {};
  case VKind::choice_irq:
    return value == "housekeeping" || value == "leave" ? "" : k + R"(: expected "housekeeping" or "leave")";
  case VKind::choice_irqbalance:
    return value == "ban" || value == "stop" || value == "ignore" ? "" : k + R"(: expected "ban", "stop" or "ignore")";
  case VKind::choice_rps:
    return value == "housekeeping" || value == "off" || value == "leave"
               ? ""
               : k + R"(: expected "housekeeping", "off" or "leave")";
  case VKind::count_max_local:
    if (value == "local") {
      return {};
    }
    [[fallthrough]];
  case VKind::count_max:
    if (value == "max") {
      return {};
    }
    [[fallthrough]];
  case VKind::count:
    if (!num) {
      return k + ": expected a non-negative integer" +
             std::string(spec->kind == VKind::count       ? ""
                         : spec->kind == VKind::count_max ? " or \"max\""
                                                          : R"(, "max" or "local")") +
             ", got '" + std::string(value) + "'";
    }
    if (*num > spec->limit) {
      return k + ": " + std::string(value) + " is out of range (at most " + std::to_string(spec->limit) + ")";
    }
    if (key == "link.mtu" && *num < 68) {
      return k + ": " + std::string(value) + " is below the IPv4 minimum of 68";
    }
    return {};
  }
  return {};
}

std::vector<std::string> nic_feature_expand(std::string_view name, const NicDevice &dev) {
  std::vector<std::string> out;
  auto add_matching = [&](std::string_view pat) {
    const std::string p(pat);
    for (const auto &[k, v] : dev.current) {
      if (k.starts_with("features.") && fnmatch(p.c_str(), k.c_str() + 9, 0) == 0) {
        out.push_back(k.substr(9));
      }
    }
  };
  for (const auto &a : k_feature_aliases) {
    if (name == a.short_name || name == a.long_name) {
      add_matching(a.match);
      return out;
    }
  }
  if (dev.current.contains("features." + std::string(name))) {
    out.emplace_back(name);
  }
  return out;
}

Result<std::vector<NicDevice>> nic_probe_all(NicBackend &backend, const std::string &only) {
  auto names = backend.interfaces();
  if (!names) {
    return names.error();
  }
  if (!only.empty() && std::find(names->begin(), names->end(), only) == names->end()) {
    return input_error("unknown interface '" + only + "' (known: " + [&] {
      std::string s;
      for (const auto &n : *names) {
        s += (s.empty() ? "" : ", ") + n;
      }
      return s.empty() ? std::string("none") : s;
    }() + ")");
  }
  std::vector<NicDevice> devs;
  for (const auto &n : *names) {
    if (!only.empty() && n != only) {
      continue;
    }
    auto d = backend.probe(n);
    if (!d) {
      return d.error();
    }
    devs.push_back(std::move(*d));
  }
  return devs;
}

namespace detail {

void DeviceChanges::skip(const std::string &key, std::string why) {
  plan_.skipped.push_back({dev_.name, key, std::move(why)});
}

void DeviceChanges::change(const std::string &key, const std::string &to, const NicSetting &s) {
  const auto it = dev_.current.find(key);
  const std::string from = it == dev_.current.end() ? "" : it->second;
  ++plan_.compared;
  if (from != to) {
    changes.push_back({dev_.name, key, from, to, s.origin});
  }
}

Result<std::vector<unsigned>> DeviceChanges::housekeeping() {
  if (hk_.empty()) {
    auto c = backend_.node_cpus(dev_.numa_node);
    if (!c) {
      return c.error();
    }
    if (c->empty()) {
      return failure(dev_.name + ": no housekeeping CPUs on NUMA node " + std::to_string(dev_.numa_node));
    }
    hk_ = std::move(*c);
  }
  return hk_;
}

NicWanted nic_wanted_for(std::span<const NicRule> rules, const NicDevice &dev) {
  return wanted_for(rules, dev);
}

Status plan_feature(DeviceChanges &d, const std::string &key, const NicSetting &s, const std::string &at) {
  const NicDevice &dev = d.dev();
  const std::string fname = key.substr(9);
  const auto names = nic_feature_expand(fname, dev);
  if (names.empty()) {
    return input_error(at + ": unknown feature '" + fname + "' (see 'mltunectl nic show " + dev.name + "')");
  }
  const std::string to = nic_normalize_value(s.value);
  bool any_changeable = false;
  bool fixed_differs = false;
  for (const auto &n : names) {
    const std::string fk = "features." + n;
    if (dev.fixed.contains(fk)) {
      fixed_differs = fixed_differs || dev.current.at(fk) != to;
      continue;
    }
    any_changeable = true;
    d.change(fk, to, s);
  }
  if (!any_changeable && fixed_differs) {
    if (s.explicit_request) {
      return input_error(at + ": feature '" + fname + "' is fixed on " + dev.name + " (driver " + dev.driver + ")");
    }
    d.skip(key, "fixed by driver " + dev.driver);
  }
  return {};
}

Status plan_value(DeviceChanges &d, const std::string &key, const NicSetting &s, const std::string &at) {
  const NicDevice &dev = d.dev();
  const KeySpec *spec = find_key(key);
  if (spec == nullptr) {
    return input_error(at + ": unknown NIC setting");
  }
  if (!dev.current.contains(key) && !s.explicit_request) {
    d.skip(key, "not supported by driver " + dev.driver);
    return {};
  }
  std::string to = nic_normalize_value(s.value);
  const auto mx = dev.max.find(key);
  if (to == "max" || to == "local") {
    if (mx == dev.max.end()) {
      d.skip(key, "driver " + dev.driver + " reports no maximum");
      return {};
    }
    std::uint64_t v = mx->second;
    if (to == "local") {
      auto c = d.housekeeping();
      if (!c) {
        return c.error();
      }
      v = std::min<std::uint64_t>(v, c->size());
    }
    if (v == 0) {
      d.skip(key, "device maximum is 0");
      return {};
    }
    to = std::to_string(v);
  } else if (spec->kind != VKind::boolean && mx != dev.max.end()) {
    if (const auto n = parse_int<std::uint64_t>(to); n && *n > mx->second) {
      return input_error(at + ": " + to + " exceeds the device maximum " + std::to_string(mx->second));
    }
  }
  if ((key.starts_with("rings.") || key == "channels.combined") && to == "0" && mx != dev.max.end()) {
    return input_error(at + ": 0 is not a valid size");
  }
  d.change(key, to, s);
  return {};
}

Status plan_settings(DeviceChanges &d, const NicWanted &wanted) {
  const NicDevice &dev = d.dev();
  for (const auto &[key, s] : wanted) {
    const std::string group = nic_group(key);
    const std::string at = dev.name + ": " + key + " (" + s.origin + ")";
    if (group == "irq" || group == "rps") {
      continue; // plan_queue_irqs, plan_rps
    }
    if (dev.unsupported_groups.contains(group)) {
      if (s.explicit_request) {
        return input_error(at + ": the " + dev.driver + " driver does not support " + group + " settings");
      }
      d.skip(key, "driver " + dev.driver + " has no " + group + " settings");
      continue;
    }
    auto st = group == "features" ? plan_feature(d, key, s, at) : plan_value(d, key, s, at);
    if (!st) {
      return st;
    }
  }
  return {};
}

Status plan_queue_irqs(DeviceChanges &d, const NicWanted &wanted, NicPlanTotals &totals) {
  const NicDevice &dev = d.dev();
  // Queue IRQs over housekeeping CPUs of the NIC's node, round robin.
  const auto aff = wanted.find("irq.affinity");
  if (aff == wanted.end() || aff->second.value != "housekeeping") {
    return {};
  }
  if (dev.irqs.empty() || !dev.up) {
    // A NIC that is down (an unused port, or not configured yet) has freed
    // its queue IRQs, or keeps idle vectors whose affinity the kernel may
    // not take (a write to a shut-down MSI-X vector can read back
    // unchanged); they are requested again with the default affinity when
    // it comes up, and the next switch places them.
    d.skip("irq.affinity", dev.up ? "the device has no queue IRQs"
                                  : "the interface is down: its queue IRQs are placed by a switch once it is up");
    return {};
  }
  auto c = d.housekeeping();
  if (!c) {
    return c.error();
  }
  for (size_t i = 0; i < dev.irqs.size(); ++i) {
    const unsigned cpu = (*c)[i % c->size()];
    d.change("irq." + std::to_string(dev.irqs[i]), std::to_string(cpu), aff->second);
    totals.irqbalance_irqs.insert(dev.irqs[i]);
  }
  totals.housekeeping_all.insert(c->begin(), c->end());
  const auto ib = wanted.find("irq.irqbalance");
  const std::string mode = ib == wanted.end() ? "ban" : ib->second.value;
  if (mode != "ignore" && (totals.irqbalance_mode.empty() || mode == "stop")) {
    totals.irqbalance_mode = mode;
  }
  return {};
}

Status plan_rps(DeviceChanges &d, const NicWanted &wanted, NicPlanTotals &totals) {
  const NicDevice &dev = d.dev();
  const auto rps = wanted.find("rps.cpus");
  const auto fe = wanted.find("rps.flow-entries");
  std::uint64_t per_queue = 0;
  bool set_flow_cnt = false;
  if (fe != wanted.end()) {
    std::uint64_t n = parse_int<std::uint64_t>(fe->second.value).value_or(0);
    n = n == 0 ? 0 : roundup_pow2(n);
    totals.flow_entries = std::max(totals.flow_entries, n);
    totals.want_flow = true;
    totals.flow_origin = fe->second.origin;
    if (!dev.rx_queues.empty()) {
      per_queue = n == 0 ? 0 : roundup_pow2(std::max<std::uint64_t>(1, n / dev.rx_queues.size()));
      set_flow_cnt = true;
    }
  }
  for (const auto &q : dev.rx_queues) {
    if (rps != wanted.end() && rps->second.value != "leave") {
      std::string mask = "0";
      if (rps->second.value == "housekeeping") {
        auto c = d.housekeeping();
        if (!c) {
          return c.error();
        }
        CpuSet set;
        for (const unsigned cpu : *c) {
          set.set(cpu);
        }
        mask = set.mask_str();
      }
      if (dev.current.contains("rps." + q + ".cpus")) {
        d.change("rps." + q + ".cpus", mask, rps->second);
      }
    }
    if (set_flow_cnt && dev.current.contains("rps." + q + ".flow-cnt")) {
      d.change("rps." + q + ".flow-cnt", std::to_string(per_queue), fe->second);
    }
  }
  return {};
}

Status plan_device(std::span<const NicRule> rules, const NicDevice &dev, NicBackend &backend, NicPlan &plan,
                   NicPlanTotals &totals) {
  const NicWanted wanted = wanted_for(rules, dev);
  DeviceChanges d(dev, backend, plan);
  if (auto st = plan_settings(d, wanted); !st) {
    return st;
  }
  if (auto st = plan_queue_irqs(d, wanted, totals); !st) {
    return st;
  }
  if (auto st = plan_rps(d, wanted, totals); !st) {
    return st;
  }
  std::ranges::stable_sort(d.changes, [](const NicChange &a, const NicChange &b) {
    return group_rank(nic_group(a.key)) < group_rank(nic_group(b.key));
  });
  plan.changes.insert(plan.changes.end(), d.changes.begin(), d.changes.end());
  return {};
}

Status plan_flow_entries(NicBackend &backend, const NicPlanTotals &totals, NicPlan &plan) {
  if (!totals.want_flow) {
    return {};
  }
  const std::string key = "sysctl.net.core.rps_sock_flow_entries";
  auto cur = backend.read_global(key);
  if (!cur) {
    return cur.error();
  }
  ++plan.compared;
  if (*cur != std::to_string(totals.flow_entries)) {
    plan.changes.push_back({"", key, *cur, std::to_string(totals.flow_entries), totals.flow_origin});
  }
  return {};
}

void plan_irqbalance(NicBackend &backend, const NicPlanTotals &totals, NicPlan &plan) {
  if (totals.irqbalance_mode.empty()) {
    return;
  }
  const int pid = backend.irqbalance_pid();
  if (pid <= 0) {
    plan.notes.emplace_back("irqbalance is not running");
    return;
  }
  plan.irqbalance = totals.irqbalance_mode;
  plan.irqbalance_irqs.assign(totals.irqbalance_irqs.begin(), totals.irqbalance_irqs.end());
  auto all = backend.node_cpus(-1);
  if (all) {
    for (unsigned c : *all) {
      if (!totals.housekeeping_all.contains(c)) {
        plan.irqbalance_banned.push_back(c);
      }
    }
  }
  plan.notes.push_back(
      "irqbalance (pid " + std::to_string(pid) + ") is running: " +
      (totals.irqbalance_mode == "stop" ? "it will be stopped" : "the NIC IRQs will be banned from it"));
}

void plan_irq_load(NicPlan &plan) {
  std::map<std::string, std::size_t> per_cpu;
  for (const auto &c : plan.changes) {
    if (nic_group(c.key) == "irq") {
      ++per_cpu[c.to];
    }
  }
  std::string crowded;
  std::size_t most = 0;
  for (const auto &[cpu, n] : per_cpu) {
    if (n > k_irqs_per_cpu_note) {
      crowded += (crowded.empty() ? "" : ", ") + std::string("CPU ") + cpu + ": " + std::to_string(n);
      most = std::max(most, n);
    }
  }
  if (!crowded.empty()) {
    plan.notes.push_back("queue IRQs crowd the housekeeping CPUs (" + crowded + "; up to " + std::to_string(most) +
                         " per CPU): fewer channels per NIC (channels.combined = \"local\") or more housekeeping "
                         "CPUs spread them");
  }
}

} // namespace detail

Result<NicPlan> nic_plan(std::span<const NicRule> rules, const std::vector<NicDevice> &devices, NicBackend &backend,
                         const NicOptions &opts) {
  (void)opts;
  NicPlan plan;
  detail::NicPlanTotals totals;
  for (const auto &dev : devices) {
    if (auto st = detail::plan_device(rules, dev, backend, plan, totals); !st) {
      return st.error();
    }
  }
  if (auto st = detail::plan_flow_entries(backend, totals, plan); !st) {
    return st.error();
  }
  detail::plan_irqbalance(backend, totals, plan);
  detail::plan_irq_load(plan);
  return plan;
}

Result<NicReport> nic_apply(std::span<const NicRule> rules, NicBackend &backend, const NicOptions &opts, bool dry_run) {
  // Only what the rules can change is read from the devices.
  std::set<std::string, std::less<>> groups{"link"};
  for (const auto &r : rules) {
    for (const auto &s : r.settings) {
      groups.insert(nic_group(s.key));
    }
  }
  backend.limit_probe(std::move(groups));
  auto devs = nic_probe_all(backend, opts.only);
  backend.limit_probe({});
  if (!devs) {
    return devs.error();
  }
  auto plan = nic_plan(rules, *devs, backend, opts);
  if (!plan) {
    return plan.error();
  }
  if (dry_run) {
    NicReport rep;
    rep.skipped = plan->skipped;
    rep.notes = plan->notes;
    rep.plan = std::move(*plan);
    return rep;
  }
  return nic_commit(*plan, backend, opts);
}

Result<NicReport> nic_commit(const NicPlan &planned, NicBackend &backend, const NicOptions &opts) {
  NicReport rep;
  rep.plan = planned;
  rep.skipped = planned.skipped;
  rep.notes = planned.notes;
  const NicPlan *plan = &rep.plan;

  struct Step {
    std::string ifname, group;
    NicValues before, after;
    std::vector<const NicChange *> changes;
  };
  std::vector<Step> steps;
  for (const auto &c : plan->changes) {
    const std::string group = c.ifname.empty() ? "sysctl" : nic_group(c.key);
    if (steps.empty() || steps.back().ifname != c.ifname || steps.back().group != group) {
      steps.push_back({c.ifname, group, {}, {}, {}});
    }
    steps.back().before[c.key] = c.from;
    steps.back().after[c.key] = c.to;
    steps.back().changes.push_back(&c);
  }

  if (opts.record_baseline != nullptr && !plan->changes.empty()) {
    if (auto st = detail::record_nic_baseline(*opts.record_baseline, plan->changes); !st) {
      return with_context(st.error(), "recording the NIC baseline");
    }
  }
  std::vector<const Step *> done;
  for (const auto &st : steps) {
    auto r = backend.set(st.ifname, st.group, st.after);
    if (r) {
      done.push_back(&st);
      for (const auto *c : st.changes) {
        rep.applied.push_back(*c);
      }
      continue;
    }
    const Error &e = r.error();
    if (opts.skip_unsupported && (e.sys_errno == EOPNOTSUPP || e.message.find("unsupported") != std::string::npos)) {
      for (const auto *c : st.changes) {
        rep.skipped.push_back({c->ifname, c->key, e.message});
      }
      continue;
    }
    // Roll back everything, newest first.
    std::string rb;
    for (const auto *d : std::views::reverse(done)) {
      if (auto u = backend.set(d->ifname, d->group, d->before); !u) {
        rb += "; restore failed: " + u.error().message;
      }
    }
    // A failed request may have changed part of its own group (sysfs writes).
    if (st.group == "irq" || st.group == "rps") {
      (void)backend.set(st.ifname, st.group, st.before);
    }
    Error out = e;
    out.message += rb.empty() ? "; every NIC was restored to its previous settings" : rb;
    return out;
  }

  if (!plan->irqbalance.empty()) {
    auto r = backend.irqbalance(plan->irqbalance, plan->irqbalance_banned, plan->irqbalance_irqs);
    if (!r) {
      rep.notes.push_back("irqbalance: " + r.error().message);
    } else {
      rep.notes.push_back(*r);
    }
  }
  return rep;
}

} // namespace mltune
