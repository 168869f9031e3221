// PoolStep: the pool part of the node configuration as a transaction step
// (pool.hpp).
#include "mltune/pool.hpp"

#include <algorithm>

namespace mltune {

namespace {

std::string mib(std::uint64_t pages) {
  return std::to_string(pages * (k_pool_page_size >> 20)) + " MiB";
}

} // namespace

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

Status PoolStep::apply() {
  return set(reserve_, quota_);
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
  return set(before_, quota_ ? quota_before_ : std::nullopt);
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

} // namespace mltune
