// The socket of the resident switcher (mltune/service.hpp): its path, the
// request format, the client's connect/send/wait and the service's
// listener.  The service's loop is serve.cpp, its check of a peer peer.cpp.
#include "mltune/service.hpp"

#include "mltune/parse.hpp"

#include "base/unique_fd.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

namespace mltune {

namespace {

constexpr std::string_view k_magic = "mltunectl";
// A request is a command line: far below this.
constexpr size_t k_max_request = size_t{64} * 1024;
constexpr size_t k_max_args = 256;

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

// Writes all of `data` to `fd`; false when it cannot (the caller's stdout
// closed or gone: the rest of its output is dropped, the exit code still
// comes).
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

} // namespace

Result<std::string> service_socket_path() {
  const char *env = std::getenv("MLTUNE_SOCKET");
  if (env == nullptr) {
    return std::string(k_service_socket);
  }
  const std::string p(env);
  if (!p.starts_with('/')) {
    return input_error("MLTUNE_SOCKET '" + p + "': not an absolute path (the service and its clients must name " +
                       "the same socket from any directory)");
  }
  if (auto sa = unix_address(p); !sa) {
    return with_context(sa.error(), "MLTUNE_SOCKET");
  }
  return p;
}

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

Status service_send(const ServiceConnection &c, const ServiceRequest &r) {
  const std::string payload = encode_request(r);
  iovec iov{const_cast<char *>(payload.data()), payload.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // /dev/null twice: a service of protocol 1 takes a request only with two
  // descriptors, and then answers "stale" (this one runs the command itself).
  const UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  alignas(cmsghdr) std::array<char, CMSG_SPACE(2 * sizeof(int))> ctl{};
  if (null) {
    msg.msg_control = ctl.data();
    msg.msg_controllen = ctl.size();
    cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    const std::array<int, 2> fds{null.get(), null.get()};
    std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(fds));
  }
  ssize_t n = 0;
  do {
    n = ::sendmsg(c.fd(), &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (std::cmp_not_equal(n, payload.size())) {
    return sys_error("service: send the request", errno);
  }
  return {};
}

Result<ServiceReply> service_wait(const ServiceConnection &c, int out_fd, int err_fd) {
  // Room for the largest reply, and a byte more to see a larger one.
  std::string buf(k_reply_chunk + 64, '\0');
  bool out_ok = true;
  bool err_ok = true;
  while (true) {
    // MSG_TRUNC: the length of the message even where it does not fit.
    const ssize_t n = ::recv(c.fd(), buf.data(), buf.size(), MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == ECONNRESET) {
        return ServiceReply{};
      }
      return sys_error("service: wait for the reply", errno);
    }
    if (n == 0) {
      return ServiceReply{}; // gone
    }
    if (static_cast<size_t>(n) > buf.size()) {
      return failure("service: a reply of " + std::to_string(n) + " bytes (at most " + std::to_string(buf.size()) +
                     ")");
    }
    const std::string_view s(buf.data(), static_cast<size_t>(n));
    if (s.starts_with("out ")) {
      out_ok = out_ok && write_all(out_fd, s.substr(4));
      continue;
    }
    if (s.starts_with("err ")) {
      err_ok = err_ok && write_all(err_fd, s.substr(4));
      continue;
    }
    ServiceReply r;
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
    } else if (s.starts_with("error ")) {
      r.kind = ServiceReply::Kind::error;
      r.detail = std::string(s.substr(6));
      return r;
    }
    return failure("service: unexpected reply '" + std::string(s.substr(0, 64)) + "'");
  }
}

Result<ServiceListener> ServiceListener::open(std::string_view path) {
  // Socket activation (sd_listen_fds(3)): one socket, fd 3, for this process.
  const char *pid = std::getenv("LISTEN_PID");
  const char *nfds = std::getenv("LISTEN_FDS");
  if (pid != nullptr && nfds != nullptr && parse_int<pid_t>(pid) == ::getpid()) {
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
    if (parse_int<int>(nfds) != 1) {
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

std::string ServiceListener::address() const {
  sockaddr_un sa{};
  socklen_t len = sizeof(sa);
  if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&sa), &len) != 0 || sa.sun_family != AF_UNIX ||
      len <= offsetof(sockaddr_un, sun_path)) {
    return {};
  }
  return {sa.sun_path, ::strnlen(sa.sun_path, len - offsetof(sockaddr_un, sun_path))};
}

ServiceListener::~ServiceListener() {
  if (fd_ >= 0 && !path_.empty()) {
    (void)::unlink(path_.c_str());
  }
  UniqueFd(fd_).reset();
}

} // namespace mltune
