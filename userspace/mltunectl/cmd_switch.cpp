// mltunectl switch PROFILE [--backend auto|kernel|direct]
#include "cli.hpp"
#include "reports.hpp"

#include "mltune/boot.hpp"
#include "mltune/node.hpp"
#include "mltune/prove.hpp"
#include "mltune/switch.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iterator>
#include <ostream>
#include <string_view>

namespace mltune::cli {

namespace {

struct GateArgs {
  bool on = false;
  std::optional<std::string> cpus;
};

std::string_view action_name(PlanStep::Action a) {
  switch (a) {
  case PlanStep::Action::write: return "write";
  case PlanStep::Action::unchanged: return "unchanged";
  case PlanStep::Action::skip: return "skip";
  }
  return "?";
}

nlohmann::json sched_json(const SchedReport &r) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto &x : r.actions) {
    a.push_back(sched_action_json(x));
  }
  return {{"actions", a}, {"notes", r.notes}};
}

// Every domain of the switch that has something to say, for --json.
nlohmann::json step_domains_json(ProfileSwitch &sw, bool dry_run) {
  nlohmann::json d = nlohmann::json::object();
  d["modules"] = {{"loaded", sw.modules().loaded()}, {"skipped", sw.modules().skipped()}};
  d["devices"] = {{"notes", sw.knobs().notes()}};
  d["boot"] = sw.boot().fragment().empty()
                  ? nlohmann::json(nullptr)
                  : nlohmann::json{{"fragment", sw.boot().fragment()}, {"reboot_pending", sw.boot().changed()}};
  const auto &nic = dry_run ? sw.nic().planned() : sw.nic().applied();
  d["nic"] = nic ? nic_report_json(*nic, !dry_run) : nlohmann::json(nullptr);
  d["sched"] = sw.sched().applied() ? sched_json(*sw.sched().applied()) : nlohmann::json(nullptr);
  return d;
}

// The document of a dry run's knob plan; "domains" is the caller's.
nlohmann::json plan_json(const SwitchPlan &plan, Backend backend) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto &s : plan.steps) {
    steps.push_back({{"key", s.key},
                     {"path", s.path},
                     {"current", s.current},
                     {"value", s.value},
                     {"action", action_name(s.action)},
                     {"optional", s.optional},
                     {"note", s.note}});
  }
  return {{"profile", plan.profile}, {"backend", to_string(backend)}, {"dry_run", true}, {"steps", steps}};
}

void print_plan(Context &ctx, const SwitchPlan &plan, Backend backend, ProfileSwitch *sw,
                const Profile *profile = nullptr) {
  if (ctx.json) {
    nlohmann::json j = plan_json(plan, backend);
    j["domains"] = sw != nullptr ? step_domains_json(*sw, true) : nlohmann::json(nullptr);
    ctx.emit(j);
    return;
  }
  *ctx.out << "plan: switch to '" << plan.profile << "' with the " << to_string(backend) << " backend\n";
  for (const auto &s : plan.steps) {
    // A bound (at_least/at_most) the node already meets keeps its value:
    // say so rather than show a "change" to the bound.
    const Knob *k = profile != nullptr ? profile->find(s.key) : nullptr;
    const char *bound = k == nullptr                  ? nullptr
                        : k->cmp == KnobCmp::at_least ? ">= "
                        : k->cmp == KnobCmp::at_most  ? "<= "
                                                      : nullptr;
    *ctx.out << "  " << action_name(s.action) << "\t" << s.key << ": '" << s.current << "'";
    if (bound != nullptr && s.action == PlanStep::Action::unchanged) {
      *ctx.out << " (meets " << bound << s.value << ")";
    } else {
      *ctx.out << " -> '" << s.value << "'" << (bound != nullptr ? std::string(" (") + bound + s.value + ")" : "");
    }
    *ctx.out << (s.note.empty() ? "" : " (" + s.note + ")") << "\n";
  }
}

void print_report(Context &ctx, const SwitchReport &r, ProfileSwitch *sw = nullptr) {
  if (ctx.json) {
    nlohmann::json j{{"profile", r.profile}, {"backend", to_string(r.backend)},
                     {"written", r.written}, {"skipped", r.skipped},
                     {"kept", r.kept},       {"detail", r.detail}};
    if (sw != nullptr) {
      j["domains"] = step_domains_json(*sw, false);
    }
    ctx.emit(j);
    return;
  }
  *ctx.out << "switched to '" << r.profile << "' (" << to_string(r.backend) << " backend, " << r.written.size()
           << " knobs written" << (r.kept.empty() ? "" : ", " + std::to_string(r.kept.size()) + " kept") << ")\n";
  for (const auto &k : r.kept) {
    *ctx.out << "  kept " << k << ": the node's value already meets the bound\n";
  }
  for (const auto &s : r.skipped) {
    *ctx.out << "  skipped " << s << "\n";
  }
  if (ctx.verbose > 0 && !r.detail.empty()) {
    *ctx.out << "  " << r.detail << "\n";
  }
}

void switch_baseline(Context &ctx, const Sysroot &root, Backend backend) {
  auto rep = switch_to_baseline(root, backend, {}, ctx.dry_run);
  if (!rep) {
    return ctx.fail(rep.error());
  }
  std::string failed;
  for (const auto &d : rep->domains) {
    if (d.state == "failed") {
      failed += (failed.empty() ? "" : "; ") + d.domain + ": " + d.detail;
    }
  }
  if (ctx.dry_run) {
    // The knob plan as every switch's dry run prints it, then every other
    // domain's part of the same path.
    if (ctx.json) {
      nlohmann::json j = plan_json(rep->plan, backend);
      j["domains"] = domains_json(rep->domains);
      ctx.emit(j);
    } else {
      print_plan(ctx, rep->plan, backend, nullptr);
      std::vector<DomainState> others;
      std::copy_if(rep->domains.begin(), rep->domains.end(), std::back_inserter(others),
                   [backend](const DomainState &d) {
                     return d.domain != "knobs" || d.state == "failed" || backend == Backend::kernel;
                   });
      print_domains(ctx, others);
    }
  } else if (ctx.json) {
    nlohmann::json j{{"profile", rep->knobs.profile},
                     {"backend", to_string(backend)},
                     {"written", rep->knobs.written},
                     {"skipped", rep->knobs.skipped},
                     {"kept", rep->knobs.kept},
                     {"detail", rep->knobs.detail},
                     {"ok", rep->ok()},
                     {"domains", domains_json(rep->domains)}};
    ctx.emit(j);
  } else {
    print_report(ctx, rep->knobs);
    std::vector<DomainState> others;
    std::copy_if(rep->domains.begin(), rep->domains.end(), std::back_inserter(others),
                 [](const DomainState &d) { return d.domain != "knobs" && d.state != "off"; });
    print_domains(ctx, others);
  }
  if (!failed.empty()) {
    // The document above says it; the error line too, for people.
    ctx.rc = k_exit_failed;
    *ctx.err << "mltunectl: error: switch baseline: " << failed << "\n";
  }
}

// switch --gate: the switch measured before and after; a gated figure worse
// than the profile's [gate] allows rolls the whole transaction back (exit 1).
void run_gated(Context &ctx, const Sysroot &root, const Profile &p, Backend backend, const GateArgs &g) {
  if (ctx.dry_run) {
    return ctx.fail(input_error("switch --gate measures the node: it has no --dry-run"));
  }
  auto cpus = prove_cpus(root, g.cpus, std::nullopt);
  if (!cpus) {
    return ctx.fail(cpus.error());
  }
  const GateLimits limits = gate_limits(p);
  ProveOptions o;
  o.probe.cpus = *cpus;
  o.probe.rounds = limits.rounds;
  o.probe.seconds = limits.seconds;
  o.probe.progress = prove_progress(ctx);
  o.backend = backend;
  o.gate = true;
  auto rep = prove_profile(root, p, o);
  if (!rep) {
    return ctx.fail(rep.error());
  }
  print_prove(ctx, *rep, "gate");
}

void run_switch(Context &ctx, const std::string &name, const std::string &backend_name, const GateArgs &gate) {
  const Sysroot root = ctx.root();
  const Backend wanted = backend_name == "kernel"   ? Backend::kernel
                         : backend_name == "direct" ? Backend::direct
                                                    : Backend::automatic;
  const Backend backend = choose_backend(root, wanted);
  if (backend == Backend::kernel && !kernel_backend_present(root)) {
    return ctx.fail(failure(std::string(k_kmod_dir) + " not found: the mltune module is not loaded"));
  }
  if (name == k_baseline) {
    return switch_baseline(ctx, root, backend);
  }
  auto p = ProfileLoader(&root).load(name);
  if (!p) {
    return ctx.fail(p.error());
  }
  if (gate.on) {
    return run_gated(ctx, root, *p, backend, gate);
  }
  // One transaction: every step is planned (the NIC settings validated)
  // before any is applied; a step that fails rolls back those before it.
  ProfileSwitch sw(*p, root, backend);
  TransactionOptions opt;
  opt.dry_run = ctx.dry_run;
  if (const char *f = std::getenv("MLTUNE_FAIL_STEP")) { // tests: Documentation/mltunectl.rst
    opt.fail_after = f;
  }
  if (const char *s = std::getenv("MLTUNE_STOP_AT")) { // tests: Documentation/mltunectl.rst
    opt.stop_at = s;
  }
  opt.progress = ctx.step_progress();
  auto done = sw.run(opt);
  if (opt.progress) {
    opt.progress("switch", done ? "done" : "failed");
  }
  if (!done) {
    return ctx.fail(done.error());
  }
  if (ctx.dry_run) {
    // The header first, then the knobs, then the NIC plan.
    print_plan(ctx, sw.knobs().switch_plan(), backend, &sw, &*p);
    if (sw.nic().planned() && !ctx.json) {
      print_nic_changes(ctx, *sw.nic().planned(), false);
    }
    if (backend == Backend::kernel && !ctx.json && ctx.verbose > 0) {
      *ctx.out << "knob list for the module:\n" << kernel_knob_list(*p, ctx.root());
    }
    return;
  }
  print_report(ctx, sw.knobs().report(), &sw);
  if (ctx.json) {
    return;
  }
  for (const auto &m : sw.modules().loaded()) {
    *ctx.out << "module\tloaded\t" << m << "\n";
  }
  for (const auto &m : sw.modules().skipped()) {
    *ctx.out << "module\tskipped\t" << m << "\n";
  }
  for (const auto &n : sw.knobs().notes()) {
    *ctx.out << "skip\t" << n << "\n";
  }
  if (sw.nic().applied()) {
    print_nic_changes(ctx, *sw.nic().applied(), true);
  }
  if (sw.boot().changed()) {
    *ctx.out << "boot\tpending\t" << k_grub_dropin << ": " << sw.boot().fragment()
             << " (run update-grub; the parameters take effect at the next boot)\n";
  }
  if (const auto &s = sw.sched().applied()) {
    for (const auto &a : s->actions) {
      *ctx.out << "sched\t" << a.result << "\t" << a.tid << " \"" << a.comm << "\" (rule " << a.rule
               << "): " << a.after.describe() << (a.message.empty() ? "" : "; " + a.message) << "\n";
    }
  }
}

} // namespace

void register_switch(CLI::App &app, Context &ctx) {
  auto name = std::make_shared<std::string>();
  auto backend = std::make_shared<std::string>("auto");
  auto gate = std::make_shared<GateArgs>();
  auto *cmd = app.add_subcommand("switch", "Switch the node to PROFILE atomically ('baseline' restores the "
                                           "values from before the first switch)");
  cmd->add_option("profile", *name, "Profile name, TOML file, or 'baseline'")->required();
  cmd->add_option("-b,--backend", *backend, "auto (kernel when the module is loaded), kernel or direct")
      ->check(CLI::IsMember({"auto", "kernel", "direct"}))
      ->capture_default_str();
  cmd->add_flag("--gate", gate->on,
                "Measure the feeder cores before and after; roll the switch back when a figure got worse than the "
                "profile's [gate] allows (exit 1)");
  cmd->add_option("--gate-cpus", gate->cpus, "With --gate: the CPUs measured (default: the feeder cores)")
      ->check(non_empty_check("leave --gate-cpus out to measure the feeder cores"));
  cmd->callback([&ctx, name, backend, gate] { run_switch(ctx, *name, *backend, *gate); });
}

} // namespace mltune::cli
