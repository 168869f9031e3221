#include "mltune/persist.hpp"

#include <filesystem>
#include <ranges>

#ifndef MLTUNE_SBINDIR
#define MLTUNE_SBINDIR "/usr/sbin"
#endif

namespace mltune {

namespace {

const std::string k_sysctl_conf = "/etc/sysctl.d/90-mltune.conf";
const std::string k_limits_conf = "/etc/security/limits.d/90-mltune.conf";
const std::string k_env_conf = "/etc/mltune/mltune.conf";
const std::string k_unit = "/etc/systemd/system/mltune.service";
const std::string k_wants = "/etc/systemd/system/multi-user.target.wants/mltune.service";

} // namespace

std::vector<PersistFile> persist_files(const Profile &profile) {
  const std::string marker = std::string(k_persist_marker) + " (profile " + profile.name + ")\n";
  std::string sysctl = marker + "# Applied early by systemd-sysctl; sysfs knobs are applied by mltune.service.\n";
  for (const auto &k : profile.knobs) {
    if (k.kind == KnobKind::sysctl) {
      sysctl += "# " + k.reason + "\n" + (k.optional ? "-" : "") + k.key + " = " + k.value + "\n";
    }
  }
  const std::string limits = marker +
                             "# Pinned host memory (cudaHostAlloc, RDMA) and many open files.\n"
                             "*    -    memlock    unlimited\n"
                             "*    -    nofile     " +
                             std::string(k_nofile_limit) + "\n";
  const std::string env = marker + "PROFILE=" + profile.name + "\n";
  const std::string unit = marker +
                           "[Unit]\n"
                           "Description=Apply the mltune node profile\n"
                           "After=systemd-sysctl.service systemd-modules-load.service\n"
                           "Before=multi-user.target\n\n"
                           "[Service]\n"
                           "Type=oneshot\n"
                           "RemainAfterExit=yes\n"
                           "EnvironmentFile=" +
                           k_env_conf +
                           "\nExecStart=" MLTUNE_SBINDIR "/mltunectl switch ${PROFILE}\n\n"
                           "[Install]\n"
                           "WantedBy=multi-user.target\n";
  return {{k_sysctl_conf, sysctl}, {k_limits_conf, limits}, {k_env_conf, env}, {k_unit, unit}, {k_wants, {}}};
}

Result<std::vector<std::string>> persist(const Profile &profile, const Sysroot &root) {
  std::vector<std::string> written;
  for (const auto &f : persist_files(profile)) {
    const Status st =
        f.content.empty() ? root.symlink("../mltune.service", f.path) : root.write_file(f.path, f.content);
    if (!st) {
      for (const auto &w : written) {
        (void)root.remove_file(w);
      }
      return st.error();
    }
    written.push_back(f.path);
  }
  return written;
}

Result<std::vector<std::string>> remove_persist(const Sysroot &root) {
  std::vector<std::string> removed;
  const auto files = persist_files(Profile{});
  for (const auto &f : std::views::reverse(files)) { // the enable link first
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(root.path(f.path), ec))) {
      continue;
    }
    if (!f.content.empty()) {
      auto text = root.read(f.path);
      if (!text) {
        return text.error();
      }
      if (!text->starts_with(k_persist_marker)) {
        return failure(f.path + ": not written by mltunectl persist; left alone");
      }
    }
    if (auto st = root.remove_file(f.path); !st) {
      return st.error();
    }
    removed.push_back(f.path);
  }
  return removed;
}

} // namespace mltune
