// Kernel backend: drives the mltune module through /sys/kernel/mltune.
// All knowledge of the module's sysfs ABI lives in this file
// (Documentation/ABI/testing/sysfs-kernel-mltune).
#include "mltune/switch.hpp"

#include "mltune/parse.hpp"
#include "switch/undo.hpp"

#include <algorithm>

namespace mltune {

namespace {

// A file of the module's sysfs directory: kmod_path("/profile").
std::string kmod_path(std::string_view rel) {
  return std::string(k_kmod_dir).append(rel);
}

std::vector<std::string> sorted_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string line = normalize_value(text.substr(pos, end - pos));
    if (!line.empty()) {
      out.push_back(std::move(line));
    }
    pos = end + 1;
  }
  std::ranges::sort(out);
  return out;
}

std::string last_switch(const Sysroot &root) {
  auto t = root.read(kmod_path("/last_switch"));
  return t ? normalize_value(*t) : std::string();
}

// Loads `profile` into the module unless an identical one is loaded already.
// An existing profile (even the active one) is updated by staging the new
// knob list and committing it; a new one is created with "+NAME" first.
Status load_profile(const Profile &profile, const Sysroot &root) {
  const std::string dir = kmod_path("/profiles/") + profile.name;
  const std::string list = kernel_knob_list(profile, root);
  const bool exists = root.is_dir(dir);
  if (exists) {
    auto loaded = root.read(dir + "/knobs");
    if (loaded && sorted_lines(*loaded) == sorted_lines(list)) {
      return {};
    }
  } else if (auto st = root.write_value(kmod_path("/profiles/control"), "+" + profile.name); !st) {
    return Error{Errc::failed, "module: cannot create profile '" + profile.name + "': " + st.error().message,
                 st.error().sys_errno};
  }
  Status st = root.write_value(dir + "/knobs", list);
  if (st) {
    st = root.write_value(dir + "/state", "commit");
  }
  if (!st) {
    if (!exists) {
      (void)root.write_value(kmod_path("/profiles/control"), "-" + profile.name);
    }
    return Error{Errc::failed, "module: loading profile '" + profile.name + "' failed: " + st.error().message,
                 st.error().sys_errno};
  }
  return {};
}

Result<SwitchReport> activate(const std::string &name, const Sysroot &root) {
  if (auto st = root.write_value(kmod_path("/profile"), name); !st) {
    std::string detail = last_switch(root);
    return Error{Errc::failed,
                 "module: switch to '" + name + "' failed: " + st.error().message +
                     (detail.empty() ? "" : " (last_switch: " + detail + ")"),
                 st.error().sys_errno};
  }
  return SwitchReport{Backend::kernel, name, {}, {}, last_switch(root), {}};
}

} // namespace

bool kernel_backend_present(const Sysroot &root) {
  return root.is_dir(std::string(k_kmod_dir));
}

std::string kernel_knob_list(const Profile &profile, const Sysroot &root) {
  std::string out;
  for (const auto &k : profile.knobs) {
    // optional = "missing": '?' only where this kernel lacks the file, so
    // that where it exists a refused value fails the switch.
    const bool skip = k.optional || (k.if_present && !root.exists(k.path()));
    const char *bound = k.cmp == KnobCmp::at_least ? ">" : k.cmp == KnobCmp::at_most ? "<" : "";
    out += (skip ? "?" : "") + std::string(bound) + k.path() + " " + k.value + "\n";
  }
  return out;
}

Result<SwitchReport> switch_kernel(const Profile &profile, const Sysroot &root) {
  if (profile.name == k_baseline) {
    return input_error("'baseline' is reserved");
  }
  if (auto st = load_profile(profile, root); !st) {
    return st.error();
  }
  auto rep = activate(profile.name, root);
  if (!rep) {
    return rep;
  }
  // The module's record says which knobs it skipped ("skipped=PATH errno=E")
  // and which bounds it kept ("kept=PATH"); the rest were written.
  const std::string full = root.read(kmod_path("/last_switch")).value_or("");
  for (const auto &k : profile.knobs) {
    const std::string path = k.path();
    if (full.find("\nkept=" + path + "\n") != std::string::npos) {
      rep->kept.push_back(k.key);
    } else if (const auto at = full.find("\nskipped=" + path + " "); at != std::string::npos) {
      const auto end = full.find('\n', at + 1);
      rep->skipped.push_back(k.key + ": " + full.substr(at + 9 + path.size(), end - at - 9 - path.size()));
    } else {
      rep->written.push_back(k.key);
    }
  }
  return rep;
}

Result<SwitchReport> restore_baseline_kernel(const Sysroot &root) {
  return activate(std::string(k_baseline), root);
}

Result<std::uint64_t> kernel_generation(const Sysroot &root) {
  auto g = root.read_value(kmod_path("/generation"));
  if (!g) {
    return g.error();
  }
  const auto n = parse_int<std::uint64_t>(*g);
  if (!n) {
    return failure(kmod_path("/generation") + ": not a number: '" + *g + "'");
  }
  return *n;
}

Result<SwitchReport> kernel_activate(const Sysroot &root, const std::string &name) {
  return activate(name, root);
}

namespace detail {

Result<ActiveProfile> kernel_active(const Sysroot &root) {
  auto name = root.read(kmod_path("/profile"));
  if (!name) {
    return name.error();
  }
  ActiveProfile a{normalize_value(*name), {}};
  if (a.name == "none") {
    a.name.clear();
  }
  if (!a.name.empty() && a.name != k_baseline) {
    auto list = root.read(kmod_path("/profiles/") + a.name + "/knobs");
    if (!list) {
      return list.error();
    }
    a.knob_list = std::move(*list);
  }
  return a;
}

Status kernel_reactivate(const Sysroot &root, const std::string &profile, const ActiveProfile &previous) {
  const std::string target = previous.name.empty() ? std::string(k_baseline) : previous.name;
  if (target == profile && !previous.knob_list.empty()) {
    const std::string dir = kmod_path("/profiles/") + profile;
    auto loaded = root.read(dir + "/knobs");
    if (!loaded || sorted_lines(*loaded) != sorted_lines(previous.knob_list)) {
      Status st = root.write_value(dir + "/knobs", previous.knob_list);
      if (st) {
        st = root.write_value(dir + "/state", "commit");
      }
      if (!st) {
        return with_context(st.error(), "module: reloading the previous knob list of '" + profile + "'");
      }
    }
  }
  auto rep = activate(target, root);
  if (!rep) {
    return rep.error();
  }
  return {};
}

} // namespace detail

} // namespace mltune
