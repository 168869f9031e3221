// [cpu] and [block."GLOB"]: expansion into the sysfs knobs of a node
// (device_knobs.hpp); profile/device_tables.cpp parses the tables.
#include "mltune/device_knobs.hpp"

#include "mltune/parse.hpp"
#include "mltune/profile.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <utility>

namespace mltune {

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
  std::ranges::sort(cpus);
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
    const auto it = std::ranges::find_if(unique, [&](const Knob &o) { return o.key == k.key; });
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
