// HugePageStep: persistent hugetlbfs pages per NUMA node (hugetlb.hpp).
#include "mltune/hugetlb.hpp"

#include "base/baseline.hpp"
#include "mltune/parse.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <ranges>

namespace mltune {

namespace {

constexpr std::string_view k_domain = "hugepages";

std::string node_dir(int node) {
  return "/sys/devices/system/node/node" + std::to_string(node);
}

// "node0 2M": as the profile's keys name a count.
std::string count_key(const HugePageStep::Count &c) {
  return HugePageSetting{c.page_kib, c.node, 0, {}}.key();
}

Result<std::uint64_t> read_count(const Sysroot &root, int node, std::uint64_t kib) {
  const std::string f = hugepages_file(node, kib);
  auto v = root.read_value(f);
  if (!v) {
    return v.error();
  }
  const auto n = parse_int<std::uint64_t>(*v);
  if (!n) {
    return failure(root.path(f).string() + ": not a page count: '" + *v + "'");
  }
  return *n;
}

// MemFree of a NUMA node, in KiB (nodeN/meminfo: "Node 0 MemFree: 123 kB").
Result<std::uint64_t> node_free_kib(const Sysroot &root, int node) {
  auto text = root.read(node_dir(node) + "/meminfo");
  if (!text) {
    return text.error();
  }
  for (const auto line : split_lines(*text)) {
    const auto w = split_words(line);
    if (w.size() >= 4 && w[2] == "MemFree:") {
      if (auto n = parse_int<std::uint64_t>(w[3])) {
        return *n;
      }
    }
  }
  return failure(root.path(node_dir(node) + "/meminfo").string() + " has no MemFree line");
}

} // namespace

void to_json(nlohmann::json &j, const HugePageStep::Count &c) {
  j = {{"node", c.node}, {"page_kib", c.page_kib}, {"pages", c.pages}};
}

void from_json(const nlohmann::json &j, HugePageStep::Count &c) {
  c.node = j.at("node").get<int>();
  c.page_kib = j.at("page_kib").get<std::uint64_t>();
  c.pages = j.at("pages").get<std::uint64_t>();
}

namespace {

bool same_file(const HugePageStep::Count &a, const HugePageStep::Count &b) {
  return a.node == b.node && a.page_kib == b.page_kib;
}

// Adds to the baseline record the counts it lacks (the first count of a
// boot stays); returns what it added.
Result<std::vector<HugePageStep::Count>> record(const Sysroot &root, const std::vector<HugePageStep::Count> &found) {
  std::vector<HugePageStep::Count> added;
  auto st = detail::update_record<std::vector<HugePageStep::Count>>(root, k_domain, [&](auto &have) {
    for (const auto &c : found) {
      if (std::none_of(have.begin(), have.end(), [&](const auto &h) { return same_file(h, c); })) {
        have.push_back(c);
        added.push_back(c);
      }
    }
    return !added.empty();
  });
  if (!st) {
    return st.error();
  }
  return added;
}

// Takes out of the record what record() added.
Status unrecord(const Sysroot &root, const std::vector<HugePageStep::Count> &added) {
  return detail::update_record<std::vector<HugePageStep::Count>>(root, k_domain, [&](auto &have) {
    return std::erase_if(have, [&](const auto &h) {
             return std::any_of(added.begin(), added.end(), [&](const auto &a) { return same_file(a, h); });
           }) > 0;
  });
}

} // namespace

std::string hugepages_file(int node, std::uint64_t page_kib) {
  return node_dir(node) + "/hugepages/hugepages-" + std::to_string(page_kib) + "kB/nr_hugepages";
}

HugePageStep::HugePageStep(std::span<const HugePageSetting> settings, const Sysroot &root)
    : settings_(settings), root_(root) {}

Status HugePageStep::plan() {
  before_.clear();
  changed_.clear();
  added_.clear();
  std::map<int, std::uint64_t> grow_kib; // per node: what the counts add
  for (const auto &s : settings_) {
    if (!root_.is_dir(node_dir(s.node))) {
      return input_error(s.origin + ": [hugepages] NUMA node " + std::to_string(s.node) + " is not on this machine");
    }
    const std::string f = hugepages_file(s.node, s.page_kib);
    if (!root_.exists(f)) {
      return input_error(s.origin + ": [hugepages] " + s.key() + ": the kernel has no " + std::to_string(s.page_kib) +
                         " kB pages here (no " + f + ")");
    }
    auto now = read_count(root_, s.node, s.page_kib);
    if (!now) {
      return with_context(now.error(), "hugepages " + s.key());
    }
    before_.push_back({s.node, s.page_kib, *now});
    if (s.pages > *now) {
      grow_kib[s.node] += (s.pages - *now) * s.page_kib;
    }
  }
  for (const auto &[node, kib] : grow_kib) {
    auto free = node_free_kib(root_, node);
    if (!free) {
      return with_context(free.error(), "hugepages node" + std::to_string(node));
    }
    if (kib > *free) {
      return Error{Errc::input,
                   "[hugepages] node" + std::to_string(node) + ": the pages to add need " + std::to_string(kib >> 10U) +
                       " MiB, the node has " + std::to_string(*free >> 10U) + " MiB free",
                   ENOMEM};
    }
  }
  return {};
}

// Writes each count and reads it back; on the first that does not hold,
// the counts written so far go back to before_ and the error names it.
Status HugePageStep::write_counts(const std::vector<Count> &counts) {
  for (size_t i = 0; i < counts.size(); ++i) {
    const Count &c = counts[i];
    Status st = root_.write_value(hugepages_file(c.node, c.page_kib), std::to_string(c.pages));
    if (st) {
      auto got = read_count(root_, c.node, c.page_kib);
      if (!got) {
        st = got.error();
      } else if (*got != c.pages) {
        st = Error{Errc::failed,
                   "the kernel set " + std::to_string(*got) + " of " + std::to_string(c.pages) +
                       " pages (memory in use or too fragmented on that node)",
                   ENOMEM};
      }
    }
    if (!st) {
      for (size_t j = 0; j <= i; ++j) {
        const auto back = std::ranges::find_if(before_, [&](const Count &b) { return same_file(b, counts[j]); });
        if (back != before_.end()) {
          (void)root_.write_value(hugepages_file(back->node, back->page_kib), std::to_string(back->pages));
        }
      }
      return with_context(st.error(), "hugepages " + count_key(c));
    }
  }
  return {};
}

Status HugePageStep::apply() {
  for (size_t i = 0; i < settings_.size(); ++i) {
    if (before_[i].pages != settings_[i].pages) {
      changed_.push_back({settings_[i].node, settings_[i].page_kib, settings_[i].pages});
    }
  }
  if (changed_.empty()) {
    return {};
  }
  // Recorded before the first write: a crash half-way leaves `off` a record.
  std::vector<Count> found;
  found.reserve(changed_.size());
  for (const auto &c : changed_) {
    found.push_back(*std::ranges::find_if(before_, [&](const Count &b) { return same_file(b, c); }));
  }
  auto added = record(root_, found);
  if (!added) {
    return with_context(added.error(), "hugepages: recording the counts found");
  }
  added_ = std::move(*added);
  if (auto st = write_counts(changed_); !st) {
    (void)unrecord(root_, added_);
    return st;
  }
  return {};
}

Status HugePageStep::verify() {
  for (const auto &s : settings_) {
    auto now = read_count(root_, s.node, s.page_kib);
    if (!now) {
      return with_context(now.error(), "hugepages " + s.key());
    }
    if (*now != s.pages) {
      return failure("hugepages " + s.key() + ": " + std::to_string(*now) + " pages, not " + std::to_string(s.pages));
    }
  }
  return {};
}

Status HugePageStep::rollback() {
  for (const auto &c : std::views::reverse(changed_)) {
    const auto b = std::ranges::find_if(before_, [&](const Count &x) { return same_file(x, c); });
    if (auto st = root_.write_value(hugepages_file(b->node, b->page_kib), std::to_string(b->pages)); !st) {
      return with_context(st.error(), "hugepages " + count_key(*b));
    }
  }
  return unrecord(root_, added_);
}

Status HugePageStep::baseline() {
  auto b = detail::load_baseline(root_);
  if (!b) {
    return b.error();
  }
  auto rec = b->get<std::vector<Count>>(k_domain);
  if (!rec) {
    return rec.error();
  }
  std::string failed;
  for (const auto &c : std::views::reverse(*rec)) {
    if (!root_.exists(hugepages_file(c.node, c.page_kib))) {
      continue; // the node or the size is gone (hot-removed memory)
    }
    if (auto st = root_.write_value(hugepages_file(c.node, c.page_kib), std::to_string(c.pages)); !st) {
      failed += (failed.empty() ? "" : "; ") + count_key(c) + ": " + st.error().message;
    }
  }
  if (!failed.empty()) {
    return failure("hugepages: " + failed);
  }
  b->set(k_domain, nullptr);
  return detail::save_baseline(root_, *b);
}

Result<DomainCheck> HugePageStep::check(std::vector<NodeDifference> &out) {
  DomainCheck dc{"hugepages", "match", settings_.size(), {}};
  if (settings_.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  for (const auto &s : settings_) {
    if (!root_.exists(hugepages_file(s.node, s.page_kib))) {
      out.push_back({"hugepages", s.key(), std::to_string(s.pages), "", "missing", true});
      dc.state = "differs";
      continue;
    }
    auto now = read_count(root_, s.node, s.page_kib);
    if (!now) {
      out.push_back({"hugepages", s.key(), std::to_string(s.pages), now.error().message, "unreadable", true});
      dc.state = "differs";
    } else if (*now != s.pages) {
      out.push_back({"hugepages", s.key(), std::to_string(s.pages), std::to_string(*now), "differs", true});
      dc.state = "differs";
    }
  }
  return dc;
}

DomainState HugePageStep::off(bool dry_run) {
  auto b = detail::load_baseline(root_);
  if (!b) {
    return {"hugepages", "failed", b.error().message};
  }
  auto rec = b->get<std::vector<Count>>(k_domain);
  if (!rec) {
    return {"hugepages", "failed", rec.error().message};
  }
  if (rec->empty()) {
    return {"hugepages", "off", "no huge page count changed by mltune"};
  }
  std::string what;
  for (const auto &c : *rec) {
    what += (what.empty() ? "" : ", ") + count_key(c) + " " + std::to_string(c.pages) + " pages";
  }
  if (dry_run) {
    return {"hugepages", "planned", what};
  }
  if (auto st = baseline(); !st) {
    return {"hugepages", "failed", st.error().message};
  }
  return {"hugepages", "restored", what};
}

std::string HugePageStep::summary() const {
  if (changed_.empty()) {
    return "hugepages: nothing to change";
  }
  std::string s;
  for (const auto &c : changed_) {
    s += (s.empty() ? "" : ", ") + count_key(c) + " " + std::to_string(c.pages) + " pages";
  }
  return "hugepages: " + s;
}

} // namespace mltune
