#include "cli.hpp"

#include "mltune/config.hpp"
#include "mltune/cpulist.hpp"
#include "mltune/node.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ostream>

namespace mltune::cli {

void Context::fail(const Error &e) {
  rc = e.kind == Errc::input ? k_exit_usage : k_exit_failed;
  *err << "mltunectl: error: " << e.message << "\n";
  if (json) {
    nlohmann::json j{{"error", {{"message", e.message}, {"errno", e.sys_errno}, {"exit_code", rc}}}};
    emit(j);
  }
}

void Context::emit(const nlohmann::json &j) const {
  *out << j.dump(2) << "\n";
}

nlohmann::json domains_json(const std::vector<DomainState> &ds) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto &d : ds) {
    a.push_back({{"domain", d.domain}, {"state", d.state}, {"detail", d.detail}});
  }
  return a;
}

void print_domains(Context &ctx, const std::vector<DomainState> &ds) {
  for (const auto &d : ds) {
    *ctx.out << "  " << d.domain << std::string(d.domain.size() < 8 ? 8 - d.domain.size() : 1, ' ') << d.state
             << (d.detail.empty() ? "" : ": " + d.detail) << "\n";
  }
}

void add_field_option(CLI::App *cmd, std::string &field, const std::vector<std::string> &names) {
  cmd->add_option("--field", field, "Print only this field of the --json document, as text (with --json: as JSON)")
      ->type_name("NAME")
      ->check(CLI::IsMember(names));
}

bool emit_field(const Context &ctx, const nlohmann::json &doc, const std::string &field) {
  if (field.empty()) {
    return false;
  }
  const auto it = doc.find(field);
  const nlohmann::json v = it == doc.end() ? nlohmann::json(nullptr) : *it;
  // Text: a string as it is, null as nothing; otherwise (and with --json)
  // the value as JSON (true, 3).
  std::string text;
  if (!ctx.json && v.is_string()) {
    text = v.get<std::string>();
  } else if (ctx.json || !v.is_null()) {
    text = v.dump();
  }
  *ctx.out << text << "\n";
  return true;
}

namespace {
// When this command started (static initialisation, before main()).
const auto k_started = std::chrono::steady_clock::now();
} // namespace

std::chrono::steady_clock::time_point process_started() {
  return k_started;
}

std::function<void(std::string_view, std::string_view)> Context::step_progress() const {
  if (verbose == 0 || json) {
    return {};
  }
  return [this](std::string_view step, std::string_view phase) {
    const std::chrono::duration<double, std::milli> t = std::chrono::steady_clock::now() - started;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", t.count());
    // One write per line: stderr is unbuffered, and a job log that several
    // processes share must not interleave pieces of lines.
    std::string line = "mltunectl: ";
    line.append(ms).append(" ms ").append(step).append(": ").append(phase).append("\n");
    *err << line << std::flush;
  };
}

std::string Context::default_profile() const {
  const Sysroot r = root();
  if (r.exists(k_config_file)) {
    if (auto cfg = load_config(r); cfg && cfg->profile) {
      return *cfg->profile;
    }
  }
  return "training";
}

namespace {
std::atomic<bool> g_stop{false};
void on_stop_signal(int /*sig*/) {
  g_stop = true;
}
} // namespace

void catch_stop_signals() {
  g_stop = false;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() {
  return g_stop.load();
}

CLI::Validator cpulist_check() {
  return {[](std::string &s) {
            auto c = parse_cpuset(s, "cpulist");
            return c ? std::string() : c.error().message;
          },
          "CPULIST"};
}

CLI::Validator non_empty_check(std::string hint) {
  return {[hint = std::move(hint)](std::string &s) { return s.empty() ? "empty value (" + hint + ")" : std::string(); },
          ""};
}

namespace {

using Register = void (*)(CLI::App &, Context &);

struct Subcommand {
  std::string_view name;
  Register add;
};

// Every top-level name and the function that registers it; register_verify
// adds both "verify" and "diff" (the order is the help's).
constexpr Subcommand k_subcommands[] = {
    {"profile", register_profile}, {"audit", register_audit},       {"verify", register_verify},
    {"diff", register_verify},     {"switch", register_switch},     {"persist", register_persist},
    {"nic", register_nic},         {"topology", register_topology}, {"plan", register_plan},
    {"boot", register_boot},       {"sched", register_sched},       {"feeder", register_feeder},
    {"pool", register_pool},       {"config", register_config},     {"exec", register_exec},
    {"noise", register_noise},     {"drift", register_drift},       {"off", register_node},
    {"active", register_node},     {"status", register_node},       {"recommend", register_node},
    {"follow", register_node},     {"metrics", register_node},      {"conformance", register_node},
    {"serve", register_serve},     {"prove", register_prove},
};

// Registering every subcommand's options costs more than the work of a
// small command (a switch is a few dozen file writes), so only the one named
// on the command line is registered. Without one, or with --help before it,
// all are, so that help and "unknown subcommand" errors list every one.
void register_subcommands(CLI::App &app, Context &ctx, const std::vector<std::string> &args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--sysroot") {
      ++i; // its value
      continue;
    }
    if (a == "-h" || a == "--help" || a == "--") {
      break;
    }
    if (a.starts_with("-")) {
      continue;
    }
    for (const auto &sc : k_subcommands) {
      if (sc.name == a) {
        sc.add(app, ctx);
        return;
      }
    }
    break;
  }
  for (size_t i = 0; i < std::size(k_subcommands); ++i) {
    if (i == 0 || k_subcommands[i].add != k_subcommands[i - 1].add) {
      k_subcommands[i].add(app, ctx);
    }
  }
}

// Every subcommand's --help lists the global options, which are accepted
// before or after the command (the app falls through to them).
void add_global_options_footer(CLI::App &app) {
  std::string text = "Global options (before or after the command):\n";
  for (const CLI::Option *o : app.get_options()) {
    if (o->get_name() == "--help" || o->get_name() == "--version") {
      continue;
    }
    std::string name = o->get_name(false, true);
    if (!o->get_type_name().empty() && o->get_type_size() != 0) {
      name += " " + o->get_type_name();
    }
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s%s\n", name.c_str(), o->get_description().c_str());
    text += line;
  }
  const std::function<void(CLI::App *)> set = [&](CLI::App *sub) {
    sub->footer(text);
    for (CLI::App *s : sub->get_subcommands({})) {
      set(s);
    }
  };
  for (CLI::App *sub : app.get_subcommands({})) {
    set(sub);
  }
}

// --version: this build, the module ABI it speaks and the loaded module's
// own version line, so a mismatch is seen in one command.
std::string version_text(const std::vector<std::string> &args) {
  std::string v = "mltunectl " MLTUNE_VERSION " (build: " MLTUNE_BUILD; // NOLINT(bugprone-suspicious-missing-comma)
  v += "; module ABI " + std::to_string(MLTUNE_ABI_VERSION) + ")\n";
  // CLI11 sets --sysroot's value after parsing, which --version ends.
  std::string sysroot = "/";
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--sysroot") {
      sysroot = args[i + 1];
    }
  }
  auto loaded = Sysroot(sysroot).read_value("/sys/kernel/mltune/version");
  const std::string line = loaded ? *loaded : std::string("not loaded");
  v += "module: " + line;
  return v;
}

// `mltunectl [global options] --version`, answered before CLI11 parses: the
// parser ends a --version with an exception, and the first exception a
// static binary throws costs some 3 ms (libgcc registers and sorts every
// frame description of the binary), more than a whole `topology` of a
// small node. Any other form goes through the parser, which prints the same.
bool only_version(const std::vector<std::string> &args) {
  bool version = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--version") {
      version = true;
    } else if (a == "--sysroot" && i + 1 < args.size()) {
      ++i;
    } else if (a != "--json" && a != "--dry-run" && a != "-v" && a != "--verbose") {
      return false;
    }
  }
  return version;
}

// What a parse error means in the user's terms. CLI11 reports a word that
// names no subcommand as "A subcommand is required" (or as an extra
// argument); say which word it was and what the commands are.
std::string parse_error_message(const CLI::ParseError &e, const std::vector<std::string> &args) {
  std::string word;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--sysroot") {
      ++i;
    } else if (args[i] == "--") {
      break;
    } else if (!args[i].starts_with("-")) {
      word = args[i];
      break;
    }
  }
  const bool known = std::ranges::any_of(k_subcommands, [&](const Subcommand &sc) { return sc.name == word; });
  if (!known) {
    std::string names;
    for (const auto &sc : k_subcommands) {
      names.append(names.empty() ? "" : ", ").append(sc.name);
    }
    if (word.empty()) {
      return "a command is required (one of: " + names + ")";
    }
    return "unknown command '" + word + "' (one of: " + names + ")";
  }
  return e.what();
}

// "mltunectl switch" for the deepest subcommand parsed, for the help hint.
std::string help_command(const CLI::App &app) {
  std::string cmd = app.get_name();
  const CLI::App *at = &app;
  while (true) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) {
      break;
    }
    at = subs.front();
    cmd += " " + at->get_name();
  }
  return cmd;
}

} // namespace

int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        std::optional<std::chrono::steady_clock::time_point> started) {
  Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  ctx.started = started.value_or(k_started);
  if (only_version(args)) {
    out << version_text(args) << "\n";
    return k_exit_ok;
  }
  CLI::App app{"mltunectl: tune Linux GPU training and inference nodes", "mltunectl"};
  app.set_version_flag("--version", [&args] { return version_text(args); });
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--sysroot", ctx.sysroot, "Root of the node's file system (default /)")->type_name("DIR");
  app.add_flag("--json", ctx.json, "Machine-readable JSON output on stdout");
  app.add_flag("--dry-run", ctx.dry_run, "Show what would change; change nothing");
  app.add_flag("-v,--verbose", ctx.verbose, "More detail (repeatable)");
  register_subcommands(app, ctx, args);
  add_global_options_footer(app);

  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0) { // --help, --version
      app.exit(e, out, err);
      return k_exit_ok;
    }
    // A usage error takes the one error path: "mltunectl: error: ...", a
    // JSON error document with --json (parsing may not have reached it),
    // exit 2.
    ctx.json = ctx.json || std::ranges::find(args, "--json") != args.end();
    ctx.fail(input_error(parse_error_message(e, args)));
    err << "Run '" << help_command(app) << " --help' for usage.\n";
    return ctx.rc;
  } catch (const std::exception &e) {
    err << "mltunectl: internal error: " << e.what() << "\n";
    return k_exit_failed;
  }
  return ctx.rc;
}

} // namespace mltune::cli
