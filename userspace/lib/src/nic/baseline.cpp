// The NIC record of the node baseline (nic/baseline.hpp) and
// restore_nic_baseline() (nic.hpp).
#include "nic/baseline.hpp"

#include "base/baseline.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <ranges>
#include <string>

namespace mltune {

namespace {

using json = nlohmann::json;

constexpr std::string_view k_domain = "nic";

// The record: each setting with `from` the value before mltune (`to` is
// unused), as [{"ifname", "key", "value"}].
struct NicRecord {
  std::vector<NicChange> settings;
};

// Found by ADL (NodeBaseline::get/put).
void to_json(json &j, const NicRecord &r) {
  j = json::array();
  for (const auto &c : r.settings) {
    j.push_back({{"ifname", c.ifname}, {"key", c.key}, {"value", c.from}});
  }
}

void from_json(const json &j, NicRecord &r) {
  for (const auto &e : j) {
    r.settings.push_back(
        {e.at("ifname").get<std::string>(), e.at("key").get<std::string>(), e.at("value").get<std::string>(), {}, {}});
  }
}

Result<std::vector<NicChange>> nic_record(const detail::NodeBaseline &b) {
  auto r = b.get<NicRecord>(k_domain);
  if (!r) {
    return r.error();
  }
  return std::move(r->settings);
}

void set_nic_record(detail::NodeBaseline &b, std::vector<NicChange> settings) {
  b.put(k_domain, NicRecord{std::move(settings)});
}

} // namespace

namespace detail {

Status record_nic_baseline(const Sysroot &root, const std::vector<NicChange> &changes) {
  auto b = load_baseline(root);
  if (!b) {
    return b.error();
  }
  auto known = nic_record(*b);
  if (!known) {
    return known.error();
  }
  bool added = false;
  for (const auto &c : changes) {
    const bool seen = std::any_of(known->begin(), known->end(),
                                  [&](const NicChange &o) { return o.ifname == c.ifname && o.key == c.key; });
    if (!seen) {
      known->push_back({c.ifname, c.key, c.from, {}, {}});
      added = true;
    }
  }
  if (!added) {
    return {};
  }
  set_nic_record(*b, std::move(*known));
  return save_baseline(root, *b);
}

} // namespace detail

Result<NicReport> restore_nic_baseline(const Sysroot &root, NicBackend &backend, bool dry_run) {
  auto b = detail::load_baseline(root);
  if (!b) {
    return b.error();
  }
  auto recorded = nic_record(*b);
  if (!recorded) {
    return recorded.error();
  }
  NicReport rep;
  if (recorded->empty()) {
    return rep;
  }
  auto devs = nic_probe_all(backend, "");
  if (!devs) {
    return devs.error();
  }
  std::map<std::string, const NicDevice *, std::less<>> by_name;
  for (const auto &d : *devs) {
    by_name[d.name] = &d;
  }
  for (const auto &c : std::views::reverse(*recorded)) {
    std::string now;
    if (c.ifname.empty()) {
      auto v = backend.read_global(c.key);
      if (!v) {
        rep.skipped.push_back({c.ifname, c.key, v.error().message});
        continue;
      }
      now = *v;
    } else {
      const auto d = by_name.find(c.ifname);
      const auto cur = d == by_name.end() ? nullptr : &d->second->current;
      if (cur == nullptr || !cur->contains(c.key)) {
        rep.skipped.push_back(
            {c.ifname, c.key,
             d == by_name.end() ? "interface no longer exists" : "no longer exists (IRQ released, queue removed)"});
        continue;
      }
      now = cur->at(c.key);
    }
    if (now != c.from) {
      rep.plan.changes.push_back({c.ifname, c.key, now, c.from, "baseline"});
    }
  }
  if (dry_run) {
    return rep;
  }
  auto done = nic_commit(rep.plan, backend, NicOptions{});
  if (!done) {
    return done.error();
  }
  done->skipped.insert(done->skipped.end(), rep.skipped.begin(), rep.skipped.end());
  set_nic_record(*b, {});
  if (auto st = detail::save_baseline(root, *b); !st) {
    return st.error();
  }
  return done;
}

} // namespace mltune
