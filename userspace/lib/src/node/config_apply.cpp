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
// domains to put back.  The values to put back are the node baseline's
// (base/baseline.hpp), recorded by each domain's step (the NIC settings,
// the pool).  Lives in /run: a reboot starts from the baseline.
struct ConfigState {
  std::string profile; // last profile applied ("" = none)
  bool knobs = false;  // a profile was applied
  bool feeder = false; // the feeder was turned on
  // Written by earlier versions only (the pool as the first apply found
  // it): moved to the pool's record of the node baseline when read.
  std::vector<std::pair<int, std::uint64_t>> pool;
  std::optional<std::uint64_t> user_quota;
};

void to_json(nlohmann::json &j, const ConfigState &s) {
  j = {{"profile", s.profile}, {"knobs", s.knobs}, {"feeder", s.feeder}};
  if (!s.pool.empty()) {
    j["pool"] = s.pool;
  }
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

// A state file of an earlier version kept the pool as the first apply found
// it; that is the pool's record of the node baseline now (PoolStep records
// it).
Status migrate_pool(const Sysroot &root, const ConfigState &s) {
  if (s.pool.empty() && !s.user_quota) {
    return {};
  }
  return record_pool_baseline(root, PoolRecord{s.pool, s.user_quota});
}

// The state after a successful apply: domains add up.
ConfigState merged(ConfigState s, const NodeConfig &cfg) {
  if (cfg.profile) {
    s.profile = *cfg.profile;
    s.knobs = true;
  }
  s.feeder = s.feeder || (cfg.feeder_cpus && !cfg.feeder_cpus->empty());
  s.pool.clear(); // migrated
  s.user_quota.reset();
  return s;
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
      auto back = detail::revert_config_locked(root);
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
    rep.lines.push_back(s->summary());
  }
  auto old = k_state.load(root);
  if (old && *old) {
    if (auto st = migrate_pool(root, **old); !st) {
      return with_context(st.error(),
                          "the configuration was applied, but recording the pool for 'config revert' failed");
    }
  }
  const ConfigState state = merged(old && *old ? **old : ConfigState{}, cfg);
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
  return detail::revert_config_locked(root);
}

Status detail::forget_config(const Sysroot &root) {
  auto loaded = k_state.load(root);
  if (!loaded) {
    return loaded.error();
  }
  if (*loaded) {
    if (auto st = migrate_pool(root, **loaded); !st) {
      return st;
    }
  }
  return k_state.remove(root);
}

Result<ConfigReport> detail::revert_config_locked(const Sysroot &root) {
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
  if (auto st = migrate_pool(root, s); !st) {
    return st.error();
  }
  // The domains an apply takes, newest first (the NIC step placed IRQs
  // after the feeder had steered them; the knobs go back before the
  // modules they needed); the feeder and the knobs only where an apply of
  // this boot changed them.
  detail::NodeDomains domains(root, nullptr, Backend::automatic, {}, nullptr);
  std::vector<std::string> failed;
  for (Step *step : domains.steps(detail::NodeOp::off)) {
    const std::string_view name = step->name();
    if (!detail::NodeDomains::takes(name, detail::NodeOp::config) || (name == "feeder" && !s.feeder) ||
        ((name == "knobs" || name == "modules") && !s.knobs)) {
      continue;
    }
    const DomainState d = step->off(false);
    if (d.state == "failed") {
      failed.push_back(d.domain + ": " + d.detail);
    } else if (d.state != "off") {
      rep.restored.push_back(d.domain + ": " + d.detail);
    }
  }
  if (s.knobs && choose_backend(root, Backend::automatic) == Backend::kernel) {
    (void)note_followed(root, std::string(k_baseline));
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
