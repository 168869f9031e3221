// mltunectl serve: the resident switcher (mltune/service.hpp), and the
// client side that hands `switch` and `off` to it.
#include "cli.hpp"

#include "mltune/nic.hpp"
#include "mltune/service.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <ext/stdio_filebuf.h>
#include <ostream>
#include <poll.h>
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

// Runs one request with its output on the client's descriptors; returns the exit code.
int run_request(const ServiceRequest &req, int out_fd, int err_fd) {
  // The buffers own (and close) the descriptors.
  __gnu_cxx::stdio_filebuf<char> ob(out_fd, std::ios::out, 8192);
  __gnu_cxx::stdio_filebuf<char> eb(err_fd, std::ios::out, 1024);
  std::ostream out(&ob);
  std::ostream err(&eb);
  const std::chrono::steady_clock::time_point started{std::chrono::nanoseconds(req.started_ns)};
  const int rc = run(req.args, out, err, started);
  out.flush();
  err.flush();
  return rc;
}

// A command line the service does not run (only a hand-made client sends
// one): said on the client's stderr, exit 2.
int refuse_request(const ServiceRequest &req, int out_fd, int err_fd) {
  ::close(out_fd);
  __gnu_cxx::stdio_filebuf<char> eb(err_fd, std::ios::out, 1024);
  std::ostream err(&eb);
  err << "mltunectl: error: the mltunectl service runs `switch NAME` and `off` only, not '";
  for (size_t i = 0; i < req.args.size(); ++i) {
    err << (i == 0 ? "" : " ") << req.args[i];
  }
  err << "'\n" << std::flush;
  return k_exit_usage;
}

std::string describe(const std::vector<std::string> &args) {
  std::string s;
  for (const auto &a : args) {
    s += (s.empty() ? "" : " ") + a;
  }
  return s;
}

void run_serve(Context &ctx, const std::string &path) {
  if (!ctx.root().is_live()) {
    return ctx.fail(input_error("serve runs commands for the live node: --sysroot " + ctx.sysroot + " is refused"));
  }
  auto listener = ServiceListener::open(path);
  if (!listener) {
    return ctx.fail(listener.error());
  }
  std::signal(SIGPIPE, SIG_IGN); // a client that went away: its writes fail, the service goes on
  catch_stop_signals();

  auto log = [&ctx](const std::string &line) { *ctx.err << "mltunectl serve: " << line << "\n" << std::flush; };
  // The node's threads, followed from the proc connector: no /proc scan per switch.
  std::unique_ptr<ThreadIndex> index;
  if (auto ix = ThreadIndex::open(); ix) {
    index = std::move(*ix);
    install_thread_index(index.get());
  } else {
    log("thread names are read from /proc at each switch: " + ix.error().message);
  }
  enable_profile_cache();
  keep_netlink_transport();
  keep_knob_files();
  log("serving " + (listener->activated() ? std::string("the socket systemd passed") : path) + " (version " +
      MLTUNE_VERSION + ", pid " + std::to_string(::getpid()) + ")");

  bool stale = false;
  while (!stop_requested() && !stale) {
    std::array<pollfd, 2> pfd{{{listener->fd(), POLLIN, 0}, {index ? index->fd() : -1, POLLIN, 0}}};
    if (::poll(pfd.data(), pfd.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ctx.fail(sys_error("serve: poll", errno));
    }
    if ((pfd[1].revents & POLLIN) != 0) {
      if (auto st = index->drain(); !st) {
        log("thread index: " + st.error().message + "; the next switch scans /proc");
      }
    }
    if ((pfd[0].revents & POLLIN) == 0) {
      continue;
    }
    auto a = listener->accept();
    if (!a) {
      log(a.error().message);
      continue;
    }
    if (a->request.version != MLTUNE_VERSION) {
      // An upgrade replaced the binary: the client runs the command itself,
      // and this service ends so that the next connection starts the new one.
      ::close(a->out_fd);
      ::close(a->err_fd);
      (void)service_reply(a->conn, {ServiceReply::Kind::stale, 0, MLTUNE_VERSION});
      log("client of version " + a->request.version + ", this is " + MLTUNE_VERSION + ": ending");
      stale = true;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    // What the client sends is what it would have run itself; the service
    // still runs nothing but the command lines it is for.
    const int rc = forwardable(a->request.args) ? run_request(a->request, a->out_fd, a->err_fd)
                                                : refuse_request(a->request, a->out_fd, a->err_fd);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
    if (auto st = service_reply(a->conn, {ServiceReply::Kind::rc, rc, {}}); !st) {
      log("pid " + std::to_string(a->peer_pid) + ": " + st.error().message);
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.2f", took.count());
    log("pid " + std::to_string(a->peer_pid) + ": " + describe(a->request.args) + ": exit " + std::to_string(rc) +
        " (" + ms + " ms)");
  }
  install_thread_index(nullptr);
  log("stopped");
}

} // namespace

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
  if (::geteuid() != 0 || std::getenv("MLTUNE_NO_SERVICE") != nullptr || std::getenv("MLTUNE_FAIL_STEP") != nullptr ||
      !forwardable(args)) {
    return std::nullopt;
  }
  auto conn = service_connect(socket);
  if (!conn || conn->fd() < 0) {
    return std::nullopt; // no service: this process runs the command
  }
  const ServiceRequest req{MLTUNE_VERSION, monotonic_ns(process_started()), args};
  if (!service_send(*conn, req, STDOUT_FILENO, STDERR_FILENO)) {
    return std::nullopt; // not sent, so not run
  }
  auto rep = service_wait(*conn);
  if (!rep) {
    err << "mltunectl: error: " << rep.error().message << "\n";
    return k_exit_failed;
  }
  switch (rep->kind) {
  case ServiceReply::Kind::rc: return rep->rc;
  case ServiceReply::Kind::stale: return std::nullopt;
  case ServiceReply::Kind::gone: break;
  }
  err << "mltunectl: error: the mltunectl service (" << socket
      << ") ended before it answered; `mltunectl active` shows the state of the node\n";
  return k_exit_failed;
}

void register_serve(CLI::App &app, Context &ctx) {
  auto path = std::make_shared<std::string>(k_service_socket);
  auto *cmd = app.add_subcommand("serve", "Stay resident and run `switch` and `off` for mltunectl over a Unix socket "
                                          "(the mltune-serve.socket unit): no process start, parse or thread scan "
                                          "per switch");
  cmd->add_option("--socket", *path, "The socket to listen on when systemd passes none")->capture_default_str();
  cmd->callback([&ctx, path] { run_serve(ctx, *path); });
}

} // namespace mltune::cli
