// persist: make a profile survive reboots.
//
// Writes, below the sysroot:
//   /etc/sysctl.d/90-mltune.conf            sysctls of the profile ("-" prefix = optional)
//   /etc/security/limits.d/90-mltune.conf   memlock unlimited, nofile 1048576
//   /etc/mltune/mltune.conf                 PROFILE=<name> (the default profile)
//   /etc/systemd/system/mltune.service      oneshot unit: mltunectl switch $PROFILE
//   /etc/systemd/system/multi-user.target.wants/mltune.service  (enable symlink)
// remove_persist() deletes exactly these files, and only when they carry the
// mltune marker line.
#pragma once

#include "mltune/profile.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <vector>

namespace mltune {

struct PersistFile {
  std::string path;
  std::string content; // empty for the enable symlink
};

inline constexpr std::string_view k_persist_marker = "# Managed by mltunectl persist";
inline constexpr std::string_view k_nofile_limit = "1048576";

std::vector<PersistFile> persist_files(const Profile &profile);
// Writes every file; on failure removes those written.  Returns paths written.
Result<std::vector<std::string>> persist(const Profile &profile, const Sysroot &root);
Result<std::vector<std::string>> remove_persist(const Sysroot &root);

} // namespace mltune
