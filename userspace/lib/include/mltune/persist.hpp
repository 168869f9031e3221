// persist: make a node configuration survive reboots.
//
// persist_config() writes the node configuration (config.hpp)
// /etc/mltune/mltune.toml below the sysroot, which mltune.service applies at
// every boot.  The text is checked before it is written: it parses back to
// the same configuration and its profile loads.  A file that exists without
// the marker line (written by hand) is replaced only when asked to.
//
// Earlier versions of persist wrote a sysctl.d file, a limits.d file,
// /etc/mltune/mltune.conf and a unit of their own in /etc/systemd/system,
// which would shadow the packaged mltune.service.  persist_config() and
// remove_persist() delete those (legacy_persist_files()), and only when they
// carry the marker line.  remove_persist() also deletes the configuration
// (only with the marker).
#pragma once

#include "mltune/config.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace mltune {

struct PersistResult {
  std::vector<std::string> written;
  std::vector<std::string> removed; // legacy files
};

[[nodiscard]] Result<PersistResult> persist_config(const NodeConfig &cfg, const Sysroot &root, bool replace = false);
// Returns the paths removed.
[[nodiscard]] Result<std::vector<std::string>> remove_persist(const Sysroot &root);
// The files earlier versions of persist wrote (the last is the enable link).
const std::vector<std::string_view> &legacy_persist_files();

// The persisted configuration as `active` reports it: "applied" (the
// profile it applies at boot), "off", "unchecked" (it does not load).
[[nodiscard]] DomainState persist_state(const Sysroot &root);
// `off`'s part: what persist wrote removed ("restored"); a configuration
// written by hand or by configuration management is left ("kept").
[[nodiscard]] DomainState persist_off(const Sysroot &root);

} // namespace mltune
