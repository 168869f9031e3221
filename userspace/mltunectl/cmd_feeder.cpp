// mltunectl feeder status|on|off|run -- CMD  (Documentation/feeder.rst)
#include "cli.hpp"

#include "mltune/feeder.hpp"
#include "mltune/noise.hpp"

#include <cstdio>
#include <ostream>

namespace mltune::cli {

namespace {

struct FeederArgs {
  std::string cpus = "feeder";
  std::string mechanism = "auto";
  std::string partition = "root";
  std::vector<std::string> cmd;
  double noise = 0;    // status --noise S: count for S seconds
  double budget = 100; // interruptions per second and feeder core
};

nlohmann::json state_json(const FeederState &s) {
  return {{"active", s.active},
          {"mechanism", s.mechanism},
          {"cpus", s.cpus.str()},
          {"housekeeping", s.housekeeping.str()},
          {"cgroup", s.cgroup},
          {"fallback", s.fallback},
          {"irq_mode", s.irq_mode},
          {"irqs_moved", s.irqs.size()},
          {"kthreads_moved", s.kthreads.size()},
          {"threads_recorded", s.threads.size()},
          {"dl_threads_reported", s.dl_reported},
          {"cpuset_note", s.cpuset_note},
          {"partition_type", s.partition},
          {"partition_note", s.partition_note}};
}

// status --noise: each feeder core's foreign interruptions per second
// against the budget, with the worst offenders; rc 1 when over budget.
void print_noise(Context &ctx, const NoiseReport &r, double budget) {
  auto &o = *ctx.out;
  o << "noise (" << r.seconds << " s, probe " << r.probe << (r.fallback.empty() ? "" : ": " + r.fallback)
    << "), budget " << budget << " interruptions/s per core:\n";
  for (const auto &c : r.per_cpu) {
    const bool over = c.per_second > budget;
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f/s", c.per_second);
    o << "  CPU " << c.cpu << ": " << rate << (over ? " OVER BUDGET" : " ok") << "\n";
    for (const auto *s : c.offenders(3)) {
      std::snprintf(rate, sizeof rate, "%.1f/s", r.seconds > 0 ? static_cast<double>(s->count) / r.seconds : 0);
      o << "    " << rate << "  " << s->name;
      if (s->ns) {
        o << " (" << static_cast<double>(*s->ns + s->bh_ns) / 1e6 << " ms)";
      }
      if (!s->known.empty() && s->kind != NoiseKind::irq) {
        o << " [" << s->known << "]";
      }
      o << "\n";
      if (over && !s->fix.empty()) {
        o << "      fix: " << s->fix << "\n";
      }
    }
  }
}

nlohmann::json noise_budget_json(const NoiseReport &r, double budget) {
  nlohmann::json j = noise_json(r);
  j["budget"] = budget;
  nlohmann::json over = nlohmann::json::array();
  for (const auto &c : r.per_cpu) {
    if (c.per_second > budget) {
      over.push_back(c.cpu);
    }
  }
  j["over_budget"] = over;
  return j;
}

void print_status(Context &ctx, const FeederStatus &st, const std::vector<FeederPinnedKthread> &pinned,
                  const NoiseReport *noise, double budget) {
  if (ctx.json) {
    nlohmann::json j = state_json(st.state);
    nlohmann::json pk = nlohmann::json::array();
    for (const auto &k : pinned) {
      pk.push_back({{"pid", k.pid}, {"comm", k.comm}, {"cpus", k.cpus.str()}});
    }
    j["pinned_kthreads"] = pk;
    j["boot_isolation"] = {{"isolated", st.boot.isolated.str()},
                           {"nohz_full", st.boot.nohz_full.str()},
                           {"isolcpus", st.boot.isolcpus},
                           {"rcu_nocbs", st.boot.rcu_nocbs}};
    j["choice"] = {{"mechanism", st.choice.mechanism},
                   {"sched_ext_usable", st.choice.sched_ext_usable},
                   {"sched_ext_refused", st.choice.sched_ext_refused},
                   {"reasons", st.choice.reasons}};
    j["sched_ext"] = {{"built", st.scx_built},
                      {"state", st.scx_state},
                      {"ops", st.scx_ops},
                      {"attached", st.scx_attached},
                      {"foreign", st.stats.foreign},
                      {"stray", st.stats.stray},
                      {"forced", st.stats.forced},
                      {"preempted", st.stats.preempted},
                      {"rt_foreign", st.stats.rt_foreign},
                      {"dl_foreign", st.stats.dl_foreign}};
    j["partition"] = st.partition;
    j["kernel_isolated"] = st.kernel_isolated;
    if (noise != nullptr) {
      j["noise"] = noise_budget_json(*noise, budget);
    }
    ctx.emit(j);
    return;
  }
  auto &o = *ctx.out;
  o << "feeder: " << (st.state.active ? "on" : "off") << "\n";
  if (st.state.active) {
    o << "mechanism: " << st.state.mechanism << "\n"
      << "cpus: " << st.state.cpus.str() << "\n"
      << "housekeeping: " << st.state.housekeeping.str() << "\n"
      << "cgroup: /sys/fs/cgroup" << st.state.cgroup << "\n"
      << "irqs: " << (st.state.irq_mode.empty() ? "-" : st.state.irq_mode) << " (" << st.state.irqs.size()
      << " affinities moved)\n"
      << "kthreads moved: " << st.state.kthreads.size() << "\n";
    if (!pinned.empty()) {
      o << "kthreads that stay (per-CPU, or not movable): " << pinned.size() << ":";
      for (const auto &k : pinned) {
        o << " " << k.comm;
      }
      o << "\n";
    }
    if (st.state.mechanism == "sched_ext") {
      o << "real-time threads moved: " << st.state.threads.size() << "\n";
      for (const int tid : st.state.dl_reported) {
        o << "DEADLINE thread " << tid << " may run on feeder CPUs (use the cpuset mechanism)\n";
      }
    }
    if (!st.state.fallback.empty()) {
      o << "fallback: cpuset partition after sched_ext ejection: " << st.state.fallback << "\n";
    }
    if (!st.partition.empty()) {
      o << "partition: " << st.partition << "\n";
    }
    if (!st.state.partition_note.empty()) {
      o << "  " << st.state.partition_note << "\n";
    }
    if (!st.kernel_isolated.empty() && st.state.mechanism == "cpuset") {
      o << "kernel isolated CPUs (cpuset.cpus.isolated): " << st.kernel_isolated << "\n";
    }
    if (!st.state.cpuset_note.empty()) {
      o << "cpuset: " << st.state.cpuset_note << "\n";
    }
  }
  if (st.boot.any()) {
    o << "boot isolation: isolated=" << st.boot.isolated.str() << " nohz_full=" << st.boot.nohz_full.str()
      << " isolcpus=" << st.boot.isolcpus << " rcu_nocbs=" << st.boot.rcu_nocbs << "\n";
  } else {
    o << "boot isolation: none\n";
  }
  o << "sched_ext: " << (st.scx_state.empty() ? "absent" : st.scx_state)
    << (st.scx_ops.empty() ? "" : " (" + st.scx_ops + ")") << (st.scx_attached ? ", mltune_feeder attached" : "")
    << "\n";
  if (st.scx_attached) {
    o << "sched_ext counters: foreign=" << st.stats.foreign << " stray=" << st.stats.stray
      << " forced=" << st.stats.forced << " preempted=" << st.stats.preempted << " rt_foreign=" << st.stats.rt_foreign
      << " dl_foreign=" << st.stats.dl_foreign << "\n";
  }
  if (!st.choice.sched_ext_usable) {
    o << "sched_ext refused: " << st.choice.sched_ext_refused << "\n";
  }
  o << "mechanism choice: " << st.choice.mechanism << "\n";
  for (const auto &r : st.choice.reasons) {
    o << "  - " << r << "\n";
  }
  if (noise != nullptr) {
    print_noise(ctx, *noise, budget);
  }
}

} // namespace

void register_feeder(CLI::App &app, Context &ctx) {
  auto args = std::make_shared<FeederArgs>();
  auto *f = app.add_subcommand("feeder", "GPU-feeder cores at runtime (sched_ext or cpuset partition)");
  f->require_subcommand(1);

  auto *status = f->add_subcommand("status", "Show the feeder state, the mechanism choice and why");
  status->add_option("--noise", args->noise, "Also count each feeder core's interruptions for S seconds")
      ->type_name("S");
  status->add_option("--budget", args->budget, "Interruptions per second a feeder core may take (with --noise)")
      ->capture_default_str();
  status->callback([&ctx, args] {
    const Sysroot root = ctx.root();
    auto st = feeder_status(root);
    if (!st) {
      ctx.fail(st.error());
      return;
    }
    const auto pinned =
        st->state.active ? feeder_pinned_kthreads(root, st->state.cpus) : std::vector<FeederPinnedKthread>{};
    if (!(args->noise > 0)) {
      print_status(ctx, *st, pinned, nullptr, 0);
      return;
    }
    auto cpus = noise_cpus(root, "feeder");
    if (!cpus) {
      ctx.fail(with_context(cpus.error(), "--noise: feeder cores"));
      return;
    }
    NoiseOptions opt;
    opt.cpus = *cpus;
    opt.seconds = args->noise;
    opt.own_cgroup = st->state.cgroup;
    auto r = measure_noise(root, opt);
    if (!r) {
      ctx.fail(r.error());
      return;
    }
    print_status(ctx, *st, pinned, &*r, args->budget);
    for (const auto &c : r->per_cpu) {
      if (c.per_second > args->budget) {
        ctx.rc = k_exit_failed;
      }
    }
  });

  auto *on = f->add_subcommand("on", "Keep the feeder CPUs for the feeder cgroup (or change its CPUs)");
  on->add_option("--cpus", args->cpus, "cpulist or plan role (feeder, feeder:N)")->capture_default_str();
  on->add_option("--mechanism", args->mechanism, "auto, sched_ext or cpuset")->capture_default_str();
  on->add_option("--partition", args->partition,
                 "cpuset partition type: root (load balancing among the feeder CPUs) or isolated (none, and no "
                 "idle load balancer kicks; place one thread per CPU)")
      ->capture_default_str();
  on->callback([&ctx, args] {
    const Sysroot root = ctx.root();
    auto cpus = resolve_feeder_cpus(root, args->cpus);
    if (!cpus) {
      ctx.fail(cpus.error());
      return;
    }
    if (ctx.dry_run) {
      auto ch = choose_mechanism(root, read_boot_isolation(root), {args->mechanism, args->partition});
      if (!ch) {
        ctx.fail(ch.error());
        return;
      }
      *ctx.out << "would keep CPUs " << cpus->first.str() << " with " << ch->mechanism
               << (ch->mechanism == "cpuset" && args->partition == "isolated" ? " (isolated partition)" : "") << "\n";
      return;
    }
    auto s = feeder_on(root, cpus->first, cpus->second, {args->mechanism, args->partition});
    if (!s) {
      ctx.fail(s.error());
      return;
    }
    if (ctx.json) {
      ctx.emit(state_json(*s));
    } else {
      *ctx.out << "feeder on: CPUs " << s->cpus.str() << " with " << s->mechanism << ", housekeeping "
               << s->housekeeping.str() << "\n";
      if (!s->partition_note.empty()) {
        *ctx.out << "  " << s->partition_note << "\n";
      }
    }
  });

  auto *off = f->add_subcommand("off", "Remove the feeder setup and restore every affinity");
  off->callback([&ctx] {
    if (auto st = feeder_off(ctx.root()); !st) {
      ctx.fail(st.error());
      return;
    }
    if (!ctx.json) {
      *ctx.out << "feeder off\n";
    }
  });

  auto *run = f->add_subcommand("run", "Run a command in the feeder cgroup with NUMA-local memory");
  run->add_option("cmd", args->cmd, "command and arguments (after --)")->required();
  run->callback([&ctx, args] {
    auto st = feeder_exec(ctx.root(), args->cmd);
    ctx.fail(st.error()); // only on failure
  });

  auto *watch = f->add_subcommand("watch", "Internal: wait for a sched_ext ejection and fall back");
  watch->group("");
  watch->callback([&ctx] {
    if (auto st = feeder_watch(ctx.root()); !st) {
      ctx.fail(st.error());
    }
  });
  auto *inject = f->add_subcommand("inject-error", "Test hook: make the BPF scheduler fail");
  inject->group("");
  inject->callback([&ctx] {
    if (auto st = feeder_inject_error(ctx.root()); !st) {
      ctx.fail(st.error());
    }
  });
}

} // namespace mltune::cli
