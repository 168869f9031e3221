// mltunectl config show|check|apply|revert|watcher  (the node configuration,
// /etc/mltune/mltune.toml; mltune.service and mltune-watch.service run these)
#include "cli.hpp"

#include "mltune/config.hpp"
#include "mltune/feeder.hpp"
#include "mltune/modules.hpp"
#include "mltune/pool.hpp"

#include <filesystem>
#include <ostream>

namespace mltune::cli {

namespace {

struct ConfigArgs {
  std::string file = std::string(k_config_file);
  bool reload = false;
  bool syntax_only = false; // check: not against this node
  std::string field;        // show --field
};

nlohmann::json config_json(const NodeConfig &c) {
  nlohmann::json pool = nlohmann::json::array();
  for (const auto &[node, pages] : c.pool) {
    pool.push_back({{"node", node}, {"pages", pages}, {"bytes", pages * k_pool_page_size}});
  }
  return {{"source", c.source},
          {"profile", c.profile ? nlohmann::json(*c.profile) : nlohmann::json(nullptr)},
          {"watcher", c.watcher},
          {"pool", pool},
          {"user_quota", c.user_quota ? nlohmann::json(*c.user_quota) : nlohmann::json(nullptr)},
          {"feeder_cpus", c.feeder_cpus ? nlohmann::json(*c.feeder_cpus) : nlohmann::json(nullptr)},
          {"feeder_mechanism", c.feeder_mechanism},
          {"feeder_partition", c.feeder_partition},
          {"module_allow", c.module_allow ? nlohmann::json(*c.module_allow) : nlohmann::json(nullptr)},
          {"module_allow_effective", c.module_allow ? *c.module_allow : default_module_allowlist()}};
}

// A file given on the command line is a host path; the default one is below --sysroot.
Result<NodeConfig> load(Context &ctx, const ConfigArgs &a) {
  if (a.file == k_config_file) {
    return load_config(ctx.root());
  }
  return load_config(Sysroot("/"), std::filesystem::absolute(a.file).string());
}

void run_show(Context &ctx, const ConfigArgs &a) {
  auto c = load(ctx, a);
  if (!c) {
    return ctx.fail(c.error());
  }
  if (emit_field(ctx, config_json(*c), a.field)) {
    return;
  }
  if (ctx.json) {
    return ctx.emit(config_json(*c));
  }
  auto &o = *ctx.out;
  o << "configuration: " << c->source << "\n"
    << "profile: " << c->profile.value_or("(not managed)") << "\n"
    << "watcher: " << (c->watcher ? "on" : "off") << "\n";
  if (c->pool.empty()) {
    o << "pool: (not managed)\n";
  }
  for (const auto &[node, pages] : c->pool) {
    o << "pool node " << node << ": " << pages << " pages (" << pages * (k_pool_page_size >> 20) << " MiB)\n";
  }
  o << "pool user quota: "
    << (c->user_quota ? (*c->user_quota == 0 ? "none" : std::to_string(*c->user_quota) + " pages") : "(not managed)")
    << "\n";
  std::string feeder = "(not managed)";
  if (c->feeder_cpus && c->feeder_cpus->empty()) {
    feeder = "off";
  } else if (c->feeder_cpus) {
    const std::string partition = c->feeder_partition == "root" ? "" : ", " + c->feeder_partition + " partition";
    feeder = *c->feeder_cpus + " (" + c->feeder_mechanism + partition + ")";
  }
  o << "feeder: " << feeder << "\n";
  const ModuleAllowlist allow{c->module_allow ? *c->module_allow : default_module_allowlist(), ""};
  o << "modules allowed: " << allow.listed() << (c->module_allow ? "" : " (default: the built-in profiles' modules)")
    << "\n";
}

void run_check(Context &ctx, const ConfigArgs &a) {
  auto c = load(ctx, a);
  if (!c) {
    return ctx.fail(c.error());
  }
  // The profile must load too: a typo there would fail the boot.
  if (c->profile) {
    const Sysroot root = ctx.root();
    if (auto p = ProfileLoader(&root).load(*c->profile); !p) {
      return ctx.fail(with_context(p.error(), c->source + ": profile '" + *c->profile + "'"));
    }
  }
  // Against this node's hardware, whatever state it is in (the module may
  // not be loaded yet, an interface may be down): the feeder CPUs are
  // online and leave housekeeping CPUs, the pool's NUMA nodes exist.
  if (!a.syntax_only) {
    const Sysroot root = ctx.root();
    const std::string here = c->source + " on this node (--syntax-only for another node's file)";
    if (c->feeder_cpus && !c->feeder_cpus->empty()) {
      auto cpus = resolve_feeder_cpus(root, *c->feeder_cpus, "[feeder] cpus");
      if (!cpus) {
        return ctx.fail(input_error(with_context(cpus.error(), here).message));
      }
      if (auto hk = feeder_housekeeping(root, cpus->first, cpus->second); !hk) {
        return ctx.fail(input_error(with_context(hk.error(), here + ": [feeder] cpus").message));
      }
    }
    for (const auto &[node, pages] : c->pool) {
      if (!root.is_dir("/sys/devices/system/node/node" + std::to_string(node))) {
        return ctx.fail(
            input_error(here + ": [pool] reserve: NUMA node " + std::to_string(node) + " does not exist here"));
      }
    }
  }
  const char *what = a.syntax_only ? "syntax and profile" : "against this node";
  if (ctx.json) {
    return ctx.emit({{"ok", true}, {"checked", what}, {"config", config_json(*c)}});
  }
  *ctx.out << c->source << ": ok (" << what << ")\n";
}

void run_apply(Context &ctx, const ConfigArgs &a) {
  auto c = load(ctx, a);
  if (!c) {
    return ctx.fail(c.error());
  }
  ConfigApplyOptions opt;
  opt.baseline_on_failure = !a.reload;
  opt.dry_run = ctx.dry_run;
  opt.progress = ctx.step_progress();
  auto r = apply_config(ctx.root(), *c, opt);
  if (!r) {
    return ctx.fail(r.error());
  }
  if (ctx.json) {
    return ctx.emit({{"config", c->source}, {"dry_run", ctx.dry_run}, {"applied", r->applied}, {"lines", r->lines}});
  }
  *ctx.out << (ctx.dry_run ? "would apply " : "applied ") << c->source << "\n";
  for (const auto &l : r->lines) {
    *ctx.out << "  " << l << "\n";
  }
  if (c->empty()) {
    *ctx.out << "  (the configuration names nothing to apply)\n";
  }
}

void run_revert(Context &ctx) {
  if (ctx.dry_run) {
    *ctx.out << "would put back what 'config apply' changed since boot (" << k_config_state << ")\n";
    return;
  }
  auto r = revert_config(ctx.root());
  if (!r) {
    return ctx.fail(r.error());
  }
  if (ctx.json) {
    return ctx.emit({{"restored", r->restored}});
  }
  for (const auto &l : r->lines) {
    *ctx.out << l << "\n";
  }
}

void run_watcher(Context &ctx, const ConfigArgs &a) {
  auto c = load(ctx, a);
  if (!c) {
    return ctx.fail(c.error());
  }
  if (ctx.json) {
    ctx.emit({{"watcher", c->watcher}});
  } else {
    *ctx.out << "watcher: " << (c->watcher ? "on" : "off") << "\n";
  }
  ctx.rc = c->watcher ? k_exit_ok : k_exit_failed;
}

} // namespace

void register_config(CLI::App &app, Context &ctx) {
  auto a = std::make_shared<ConfigArgs>();
  auto *cmd = app.add_subcommand("config", "The node configuration /etc/mltune/mltune.toml that mltune.service "
                                           "applies at boot");
  cmd->require_subcommand(1);
  auto file = [a](CLI::App *sub) {
    sub->add_option("-c,--config", a->file, "Configuration file (default /etc/mltune/mltune.toml below --sysroot)")
        ->type_name("FILE");
  };
  auto *show = cmd->add_subcommand("show", "Print the configuration as mltune.service reads it");
  file(show);
  add_field_option(
      show, a->field,
      {"source", "profile", "watcher", "user_quota", "feeder_cpus", "feeder_mechanism", "feeder_partition"});
  show->callback([&ctx, a] { run_show(ctx, *a); });
  auto *check = cmd->add_subcommand("check", "Validate the configuration and its profile, and its feeder CPUs and pool "
                                             "nodes against this node (exit 2 on an error)");
  file(check);
  check->add_flag("--syntax-only", a->syntax_only,
                  "Check the file and its profile only, not against this node (a file for another node)");
  check->callback([&ctx, a] { run_check(ctx, *a); });
  auto *apply = cmd->add_subcommand("apply", "Apply it as one transaction: profile, NIC settings, pool, feeder "
                                             "cores (mltune.service)");
  file(apply);
  apply->add_flag("--reload", a->reload,
                  "On failure keep the node as it was before this apply instead of on its baseline");
  apply->callback([&ctx, a] { run_apply(ctx, *a); });
  auto *revert = cmd->add_subcommand("revert", "Put back what 'config apply' changed since boot: knobs on their "
                                               "baseline, feeder off, pool as before");
  revert->callback([&ctx] { run_revert(ctx); });
  auto *watcher = cmd->add_subcommand("watcher", "Exit 0 when the configuration turns the watcher on, else 1 "
                                                 "(mltune-watch.service's ExecCondition)");
  file(watcher);
  watcher->callback([&ctx, a] { run_watcher(ctx, *a); });
}

} // namespace mltune::cli
