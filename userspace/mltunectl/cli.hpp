// mltunectl front end.  Each subcommand lives in its own cmd_<name>.cpp and
// registers itself with register_<name>(); adding one means adding a file and
// one line in cli.cpp.
#pragma once

#include "mltune/cpu_plan.hpp"
#include "mltune/nic.hpp"
#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/service.hpp"
#include "mltune/sysroot.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mltune {
struct NoiseReport;
struct DriftWrite;
struct ProveReport;
class CpuSet;
} // namespace mltune

namespace mltune {
struct DomainState;
}

namespace mltune::cli {

// Exit codes (documented in mltunectl(8)).
inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_failed = 1; // node differs / operation failed
inline constexpr int k_exit_usage = 2;  // usage or input error
// exec: the command could not be run (as env(1) and shells report it).
inline constexpr int k_exit_cannot_run = 126; // found, not executable
inline constexpr int k_exit_not_found = 127;  // not found

struct Context {
  // Global options.
  std::string sysroot = "/";
  bool json = false;
  bool dry_run = false;
  int verbose = 0;

  std::ostream *out = nullptr;
  std::ostream *err = nullptr;
  int rc = k_exit_ok;
  // When the command started: this process's start, or the client's for a
  // command that `mltunectl serve` runs (the -v times count from it).
  std::chrono::steady_clock::time_point started;

  [[nodiscard]] Sysroot root() const { return Sysroot(sysroot); }
  // Prints the error (and a JSON error object with --json); sets rc.
  void fail(const Error &e);
  void emit(const nlohmann::json &j) const;
  // The default profile: the profile of the node configuration
  // (<sysroot>/etc/mltune/mltune.toml) when it names one and loads, else "training".
  [[nodiscard]] std::string default_profile() const;
  // With -v (and no --json), a printer of each transaction phase and the
  // time since the command started ("mltunectl: 1.234 ms nic: apply"), for
  // TransactionOptions::progress; empty otherwise.
  [[nodiscard]] std::function<void(std::string_view, std::string_view)> step_progress() const;
};

// The state of each domain (off, active, switch baseline): as JSON
// [{"domain", "state", "detail"}], and as aligned text lines.
nlohmann::json domains_json(const std::vector<DomainState> &ds);
void print_domains(Context &ctx, const std::vector<DomainState> &ds);

// --field NAME, for commands whose --json document has fields that scripts
// read one at a time (active, config show): the document's top-level field
// NAME alone, so that no script parses JSON with sed.  Without --json as
// text: a string as it is, null as an empty line, true/false, a number;
// with --json as JSON ("training", null).  `names`: the fields offered.
void add_field_option(CLI::App *cmd, std::string &field, const std::vector<std::string> &names);
// Prints `doc`'s field `field` as above and returns true; false (nothing
// printed) when `field` is empty.
bool emit_field(const Context &ctx, const nlohmann::json &doc, const std::string &field);

void register_profile(CLI::App &app, Context &ctx);
void register_audit(CLI::App &app, Context &ctx);
void register_verify(CLI::App &app, Context &ctx); // verify and diff
void register_switch(CLI::App &app, Context &ctx);
void register_persist(CLI::App &app, Context &ctx);
void register_nic(CLI::App &app, Context &ctx); // nic show|diff|apply
// The NIC changes of a plan (applied=false) or of an apply, as `nic apply` prints them.
void print_nic_changes(Context &ctx, const NicReport &r, bool applied);
void register_topology(CLI::App &app, Context &ctx);
void register_plan(CLI::App &app, Context &ctx);
// --gpus-per-rank and --feeder-cores-per-gpu, for every command that makes a plan.
void add_plan_options(CLI::App *cmd, PlanOptions &opts);
void register_exec(CLI::App &app, Context &ctx); // exec --gpu N [--rank R] -- CMD
void register_boot(CLI::App &app, Context &ctx);
void register_sched(CLI::App &app, Context &ctx);  // sched list|apply|watch|reset, and watch
void register_feeder(CLI::App &app, Context &ctx); // feeder status|on|off|run
void register_pool(CLI::App &app, Context &ctx);   // pool status|reserve|release|quota
void register_config(CLI::App &app, Context &ctx); // config show|check|apply|revert|watcher
void register_noise(CLI::App &app, Context &ctx);  // noise
void register_drift(CLI::App &app, Context &ctx);  // drift start|stop|status|show
void register_node(CLI::App &app, Context &ctx);   // off, active (status), recommend, follow, metrics
void register_serve(CLI::App &app, Context &ctx);  // serve
void register_prove(CLI::App &app, Context &ctx);  // prove
// A proof's or a gated switch's report (`what`: "prove" or "gate"); sets rc
// to 1 when a gated figure failed (gate) or a rollback failed.
void print_prove(Context &ctx, const ProveReport &r, std::string_view what);
nlohmann::json prove_json(const ProveReport &r);
// The measuring rounds on stderr (not with --json unless -v).
std::function<void(std::string_view, unsigned, unsigned)> prove_progress(Context &ctx);

// The CPUs `noise` watches: "" every online CPU (an empty set), "feeder" the
// active feeder cores (else the plan's), or a cpulist or plan role.
Result<CpuSet> noise_cpus(const Sysroot &root, const std::string &spec);
// A noise report as `noise --json` prints it (feeder status and audit too).
nlohmann::json noise_json(const NoiseReport &r);
// One drift record as `drift show --json` prints it (verify's changed_by).
nlohmann::json drift_write_json(const DriftWrite &w);

// For the long-running commands (watch, follow --listen, serve): SIGTERM
// and SIGINT set a flag instead of ending the process, so that the command
// finishes what it is doing and stops cleanly.  catch_stop_signals() clears
// the flag and installs the handler; stop_requested() reads the flag.
void catch_stop_signals();
bool stop_requested();

// An option check: the value is a cpulist as parse_cpuset() accepts it
// ("2-3,6-7"; not "abc", not "5-2"), else a usage error naming it.
CLI::Validator cpulist_check();
// Refuses an empty value (an empty --cpus would otherwise mean "all");
// `hint` says what to do instead.
CLI::Validator non_empty_check(std::string hint);

// Runs mltunectl with argv (without the program name); returns the exit code.
// `started`: when the command started (default: this process's start).
int run(const std::vector<std::string> &args, std::ostream &out, std::ostream &err,
        std::optional<std::chrono::steady_clock::time_point> started = std::nullopt);
// When this process started (static initialisation, before main()).
std::chrono::steady_clock::time_point process_started();

// The version a client sends and the service expects: mltunectl's and the
// protocol's ("0.1.0/2", mltune/service.hpp).
std::string service_version();
// Whether `mltunectl serve` may run this command line: `switch NAME` (a
// profile name, not a file path) and `off`, with --json, --dry-run and -v;
// --sysroot, --help, a file path or any other command run in the caller.
bool forwardable(const std::vector<std::string> &args);
// Runs the command line in the service at `socket` (empty: the one
// service_socket_path() names, $MLTUNE_SOCKET or the default) when it is
// forwardable, the caller holds CAP_SYS_ADMIN and a service listens there
// (and MLTUNE_NO_SERVICE, MLTUNE_FAIL_STEP and MLTUNE_STOP_AT are unset); the output it
// sends back goes to this process's stdout and stderr.  The exit code, or
// nullopt: run it here.
std::optional<int> forward(const std::vector<std::string> &args, std::ostream &err, std::string_view socket = {});

} // namespace mltune::cli
