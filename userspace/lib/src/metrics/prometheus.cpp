// Prometheus metrics of the node state (mltune/metrics.hpp).
#include "mltune/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mltune {

namespace {

// The states a domain can be in (step.hpp DomainState, and a follow's
// result); each domain has one 0/1 series per state (a Prometheus state set),
// so an alert can match state="drifted" without knowing the others.
constexpr std::string_view k_states[] = {"applied",   "drifted",     "off",   "pending-reboot",
                                         "unchecked", "rolled-back", "failed"};

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

} // namespace

std::vector<MetricFamily> node_metrics(const NodeStatus &status, std::string_view version) {
  std::vector<MetricFamily> out;
  out.push_back({"mltune_info", "mltune's version (always 1).", "gauge", {{{{"version", std::string(version)}}, 1}}});

  MetricFamily active{
      "mltune_profile_active", "The active profile and backend (1); no sample when no profile is active.", "gauge", {}};
  if (!status.profile.empty()) {
    active.samples.push_back({{{"profile", status.profile}, {"backend", std::string(to_string(status.backend))}}, 1});
  }
  out.push_back(std::move(active));

  out.push_back({"mltune_in_line",
                 "1 when a profile is active and no domain is drifted, failed or rolled back (what verify checks).",
                 "gauge",
                 {{{}, status.in_line() ? 1.0 : 0.0}}});

  MetricFamily conf{"mltune_conformance_info",
                    "The active profile's content hash while the node is in line with it (1); no sample otherwise.",
                    "gauge",
                    {}};
  if (const auto c = status.conformance(); !c.empty()) {
    conf.samples.push_back({{{"profile", status.profile}, {"hash", c}}, 1});
  }
  out.push_back(std::move(conf));

  MetricFamily state{"mltune_domain_state",
                     "State of each domain of the node: one series a state, 1 for the domain's current state.",
                     "gauge",
                     {}};
  for (const auto &d : status.domains) {
    std::vector<std::string_view> states(std::begin(k_states), std::end(k_states));
    if (std::ranges::find(states, d.state) == states.end()) {
      states.emplace_back(d.state);
    }
    for (const auto s : states) {
      state.samples.push_back({{{"domain", d.domain}, {"state", std::string(s)}}, s == d.state ? 1.0 : 0.0});
    }
  }
  out.push_back(std::move(state));

  MetricFamily diffs{"mltune_differences",
                     "Settings of the active profile that differ on the node, by domain (optional ones not counted).",
                     "gauge",
                     {}};
  for (const auto dom : checked_domains()) {
    const auto n = std::count_if(status.differences.begin(), status.differences.end(),
                                 [&](const NodeDifference &x) { return x.domain == dom && x.counts; });
    diffs.samples.push_back({{{"domain", std::string(dom)}}, static_cast<double>(n)});
  }
  out.push_back(std::move(diffs));
  return out;
}

std::vector<MetricFamily> resource_metrics(const std::optional<PoolStatus> &pool, const FeederState &feeder) {
  std::vector<MetricFamily> out;
  if (pool) {
    const auto bytes = [](std::uint64_t pages) { return static_cast<double>(pages * k_pool_page_size); };
    MetricFamily nodes{"mltune_pool_bytes",
                       "Huge-page pool memory per NUMA node: free (ready to map) and mapped (in buffers).",
                       "gauge",
                       {}};
    for (const auto &n : pool->nodes) {
      nodes.samples.push_back({{{"node", std::to_string(n.node)}, {"state", "free"}}, bytes(n.free)});
      nodes.samples.push_back({{{"node", std::to_string(n.node)}, {"state", "mapped"}}, bytes(n.mapped)});
    }
    out.push_back(std::move(nodes));
    MetricFamily users{
        "mltune_pool_user_mapped_bytes", "Pool memory each user has mapped (users with none left out).", "gauge", {}};
    for (const auto &u : pool->users) {
      users.samples.push_back({{{"uid", std::to_string(u.uid)}}, bytes(u.pages)});
    }
    out.push_back(std::move(users));
    out.push_back({"mltune_pool_user_quota_bytes",
                   "Pool memory one user may have mapped at a time (0: no limit).",
                   "gauge",
                   {{{}, bytes(pool->user_quota)}}});
  }
  MetricFamily cpus{
      "mltune_feeder_cpus", "GPU-feeder cores in force, by mechanism (0 when feeder cores are off).", "gauge", {}};
  cpus.samples.push_back({{{"mechanism", feeder.active ? feeder.mechanism : std::string("off")}},
                          feeder.active ? static_cast<double>(feeder.cpus.count()) : 0.0});
  out.push_back(std::move(cpus));
  return out;
}

std::string prometheus_text(const std::vector<MetricFamily> &families) {
  std::string out;
  for (const auto &f : families) {
    out += "# HELP " + f.name + " " + f.help + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const auto &s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += "{";
        for (size_t i = 0; i < s.labels.size(); ++i) {
          out += (i > 0 ? "," : "") + s.labels[i].first + "=\"" + escape_label(s.labels[i].second) + "\"";
        }
        out += "}";
      }
      out += " " + format_value(s.value) + "\n";
    }
  }
  return out;
}

} // namespace mltune
