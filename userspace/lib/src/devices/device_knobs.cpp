// [cpu] and [block."GLOB"]: parsing, and expansion into the sysfs knobs of a
// node (device_knobs.hpp).
#include "mltune/device_knobs.hpp"

#include "devices/profile_tables.hpp"
#include "mltune/parse.hpp"
#include "mltune/profile.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fnmatch.h>
#include <optional>
#include <utility>

namespace mltune {

namespace {

bool is_word(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) != 0 || std::isdigit(static_cast<unsigned char>(c)) != 0 ||
           c == '_' || c == '-';
  });
}

// A non-negative integer within [lo, hi], or the error text.
std::string in_range(std::string_view key, std::string_view value, long long lo, long long hi) {
  const auto n = parse_int<long long>(value);
  if (!n || *n < lo || *n > hi) {
    return std::string(key) + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
           " (got '" + std::string(value) + "')";
  }
  return {};
}

// energy_perf_bias names as the kernel documents them (the x86 EPB values).
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> k_epb_names{{
    {"performance", "0"},
    {"balance-performance", "4"},
    {"normal", "6"},
    {"balance-power", "8"},
    {"power", "15"},
}};

std::string at(const std::string &display, const toml::source_region &r) {
  return display + ":" + std::to_string(r.begin.line);
}

// A TOML scalar as the value sysfs takes: integers in decimal, booleans 1/0.
std::optional<std::string> scalar(const toml::node &v) {
  if (const auto *i = v.as_integer()) {
    return std::to_string(i->get());
  }
  if (const auto *b = v.as_boolean()) {
    return std::string(b->get() ? "1" : "0");
  }
  if (const auto *s = v.as_string()) {
    return s->get();
  }
  return std::nullopt;
}

} // namespace

std::string cpu_setting_check(std::string_view key, std::string &value) {
  if (key == "governor") {
    return is_word(value) ? "" : "governor must be a governor's name (performance, schedutil, ...)";
  }
  if (key == "energy_performance_preference") {
    return is_word(value) ? "" : "energy_performance_preference must be a preference's name or number";
  }
  if (key == "energy_perf_bias") {
    for (const auto &[name, num] : k_epb_names) {
      if (value == name) {
        value = num;
        return {};
      }
    }
    return in_range(key, value, 0, 15);
  }
  if (key == "boost") {
    return value == "1" || value == "0" ? "" : "boost must be true or false";
  }
  if (key == "idle_max_latency_us") {
    return in_range(key, value, 0, 100000000);
  }
  return "unknown [cpu] key '" + std::string(key) +
         "' (expected governor, energy_performance_preference, energy_perf_bias, boost, idle_max_latency_us)";
}

std::string block_setting_check(std::string_view key, std::string &value) {
  if (key == "scheduler") {
    return is_word(value) ? "" : "scheduler must be a scheduler's name (none, mq-deadline, kyber, bfq)";
  }
  if (key == "read_ahead_kb" || key == "max_sectors_kb") {
    return in_range(key, value, 0, 1LL << 30);
  }
  if (key == "nr_requests") {
    return in_range(key, value, 4, 1LL << 20);
  }
  if (key == "wbt_lat_usec") {
    return in_range(key, value, -1, 1LL << 40); // -1: the kernel's default back
  }
  if (key == "rq_affinity" || key == "nomerges") {
    return in_range(key, value, 0, 2);
  }
  if (key == "add_random" || key == "iostats") {
    return in_range(key, value, 0, 1);
  }
  return "unknown [block] key '" + std::string(key) +
         "' (expected scheduler, read_ahead_kb, nr_requests, wbt_lat_usec, rq_affinity, nomerges, add_random, "
         "iostats, max_sectors_kb)";
}

namespace {

// toml::table iterates in key order; settings apply in file order.
std::vector<std::pair<const toml::key *, const toml::node *>> in_file_order(const toml::table &t) {
  std::vector<std::pair<const toml::key *, const toml::node *>> out;
  for (const auto &[k, v] : t) {
    out.emplace_back(&k, &v);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto &a, const auto &b) { return a.first->source().begin < b.first->source().begin; });
  return out;
}

} // namespace

namespace detail {

Status parse_cpu_table(const toml::table &cpu, const std::string &display, std::vector<DeviceSetting> &out) {
  for (const auto &[kp, vp] : in_file_order(cpu)) {
    const toml::key &k = *kp;
    const toml::node &v = *vp;
    const std::string where = at(display, k.source());
    const std::string key(k.str());
    auto value = scalar(v);
    if (!value) {
      return input_error(where + ": [cpu] " + key + ": expected an integer, a boolean or a string");
    }
    if (auto err = cpu_setting_check(key, *value); !err.empty()) {
      return input_error(where + ": [cpu] " + err);
    }
    const auto it = std::find_if(out.begin(), out.end(), [&](const DeviceSetting &s) { return s.key == key; });
    if (it != out.end()) {
      *it = {key, *value, where};
    } else {
      out.push_back({key, *value, where});
    }
  }
  return {};
}

Status parse_block_tables(const toml::table &block, const std::string &display, std::vector<BlockRule> &out) {
  for (const auto &[kp, vp] : in_file_order(block)) {
    const std::string glob(kp->str());
    const std::string where = at(display, kp->source());
    const auto *tbl = vp->as_table();
    if (tbl == nullptr) {
      return input_error(where + ": [block.\"" + glob + "\"] must be a table");
    }
    if (glob.empty() || glob.size() > 64 || glob.find_first_of("/ \t\n") != std::string::npos) {
      return input_error(where + ": invalid disk glob '" + glob + "'");
    }
    BlockRule rule{glob, {}, where};
    for (const auto &[skp, svp] : in_file_order(*tbl)) {
      const toml::key &k = *skp;
      const toml::node &v = *svp;
      const std::string swhere = at(display, k.source());
      const std::string key(k.str());
      auto value = scalar(v);
      if (!value) {
        return input_error(swhere + ": [block.\"" + glob + "\"] " + key + ": expected an integer or a string");
      }
      if (auto err = block_setting_check(key, *value); !err.empty()) {
        return input_error(swhere + ": [block.\"" + glob + "\"] " + err);
      }
      rule.settings.push_back({key, *value, swhere});
    }
    out.push_back(std::move(rule));
  }
  return {};
}

} // namespace detail

namespace {

// The CPUs of the node: "cpuN" directories, in number order.
std::vector<std::string> cpu_dirs(const Sysroot &root) {
  std::vector<std::pair<int, std::string>> cpus;
  for (const auto &e : root.list_dir("/sys/devices/system/cpu")) {
    if (e.size() > 3 && e.starts_with("cpu")) {
      if (const auto n = parse_int<int>(std::string_view(e).substr(3))) {
        cpus.emplace_back(*n, e);
      }
    }
  }
  std::sort(cpus.begin(), cpus.end());
  std::vector<std::string> out;
  out.reserve(cpus.size());
  for (auto &[n, e] : cpus) {
    out.push_back(std::move(e));
  }
  return out;
}

Knob device_knob(std::string key, std::string value, const DeviceSetting &s, const std::string &table) {
  Knob k{KnobKind::sysfs, std::move(key), std::move(value), false, true, "from " + table + " " + s.key, s.origin};
  return k;
}

void expand_cpu(const Profile &p, const Sysroot &root, DeviceKnobs &out) {
  const std::string base = "devices/system/cpu";
  std::vector<std::string> policies;
  for (const auto &e : root.list_dir("/sys/" + base + "/cpufreq")) {
    if (e.starts_with("policy")) {
      policies.push_back(e);
    }
  }
  const auto cpus = cpu_dirs(root);
  for (const auto &s : p.cpu) {
    const size_t before = out.knobs.size();
    if (s.key == "governor" || s.key == "energy_performance_preference") {
      const std::string file = s.key == "governor" ? "scaling_governor" : s.key;
      for (const auto &pol : policies) {
        const std::string key = base + "/cpufreq/" + pol + "/" + file;
        if (root.exists("/sys/" + key)) {
          out.knobs.push_back(device_knob(key, s.value, s, "[cpu]"));
          // intel_pstate (HWP) and amd-pstate (CPPC MSR) read the register
          // on the policy's CPU, the N of policyN (its first CPU when made).
          if (file == "energy_performance_preference") {
            out.knobs.back().read_on_cpu = parse_int<int>(std::string_view(pol).substr(6)).value_or(-1);
          }
        }
      }
    } else if (s.key == "boost") {
      if (root.exists("/sys/" + base + "/cpufreq/boost")) {
        out.knobs.push_back(device_knob(base + "/cpufreq/boost", s.value, s, "[cpu]"));
      }
    } else if (s.key == "energy_perf_bias") {
      for (const auto &c : cpus) {
        const std::string key = base + "/" + c + "/power/energy_perf_bias";
        if (root.exists("/sys/" + key)) {
          out.knobs.push_back(device_knob(key, s.value, s, "[cpu]"));
          out.knobs.back().read_on_cpu = parse_int<int>(std::string_view(c).substr(3)).value_or(-1); // "cpuN"
        }
      }
    } else if (s.key == "idle_max_latency_us") {
      const auto max = parse_int<long long>(s.value).value_or(0);
      size_t states = 0;
      for (const auto &c : cpus) {
        for (const auto &st : root.list_dir("/sys/" + base + "/" + c + "/cpuidle")) {
          const std::string dir = base + "/" + c + "/cpuidle/" + st;
          const auto lat = root.read_value("/sys/" + dir + "/latency");
          if (!st.starts_with("state") || !lat || !root.exists("/sys/" + dir + "/disable")) {
            continue;
          }
          ++states;
          if (parse_int<long long>(*lat).value_or(0) > max) {
            out.knobs.push_back(device_knob(dir + "/disable", "1", s, "[cpu]"));
          }
        }
      }
      if (states > 0) {
        continue; // every state was looked at, even when none is too slow
      }
    }
    if (out.knobs.size() == before) {
      out.notes.push_back("[cpu] " + s.key + " (" + s.origin + "): this node has no file for it (" +
                          (s.key == "idle_max_latency_us" ? std::string("no cpuidle states")
                           : s.key == "energy_perf_bias"  ? std::string("no energy_perf_bias: not an x86 CPU with EPB")
                                                          : std::string("no cpufreq, or a driver without it")) +
                          ")");
    }
  }
}

void expand_block(const Profile &p, const Sysroot &root, DeviceKnobs &out) {
  const auto disks = root.list_dir("/sys/block");
  for (const auto &rule : p.block) {
    for (const auto &s : rule.settings) {
      const size_t before = out.knobs.size();
      for (const auto &d : disks) {
        const std::string key = "block/" + d + "/queue/" + s.key;
        if (fnmatch(rule.glob.c_str(), d.c_str(), 0) == 0 && root.exists("/sys/" + key)) {
          out.knobs.push_back(device_knob(key, s.value, s, "[block.\"" + rule.glob + "\"]"));
        }
      }
      if (out.knobs.size() == before) {
        out.notes.push_back("[block.\"" + rule.glob + "\"] " + s.key + " (" + s.origin +
                            "): no disk of this node matches, or none has the setting");
      }
    }
  }
}

} // namespace

Result<DeviceKnobs> expand_device_settings(const Profile &profile, const Sysroot &root) {
  DeviceKnobs out;
  expand_cpu(profile, root, out);
  expand_block(profile, root, out);
  // A later setting for the same file (a more specific [block] table) wins.
  std::vector<Knob> unique;
  for (auto &k : out.knobs) {
    const auto it = std::find_if(unique.begin(), unique.end(), [&](const Knob &o) { return o.key == k.key; });
    if (it != unique.end()) {
      *it = std::move(k);
    } else {
      unique.push_back(std::move(k));
    }
  }
  out.knobs = std::move(unique);
  return out;
}

Result<Profile> profile_for_node(const Profile &profile, const Sysroot &root, std::vector<std::string> *notes) {
  if (profile.cpu.empty() && profile.block.empty()) {
    return profile;
  }
  auto dk = expand_device_settings(profile, root);
  if (!dk) {
    return dk.error();
  }
  Profile p = profile;
  for (auto &k : dk->knobs) {
    if (p.find(k.key) == nullptr) {
      p.knobs.push_back(std::move(k));
    }
  }
  if (notes != nullptr) {
    notes->insert(notes->end(), dk->notes.begin(), dk->notes.end());
  }
  return p;
}

} // namespace mltune
