// The top-level tables of a profile, one registry entry each: the key, the
// TOML type it must have, and the parser that merges it into a Profile.
// check_top_level() and merge_sections() walk the registry, so a domain's
// table is added to the profile format by one entry here (its parser and
// its field in Profile beside it).
#include "nic/profile_tables.hpp"
#include "profile/profile_phases.hpp"
#include "sched/internal.hpp"

#include "mltune/parse.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <optional>

namespace mltune::detail {

std::string where(const std::string &display, const toml::source_region &r) {
  return display + ":" + std::to_string(r.begin.line);
}

bool valid_module_name(std::string_view name) {
  return !name.empty() && name.size() < 64 && std::ranges::all_of(name, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

// modules = ["tcp_bbr", { name = "nvidia_peermem", required = true }]: each
// name as modprobe takes it; a later file's entry for the same name replaces
// the earlier one in place.
Status merge_modules(const toml::array &arr, const std::string &display, Profile &out) {
  for (const auto &el : arr) {
    const std::string at = where(display, el.source());
    KernelModule m{{}, false, at};
    if (const auto *s = el.as_string()) {
      m.name = s->get();
    } else if (const auto *t = el.as_table()) {
      for (const auto &[fk, fv] : *t) {
        if (fk == "name" && fv.is_string()) {
          m.name = *fv.value<std::string>();
        } else if (fk == "required" && fv.is_boolean()) {
          m.required = *fv.value<bool>();
        } else {
          return input_error(at + ": modules: '" + std::string(fk.str()) +
                             "' (expected name = \"...\" and required = true|false)");
        }
      }
    } else {
      return input_error(at + ": modules entries must be names or { name = ..., required = ... }");
    }
    if (!valid_module_name(m.name)) {
      return input_error(at + ": modules: invalid module name '" + m.name + "' (1-63 of [A-Za-z0-9_-])");
    }
    const auto it = std::ranges::find_if(out.modules, [&](const KernelModule &o) { return o.name == m.name; });
    if (it != out.modules.end()) {
      *it = m;
    } else {
      out.modules.push_back(m);
    }
  }
  return {};
}

namespace {

// "2M", "1G", "64K" or "2048kB": a huge page size in KiB (a power of two,
// 64 KiB to 16 GiB, as the kernel's hugepages-<N>kB directories name them).
std::optional<std::uint64_t> page_size_kib(std::string_view s) {
  std::uint64_t unit = 0;
  if (s.ends_with("kB")) {
    unit = 1;
    s.remove_suffix(2);
  } else if (s.ends_with("K") || s.ends_with("M") || s.ends_with("G")) {
    unit = s.back() == 'K' ? 1 : s.back() == 'M' ? 1024 : 1024 * 1024;
    s.remove_suffix(1);
  }
  const auto n = parse_int<std::uint64_t>(s);
  if (unit == 0 || !n || *n == 0 || *n > (16ULL << 20) / unit) {
    return std::nullopt;
  }
  const std::uint64_t kib = *n * unit;
  if ((kib & (kib - 1)) != 0 || kib < 64) {
    return std::nullopt;
  }
  return kib;
}

// [boot]: isolate = CPULIST | ROLE | "none".
Status merge_boot(const toml::table &boot, const std::string &display, Profile &out) {
  BootSettings b{"feeder", where(display, boot.source())};
  for (const auto &[k, v] : boot) {
    const std::string at = where(display, k.source());
    if (k != "isolate") {
      return input_error(at + ": [boot] unknown key '" + std::string(k.str()) + "' (expected isolate)");
    }
    const auto *s = v.as_string();
    if (s == nullptr || s->get().empty() || s->get().size() > 256) {
      return input_error(at + ": [boot] isolate must be a cpulist, a plan role (feeder, feeder:N, workers) or "
                              "\"none\"");
    }
    b.isolate = s->get();
  }
  out.boot = b;
  return {};
}

// [gate]: FIGURE = RATIO (>= 1) or false; rounds = N; seconds = S.
Status merge_gate(const toml::table &gate, const std::string &display, Profile &out) {
  GateSettings g = out.gate.value_or(GateSettings{});
  g.origin = where(display, gate.source());
  for (const auto &[k, v] : gate) {
    const std::string at = where(display, k.source());
    const std::string key(k.str());
    if (key == "rounds") {
      const auto n = v.value<std::int64_t>();
      if (!v.is_integer() || !n || *n < 1 || *n > 50) {
        return input_error(at + ": [gate] rounds must be an integer from 1 to 50");
      }
      g.rounds = static_cast<unsigned>(*n);
      continue;
    }
    if (key == "seconds") {
      const auto x = v.value<double>();
      if (!(v.is_floating_point() || v.is_integer()) || !x || !(*x >= 0.2 && *x <= 60)) {
        return input_error(at + ": [gate] seconds must be a number from 0.2 to 60");
      }
      g.seconds = *x;
      continue;
    }
    if (std::ranges::find(k_gate_figures, key) == k_gate_figures.end()) {
      std::string names;
      for (auto f : k_gate_figures) {
        names += (names.empty() ? "" : ", ") + std::string(f);
      }
      return input_error(at + ": [gate] unknown key '" + key + "' (expected rounds, seconds or a figure: " + names +
                         ")");
    }
    double ratio = 0;
    if (v.is_boolean()) {
      if (*v.value<bool>()) {
        return input_error(at + ": [gate] " + key + " = true: give the ratio it may grow by (1.5), or false");
      }
    } else if (const auto x = v.value<double>();
               (v.is_floating_point() || v.is_integer()) && x && *x >= 1 && *x <= 1000) {
      ratio = *x;
    } else {
      return input_error(at + ": [gate] " + key +
                         " must be a ratio from 1 to 1000 (1.5: at most half as much again "
                         "as before) or false");
    }
    const auto it = std::ranges::find_if(g.limits, [&](const auto &l) { return l.first == key; });
    if (it != g.limits.end()) {
      it->second = ratio;
    } else {
      g.limits.emplace_back(key, ratio);
    }
  }
  out.gate = std::move(g);
  return {};
}

// The registry.  `type` none: the parser checks the shape itself.  Knobs
// ([sysctl], [sysfs]) have no parser here: pass 3 reads them before the
// other sections (parse_knobs), so their entries only give the schema.
constexpr std::array<ProfileSection, 10> k_sections{{
    {"modules", "modules", toml::node_type::array,
     "modules must be an array of module names or { name = ..., required = ... }",
     [](const toml::node &v, const std::string &d, Profile &p) { return merge_modules(*v.as_array(), d, p); }},
    {"sysctl", "[sysctl]", toml::node_type::table, "[sysctl] must be a table", nullptr},
    {"sysfs", "[sysfs]", toml::node_type::table, "[sysfs] must be a table", nullptr},
    {"cpu", "[cpu]", toml::node_type::table, "[cpu] must be a table",
     [](const toml::node &v, const std::string &d, Profile &p) { return parse_cpu_table(*v.as_table(), d, p.cpu); }},
    {"block", "[block.\"GLOB\"]", toml::node_type::table, "[block] must be a table of [block.\"GLOB\"] tables",
     [](const toml::node &v, const std::string &d, Profile &p) {
       return parse_block_tables(*v.as_table(), d, p.block);
     }},
    {"nic", "[nic.\"GLOB\"]", toml::node_type::table, "[nic] must be a table of [nic.\"GLOB\"] tables",
     [](const toml::node &v, const std::string &d, Profile &p) { return parse_nic_table(*v.as_table(), d, p.nic); }},
    {"sched", "[[sched.rule]]", toml::node_type::none, "",
     [](const toml::node &v, const std::string &d, Profile &p) { return sched_rules_merge(v, d, p.sched_rules); }},
    {"boot", "[boot]", toml::node_type::table, "[boot] must be a table",
     [](const toml::node &v, const std::string &d, Profile &p) { return merge_boot(*v.as_table(), d, p); }},
    {"hugepages", "[hugepages]", toml::node_type::table, "[hugepages] must be a table",
     [](const toml::node &v, const std::string &d, Profile &p) {
       return merge_hugepages(*v.as_table(), d, p.hugepages);
     }},
    {"gate", "[gate]", toml::node_type::table, "[gate] must be a table",
     [](const toml::node &v, const std::string &d, Profile &p) { return merge_gate(*v.as_table(), d, p); }},
}};

const ProfileSection *section_of(std::string_view key) {
  const auto it = std::ranges::find_if(k_sections, [&](const ProfileSection &s) { return s.key == key; });
  return it == k_sections.end() ? nullptr : &*it;
}

} // namespace

Status merge_hugepages(const toml::table &t, const std::string &display, std::vector<HugePageSetting> &out) {
  constexpr std::int64_t k_max_node = 1023;
  constexpr std::int64_t k_max_pages = std::int64_t{1} << 32;
  for (const auto &[size, nodes] : t) {
    const std::string at = where(display, size.source());
    const auto kib = page_size_kib(size.str());
    if (!kib) {
      return input_error(at + ": [hugepages] '" + std::string(size.str()) +
                         R"(' is not a huge page size ("2M", "1G", "64K", "2048kB"))");
    }
    const auto *tbl = nodes.as_table();
    if (tbl == nullptr) {
      return input_error(at + ": [hugepages] \"" + std::string(size.str()) +
                         "\" must be a table of NUMA node = pages ({ 0 = 1024, 1 = 1024 })");
    }
    for (const auto &[node, pages] : *tbl) {
      const std::string nat = where(display, node.source());
      const auto n = parse_int<std::uint64_t>(node.str());
      if (!n || *n > k_max_node) {
        return input_error(nat + ": [hugepages] \"" + std::string(size.str()) + "\": '" + std::string(node.str()) +
                           "' is not a NUMA node (0-1023)");
      }
      const auto count = pages.value<std::int64_t>();
      if (!pages.is_integer() || !count || *count < 0 || *count > k_max_pages) {
        return input_error(nat + ": [hugepages] \"" + std::string(size.str()) + "\" node " + std::string(node.str()) +
                           ": pages must be an integer from 0 to 4294967296");
      }
      HugePageSetting s{*kib, static_cast<int>(*n), static_cast<std::uint64_t>(*count), nat};
      const auto it = std::ranges::find_if(
          out, [&](const HugePageSetting &o) { return o.page_kib == s.page_kib && o.node == s.node; });
      if (it != out.end()) {
        *it = s;
      } else {
        out.push_back(s);
      }
    }
  }
  return {};
}

std::span<const ProfileSection> profile_sections() {
  return k_sections;
}

Result<std::vector<IncludeRef>> check_top_level(const toml::table &doc, const std::string &display) {
  std::vector<IncludeRef> includes;
  for (const auto &[k, v] : doc) {
    const std::string at = where(display, k.source());
    if (k == "description") {
      if (!v.is_string()) {
        return input_error(at + ": description must be a string");
      }
    } else if (k == "include") {
      if (const auto *s = v.as_string()) {
        includes.emplace_back(s->get(), v.source());
      } else if (const auto *arr = v.as_array()) {
        for (const auto &el : *arr) {
          if (!el.is_string()) {
            return input_error(where(display, el.source()) + ": include entries must be strings");
          }
          includes.emplace_back(*el.value<std::string>(), el.source());
        }
      } else {
        return input_error(at + ": include must be a string or an array of strings");
      }
    } else if (const auto *sec = section_of(k.str()); sec != nullptr) {
      if (sec->type != toml::node_type::none && v.type() != sec->type) {
        return input_error(at + ": " + std::string(sec->wrong_type));
      }
    } else {
      std::string expected = "description, include";
      for (const auto &s : k_sections) {
        expected += ", " + std::string(s.name);
      }
      return input_error(at + ": unknown key '" + std::string(k.str()) + "' (expected " + expected + ")");
    }
  }
  return includes;
}

Status merge_sections(const toml::table &doc, const std::string &display, Profile &out) {
  for (const auto &s : k_sections) {
    if (const auto *v = doc.get(s.key); v != nullptr && s.merge != nullptr) {
      if (auto st = s.merge(*v, display, out); !st) {
        return st;
      }
    }
  }
  if (const auto desc = doc["description"].value<std::string>()) {
    out.description = *desc;
  }
  return {};
}

} // namespace mltune::detail
