// The node baseline file (base/baseline.hpp).
#include "base/baseline.hpp"

#include "base/state_file.hpp"

#include <utility>

namespace mltune::detail {

using json = nlohmann::json;

const json &NodeBaseline::record(std::string_view domain) const {
  static const json none;
  const auto it = records_.find(domain);
  return it == records_.end() ? none : *it;
}

void NodeBaseline::set(std::string_view domain, json record) {
  if (record.is_null() || (record.is_structured() && record.empty())) {
    records_.erase(std::string(domain));
  } else {
    records_[std::string(domain)] = std::move(record);
  }
}

void NodeBaseline::assign(json records) {
  records_ = json::object();
  for (auto &[domain, r] : records.items()) {
    set(domain, std::move(r));
  }
}

// Found by ADL (in the namespace of NodeBaseline).
void to_json(json &j, const NodeBaseline &b);
void from_json(const json &j, NodeBaseline &b);

void to_json(json &j, const NodeBaseline &b) {
  j = b.records();
}

void from_json(const json &j, NodeBaseline &b) {
  json records = j;
  records.erase("version");
  if (j.value("version", 1) < 3) {
    // Versions 1 and 2: the knobs' record at the top.
    json knobs = {{"active", records.value("active", "")}, {"values", records.value("baseline", json::array())}};
    records.erase("active");
    records.erase("baseline");
    if (knobs["active"].get<std::string>().empty()) {
      knobs.erase("active");
    }
    if (knobs["values"].empty()) {
      knobs.erase("values");
    }
    records["knobs"] = std::move(knobs);
  }
  b.assign(std::move(records));
}

namespace {

// Not fsynced (see Documentation/mltunectl.rst): the file records values of
// the running kernel, which do not survive the power failure fsync guards
// against; the rename still replaces it atomically.  An empty file (left by
// a power failure) is no record: the kernel's values were reset too.
constexpr StateFile<NodeBaseline> k_state(k_baseline_file, 3, false);

} // namespace

Result<NodeBaseline> load_baseline(const Sysroot &root) {
  return k_state.load_or(root);
}

Status save_baseline(const Sysroot &root, const NodeBaseline &b) {
  return b.empty() ? k_state.remove(root) : k_state.save(root, b);
}

} // namespace mltune::detail
