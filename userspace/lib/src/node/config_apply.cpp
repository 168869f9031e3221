// Applying and reverting the node configuration (config.hpp): one
// transaction over the profile's KnobStep and NicStep, the PoolStep and the
// FeederStep (feeder.hpp), and a state file that says what to put back.
#include "mltune/config.hpp"

#include "base/baseline.hpp"
#include "base/state_file.hpp"
#include "mltune/modules.hpp"
#include "mltune/node.hpp"
#include "mltune/pool.hpp"
#include "mltune/switch.hpp"
#include "node/config_revert.hpp"
#include "node/domains.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <ranges>

namespace mltune {

namespace {

// What the applies of this boot changed, as revert_config() needs it: which
// domains to put back, and the pool as the first apply found it.  The NIC
// settings are in the node baseline (base/baseline.hpp), recorded by the
// NIC step.  Lives in /run: a reboot starts from the baseline.
struct ConfigState {
  std::string profile;                             // last profile applied ("" = none)
  bool knobs = false;                              // a profile was applied
  bool feeder = false;                             // the feeder was turned on
  std::vector<std::pair<int, std::uint64_t>> pool; // node, pages before the first apply
  std::optional<std::uint64_t> user_quota;         // quota before the first apply
};

void to_json(nlohmann::json &j, const ConfigState &s) {
  j = {{"profile", s.profile}, {"knobs", s.knobs}, {"feeder", s.feeder}, {"pool", s.pool}};
  if (s.user_quota) {
    j["user_quota"] = *s.user_quota;
  }
}

void from_json(const nlohmann::json &j, ConfigState &s) {
  s.profile = j.value("profile", "");
  s.knobs = j.value("knobs", false);
  s.feeder = j.value("feeder", false);
  s.pool = j.value("pool", std::vector<std::pair<int, std::uint64_t>>{});
  if (j.contains("user_quota")) {
    s.user_quota = j.at("user_quota").get<std::uint64_t>();
  }
}

constexpr StateFile<ConfigState> k_state{k_config_state, 1, false};

// The state after a successful apply: domains add up, the pool keeps the
// values the first apply of the boot found.
ConfigState merged(ConfigState s, const NodeConfig &cfg, const PoolStep *pool) {
  if (cfg.profile) {
    s.profile = *cfg.profile;
    s.knobs = true;
  }
  s.feeder = s.feeder || (cfg.feeder_cpus && !cfg.feeder_cpus->empty());
  if (pool == nullptr) {
    return s;
  }
  for (const auto &[node, pages] : pool->before()) {
    if (std::none_of(s.pool.begin(), s.pool.end(), [&](const auto &p) { return p.first == node; })) {
      s.pool.emplace_back(node, pages);
    }
  }
  if (cfg.user_quota && !s.user_quota) {
    s.user_quota = pool->quota_before();
  }
  return s;
}

// The NIC settings back to their values before mltune first changed them
// (the node baseline); nothing to do without a record.
Result<std::size_t> revert_nic(const Sysroot &root) {
  auto b = detail::load_baseline(root);
  if (!b) {
    return b.error();
  }
  if (!b->has("nic")) {
    return std::size_t{0};
  }
  auto feeders = nic_feeder_cpus(root);
  if (!feeders) {
    return feeders.error();
  }
  auto be = make_live_nic_backend(root, *feeders);
  if (!be) {
    return be.error();
  }
  auto rep = restore_nic_baseline(root, **be);
  if (!rep) {
    return rep.error();
  }
  return rep->applied.size();
}

std::string knob_line(const KnobStep &knobs) {
  const SwitchReport &r = knobs.report();
  std::string s = "knobs: switched to '" + r.profile + "' (" + std::string(to_string(r.backend)) + " backend, " +
                  std::to_string(r.written.size()) + " knobs written";
  s += r.skipped.empty() ? ")" : ", " + std::to_string(r.skipped.size()) + " optional skipped)";
  return s;
}

std::string nic_line(const NicStep &nic) {
  if (!nic.applied() || nic.applied()->applied.empty()) {
    return "nic: nothing to change";
  }
  std::vector<std::string> devs;
  for (const auto &c : nic.applied()->applied) {
    if (!c.ifname.empty() && std::find(devs.begin(), devs.end(), c.ifname) == devs.end()) {
      devs.push_back(c.ifname);
    }
  }
  std::string names;
  for (const auto &d : devs) {
    names += (names.empty() ? "" : ", ") + d;
  }
  return "nic: " + std::to_string(nic.applied()->applied.size()) + " settings changed (" + names + ")";
}

} // namespace

Result<ConfigReport> apply_config(const Sysroot &root, const NodeConfig &cfg, const ConfigApplyOptions &opt) {
  auto lock = NodeLock::acquire_if(root, !opt.dry_run);
  if (!lock) {
    return lock.error();
  }
  // Every failure: the transaction has put back what it applied; a start
  // also puts back what the earlier applies of this boot did.
  auto failed = [&](Error e) -> Error {
    if (opt.baseline_on_failure && !opt.dry_run) {
      auto back = detail::revert_config_locked(root, false);
      e.message += back ? "; the node is back on its baseline"
                        : "; putting the node back on its baseline failed: " + back.error().message;
    }
    return e;
  };
  std::optional<Profile> profile;
  if (cfg.profile) {
    auto p = ProfileLoader(&root).load(*cfg.profile);
    if (!p) {
      return failed(with_context(p.error(), cfg.source + ": profile '" + *cfg.profile + "'"));
    }
    profile = std::move(*p);
  }
  const Backend backend = choose_backend(root, Backend::automatic);
  detail::NodeDomains domains(root, profile ? &*profile : nullptr, backend, {}, &cfg);
  const std::vector<Step *> steps = domains.steps(detail::NodeOp::config);
  TransactionOptions t;
  t.dry_run = opt.dry_run;
  t.progress = opt.progress;
  auto done = run_transaction(steps, t);
  if (!done) {
    return failed(done.error());
  }
  if (profile && !opt.dry_run) {
    if (auto st = record_profile(root, *profile); !st) {
      return failed(with_context(st.error(), "recording the switched profile"));
    }
  }
  if (profile && !opt.dry_run && backend == Backend::kernel) {
    // The follower the module's uevent wakes has nothing left to do.
    if (auto st = note_followed(root, profile->name); !st) {
      return failed(with_context(st.error(), "recording the switch for mltunectl follow"));
    }
  }
  ConfigReport rep;
  rep.applied = done->applied;
  if (opt.dry_run) {
    for (const Step *s : steps) {
      rep.lines.push_back(std::string(s->name()) + ": planned");
    }
    return rep;
  }
  for (const Step *s : steps) {
    const std::string_view name = s->name();
    if (name == "knobs") {
      rep.lines.push_back(knob_line(domains.knobs()));
    } else if (name == "nic") {
      rep.lines.push_back(nic_line(domains.nic()));
    } else if (name == "pool") {
      rep.lines.push_back(domains.pool()->summary());
    } else if (name == "feeder") {
      rep.lines.push_back(domains.feeder()->summary());
    } else if (name == "modules") {
      std::string l = "modules: " + std::to_string(domains.modules().loaded().size()) + " loaded";
      for (const auto &m : domains.modules().skipped()) {
        l += "; skipped " + m;
      }
      rep.lines.push_back(l);
    }
  }
  auto old = k_state.load(root);
  const ConfigState state = merged(old && *old ? **old : ConfigState{}, cfg, domains.pool());
  if (auto st = k_state.save(root, state); !st) {
    return with_context(st.error(), "the configuration was applied, but recording it for 'config revert' failed");
  }
  return rep;
}

Result<ConfigReport> revert_config(const Sysroot &root) {
  auto lock = NodeLock::acquire(root);
  if (!lock) {
    return lock.error();
  }
  return detail::revert_config_locked(root, false);
}

Result<ConfigReport> detail::revert_config_locked(const Sysroot &root, bool pool_only) {
  auto loaded = k_state.load(root);
  if (!loaded) {
    return loaded.error();
  }
  ConfigReport rep;
  if (!*loaded) {
    rep.lines.emplace_back("nothing to put back: no configuration was applied since boot");
    return rep;
  }
  const ConfigState &s = **loaded;
  std::vector<std::string> failed;
  // The reverse of the apply order: pool, NIC settings, feeder, knobs (the
  // NIC step placed IRQs after the feeder had steered them).
  if ((!s.pool.empty() || s.user_quota) && !root.is_dir(k_kmod_dir)) {
    rep.restored.emplace_back("pool: the module is not loaded (unloading freed the pool)");
  } else {
    for (const auto &[node, pages] : s.pool) {
      if (auto r = pool_reserve(root, node, pages); !r) {
        failed.push_back("pool node" + std::to_string(node) + ": " + r.error().message);
      } else {
        rep.restored.push_back("pool: node" + std::to_string(node) + " " + std::to_string(pages) + " pages");
      }
    }
    if (s.user_quota) {
      if (auto st = pool_set_user_quota(root, *s.user_quota); !st) {
        failed.push_back("pool user_quota: " + st.error().message);
      } else {
        rep.restored.push_back("pool: user quota " + describe_quota(*s.user_quota));
      }
    }
  }
  if (pool_only) {
    if (auto st = k_state.remove(root); !st) {
      return st.error();
    }
    rep.lines = rep.restored;
    return rep;
  }
  if (auto n = revert_nic(root); !n) {
    failed.push_back("nic: " + n.error().message);
  } else if (*n > 0) {
    rep.restored.push_back("nic: " + std::to_string(*n) + " settings as before");
  }
  if (s.feeder) {
    if (auto st = feeder_off(root); !st) {
      failed.push_back("feeder off: " + st.error().message);
    } else {
      rep.restored.emplace_back("feeder: off");
    }
  }
  if (s.knobs) {
    const Backend b = choose_backend(root, Backend::automatic);
    auto r = b == Backend::kernel ? restore_baseline_kernel(root) : restore_baseline_direct(root);
    if (!r) {
      failed.push_back("knobs: " + r.error().message);
    } else {
      rep.restored.push_back("knobs: baseline (" + std::string(to_string(r->backend)) + " backend, " +
                             std::to_string(r->written.size()) + " knobs written)");
    }
    // The modules the profile loaded, after the knobs that used them.
    const Profile none;
    ModuleStep mods(none.modules, root);
    if (auto st = mods.baseline(); !st) {
      failed.push_back("modules: " + st.error().message);
    } else if (!mods.in_use().empty()) {
      rep.restored.push_back("modules: " + mods.in_use().front() + " (left loaded)");
    }
    if (b == Backend::kernel) {
      (void)note_followed(root, std::string(k_baseline));
    }
  }
  if (!failed.empty()) {
    std::string msg = "putting the node back on its baseline failed for " + std::to_string(failed.size()) + " part(s):";
    for (const auto &f : failed) {
      msg += " [" + f + "]";
    }
    return failure(msg);
  }
  if (auto st = k_state.remove(root); !st) {
    return st.error();
  }
  rep.lines = rep.restored;
  return rep;
}

} // namespace mltune
