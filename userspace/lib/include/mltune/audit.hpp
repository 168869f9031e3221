// audit: everything on a node that is off for ML work, with the exact fix.
#pragma once

#include "mltune/catalog.hpp"
#include "mltune/profile.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <vector>

namespace mltune {

struct Finding {
  std::string id;       // "sysctl:vm.swappiness", "cpu:governor", "limits:memlock:effective"
  std::string category; // sysctl sysfs cpu memory limits kernel irq gpu pcie sched
  Severity severity = Severity::ok;
  std::string current;
  std::string recommended;
  std::string impact;
  std::string fix; // a command or file edit that fixes it; empty when ok
};

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
