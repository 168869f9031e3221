// mltunectl audit [--profile P] [--nvml PATH|none] [--no-nvidia-smi] [--noise S [--noise-budget N]]
#include "cli.hpp"

#include "mltune/audit.hpp"
#include "mltune/compare.hpp"
#include "mltune/node_info.hpp"
#include "mltune/noise.hpp"

#include <map>
#include <ostream>

namespace mltune::cli {

namespace {

struct AuditArgs {
  std::string profile;
  AuditOptions opt;
  bool no_smi = false;
  double noise_seconds = 0; // --noise S: 0 = off
  double noise_budget = 100;
};

void run_audit(Context &ctx, const AuditArgs &a) {
  std::string profile_name = a.profile;
  AuditOptions opt = a.opt;
  opt.run_nvidia_smi = !a.no_smi;
  const Sysroot root = ctx.root();
  if (profile_name.empty()) {
    profile_name = ctx.default_profile();
  }
  auto p = ProfileLoader(&root).load(profile_name);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto findings = audit(*p, root, opt);
  if (a.noise_seconds > 0) {
    // The feeder cores (active, else the plan's), else every CPU.
    auto cpus = noise_cpus(root, "feeder");
    NoiseOptions nopt;
    nopt.cpus = cpus ? *cpus : CpuSet{};
    nopt.seconds = a.noise_seconds;
    auto r = measure_noise(root, nopt);
    if (!r) {
      return ctx.fail(with_context(r.error(), "--noise"));
    }
    for (auto &f : noise_findings(*r, a.noise_budget)) {
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
  auto args = std::make_shared<AuditArgs>();
  auto *cmd = app.add_subcommand("audit", "Report every setting that is off for ML work, PCIe and GPU driver "
                                          "state included, with the fix");
  cmd->add_option("-p,--profile", args->profile,
                  "Profile to audit against (default: persisted default, else training)");
  cmd->add_option("--nvml", args->opt.nvml_library,
                  "NVML library to load for the NVIDIA driver's state (default libnvidia-ml.so.1 on the live "
                  "node, none with --sysroot), or none")
      ->type_name("PATH");
  cmd->add_flag("--no-nvidia-smi", args->no_smi, "Do not run <sysroot>/usr/bin/nvidia-smi when NVML gives no answer");
  cmd->add_option("--noise", args->noise_seconds,
                  "Also count the interruptions of the feeder cores (else every CPU) for S seconds; "
                  "each offender over the budget is a finding")
      ->type_name("S");
  cmd->add_option("--noise-budget", args->noise_budget, "Interruptions per second a feeder core may take")
      ->capture_default_str();
  cmd->callback([&ctx, args] { run_audit(ctx, *args); });
}

} // namespace mltune::cli
