// The node configuration: parsing and writing /etc/mltune/mltune.toml
// (config.hpp).  apply.cpp applies it.
#include "mltune/config.hpp"

#include "mltune/cpulist.hpp"
#include "mltune/parse.hpp"
#include "mltune/pool.hpp"
#include "mltune/profile.hpp"
#include "profile/profile_phases.hpp"

#include <toml++/toml.h>

#include <algorithm>

namespace mltune {

namespace {

std::string at(const std::string &display, const toml::source_region &r) {
  return display + ":" + std::to_string(r.begin.line);
}

// A size as the pool's sysfs files take it: a string ("512M", "256") or an
// integer count of 2 MiB pages.
Result<std::uint64_t> pool_pages(const toml::node &v, const std::string &where, std::string_view what) {
  if (const auto *i = v.as_integer()) {
    if (i->get() < 0) {
      return input_error(where + ": " + std::string(what) + ": a page count cannot be negative");
    }
    return static_cast<std::uint64_t>(i->get());
  }
  if (const auto *s = v.as_string()) {
    auto p = parse_pool_size(s->get());
    if (!p) {
      return input_error(where + ": " + std::string(what) + ": " + p.error().message);
    }
    return *p;
  }
  return input_error(where + ": " + std::string(what) +
                     R"(: expected a size string ("512M", "1G") or a count of 2 MiB pages)");
}

// "2-3,6-7", "feeder", "feeder:N", or "" (feeder off).
Status check_feeder_cpus(std::string_view spec, const std::string &where) {
  if (spec.empty() || spec == "feeder") {
    return {};
  }
  if (spec.starts_with("feeder:")) {
    if (!parse_int<unsigned>(spec.substr(7))) {
      return input_error(where + ": feeder cpus '" + std::string(spec) + "': expected feeder:GPU_INDEX");
    }
    return {};
  }
  if (auto c = parse_cpuset(spec, "feeder cpus"); !c) {
    return input_error(where + ": " + c.error().message +
                       R"( (expected a cpulist such as "2-3,6-7", "feeder" or "feeder:N"))");
  }
  return {};
}

Status parse_pool(const toml::table &t, const std::string &display, NodeConfig &cfg) {
  for (const auto &[k, v] : t) {
    const std::string w = at(display, k.source());
    if (k == "reserve") {
      const auto *nodes = v.as_table();
      if (nodes == nullptr) {
        return input_error(w + R"(: pool.reserve must be a table of NUMA node = size, e.g. { 0 = "512M" })");
      }
      for (const auto &[nk, nv] : *nodes) {
        const std::string nw = at(display, nk.source());
        const auto node = parse_int<int>(nk.str());
        if (!node || *node < 0 || *node > 1023) {
          return input_error(nw + ": pool.reserve: '" + std::string(nk.str()) + "' is not a NUMA node number");
        }
        auto pages = pool_pages(nv, nw, "pool.reserve." + std::string(nk.str()));
        if (!pages) {
          return pages.error();
        }
        cfg.pool.emplace_back(*node, *pages);
      }
    } else if (k == "user_quota") {
      auto pages = pool_pages(v, w, "pool.user_quota");
      if (!pages) {
        return pages.error();
      }
      cfg.user_quota = *pages;
    } else {
      return input_error(w + ": unknown key 'pool." + std::string(k.str()) + "' (expected reserve, user_quota)");
    }
  }
  std::ranges::sort(cfg.pool);
  return {};
}

Status parse_feeder(const toml::table &t, const std::string &display, NodeConfig &cfg) {
  for (const auto &[k, v] : t) {
    const std::string w = at(display, k.source());
    const auto *s = v.as_string();
    if (k == "cpus") {
      if (s == nullptr) {
        return input_error(w + R"(: feeder.cpus must be a string: a cpulist, "feeder", "feeder:N" or "" (off))");
      }
      if (auto st = check_feeder_cpus(s->get(), w); !st) {
        return st;
      }
      cfg.feeder_cpus = s->get();
    } else if (k == "mechanism") {
      if (s == nullptr || (s->get() != "auto" && s->get() != "sched_ext" && s->get() != "cpuset")) {
        return input_error(w + R"(: feeder.mechanism must be "auto", "sched_ext" or "cpuset")");
      }
      cfg.feeder_mechanism = s->get();
    } else if (k == "partition") {
      if (s == nullptr || (s->get() != "root" && s->get() != "isolated")) {
        return input_error(w + R"(: feeder.partition must be "root" or "isolated")");
      }
      cfg.feeder_partition = s->get();
    } else {
      return input_error(w + ": unknown key 'feeder." + std::string(k.str()) +
                         "' (expected cpus, mechanism, partition)");
    }
  }
  return {};
}

// [modules] allow = ["tcp_bbr", "nvidia_peermem"]: each name as a profile's
// modules = [...] takes it (profile.cpp); [] lets profiles load none.
Status parse_modules(const toml::table &t, const std::string &display, NodeConfig &cfg) {
  for (const auto &[k, v] : t) {
    const std::string w = at(display, k.source());
    if (k != "allow") {
      return input_error(w + ": unknown key 'modules." + std::string(k.str()) + "' (expected allow)");
    }
    const auto *arr = v.as_array();
    if (arr == nullptr) {
      return input_error(w + R"(: modules.allow must be a list of module names, e.g. ["tcp_bbr"])");
    }
    std::vector<std::string> names;
    for (const auto &el : *arr) {
      const auto *s = el.as_string();
      if (s == nullptr || !detail::valid_module_name(s->get())) {
        return input_error(at(display, el.source()) + ": modules.allow: '" + (s ? s->get() : std::string("?")) +
                           "' is not a module name (1-63 of [A-Za-z0-9_-])");
      }
      if (std::ranges::find(names, s->get()) == names.end()) {
        names.push_back(s->get());
      }
    }
    cfg.module_allow = std::move(names);
    cfg.module_allow_origin = w;
  }
  return {};
}

std::string size_text(std::uint64_t pages) {
  return pages == 0 ? "0" : std::to_string(pages * (k_pool_page_size >> 20)) + "M";
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

} // namespace

Result<NodeConfig> parse_config(std::string_view text, const std::string &display) {
  auto doc = detail::parse_profile_text(std::string(text), display);
  if (!doc) {
    return doc.error();
  }
  NodeConfig cfg;
  cfg.source = display;
  for (const auto &[k, v] : *doc) {
    const std::string w = at(display, k.source());
    if (k == "profile") {
      const auto *s = v.as_string();
      if (s == nullptr || s->get().empty()) {
        return input_error(w + R"(: profile must name a profile (a name such as "training", or a .toml file))");
      }
      cfg.profile = s->get();
    } else if (k == "watcher") {
      if (!v.is_boolean()) {
        return input_error(w + ": watcher must be true or false");
      }
      cfg.watcher = *v.value<bool>();
    } else if (k == "hugepages") {
      const auto *t = v.as_table();
      if (t == nullptr) {
        return input_error(
            w + R"(: [hugepages] must be a table of size = { NUMA node = pages }, e.g. "2M" = { 0 = 1024 })");
      }
      if (auto st = detail::merge_hugepages(*t, display, cfg.hugepages); !st) {
        return st.error();
      }
    } else if (k == "pool" || k == "feeder" || k == "modules") {
      const auto *t = v.as_table();
      if (t == nullptr) {
        return input_error(w + ": [" + std::string(k.str()) + "] must be a table");
      }
      const auto st = k == "pool"     ? parse_pool(*t, display, cfg)
                      : k == "feeder" ? parse_feeder(*t, display, cfg)
                                      : parse_modules(*t, display, cfg);
      if (!st) {
        return st.error();
      }
    } else {
      return input_error(w + ": unknown key '" + std::string(k.str()) +
                         "' (expected profile, watcher, [pool], [feeder], [hugepages], [modules])");
    }
  }
  return cfg;
}

Result<NodeConfig> load_config(const Sysroot &root, std::string_view path) {
  if (!root.exists(path)) {
    return input_error(std::string(path) + ": no such file (write it with 'mltunectl persist' or by hand; "
                                           "Documentation/admin-guide.rst)");
  }
  auto text = detail::read_profile_file(root, path);
  if (!text) {
    return text.error().kind == Errc::input ? text.error() : input_error(text.error().message);
  }
  return parse_config(*text, std::string(path));
}

std::string render_config(const NodeConfig &cfg) {
  std::string s = std::string(k_config_marker) +
                  ": 'mltunectl persist' rewrites this file.\n"
                  "# The node configuration mltune.service applies at every boot; 'systemctl reload mltune'\n"
                  "# applies a change now. Reference: Documentation/admin-guide.rst, mltunectl(8).\n";
  if (cfg.profile) {
    s += "\n# The profile applied at boot.\nprofile = " + toml_string(*cfg.profile) + "\n";
  }
  s += "\n# mltune-watch.service runs the thread scheduling watcher.\nwatcher = " +
       std::string(cfg.watcher ? "true" : "false") + "\n";
  if (!cfg.pool.empty() || cfg.user_quota) {
    s += "\n[pool]\n";
    if (!cfg.pool.empty()) {
      s += "# Huge-page pool reserved per NUMA node (2 MiB pages; sizes with K/M/G).\nreserve = {";
      for (size_t i = 0; i < cfg.pool.size(); ++i) {
        s += std::string(i == 0 ? " " : ", ") + std::to_string(cfg.pool[i].first) + " = " +
             toml_string(size_text(cfg.pool[i].second));
      }
      s += " }\n";
    }
    if (cfg.user_quota) {
      s += "# Pool memory one user may have mapped at a time (\"0\": no limit).\nuser_quota = " +
           toml_string(size_text(*cfg.user_quota)) + "\n";
    }
  }
  if (cfg.feeder_cpus) {
    s += "\n[feeder]\n# GPU-feeder cores: a cpulist, \"feeder\" or \"feeder:N\" (the CPU plan), \"\" for off.\n"
         "cpus = " +
         toml_string(*cfg.feeder_cpus) + "\nmechanism = " + toml_string(cfg.feeder_mechanism) + "\n";
    if (cfg.feeder_partition != "root") {
      s += "# The cpuset partition type: root (load balancing among the feeder cores) or isolated.\npartition = " +
           toml_string(cfg.feeder_partition) + "\n";
    }
  }
  if (!cfg.hugepages.empty()) {
    s += "\n[hugepages]\n# Persistent hugetlbfs pages per NUMA node, by page size (over the profile's [hugepages]).\n";
    std::vector<const HugePageSetting *> sizes; // the first setting of each size
    for (const auto &h : cfg.hugepages) {
      if (std::ranges::none_of(sizes, [&](const auto *o) { return o->page_kib == h.page_kib; })) {
        sizes.push_back(&h);
      }
    }
    for (const auto *first : sizes) {
      s += toml_string(first->size()) + " = {";
      const char *sep = " ";
      for (const auto &h : cfg.hugepages) {
        if (h.page_kib == first->page_kib) {
          s += sep + std::to_string(h.node) + " = " + std::to_string(h.pages);
          sep = ", ";
        }
      }
      s += " }\n";
    }
  }
  if (cfg.module_allow) {
    s += "\n[modules]\n# The kernel modules profiles may load (without this key: those of the built-in profiles).\n"
         "allow = [";
    for (size_t i = 0; i < cfg.module_allow->size(); ++i) {
      s += (i == 0 ? "" : ", ") + toml_string((*cfg.module_allow)[i]);
    }
    s += "]\n";
  }
  return s;
}

} // namespace mltune
