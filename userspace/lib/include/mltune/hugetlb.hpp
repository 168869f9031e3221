// Persistent hugetlbfs pages per NUMA node: the [hugepages] table of a
// profile ("2M" = { 0 = 1024, 1 = 1024 }), the pages a job maps from
// hugetlbfs or with MAP_HUGETLB, reserved on the node the GPU sits on.
//
// They are set through /sys/devices/system/node/nodeN/hugepages/
// hugepages-<KiB>kB/nr_hugepages, one file per size and node: the kernel
// allocates (or frees) pages on that node only and may give fewer than asked
// (memory in use or too fragmented), which the step reads back.
#pragma once

#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mltune {

// The nr_hugepages file of a size and node.
[[nodiscard]] std::string hugepages_file(int node, std::uint64_t page_kib);

// The [hugepages] of a profile as a transaction step.
//
//   plan()      every size and node exists on this node, and each node's
//               free memory covers the pages to add; nothing is written.
//   apply()     records the counts found in the node baseline ("hugepages",
//               the first count of a boot stays), then writes each count
//               and reads it back: a kernel that allocated fewer pages than
//               asked fails the step, and every count it wrote goes back.
//   rollback()  the counts plan() found.
//   baseline()  the counts of the node baseline, then the record goes.
//   check()     each count as the kernel reports it.
class HugePageStep final : public Step {
public:
  HugePageStep(std::span<const HugePageSetting> settings, const Sysroot &root);
  [[nodiscard]] std::string_view name() const override { return "hugepages"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  [[nodiscard]] Result<DomainCheck> check(std::vector<NodeDifference> &out) override;
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;

  // One count of one size on one node.
  struct Count {
    int node = 0;
    std::uint64_t page_kib = 0;
    std::uint64_t pages = 0;
  };

private:
  Status write_counts(const std::vector<Count> &counts);

  std::span<const HugePageSetting> settings_;
  const Sysroot &root_;
  std::vector<Count> before_;  // what plan() found, in settings_ order
  std::vector<Count> changed_; // the counts apply() set (those that differed)
  std::vector<Count> added_;   // what apply() added to the baseline record
};

} // namespace mltune
