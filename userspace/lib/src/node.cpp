#include "mltune/node.hpp"

#include <algorithm>
#include <cerrno>
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
      st.state = values_equal(st.current, k.value) ? KnobState::match : KnobState::differs;
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
      out.push_back({k.key, k.value, {}});
    } else if (!values_equal(k.value, o->value)) {
      out.push_back({k.key, k.value, o->value});
    }
  }
  for (const auto &k : b.knobs) {
    if (a.find(k.key) == nullptr) {
      out.push_back({k.key, {}, k.value});
    }
  }
  return out;
}

Result<KernelVersion> kernel_version(const Sysroot &root) {
  auto rel = root.read_value("/proc/sys/kernel/osrelease");
  if (!rel) {
    return rel.error();
  }
  KernelVersion v;
  v.release = *rel;
  if (std::sscanf(v.release.c_str(), "%d.%d.%d", &v.major, &v.minor, &v.patch) < 2) { // NOLINT(cert-err34-c)
    return failure("/proc/sys/kernel/osrelease: cannot parse '" + v.release + "'");
  }
  return v;
}

namespace {

bool is_pid(std::string_view s) {
  return !s.empty() && s.size() < 12 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_irqbalance(const Sysroot &root, std::string_view pid) {
  if (!is_pid(pid)) {
    return false;
  }
  auto comm = root.read_value("/proc/" + std::string(pid) + "/comm");
  return comm && *comm == "irqbalance";
}

} // namespace

int irqbalance_pid(const Sysroot &root) {
  if (auto procs = root.read("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs")) {
    size_t pos = 0;
    while (pos < procs->size()) {
      const size_t end = std::min(procs->find('\n', pos), procs->size());
      const std::string_view pid(procs->data() + pos, end - pos);
      if (is_irqbalance(root, pid)) {
        return std::stoi(std::string(pid));
      }
      pos = end + 1;
    }
  }
  static constexpr std::string_view k_programs[] = {"/usr/sbin/irqbalance", "/sbin/irqbalance",
                                                    "/usr/local/sbin/irqbalance", "/usr/bin/irqbalance"};
  bool installed = false;
  for (const auto p : k_programs) {
    installed = installed || root.exists(p);
  }
  if (!installed) {
    return 0;
  }
  for (const auto &pid : root.list_dir("/proc")) {
    if (is_irqbalance(root, pid)) {
      return std::stoi(pid);
    }
  }
  return 0;
}

} // namespace mltune
