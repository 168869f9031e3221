// The socket of the resident switcher (mltune/service.hpp): the request
// format, the client's connect/send/wait and the service's listener, with
// the stdout and stderr of the client passed as SCM_RIGHTS.
#include "mltune/service.hpp"

#include "base/unique_fd.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

namespace mltune {

namespace {

constexpr std::string_view k_magic = "mltunectl";
// A request is a command line: far below this.
constexpr size_t k_max_request = size_t{64} * 1024;
constexpr size_t k_max_args = 256;
constexpr time_t k_request_timeout_s = 5;

Result<sockaddr_un> unix_address(std::string_view path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    return input_error("service socket path '" + std::string(path) + "': empty or longer than " +
                       std::to_string(sizeof(sa.sun_path) - 1) + " bytes");
  }
  std::memcpy(sa.sun_path, path.data(), path.size());
  return sa;
}

} // namespace

std::string encode_request(const ServiceRequest &r) {
  std::string s(k_magic);
  s.push_back('\0');
  s += r.version;
  s.push_back('\0');
  s += std::to_string(r.started_ns);
  for (const auto &a : r.args) {
    s.push_back('\0');
    s += a;
  }
  return s;
}

Result<ServiceRequest> decode_request(std::string_view payload) {
  if (payload.size() > k_max_request) {
    return input_error("request of " + std::to_string(payload.size()) + " bytes (at most " +
                       std::to_string(k_max_request) + ")");
  }
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (true) {
    const size_t nul = payload.find('\0', at);
    parts.push_back(payload.substr(at, nul == std::string_view::npos ? std::string_view::npos : nul - at));
    if (nul == std::string_view::npos) {
      break;
    }
    at = nul + 1;
  }
  if (parts.size() < 3 || parts[0] != k_magic) {
    return input_error("not an mltunectl request");
  }
  if (parts.size() - 3 > k_max_args) {
    return input_error("request with " + std::to_string(parts.size() - 3) + " arguments (at most " +
                       std::to_string(k_max_args) + ")");
  }
  ServiceRequest r;
  r.version = std::string(parts[1]);
  const auto st = parts[2];
  if (auto [p, ec] = std::from_chars(st.data(), st.data() + st.size(), r.started_ns);
      ec != std::errc() || p != st.data() + st.size() || r.started_ns < 0) {
    return input_error("request start time '" + std::string(st) + "' is not a number");
  }
  for (size_t i = 3; i < parts.size(); ++i) {
    r.args.emplace_back(parts[i]);
  }
  return r;
}

ServiceConnection::ServiceConnection(ServiceConnection &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

ServiceConnection &ServiceConnection::operator=(ServiceConnection &&o) noexcept {
  if (this != &o) {
    UniqueFd(fd_).reset();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

ServiceConnection::~ServiceConnection() {
  UniqueFd(fd_).reset();
}

Result<ServiceConnection> service_connect(std::string_view path) {
  auto sa = unix_address(path);
  if (!sa) {
    return sa.error();
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) {
    return sys_error("service: socket", errno);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr *>(&*sa), sizeof(*sa)) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) {
      return ServiceConnection();
    }
    return sys_error("service: connect " + std::string(path), e);
  }
  return ServiceConnection(fd.release());
}

Status service_send(const ServiceConnection &c, const ServiceRequest &r, int out_fd, int err_fd) {
  const std::string payload = encode_request(r);
  iovec iov{const_cast<char *>(payload.data()), payload.size()};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(2 * sizeof(int))> ctl{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl.data();
  msg.msg_controllen = ctl.size();
  cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const std::array<int, 2> fds{out_fd, err_fd};
  std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(fds));
  if (::sendmsg(c.fd(), &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(payload.size())) {
    return sys_error("service: send the request", errno);
  }
  return {};
}

Result<ServiceReply> service_wait(const ServiceConnection &c) {
  std::array<char, 256> buf{};
  ssize_t n = 0;
  do {
    n = ::recv(c.fd(), buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == ECONNRESET) {
      return ServiceReply{};
    }
    return sys_error("service: wait for the reply", errno);
  }
  const std::string_view s(buf.data(), static_cast<size_t>(n));
  ServiceReply r;
  if (n == 0) {
    return r; // gone
  }
  if (s.starts_with("rc ")) {
    const auto v = s.substr(3);
    if (auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), r.rc); ec == std::errc() && p == v.end()) {
      r.kind = ServiceReply::Kind::rc;
      return r;
    }
  } else if (s.starts_with("stale ")) {
    r.kind = ServiceReply::Kind::stale;
    r.detail = std::string(s.substr(6));
    return r;
  }
  return failure("service: unexpected reply '" + std::string(s) + "'");
}

Status service_reply(const ServiceConnection &c, const ServiceReply &r) {
  const std::string s = r.kind == ServiceReply::Kind::stale ? "stale " + r.detail : "rc " + std::to_string(r.rc);
  if (::send(c.fd(), s.data(), s.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(s.size())) {
    return sys_error("service: send the reply", errno);
  }
  return {};
}

Result<ServiceListener> ServiceListener::open(std::string_view path) {
  // Socket activation (sd_listen_fds(3)): one socket, fd 3, for this process.
  const char *pid = std::getenv("LISTEN_PID");
  const char *nfds = std::getenv("LISTEN_FDS");
  if (pid != nullptr && nfds != nullptr && std::atoi(pid) == ::getpid()) {
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
    if (std::atoi(nfds) != 1) {
      return input_error(std::string("socket activation passed ") + nfds + " sockets; the service takes one");
    }
    int type = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
      return input_error("the socket systemd passed is not a SOCK_SEQPACKET socket (ListenSequentialPacket=)");
    }
    (void)::fcntl(3, F_SETFD, FD_CLOEXEC);
    return ServiceListener(3, {});
  }
  auto sa = unix_address(path);
  if (!sa) {
    return sa.error();
  }
  if (auto live = service_connect(path); live && live->fd() >= 0) {
    return failure("service: another mltunectl serve already listens on " + std::string(path));
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) {
    return sys_error("service: socket", errno);
  }
  const std::string p(path);
  (void)::unlink(p.c_str()); // a stale socket of an ended service
  // Root only, from the first moment: bound under a umask of 077.
  const mode_t old = ::umask(077);
  const int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr *>(&*sa), sizeof(*sa));
  const int e = errno;
  ::umask(old);
  if (rc != 0) {
    return sys_error("service: bind " + p, e);
  }
  if (::listen(fd.get(), 64) != 0) {
    const int le = errno;
    (void)::unlink(p.c_str());
    return sys_error("service: listen " + p, le);
  }
  return ServiceListener(fd.release(), p);
}

ServiceListener::ServiceListener(ServiceListener &&o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {
  o.path_.clear();
}

ServiceListener::~ServiceListener() {
  if (fd_ >= 0 && !path_.empty()) {
    (void)::unlink(path_.c_str());
  }
  UniqueFd(fd_).reset();
}

Result<ServiceListener::Accepted> ServiceListener::accept() const {
  Accepted a;
  a.conn = ServiceConnection(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
  if (a.conn.fd() < 0) {
    return sys_error("service: accept", errno);
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(a.conn.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return sys_error("service: SO_PEERCRED", errno);
  }
  a.peer_pid = cred.pid;
  if (cred.uid != 0 && cred.uid != ::geteuid()) {
    return input_error("service: refused uid " + std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) +
                       "): root only");
  }
  // A client sends its request right after connecting; one that does not
  // (stopped, hung) must not hold the service, which serves one at a time.
  const timeval wait_for_request{k_request_timeout_s, 0};
  (void)::setsockopt(a.conn.fd(), SOL_SOCKET, SO_RCVTIMEO, &wait_for_request, sizeof(wait_for_request));
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
    n = ::recvmsg(a.conn.fd(), &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return input_error("service: pid " + std::to_string(cred.pid) + " sent no request within " +
                         std::to_string(k_request_timeout_s) + " s");
    }
    return sys_error("service: receive a request", errno);
  }
  if (n == 0) {
    // A probe (another `mltunectl serve` checking for a live service) or a
    // client that went away before sending.
    return input_error("service: pid " + std::to_string(cred.pid) + " closed the connection without a request");
  }
  // Every descriptor that came is owned here first, so none leaks.
  std::vector<UniqueFd> fds;
  for (cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int f = -1;
        std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        fds.emplace_back(f);
      }
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return input_error("service: request or its descriptors truncated");
  }
  if (fds.size() != 2) {
    return input_error("service: a request passes stdout and stderr (" + std::to_string(fds.size()) +
                       " descriptors came)");
  }
  auto req = decode_request(std::string_view(buf.data(), static_cast<size_t>(n)));
  if (!req) {
    return with_context(req.error(), "service");
  }
  a.request = std::move(*req);
  a.out_fd = fds[0].release();
  a.err_fd = fds[1].release();
  return a;
}

} // namespace mltune
