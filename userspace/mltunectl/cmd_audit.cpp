// mltunectl audit [--profile P]
#include "cli.hpp"

#include "mltune/audit.hpp"
#include "mltune/compare.hpp"
#include "mltune/node_info.hpp"
#include "mltune/noise.hpp"

#include <map>
#include <ostream>

namespace mltune::cli {

namespace {

struct NoiseAudit {
  double seconds = 0; // --noise S: 0 = off
  double budget = 100;
};

void run_audit(Context &ctx, std::string profile_name, const NoiseAudit &na) {
  const Sysroot root = ctx.root();
  if (profile_name.empty()) {
    profile_name = ctx.default_profile();
  }
  auto p = ProfileLoader(&root).load(profile_name);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto findings = audit(*p, root);
  if (na.seconds > 0) {
    // The feeder cores (active, else the plan's), else every CPU.
    auto cpus = noise_cpus(root, "feeder");
    NoiseOptions opt;
    opt.cpus = cpus ? *cpus : CpuSet{};
    opt.seconds = na.seconds;
    auto r = measure_noise(root, opt);
    if (!r) {
      return ctx.fail(with_context(r.error(), "--noise"));
    }
    for (auto &f : noise_findings(*r, na.budget)) {
      findings.push_back(std::move(f));
    }
  }
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
  auto na = std::make_shared<NoiseAudit>();
  auto *cmd = app.add_subcommand("audit", "Report every setting that is off for ML work, with the fix");
  cmd->add_option("-p,--profile", *profile, "Profile to audit against (default: persisted default, else training)");
  cmd->add_option("--noise", na->seconds,
                  "Also count the interruptions of the feeder cores (else every CPU) for S seconds; "
                  "each offender over the budget is a finding")
      ->type_name("S");
  cmd->add_option("--noise-budget", na->budget, "Interruptions per second a feeder core may take")
      ->capture_default_str();
  cmd->callback([&ctx, profile, na] { run_audit(ctx, *profile, *na); });
}

} // namespace mltune::cli
