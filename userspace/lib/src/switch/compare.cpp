// Comparing a node with a profile, and two profiles with each other.
#include "mltune/compare.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace mltune {

std::string_view to_string(KnobState s) {
  switch (s) {
  case KnobState::match: return "match";
  case KnobState::differs: return "differs";
  case KnobState::missing: return "missing";
  case KnobState::unreadable: return "unreadable";
  case KnobState::not_read: return "not-read";
  }
  return "?";
}

bool values_equal(std::string_view current, std::string_view wanted) {
  return normalize_value(current) == normalize_value(wanted);
}

std::vector<KnobStatus> compare(const Profile &profile, const Sysroot &root, const CpuSet *spare) {
  std::vector<KnobStatus> out;
  out.reserve(profile.knobs.size());
  for (const auto &k : profile.knobs) {
    KnobStatus st{&k, {}, KnobState::match, {}};
    if (spare != nullptr && k.read_on_cpu >= 0 && std::cmp_less(k.read_on_cpu, k_max_cpus) &&
        spare->test(static_cast<unsigned>(k.read_on_cpu))) {
      st.state = KnobState::not_read;
      st.error = "not read: reading it interrupts CPU " + std::to_string(k.read_on_cpu) + " (a feeder or isolated CPU)";
      out.push_back(std::move(st));
      continue;
    }
    auto cur = root.read_value(k.path());
    if (!cur) {
      st.state = cur.error().sys_errno == ENOENT ? KnobState::missing : KnobState::unreadable;
      st.error = cur.error().message;
    } else {
      st.current = std::move(*cur);
      st.state = k.satisfied_by(st.current) ? KnobState::match : KnobState::differs;
    }
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<ProfileSetting> profile_settings(const Profile &p) {
  std::vector<ProfileSetting> out;
  out.reserve(p.knobs.size() + p.cpu.size() + p.sched_rules.size());
  for (const auto &k : p.knobs) {
    out.push_back({"knobs", k.key, k.wanted(), k.origin});
  }
  for (const auto &s : p.cpu) {
    out.push_back({"cpu", s.key, s.value, s.origin});
  }
  for (const auto &r : p.block) {
    for (const auto &s : r.settings) {
      out.push_back({"block", r.glob + " " + s.key, s.value, s.origin});
    }
  }
  // A later table that sets the same GLOB and key replaces it in place.
  const size_t nic_from = out.size();
  for (const auto &r : p.nic) {
    for (const auto &s : r.settings) {
      const std::string key = r.glob + " " + s.key;
      const auto it = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(nic_from), out.end(),
                                   [&](const ProfileSetting &o) { return o.key == key; });
      if (it != out.end()) {
        it->value = s.value;
        it->origin = s.origin;
      } else {
        out.push_back({"nic", key, s.value, s.origin});
      }
    }
  }
  for (const auto &r : p.sched_rules) {
    std::string what = r.thread.empty() ? "thread_regex '" + r.thread_regex + "'" : "thread '" + r.thread + "'";
    what += r.exe.empty() ? "" : " exe '" + r.exe + "'";
    what += r.cmdline.empty() ? "" : " cmdline '" + r.cmdline + "'";
    what += r.cgroup.empty() ? "" : " cgroup '" + r.cgroup + "'";
    what += ": " + r.attr.describe();
    what += r.cpus.empty() ? "" : " cpus " + r.cpus;
    what += r.fallback ? ", fallback " + r.fallback->describe() : "";
    out.push_back({"sched", r.name, what, r.origin});
  }
  for (const auto &h : p.hugepages) {
    out.push_back({"hugepages", h.key(), std::to_string(h.pages), h.origin});
  }
  return out;
}

std::vector<ProfileDiffEntry> diff_profiles(const Profile &a, const Profile &b) {
  const auto sa = profile_settings(a);
  const auto sb = profile_settings(b);
  auto find = [](const std::vector<ProfileSetting> &in, const ProfileSetting &s) {
    return std::ranges::find_if(in, [&](const ProfileSetting &o) { return o.domain == s.domain && o.key == s.key; });
  };
  std::vector<ProfileDiffEntry> out;
  for (const auto &s : sa) {
    const auto o = find(sb, s);
    if (o == sb.end()) {
      out.push_back({s.key, s.value, {}, s.domain});
    } else if (!values_equal(s.value, o->value)) {
      out.push_back({s.key, s.value, o->value, s.domain});
    }
  }
  for (const auto &s : sb) {
    if (find(sa, s) == sa.end()) {
      out.push_back({s.key, {}, s.value, s.domain});
    }
  }
  return out;
}

std::string profile_fingerprint(const Profile &p) {
  constexpr uint64_t k_offset = 14695981039346656037ULL;
  constexpr uint64_t k_prime = 1099511628211ULL;
  uint64_t h = k_offset;
  const auto mix = [&](std::string_view field) {
    for (const char c : field) {
      h = (h ^ static_cast<unsigned char>(c)) * k_prime;
    }
    h = (h ^ 0U) * k_prime; // field separator: ("ab","c") != ("a","bc")
  };
  mix(p.name);
  for (const auto &s : profile_settings(p)) {
    mix(s.domain);
    mix(s.key);
    mix(s.value);
  }
  for (const auto &m : p.modules) {
    mix("module");
    mix(m.name);
    mix(m.required ? "required" : "optional");
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>((h >> 32U) ^ (h & 0xffffffffU)));
  return buf;
}

} // namespace mltune
