// mltunectl audit [--profile P]
#include "cli.hpp"

#include "mltune/audit.hpp"
#include "mltune/compare.hpp"
#include "mltune/node_info.hpp"

#include <map>
#include <ostream>

namespace mltune::cli {

namespace {

void run_audit(Context &ctx, std::string profile_name) {
  const Sysroot root = ctx.root();
  if (profile_name.empty()) {
    profile_name = ctx.default_profile();
  }
  auto p = ProfileLoader(&root).load(profile_name);
  if (!p) {
    return ctx.fail(p.error());
  }
  const auto findings = audit(*p, root);
  const Severity w = worst(findings);
  ctx.rc = w >= Severity::warning ? k_exit_failed : k_exit_ok;
  std::map<std::string, int> summary{{"ok", 0}, {"info", 0}, {"warning", 0}, {"critical", 0}};
  for (const auto &f : findings) {
    ++summary[std::string(to_string(f.severity))];
  }
  if (ctx.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto &f : findings) {
      arr.push_back({{"id", f.id},
                     {"category", f.category},
                     {"severity", to_string(f.severity)},
                     {"current", f.current},
                     {"recommended", f.recommended},
                     {"impact", f.impact},
                     {"fix", f.fix}});
    }
    auto kv = kernel_version(root);
    ctx.emit({{"profile", p->name},
              {"kernel", kv ? kv->release : ""},
              {"worst", to_string(w)},
              {"summary", summary},
              {"findings", arr}});
    return;
  }
  *ctx.out << "mltune audit against profile '" << p->name << "': " << summary["critical"] << " critical, "
           << summary["warning"] << " warning, " << summary["info"] << " info, " << summary["ok"] << " ok\n";
  for (const auto sev : {Severity::critical, Severity::warning, Severity::info, Severity::ok}) {
    for (const auto &f : findings) {
      if (f.severity != sev || (sev == Severity::ok && ctx.verbose == 0)) {
        continue;
      }
      *ctx.out << "\n[" << to_string(f.severity) << "] " << f.id << "\n  current:     " << f.current
               << "\n  recommended: " << f.recommended << "\n";
      if (sev != Severity::ok) {
        *ctx.out << "  impact:      " << f.impact << "\n";
        if (!f.fix.empty()) {
          *ctx.out << "  fix:         " << f.fix << "\n";
        }
      }
    }
  }
}

} // namespace

void register_audit(CLI::App &app, Context &ctx) {
  auto profile = std::make_shared<std::string>();
  auto *cmd = app.add_subcommand("audit", "Report every setting that is off for ML work, with the fix");
  cmd->add_option("-p,--profile", *profile, "Profile to audit against (default: persisted default, else training)");
  cmd->callback([&ctx, profile] { run_audit(ctx, *profile); });
}

} // namespace mltune::cli
