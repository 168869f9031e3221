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
  std::string category; // sysctl sysfs cpu memory limits kernel irq gpu
  Severity severity = Severity::ok;
  std::string current;
  std::string recommended;
  std::string impact;
  std::string fix; // a command or file edit that fixes it; empty when ok
};

struct AuditOptions {
  // Run <sysroot>/usr/bin/nvidia-smi when it exists.
  bool run_nvidia_smi = true;
};

std::vector<Finding> audit(const Profile &profile, const Sysroot &root, const AuditOptions &opt = {});
Severity worst(const std::vector<Finding> &findings);

} // namespace mltune
