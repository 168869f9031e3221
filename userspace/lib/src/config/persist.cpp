#include "mltune/persist.hpp"

#include "mltune/profile.hpp"

#include <filesystem>

namespace mltune {

namespace {

constexpr std::string_view k_legacy_wants = "/etc/systemd/system/multi-user.target.wants/mltune.service";

// Removes `path` when it is a symlink (the enable link) or a file that
// starts with the marker; a foreign file is an error, an absent one nothing.
Result<bool> remove_marked(const Sysroot &root, std::string_view path) {
  const bool link = root.is_symlink(path);
  if (!link && !root.exists(path)) {
    return false;
  }
  if (!link) {
    auto text = root.read(path);
    if (!text) {
      return text.error();
    }
    if (!text->starts_with(k_config_marker)) {
      return failure(std::string(path) + ": not written by mltunectl persist; left alone");
    }
  }
  if (auto r = root.remove_file(path); !r) {
    return r.error();
  }
  return true;
}

Status remove_legacy(const Sysroot &root, std::vector<std::string> &removed) {
  for (const auto &f : legacy_persist_files()) {
    if (f == k_legacy_wants) {
      // Only the link persist made to its own unit; one to the packaged
      // unit (systemctl enable) is systemd's.
      const auto target = root.read_link(f);
      if (!target || *target != "../mltune.service") {
        continue;
      }
    }
    auto r = remove_marked(root, f);
    if (!r) {
      return r.error();
    }
    if (*r) {
      removed.emplace_back(f);
    }
  }
  return {};
}

} // namespace

const std::vector<std::string_view> &legacy_persist_files() {
  static const std::vector<std::string_view> files = {
      "/etc/sysctl.d/90-mltune.conf", "/etc/security/limits.d/90-mltune.conf", "/etc/mltune/mltune.conf",
      "/etc/systemd/system/mltune.service", k_legacy_wants};
  return files;
}

Result<PersistResult> persist_config(const NodeConfig &cfg, const Sysroot &root, bool replace) {
  const std::string text = render_config(cfg);
  auto back = parse_config(text, std::string(k_config_file));
  if (!back) {
    return with_context(back.error(), "persist: the configuration would not load");
  }
  if (cfg.profile) {
    if (auto p = ProfileLoader(&root).load(*cfg.profile); !p) {
      return with_context(p.error(), "persist: profile '" + *cfg.profile + "'");
    }
  }
  if (!replace && root.exists(k_config_file)) {
    auto old = root.read(k_config_file);
    if (!old) {
      return old.error();
    }
    if (!old->starts_with(k_config_marker)) {
      return input_error(std::string(k_config_file) +
                         ": written by hand (no marker line); persist would lose its comments: --replace to "
                         "overwrite it");
    }
  }
  PersistResult res;
  if (auto st = remove_legacy(root, res.removed); !st) {
    return st.error();
  }
  if (auto st = root.write_file(k_config_file, text, {.make_parents = true}); !st) {
    return st.error();
  }
  res.written.emplace_back(k_config_file);
  return res;
}

Result<std::vector<std::string>> remove_persist(const Sysroot &root) {
  std::vector<std::string> removed;
  if (auto st = remove_legacy(root, removed); !st) {
    return st.error();
  }
  auto r = remove_marked(root, k_config_file);
  if (!r) {
    return r.error();
  }
  if (*r) {
    removed.emplace_back(k_config_file);
  }
  return removed;
}

DomainState persist_state(const Sysroot &root) {
  if (!root.exists(k_config_file)) {
    return {"persist", "off", "no " + std::string(k_config_file)};
  }
  auto cfg = load_config(root);
  if (!cfg) {
    return {"persist", "unchecked", cfg.error().message};
  }
  return {"persist", "applied",
          std::string(k_config_file) + ": profile " + cfg->profile.value_or("(none)") + " at boot"};
}

DomainState persist_off(const Sysroot &root) {
  // A node configuration written by hand or by configuration management
  // (Ansible, Puppet) is the administrator's, not a change of mltune's.
  if (auto text = root.read(k_config_file); text && !text->starts_with(k_config_marker)) {
    return {"persist", "kept",
            std::string(k_config_file) + " was not written by mltunectl persist: left as it is (the next boot "
                                         "applies it; remove it to keep the node off)"};
  }
  auto removed = remove_persist(root);
  if (!removed) {
    return {"persist", "failed", removed.error().message};
  }
  if (removed->empty()) {
    return {"persist", "off", "nothing persisted by mltunectl"};
  }
  std::string files;
  for (const auto &f : *removed) {
    files += (files.empty() ? "" : ", ") + f;
  }
  return {"persist", "restored", "removed " + files};
}

} // namespace mltune
