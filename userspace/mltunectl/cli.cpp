#include "cli.hpp"

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

std::string Context::default_profile() const {
  if (auto conf = root().read("/etc/mltune/mltune.conf")) {
    size_t pos = 0;
    while ((pos = conf->find("PROFILE=", pos)) != std::string::npos) {
      if (pos == 0 || (*conf)[pos - 1] == '\n') {
        const size_t b = pos + 8;
        std::string name = normalize_value(conf->substr(b, conf->find('\n', b) - b));
        if (!name.empty()) {
          return name;
        }
      }
      ++pos;
    }
  }
  return "training";
}

int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err) {
  Context ctx;
  ctx.out = &out;
  ctx.err = &err;
  CLI::App app{"mltunectl: tune Linux GPU training and inference nodes", "mltunectl"};
  app.set_version_flag("--version", MLTUNE_VERSION);
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--sysroot", ctx.sysroot, "Root of the node's file system (default /)")->type_name("DIR");
  app.add_flag("--json", ctx.json, "Machine-readable JSON output on stdout");
  app.add_flag("--dry-run", ctx.dry_run, "Show what would change; change nothing");
  app.add_flag("-v,--verbose", ctx.verbose, "More detail (repeatable)");
  register_profile(app, ctx);
  register_audit(app, ctx);
  register_verify(app, ctx);
  register_switch(app, ctx);
  register_persist(app, ctx);
  register_nic(app, ctx);
  register_topology(app, ctx);
  register_plan(app, ctx);
  register_boot(app, ctx);
  register_sched(app, ctx);
  register_feeder(app, ctx);
  register_pool(app, ctx);

  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::ParseError &e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? k_exit_ok : k_exit_usage;
  } catch (const std::exception &e) {
    err << "mltunectl: internal error: " << e.what() << "\n";
    return k_exit_failed;
  }
  return ctx.rc;
}

} // namespace mltune::cli
