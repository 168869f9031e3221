// The node's tuning state as Prometheus metrics: `mltunectl metrics`, for
// node_exporter's textfile collector (text exposition format 0.0.4) or as
// JSON.  Documentation/admin-guide.rst lists the metrics.
#pragma once

#include "mltune/feeder.hpp"
#include "mltune/node.hpp"
#include "mltune/pool.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

struct MetricFamily {
  std::string name; // "mltune_domain_state"
  std::string help;
  std::string type; // "gauge"
  std::vector<MetricSample> samples;
};

// Every family, with a sample even where the node has nothing to report
// (no profile active: mltune_in_line 0), so a scrape never loses a series.
[[nodiscard]] std::vector<MetricFamily> node_metrics(const NodeStatus &status, std::string_view version);

// The pool (per NUMA node and per user, in bytes) and the feeder cores, each
// when there is one: no pool family without the module, feeder 0 when off.
[[nodiscard]] std::vector<MetricFamily> resource_metrics(const std::optional<PoolStatus> &pool,
                                                         const FeederState &feeder);

// The text exposition format: # HELP, # TYPE, then one line a sample, label
// values escaped (\\, \", \n).
[[nodiscard]] std::string prometheus_text(const std::vector<MetricFamily> &families);

} // namespace mltune
