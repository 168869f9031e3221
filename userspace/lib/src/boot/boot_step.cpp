// BootStep: the profile's kernel command line as a transaction step
// (boot.hpp), through the GRUB drop-in of boot.hpp.
#include "mltune/boot.hpp"

#include "mltune/parse.hpp"

namespace mltune {

BootStep::BootStep(const Profile &profile, const Sysroot &root) : profile_(profile), root_(root) {}

Status BootStep::plan() {
  fragment_.clear();
  content_.clear();
  changed_ = false;
  if (!profile_.boot) {
    return {};
  }
  auto t = discover_topology(root_, {.pcie_state = false});
  if (!t) {
    return t.error();
  }
  auto p = make_cpu_plan(*t);
  if (!p) {
    return p.error();
  }
  BootOptions bo = boot_options_for(profile_);
  bo.isolate = profile_.boot->isolate;
  auto params = boot_params(*t, *p, bo);
  if (!params) {
    return with_context(params.error(), "[boot] (" + profile_.boot->origin + ")");
  }
  fragment_ = boot_fragment(*params);
  content_ = grub_dropin(*params, profile_.name);
  auto old = root_.read(k_grub_dropin);
  before_ = old ? std::optional<std::string>(*old) : std::nullopt;
  return {};
}

Status BootStep::apply() {
  if (content_.empty() || (before_ && *before_ == content_)) {
    return {};
  }
  if (auto st = root_.write_file(k_grub_dropin, content_, {.make_parents = true}); !st) {
    return st;
  }
  changed_ = true;
  return {};
}

Status BootStep::verify() {
  if (content_.empty()) {
    return {};
  }
  auto now = root_.read(k_grub_dropin);
  if (!now || *now != content_) {
    return failure(std::string(k_grub_dropin) + " does not hold the parameters written");
  }
  return {};
}

Status BootStep::rollback() {
  if (!changed_) {
    return {};
  }
  changed_ = false;
  return before_ ? root_.write_file(k_grub_dropin, *before_, {.make_parents = true}) : root_.remove_file(k_grub_dropin);
}

Status BootStep::baseline() {
  return root_.exists(k_grub_dropin) ? root_.remove_file(k_grub_dropin) : Status{};
}

// The drop-in's parameters (GRUB_CMDLINE_LINUX_DEFAULT="$... PARAMS") and
// whether the running kernel's command line has them.
std::optional<DomainState> BootStep::state() {
  auto dropin = root_.read(k_grub_dropin);
  if (!dropin) {
    return DomainState{"boot", "off", "no " + std::string(k_grub_dropin)};
  }
  auto cmdline = root_.read("/proc/cmdline");
  const std::string have = cmdline ? " " + std::string(trim(*cmdline)) + " " : "";
  size_t missing = 0;
  std::string params;
  for (const auto line : split_lines(*dropin)) {
    const auto q = line.find('"');
    if (line.starts_with("#") || q == std::string_view::npos) {
      continue;
    }
    for (const auto w : split_words(line.substr(q + 1, line.rfind('"') - q - 1))) {
      if (w.starts_with("$")) {
        continue;
      }
      params += (params.empty() ? "" : " ") + std::string(w);
      missing += have.find(" " + std::string(w) + " ") == std::string::npos ? 1 : 0;
    }
  }
  if (missing > 0) {
    return DomainState{"boot", "pending-reboot",
                       std::to_string(missing) + " parameter(s) of " + std::string(k_grub_dropin) +
                           " not on the running command line: " + params};
  }
  return DomainState{"boot", "applied", params};
}

DomainState BootStep::off(bool dry_run) {
  if (!root_.exists(k_grub_dropin)) {
    return {"boot", "off", "no " + std::string(k_grub_dropin)};
  }
  if (dry_run) {
    return {"boot", "planned", "remove " + std::string(k_grub_dropin)};
  }
  if (auto st = baseline(); !st) {
    return {"boot", "failed", st.error().message};
  }
  return {"boot", "pending-reboot",
          "removed " + std::string(k_grub_dropin) + "; run update-grub, the parameters leave at the next boot"};
}

} // namespace mltune

namespace mltune {

std::string BootStep::summary() const {
  if (fragment_.empty()) {
    return "boot: no parameter";
  }
  return changed_ ? "boot: " + std::string(k_grub_dropin) + " written, pending a reboot: " + fragment_
                  : "boot: " + std::string(k_grub_dropin) + " already has " + fragment_;
}

} // namespace mltune
