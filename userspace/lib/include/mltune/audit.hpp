// audit: everything on a node that is off for ML work, with the exact fix.
#pragma once

#include "mltune/catalog.hpp"
#include "mltune/profile.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <vector>

namespace mltune {

struct AuditOptions {
  // Run <sysroot>/usr/bin/nvidia-smi when it exists and NVML gave no answer.
  bool run_nvidia_smi = true;
  // The NVML library to dlopen for the NVIDIA driver's state: "" means
  // libnvidia-ml.so.1 on a live node (Sysroot "/") and none on any other
  // sysroot (a fake tree has no driver behind it); "none" never loads one.
  std::string nvml_library;
};

std::vector<Finding> audit(const Profile &profile, const Sysroot &root, const AuditOptions &opt = {});
Severity worst(const std::vector<Finding> &findings);

} // namespace mltune
