// BootStep: the profile's kernel command line as a transaction step
// (boot.hpp), through the GRUB drop-in of boot.hpp.
#include "mltune/boot.hpp"

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

} // namespace mltune
