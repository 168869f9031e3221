// mltunectl serve: the resident switcher (mltune/service.hpp), and the
// client side that hands `switch` and `off` to it.
#include "cli.hpp"

#include "mltune/caches.hpp"
#include "mltune/service.hpp"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ostream>
#include <unistd.h>

namespace mltune::cli {

namespace {

int64_t monotonic_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool is_verbose_flag(const std::string &a) {
  return a == "-v" || a == "--verbose" ||
         (a.size() > 2 && a[0] == '-' && a.find_first_not_of('v', 1) == std::string::npos);
}

// Runs one request; its output goes back to the client in replies.
int run_request(const ServiceRequest &req, std::ostream &out, std::ostream &err) {
  // What the client sends is what it would have run itself; the service
  // still runs nothing but the command lines it is for (only a hand-made
  // client sends another): said on the client's stderr, exit 2.
  if (!forwardable(req.args)) {
    err << "mltunectl: error: the mltunectl service runs `switch NAME` and `off` only, not '";
    for (size_t i = 0; i < req.args.size(); ++i) {
      err << (i == 0 ? "" : " ") << req.args[i];
    }
    err << "'\n";
    return k_exit_usage;
  }
  const std::chrono::steady_clock::time_point started{std::chrono::nanoseconds(req.started_ns)};
  return run(req.args, out, err, started);
}

void run_serve(Context &ctx) {
  if (!ctx.root().is_live()) {
    return ctx.fail(input_error("serve runs commands for the live node: --sysroot " + ctx.sysroot + " is refused"));
  }
  const auto path = service_socket_path();
  if (!path) {
    return ctx.fail(path.error());
  }
  auto listener = ServiceListener::open(*path);
  if (!listener) {
    return ctx.fail(listener.error());
  }
  std::signal(SIGPIPE, SIG_IGN); // the service writes to no client's descriptor; kept for what it runs
  catch_stop_signals();

  auto log = [&ctx](const std::string &line) { *ctx.err << "mltunectl serve: " << line << "\n" << std::flush; };
  // The clients connect to *path: a socket systemd passes elsewhere would
  // not be used by any (MLTUNE_SOCKET differs from the unit's).
  const std::string bound = listener->address();
  if (listener->activated() && bound != *path) {
    log("warning: systemd passed the socket " + (bound.empty() ? std::string("(unnamed)") : bound) +
        ", but clients connect to " + *path + " (MLTUNE_SOCKET): set the same path in both");
  }
  // The node's threads, followed from the proc connector: no /proc scan per switch.
  std::unique_ptr<ThreadIndex> index;
  // What the requests keep between them (the knob files, parsed profiles,
  // the netlink sockets, the thread index): gone before the index is.
  Caches caches;
  const CachesInUse in_use(caches);
  if (auto ix = ThreadIndex::open(); ix) {
    index = std::move(*ix);
    install_thread_index(caches, index.get());
  } else {
    log("thread names are read from /proc at each switch: " + ix.error().message);
  }
  log("serving " + (listener->activated() ? "the socket systemd passed (" + bound + ")" : *path) + " (version " +
      service_version() + ", pid " + std::to_string(::getpid()) + ")");

  ServiceOptions o;
  o.version = service_version();
  o.run = run_request;
  o.log = log;
  if (index) {
    o.watch_fd = index->fd();
    o.on_watch = [&index, &log] {
      if (auto st = index->drain(); !st) {
        log("thread index: " + st.error().message + "; the next switch scans /proc");
      }
    };
  }
  o.stop_requested = stop_requested;
  const auto st = serve_requests(*listener, o);
  if (!st) {
    return ctx.fail(st.error());
  }
  log("stopped");
}

} // namespace

std::string service_version() {
  return std::string(MLTUNE_VERSION) + "/" + std::to_string(k_service_protocol);
}

bool forwardable(const std::vector<std::string> &args) {
  std::string cmd;
  bool named = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--json" || a == "--dry-run" || is_verbose_flag(a)) {
      continue;
    }
    if (cmd.empty()) {
      if (a != "switch" && a != "off") {
        return false;
      }
      cmd = a;
      continue;
    }
    if (cmd == "switch") {
      if ((a == "-b" || a == "--backend") && i + 1 < args.size()) {
        ++i;
        continue;
      }
      if (a.starts_with("--backend=")) {
        continue;
      }
      // A profile name; a file path is the caller's (its directory, its view).
      if (!named && !a.empty() && !a.starts_with("-") && a.find('/') == std::string::npos && !a.ends_with(".toml")) {
        named = true;
        continue;
      }
    }
    return false;
  }
  return cmd == "off" || named;
}

std::optional<int> forward(const std::vector<std::string> &args, std::ostream &err, std::string_view socket) {
  if (std::getenv("MLTUNE_NO_SERVICE") != nullptr || std::getenv("MLTUNE_FAIL_STEP") != nullptr ||
      std::getenv("MLTUNE_STOP_AT") != nullptr || !forwardable(args)) {
    return std::nullopt;
  }
  std::string path(socket);
  if (path.empty()) {
    auto p = service_socket_path();
    if (!p) {
      err << "mltunectl: error: " << p.error().message << "\n";
      return k_exit_usage;
    }
    path = std::move(*p);
  }
  // The service runs commands for callers the kernel module would let
  // switch (and checks that itself); any other runs them here, with what
  // it may do.
  if (!holds_cap_sys_admin()) {
    return std::nullopt;
  }
  auto conn = service_connect(path);
  if (!conn || conn->fd() < 0) {
    return std::nullopt; // no service: this process runs the command
  }
  const ServiceRequest req{service_version(), monotonic_ns(process_started()), args};
  if (!service_send(*conn, req)) {
    return std::nullopt; // not sent, so not run
  }
  auto rep = service_wait(*conn, STDOUT_FILENO, STDERR_FILENO);
  if (!rep) {
    err << "mltunectl: error: " << rep.error().message << "\n";
    return k_exit_failed;
  }
  switch (rep->kind) {
  case ServiceReply::Kind::rc: return rep->rc;
  case ServiceReply::Kind::stale: return std::nullopt;
  case ServiceReply::Kind::error: err << "mltunectl: error: " << rep->detail << "\n"; return k_exit_failed;
  case ServiceReply::Kind::gone: break;
  }
  err << "mltunectl: error: the mltunectl service (" << path
      << ") closed the connection before the exit code came (it ended, or dropped this client for not taking its "
         "replies); `mltunectl active` shows the state of the node\n";
  return k_exit_failed;
}

void register_serve(CLI::App &app, Context &ctx) {
  auto *cmd = app.add_subcommand("serve", "Stay resident and run `switch` and `off` for mltunectl over a Unix socket "
                                          "(the mltune-serve.socket unit; MLTUNE_SOCKET names another for the "
                                          "service and its clients): no process start, parse or thread scan per "
                                          "switch");
  cmd->callback([&ctx] { run_serve(ctx); });
}

} // namespace mltune::cli
