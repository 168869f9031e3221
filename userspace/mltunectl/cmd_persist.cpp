// mltunectl persist [--profile P] [--remove]
#include "cli.hpp"

#include "mltune/persist.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

void run_persist(Context &ctx, std::string name, bool remove) {
  const Sysroot root = ctx.root();
  if (remove) {
    if (ctx.dry_run) {
      for (const auto &f : persist_files(Profile{})) {
        *ctx.out << "would remove " << f.path << "\n";
      }
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
    return;
  }
  if (name.empty()) {
    name = ctx.default_profile();
  }
  auto p = ProfileLoader(&root).load(name);
  if (!p) {
    return ctx.fail(p.error());
  }
  if (ctx.dry_run) {
    for (const auto &f : persist_files(*p)) {
      *ctx.out << "==> " << f.path << (f.content.empty() ? " (symlink to ../mltune.service)\n" : "\n") << f.content;
    }
    return;
  }
  auto written = persist(*p, root);
  if (!written) {
    return ctx.fail(written.error());
  }
  if (ctx.json) {
    return ctx.emit({{"profile", p->name}, {"written", *written}});
  }
  for (const auto &f : *written) {
    *ctx.out << "wrote " << f << "\n";
  }
  *ctx.out << "profile '" << p->name << "' is applied at boot by mltune.service (run systemctl daemon-reload)\n";
}

} // namespace

void register_persist(CLI::App &app, Context &ctx) {
  auto name = std::make_shared<std::string>();
  auto remove = std::make_shared<bool>(false);
  auto *cmd = app.add_subcommand("persist", "Write sysctl.d, limits.d and mltune.service so a profile "
                                            "survives reboots");
  cmd->add_option("-p,--profile", *name, "Profile to apply at boot (default: persisted default, else training)");
  cmd->add_flag("--remove", *remove, "Remove everything persist wrote");
  cmd->callback([&ctx, name, remove] { run_persist(ctx, *name, *remove); });
}

} // namespace mltune::cli
