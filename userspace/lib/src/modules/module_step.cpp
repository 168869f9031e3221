// ModuleStep: the profile's kernel modules as a transaction step
// (modules.hpp), and the modprobe loader.
#include "mltune/modules.hpp"

#include "base/baseline.hpp"
#include "base/file_lock.hpp"
#include "base/process.hpp"
#include "mltune/config.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <ranges>
#include <set>
#include <string_view>
#include <sys/utsname.h>

namespace mltune {

namespace {

// A module name as modprobe compares them: '-' and '_' are the same.
std::string module_key(std::string_view name) {
  std::string k(name);
  std::ranges::replace(k, '-', '_');
  return k;
}

class Modprobe final : public ModuleLoader {
public:
  explicit Modprobe(const Sysroot &root) : root_(root) {
    struct utsname u {};
    if (::uname(&u) == 0) {
      tree_ = std::string("/lib/modules/") + u.release;
    }
  }
  // Loaded (/sys/module/NAME), or built into the kernel: a built-in module
  // without parameters has no /sys/module entry; modules.builtin lists it.
  [[nodiscard]] bool loaded(const std::string &name) const override {
    return root_.is_dir("/sys/module/" + name) || builtin().contains(module_key(name));
  }
  // Without the kernel's module tree modprobe can only fail (a kernel
  // built without modules, a container image without /lib/modules): said
  // without starting it.
  [[nodiscard]] Status loadable(const std::string &name) const override {
    if (tree_.empty() || !root_.exists(tree_ + "/modules.dep")) {
      return failure("this kernel has no module tree (" + root_.path(tree_ + "/modules.dep").string() +
                     " is missing): " + name + " cannot be loaded");
    }
    return {};
  }
  Status load(const std::string &name) override {
    if (auto st = loadable(name); !st) {
      return st;
    }
    return run({name});
  }
  Status unload(const std::string &name) override {
    if (auto st = run({"-r", name}); !st) {
      return st;
    }
    // modprobe -r exits 0 for a module it believes is not loaded (a
    // container without /sys): only the node's /sys/module says it is gone.
    if (loaded(name)) {
      return failure("modprobe -r " + name + " exited 0, but " + name + " is still loaded");
    }
    return {};
  }

private:
  // In container mode the modules are the node's: modprobe -d <root> reads
  // <root>/lib/modules/$(uname -r) (the kernel is the node's either way).
  [[nodiscard]] Status run(const std::vector<std::string> &args) const {
    std::vector<std::string> argv{"modprobe"};
    if (!root_.is_live()) {
      argv.insert(argv.end(), {"-d", root_.root().string()});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    // modprobe holds the node lock until it ends: when this process is
    // killed first, `off` waits for the module it loads and unloads it.
    const std::vector<int> locks = FileLock::passed_to_children();
    auto r = detail::run_command(argv, detail::CommandOutput::stdout_stderr, locks);
    if (!r) {
      return with_context(r.error(), "modprobe (is kmod installed?)");
    }
    if (r->status != 0) {
      std::string why(trim_message(r->output));
      return failure(why.empty() ? "modprobe exited with " + std::to_string(r->status) : why);
    }
    return {};
  }
  static std::string_view trim_message(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
      s.remove_suffix(1);
    }
    return s;
  }
  // The names in <tree>/modules.builtin ("kernel/net/ipv4/tcp_bbr.ko"),
  // read once.
  [[nodiscard]] const std::set<std::string> &builtin() const {
    if (!builtin_) {
      builtin_.emplace();
      auto text =
          tree_.empty() ? Result<std::string>(failure("no module tree")) : root_.read(tree_ + "/modules.builtin");
      if (text) {
        std::string_view rest(*text);
        while (!rest.empty()) {
          const size_t nl = std::min(rest.find('\n'), rest.size());
          std::string_view line = rest.substr(0, nl);
          rest.remove_prefix(std::min(nl + 1, rest.size()));
          const size_t slash = line.rfind('/');
          line.remove_prefix(slash == std::string_view::npos ? 0 : slash + 1);
          if (line.ends_with(".ko")) {
            line.remove_suffix(3);
            builtin_->insert(module_key(line));
          }
        }
      }
    }
    return *builtin_;
  }
  const Sysroot &root_;
  std::string tree_; // /lib/modules/<release of the running kernel>
  mutable std::optional<std::set<std::string>> builtin_;
};

} // namespace

bool ModuleAllowlist::allows(std::string_view name) const {
  const std::string key = module_key(name);
  return std::ranges::any_of(names, [&](const std::string &n) { return module_key(n) == key; });
}

std::string ModuleAllowlist::listed() const {
  std::string s;
  for (const auto &n : names) {
    s += (s.empty() ? "" : ", ") + n;
  }
  return s.empty() ? "none" : s;
}

const std::vector<std::string> &default_module_allowlist() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    const ProfileLoader builtins; // no sysroot: the compiled-in profiles only
    for (const auto &b : builtin_profiles()) {
      auto p = builtins.load(b.name);
      if (!p) {
        continue; // a built-in that does not load fails its own unit test
      }
      for (const auto &m : p->modules) {
        if (std::ranges::find(out, m.name) == out.end()) {
          out.push_back(m.name);
        }
      }
    }
    return out;
  }();
  return names;
}

Result<ModuleAllowlist> load_module_allowlist(const Sysroot &root) {
  if (root.exists(k_config_file)) {
    auto cfg = load_config(root);
    if (!cfg) {
      return with_context(cfg.error(), "the module allowlist ([modules] allow) cannot be read");
    }
    if (cfg->module_allow) {
      return ModuleAllowlist{*cfg->module_allow, cfg->module_allow_origin + " [modules] allow"};
    }
  }
  return ModuleAllowlist{default_module_allowlist(), "the default: the built-in profiles' modules; " +
                                                         std::string(k_config_file) + " has no [modules] allow"};
}

std::unique_ptr<ModuleLoader> make_live_module_loader(const Sysroot &root) {
  return root.is_node() ? std::make_unique<Modprobe>(root) : nullptr;
}

ModuleStep::ModuleStep(std::span<const KernelModule> modules, const Sysroot &root, ModuleLoader *loader)
    : modules_(modules), root_(root), loader_(loader) {
  if (loader_ == nullptr) {
    live_ = make_live_module_loader(root);
    loader_ = live_.get();
  }
}

Status ModuleStep::plan() {
  todo_.clear();
  loaded_.clear();
  skipped_.clear();
  if (modules_.empty()) {
    return {};
  }
  // Before anything else, on a tree too: a module the node does not allow is
  // refused, loaded or not, required or not.
  auto allow = load_module_allowlist(root_);
  if (!allow) {
    return allow.error();
  }
  for (const auto &m : modules_) {
    if (!allow->allows(m.name)) {
      return input_error("module " + m.name + " (" + m.origin + ") is not on this node's module allowlist (" +
                         allow->source + ": " + allow->listed() + "); add it to [modules] allow in " +
                         std::string(k_config_file) + " to let profiles load it");
    }
  }
  if (loader_ == nullptr) {
    return {};
  }
  for (const auto &m : modules_) {
    if (loader_->loaded(m.name)) {
      continue;
    }
    // A module that cannot be loaded here is found before any step applies:
    // a required one fails the plan, another is skipped (and apply neither
    // records nor tries it).
    if (auto st = loader_->loadable(m.name); !st) {
      if (m.required) {
        return with_context(st.error(), m.name + " (" + m.origin + ", required)");
      }
      skipped_.push_back(m.name + ": " + st.error().message);
      continue;
    }
    todo_.push_back(&m);
  }
  return {};
}

namespace {

// The modules' record in the node baseline (base/baseline.hpp): the kernel
// modules mltune loaded, in load order.
constexpr std::string_view k_domain = "modules";

struct ModuleRecord {
  detail::NodeBaseline file;
  std::vector<std::string> modules;
};

Result<ModuleRecord> load_record(const Sysroot &root) {
  auto file = detail::load_baseline(root);
  if (!file) {
    return file.error();
  }
  auto modules = file->get<std::vector<std::string>>(k_domain);
  if (!modules) {
    return modules.error();
  }
  return ModuleRecord{std::move(*file), std::move(*modules)};
}

Status save_record(const Sysroot &root, ModuleRecord &r) {
  r.file.put(k_domain, r.modules);
  return detail::save_baseline(root, r.file);
}

} // namespace

Result<std::vector<std::string>> recorded_modules(const Sysroot &root) {
  auto r = load_record(root);
  if (!r) {
    return r.error();
  }
  return std::move(r->modules);
}

Status ModuleStep::apply() {
  if (todo_.empty()) {
    return {};
  }
  // Recorded before loading: a crash after modprobe still leaves `off` a
  // record of what to unload.
  auto b = load_record(root_);
  if (!b) {
    return b.error();
  }
  for (const auto *m : todo_) {
    if (std::find(b->modules.begin(), b->modules.end(), m->name) == b->modules.end()) {
      b->modules.push_back(m->name);
    }
  }
  if (auto st = save_record(root_, *b); !st) {
    return st;
  }
  stop_point(stop_at_, "modules/recorded");
  std::vector<std::string> not_loaded;
  Status failed;
  for (const auto *m : todo_) {
    auto st = loader_->load(m->name);
    if (st) {
      loaded_.push_back(m->name);
      continue;
    }
    if (!loader_->loaded(m->name)) {
      not_loaded.push_back(m->name);
    }
    if (m->required) {
      failed = with_context(st.error(), m->name + " (" + m->origin + ", required)");
      break;
    }
    skipped_.push_back(m->name + ": " + st.error().message);
  }
  // A module that did not load is not one mltune loaded: `off` must not
  // count it as unloaded.
  if (!not_loaded.empty()) {
    std::erase_if(b->modules,
                  [&](const std::string &n) { return std::ranges::find(not_loaded, n) != not_loaded.end(); });
    if (auto st = save_record(root_, *b); !st && failed) {
      return st;
    }
  }
  return failed;
}

Status ModuleStep::verify() {
  for (const auto &name : loaded_) {
    if (!loader_->loaded(name)) {
      return failure("module " + name + " is not in the kernel after loading it");
    }
  }
  return {};
}

Status ModuleStep::rollback() {
  std::string failed;
  for (const auto &name : std::views::reverse(loaded_)) {
    if (auto st = loader_->unload(name); !st) {
      failed += (failed.empty() ? "" : "; ") + name + ": " + st.error().message;
    }
  }
  loaded_.clear();
  if (!failed.empty()) {
    return failure("unloading modules: " + failed);
  }
  return {};
}

Status ModuleStep::baseline() {
  in_use_.clear();
  if (loader_ == nullptr) {
    return {};
  }
  auto b = load_record(root_);
  if (!b) {
    return b.error();
  }
  recorded_ = b->modules;
  std::vector<std::string> keep;
  unloaded_.clear();
  for (const auto &name : std::views::reverse(b->modules)) {
    if (!loader_->loaded(name)) {
      continue;
    }
    if (auto st = loader_->unload(name); st) {
      unloaded_.push_back(name);
    } else {
      in_use_.push_back(name + ": " + st.error().message);
      keep.insert(keep.begin(), name);
    }
  }
  b->modules = keep;
  return save_record(root_, *b);
}

} // namespace mltune

namespace mltune {

Result<DomainCheck> ModuleStep::check(std::vector<NodeDifference> &out) {
  DomainCheck dc{"modules", "match", modules_.size(), {}};
  if (modules_.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  for (const auto &m : modules_) {
    const bool in = loader_ != nullptr ? loader_->loaded(m.name) : root_.is_dir("/sys/module/" + m.name);
    if (!in) {
      out.push_back({"modules", m.name, "loaded", "not loaded", "missing", m.required});
      dc.state = m.required ? "differs" : dc.state;
    }
  }
  return dc;
}

namespace {

std::string joined(const std::vector<std::string> &names, std::string_view sep = ", ") {
  std::string out;
  for (const auto &n : names) {
    out += (out.empty() ? "" : std::string(sep)) + n;
  }
  return out;
}

} // namespace

DomainState ModuleStep::off(bool dry_run) {
  auto b = detail::load_baseline(root_);
  if (!b) {
    return {"modules", "failed", b.error().message};
  }
  if (!b->has("modules")) {
    return {"modules", "off", "no module loaded by mltune"};
  }
  if (loader_ == nullptr) {
    return {"modules", "unchecked", "modules are unloaded on a running node only, not in a file tree"};
  }
  if (dry_run) {
    auto names = recorded_modules(root_);
    if (!names) {
      return {"modules", "failed", names.error().message};
    }
    return {"modules", "planned", "unload " + joined(*names) + " (those still loaded and not in use)"};
  }
  if (auto st = baseline(); !st) {
    return {"modules", "failed", st.error().message};
  }
  if (!in_use_.empty()) {
    // Not a failure: the module goes when its last user does.
    return {"modules", "pending", "still in use, left loaded (off unloads it next time): " + joined(in_use_, "; ")};
  }
  std::vector<std::string> by_us;
  std::vector<std::string> gone;
  for (const auto &n : recorded_) {
    (std::ranges::find(unloaded_, n) != unloaded_.end() ? by_us : gone).push_back(n);
  }
  if (by_us.empty()) {
    return {"modules", "restored", joined(gone) + ": no longer loaded"};
  }
  return {"modules", "restored",
          "unloaded " + joined(by_us) + (gone.empty() ? "" : "; " + joined(gone) + ": no longer loaded")};
}

} // namespace mltune

namespace mltune {

std::string ModuleStep::summary() const {
  std::string l = "modules: " + std::to_string(loaded_.size()) + " loaded";
  for (const auto &m : skipped_) {
    l += "; skipped " + m;
  }
  return l;
}

} // namespace mltune
