// mltunectl profile list|show|check
#include "cli.hpp"

#include "mltune/catalog.hpp"
#include "mltune/compare.hpp"
#include "mltune/recommend.hpp"
#include "mltune/switch.hpp"
#include "mltune/topology.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

nlohmann::json knob_json(const Knob &k) {
  return {{"key", k.key},
          {"kind", k.kind == KnobKind::sysctl ? "sysctl" : "sysfs"},
          {"path", k.path()},
          {"value", k.value},
          {"compare", to_string(k.cmp)},
          {"optional", k.if_present ? nlohmann::json("missing") : nlohmann::json(k.optional)},
          {"reason", k.reason},
          {"origin", k.origin}};
}

void list(Context &ctx) {
  const Sysroot root = ctx.root();
  const ProfileLoader loader(&root);
  nlohmann::json arr = nlohmann::json::array();
  // Marks: the profile active now, the one the hardware suggests.
  const auto active = active_profile(root, choose_backend(root, Backend::automatic));
  const std::string active_name = active ? active->name : "";
  const auto topo = discover_topology(root, {.pcie_state = false});
  const std::string recommended = topo ? recommend_profile(*topo).profile : "";
  for (const auto &name : loader.list()) {
    auto p = loader.load(name);
    if (!p) {
      ctx.fail(p.error());
      continue;
    }
    const bool user = root.exists(std::string(k_user_profile_dir) + "/" + name + ".toml");
    const bool packaged = !user && root.exists(std::string(packaged_profile_dir()) + "/" + name + ".toml");
    const char *source = user ? "user" : packaged ? "packaged" : "builtin";
    arr.push_back({{"name", name},
                   {"description", p->description},
                   {"source", source},
                   {"knobs", p->knobs.size()},
                   {"active", name == active_name},
                   {"recommended", name == recommended}});
    if (!ctx.json) {
      *ctx.out << (name == active_name ? "* " : "  ") << name
               << (user       ? " (user)"
                   : packaged ? " (packaged)"
                              : "")
               << (name == recommended ? " (recommended)" : "") << "\t" << p->description << "\n";
    }
  }
  if (ctx.json) {
    ctx.emit({{"profiles", arr}});
  }
}

void show(Context &ctx, const std::string &name) {
  const Sysroot root = ctx.root();
  auto p = ProfileLoader(&root).load(name);
  if (!p) {
    return ctx.fail(p.error());
  }
  if (ctx.json) {
    nlohmann::json knobs = nlohmann::json::array();
    for (const auto &k : p->knobs) {
      knobs.push_back(knob_json(k));
    }
    nlohmann::json j{{"name", p->name}, {"description", p->description}, {"sources", p->sources}, {"knobs", knobs}};
    for (const char *d : {"cpu", "block", "nic", "sched"}) {
      j[d] = nlohmann::json::array();
    }
    for (const auto &s : profile_settings(*p)) {
      if (s.domain != "knobs") {
        j[s.domain].push_back({{"key", s.key}, {"value", s.value}, {"origin", s.origin}});
      }
    }
    j["modules"] = nlohmann::json::array();
    for (const auto &m : p->modules) {
      j["modules"].push_back({{"name", m.name}, {"required", m.required}, {"origin", m.origin}});
    }
    ctx.emit(j);
    return;
  }
  *ctx.out << "# " << p->name << ": " << p->description << "\n";
  for (const auto &k : p->knobs) {
    *ctx.out << (k.kind == KnobKind::sysfs ? "/sys/" : "") << k.key << (k.cmp == KnobCmp::exact ? " = " : " ")
             << k.wanted()
             << (k.optional     ? "  [optional]"
                 : k.if_present ? "  [optional where missing]"
                                : "")
             << "  # " << k.origin << "\n";
    if (ctx.verbose > 0 && !k.reason.empty()) {
      *ctx.out << "    " << k.reason << "\n";
    }
  }
  for (const auto &m : p->modules) {
    *ctx.out << "module " << m.name << (m.required ? "  [required]" : "") << "  # " << m.origin << "\n";
  }
  for (const auto &s : profile_settings(*p)) {
    if (s.domain != "knobs") {
      *ctx.out << s.domain << " " << s.key << " = " << s.value << "  # " << s.origin << "\n";
    }
  }
}

void check(Context &ctx, const std::string &file) {
  const Sysroot root = ctx.root();
  auto p = ProfileLoader(&root).load(file);
  if (!p) {
    return ctx.fail(p.error());
  }
  std::vector<std::string> notes;
  for (const auto &k : p->knobs) {
    if (catalog_find(k.key) == nullptr) {
      notes.push_back(k.origin + ": " + k.key + ": not in the knob catalog; value not range-checked");
    }
  }
  if (ctx.json) {
    ctx.emit({{"file", file}, {"ok", true}, {"profile", p->name}, {"knobs", p->knobs.size()}, {"notes", notes}});
    return;
  }
  for (const auto &n : notes) {
    *ctx.out << "note: " << n << "\n";
  }
  *ctx.out << file << ": ok (" << p->knobs.size() << " knobs)\n";
}

} // namespace

void register_profile(CLI::App &app, Context &ctx) {
  auto *cmd = app.add_subcommand("profile", "List, show and check profiles");
  cmd->require_subcommand(1);
  cmd->add_subcommand("list", "List built-in and user profiles")->callback([&ctx] { list(ctx); });

  auto name = std::make_shared<std::string>();
  auto *show_cmd = cmd->add_subcommand("show", "Show a merged profile and where each value came from");
  show_cmd->add_option("profile", *name, "Profile name or TOML file")->required();
  show_cmd->callback([&ctx, name] { show(ctx, *name); });

  auto file = std::make_shared<std::string>();
  auto *check_cmd = cmd->add_subcommand("check", "Validate a profile file (schema, ranges, includes)");
  check_cmd->add_option("file", *file, "Profile TOML file or name")->required();
  check_cmd->callback([&ctx, file] { check(ctx, *file); });
}

} // namespace mltune::cli
