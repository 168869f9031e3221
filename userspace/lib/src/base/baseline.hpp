// The node baseline: <sysroot>/run/mltune/baseline.json (k_baseline_file),
// the one record of the value every setting had before mltune first wrote
// it.  It holds one record per domain, by the domain's name ("knobs": the
// direct backend's knobs and the profile it names active; "nic": NIC
// settings with their queue IRQs and RPS masks; "modules": the kernel
// modules mltune loaded; "pool": each node's reservation and the quota as
// the first configuration apply found them).  Each domain reads and writes its own record, in
// its own JSON shape, and never another's; a record of a domain this build
// does not know (written by a newer mltune) is kept as it is.
//
// A value is recorded before the first write of its setting, so a crash
// half-way through a switch leaves a record that `mltunectl off` can restore
// from.  The kernel backend's knobs keep their baseline in the module
// (/sys/kernel/mltune/baseline); thread policies, partitions and the feeder
// record what they did in their own state files (sched.hpp, feeder.hpp),
// which `off` replays.
//
// Version 3 keys the records by domain; versions 1 and 2 (the knobs' values
// under "baseline" and "active" at the top) load as the "knobs" record.
// Callers hold the node lock (mltune/node.hpp) around a load-modify-save.
#pragma once

#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace mltune {

// In /run: it records values of the running kernel, which a reboot resets
// (IRQ numbers and interface names with them).
inline constexpr std::string_view k_baseline_file = "/run/mltune/baseline.json";

namespace detail {

class NodeBaseline {
public:
  // The domain's record; null when it has none.
  [[nodiscard]] const nlohmann::json &record(std::string_view domain) const;
  // Replaces the domain's record; a null or empty one removes it.
  void set(std::string_view domain, nlohmann::json record);
  [[nodiscard]] bool has(std::string_view domain) const { return !record(domain).is_null(); }

  // The domain's record as T (nlohmann's ADL from_json), a default T when
  // there is none; a record of another shape is an error naming the file
  // and the domain.
  template <class T> [[nodiscard]] Result<T> get(std::string_view domain) const {
    const nlohmann::json &r = record(domain);
    if (r.is_null()) {
      return T{};
    }
    try {
      return r.get<T>();
    } catch (const nlohmann::json::exception &e) {
      return failure(std::string(k_baseline_file) + ": corrupt " + std::string(domain) + " record: " + e.what());
    }
  }
  // Replaces the domain's record with T (ADL to_json); one that converts to
  // an empty object or list removes it.
  template <class T> void put(std::string_view domain, const T &value) { set(domain, nlohmann::json(value)); }
  [[nodiscard]] bool empty() const { return records_.empty(); }

  // Every record, by domain name (the file's content).
  [[nodiscard]] const nlohmann::json &records() const { return records_; }
  void assign(nlohmann::json records);

private:
  nlohmann::json records_ = nlohmann::json::object();
};

// An absent file is an empty baseline.
Result<NodeBaseline> load_baseline(const Sysroot &root);
// Writes the file atomically; an empty baseline removes it.
Status save_baseline(const Sysroot &root, const NodeBaseline &b);

// One domain's load-change-save: the file loaded, the domain's record as T
// handed to `change` (bool change(T &): whether it changed the record), and
// the file saved when it did.  Callers hold the node lock.
template <class T, class F> Status update_record(const Sysroot &root, std::string_view domain, F &&change) {
  auto b = load_baseline(root);
  if (!b) {
    return b.error();
  }
  auto rec = b->get<T>(domain);
  if (!rec) {
    return rec.error();
  }
  if (!change(*rec)) {
    return {};
  }
  b->put(domain, *rec);
  return save_baseline(root, *b);
}

} // namespace detail
} // namespace mltune
