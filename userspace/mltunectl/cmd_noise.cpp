// mltunectl noise [--cpus LIST|feeder] [--duration S] [--probe P] [-- CMD]  (Documentation/noise.rst)
#include "cli.hpp"

#include "mltune/feeder.hpp"
#include "mltune/noise.hpp"

#include <cstdio>
#include <ostream>

namespace mltune::cli {

namespace {

struct NoiseArgs {
  std::string cpus;
  double seconds = 5;
  std::string probe = "auto";
  std::string own = k_feeder_cgroup;
  size_t top = 10;
  std::vector<std::string> cmd;
};

std::string fixed(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

nlohmann::json source_json(const NoiseSource &s, double seconds) {
  nlohmann::json j{{"kind", to_string(s.kind)},
                   {"id", s.id},
                   {"name", s.name},
                   {"count", s.count},
                   {"per_second", seconds > 0 ? static_cast<double>(s.count) / seconds : 0.0},
                   {"ns", s.ns ? nlohmann::json(*s.ns) : nlohmann::json(nullptr)},
                   {"bh_ns", s.bh_ns},
                   {"own", s.own},
                   {"interruption", s.interruption},
                   {"known", s.known},
                   {"fix", s.fix}};
  if (s.kind == NoiseKind::irq) {
    j["irq"] = s.irq;
  }
  if (s.pid != 0) {
    j["pid"] = s.pid;
    j["comm"] = s.comm;
  }
  if (s.kind == NoiseKind::task) {
    j["tgid"] = s.tgid;
    j["cgroup"] = s.cgroup;
    j["kthread"] = s.kthread;
  }
  return j;
}

void print_report(Context &ctx, const NoiseReport &r, size_t top) {
  auto &o = *ctx.out;
  o << "noise on CPUs " << r.cpus.str() << " for " << fixed(r.seconds) << " s (probe: " << r.probe;
  if (!r.fallback.empty()) {
    o << "; BPF unavailable: " << r.fallback;
  }
  o << ")\n";
  if (!r.missing.empty()) {
    o << "not counted on this kernel: " << r.missing << "\n";
  }
  for (const auto &n : r.notes) {
    o << "note: " << n << "\n";
  }
  if (r.dropped != 0) {
    o << "warning: " << r.dropped << " events lost (map full)\n";
  }
  for (const auto &c : r.per_cpu) {
    o << "\nCPU " << c.cpu << ": " << c.interruptions << " interruptions (" << fixed(c.per_second) << "/s)";
    if (r.probe == "bpf") {
      o << ", foreign time " << fixed(static_cast<double>(c.foreign_ns) / 1e6, 3) << " ms";
    }
    if (c.switches) {
      o << ", " << *c.switches << " context switches";
    }
    o << "\n";
    o << "     count       /s    time_ms  source\n";
    size_t shown = 0;
    for (const auto &s : c.sources) {
      if (top != 0 && shown++ >= top) {
        o << "  (" << (c.sources.size() - top) << " more; --top 0 shows all)\n";
        break;
      }
      char line[96];
      std::snprintf(line, sizeof line, "  %8llu %8.1f %10s  ", static_cast<unsigned long long>(s.count),
                    r.seconds > 0 ? static_cast<double>(s.count) / r.seconds : 0.0,
                    s.ns ? fixed(static_cast<double>(*s.ns + s.bh_ns) / 1e6, 3).c_str() : "-");
      o << line << s.name;
      if (s.own) {
        o << " [own]";
      } else if (!s.known.empty() && s.kind != NoiseKind::irq) {
        o << " [" << s.known << "]";
      }
      if (s.kind == NoiseKind::task && !s.cgroup.empty()) {
        o << " cgroup " << s.cgroup;
      }
      o << "\n";
    }
    if (!c.details.empty()) {
      o << "  inside them:";
      size_t n = 0;
      for (const auto &d : c.details) {
        if (top != 0 && n++ >= top) {
          o << " ...";
          break;
        }
        o << " " << d.what << (d.function.empty() ? "" : " " + d.function) << " " << d.count << ";";
      }
      o << "\n";
    }
  }
}

} // namespace

nlohmann::json noise_json(const NoiseReport &r) {
  nlohmann::json cpus = nlohmann::json::array();
  for (const auto &c : r.per_cpu) {
    nlohmann::json src = nlohmann::json::array();
    for (const auto &s : c.sources) {
      src.push_back(source_json(s, r.seconds));
    }
    nlohmann::json det = nlohmann::json::array();
    for (const auto &d : c.details) {
      det.push_back(
          {{"what", d.what}, {"function", d.function}, {"count", d.count}, {"known", d.known}, {"fix", d.fix}});
    }
    cpus.push_back({{"cpu", c.cpu},
                    {"interruptions", c.interruptions},
                    {"per_second", c.per_second},
                    {"foreign_ns", r.probe == "bpf" ? nlohmann::json(c.foreign_ns) : nlohmann::json(nullptr)},
                    {"switches", c.switches ? nlohmann::json(*c.switches) : nlohmann::json(nullptr)},
                    {"sources", src},
                    {"details", det}});
  }
  return {{"probe", r.probe},     {"fallback", r.fallback}, {"missing", r.missing},
          {"seconds", r.seconds}, {"cpus", r.cpus.str()},   {"own_cgroup", r.own_cgroup},
          {"dropped", r.dropped}, {"notes", r.notes},       {"per_cpu", cpus}};
}

Result<CpuSet> noise_cpus(const Sysroot &root, const std::string &spec) {
  if (spec.empty()) {
    return CpuSet{};
  }
  if (spec == "feeder") {
    auto st = feeder_status(root);
    if (st && st->state.active && !st->state.cpus.empty()) {
      return st->state.cpus;
    }
  }
  auto c = resolve_feeder_cpus(root, spec);
  if (!c) {
    return c.error();
  }
  return c->first;
}

void register_noise(CLI::App &app, Context &ctx) {
  auto args = std::make_shared<NoiseArgs>();
  auto *n = app.add_subcommand("noise", "Count every interruption of CPUs by source, with the time each took");
  n->add_option("--cpus", args->cpus, "cpulist, or feeder (the active feeder cores, else the plan's); default: all")
      ->type_name("LIST|feeder")
      ->check(non_empty_check("omit --cpus for all CPUs"));
  n->add_option("--duration", args->seconds, "Window in seconds (without a command)")
      ->capture_default_str()
      ->type_name("S");
  n->add_option("--probe", args->probe, "auto (BPF, else /proc), bpf or proc")->capture_default_str();
  n->add_option("--own-cgroup", args->own, "cgroup whose tasks are the CPUs' own work, not noise")
      ->capture_default_str();
  n->add_option("--top", args->top, "Sources shown per CPU (0: all; --json has all)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{100000}));
  n->add_option("cmd", args->cmd, "Count while this command runs instead (after --)");
  n->callback([&ctx, args] {
    const Sysroot root = ctx.root();
    auto cpus = noise_cpus(root, args->cpus);
    if (!cpus) {
      return ctx.fail(cpus.error());
    }
    NoiseOptions opt;
    opt.cpus = *cpus;
    opt.seconds = args->seconds;
    opt.probe = args->probe;
    opt.own_cgroup = args->own;
    opt.exec = args->cmd;
    int status = 0;
    auto r = measure_noise(root, opt, &status);
    if (!r) {
      return ctx.fail(r.error());
    }
    if (ctx.json) {
      nlohmann::json j = noise_json(*r);
      if (!args->cmd.empty()) {
        j["command_status"] = status;
      }
      ctx.emit(j);
    } else {
      print_report(ctx, *r, args->top);
    }
    if (status != 0) {
      *ctx.err << "mltunectl: " << args->cmd.front() << " exited " << status << "\n";
      ctx.rc = k_exit_failed;
    }
  });
}

} // namespace mltune::cli
