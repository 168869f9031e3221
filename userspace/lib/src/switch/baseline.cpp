// The node baseline file (switch/baseline.hpp).
#include "switch/baseline.hpp"

#include "base/state_file.hpp"
#include "mltune/switch.hpp"
#include "mltune/transaction.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <ranges>

namespace mltune::detail {

using json = nlohmann::json;

// Found by ADL (in the namespace of NodeBaseline).
void to_json(json &j, const NodeBaseline &b);
void from_json(const json &j, NodeBaseline &b);

void to_json(json &j, const NodeBaseline &b) {
  j = {{"active", b.active}, {"baseline", json::array()}, {"nic", json::array()}, {"modules", b.modules}};
  for (const auto &[path, value] : b.knobs) {
    j["baseline"].push_back({{"path", path}, {"value", value}});
  }
  for (const auto &c : b.nic) {
    j["nic"].push_back({{"ifname", c.ifname}, {"key", c.key}, {"value", c.from}});
  }
}

void from_json(const json &j, NodeBaseline &b) {
  b.active = j.value("active", "");
  b.knobs.clear();
  for (const auto &e : j.at("baseline")) {
    b.knobs.emplace_back(e.at("path").get<std::string>(), e.at("value").get<std::string>());
  }
  b.modules = j.value("modules", std::vector<std::string>{});
  b.nic.clear();
  for (const auto &e : j.value("nic", json::array())) {
    b.nic.push_back(
        {e.at("ifname").get<std::string>(), e.at("key").get<std::string>(), e.at("value").get<std::string>(), {}, {}});
  }
}

namespace {

// Not fsynced (see Documentation/mltunectl.rst): the file records values of
// the running kernel, which do not survive the power failure fsync guards
// against; the rename still replaces it atomically.  An empty file (left by
// a power failure) is no record: the kernel's values were reset too.
constexpr StateFile<NodeBaseline> k_state(k_state_file, 2, false);

} // namespace

Result<NodeBaseline> load_baseline(const Sysroot &root) {
  return k_state.load_or(root);
}

Status save_baseline(const Sysroot &root, const NodeBaseline &b) {
  return b.empty() ? k_state.remove(root) : k_state.save(root, b);
}

Status record_nic_baseline(const Sysroot &root, const std::vector<NicChange> &changes) {
  auto b = load_baseline(root);
  if (!b) {
    return b.error();
  }
  bool added = false;
  for (const auto &c : changes) {
    const bool known = std::any_of(b->nic.begin(), b->nic.end(),
                                   [&](const NicChange &o) { return o.ifname == c.ifname && o.key == c.key; });
    if (!known) {
      b->nic.push_back({c.ifname, c.key, c.from, {}, {}});
      added = true;
    }
  }
  return added ? save_baseline(root, *b) : Status{};
}

} // namespace mltune::detail

namespace mltune {

Result<NicReport> restore_nic_baseline(const Sysroot &root, NicBackend &backend) {
  auto b = detail::load_baseline(root);
  if (!b) {
    return b.error();
  }
  NicReport rep;
  if (b->nic.empty()) {
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
  for (const auto &c : std::views::reverse(b->nic)) {
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
  auto done = nic_commit(rep.plan, backend, NicOptions{});
  if (!done) {
    return done.error();
  }
  done->skipped.insert(done->skipped.end(), rep.skipped.begin(), rep.skipped.end());
  b->nic.clear();
  if (auto st = detail::save_baseline(root, *b); !st) {
    return st.error();
  }
  return done;
}

} // namespace mltune
