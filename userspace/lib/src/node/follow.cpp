// Following the module: the user-space domains of its active profile after a
// plain write to /sys/kernel/mltune/profile (mltune/node.hpp).
#include "mltune/node.hpp"

#include "base/state_file.hpp"
#include "base/unique_fd.hpp"
#include "node/domains.hpp"

#include <algorithm>
#include <linux/netlink.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace mltune {

void to_json(nlohmann::json &j, const FollowRecord &r);
void from_json(const nlohmann::json &j, FollowRecord &r);
void to_json(nlohmann::json &j, const FollowState &s);
void from_json(const nlohmann::json &j, FollowState &s);

void to_json(nlohmann::json &j, const FollowRecord &r) {
  j = {{"generation", r.generation}, {"profile", r.profile}, {"result", r.result},
       {"error", r.error},           {"in_line", r.in_line}, {"detail", r.detail}};
}

void from_json(const nlohmann::json &j, FollowRecord &r) {
  r.generation = j.value("generation", std::uint64_t{0});
  r.profile = j.value("profile", "");
  r.result = j.value("result", "");
  r.error = j.value("error", "");
  r.in_line = j.value("in_line", "");
  r.detail = j.value("detail", "");
}

void to_json(nlohmann::json &j, const FollowState &s) {
  j = {{"last", s.last}};
  if (s.last_failure) {
    j["last_failure"] = *s.last_failure;
  }
}

void from_json(const nlohmann::json &j, FollowState &s) {
  s.last = j.at("last").get<FollowRecord>();
  if (j.contains("last_failure")) {
    s.last_failure = j.at("last_failure").get<FollowRecord>();
  }
}

namespace {

// Running-kernel state: lost with it, so not fsynced.
constexpr StateFile<FollowState> k_state{k_follow_state, 1, false};

bool is_baseline(const std::string &name) {
  return name.empty() || name == k_baseline;
}

Status save(const Sysroot &root, FollowState s, FollowRecord r) {
  if (r.result != "ok") {
    s.last_failure = r;
  }
  s.last = std::move(r);
  return k_state.save(root, s);
}

// The user-space domains back on their baseline (the module went to it).
Status to_baseline(const Sysroot &root, const NodeSeams &seams) {
  const Profile none;
  detail::NodeDomains domains(root, &none, Backend::kernel, seams);
  std::string failed;
  for (Step *s : domains.steps(detail::NodeOp::follow_reset)) {
    if (auto st = s->baseline(); !st) {
      failed += (failed.empty() ? "" : "; ") + std::string(s->name()) + ": " + st.error().message;
    }
  }
  return failed.empty() ? Status{} : Status(failure(failed));
}

} // namespace

Result<std::optional<FollowState>> follow_state(const Sysroot &root) {
  return k_state.load(root);
}

Status note_followed(const Sysroot &root, const std::string &profile) {
  if (!kernel_backend_present(root)) {
    return {};
  }
  auto g = kernel_generation(root);
  if (!g) {
    return g.error();
  }
  auto old = k_state.load(root);
  FollowState s = old && *old ? **old : FollowState{};
  return save(root, s, FollowRecord{*g, profile, "ok", {}, profile, "mltunectl applied it"});
}

Result<FollowState> follow_module(const Sysroot &root, const NodeSeams &seams) {
  if (!kernel_backend_present(root)) {
    return failure(std::string(k_kmod_dir) + " not found: the mltune module is not loaded");
  }
  auto lock = NodeLock::acquire(root);
  if (!lock) {
    return lock.error();
  }
  auto active = active_profile(root, Backend::kernel);
  if (!active) {
    return active.error();
  }
  auto gen = kernel_generation(root);
  if (!gen) {
    return gen.error();
  }
  auto old = k_state.load(root);
  if (!old) {
    return old.error();
  }
  FollowState state = *old ? **old : FollowState{};
  if (*old && state.last.generation == *gen) {
    return state; // followed already (or switched by mltunectl)
  }
  const std::string name = active->name;
  const std::string in_line = *old ? state.last.in_line : std::string(k_baseline);
  FollowRecord rec{*gen, is_baseline(name) ? std::string(k_baseline) : name, "ok", {}, {}, {}};

  if (is_baseline(name)) {
    if (auto st = to_baseline(root, seams); !st) {
      rec.result = "failed";
      rec.error = st.error().message;
      rec.in_line = in_line;
    } else {
      rec.in_line = std::string(k_baseline);
      rec.detail = "modules, NIC settings and thread policies back on their baseline";
    }
    if (auto st = save(root, state, rec); !st) {
      return st.error();
    }
    return FollowState{rec, rec.result == "ok" ? state.last_failure : std::optional<FollowRecord>(rec)};
  }

  const ProfileLoader loader(&root);
  const auto known = loader.list();
  const auto switched = recorded_profile(root);
  const bool from_file = switched && *switched && (*switched)->name == name && !(*switched)->file.empty();
  if (!from_file && std::ranges::find(known, name) == known.end()) {
    // A profile defined in the module only: it has no user-space domains.
    rec.in_line = name;
    rec.detail = "no profile file for '" + name + "': nothing beyond the kernel knobs";
    if (auto st = save(root, state, rec); !st) {
      return st.error();
    }
    return FollowState{rec, state.last_failure};
  }
  auto loaded = load_active_profile(root, name);
  const Profile broken;
  const Profile &prof = loaded ? *loaded : broken;
  // The knobs once more through the module, after the modules: the knob
  // list of this node ([cpu] and [block] settings expanded, knobs of a module
  // just loaded such as tcp_congestion_control = bbr) replaces the one the
  // plain write switched to where they differ.
  detail::NodeDomains domains(root, &prof, Backend::kernel, seams);
  // A profile file that does not load is a failure like any other.
  auto done =
      loaded ? run_transaction(domains.steps(detail::NodeOp::follow), {}) : Result<TransactionReport>(loaded.error());
  if (!done) {
    rec.error = done.error().message;
    rec.in_line = in_line;
    // The kernel part goes back to the profile user space is still in line
    // with; never when that is this very profile (no loop).
    if (in_line != name) {
      auto back = kernel_activate(root, in_line);
      rec.result = back ? "rolled-back" : "failed";
      rec.detail = back ? "the module is back on '" + in_line + "'"
                        : "putting the module back on '" + in_line + "' failed: " + back.error().message;
    } else {
      rec.result = "failed";
    }
  } else {
    rec.in_line = name;
    // What each domain did, in its own words.
    for (const Step *s : domains.steps(detail::NodeOp::follow)) {
      rec.detail += (rec.detail.empty() ? "" : "; ") + s->summary();
    }
    // Our own switch counts as followed.
    if (auto g2 = kernel_generation(root)) {
      rec.generation = *g2;
    }
  }
  if (auto st = save(root, state, rec); !st) {
    return st.error();
  }
  return FollowState{rec, rec.result == "ok" ? state.last_failure : std::optional<FollowRecord>(rec)};
}

Status follow_listen(const Sysroot &root, const std::function<bool()> &stop,
                     const std::function<void(const FollowState &)> &log) {
  if (!root.is_live()) {
    return input_error("follow --listen watches this machine's uevents; it does not take --sysroot");
  }
  UniqueFd fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT));
  if (!fd) {
    return sys_error("socket(NETLINK_KOBJECT_UEVENT)", errno);
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = 1;                                                                 // the kernel's uevents
  if (::bind(fd.get(), reinterpret_cast<const sockaddr *>(&sa), sizeof(sa)) != 0) { // NOLINT
    return sys_error("bind(NETLINK_KOBJECT_UEVENT)", errno);
  }
  auto run = [&]() {
    auto r = follow_module(root);
    if (r) {
      log(*r);
    } else {
      FollowState s;
      s.last.result = "failed";
      s.last.error = r.error().message;
      log(s);
    }
  };
  run();
  std::array<char, 8192> buf{};
  while (!stop()) {
    pollfd p{fd.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, 200);
    if (n < 0 && errno != EINTR) {
      return sys_error("poll", errno);
    }
    if (n <= 0) {
      continue;
    }
    const ssize_t len = ::recv(fd.get(), buf.data(), buf.size() - 1, 0);
    if (len <= 0) {
      continue;
    }
    const std::string_view msg(buf.data(), static_cast<size_t>(len));
    if (msg.find("MLTUNE_GENERATION=") != std::string_view::npos) {
      run();
    }
  }
  return {};
}

} // namespace mltune
