// The concerns of audit() (audit/audit.cpp) that live in files of their
// own, and the small text and process helpers they share with it.
// Library-private: not part of the installed API.
#pragma once

#include "mltune/audit.hpp"
#include "mltune/topology.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune::detail {

// PCIe: link width and speed against the device's and its port's capability,
// slots that limit a device, ACS redirect on switch ports between GPUs and
// their peers, IOMMU translation, devices without a NUMA node, NIC
// MaxReadReq, config space readable only in part (audit/pcie.cpp).
void audit_pcie(const Topology &t, std::vector<Finding> &out);

// GPU driver state: NVIDIA through NVML or nvidia-smi (persistence, ECC,
// MIG, application clocks and clock locks, retired pages, row remapping,
// MPS), AMD through the amdgpu sysfs files (audit/gpu_driver.cpp).
void audit_gpu_driver(const Sysroot &root, const Topology &t, const AuditOptions &opt, std::vector<Finding> &out);

} // namespace mltune::detail
