// The loop of the resident switcher (serve_requests, mltune/service.hpp):
// one thread, one ppoll over the listener and every client, nothing that
// waits for a client.  A client is reading (its request not yet in),
// queued (its request in, its turn not yet come) or replying (its command
// ran, or was refused; what is left of its replies is being sent).
#include "mltune/service.hpp"

#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <ostream>
#include <poll.h>
#include <streambuf>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mltune {

namespace {

using Clock = std::chrono::steady_clock;

// A request is a command line: far below this.
constexpr size_t k_max_request = size_t{64} * 1024;
// The output of one command kept for its client: a switch writes a few
// kilobytes, -vv some more; what goes beyond is cut, saying so.
constexpr size_t k_max_output = size_t{16} * 1024 * 1024;
// Connections served at once; more wait in the listen backlog.
constexpr size_t k_max_clients = 256;

std::string describe(const std::vector<std::string> &args) {
  std::string s;
  for (const auto &a : args) {
    s += (s.empty() ? "" : " ") + a;
  }
  return s;
}

std::string seconds(std::chrono::milliseconds d) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", static_cast<double>(d.count()) / 1000.0);
  return b;
}

// The replies of one command, built while it runs: its stdout and stderr in
// the order written, in messages of at most k_reply_chunk bytes.
class ReplyFrames {
public:
  void add(std::string_view kind, const char *p, size_t n) {
    if (bytes_ + n > k_max_output) {
      n = k_max_output - bytes_;
      cut_ = true;
    }
    while (n > 0) {
      if (frames_.empty() || !frames_.back().starts_with(kind) ||
          frames_.back().size() >= kind.size() + k_reply_chunk) {
        frames_.emplace_back(kind);
      }
      std::string &f = frames_.back();
      const size_t take = std::min(n, kind.size() + k_reply_chunk - f.size());
      f.append(p, take);
      p += take;
      n -= take;
      bytes_ += take;
    }
  }
  // The last message; returns them all.
  std::deque<std::string> end(std::string last) {
    if (cut_) {
      frames_.emplace_back("err mltunectl serve: output cut at " + std::to_string(k_max_output) + " bytes\n");
    }
    frames_.push_back(std::move(last));
    return std::move(frames_);
  }

private:
  std::deque<std::string> frames_;
  size_t bytes_ = 0;
  bool cut_ = false;
};

// An unbuffered stream buffer that adds what is written to the replies, so
// stdout and stderr keep their order.
class CaptureBuf final : public std::streambuf {
public:
  CaptureBuf(ReplyFrames &r, std::string_view kind) : r_(r), kind_(kind) {}

protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      const char ch = traits_type::to_char_type(c);
      r_.add(kind_, &ch, 1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    r_.add(kind_, s, static_cast<size_t>(n));
    return n;
  }

private:
  ReplyFrames &r_;
  std::string_view kind_;
};

struct Client {
  enum class State { reading, queued, replying };
  ServiceConnection conn;
  int pid = 0; // SO_PEERCRED's, for the log
  State state = State::reading;
  ServiceRequest request;
  Clock::time_point deadline;     // reading: for the request; replying: for the replies
  std::deque<std::string> frames; // replying: what is left to send
  std::string what;               // replying: the command, for the log
  bool done = false;              // to be closed
  [[nodiscard]] std::string who() const { return "pid " + std::to_string(pid); }
};

// Whether the client's end of the connection is closed: it exited or was
// killed (a request runs only while its client is still there).
bool hung_up(const Client &c) {
  pollfd p{c.conn.fd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

class Server {
public:
  Server(const ServiceListener &l, const ServiceOptions &o) : listener_(l), o_(o) {}
  Status run();

private:
  void log(const std::string &line) const {
    if (o_.log) {
      o_.log(line);
    }
  }
  void accept_clients();
  void read_request(Client &c);
  void reply(Client &c, std::deque<std::string> frames, std::string what);
  void send_replies(Client &c);
  void run_turns();
  void run_command(Client &c);
  void expire(Clock::time_point now);
  void stop();
  [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;

  const ServiceListener &listener_;
  const ServiceOptions &o_;
  std::deque<Client> clients_; // in the order accepted
  bool ending_ = false;        // a client of another version came: serve the ones here, then end
  Clock::time_point accept_after_;
};

void Server::accept_clients() {
  while (clients_.size() < k_max_clients) {
    pollfd p{listener_.fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0 || (p.revents & POLLIN) == 0) {
      return;
    }
    UniqueFd fd(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED) {
        continue;
      }
      if (e != EAGAIN && e != EWOULDBLOCK) {
        // Out of descriptors or memory: the connections wait in the
        // backlog; try again in a while rather than spin.
        log("accept: " + std::string(std::strerror(e)) + ": next try in 100 ms");
        accept_after_ = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    Client c;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c.pid = cred.pid;
    }
    c.conn = ServiceConnection(fd.release());
    c.deadline = Clock::now() + o_.request_timeout;
    clients_.push_back(std::move(c));
  }
}

void Server::read_request(Client &c) {
  std::string buf(k_max_request + 1, '\0');
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(4 * sizeof(int))> ctl{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl.data();
  msg.msg_controllen = ctl.size();
  ssize_t n = 0;
  do {
    n = ::recvmsg(c.conn.fd(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return;
  }
  // Descriptors are not part of the protocol (a client of protocol 1 sends
  // its stdout and stderr, a client of 2 /dev/null): closed unused.
  if (n > 0) {
    for (cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int f = -1;
          std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
          UniqueFd(f).reset();
        }
      }
    }
  }
  if (n < 0) {
    log(c.who() + ": receive its request: " + std::strerror(errno) + ": dropped");
    c.done = true;
    return;
  }
  if (n == 0) {
    // A probe (another `mltunectl serve` checking for a live service) or a
    // client that went away before sending.
    log(c.who() + ": closed the connection without a request");
    c.done = true;
    return;
  }
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    log(c.who() + ": a request over " + std::to_string(k_max_request) + " bytes: refused");
    reply(c, {"error the request is over " + std::to_string(k_max_request) + " bytes"}, "a request");
    return;
  }
  auto req = decode_request(std::string_view(buf.data(), static_cast<size_t>(n)));
  if (!req) {
    log(c.who() + ": " + req.error().message + ": refused");
    reply(c, {"error " + req.error().message}, "a request");
    return;
  }
  if (hung_up(c)) {
    log(c.who() + ": " + describe(req->args) + ": its client went away before its turn: not run");
    c.done = true;
    return;
  }
  if (auto ok = authorize_peer(c.conn.fd()); !ok) {
    log(c.who() + ": " + describe(req->args) + ": " + ok.error().message);
    reply(c, {"error the mltunectl service " + ok.error().message}, describe(req->args));
    return;
  }
  c.request = std::move(*req);
  c.state = Client::State::queued;
  size_t ahead = 0;
  for (const auto &o : clients_) {
    if (&o == &c) {
      break;
    }
    ahead += o.done || o.state == Client::State::replying ? 0 : 1;
  }
  if (ahead > 0) {
    log(c.who() + ": " + describe(c.request.args) + ": queued behind " + std::to_string(ahead) + " connection" +
        (ahead == 1 ? "" : "s"));
  }
}

void Server::reply(Client &c, std::deque<std::string> frames, std::string what) {
  c.state = Client::State::replying;
  c.frames = std::move(frames);
  c.what = std::move(what);
  c.deadline = Clock::now() + o_.reply_timeout;
  send_replies(c);
}

void Server::send_replies(Client &c) {
  while (!c.frames.empty()) {
    const std::string &f = c.frames.front();
    const ssize_t n = ::send(c.conn.fd(), f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (std::cmp_equal(n, f.size())) {
      c.frames.pop_front();
      continue;
    }
    const int e = n < 0 ? errno : EMSGSIZE;
    if (e == EINTR) {
      continue;
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      return; // the rest when the socket has room (POLLOUT)
    }
    log(c.who() + ": the replies of " + c.what + ": " + std::strerror(e) + ": dropped");
    c.done = true;
    return;
  }
  c.done = true; // all sent: the client reads them after the close
}

void Server::run_command(Client &c) {
  ReplyFrames frames;
  CaptureBuf ob(frames, "out ");
  CaptureBuf eb(frames, "err ");
  std::ostream out(&ob);
  std::ostream err(&eb);
  const auto t0 = Clock::now();
  const int rc = o_.run(c.request, out, err);
  out.flush();
  err.flush();
  const std::chrono::duration<double, std::milli> took = Clock::now() - t0;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.2f", took.count());
  const std::string what = describe(c.request.args);
  log(c.who() + ": " + what + ": exit " + std::to_string(rc) + " (" + ms + " ms)");
  reply(c, frames.end("rc " + std::to_string(rc)), what);
}

// Runs the commands whose turn it is: in the order the connections were
// accepted, so one still sending its request holds back those behind it.
void Server::run_turns() {
  for (auto &c : clients_) {
    if (c.done || c.state == Client::State::replying) {
      continue;
    }
    if (c.state == Client::State::reading || (o_.stop_requested && o_.stop_requested())) {
      return;
    }
    const std::string what = describe(c.request.args);
    if (hung_up(c)) {
      log(c.who() + ": " + what + ": its client went away before its turn: not run");
      c.done = true;
      continue;
    }
    if (ending_ || c.request.version != o_.version) {
      // An upgrade replaced the binary: the client runs the command itself,
      // and this service ends so that the next connection starts the new one.
      if (!ending_) {
        log("client of version " + c.request.version + ", this is " + o_.version + ": ending");
      }
      ending_ = true;
      reply(c, {"stale " + o_.version}, what);
      continue;
    }
    run_command(c);
  }
}

void Server::expire(Clock::time_point now) {
  for (auto &c : clients_) {
    if (c.done || now < c.deadline) {
      continue;
    }
    if (c.state == Client::State::reading) {
      log(c.who() + ": sent no request within " + seconds(o_.request_timeout) + ": dropped");
      c.done = true;
    } else if (c.state == Client::State::replying) {
      log(c.who() + ": did not take the replies of " + c.what + " within " + seconds(o_.reply_timeout) + ": dropped");
      c.done = true;
    }
  }
}

std::optional<Clock::time_point> Server::next_deadline() const {
  std::optional<Clock::time_point> t;
  for (const auto &c : clients_) {
    if (!c.done && c.state != Client::State::queued && (!t || c.deadline < *t)) {
      t = c.deadline;
    }
  }
  if (accept_after_ > Clock::now() && (!t || accept_after_ < *t)) {
    t = accept_after_;
  }
  return t;
}

// SIGTERM: nothing waits.  Queued clients hear that their command did not
// run; replies are sent as far as the sockets take them now.
void Server::stop() {
  for (auto &c : clients_) {
    if (c.done) {
      continue;
    }
    if (c.state == Client::State::queued) {
      reply(c, {"error the mltunectl service stopped before it ran the command"}, describe(c.request.args));
    } else if (c.state == Client::State::replying) {
      send_replies(c);
    }
    if (!c.done) {
      log(c.who() + (c.state == Client::State::reading ? ": no request yet" : ": the replies of " + c.what) +
          ": dropped: the service stops");
    }
  }
  clients_.clear();
}

Status Server::run() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  std::vector<pollfd> pfd;
  while (true) {
    std::erase_if(clients_, [](const Client &c) { return c.done; });
    if (ending_ && clients_.empty()) {
      return {};
    }
    const auto now = Clock::now();
    const bool listen = !ending_ && clients_.size() < k_max_clients && now >= accept_after_;
    pfd.assign({{listen ? listener_.fd() : -1, POLLIN, 0}, {o_.watch_fd, POLLIN, 0}});
    for (const auto &c : clients_) {
      // queued: only a hang-up (POLLRDHUP) matters until its turn
      const int ev = c.state == Client::State::reading  ? POLLIN
                     : c.state == Client::State::queued ? POLLRDHUP
                                                        : POLLOUT;
      pfd.push_back({c.conn.fd(), static_cast<short>(ev), 0});
    }
    timespec ts{};
    const timespec *timeout = nullptr;
    if (const auto t = next_deadline()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(*t - now, Clock::duration{}));
      ts.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
      timeout = &ts;
    }
    // The stop signals come in only while the loop waits: one that comes
    // after the check below ends the wait (EINTR) instead of being missed.
    sigset_t waiting;
    pthread_sigmask(SIG_BLOCK, &stop_signals, &waiting);
    if (o_.stop_requested && o_.stop_requested()) {
      pthread_sigmask(SIG_SETMASK, &waiting, nullptr);
      stop();
      return {};
    }
    const int r = ::ppoll(pfd.data(), pfd.size(), timeout, &waiting);
    const int e = errno;
    pthread_sigmask(SIG_SETMASK, &waiting, nullptr);
    if (r < 0) {
      if (e == EINTR) {
        continue;
      }
      stop();
      return sys_error("serve: poll", e);
    }
    if ((pfd[1].revents & POLLIN) != 0 && o_.on_watch) {
      o_.on_watch();
    }
    // The clients polled, before any accepted now is added.
    for (size_t i = 0; i + 2 < pfd.size(); ++i) {
      Client &c = clients_[i];
      const short rev = pfd[i + 2].revents;
      if (rev == 0) {
        continue;
      }
      switch (c.state) {
      case Client::State::reading: read_request(c); break;
      case Client::State::queued:
        // Its only event: the client hung up (killed, exited) before its turn.
        log(c.who() + ": " + describe(c.request.args) + ": its client went away before its turn: not run");
        c.done = true;
        break;
      case Client::State::replying:
        if ((rev & (POLLHUP | POLLERR)) != 0) {
          log(c.who() + ": went away before it took the replies of " + c.what);
          c.done = true;
        } else {
          send_replies(c);
        }
        break;
      }
    }
    if ((pfd[0].revents & POLLIN) != 0) {
      accept_clients();
    }
    expire(Clock::now());
    run_turns();
  }
}

} // namespace

Status serve_requests(const ServiceListener &listener, const ServiceOptions &options) {
  Server s(listener, options);
  return s.run();
}

} // namespace mltune
