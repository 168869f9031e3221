// mltunectl persist [--profile P] [--pool NODE:SIZE]... [--user-quota SIZE]
//                   [--feeder CPUS | --no-feeder] [--watcher on|off] [--replace] | --remove
#include "cli.hpp"

#include "mltune/config.hpp"
#include "mltune/parse.hpp"
#include "mltune/persist.hpp"
#include "mltune/pool.hpp"

#include <algorithm>
#include <ostream>

namespace mltune::cli {

namespace {

struct PersistArgs {
  std::string profile;
  std::vector<std::string> pool;
  std::string user_quota;
  std::string feeder;
  bool feeder_given = false;
  bool no_feeder = false;
  std::string watcher;
  bool replace = false;
  bool remove = false;
};

void run_remove(Context &ctx) {
  const Sysroot root = ctx.root();
  if (ctx.dry_run && ctx.json) {
    nlohmann::json files = nlohmann::json::array({std::string(k_config_file)});
    for (const auto &f : legacy_persist_files()) {
      files.push_back(std::string(f));
    }
    return ctx.emit({{"dry_run", true}, {"would_remove_if_marked", files}});
  }
  if (ctx.dry_run) {
    *ctx.out << "would remove " << k_config_file << " and the files of older versions of persist:";
    for (const auto &f : legacy_persist_files()) {
      *ctx.out << " " << f;
    }
    *ctx.out << " (those that carry the marker line)\n";
    return;
  }
  auto removed = remove_persist(root);
  if (!removed) {
    return ctx.fail(removed.error());
  }
  if (ctx.json) {
    return ctx.emit({{"removed", *removed}});
  }
  for (const auto &f : *removed) {
    *ctx.out << "removed " << f << "\n";
  }
  if (removed->empty()) {
    *ctx.out << "nothing to remove\n";
  }
}

// The configuration persist writes: the one on the node, with the options' changes.
Result<NodeConfig> build(Context &ctx, const PersistArgs &a) {
  const Sysroot root = ctx.root();
  NodeConfig cfg;
  if (root.exists(k_config_file)) {
    auto old = load_config(root);
    if (!old) {
      if (!a.replace) {
        return with_context(old.error(), "the current configuration does not load (--replace writes a new one)");
      }
    } else {
      cfg = std::move(*old);
    }
  }
  if (!a.profile.empty()) {
    cfg.profile = a.profile;
  } else if (!cfg.profile) {
    cfg.profile = ctx.default_profile();
  }
  if (!a.pool.empty()) {
    cfg.pool.clear();
    for (const auto &spec : a.pool) {
      const size_t colon = spec.find(':');
      const auto node = parse_int<int>(std::string_view(spec).substr(0, colon));
      if (colon == std::string::npos || !node || *node < 0) {
        return input_error("--pool '" + spec + "': expected NODE:SIZE, e.g. 0:512M");
      }
      auto pages = parse_pool_size(spec.substr(colon + 1));
      if (!pages) {
        return with_context(pages.error(), "--pool '" + spec + "'");
      }
      cfg.pool.emplace_back(*node, *pages);
    }
    std::ranges::sort(cfg.pool);
  }
  if (!a.user_quota.empty()) {
    auto pages = parse_pool_size(a.user_quota);
    if (!pages) {
      return with_context(pages.error(), "--user-quota");
    }
    cfg.user_quota = *pages;
  }
  if (a.no_feeder) {
    cfg.feeder_cpus.reset();
  } else if (a.feeder_given) {
    cfg.feeder_cpus = a.feeder == "off" ? "" : a.feeder;
  }
  if (!a.watcher.empty()) {
    cfg.watcher = a.watcher == "on";
  }
  return cfg;
}

void run_persist(Context &ctx, const PersistArgs &a) {
  if (a.remove) {
    return run_remove(ctx);
  }
  auto cfg = build(ctx, a);
  if (!cfg) {
    return ctx.fail(cfg.error());
  }
  if (ctx.dry_run) {
    if (ctx.json) {
      return ctx.emit({{"dry_run", true}, {"file", std::string(k_config_file)}, {"content", render_config(*cfg)}});
    }
    *ctx.out << "==> " << k_config_file << " (not written: --dry-run)\n" << render_config(*cfg);
    return;
  }
  auto res = persist_config(*cfg, ctx.root(), a.replace);
  if (!res) {
    return ctx.fail(res.error());
  }
  if (ctx.json) {
    return ctx.emit({{"profile", cfg->profile.value_or("")}, {"written", res->written}, {"removed", res->removed}});
  }
  for (const auto &f : res->removed) {
    *ctx.out << "removed " << f << " (written by an older mltunectl persist)\n";
  }
  for (const auto &f : res->written) {
    *ctx.out << "wrote " << f << "\n";
  }
  *ctx.out << "mltune.service applies it at every boot; 'systemctl reload-or-restart mltune' applies it now\n";
}

} // namespace

void register_persist(CLI::App &app, Context &ctx) {
  auto a = std::make_shared<PersistArgs>();
  auto *cmd = app.add_subcommand("persist", "Write the node configuration /etc/mltune/mltune.toml that "
                                            "mltune.service applies at every boot");
  cmd->add_option("-p,--profile", a->profile, "Profile applied at boot (default: the configured one, else training)");
  cmd->add_option("--pool", a->pool, "Pool reservation NODE:SIZE (repeatable; replaces the configured ones)")
      ->type_name("NODE:SIZE");
  cmd->add_option("--user-quota", a->user_quota, "Pool memory one user may map, SIZE (0: no limit)");
  auto *feeder =
      cmd->add_option("--feeder", a->feeder, "Feeder cores: a cpulist, feeder, feeder:N, or off")->type_name("CPUS");
  cmd->add_flag("--no-feeder", a->no_feeder, "Leave the feeder cores out of the configuration")->excludes(feeder);
  cmd->add_option("--watcher", a->watcher, "Run the thread scheduling watcher at boot")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--replace", a->replace, "Overwrite a configuration written by hand (its comments are lost)");
  cmd->add_flag("--remove", a->remove, "Remove the configuration (and files of older versions of persist)");
  cmd->callback([&ctx, a, feeder] {
    a->feeder_given = feeder->count() > 0;
    run_persist(ctx, *a);
  });
}

} // namespace mltune::cli
