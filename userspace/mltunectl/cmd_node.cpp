// mltunectl off, mltunectl active (status), mltunectl recommend: the node
// as one unit (mltune/node.hpp, mltune/recommend.hpp).
#include "cli.hpp"

#include "mltune/metrics.hpp"
#include "mltune/node.hpp"
#include "mltune/recommend.hpp"
#include "mltune/topology.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

void run_off(Context &ctx) {
  const Sysroot root = ctx.root();
  if (ctx.dry_run) {
    auto st = node_status(root);
    if (!st) {
      return ctx.fail(st.error());
    }
    if (ctx.json) {
      return ctx.emit({{"dry_run", true}, {"profile", st->profile}, {"domains", domains_json(st->domains)}});
    }
    *ctx.out << "would return every domain to its baseline; now:\n";
    print_domains(ctx, st->domains);
    return;
  }
  auto rep = node_off(root);
  if (!rep) {
    return ctx.fail(rep.error());
  }
  ctx.rc = rep->ok() ? k_exit_ok : k_exit_failed;
  if (ctx.json) {
    return ctx.emit({{"ok", rep->ok()}, {"domains", domains_json(rep->domains)}});
  }
  *ctx.out << (rep->ok() ? "every domain is back on its baseline\n" : "some domains could not be put back (exit 1):\n");
  print_domains(ctx, rep->domains);
}

void run_active(Context &ctx, const std::string &field) {
  auto st = node_status(ctx.root());
  if (!st) {
    return ctx.fail(st.error());
  }
  if (ctx.json || !field.empty()) {
    nlohmann::json diffs = nlohmann::json::array();
    for (const auto &d : st->differences) {
      diffs.push_back({{"domain", d.domain},
                       {"key", d.key},
                       {"expected", d.expected},
                       {"current", d.current},
                       {"state", d.state},
                       {"optional", !d.counts}});
    }
    const nlohmann::json doc{
        {"profile", st->profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(st->profile)},
        {"backend", to_string(st->backend)},
        {"domains", domains_json(st->domains)},
        {"differences", diffs},
        {"in_line", st->in_line()},
        {"conformance", st->conformance().empty() ? nlohmann::json(nullptr) : nlohmann::json(st->conformance())}};
    if (!emit_field(ctx, doc, field)) {
      ctx.emit(doc);
    }
    return;
  }
  *ctx.out << "profile: " << (st->profile.empty() ? "none" : st->profile) << " (" << to_string(st->backend)
           << " backend)\n";
  print_domains(ctx, st->domains);
  if (ctx.verbose > 0) {
    for (const auto &d : st->differences) {
      *ctx.out << "  - " << d.domain << " " << d.key << ": current '" << d.current << "', expected '" << d.expected
               << "'\n";
    }
  }
}

// What a scheduler matches nodes on: the fingerprint of the active profile,
// printed only while every domain is in line with it.
void run_conformance(Context &ctx) {
  auto st = node_status(ctx.root());
  if (!st) {
    return ctx.fail(st.error());
  }
  const std::string c = st->conformance();
  ctx.rc = c.empty() ? k_exit_failed : k_exit_ok;
  if (ctx.json) {
    return ctx.emit({{"profile", st->profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(st->profile)},
                     {"in_line", st->in_line()},
                     {"hash", c.empty() ? nlohmann::json(nullptr) : nlohmann::json(c)}});
  }
  if (!c.empty()) {
    *ctx.out << c << "\n";
  } else if (st->profile.empty()) {
    *ctx.err << "mltunectl: no profile is active\n";
  } else {
    *ctx.err << "mltunectl: the node is not in line with '" << st->profile << "' (" << st->out_of_line() << ")\n";
  }
}

// The node state as Prometheus metrics, on stdout or atomically replacing
// FILE (a node path: under --sysroot, the tree's), which node_exporter's
// textfile collector reads without ever seeing half a file.
void run_metrics(Context &ctx, const std::string &output) {
  if (!output.empty() && (output.front() != '/' || !output.ends_with(".prom"))) {
    return ctx.fail(input_error("metrics --output '" + output +
                                "': an absolute path ending in .prom (the textfile collector reads only those)"));
  }
  auto st = node_status(ctx.root());
  if (!st) {
    return ctx.fail(st.error());
  }
  auto families = node_metrics(*st, MLTUNE_VERSION);
  // The pool without the module, the feeder state unreadable: left out.
  auto pool = pool_status(ctx.root());
  auto feeder = feeder_recorded(ctx.root());
  for (auto &f :
       resource_metrics(pool ? std::optional<PoolStatus>(*pool) : std::nullopt, feeder ? *feeder : FeederState{})) {
    families.push_back(std::move(f));
  }
  if (!output.empty()) {
    if (auto w = ctx.root().write_file(output, prometheus_text(families), {.durable = false}); !w) {
      return ctx.fail(with_context(w.error(), "metrics --output"));
    }
    if (ctx.json) {
      return ctx.emit({{"output", output}, {"families", families.size()}});
    }
    return;
  }
  if (ctx.json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto &f : families) {
      for (const auto &smp : f.samples) {
        nlohmann::json labels = nlohmann::json::object();
        for (const auto &[k, v] : smp.labels) {
          labels[k] = v;
        }
        a.push_back({{"name", f.name}, {"labels", labels}, {"value", smp.value}});
      }
    }
    return ctx.emit({{"samples", a}});
  }
  *ctx.out << prometheus_text(families);
}

nlohmann::json follow_json(const FollowRecord &r) {
  return {{"generation", r.generation}, {"profile", r.profile}, {"result", r.result},
          {"error", r.error},           {"in_line", r.in_line}, {"detail", r.detail}};
}

void print_follow(Context &ctx, const FollowState &s) {
  if (ctx.json) {
    ctx.emit({{"last", follow_json(s.last)},
              {"last_failure", s.last_failure ? follow_json(*s.last_failure) : nlohmann::json(nullptr)}});
    return;
  }
  *ctx.out << "generation " << s.last.generation << ": " << s.last.result << ", user-space domains in line with '"
           << s.last.in_line << "'" << (s.last.detail.empty() ? "" : " (" + s.last.detail + ")") << "\n";
  if (!s.last.error.empty()) {
    *ctx.out << "  " << s.last.error << "\n";
  }
}

void run_follow(Context &ctx, bool listen) {
  if (listen) {
    catch_stop_signals();
    auto st = follow_listen(
        ctx.root(), [] { return stop_requested(); },
        [&ctx](const FollowState &s) {
          print_follow(ctx, s);
          ctx.out->flush();
        });
    if (!st) {
      ctx.fail(st.error());
    }
    return;
  }
  auto s = follow_module(ctx.root());
  if (!s) {
    return ctx.fail(s.error());
  }
  print_follow(ctx, *s);
  ctx.rc = s->last.result == "ok" ? k_exit_ok : k_exit_failed;
}

void run_recommend(Context &ctx) {
  auto t = discover_topology(ctx.root(), {.pcie_state = false});
  if (!t) {
    return ctx.fail(t.error());
  }
  const Recommendation r = recommend_profile(*t);
  if (ctx.json) {
    return ctx.emit({{"profile", r.profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.profile)},
                     {"reasons", r.reasons},
                     {"gpus", r.gpus},
                     {"rdma_nics", r.rdma_nics},
                     {"memory_kb", r.memory_kb},
                     {"node_memory_kb", r.node_memory_kb}});
  }
  *ctx.out << (r.profile.empty() ? "none" : r.profile) << "\n";
  for (const auto &why : r.reasons) {
    *ctx.out << "  " << why << "\n";
  }
}

} // namespace

void register_node(CLI::App &app, Context &ctx) {
  auto *off = app.add_subcommand("off", "Return every domain to what mltune found: knobs, NIC settings and IRQs, "
                                        "thread policies, feeder cores, pool, persisted configuration, boot drop-in");
  off->callback([&ctx] { run_off(ctx); });
  auto *active = app.add_subcommand("active", "The active profile and the state of each domain (applied, drifted, "
                                              "off, pending-reboot)");
  active->alias("status");
  auto field = std::make_shared<std::string>();
  add_field_option(active, *field, {"profile", "backend", "in_line", "conformance"});
  active->callback([&ctx, field] { run_active(ctx, *field); });
  auto *follow = app.add_subcommand("follow", "After a write to /sys/kernel/mltune/profile: bring the modules, NIC "
                                              "settings and thread rules in line with the module's profile, or "
                                              "switch the module back (the package's udev rule runs it)");
  auto listen = std::make_shared<bool>(false);
  follow->add_flag("--listen", *listen, "Follow every switch of the module (uevents) until SIGTERM");
  follow->callback([&ctx, listen] { run_follow(ctx, *listen); });
  auto *metrics = app.add_subcommand("metrics", "The node state as Prometheus metrics (active profile, state and "
                                                "differences of each domain), for node_exporter's textfile collector");
  auto output = std::make_shared<std::string>();
  metrics->add_option("-o,--output", *output,
                      "Replace this .prom file atomically instead of printing (e.g. "
                      "/var/lib/prometheus/node-exporter/mltune.prom)");
  metrics->callback([&ctx, output] { run_metrics(ctx, *output); });
  auto *conf = app.add_subcommand("conformance", "The active profile's content hash while the node is in line with "
                                                 "it (exit 0), for node labels and scheduler features; exit 1 when "
                                                 "no profile is active or the node drifted");
  conf->callback([&ctx] { run_conformance(ctx); });
  auto *rec = app.add_subcommand("recommend", "The profile for this node's hardware (GPUs, RDMA NICs, memory), "
                                              "with the reasons");
  rec->callback([&ctx] { run_recommend(ctx); });
}

} // namespace mltune::cli
