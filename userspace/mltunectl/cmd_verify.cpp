// mltunectl verify PROFILE, mltunectl diff A B
#include "cli.hpp"

#include "mltune/compare.hpp"
#include "mltune/drift.hpp"
#include "mltune/node.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

void verify(Context &ctx, const std::string &name) {
  const Sysroot root = ctx.root();
  // The active profile's name means the file its switch took it from.
  auto p = load_active_profile(root, name);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto check = check_node(*p, root);
  if (!check) {
    return ctx.fail(check.error());
  }
  nlohmann::json diffs = nlohmann::json::array();
  const DriftLog drift = load_drift_log(root); // who wrote what (empty without the watcher)
  int counted = 0;
  for (const auto &d : check->differences) {
    counted += d.counts ? 1 : 0;
    const Knob *k = d.domain == "knobs" ? p->find(d.key) : nullptr;
    const auto by = k != nullptr ? drift.last_write(k->path()) : std::nullopt;
    nlohmann::json j{{"domain", d.domain},
                     {"key", d.key},
                     {"expected", d.expected},
                     {"current", d.current},
                     {"state", d.state},
                     {"optional", !d.counts},
                     {"changed_by", by ? drift_write_json(*by) : nlohmann::json(nullptr)}};
    if (k != nullptr) {
      j["path"] = k->path();
    }
    diffs.push_back(std::move(j));
    if (!ctx.json) {
      *ctx.out << (d.counts ? "- " : "  ") << (d.domain == "knobs" ? "" : d.domain + " ") << d.key << ": current '"
               << d.current << "', expected '" << d.expected << "'"
               << (d.state == "differs" ? "" : " (" + d.state + ")") << (d.counts ? "" : " [optional, ignored]")
               << (by ? "; changed by " + describe(*by) : "") << "\n";
    }
  }
  ctx.rc = counted == 0 ? k_exit_ok : k_exit_failed;
  nlohmann::json domains = nlohmann::json::array();
  std::string unchecked;
  std::size_t knobs_checked = 0;
  for (const auto &dc : check->domains) {
    knobs_checked += dc.domain == "knobs" ? dc.checked : 0;
    domains.push_back({{"domain", dc.domain}, {"state", dc.state}, {"checked", dc.checked}, {"note", dc.note}});
    if (dc.state == "unchecked") {
      unchecked += "; " + dc.domain + " not checked: " + dc.note;
    } else if (dc.domain == "knobs" && !dc.note.empty()) {
      unchecked += "; " + dc.note;
    }
  }
  if (ctx.json) {
    ctx.emit({{"profile", p->name},
              {"match", counted == 0},
              {"checked", knobs_checked},
              {"domains", domains},
              {"differences", diffs}});
  } else {
    *ctx.out << p->name << ": " << (counted == 0 ? "node matches" : "node differs") << " (" << counted
             << " difference(s)";
    for (const auto &dc : check->domains) {
      if (dc.state != "not-applicable" && dc.state != "unchecked") {
        *ctx.out << ", " << dc.checked << " "
                 << (dc.domain == "nic"     ? "NIC setting(s)"
                     : dc.domain == "sched" ? "thread(s)"
                     : dc.domain == "knobs" ? "knob(s)"
                                            : "module(s)");
      }
    }
    *ctx.out << unchecked << ")\n";
  }
}

void diff(Context &ctx, const std::string &a, const std::string &b) {
  const Sysroot root = ctx.root();
  const ProfileLoader loader(&root);
  auto pa = loader.load(a);
  if (!pa) {
    return ctx.fail(pa.error());
  }
  auto pb = loader.load(b);
  if (!pb) {
    return ctx.fail(pb.error());
  }
  const auto d = diff_profiles(*pa, *pb);
  ctx.rc = d.empty() ? k_exit_ok : k_exit_failed;
  if (ctx.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto &e : d) {
      arr.push_back({{"domain", e.domain},
                     {"key", e.key},
                     {"a", e.a.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.a)},
                     {"b", e.b.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.b)}});
    }
    ctx.emit({{"a", pa->name}, {"b", pb->name}, {"identical", d.empty()}, {"differences", arr}});
    return;
  }
  for (const auto &e : d) {
    *ctx.out << (e.domain == "knobs" ? "" : e.domain + " ") << e.key << ": " << (e.a.empty() ? "(unset)" : e.a)
             << " -> " << (e.b.empty() ? "(unset)" : e.b) << "\n";
  }
  if (d.empty()) {
    *ctx.out << pa->name << " and " << pb->name << " set the same values\n";
  }
}

} // namespace

void register_verify(CLI::App &app, Context &ctx) {
  auto name = std::make_shared<std::string>();
  auto *v = app.add_subcommand("verify", "Exit 0 only when the node matches PROFILE; print the differences");
  v->add_option("profile", *name, "Profile name or TOML file")->required();
  v->callback([&ctx, name] { verify(ctx, *name); });

  auto a = std::make_shared<std::string>();
  auto b = std::make_shared<std::string>();
  auto *d = app.add_subcommand("diff", "Compare two profiles (exit 1 when they differ)");
  d->add_option("a", *a, "First profile")->required();
  d->add_option("b", *b, "Second profile")->required();
  d->callback([&ctx, a, b] { diff(ctx, *a, *b); });
}

} // namespace mltune::cli
