// mltunectl sched list|apply|watch|reset, and the top-level `watch` alias.
#include "cli.hpp"
#include "reports.hpp"

#include "mltune/sched.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <ostream>
#include <sched.h>

namespace mltune::cli {

namespace {

struct SchedArgs {
  std::string profile;
  int pid = 0;
  std::string feeder;
  double duration = 0;
  int rt_priority = 1;
};

std::string mono_stamp() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "[%ld.%06ld]", static_cast<long>(ts.tv_sec), ts.tv_nsec / 1000);
  return buf;
}

std::string action_line(const SchedAction &a) {
  std::string s = a.result + ": " + std::to_string(a.pid) + "/" + std::to_string(a.tid) + " \"" + a.comm + "\"";
  if (!a.rule.empty()) {
    s += " rule " + a.rule;
  }
  s += ": " + a.before.describe() + " -> " + a.after.describe();
  if (!a.cgroup.empty()) {
    s += " (cgroup " + a.cgroup + ")";
  }
  if (!a.message.empty()) {
    s += "; " + a.message;
  }
  return s;
}

nlohmann::json domain_json(const RootDomain &d) {
  return {{"name", d.name}, {"cpus", d.cpus.str()},     {"limit", d.limit}, {"reserved", d.reserved},
          {"used", d.used}, {"requested", d.requested}, {"fits", d.fits()}, {"explain", d.explain()}};
}

Result<Profile> load_profile(Context &ctx, const SchedArgs &args) {
  const Sysroot root = ctx.root();
  return ProfileLoader(&root).load(args.profile.empty() ? ctx.default_profile() : args.profile);
}

SchedOptions options(Context &ctx, const SchedArgs &args) {
  SchedOptions o;
  if (args.pid > 0) {
    o.pid = args.pid;
  }
  o.feeder = args.feeder;
  o.dry_run = ctx.dry_run;
  return o;
}

void report(Context &ctx, const SchedReport &rep, const char *what) {
  bool failed = false;
  for (const auto &a : rep.actions) {
    failed = failed || a.result == "failed";
  }
  if (ctx.json) {
    nlohmann::json acts = nlohmann::json::array();
    for (const auto &a : rep.actions) {
      acts.push_back(sched_action_json(a));
    }
    nlohmann::json doms = nlohmann::json::array();
    for (const auto &d : rep.domains) {
      doms.push_back(domain_json(d));
    }
    ctx.emit({{"command", what}, {"actions", acts}, {"domains", doms}, {"notes", rep.notes}});
  } else {
    for (const auto &n : rep.notes) {
      *ctx.out << n << "\n";
    }
    for (const auto &a : rep.actions) {
      *ctx.out << action_line(a) << "\n";
    }
    if (rep.actions.empty()) {
      *ctx.out << "sched " << what << ": no matching threads\n";
    }
  }
  if (failed) {
    ctx.rc = k_exit_failed;
  }
}

void run_list(Context &ctx, const SchedArgs &args) {
  auto p = load_profile(ctx, args);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto sys = make_live_sched_system(ctx.root());
  const auto entries = sched_list(*sys, p->sched_rules, args.pid > 0 ? std::optional<int>(args.pid) : std::nullopt);
  const auto domains = sched_domains(*sys);
  if (ctx.json) {
    nlohmann::json rules = nlohmann::json::array();
    for (const auto &r : p->sched_rules) {
      nlohmann::json j{
          {"name", r.name},       {"thread", r.thread}, {"thread_regex", r.thread_regex},    {"exe", r.exe},
          {"cmdline", r.cmdline}, {"cgroup", r.cgroup}, {"policy", sched_attr_json(r.attr)}, {"cpus", r.cpus},
          {"reason", r.reason},   {"origin", r.origin}};
      j["fallback"] = r.fallback ? sched_attr_json(*r.fallback) : nlohmann::json();
      rules.push_back(j);
    }
    nlohmann::json threads = nlohmann::json::array();
    for (const auto &e : entries) {
      threads.push_back({{"pid", e.thread.pid},
                         {"tid", e.thread.tid},
                         {"comm", e.thread.comm},
                         {"cgroup", e.thread.cgroup},
                         {"rule", e.rule},
                         {"managed", e.managed},
                         {"current", sched_attr_json(e.attr)}});
    }
    nlohmann::json doms = nlohmann::json::array();
    for (const auto &d : domains) {
      doms.push_back(domain_json(d));
    }
    ctx.emit({{"profile", p->name}, {"rules", rules}, {"threads", threads}, {"domains", doms}});
    return;
  }
  *ctx.out << "sched rules of profile '" << p->name << "':\n";
  for (const auto &r : p->sched_rules) {
    *ctx.out << "  " << r.name << ": thread "
             << (r.thread_regex.empty() ? "\"" + r.thread + "\"" : "/" + r.thread_regex + "/") << " -> "
             << r.attr.describe();
    if (!r.cpus.empty()) {
      *ctx.out << " on " << r.cpus;
    }
    if (r.fallback) {
      *ctx.out << " (fallback " << r.fallback->describe() << ")";
    }
    *ctx.out << "\n";
  }
  *ctx.out << "matching threads:\n";
  for (const auto &e : entries) {
    *ctx.out << "  " << e.thread.pid << "/" << e.thread.tid << " \"" << e.thread.comm << "\" "
             << (e.rule.empty() ? "-" : e.rule) << ": " << e.attr.describe() << (e.managed ? " [managed]" : "") << "\n";
  }
  *ctx.out << "root domains:\n";
  for (const auto &d : domains) {
    *ctx.out << "  " << d.explain() << "\n";
  }
}

// Thread policies are set on the live kernel's threads: a file tree, or a
// container without the node's PIDs, is refused (exit 2) unless nothing is
// to change.
Status acts_on_threads(Context &ctx, std::string_view what) {
  if (ctx.dry_run) {
    return {};
  }
  return ctx.root().require_namespaces(what, {"pid", "net"});
}

void run_apply(Context &ctx, const SchedArgs &args) {
  auto p = load_profile(ctx, args);
  if (!p) {
    return ctx.fail(p.error());
  }
  if (auto st = acts_on_threads(ctx, "sched apply"); !st) {
    return ctx.fail(st.error());
  }
  auto sys = make_live_sched_system(ctx.root());
  auto rep = sched_apply(*sys, p->sched_rules, options(ctx, args));
  if (!rep) {
    return ctx.fail(rep.error());
  }
  report(ctx, *rep, "apply");
}

void run_reset(Context &ctx, const SchedArgs &args) {
  if (auto st = acts_on_threads(ctx, "sched reset"); !st) {
    return ctx.fail(st.error());
  }
  auto sys = make_live_sched_system(ctx.root());
  auto rep = sched_reset(*sys, options(ctx, args));
  if (!rep) {
    return ctx.fail(rep.error());
  }
  report(ctx, *rep, "reset");
}

void run_watch(Context &ctx, const SchedArgs &args) {
  auto p = load_profile(ctx, args);
  if (!p) {
    return ctx.fail(p.error());
  }
  // The watcher follows the node's processes over the proc connector
  // (init PID and network namespace only) and sets their policies.
  if (auto st = ctx.root().require_namespaces("watch", {"pid", "net"}); !st) {
    return ctx.fail(st.error());
  }
  auto sys = make_live_sched_system(ctx.root());
  catch_stop_signals();
  // The watcher runs SCHED_FIFO at a low priority (default 1) so that a busy
  // CPU does not delay its reaction to a comm event; reset-on-fork keeps it
  // from handing the policy to anything it starts.  --rt-priority 0: as is.
  std::string rt_note;
  if (args.rt_priority > 0) {
    sched_param sp{};
    sp.sched_priority = args.rt_priority;
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0) {
      rt_note = "watcher runs SCHED_FIFO priority " + std::to_string(args.rt_priority);
    } else {
      rt_note = std::string("watcher stays SCHED_OTHER: sched_setscheduler(SCHED_FIFO): ") + std::strerror(errno);
    }
  }
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  WatchOptions wo;
  wo.sched = options(ctx, args);
  // The watcher keeps its admission ledger incrementally and rescans off the
  // event path (sched_watch); the TTL only bounds a ledger never refreshed.
  wo.sched.ledger_ttl_ms = 60000;
  std::ostream &out = *ctx.out;
  const bool json = ctx.json;
  // Each line flushed as it happens: the watcher runs for as long as the
  // node does, and its log (a file, a pipe, the journal) is read meanwhile.
  wo.sched.log = [&out, json](const SchedAction &a) {
    if (json) {
      auto j = sched_action_json(a);
      j["time"] = mono_stamp();
      out << j.dump() << '\n' << std::flush;
    } else {
      out << mono_stamp() << " " << action_line(a) << '\n' << std::flush;
    }
  };
  wo.log = [&out, json](const std::string &s) {
    if (json) {
      out << nlohmann::json{{"time", mono_stamp()}, {"log", s}}.dump() << '\n' << std::flush;
    } else {
      out << mono_stamp() << " " << s << '\n' << std::flush;
    }
  };
  const double dur = args.duration;
  wo.stop = [start, dur]() {
    if (stop_requested()) {
      return true;
    }
    if (dur <= 0) {
      return false;
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec - start.tv_sec) + static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9 >=
           dur;
  };
  if (!rt_note.empty()) {
    wo.log(rt_note);
  }
  if (auto st = sched_watch(*sys, p->sched_rules, wo); !st) {
    return ctx.fail(st.error());
  }
}

void add_common(CLI::App *c, SchedArgs &args, bool profile, bool placement) {
  if (profile) {
    c->add_option("--profile", args.profile, "Profile with the [[sched.rule]] tables (default: the node's)");
  }
  c->add_option("--pid", args.pid, "Only threads of this process")->check(CLI::PositiveNumber);
  if (placement) {
    c->add_option("--feeder", args.feeder, "Feeder cores for cpus = \"feeder\" (cpulist)")
        ->type_name("CPULIST")
        ->check(cpulist_check());
  }
}

} // namespace

void register_sched(CLI::App &app, Context &ctx) {
  auto args = std::make_shared<SchedArgs>();
  auto *sched = app.add_subcommand("sched", "Thread scheduling rules (SCHED_DEADLINE for NCCL proxy threads)");
  sched->require_subcommand(1);

  auto *list = sched->add_subcommand("list", "Show the rules, the threads they match and the root domains");
  add_common(list, *args, true, false);
  list->callback([&ctx, args] { run_list(ctx, *args); });

  auto *apply = sched->add_subcommand("apply", "Apply the rules to existing threads once");
  add_common(apply, *args, true, true);
  apply->callback([&ctx, args] { run_apply(ctx, *args); });

  auto *reset = sched->add_subcommand("reset", "Return every thread mltune touched to its previous policy");
  add_common(reset, *args, false, false);
  reset->callback([&ctx, args] { run_reset(ctx, *args); });

  auto add_watch = [&](CLI::App *parent, const char *name, const char *help) {
    auto *w = parent->add_subcommand(name, help);
    add_common(w, *args, true, true);
    w->add_option("--duration", args->duration, "Stop after this many seconds (default: until SIGTERM)")
        ->check(CLI::NonNegativeNumber);
    w->add_option("--rt-priority", args->rt_priority,
                  "Run the watcher SCHED_FIFO at this priority (default 1; 0: keep its policy)")
        ->check(CLI::Range(0, 99));
    w->callback([&ctx, args] { run_watch(ctx, *args); });
  };
  add_watch(sched, "watch", "Apply the rules to threads as they are created and named (proc connector)");
  add_watch(&app, "watch", "Same as 'sched watch'");
}

} // namespace mltune::cli
