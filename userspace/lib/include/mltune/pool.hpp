// Huge-page pool of the mltune module (Documentation/hugepool.rst).
//
// Reservation state and changes go through sysfs below the Sysroot
// (/sys/kernel/mltune/hugepool); buffers are mmap()s of /dev/mltune and only
// exist on a live node.
//
//   auto buf = mltune::allocate(1, 256 << 20);   // 256 MiB on NUMA node 1
//   if (!buf) { ... buf.error().message ... }
//   cudaHostRegister(buf->data(), buf->size(), cudaHostRegisterDefault);
//   // the pages go back to the pool when buf (the last mapping) goes
#pragma once

#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

inline constexpr std::size_t k_pool_page_size = std::size_t{2} << 20;

struct PoolNode {
  int node = -1;
  std::uint64_t reserved = 0; // 2 MiB pages owned by the pool (free + mapped)
  std::uint64_t free = 0;     // ready to map
  std::uint64_t mapped = 0;   // in buffers still mapped
};

// Pool pages a user has mapped (the charge of hugepool/users).
struct PoolUser {
  std::uint32_t uid = 0;
  std::uint64_t pages = 0;
};

struct PoolStatus {
  std::vector<PoolNode> nodes; // ascending node numbers
  std::uint64_t pmd_mappings = 0;
  std::uint64_t pte_mappings = 0;
  std::uint64_t orphaned = 0;
  bool pmd_capable = false;
  std::uint64_t user_quota = 0; // pages per user in force, 0 = no limit
  // The module's default quota applies (half the reserved pages, following
  // the reservation): hugepool/user_quota_auto reads 1.
  bool user_quota_auto = false;
  std::vector<PoolUser> users; // ascending uid, users with mapped pages
};

// Pool state; a failure when the module is not loaded.
[[nodiscard]] Result<PoolStatus> pool_status(const Sysroot &root);

// "256" (2 MiB pages) or "512M", "1G", "4096K" (bytes, a multiple of 2 MiB),
// the syntax of the sysfs files; returns pages.
[[nodiscard]] Result<std::uint64_t> parse_pool_size(std::string_view text);

// Sets node's reservation to `pages`.  When the kernel could not supply all
// of it, or mapped pages kept it from shrinking that far, the Error says how
// far it got (the pool keeps that state).
[[nodiscard]] Result<PoolNode> pool_reserve(const Sysroot &root, int node, std::uint64_t pages);
// The quota value that stands for the module's default ("auto").
inline constexpr std::uint64_t k_pool_quota_auto = ~std::uint64_t{0};
// Sets hugepool/user_quota: the pages one user (without CAP_IPC_LOCK) may
// have mapped at a time; 0 lifts the limit, k_pool_quota_auto returns to the
// module's default.  Mappings beyond it fail with EDQUOT; mappings already
// made stay.
[[nodiscard]] Status pool_set_user_quota(const Sysroot &root, std::uint64_t pages);
// The quota a later pool_set_user_quota() puts back: k_pool_quota_auto
// while the default applies, else the pages in force.
[[nodiscard]] inline std::uint64_t restorable_quota(const PoolStatus &st) {
  return st.user_quota_auto ? k_pool_quota_auto : st.user_quota;
}
// "auto", "none" (0) or "N pages (M MiB)".
[[nodiscard]] std::string describe_quota(std::uint64_t pages);
// Frees up to `pages` free pages of node (all free pages when pages is
// UINT64_MAX); mapped pages are never touched.
[[nodiscard]] Result<PoolNode> pool_release(const Sysroot &root, int node, std::uint64_t pages);

// A mapped pool buffer; owns the mapping (move-only).  Destroying it unmaps
// the buffer; the pages return to the pool once nothing else (a fork with
// MADV_DOFORK, an RDMA or io_uring registration) still holds them.
class PoolBuffer {
public:
  PoolBuffer() = default;
  ~PoolBuffer();
  PoolBuffer(PoolBuffer &&other) noexcept;
  PoolBuffer &operator=(PoolBuffer &&other) noexcept;
  PoolBuffer(const PoolBuffer &) = delete;
  PoolBuffer &operator=(const PoolBuffer &) = delete;

  [[nodiscard]] void *data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] int node() const { return node_; }
  [[nodiscard]] bool empty() const { return data_ == nullptr; }
  // Unmaps now (idempotent).
  void reset();
  // Gives up ownership: the caller munmap()s data(), size() later.
  [[nodiscard]] void *release();

private:
  friend Result<PoolBuffer> allocate(int node, std::size_t bytes, bool populate);
  PoolBuffer(void *data, std::size_t size, int node) : data_(data), size_(size), node_(node) {}

  void *data_ = nullptr;
  std::size_t size_ = 0;
  int node_ = -1;
};

// Maps `bytes` (rounded up to 2 MiB) of pinned, zeroed memory from NUMA
// node `node`'s pool.  `populate` maps every page up front (MAP_POPULATE).
// Errors: input error for bytes == 0 or a node without pool (EINVAL),
// failure with ENOMEM when the node has fewer free pages, EDQUOT when the
// caller's user would pass hugepool/user_quota, EACCES when the caller may
// not open /dev/mltune (not in its group), ENOENT when the module is not
// loaded.  All or nothing.
[[nodiscard]] Result<PoolBuffer> allocate(int node, std::size_t bytes, bool populate = true);

// Pool reservations per NUMA node and the per-user quota (pool.hpp).
// plan() checks that the module is loaded and every node has a pool, and
// records the reservations and quota found; apply() sets the targets (all
// or nothing: a node the kernel cannot fill puts every node back);
// rollback() restores what plan() found.  The pool records no baseline, so
// baseline() changes nothing; revert_config() restores what the first
// apply of a boot found.
// The pool's record of the node baseline (base/baseline.hpp): each node's
// reservation and the per-user quota as the first apply of the boot found
// them.
struct PoolRecord {
  std::vector<std::pair<int, std::uint64_t>> nodes;
  std::optional<std::uint64_t> user_quota;
};
// Adds to the record what it lacks (a value already recorded stays).
[[nodiscard]] Status record_pool_baseline(const Sysroot &root, const PoolRecord &r);

class PoolStep final : public Step {
public:
  PoolStep(const Sysroot &root, std::vector<std::pair<int, std::uint64_t>> reserve,
           std::optional<std::uint64_t> user_quota);
  [[nodiscard]] std::string_view name() const override { return "pool"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override { return {}; }
  // The reservations and the mappings now (active, metrics).
  [[nodiscard]] std::optional<DomainState> state() override;
  // The pool's baseline record put back, then dropped.
  [[nodiscard]] DomainState off(bool dry_run) override;

  // What plan() found: (node, pages) for the nodes the step sets, and the quota.
  [[nodiscard]] const std::vector<std::pair<int, std::uint64_t>> &before() const { return before_; }
  [[nodiscard]] std::optional<std::uint64_t> quota_before() const { return quota_before_; }
  // One line: what apply() set.
  [[nodiscard]] std::string summary() const override;

private:
  Status set(const std::vector<std::pair<int, std::uint64_t>> &pages, std::optional<std::uint64_t> quota);

  const Sysroot &root_;
  std::vector<std::pair<int, std::uint64_t>> reserve_;
  std::optional<std::uint64_t> quota_;
  std::vector<std::pair<int, std::uint64_t>> before_;
  std::optional<std::uint64_t> quota_before_;
  PoolRecord added_; // what apply() added to the pool's baseline record
};

} // namespace mltune
