// PoolStep: the pool part of the node configuration as a transaction step
// (pool.hpp).
#include "mltune/pool.hpp"

#include "base/baseline.hpp"
#include "mltune/node_info.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>

namespace mltune {

namespace {

std::string mib(std::uint64_t pages) {
  return std::to_string(pages * (k_pool_page_size >> 20)) + " MiB";
}

} // namespace

// ---- the pool's record of the node baseline ----------------------------------

void to_json(nlohmann::json &j, const PoolRecord &r) {
  j = nlohmann::json::object();
  if (!r.nodes.empty()) {
    j["nodes"] = r.nodes;
  }
  if (r.user_quota) {
    j["user_quota"] = *r.user_quota;
  }
}

void from_json(const nlohmann::json &j, PoolRecord &r) {
  r.nodes = j.value("nodes", std::vector<std::pair<int, std::uint64_t>>{});
  r.user_quota = j.contains("user_quota") ? std::optional(j.at("user_quota").get<std::uint64_t>()) : std::nullopt;
}

namespace {

constexpr std::string_view k_domain = "pool";

// Adds what `r` has and the record lacks: the first value seen of a node's
// reservation and of the quota stays.  Returns what it added.
Result<PoolRecord> record_pool(const Sysroot &root, const PoolRecord &r) {
  PoolRecord added;
  auto st = detail::update_record<PoolRecord>(root, k_domain, [&](PoolRecord &have) {
    for (const auto &[node, pages] : r.nodes) {
      if (std::ranges::none_of(have.nodes, [&](const auto &p) { return p.first == node; })) {
        have.nodes.emplace_back(node, pages);
        added.nodes.emplace_back(node, pages);
      }
    }
    if (!have.user_quota && r.user_quota) {
      have.user_quota = added.user_quota = r.user_quota;
    }
    return !added.nodes.empty() || added.user_quota.has_value();
  });
  if (!st) {
    return st.error();
  }
  return added;
}

// Takes out of the record what record_pool() added (an apply that did not
// happen leaves no record of its own).
Status unrecord_pool(const Sysroot &root, const PoolRecord &added) {
  if (added.nodes.empty() && !added.user_quota) {
    return {};
  }
  return detail::update_record<PoolRecord>(root, k_domain, [&](PoolRecord &have) {
    std::erase_if(have.nodes, [&](const auto &p) {
      return std::any_of(added.nodes.begin(), added.nodes.end(), [&](const auto &a) { return a.first == p.first; });
    });
    if (added.user_quota) {
      have.user_quota.reset();
    }
    return true;
  });
}

} // namespace

Status record_pool_baseline(const Sysroot &root, const PoolRecord &r) {
  auto added = record_pool(root, r);
  return added ? Status{} : Status(added.error());
}

PoolStep::PoolStep(const Sysroot &root, std::vector<std::pair<int, std::uint64_t>> reserve,
                   std::optional<std::uint64_t> user_quota)
    : root_(root), reserve_(std::move(reserve)), quota_(user_quota) {}

Status PoolStep::plan() {
  auto st = pool_status(root_);
  if (!st) {
    return with_context(st.error(), "pool");
  }
  before_.clear();
  for (const auto &[node, pages] : reserve_) {
    const auto it = std::find_if(st->nodes.begin(), st->nodes.end(), [&](const PoolNode &n) { return n.node == node; });
    if (it == st->nodes.end()) {
      return input_error("pool: NUMA node " + std::to_string(node) + " has no huge-page pool on this machine");
    }
    before_.emplace_back(node, it->reserved);
  }
  quota_before_ = restorable_quota(*st);
  if (quota_ && !root_.exists("/sys/kernel/mltune/hugepool/user_quota")) {
    return failure("pool: the loaded mltune module has no per-user quota (hugepool/user_quota)", ENOENT);
  }
  return {};
}

// Sets every node's reservation, then the quota; on the first failure puts
// the nodes already changed back to what plan() found.
Status PoolStep::set(const std::vector<std::pair<int, std::uint64_t>> &pages, std::optional<std::uint64_t> quota) {
  for (size_t i = 0; i < pages.size(); ++i) {
    if (auto r = pool_reserve(root_, pages[i].first, pages[i].second); !r) {
      for (size_t j = 0; j <= i && j < before_.size(); ++j) {
        (void)pool_reserve(root_, before_[j].first, before_[j].second);
      }
      return with_context(r.error(), "pool");
    }
  }
  if (quota) {
    if (auto st = pool_set_user_quota(root_, *quota); !st) {
      for (const auto &[node, p] : before_) {
        (void)pool_reserve(root_, node, p);
      }
      return with_context(st.error(), "pool: user_quota");
    }
  }
  return {};
}

// The values plan() found are recorded first (the first of a boot stays):
// `off` and `config revert` put them back.
Status PoolStep::apply() {
  auto added = record_pool(root_, PoolRecord{before_, quota_ ? quota_before_ : std::nullopt});
  if (!added) {
    return with_context(added.error(), "pool: recording the reservations found");
  }
  added_ = std::move(*added);
  if (auto st = set(reserve_, quota_); !st) {
    (void)unrecord_pool(root_, added_);
    return st;
  }
  return {};
}

Status PoolStep::verify() {
  auto st = pool_status(root_);
  if (!st) {
    return with_context(st.error(), "pool");
  }
  for (const auto &[node, pages] : reserve_) {
    const auto it = std::find_if(st->nodes.begin(), st->nodes.end(), [&](const PoolNode &n) { return n.node == node; });
    if (it == st->nodes.end() || it->reserved != pages) {
      return failure("pool: node " + std::to_string(node) + " reserves " +
                     (it == st->nodes.end() ? std::string("nothing") : std::to_string(it->reserved)) + ", not " +
                     std::to_string(pages) + " pages");
    }
  }
  if (quota_ && st->user_quota != *quota_) {
    return failure("pool: user_quota is " + std::to_string(st->user_quota) + ", not " + std::to_string(*quota_));
  }
  return {};
}

Status PoolStep::rollback() {
  if (auto st = set(before_, quota_ ? quota_before_ : std::nullopt); !st) {
    return st;
  }
  return unrecord_pool(root_, added_);
}

std::string PoolStep::summary() const {
  std::string s = "pool:";
  for (const auto &[node, pages] : reserve_) {
    s += " node" + std::to_string(node) + " " + std::to_string(pages) + " pages (" + mib(pages) + ")";
  }
  if (quota_) {
    s += std::string(reserve_.empty() ? "" : ",") + " user quota " +
         (*quota_ == 0 ? std::string("none") : std::to_string(*quota_) + " pages (" + mib(*quota_) + ")");
  }
  return s;
}

std::optional<DomainState> PoolStep::state() {
  if (!root_.is_dir(k_kmod_dir)) {
    return DomainState{"pool", "off", "the module is not loaded"};
  }
  auto st = pool_status(root_);
  if (!st) {
    return DomainState{"pool", "unchecked", st.error().message};
  }
  std::string detail;
  std::uint64_t total = 0;
  for (const auto &n : st->nodes) {
    detail += (detail.empty() ? "" : ", ") + std::string("node") + std::to_string(n.node) + " " +
              std::to_string(n.reserved) + " pages (" + std::to_string(n.mapped) + " mapped)";
    total += n.reserved;
  }
  return DomainState{"pool", total > 0 ? "applied" : "off", detail.empty() ? "no NUMA node" : detail};
}

// Every reservation and the quota as the first apply of the boot found
// them; the record goes once they are back (or the module, and with it the
// pool, is gone).
DomainState PoolStep::off(bool dry_run) {
  auto b = detail::load_baseline(root_);
  if (!b) {
    return {"pool", "failed", b.error().message};
  }
  auto r = b->get<PoolRecord>(k_domain);
  if (!r) {
    return {"pool", "failed", r.error().message};
  }
  if (r->nodes.empty() && !r->user_quota) {
    return {"pool", "off", "no reservation made by mltune"};
  }
  std::vector<std::string> done;
  std::vector<std::string> failed;
  if (!root_.is_dir(k_kmod_dir)) {
    done.emplace_back("the module is not loaded (unloading freed the pool)");
  } else {
    // A dry run lists what it would put back; a run puts it back.
    auto put_back = [&](const std::string &what, const std::function<Status()> &write) {
      Status st = dry_run ? Status{} : write();
      if (st) {
        done.push_back(what);
      } else {
        failed.push_back(what + ": " + st.error().message);
      }
    };
    for (const auto &[node, pages] : r->nodes) {
      put_back("node" + std::to_string(node) + " " + std::to_string(pages) + " pages", [&, node = node, pages = pages] {
        auto res = pool_reserve(root_, node, pages);
        return res ? Status{} : Status(res.error());
      });
    }
    if (r->user_quota) {
      put_back("user quota " + describe_quota(*r->user_quota),
               [&] { return pool_set_user_quota(root_, *r->user_quota); });
    }
  }
  auto joined = [](const std::vector<std::string> &v) {
    std::string out;
    for (const auto &x : v) {
      out += (out.empty() ? "" : "; ") + x;
    }
    return out;
  };
  if (!failed.empty()) {
    return {"pool", "failed", joined(failed)};
  }
  if (dry_run) {
    return {"pool", "planned", joined(done)};
  }
  b->set(k_domain, nullptr);
  if (auto st = detail::save_baseline(root_, *b); !st) {
    return {"pool", "failed", st.error().message};
  }
  return {"pool", "restored", joined(done)};
}

} // namespace mltune
