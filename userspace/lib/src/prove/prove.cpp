// Measuring the node, before against after, the gate and `prove`
// (mltune/prove.hpp).
#include "mltune/prove.hpp"

#include "base/process.hpp"
#include "mltune/node.hpp"
#include "mltune/noise.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

namespace mltune {

namespace {

constexpr const char *k_poisson = "poisson-95";
constexpr const char *k_range = "range-of-rounds";

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<std::uint64_t> &sorted, double p) {
  if (sorted.empty()) {
    return 0;
  }
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1]);
}

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::ranges::sort(v);
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Figure count_figure(std::string name, std::string unit, std::uint64_t k, double exposure) {
  Figure f{std::move(name), std::move(unit), 0, 0, 0, k_poisson, k};
  if (exposure > 0) {
    const auto [lo, hi] = poisson_interval(k);
    f.value = static_cast<double>(k) / exposure;
    f.low = lo / exposure;
    f.high = hi / exposure;
  }
  return f;
}

Figure range_figure(std::string name, const std::vector<double> &per_round) {
  Figure f{std::move(name), "us", median(per_round), 0, 0, k_range, 0};
  if (!per_round.empty()) {
    f.low = *std::ranges::min_element(per_round);
    f.high = *std::ranges::max_element(per_round);
  }
  return f;
}

std::string fixed(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : "%.2f", v);
  return b;
}

// One run of mltune-gpu-loop on GPU opt.gpu, pinned to the first CPU
// measured; through `mltunectl feeder run` where the loop's cgroup is the
// feeder cgroup (a process outside a cpuset partition cannot be pinned
// inside it).
Result<nlohmann::json> run_gpu_loop(const ProbeOptions &opt, const std::string &cgroup) {
  const std::string helper = detail::find_helper("mltune-gpu-loop");
  if (helper.empty()) {
    return failure("--gpu: mltune-gpu-loop is not installed (beside mltunectl or in " MLTUNE_LIBEXEC_DIR ")");
  }
  std::vector<std::string> argv;
  if (!cgroup.empty()) {
    auto self = detail::self_exe();
    if (!self) {
      return self.error();
    }
    argv = {*self, "feeder", "run", "--"};
  }
  argv.insert(argv.end(),
              {helper, "--device", std::to_string(opt.gpu), "--steps", std::to_string(opt.gpu_steps), "--register-mib",
               std::to_string(opt.gpu_register_mib), "--cpu", std::to_string(opt.cpus.cpus().front())});
  auto r = detail::run_command(argv, detail::CommandOutput::stdout_stderr);
  if (!r) {
    return with_context(r.error(), "--gpu");
  }
  if (r->status == 3) {
    return failure("--gpu: no NVIDIA driver here (mltune-gpu-loop could not load libcuda.so.1)");
  }
  const std::string last = r->output.substr(r->output.find_last_of('\n', r->output.size() - 2) + 1);
  if (r->status != 0) {
    return failure("--gpu: mltune-gpu-loop exited " + std::to_string(r->status) + ": " + last);
  }
  auto j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("p99_us")) {
    return failure("--gpu: mltune-gpu-loop printed no result: " + last);
  }
  return j;
}

} // namespace

std::pair<double, double> poisson_interval(std::uint64_t k) {
  constexpr double z = 1.959963984540054;
  if (k == 0) {
    return {0.0, 3.688879454113936}; // -ln(0.025)
  }
  const auto n = static_cast<double>(k);
  const double lo = n * std::pow(1 - 1 / (9 * n) - z / (3 * std::sqrt(n)), 3);
  const double m = n + 1;
  const double hi = m * std::pow(1 - 1 / (9 * m) + z / (3 * std::sqrt(m)), 3);
  return {std::max(0.0, lo), hi};
}

const Figure *Measurement::find(std::string_view name) const {
  const auto it = std::ranges::find_if(figures, [&](const Figure &f) { return f.name == name; });
  return it == figures.end() ? nullptr : &*it;
}

Result<Measurement> measure_node(const Sysroot &root, const ProbeOptions &opt, std::string_view label) {
  if (opt.cpus.empty()) {
    return input_error("no CPU to measure");
  }
  if (opt.rounds < 1 || opt.rounds > 50) {
    return input_error("--rounds: " + std::to_string(opt.rounds) + " is not from 1 to 50");
  }
  if (!(opt.seconds >= 0.2 && opt.seconds <= 60)) {
    return input_error("--seconds: " + std::to_string(opt.seconds) + " is not from 0.2 to 60");
  }
  if (auto ok = Neighbour::check(opt.neighbour); !ok) {
    return ok.error();
  }
  Measurement m;
  m.label = std::string(label);
  m.cpus = opt.cpus;
  m.rounds = opt.rounds;
  // The loop runs in the feeder cgroup where the feeder cores are on and
  // hold every CPU measured (a process outside the partition cannot run
  // there); elsewhere in mltunectl's own, its processes counted as own work.
  if (auto fs = feeder_recorded(root); fs && fs->active && fs->cpus.contains(opt.cpus)) {
    m.loop_cgroup = fs->cgroup;
  }
  LoopOptions lo;
  lo.cpus = opt.cpus;
  lo.seconds = opt.seconds;
  lo.period_us = opt.period_us;
  lo.work_iterations = opt.work_iterations != 0 ? opt.work_iterations : calibrate_work(200);
  lo.cgroup = m.loop_cgroup;
  std::uint64_t interruptions = 0, involuntary = 0;
  std::vector<double> p50, p99, p999, pmax;
  std::vector<double> g50, g99, g999, greg;
  std::map<std::string, std::uint64_t> sources;
  // One noise window over every round (the BPF programs load once): the
  // counts are summed anyway; each round's loop processes are added to the
  // own work as they start (measure_noise reads own_tgids after the window).
  NoiseOptions no;
  no.cpus = opt.cpus;
  no.probe = opt.probe;
  std::vector<LoopRun> runs;
  auto noise = measure_noise(root, no, [&]() -> Status {
    // The neighbour from the window's start to its end: the load of the
    // measurement, not of loading the probe or of the switch.
    auto neighbour = Neighbour::start(opt.neighbour);
    if (!neighbour) {
      return neighbour.error();
    }
    for (unsigned r = 0; r < opt.rounds; ++r) {
      if (opt.progress) {
        opt.progress(label, r + 1, opt.rounds);
      }
      auto loop = FeederLoop::prepare(root, lo);
      if (!loop) {
        return loop.error();
      }
      no.own_tgids.insert(no.own_tgids.end(), loop->pids().begin(), loop->pids().end());
      auto run = loop->run();
      if (!run) {
        return with_context(run.error(), m.label + " round " + std::to_string(r + 1));
      }
      runs.push_back(std::move(*run));
    }
    return {};
  });
  if (!noise) {
    return with_context(noise.error(), "measuring " + m.label);
  }
  m.probe = noise->probe;
  m.probe_note = noise->fallback;
  m.window_s = noise->seconds;
  // The scheduler tick apart, as "ticks": the CPU's own, as frequent as the
  // CPU is busy (a loop slowed by a loaded host ticks more), and no runtime
  // switch removes it (nohz_full at boot does).
  std::uint64_t ticks = 0;
  for (const auto &c : noise->per_cpu) {
    for (const auto &s : c.sources) {
      if (s.own || !s.interruption) {
        continue;
      }
      if (is_scheduler_tick(s)) {
        ticks += s.count;
      } else {
        interruptions += s.count;
        if (s.count > 0) {
          sources[s.name] += s.count;
        }
      }
    }
  }
  for (auto &run : runs) {
    involuntary += run.involuntary;
    m.steps += run.step_ns.size();
    m.missed += run.missed;
    std::ranges::sort(run.step_ns);
    p50.push_back(percentile(run.step_ns, 50) / 1000);
    p99.push_back(percentile(run.step_ns, 99) / 1000);
    p999.push_back(percentile(run.step_ns, 99.9) / 1000);
    pmax.push_back(percentile(run.step_ns, 100) / 1000);
  }
  // The GPU loop after the window: it is not the CPUs' own work.
  for (unsigned r = 0; opt.gpu >= 0 && r < opt.rounds; ++r) {
    auto g = run_gpu_loop(opt, m.loop_cgroup);
    if (!g) {
      return with_context(g.error(), m.label + " round " + std::to_string(r + 1));
    }
    g50.push_back(g->value("p50_us", 0.0));
    g99.push_back(g->value("p99_us", 0.0));
    g999.push_back(g->value("p999_us", 0.0));
    if (const auto it = g->find("register_ms_per_gib"); it != g->end() && it->is_number()) {
      greg.push_back(it->get<double>());
    }
    m.gpu_name = g->value("name", "");
  }
  const auto ncpu = static_cast<double>(opt.cpus.count());
  m.figures.push_back(count_figure("interruptions", "/s per core", interruptions, m.window_s * ncpu));
  if (m.probe == "bpf") { // /proc/interrupts does not split the local timer by cause
    m.figures.push_back(count_figure("ticks", "/s per core", ticks, m.window_s * ncpu));
  }
  m.figures.push_back(count_figure("involuntary_switches", "/s per core", involuntary,
                                   opt.seconds * static_cast<double>(opt.rounds) * ncpu));
  m.figures.push_back(range_figure("step_p50_us", p50));
  m.figures.push_back(range_figure("step_p99_us", p99));
  m.figures.push_back(range_figure("step_p999_us", p999));
  m.figures.push_back(range_figure("step_max_us", pmax));
  if (opt.gpu >= 0) {
    m.figures.push_back(range_figure("gpu_p50_us", g50));
    m.figures.push_back(range_figure("gpu_p99_us", g99));
    m.figures.push_back(range_figure("gpu_p999_us", g999));
    if (!greg.empty()) {
      Figure f = range_figure("gpu_register_ms_per_gib", greg);
      f.unit = "ms per GiB";
      m.figures.push_back(std::move(f));
    }
  }
  m.sources.assign(sources.begin(), sources.end());
  std::ranges::sort(m.sources, [](const auto &a, const auto &b) { return a.second > b.second; });
  if (m.sources.size() > 8) {
    m.sources.resize(8);
  }
  return m;
}

// ---- comparing -------------------------------------------------------------------

double GateLimits::limit(std::string_view figure) const {
  const auto it = std::ranges::find_if(limits, [&](const auto &l) { return l.first == figure; });
  return it == limits.end() ? 0 : it->second;
}

GateLimits gate_limits(const Profile &p) {
  GateLimits g;
  g.limits = {{"interruptions", 1.5}, {"involuntary_switches", 1.5}, {"step_p99_us", 3}};
  if (!p.gate) {
    return g;
  }
  for (const auto &[k, v] : p.gate->limits) {
    const auto it = std::ranges::find_if(g.limits, [&](const auto &l) { return l.first == k; });
    if (it != g.limits.end()) {
      it->second = v;
    } else {
      g.limits.emplace_back(k, v);
    }
  }
  g.rounds = p.gate->rounds != 0 ? p.gate->rounds : g.rounds;
  g.seconds = p.gate->seconds != 0 ? p.gate->seconds : g.seconds;
  return g;
}

std::string FigureChange::describe() const {
  return figure + " " + fixed(before.value) + " [" + fixed(before.low) + ", " + fixed(before.high) + "] -> " +
         fixed(after.value) + " [" + fixed(after.low) + ", " + fixed(after.high) + "] " + after.unit;
}

std::vector<FigureChange> compare_measurements(const Measurement &before, const Measurement &after,
                                               const GateLimits &limits) {
  std::vector<FigureChange> out;
  for (const auto &b : before.figures) {
    const Figure *a = after.find(b.name);
    if (a == nullptr) {
      continue;
    }
    FigureChange c{b.name, b, *a, "same", limits.limit(b.name), false};
    if (a->high < b.low) {
      c.verdict = "better";
    } else if (a->low > b.high) {
      c.verdict = "worse";
    }
    c.failed = c.limit > 0 && a->low > b.high * c.limit && (!b.is_count() || a->low - b.high >= limits.min_rise);
    out.push_back(std::move(c));
  }
  return out;
}

std::string overall_verdict(const std::vector<FigureChange> &changes) {
  const bool better = std::ranges::any_of(changes, [](const auto &c) { return c.verdict == "better"; });
  const bool worse = std::ranges::any_of(changes, [](const auto &c) { return c.verdict == "worse"; });
  return better && worse ? "mixed" : better ? "better" : worse ? "worse" : "same";
}

const FigureChange *ProveReport::gate_failure() const {
  const auto it = std::ranges::find_if(changes, [](const FigureChange &c) { return c.failed; });
  return it == changes.end() ? nullptr : &*it;
}

// ---- prove -------------------------------------------------------------------------

Result<CpuSet> prove_cpus(const Sysroot &root, const std::optional<std::string> &spec,
                          const std::optional<std::string> &feeder) {
  if (spec) {
    auto c = resolve_feeder_cpus(root, *spec, "--cpus");
    return c ? Result<CpuSet>(c->first) : Result<CpuSet>(c.error());
  }
  if (auto fs = feeder_recorded(root); fs && fs->active && !fs->cpus.empty()) {
    return fs->cpus;
  }
  auto c = resolve_feeder_cpus(root, feeder && !feeder->empty() ? *feeder : std::string("feeder"),
                               feeder ? "--feeder" : "the plan's feeder role");
  return c ? Result<CpuSet>(c->first) : Result<CpuSet>(c.error());
}

Result<ProveReport> prove_profile(const Sysroot &root, const Profile &profile, const ProveOptions &opt) {
  ProveReport rep;
  rep.profile = profile.name;
  rep.limits = gate_limits(profile);
  ProbeOptions probe = opt.probe;
  if (probe.work_iterations == 0) {
    probe.work_iterations = calibrate_work(200); // one quantum for both sides
  }
  using clock = std::chrono::steady_clock;
  double measuring = 0;
  const auto timed = [&](std::string_view label) -> Result<Measurement> {
    const auto t0 = clock::now();
    auto m = measure_node(root, probe, label);
    measuring += std::chrono::duration<double>(clock::now() - t0).count();
    return m;
  };
  // A gated switch is the switch itself (with its boot parameters); a proof
  // measures what acts now, with the feeder cores asked for.
  std::unique_ptr<ProfileSwitch> sw;
  if (opt.gate && !opt.feeder) {
    sw = std::make_unique<ProfileSwitch>(profile, root, opt.backend);
  } else {
    sw = std::make_unique<ProfileSwitch>(profile, root, opt.backend,
                                         ProfileSwitch::Measured{opt.feeder, opt.feeder_request});
  }
  TransactionOptions t;
  t.before_apply = [&]() -> Status {
    auto m = timed("before");
    if (!m) {
      return m.error();
    }
    rep.before = std::move(*m);
    return {};
  };
  t.after_apply = [&]() -> Result<bool> {
    auto m = timed("after");
    if (!m) {
      return m.error();
    }
    rep.after = std::move(*m);
    rep.changes = compare_measurements(rep.before, rep.after, rep.limits);
    if (opt.gate) {
      return rep.gate_failure() == nullptr;
    }
    return opt.keep;
  };
  if (probe.progress) {
    t.progress = [&probe](std::string_view step, std::string_view phase) {
      if (phase == "apply" || phase == "rollback") {
        probe.progress(std::string(phase) + " " + std::string(step), 0, 0);
      }
    };
  }
  auto done = sw->run(t);
  rep.measuring_s = measuring;
  if (!done) {
    return done.error();
  }
  rep.applied = done->applied;
  rep.kept = !done->rolled_back;
  rep.rollback_failed = done->rollback_failed;
  rep.verdict = overall_verdict(rep.changes);
  return rep;
}

} // namespace mltune
