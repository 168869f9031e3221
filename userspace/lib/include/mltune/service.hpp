// The resident switcher: `mltunectl serve` keeps one process on the node
// that runs the transaction commands (switch, off) for `mltunectl`, so a
// switch pays neither a process start nor a parse of the profiles it has
// parsed before, nor a scan of every thread of the node (the thread index
// below follows the proc connector instead).
//
// The protocol (k_service_protocol 2), over a SOCK_SEQPACKET Unix socket
// (service_socket_path(): $MLTUNE_SOCKET or k_service_socket, for the
// service and its clients alike; mode 0600; systemd's mltune-serve.socket or
// `mltunectl serve`), one message each:
//
//   request: "mltunectl\0<version>\0<start>\0<arg>\0<arg>\0...", <version>
//            mltunectl's version and the protocol ("0.1.0/2"), <start> the
//            CLOCK_MONOTONIC nanoseconds at which the client started.  It
//            carries two descriptors of /dev/null only so that a service of
//            protocol 1 (which required the client's stdout and stderr)
//            answers "stale"; the service closes any descriptor that comes.
//   replies: "out <bytes>" and "err <bytes>" (at most k_reply_chunk bytes
//            each), the command's stdout and stderr in the order it wrote
//            them, which the client writes to its own; then one of
//            "rc <exit code>"   the command ran;
//            "stale <version>"  the versions differ: the client runs the
//                               command itself; the service exits, so the
//                               next connection starts the installed one;
//            "error <message>"  not run (a caller without CAP_SYS_ADMIN in
//                               the initial user namespace, a malformed
//                               request, a service that stops first).
//
// The service never writes to a client's descriptors and never waits for a
// client: it captures a command's output and sends the replies without
// blocking; a client that does not send its request, or take its replies,
// within 5 s is dropped.  Commands run one at a time in the order the
// connections were accepted; a client gone before its turn (its connection
// hung up) has its command cancelled, not run.  A client that finds no
// service runs the command itself; one whose service ends before the exit
// code reports it (exit 1) and does not run it again.
#pragma once

#include "mltune/caches.hpp"
#include "mltune/result.hpp"
#include "mltune/sched.hpp"
#include "mltune/sysroot.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

inline constexpr std::string_view k_service_socket = "/run/mltune/mltunectl.sock";
inline constexpr int k_service_protocol = 2;
// The largest payload of one "out" or "err" reply.
inline constexpr size_t k_reply_chunk = size_t{16} * 1024;

// The socket of the service and of its clients: $MLTUNE_SOCKET when set (an
// absolute path; anything else is an input error naming it), else
// k_service_socket.
Result<std::string> service_socket_path();

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
// Sends `r`.
Status service_send(const ServiceConnection &c, const ServiceRequest &r);

// The end of the replies.
struct ServiceReply {
  enum class Kind { rc, stale, error, gone } kind = Kind::gone; // gone: closed before the end
  int rc = 0;
  std::string detail; // stale: the service's version; error: why
};
// Receives the replies, writing the command's output to `out_fd` and
// `err_fd` as it comes, until the end.
Result<ServiceReply> service_wait(const ServiceConnection &c, int out_fd, int err_fd);

// Whether the calling thread holds CAP_SYS_ADMIN in its effective set.
bool holds_cap_sys_admin();
// The service's rule for a peer, the kernel module's (capable(CAP_SYS_ADMIN)):
// the process at the other end of `conn_fd` holds CAP_SYS_ADMIN, effective,
// in the initial user namespace.  Read race-free: the peer's pidfd
// (SO_PEERPIDFD, Linux 6.5), else SO_PEERCRED's pid and pidfd_open(), and
// the process checked to be alive after its /proc files were read, so the
// pid was not reused meanwhile.  An input error says why not.
enum class PeerLookup {
  pidfd,    // SO_PEERPIDFD where the kernel has it, else as peercred
  peercred, // SO_PEERCRED and pidfd_open() (kernels before 6.5; tests)
};
Status authorize_peer(int conn_fd, PeerLookup how = PeerLookup::pidfd);

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
  // The path the socket is bound to (getsockname), also for one systemd passed.
  [[nodiscard]] std::string address() const;

private:
  ServiceListener(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_; // unlinked on destruction when bound here
};

// What serve_requests() does with a request, and how it reports.
struct ServiceOptions {
  // Requests of another version are answered "stale", and the service ends.
  std::string version;
  // Runs one command line (the request of an authorized client) with its
  // output on `out` and `err`; returns the exit code.
  std::function<int(const ServiceRequest &, std::ostream &out, std::ostream &err)> run;
  // One line per command, client dropped or refused (the journal).
  std::function<void(const std::string &)> log;
  // Polled beside the sockets (the thread index); on_watch() when readable.
  int watch_fd = -1;
  std::function<void()> on_watch;
  // Checked with SIGTERM and SIGINT blocked, which are let in only while the
  // service waits (ppoll): true ends the service.
  std::function<bool()> stop_requested;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds reply_timeout{5000};
};

// Serves the connections of `listener` until stop_requested() or a client of
// another version; each command's output goes back in replies.  An error
// only when the service cannot go on (poll fails).
Status serve_requests(const ServiceListener &listener, const ServiceOptions &options);

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

// The index that proc::task_names() reads while `caches` are current
// (mltune/caches.hpp; nullptr: none).  The caller keeps it alive as long
// as the caches or until it installs nullptr.
void install_thread_index(Caches &caches, ThreadIndex *index);

} // namespace mltune
