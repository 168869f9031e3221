// mltunectl drift start|stop|status|show  (Documentation/noise.rst, "Drift attribution")
#include "cli.hpp"

#include "mltune/drift.hpp"

#include <ostream>

namespace mltune::cli {

nlohmann::json drift_write_json(const DriftWrite &w) {
  nlohmann::json j{{"op", w.op},
                   {"comm", w.comm},
                   {"pid", w.tgid},
                   {"tid", w.pid},
                   {"cgroup", w.cgroup},
                   {"time", w.time},
                   {"unix_ns", w.unix_ns},
                   {"new", w.new_value},
                   {"old", w.old_value ? nlohmann::json(*w.old_value) : nlohmann::json(nullptr)},
                   {"kernel", w.kernel},
                   {"truncated", w.truncated},
                   {"seq", w.seq}};
  if (!w.path.empty()) {
    j["path"] = w.path;
  } else {
    j["target"] = w.target;
  }
  return j;
}

void register_drift(CLI::App &app, Context &ctx) {
  auto *d = app.add_subcommand("drift", "Who changed a setting: the BPF drift watcher");
  d->require_subcommand(1);

  d->add_subcommand("start", "Start recording every writer of sysctl, sysfs, cgroup, IRQ affinity and thread "
                             "scheduling settings")
      ->callback([&ctx] {
        if (auto st = drift_start(ctx.root()); !st) {
          return ctx.fail(st.error());
        }
        if (!ctx.json) {
          *ctx.out << "drift watcher started\n";
        }
      });

  d->add_subcommand("stop", "Stop the watcher and drop its records")->callback([&ctx] {
    auto stopped = drift_stop(ctx.root());
    if (!stopped) {
      return ctx.fail(stopped.error());
    }
    if (ctx.json) {
      return ctx.emit({{"stopped", *stopped}});
    }
    *ctx.out << (*stopped ? "drift watcher stopped\n" : "drift watcher was not running: nothing to stop\n");
  });

  d->add_subcommand("status", "Whether the watcher runs, since when, and what this kernel lets it see")
      ->callback([&ctx] {
        auto s = drift_status(ctx.root());
        if (!s) {
          return ctx.fail(s.error());
        }
        if (ctx.json) {
          ctx.emit({{"built", s->built},
                    {"running", s->running},
                    {"pin_dir", s->pin_dir},
                    {"started", s->started},
                    {"missing", s->missing},
                    {"records", s->records ? nlohmann::json(*s->records) : nlohmann::json(nullptr)}});
          return;
        }
        *ctx.out << "drift watcher: " << (s->running ? "running" : "not running")
                 << (s->built ? "" : " (this mltunectl was built without BPF)") << "\n";
        if (s->running) {
          *ctx.out << "since: " << (s->started.empty() ? "unknown" : s->started)
                   << "\nrecords: " << s->records.value_or(0) << "\n";
          if (!s->missing.empty()) {
            *ctx.out << "not watched on this kernel: " << s->missing << "\n";
          }
        }
      });

  auto path = std::make_shared<std::string>();
  auto tid = std::make_shared<int>(0);
  auto *show = d->add_subcommand("show", "The recorded writes, newest first (exit 1 when nothing matches)");
  show->add_option("--path", *path, "Only the last write of this file (e.g. /proc/sys/vm/swappiness)");
  show->add_option("--tid", *tid, "Only the last scheduling change of this thread");
  show->callback([&ctx, path, tid] {
    const Sysroot root = ctx.root();
    auto s = drift_status(root);
    if (!s) {
      return ctx.fail(s.error());
    }
    if (!s->running) {
      return ctx.fail(failure("the drift watcher is not running (mltunectl drift start)"));
    }
    const DriftLog log = load_drift_log(root);
    std::vector<DriftWrite> shown;
    if (!path->empty()) {
      if (auto w = log.last_write(*path)) {
        shown.push_back(*w);
      }
    } else if (*tid != 0) {
      if (auto w = log.last_sched(*tid)) {
        shown.push_back(*w);
      }
    } else {
      shown = log.writes();
    }
    ctx.rc = shown.empty() && (!path->empty() || *tid != 0) ? k_exit_failed : k_exit_ok;
    if (ctx.json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto &w : shown) {
        arr.push_back(drift_write_json(w));
      }
      ctx.emit({{"writes", arr}});
      return;
    }
    for (const auto &w : shown) {
      *ctx.out << (w.path.empty() ? w.op : w.path) << ": " << describe(w) << "\n";
    }
    if (shown.empty()) {
      *ctx.out << "no write recorded" << (path->empty() ? "" : " for " + *path) << "\n";
    }
  });
}

} // namespace mltune::cli
