// mltunectl boot show|apply|verify|remove [--profile P] [--isolate SPEC]
#include "cli.hpp"
#include "topology_json.hpp"

#include "mltune/boot.hpp"

#include <memory>
#include <optional>
#include <ostream>

namespace mltune::cli {

namespace {

struct BootArgs {
  std::string profile;
  std::string isolate = "feeder";
  PlanOptions plan;
};

struct Computed {
  Profile profile;
  CpuPlan plan;
  std::vector<BootParam> params;
};

std::optional<Computed> compute(Context &ctx, const BootArgs &a) {
  const Sysroot root = ctx.root();
  auto prof = ProfileLoader(&root).load(a.profile.empty() ? ctx.default_profile() : a.profile);
  if (!prof) {
    ctx.fail(prof.error());
    return std::nullopt;
  }
  auto t = discover_topology(root, {.pcie_state = false});
  if (!t) {
    ctx.fail(t.error());
    return std::nullopt;
  }
  auto p = make_cpu_plan(*t, a.plan);
  if (!p) {
    ctx.fail(p.error());
    return std::nullopt;
  }
  BootOptions bo = boot_options_for(*prof);
  bo.isolate = a.isolate;
  auto params = boot_params(*t, *p, bo);
  if (!params) {
    ctx.fail(params.error());
    return std::nullopt;
  }
  return Computed{std::move(*prof), std::move(*p), std::move(*params)};
}

nlohmann::json params_json(const std::vector<BootParam> &ps) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto &p : ps) {
    a.push_back({{"key", p.key}, {"value", p.value}, {"reason", p.reason}});
  }
  return a;
}

void run_show(Context &ctx, const BootArgs &a) {
  auto c = compute(ctx, a);
  if (!c) {
    return;
  }
  const std::string frag = boot_fragment(c->params);
  if (ctx.json) {
    return ctx.emit({{"profile", c->profile.name},
                     {"fragment", frag},
                     {"params", params_json(c->params)},
                     {"plan_empty", c->plan.empty()}});
  }
  *ctx.out << frag << "\n";
  if (ctx.verbose > 0 || c->plan.empty()) {
    for (const auto &p : c->params) {
      *ctx.err << "  " << p.str() << ": " << p.reason << "\n";
    }
    if (c->plan.empty()) {
      for (const auto &r : c->plan.reasons) {
        *ctx.err << "  no CPU isolation: " << r << "\n";
      }
    }
  }
}

void run_apply(Context &ctx, const BootArgs &a) {
  auto c = compute(ctx, a);
  if (!c) {
    return;
  }
  const Sysroot root = ctx.root();
  const std::string content = grub_dropin(c->params, c->profile.name);
  if (ctx.dry_run) {
    if (ctx.json) {
      return ctx.emit({{"dry_run", true},
                       {"file", std::string(k_grub_dropin)},
                       {"content", content},
                       {"fragment", boot_fragment(c->params)}});
    }
    *ctx.out << "==> " << k_grub_dropin << " (not written: --dry-run)\n" << content;
    return;
  }
  if (!root.exists("/etc/default/grub")) {
    *ctx.err << "mltunectl: warning: /etc/default/grub not found: the drop-in is for GRUB on Debian/Ubuntu\n";
  }
  auto old = root.read(k_grub_dropin);
  const bool same = old && *old == content;
  if (!same) {
    if (auto st = root.write_file(k_grub_dropin, content, {.make_parents = true}); !st) {
      return ctx.fail(st.error());
    }
  }
  if (ctx.json) {
    return ctx.emit({{"written", std::string(k_grub_dropin)},
                     {"changed", !same},
                     {"fragment", boot_fragment(c->params)},
                     {"regenerate", "update-grub"},
                     {"reboot_pending", !same}});
  }
  *ctx.out << (same ? "unchanged " : "wrote ") << k_grub_dropin << ": " << boot_fragment(c->params) << "\n";
  if (!same) {
    *ctx.out << "run 'update-grub' to regenerate /boot/grub/grub.cfg; a reboot is pending: the parameters take "
                "effect at the next boot ('mltunectl boot verify' checks them then)\n";
  }
}

void run_verify(Context &ctx, const BootArgs &a) {
  auto c = compute(ctx, a);
  if (!c) {
    return;
  }
  auto diffs = verify_boot(ctx.root(), c->params);
  if (!diffs) {
    return ctx.fail(diffs.error());
  }
  if (ctx.json) {
    nlohmann::json d = nlohmann::json::array();
    for (const auto &x : *diffs) {
      d.push_back({{"what", x.what}, {"expected", x.expected}, {"actual", x.actual}});
    }
    ctx.emit({{"ok", diffs->empty()}, {"fragment", boot_fragment(c->params)}, {"differences", d}});
  } else if (diffs->empty()) {
    *ctx.out << "boot parameters match the plan: " << boot_fragment(c->params) << "\n";
  } else {
    *ctx.out << "boot parameters differ from the plan (" << diffs->size() << "):\n";
    for (const auto &x : *diffs) {
      *ctx.out << "  " << x.what << ":\n"
               << "    - expected: " << (x.expected.empty() ? "(absent)" : x.expected) << "\n"
               << "    + running:  " << (x.actual.empty() ? "(absent)" : x.actual) << "\n";
    }
    *ctx.out << "fix: mltunectl boot apply, update-grub, reboot\n";
  }
  if (!diffs->empty()) {
    ctx.rc = k_exit_failed;
  }
}

void run_remove(Context &ctx) {
  const Sysroot root = ctx.root();
  const bool had = root.exists(k_grub_dropin);
  if (ctx.dry_run) {
    if (ctx.json) {
      return ctx.emit({{"dry_run", true},
                       {"would_remove", had ? nlohmann::json(std::string(k_grub_dropin)) : nlohmann::json(nullptr)}});
    }
    *ctx.out << (had ? "would remove " : "nothing to remove: no ") << k_grub_dropin << "\n";
    return;
  }
  if (auto st = root.remove_file(k_grub_dropin); !st) {
    return ctx.fail(st.error());
  }
  if (ctx.json) {
    return ctx.emit({{"removed", had ? nlohmann::json(std::string(k_grub_dropin)) : nlohmann::json(nullptr)},
                     {"reboot_pending", had}});
  }
  if (had) {
    *ctx.out << "removed " << k_grub_dropin << "; run 'update-grub' and reboot to drop the parameters\n";
  } else {
    *ctx.out << "nothing to remove: no " << k_grub_dropin << "\n";
  }
}

} // namespace

void register_boot(CLI::App &app, Context &ctx) {
  auto args = std::make_shared<BootArgs>();
  auto *cmd = app.add_subcommand("boot", "Kernel boot parameters (nohz_full, isolcpus, rcu_nocbs, ...) for the "
                                         "profile and the feeder-core plan");
  cmd->require_subcommand(1);
  auto common = [args](CLI::App *sub) {
    sub->add_option("-p,--profile", args->profile, "Profile (default: persisted default, else training)");
    sub->add_option("--isolate", args->isolate,
                    "CPUs to isolate: a cpulist or feeder, feeder:N, workers (default feeder)");
    add_plan_options(sub, args->plan);
  };
  auto *show = cmd->add_subcommand("show", "Print the kernel command-line fragment");
  common(show);
  show->callback([&ctx, args] { run_show(ctx, *args); });
  auto *apply = cmd->add_subcommand("apply", "Write the GRUB drop-in /etc/default/grub.d/mltune.cfg");
  common(apply);
  apply->callback([&ctx, args] { run_apply(ctx, *args); });
  auto *verify = cmd->add_subcommand("verify", "Compare with /proc/cmdline and /sys/devices/system/cpu/"
                                               "{isolated,nohz_full}; exit 1 on a difference");
  common(verify);
  verify->callback([&ctx, args] { run_verify(ctx, *args); });
  auto *remove = cmd->add_subcommand("remove", "Remove the GRUB drop-in");
  remove->callback([&ctx] { run_remove(ctx); });
}

} // namespace mltune::cli
