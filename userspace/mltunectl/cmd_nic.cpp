// mltunectl nic show|diff|apply [IFACE]
#include "cli.hpp"
#include "reports.hpp"

#include "mltune/node.hpp"

#include "mltune/cpulist.hpp"
#include "mltune/nic.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

struct NicArgs {
  std::string iface;
  std::string profile;
  std::vector<std::string> sets;
  bool skip_unsupported = false;
  std::string feeders;
};

Result<std::unique_ptr<NicBackend>> backend_for(Context &ctx, const NicArgs &a) {
  const Sysroot root = ctx.root();
  if (!root.shares_network()) {
    return input_error("--sysroot " + root.root().string() +
                       ": NIC settings are read and written over netlink, which reaches this machine's own "
                       "interfaces, not the tree's (run it on the node, or in a container with the host's network "
                       "and the host at --sysroot)");
  }
  std::vector<unsigned> feeders;
  if (!a.feeders.empty()) {
    auto set = parse_cpuset(a.feeders, "--feeder");
    if (!set) {
      return set.error();
    }
    feeders = set->cpus();
  } else {
    auto known = nic_feeder_cpus(root);
    if (!known) {
      return known.error();
    }
    feeders = std::move(*known);
  }
  return make_live_nic_backend(root, feeders);
}

// --set [GLOB:]KEY=VALUE -> a rule.
Result<std::vector<NicRule>> rules_for(Context &ctx, const NicArgs &a) {
  std::vector<NicRule> rules;
  if (a.profile != "none") {
    const Sysroot root = ctx.root();
    auto p = ProfileLoader(&root).load(a.profile.empty() ? ctx.default_profile() : a.profile);
    if (!p) {
      return p.error();
    }
    rules = p->nic;
  }
  for (const auto &s : a.sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos) {
      return input_error("--set '" + s + "': expected [IFACE:]KEY=VALUE");
    }
    std::string lhs = s.substr(0, eq);
    std::string glob = a.iface.empty() ? "*" : a.iface;
    if (const size_t colon = lhs.find(':'); colon != std::string::npos) {
      glob = lhs.substr(0, colon);
      lhs = lhs.substr(colon + 1);
    }
    const std::string value = nic_normalize_value(s.substr(eq + 1));
    if (auto err = nic_check_setting(lhs, value); !err.empty()) {
      return input_error("--set '" + s + "': " + err);
    }
    rules.push_back({glob, {{lhs, value, "--set " + s, true}}, "--set " + s});
  }
  return rules;
}

// An RPS mask (hex, as rps_cpus holds it) as the cpulist IRQ affinities are
// shown in ("3" -> "0-1"); anything else as it is.
std::string shown_value(const std::string &key, const std::string &v) {
  if (!key.starts_with("rps.") || !key.ends_with(".cpus")) {
    return v;
  }
  auto set = parse_cpumask(v);
  return set ? (set->empty() ? std::string("none") : set->str()) : v;
}

void print_changes(Context &ctx, const NicReport &r, bool applied) {
  const auto &changes = applied ? r.applied : r.plan.changes;
  if (ctx.json) {
    nlohmann::json j = nic_report_json(r, applied);
    j["dry_run"] = !applied;
    ctx.emit(j);
    return;
  }
  for (const auto &c : changes) {
    *ctx.out << (applied ? "set\t" : "change\t") << (c.ifname.empty() ? "(global)" : c.ifname) << "\t" << c.key << ": '"
             << shown_value(c.key, c.from) << "' -> '" << shown_value(c.key, c.to) << "'\n";
  }
  for (const auto &s : r.skipped) {
    *ctx.out << "skip\t" << s.ifname << "\t" << s.key << ": " << s.why << "\n";
  }
  for (const auto &n : r.notes) {
    *ctx.out << "note\t" << n << "\n";
  }
  if (changes.empty()) {
    *ctx.out << (applied ? "nothing to change\n" : "no differences\n");
  }
}

void run_show(Context &ctx, const NicArgs &a) {
  auto be = backend_for(ctx, a);
  if (!be) {
    return ctx.fail(be.error());
  }
  auto devs = nic_probe_all(**be, a.iface);
  if (!devs) {
    return ctx.fail(devs.error());
  }
  if (ctx.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto &d : *devs) {
      auto hk = (*be)->node_cpus(d.numa_node);
      arr.push_back({{"name", d.name},
                     {"driver", d.driver},
                     {"ifindex", d.ifindex},
                     {"numa_node", d.numa_node},
                     {"housekeeping_cpus", hk ? *hk : std::vector<unsigned>{}},
                     {"settings", d.current},
                     {"max", d.max},
                     {"fixed", d.fixed},
                     {"unsupported", d.unsupported_groups},
                     {"irqs", d.irqs},
                     {"rx_queues", d.rx_queues}});
    }
    return ctx.emit({{"interfaces", arr}});
  }
  for (const auto &d : *devs) {
    *ctx.out << d.name << " (driver " << d.driver << ", NUMA node " << d.numa_node << ")\n";
    for (const auto &[k, v] : d.current) {
      if (k.starts_with("features.") && d.fixed.contains(k) && ctx.verbose == 0) {
        continue;
      }
      *ctx.out << "  " << k << " = " << v;
      if (const auto it = d.max.find(k); it != d.max.end()) {
        *ctx.out << " (max " << it->second << ")";
      }
      if (d.fixed.contains(k)) {
        *ctx.out << " [fixed]";
      }
      *ctx.out << "\n";
    }
    for (const auto &g : d.unsupported_groups) {
      *ctx.out << "  " << g << ": not supported by the driver\n";
    }
  }
}

void run_apply(Context &ctx, const NicArgs &a, bool diff_only) {
  auto rules = rules_for(ctx, a);
  if (!rules) {
    return ctx.fail(rules.error());
  }
  auto be = backend_for(ctx, a);
  if (!be) {
    return ctx.fail(be.error());
  }
  NicOptions opts{a.iface, a.skip_unsupported};
  const Sysroot root = ctx.root();
  const bool changes = !diff_only && !ctx.dry_run;
  auto lock = NodeLock::acquire_if(root, changes);
  if (!lock) {
    return ctx.fail(lock.error());
  }
  if (changes) {
    opts.record_baseline = &root; // what this changes first is recorded for `mltunectl off`
  }
  auto rep = nic_apply(*rules, **be, opts, diff_only || ctx.dry_run);
  if (!rep) {
    return ctx.fail(rep.error());
  }
  print_changes(ctx, *rep, !(diff_only || ctx.dry_run));
  if (diff_only && !rep->plan.changes.empty()) {
    ctx.rc = k_exit_failed;
  }
}

} // namespace

void print_nic_changes(Context &ctx, const NicReport &r, bool applied) {
  print_changes(ctx, r, applied);
}

void register_nic(CLI::App &app, Context &ctx) {
  auto *nic = app.add_subcommand("nic", "NIC rings, channels, coalescing, offloads, queue IRQs and RPS/RFS");
  nic->require_subcommand(1);
  auto args = std::make_shared<NicArgs>();
  auto add_common = [args](CLI::App *c, bool profile) {
    c->add_option("iface", args->iface, "Only this interface");
    c->add_option("--feeder", args->feeders, "GPU-feeder CPUs to keep NIC IRQs and RPS off (cpulist)")
        ->type_name("CPULIST");
    if (profile) {
      c->add_option("-p,--profile", args->profile, "Profile (default: the configured one; 'none': --set only)");
      c->add_option("--set", args->sets, "Extra setting [IFACE:]KEY=VALUE (repeatable), e.g. rings.rx=max")
          ->type_name("SETTING");
    }
  };
  // Each subcommand's options are added when it is the one being parsed
  // (CLI11's pre-parse callback), which keeps `nic apply` start-up small.
  auto *show = nic->add_subcommand("show", "Show every NIC's current settings and maximums");
  show->preparse_callback([show, add_common](size_t) { add_common(show, false); });
  show->callback([&ctx, args] { run_show(ctx, *args); });
  auto *diff = nic->add_subcommand("diff", "Show what apply would change (exit 1 when something differs)");
  diff->preparse_callback([diff, add_common](size_t) { add_common(diff, true); });
  diff->callback([&ctx, args] { run_apply(ctx, *args, true); });
  auto *apply = nic->add_subcommand("apply", "Apply the profile's [nic] settings to every NIC as one transaction");
  apply->preparse_callback([apply, add_common, args](size_t) {
    add_common(apply, true);
    apply->add_flag("--skip-unsupported", args->skip_unsupported,
                    "Skip settings the driver refuses as unsupported instead of rolling back");
  });
  apply->callback([&ctx, args] { run_apply(ctx, *args, false); });
}

} // namespace mltune::cli
