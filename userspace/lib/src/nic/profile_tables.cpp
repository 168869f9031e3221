// `[nic."GLOB"]` profile tables -> NicRule.
#include "profile_tables.hpp"

#include <algorithm>
#include <utility>

namespace mltune {

namespace {

std::string at(const std::string &display, const toml::source_region &r) {
  return display + ":" + std::to_string(r.begin.line);
}

// One TOML scalar as a setting value: integers in decimal, booleans on/off.
Result<std::string> scalar(const toml::node &v, const std::string &where, const std::string &key) {
  if (const auto *i = v.as_integer()) {
    if (i->get() < 0) {
      return input_error(where + ": " + key + ": must not be negative (got " + std::to_string(i->get()) + ")");
    }
    return std::to_string(i->get());
  }
  if (const auto *b = v.as_boolean()) {
    return std::string(b->get() ? "on" : "off");
  }
  if (const auto *s = v.as_string()) {
    return s->get();
  }
  return input_error(where + ": " + key + ": expected an integer, a boolean or a string");
}

constexpr std::string_view k_groups = "rings, channels, coalesce, features, pause, link, irq, rps";

} // namespace

Status parse_nic_table(const toml::table &nic, const std::string &display, std::vector<NicRule> &out) {
  // toml::table iterates in key order; rules apply in file order.
  std::vector<std::pair<const toml::key *, const toml::node *>> in_file_order;
  for (const auto &[glob_key, rule_node] : nic) {
    in_file_order.emplace_back(&glob_key, &rule_node);
  }
  std::ranges::stable_sort(in_file_order, [](const auto &a, const auto &b) {
    const auto &ra = a.first->source().begin;
    const auto &rb = b.first->source().begin;
    return ra.line != rb.line ? ra.line < rb.line : ra.column < rb.column;
  });
  for (const auto &[glob_key_p, rule_node_p] : in_file_order) {
    const toml::key &glob_key = *glob_key_p;
    const toml::node &rule_node = *rule_node_p;
    const std::string glob(glob_key.str());
    const std::string rat = at(display, glob_key.source());
    const auto *rule_tbl = rule_node.as_table();
    if (rule_tbl == nullptr) {
      return input_error(rat + ": [nic.\"" + glob + "\"] must be a table");
    }
    if (glob.empty() || glob.size() > 64 || glob.find_first_of("/ \t\n") != std::string::npos) {
      return input_error(rat + ": invalid interface or driver glob '" + glob + "'");
    }
    NicRule rule{glob, {}, rat};
    for (const auto &[gk, gv] : *rule_tbl) {
      const std::string group(gk.str());
      const std::string gat = at(display, gk.source());
      const auto *gtbl = gv.as_table();
      const bool known = group == "rings" || group == "channels" || group == "coalesce" || group == "features" ||
                         group == "pause" || group == "link" || group == "irq" || group == "rps";
      if (!known) {
        return input_error(gat + ": nic.\"" + glob + "\": unknown key '" + group + "' (expected " +
                           std::string(k_groups) + ")");
      }
      if (gtbl == nullptr) {
        return input_error(gat + ": nic.\"" + glob + "\"." + group + " must be a table");
      }
      for (const auto &[sk, sv] : *gtbl) {
        const std::string key = group + "." + std::string(sk.str());
        const std::string sat = at(display, sk.source());
        auto val = scalar(sv, sat, key);
        if (!val) {
          return val.error();
        }
        if (auto err = nic_check_setting(key, *val); !err.empty()) {
          return input_error(sat + ": nic.\"" + glob + "\": " + err);
        }
        rule.settings.push_back({key, *val, sat, false});
      }
    }
    out.push_back(std::move(rule));
  }
  return {};
}

} // namespace mltune
