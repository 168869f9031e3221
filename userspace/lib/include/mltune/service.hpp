// The resident switcher: `mltunectl serve` keeps one process on the node
// that runs the transaction commands (switch, off) for `mltunectl`, so a
// switch pays neither a process start nor a parse of the profiles it has
// parsed before, nor a scan of every thread of the node (the thread index
// below follows the proc connector instead).
//
// The protocol, over a SOCK_SEQPACKET Unix socket (k_service_socket, mode
// 0600, root only; systemd's mltune-serve.socket or `mltunectl serve`):
//
//   request: "mltunectl\0<version>\0<start>\0<arg>\0<arg>\0..." with the
//            client's stdout and stderr as SCM_RIGHTS, <start> the
//            CLOCK_MONOTONIC nanoseconds at which the client started;
//   reply:   "rc <exit code>" when the command ran (its output went to the
//            client's own stdout and stderr), or "stale <version>" when the
//            versions differ (the client runs the command itself; the
//            service exits, so the next connection starts the installed one).
//
// A client that finds no service runs the command itself; one whose service
// ends before the reply reports it (exit 1) and does not run it again.
#pragma once

#include "mltune/result.hpp"
#include "mltune/sched.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

inline constexpr std::string_view k_service_socket = "/run/mltune/mltunectl.sock";

struct ServiceRequest {
  std::string version;
  int64_t started_ns = 0; // CLOCK_MONOTONIC at the client's start
  std::vector<std::string> args;
};

// The payload of a request (without the descriptors), and back; decode
// refuses anything else with a message that says what.
std::string encode_request(const ServiceRequest &r);
Result<ServiceRequest> decode_request(std::string_view payload);

// A connected client socket, owned; closes on destruction.
class ServiceConnection {
public:
  ServiceConnection() = default;
  explicit ServiceConnection(int fd) : fd_(fd) {}
  ServiceConnection(ServiceConnection &&o) noexcept;
  ServiceConnection &operator=(ServiceConnection &&o) noexcept;
  ServiceConnection(const ServiceConnection &) = delete;
  ServiceConnection &operator=(const ServiceConnection &) = delete;
  ~ServiceConnection();
  [[nodiscard]] int fd() const { return fd_; }

private:
  int fd_ = -1;
};

// Connects to the service at `path`.  An empty Result value (fd -1): no
// service listens there (no socket, or connection refused); the caller runs
// the command itself.
Result<ServiceConnection> service_connect(std::string_view path);
// Sends `r` with `out_fd` and `err_fd` attached.
Status service_send(const ServiceConnection &c, const ServiceRequest &r, int out_fd, int err_fd);

// The reply a client waits for.
struct ServiceReply {
  enum class Kind { rc, stale, gone } kind = Kind::gone; // gone: closed without a reply
  int rc = 0;
  std::string detail;
};
Result<ServiceReply> service_wait(const ServiceConnection &c);

// The listening socket of `mltunectl serve`: the one systemd passes
// (LISTEN_FDS/LISTEN_PID, socket activation) or one bound at `path` (mode
// 0600; a stale socket file there is replaced, a live service refused).
class ServiceListener {
public:
  static Result<ServiceListener> open(std::string_view path);
  ServiceListener(ServiceListener &&o) noexcept;
  ServiceListener &operator=(ServiceListener &&o) = delete;
  ServiceListener(const ServiceListener &) = delete;
  ServiceListener &operator=(const ServiceListener &) = delete;
  ~ServiceListener();
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool activated() const { return path_.empty(); }

  // One accepted request: the peer's credentials are checked (root, or the
  // service's own user) and its descriptors received.  Errors are per
  // connection; the listener stays usable.
  struct Accepted {
    ServiceConnection conn;
    ServiceRequest request;
    int out_fd = -1; // owned by the caller from here on
    int err_fd = -1;
    int peer_pid = 0;
  };
  Result<Accepted> accept() const;

private:
  ServiceListener(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_; // unlinked on destruction when bound here
};

Status service_reply(const ServiceConnection &c, const ServiceReply &r);

// The node's threads and their names, kept current from the proc connector
// (fork, exec, comm and exit events) after one scan of /proc, for a process
// that lives across many switches (mltunectl serve).  While one is installed
// (install_thread_index), every scan of the node's thread names
// (proc::task_names) reads it instead of /proc.  Names of threads whose
// event did not carry one (fork, exec) are read when next asked for; lost
// events (ENOBUFS) make the next read a full scan.
class ThreadIndex {
public:
  struct Thread {
    int pid = 0;
    bool named = false; // false: comm is read when asked for
    std::string comm;
  };
  // `events` must be subscribed already: what happens during the scan of
  // <root>/proc then comes as events after it.
  ThreadIndex(std::unique_ptr<ProcEventSource> events, Sysroot root);
  // The live proc connector (CAP_NET_ADMIN) and /proc.
  static Result<std::unique_ptr<ThreadIndex>> open();

  // The descriptor to poll for events (-1: none to poll); drain() handles
  // what is queued without waiting.
  [[nodiscard]] int fd() const { return events_->fd(); }
  Status drain();
  // Every thread (tid -> pid and name) as of the events queued now.
  Result<std::vector<std::pair<int, Thread>>> threads();
  [[nodiscard]] const Sysroot &root() const { return root_; }
  // How the index was kept: events handled, names read, full scans.
  struct Counts {
    uint64_t events = 0, names_read = 0, scans = 0;
  };
  [[nodiscard]] Counts counts() const { return counts_; }

private:
  void scan();
  void handle(const ProcEvent &ev);

  std::unique_ptr<ProcEventSource> events_;
  Sysroot root_;
  std::map<int, Thread> threads_;
  bool lost_ = false;
  Counts counts_;
};

// The index that proc::task_names() reads while it is set (nullptr: none).
void install_thread_index(ThreadIndex *index);
ThreadIndex *installed_thread_index();

} // namespace mltune
