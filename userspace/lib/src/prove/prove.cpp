// Measuring the node, before against after, the gate and `prove`
// (mltune/prove.hpp).
#include "mltune/prove.hpp"

#include "mltune/node.hpp"
#include "mltune/noise.hpp"

#include <algorithm>
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
  std::map<std::string, std::uint64_t> sources;
  for (unsigned r = 0; r < opt.rounds; ++r) {
    if (opt.progress) {
      opt.progress(label, r + 1, opt.rounds);
    }
    auto loop = FeederLoop::prepare(root, lo);
    if (!loop) {
      return loop.error();
    }
    NoiseOptions no;
    no.cpus = opt.cpus;
    no.probe = opt.probe;
    no.own_tgids = loop->pids();
    Result<LoopRun> run = failure("the feeding loop did not run");
    auto noise = measure_noise(root, no, [&]() -> Status {
      run = loop->run();
      return Status{};
    });
    if (!noise) {
      return with_context(noise.error(), "noise probe, " + m.label + " round " + std::to_string(r + 1));
    }
    if (!run) {
      return with_context(run.error(), m.label + " round " + std::to_string(r + 1));
    }
    m.probe = noise->probe;
    m.probe_note = noise->fallback;
    m.window_s += noise->seconds;
    for (const auto &c : noise->per_cpu) {
      interruptions += c.interruptions;
      for (const auto &s : c.sources) {
        if (!s.own && s.interruption && s.count > 0) {
          sources[s.name] += s.count;
        }
      }
    }
    involuntary += run->involuntary;
    m.steps += run->step_ns.size();
    m.missed += run->missed;
    std::ranges::sort(run->step_ns);
    p50.push_back(percentile(run->step_ns, 50) / 1000);
    p99.push_back(percentile(run->step_ns, 99) / 1000);
    p999.push_back(percentile(run->step_ns, 99.9) / 1000);
    pmax.push_back(percentile(run->step_ns, 100) / 1000);
  }
  const double core_s = m.window_s * static_cast<double>(opt.cpus.count());
  m.figures.push_back(count_figure("interruptions", "/s per core", interruptions, core_s));
  m.figures.push_back(count_figure("involuntary_switches", "/s per core", involuntary, core_s));
  m.figures.push_back(range_figure("step_p50_us", p50));
  m.figures.push_back(range_figure("step_p99_us", p99));
  m.figures.push_back(range_figure("step_p999_us", p999));
  m.figures.push_back(range_figure("step_max_us", pmax));
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
    c.failed = c.limit > 0 && a->low > b.high * c.limit;
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
  auto neighbour = Neighbour::start(opt.neighbour);
  if (!neighbour) {
    return neighbour.error();
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
