// mltunectl prove [PROFILE] [--feeder CPUS] [--neighbour N] [--keep]  (Documentation/prove.rst)
// and the gated switch's report (switch --gate).
#include "cli.hpp"

#include "mltune/prove.hpp"

#include <cstdio>
#include <ostream>

namespace mltune::cli {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.2f", v);
  return b;
}

nlohmann::json figure_json(const Figure &f) {
  return {{"value", f.value}, {"low", f.low},           {"high", f.high},
          {"unit", f.unit},   {"interval", f.interval}, {"count", f.count}};
}

nlohmann::json measurement_json(const Measurement &m) {
  nlohmann::json figs = nlohmann::json::object();
  for (const auto &f : m.figures) {
    figs[f.name] = figure_json(f);
  }
  nlohmann::json src = nlohmann::json::array();
  for (const auto &[name, count] : m.sources) {
    src.push_back({{"source", name}, {"count", count}});
  }
  return {{"cpus", m.cpus.str()}, {"rounds", m.rounds},         {"window_s", m.window_s},
          {"probe", m.probe},     {"probe_note", m.probe_note}, {"loop_cgroup", m.loop_cgroup},
          {"steps", m.steps},     {"missed", m.missed},         {"figures", figs},
          {"sources", src}};
}

struct ProveArgs {
  std::string profile;
  std::optional<std::string> cpus;
  std::optional<std::string> feeder;
  std::string mechanism = "auto";
  std::string partition = "root";
  unsigned neighbour = 0;
  unsigned rounds = 3;
  double seconds = 2;
  std::string probe = "auto";
  int gpu = -1;
  bool keep = false;
  std::string backend = "auto";
};

void run_prove(Context &ctx, const ProveArgs &a) {
  const Sysroot root = ctx.root();
  auto p = ProfileLoader(&root).load(a.profile.empty() ? ctx.default_profile() : a.profile);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto cpus = prove_cpus(root, a.cpus, a.feeder);
  if (!cpus) {
    return ctx.fail(cpus.error());
  }
  ProveOptions o;
  o.probe.cpus = *cpus;
  o.probe.rounds = a.rounds;
  o.probe.seconds = a.seconds;
  o.probe.probe = a.probe;
  o.probe.gpu = a.gpu;
  o.backend = a.backend == "kernel" ? Backend::kernel : a.backend == "direct" ? Backend::direct : Backend::automatic;
  o.feeder = a.feeder;
  o.feeder_request = FeederRequest{a.mechanism, a.partition};
  o.probe.neighbour = a.neighbour;
  o.keep = a.keep;
  o.probe.progress = prove_progress(ctx);
  auto rep = prove_profile(root, *p, o);
  if (!rep) {
    return ctx.fail(rep.error());
  }
  print_prove(ctx, *rep, "prove");
}

} // namespace

std::function<void(std::string_view, unsigned, unsigned)> prove_progress(Context &ctx) {
  if (ctx.json && ctx.verbose == 0) {
    return {};
  }
  return [&ctx](std::string_view label, unsigned round, unsigned rounds) {
    if (rounds == 0) {
      *ctx.err << "mltunectl: " << label << "\n";
    } else {
      *ctx.err << "mltunectl: measuring " << label << ", round " << round << " of " << rounds << "\n";
    }
  };
}

nlohmann::json prove_json(const ProveReport &r) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto &c : r.changes) {
    changes.push_back({{"figure", c.figure},
                       {"before", figure_json(c.before)},
                       {"after", figure_json(c.after)},
                       {"verdict", c.verdict},
                       {"gate_limit", c.limit},
                       {"gate_failed", c.failed}});
  }
  const FigureChange *g = r.gate_failure();
  return {{"profile", r.profile},
          {"before", measurement_json(r.before)},
          {"after", measurement_json(r.after)},
          {"changes", changes},
          {"verdict", r.verdict},
          {"applied", r.applied},
          {"kept", r.kept},
          {"rollback_failed", r.rollback_failed},
          {"gate_failed", g != nullptr ? nlohmann::json(g->figure) : nlohmann::json(nullptr)},
          {"measuring_s", r.measuring_s}};
}

void print_prove(Context &ctx, const ProveReport &r, std::string_view what) {
  if (!r.rollback_failed.empty()) {
    ctx.rc = k_exit_failed;
  }
  const FigureChange *g = r.gate_failure();
  if (what == "gate" && g != nullptr) {
    ctx.rc = k_exit_failed;
  }
  if (ctx.json) {
    ctx.emit(prove_json(r));
  } else {
    auto &o = *ctx.out;
    o << what << ": '" << r.profile << "' on CPUs " << r.before.cpus.str() << ", " << r.before.rounds
      << " rounds of the feeding loop before and after (noise windows " << num(r.before.window_s) << " and "
      << num(r.after.window_s) << " s, probe " << r.before.probe
      << (r.before.probe_note.empty() ? "" : ": " + r.before.probe_note) << ")\n";
    o << "  figure                   before [95%]                after [95%]                 verdict\n";
    for (const auto &c : r.changes) {
      char line[200];
      std::snprintf(line, sizeof line, "  %-22s %9s [%8s, %8s] %9s [%8s, %8s]  %s%s\n", c.figure.c_str(),
                    num(c.before.value).c_str(), num(c.before.low).c_str(), num(c.before.high).c_str(),
                    num(c.after.value).c_str(), num(c.after.low).c_str(), num(c.after.high).c_str(), c.verdict.c_str(),
                    c.failed ? (" (gate: over " + num(c.limit) + "x)").c_str() : "");
      o << line;
    }
    o << "  (counts per second and feeder core with Poisson intervals; step times in us, the median of the "
         "rounds and their range)\n";
    for (const auto *m : {&r.before, &r.after}) {
      if (m->sources.empty()) {
        continue;
      }
      o << "  " << m->label << ", foreign sources:";
      for (const auto &[name, count] : m->sources) {
        o << " " << name << " " << count << ";";
      }
      o << "\n";
    }
    o << "verdict: " << r.verdict << "; the profile was "
      << (r.kept ? "kept" : "rolled back (" + (r.applied.empty() ? std::string("nothing applied") : "every step") + ")")
      << "; measuring took " << num(r.measuring_s) << " s\n";
  }
  if (!r.rollback_failed.empty()) {
    *ctx.err << "mltunectl: error: " << what << ": rolling back: " << r.rollback_failed << "\n";
  }
  if (what == "gate" && g != nullptr) {
    *ctx.err << "mltunectl: error: switch --gate: " << g->describe() << ": worse than " << num(g->limit)
             << "x before; the switch to '" << r.profile << "' was rolled back\n";
  }
}

void register_prove(CLI::App &app, Context &ctx) {
  auto a = std::make_shared<ProveArgs>();
  auto *cmd = app.add_subcommand(
      "prove", "Measure the feeder cores under the node's state and under PROFILE, then switch back (--keep: stay)");
  cmd->add_option("profile", a->profile,
                  "Profile name or TOML file (default: the node configuration's, else training)");
  cmd->add_option("--cpus", a->cpus, "CPUs to measure: a cpulist or plan role (default: the feeder cores)")
      ->check(non_empty_check("leave --cpus out to measure the feeder cores"));
  cmd->add_option("--feeder", a->feeder,
                  "Put feeder cores (a cpulist or plan role: feeder) in force with the profile, in the same "
                  "transaction");
  cmd->add_option("--mechanism", a->mechanism, "With --feeder: auto, sched_ext or cpuset")
      ->check(CLI::IsMember({"auto", "sched_ext", "cpuset"}))
      ->capture_default_str();
  cmd->add_option("--partition", a->partition, "With --feeder: root or isolated")
      ->check(CLI::IsMember({"root", "isolated"}))
      ->capture_default_str();
  cmd->add_option("--neighbour", a->neighbour, "Busy processes outside the feeder cgroup while measuring")
      ->check(CLI::Range(0U, 4096U))
      ->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Measurement windows on each side")
      ->check(CLI::Range(1U, 50U))
      ->capture_default_str();
  cmd->add_option("--seconds", a->seconds, "Seconds per window")->check(CLI::Range(0.2, 60.0))->capture_default_str();
  cmd->add_option("--probe", a->probe, "Noise probe: auto, bpf or proc")
      ->check(CLI::IsMember({"auto", "bpf", "proc"}))
      ->capture_default_str();
  cmd->add_option("-b,--backend", a->backend, "auto, kernel or direct")
      ->check(CLI::IsMember({"auto", "kernel", "direct"}))
      ->capture_default_str();
  cmd->add_option("--gpu", a->gpu,
                  "Also time the GPU feeding loop (mltune-gpu-loop: copy, launch, synchronize) on GPU N, pinned "
                  "to the first CPU measured")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_flag("--keep", a->keep, "Leave the profile (and feeder cores) in force after measuring");
  cmd->callback([&ctx, a] { run_prove(ctx, *a); });
}

} // namespace mltune::cli
