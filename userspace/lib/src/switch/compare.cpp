// Comparing a node with a profile, and two profiles with each other.
#include "mltune/compare.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>

namespace mltune {

std::string_view to_string(KnobState s) {
  switch (s) {
  case KnobState::match: return "match";
  case KnobState::differs: return "differs";
  case KnobState::missing: return "missing";
  case KnobState::unreadable: return "unreadable";
  }
  return "?";
}

bool values_equal(std::string_view current, std::string_view wanted) {
  return normalize_value(current) == normalize_value(wanted);
}

std::vector<KnobStatus> compare(const Profile &profile, const Sysroot &root) {
  std::vector<KnobStatus> out;
  out.reserve(profile.knobs.size());
  for (const auto &k : profile.knobs) {
    KnobStatus st{&k, {}, KnobState::match, {}};
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

std::vector<ProfileDiffEntry> diff_profiles(const Profile &a, const Profile &b) {
  std::vector<ProfileDiffEntry> out;
  for (const auto &k : a.knobs) {
    const Knob *o = b.find(k.key);
    if (o == nullptr) {
      out.push_back({k.key, k.wanted(), {}});
    } else if (k.cmp != o->cmp || !values_equal(k.value, o->value)) {
      out.push_back({k.key, k.wanted(), o->wanted()});
    }
  }
  for (const auto &k : b.knobs) {
    if (a.find(k.key) == nullptr) {
      out.push_back({k.key, {}, k.wanted()});
    }
  }
  return out;
}

} // namespace mltune
