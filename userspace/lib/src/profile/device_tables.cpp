// The [cpu] table and the [block."GLOB"] tables of a profile
// (Documentation/profiles.rst): each key and its value checked, in file
// order, with file:line in errors.  Expanded on a node into sysfs knobs by
// the device settings (devices/, mltune/device_knobs.hpp).
#include "mltune/parse.hpp"
#include "profile/profile_phases.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <utility>

namespace mltune {

namespace {

bool is_word(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::ranges::all_of(s, [](char c) {
    return std::islower(static_cast<unsigned char>(c)) != 0 || std::isdigit(static_cast<unsigned char>(c)) != 0 ||
           c == '_' || c == '-';
  });
}

// A non-negative integer within [lo, hi], or the error text.
std::string in_range(std::string_view key, std::string_view value, long long lo, long long hi) {
  const auto n = parse_int<long long>(value);
  if (!n || *n < lo || *n > hi) {
    return std::string(key) + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
           " (got '" + std::string(value) + "')";
  }
  return {};
}

// energy_perf_bias names as the kernel documents them (the x86 EPB values).
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> k_epb_names{{
    {"performance", "0"},
    {"balance-performance", "4"},
    {"normal", "6"},
    {"balance-power", "8"},
    {"power", "15"},
}};

// A TOML scalar as the value sysfs takes: integers in decimal, booleans 1/0.
std::optional<std::string> scalar(const toml::node &v) {
  if (const auto *i = v.as_integer()) {
    return std::to_string(i->get());
  }
  if (const auto *b = v.as_boolean()) {
    return std::string(b->get() ? "1" : "0");
  }
  if (const auto *s = v.as_string()) {
    return s->get();
  }
  return std::nullopt;
}

// The value a [cpu] key takes (booleans 1/0, energy_perf_bias names as
// numbers), or the error text ("" when fine).
std::string cpu_setting_check(std::string_view key, std::string &value) {
  if (key == "governor") {
    return is_word(value) ? "" : "governor must be a governor's name (performance, schedutil, ...)";
  }
  if (key == "energy_performance_preference") {
    return is_word(value) ? "" : "energy_performance_preference must be a preference's name or number";
  }
  if (key == "energy_perf_bias") {
    for (const auto &[name, num] : k_epb_names) {
      if (value == name) {
        value = num;
        return {};
      }
    }
    return in_range(key, value, 0, 15);
  }
  if (key == "boost") {
    return value == "1" || value == "0" ? "" : "boost must be true or false";
  }
  if (key == "idle_max_latency_us") {
    return in_range(key, value, 0, 100000000);
  }
  return "unknown [cpu] key '" + std::string(key) +
         "' (expected governor, energy_performance_preference, energy_perf_bias, boost, idle_max_latency_us)";
}

// The same for a [block."GLOB"] key.
std::string block_setting_check(std::string_view key, std::string &value) {
  if (key == "scheduler") {
    return is_word(value) ? "" : "scheduler must be a scheduler's name (none, mq-deadline, kyber, bfq)";
  }
  if (key == "read_ahead_kb" || key == "max_sectors_kb") {
    return in_range(key, value, 0, 1LL << 30);
  }
  if (key == "nr_requests") {
    return in_range(key, value, 4, 1LL << 20);
  }
  if (key == "wbt_lat_usec") {
    return in_range(key, value, -1, 1LL << 40); // -1: the kernel's default back
  }
  if (key == "rq_affinity" || key == "nomerges") {
    return in_range(key, value, 0, 2);
  }
  if (key == "add_random" || key == "iostats") {
    return in_range(key, value, 0, 1);
  }
  return "unknown [block] key '" + std::string(key) +
         "' (expected scheduler, read_ahead_kb, nr_requests, wbt_lat_usec, rq_affinity, nomerges, add_random, "
         "iostats, max_sectors_kb)";
}

// toml::table iterates in key order; settings apply in file order.
std::vector<std::pair<const toml::key *, const toml::node *>> in_file_order(const toml::table &t) {
  std::vector<std::pair<const toml::key *, const toml::node *>> out;
  for (const auto &[k, v] : t) {
    out.emplace_back(&k, &v);
  }
  std::ranges::stable_sort(
      out, [](const auto &a, const auto &b) { return a.first->source().begin < b.first->source().begin; });
  return out;
}

} // namespace

namespace detail {

Status parse_cpu_table(const toml::table &cpu, const std::string &display, std::vector<DeviceSetting> &out) {
  for (const auto &[kp, vp] : in_file_order(cpu)) {
    const toml::key &k = *kp;
    const toml::node &v = *vp;
    const std::string pos = where(display, k.source());
    const std::string key(k.str());
    auto value = scalar(v);
    if (!value) {
      return input_error(pos + ": [cpu] " + key + ": expected an integer, a boolean or a string");
    }
    if (auto err = cpu_setting_check(key, *value); !err.empty()) {
      return input_error(pos + ": [cpu] " + err);
    }
    const auto it = std::ranges::find_if(out, [&](const DeviceSetting &s) { return s.key == key; });
    if (it != out.end()) {
      *it = {key, *value, pos};
    } else {
      out.push_back({key, *value, pos});
    }
  }
  return {};
}

Status parse_block_tables(const toml::table &block, const std::string &display, std::vector<BlockRule> &out) {
  for (const auto &[kp, vp] : in_file_order(block)) {
    const std::string glob(kp->str());
    const std::string pos = where(display, kp->source());
    const auto *tbl = vp->as_table();
    if (tbl == nullptr) {
      return input_error(pos + ": [block.\"" + glob + "\"] must be a table");
    }
    if (glob.empty() || glob.size() > 64 || glob.find_first_of("/ \t\n") != std::string::npos) {
      return input_error(pos + ": invalid disk glob '" + glob + "'");
    }
    BlockRule rule{glob, {}, pos};
    for (const auto &[skp, svp] : in_file_order(*tbl)) {
      const toml::key &k = *skp;
      const toml::node &v = *svp;
      const std::string spos = where(display, k.source());
      const std::string key(k.str());
      auto value = scalar(v);
      if (!value) {
        return input_error(spos + ": [block.\"" + glob + "\"] " + key + ": expected an integer or a string");
      }
      if (auto err = block_setting_check(key, *value); !err.empty()) {
        return input_error(spos + ": [block.\"" + glob + "\"] " + err);
      }
      rule.settings.push_back({key, *value, spos});
    }
    out.push_back(std::move(rule));
  }
  return {};
}

} // namespace detail

} // namespace mltune
