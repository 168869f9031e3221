// The resident switcher: its request format, its socket, which command
// lines go to it and who may send them, a service in a child process with
// real clients (order, stalled and killed clients, SIGTERM), and the thread
// index that replaces the /proc scan.
#include "fake_sysroot.hpp"

#include "base/proc.hpp"
#include "cli.hpp"
#include "mltune/service.hpp"

#include <gtest/gtest.h>

#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <linux/capability.h>
#include <optional>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

using mltune::test::FakeSysroot;
namespace fs = std::filesystem;

namespace mltune {
namespace {

TEST(ServiceRequest, RoundTrip) {
  const ServiceRequest r{"0.1.0", 123456789, {"-v", "switch", "training", ""}};
  auto d = decode_request(encode_request(r));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->version, "0.1.0");
  EXPECT_EQ(d->started_ns, 123456789);
  EXPECT_EQ(d->args, r.args);
  auto none = decode_request(encode_request({"0.1.0", 0, {}}));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->args.empty());
}

TEST(ServiceRequest, RefusesWhatIsNotARequest) {
  using namespace std::string_literals;
  for (const std::string &bad :
       {""s, "mltunectl"s, "other\0v\0001"s, "mltunectl\0v\0x1"s, "mltunectl\0v\0-5"s, "mltunectl\0v\0"s}) {
    auto d = decode_request(bad);
    EXPECT_FALSE(d) << "accepted: " << bad;
    if (!d) {
      EXPECT_EQ(d.error().kind, Errc::input);
    }
  }
  std::string many = "mltunectl"s + '\0' + "v" + '\0' + "1";
  for (int i = 0; i < 300; ++i) {
    many += '\0' + "a"s;
  }
  auto d = decode_request(many);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("300 arguments"), std::string::npos) << d.error().message;
}

TEST(ServiceForward, OnlySwitchByNameAndOff) {
  using cli::forwardable;
  EXPECT_TRUE(forwardable({"switch", "training"}));
  EXPECT_TRUE(forwardable({"--json", "-v", "switch", "inference", "--backend", "direct"}));
  EXPECT_TRUE(forwardable({"switch", "training", "-b", "kernel", "--dry-run"}));
  EXPECT_TRUE(forwardable({"switch", "--backend=auto", "baseline"}));
  EXPECT_TRUE(forwardable({"-vv", "off"}));
  EXPECT_TRUE(forwardable({"off", "--json"}));
  // A file is the caller's: its directory, its mount namespace.
  EXPECT_FALSE(forwardable({"switch", "./mine.toml"}));
  EXPECT_FALSE(forwardable({"switch", "mine.toml"}));
  EXPECT_FALSE(forwardable({"switch", "/etc/mltune/profiles/x"}));
  EXPECT_FALSE(forwardable({"--sysroot", "/tmp/x", "switch", "training"}));
  EXPECT_FALSE(forwardable({"switch", "training", "--help"}));
  EXPECT_FALSE(forwardable({"switch"}));
  EXPECT_FALSE(forwardable({"switch", "a", "b"}));
  EXPECT_FALSE(forwardable({"switch", "training", "--backend"}));
  EXPECT_FALSE(forwardable({"verify", "training"}));
  EXPECT_FALSE(forwardable({"serve"}));
  EXPECT_FALSE(forwardable({"off", "extra"}));
  EXPECT_FALSE(forwardable({}));
}

// A service on a socket in a scratch directory, and a client talking to it.
class ServiceSocket : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mltune-service-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(ServiceSocket, NoServiceMeansRunHere) {
  auto c = service_connect(path_);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_LT(c->fd(), 0);
  // A socket file nobody listens on (a service that ended) is the same.
  {
    auto l = ServiceListener::open(path_);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_FALSE(l->activated());
    EXPECT_EQ(l->address(), path_);
    EXPECT_EQ(fs::status(path_).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::owner_exec);
    // A second service on the same socket is refused, not stolen.
    auto twice = ServiceListener::open(path_);
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("already listens"), std::string::npos) << twice.error().message;
  }
  EXPECT_FALSE(fs::exists(path_)); // the listener removes its socket
  std::ostringstream err;
  EXPECT_FALSE(cli::forward({"off"}, err, path_).has_value());
}

// MLTUNE_SOCKET, set for one test and put back after it.
class SocketEnv {
public:
  SocketEnv() {
    if (const char *v = std::getenv("MLTUNE_SOCKET")) {
      saved_ = v;
    }
  }
  SocketEnv(const SocketEnv &) = delete;
  SocketEnv &operator=(const SocketEnv &) = delete;
  ~SocketEnv() {
    if (saved_) {
      ::setenv("MLTUNE_SOCKET", saved_->c_str(), 1);
    } else {
      ::unsetenv("MLTUNE_SOCKET");
    }
  }

private:
  std::optional<std::string> saved_;
};

TEST(ServiceSocketPath, OneVariableForTheServiceAndItsClients) {
  const SocketEnv keep;
  ::unsetenv("MLTUNE_SOCKET");
  auto p = service_socket_path();
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, k_service_socket);
  ::setenv("MLTUNE_SOCKET", "/tmp/other.sock", 1);
  p = service_socket_path();
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "/tmp/other.sock");
  for (const char *bad : {"", "rel.sock", "./s.sock"}) {
    ::setenv("MLTUNE_SOCKET", bad, 1);
    p = service_socket_path();
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().kind, Errc::input);
    EXPECT_NE(p.error().message.find("MLTUNE_SOCKET '" + std::string(bad) + "': not an absolute path"),
              std::string::npos)
        << p.error().message;
    // A client does not run the command elsewhere than it was told: it says why.
    std::ostringstream err;
    EXPECT_EQ(cli::forward({"off"}, err), std::optional<int>(cli::k_exit_usage));
    EXPECT_NE(err.str().find("MLTUNE_SOCKET"), std::string::npos) << err.str();
  }
  ::setenv("MLTUNE_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  p = service_socket_path();
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("longer than"), std::string::npos) << p.error().message;
}

TEST(ServiceSocketPath, ServeHasNoSocketOptionOfItsOwn) {
  // `serve --socket` bound a socket no client used: gone, MLTUNE_SOCKET
  // names the socket for both.
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(cli::run({"serve", "--socket", "/tmp/x.sock"}, out, err), cli::k_exit_usage);
  EXPECT_NE(err.str().find("--socket"), std::string::npos) << err.str();
}

using namespace std::chrono_literals;

// How long a test waits for something to happen before it fails: far more
// than anything here takes on a busy machine.  Nothing waits for a time
// for its own sake.
constexpr auto k_bound = 120s;

int pidfd_of(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// A child process running `body`; its exit code is body's.
pid_t spawn(const std::function<int()> &body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(body());
  }
  return pid;
}

// The exit status of `pid` once it exits within `bound`, nullopt if it does not.
std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds bound) {
  const UniqueFd pfd(pidfd_of(pid));
  if (!pfd) {
    return std::nullopt;
  }
  pollfd p{pfd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(bound.count())) != 1) {
    return std::nullopt;
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) {
    return std::nullopt;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until `fd` is readable, for at most k_bound.
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(k_bound).count())) == 1;
}

std::string read_all(int fd) {
  std::string s;
  std::array<char, 4096> b{};
  ::lseek(fd, 0, SEEK_SET);
  ssize_t n = 0;
  while ((n = ::read(fd, b.data(), b.size())) > 0) {
    s.append(b.data(), static_cast<size_t>(n));
  }
  return s;
}

// A file in memory: what a client writes there never waits for a reader.
UniqueFd memfile(const char *name) {
  return UniqueFd(::memfd_create(name, MFD_CLOEXEC));
}

// A client of the service in this process: connected and its request sent
// at construction, its replies taken by wait().
class TestClient {
public:
  TestClient(const std::string &path, std::vector<std::string> args, std::string version = cli::service_version()) {
    auto c = service_connect(path);
    if (c && c->fd() >= 0) {
      conn_ = std::move(*c);
      const timeval bound{std::chrono::duration_cast<std::chrono::seconds>(k_bound).count(), 0};
      (void)::setsockopt(conn_.fd(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
      sent_ = service_send(conn_, {std::move(version), 1, std::move(args)}).ok();
    }
  }
  [[nodiscard]] bool sent() const { return sent_; }
  Result<ServiceReply> wait() { return service_wait(conn_, out_.get(), err_.get()); }
  [[nodiscard]] std::string out() const { return read_all(out_.get()); }
  [[nodiscard]] std::string err() const { return read_all(err_.get()); }

private:
  ServiceConnection conn_;
  bool sent_ = false;
  UniqueFd out_ = memfile("out");
  UniqueFd err_ = memfile("err");
};

// The lines a child writes to a pipe, read with a bound.
class Lines {
public:
  explicit Lines(UniqueFd fd) : fd_(std::move(fd)) {}
  // Waits for a line that contains `what` (after those seen before); false
  // when none comes within k_bound.
  bool wait_for(std::string_view what) {
    while (true) {
      for (; seen_ < lines_.size(); ++seen_) {
        if (lines_[seen_].find(what) != std::string::npos) {
          ++seen_;
          return true;
        }
      }
      if (!readable(fd_.get())) {
        return false;
      }
      std::array<char, 4096> b{};
      const ssize_t n = ::read(fd_.get(), b.data(), b.size());
      if (n <= 0) {
        return false;
      }
      partial_.append(b.data(), static_cast<size_t>(n));
      size_t nl = 0;
      while ((nl = partial_.find('\n')) != std::string::npos) {
        lines_.push_back(partial_.substr(0, nl));
        partial_.erase(0, nl + 1);
      }
    }
  }
  // Every line so far, one per line.
  [[nodiscard]] std::string all() const {
    std::string s;
    for (const auto &l : lines_) {
      s += l + "\n";
    }
    return s;
  }
  [[nodiscard]] bool any(std::string_view what) const {
    return std::ranges::any_of(lines_, [&](const auto &l) { return l.find(what) != std::string::npos; });
  }

private:
  UniqueFd fd_;
  std::vector<std::string> lines_;
  size_t seen_ = 0;
  std::string partial_;
};

// serve_requests() in a child process, on a socket bound here first (so
// clients can connect at once).  Its commands only report themselves:
// "ran ARGS" and its log lines come on a pipe.  `switch hold` waits until
// release(); `switch loud` writes 4 MiB; `switch both` writes to both
// streams and exits 3.
class TestService {
public:
  TestService(const std::string &path, std::chrono::milliseconds request_timeout = 5s,
              std::chrono::milliseconds reply_timeout = 5s) {
    auto l = ServiceListener::open(path);
    if (!l) {
      ADD_FAILURE() << l.error().message;
      return;
    }
    std::array<int, 2> ev{};
    std::array<int, 2> hold{};
    if (::pipe2(ev.data(), O_CLOEXEC) != 0 || ::pipe2(hold.data(), O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    pid_ = spawn([&]() {
      ::close(ev[0]);
      ::close(hold[1]);
      const int events = ev[1];
      const int held = hold[0];
      auto say = [events](const std::string &line) {
        const std::string s = line + "\n";
        (void)!::write(events, s.data(), s.size());
      };
      ServiceOptions o;
      o.version = cli::service_version();
      o.request_timeout = request_timeout;
      o.reply_timeout = reply_timeout;
      o.log = [say](const std::string &line) { say("log " + line); };
      o.run = [say, held](const ServiceRequest &r, std::ostream &out, std::ostream &err) {
        std::string what;
        for (const auto &a : r.args) {
          what += " " + a;
        }
        say("ran" + what);
        const std::string name = r.args.size() > 1 ? r.args[1] : "";
        if (name == "hold") {
          char c = 0;
          (void)!::read(held, &c, 1);
        } else if (name == "loud") {
          out << std::string(size_t{4} << 20, 'x');
        } else if (name == "both") {
          out << "o1\n" << std::flush;
          err << "e1\n" << std::flush;
          out << "o2\n" << std::flush;
          return 3;
        }
        out << (name.empty() ? r.args[0] : name) << "\n";
        return 0;
      };
      cli::catch_stop_signals();
      o.stop_requested = cli::stop_requested;
      const Status st = serve_requests(*l, o);
      say(st ? "exit" : "exit " + st.error().message);
      return st ? 0 : 1;
    });
    ::close(ev[1]);
    ::close(hold[0]);
    events_.emplace(UniqueFd(ev[0]));
    hold_.reset(hold[1]);
    listener_.emplace(std::move(*l)); // removes the socket at the end
  }
  TestService(const TestService &) = delete;
  TestService &operator=(const TestService &) = delete;
  ~TestService() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      (void)wait_exit(pid_, k_bound);
    }
  }
  Lines &events() { return *events_; }
  // Lets `switch hold` finish.
  void release() { (void)!::write(hold_.get(), "r", 1); }
  // SIGTERM; the exit status when it exits within k_bound.
  std::optional<int> terminate() {
    ::kill(pid_, SIGTERM);
    return exited();
  }
  std::optional<int> exited() {
    auto st = wait_exit(pid_, k_bound);
    exited_ = st.has_value();
    return st;
  }

private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::optional<ServiceListener> listener_;
  std::optional<Lines> events_;
  UniqueFd hold_;
};

// Who may ask: the tests need what the service asks of a client.
class Served : public ServiceSocket {
protected:
  void SetUp() override {
    ServiceSocket::SetUp();
    struct stat mine {};
    if (!holds_cap_sys_admin() || ::stat("/proc/self/ns/user", &mine) != 0 || mine.st_ino != 0xEFFFFFFDU) {
      GTEST_SKIP() << "needs CAP_SYS_ADMIN in the initial user namespace (the service serves only such clients)";
    }
  }
};

TEST_F(Served, OutputAndExitCodeComeBackInOrder) {
  TestService svc(path_);
  TestClient c(path_, {"switch", "both"});
  ASSERT_TRUE(c.sent());
  auto r = c.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  EXPECT_EQ(r->rc, 3);
  EXPECT_EQ(c.out(), "o1\no2\n");
  EXPECT_EQ(c.err(), "e1\n");
  EXPECT_TRUE(svc.events().wait_for("log pid " + std::to_string(::getpid()) + ": switch both: exit 3"))
      << svc.events().all();

  // mltunectl's own client: stdout and stderr in one file keep the order
  // the command wrote them; 4 MiB come whole, in many replies.
  const UniqueFd both = memfile("both");
  const pid_t pid = spawn([&] {
    ::dup2(both.get(), STDOUT_FILENO);
    ::dup2(both.get(), STDERR_FILENO);
    return cli::forward({"switch", "both"}, std::cerr, path_).value_or(100);
  });
  EXPECT_EQ(wait_exit(pid, k_bound), std::optional<int>(3));
  EXPECT_EQ(read_all(both.get()), "o1\ne1\no2\n");
  TestClient loud(path_, {"switch", "loud"});
  r = loud.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->rc, 0);
  EXPECT_EQ(loud.out(), std::string(size_t{4} << 20, 'x') + "loud\n");
}

TEST_F(Served, AnotherVersionIsStaleAndEndsTheService) {
  TestService svc(path_);
  TestClient c(path_, {"off"}, "0.0.9");
  auto r = c.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::stale);
  EXPECT_EQ(r->detail, cli::service_version());
  EXPECT_EQ(svc.exited(), std::optional<int>(0));
  ASSERT_TRUE(svc.events().wait_for("log client of version 0.0.9, this is " + cli::service_version() + ": ending"))
      << svc.events().all();
  ASSERT_TRUE(svc.events().wait_for("exit")) << svc.events().all();
  EXPECT_FALSE(svc.events().any("ran")) << svc.events().all();
}

// Drops CAP_SYS_ADMIN from the calling process's effective and permitted
// sets; its uid stays 0.
bool drop_cap_sys_admin() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3> d{};
  if (::syscall(SYS_capget, &h, d.data()) != 0) {
    return false;
  }
  d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
  d[CAP_TO_INDEX(CAP_SYS_ADMIN)].permitted &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
  return ::syscall(SYS_capset, &h, d.data()) == 0 && !holds_cap_sys_admin();
}

// A client in a child process that `prepare`s itself after it connected:
// what the service answered ("error ...", "rc N", ...) comes back on a pipe.
std::string ask_from_child(const std::string &path, const std::function<std::string()> &prepare) {
  std::array<int, 2> p{};
  if (::pipe2(p.data(), O_CLOEXEC) != 0) {
    return "pipe failed";
  }
  const pid_t pid = spawn([&] {
    auto say = [&](const std::string &s) {
      (void)!::write(p[1], s.data(), s.size());
      return 0;
    };
    auto c = service_connect(path);
    if (!c || c->fd() < 0) {
      return say("no connection");
    }
    if (auto why = prepare(); !why.empty()) {
      return say(why);
    }
    if (!service_send(*c, {cli::service_version(), 1, {"switch", "refused"}})) {
      return say("not sent");
    }
    const UniqueFd sink = memfile("sink");
    auto r = service_wait(*c, sink.get(), sink.get());
    if (!r) {
      return say("wait: " + r.error().message);
    }
    switch (r->kind) {
    case ServiceReply::Kind::rc: return say("rc " + std::to_string(r->rc));
    case ServiceReply::Kind::error: return say("error " + r->detail);
    case ServiceReply::Kind::stale: return say("stale");
    case ServiceReply::Kind::gone: return say("gone");
    }
    return say("?");
  });
  ::close(p[1]);
  const UniqueFd rd(p[0]);
  (void)wait_exit(pid, k_bound);
  std::string s;
  std::array<char, 512> b{};
  ssize_t n = 0;
  while ((n = ::read(rd.get(), b.data(), b.size())) > 0) {
    s.append(b.data(), static_cast<size_t>(n));
  }
  return s;
}

TEST_F(Served, RootWithoutCapSysAdminIsRefused) {
  TestService svc(path_);
  const std::string answer = ask_from_child(path_, [] {
    if (!drop_cap_sys_admin() || ::geteuid() != 0) {
      return std::string("cannot drop CAP_SYS_ADMIN as uid 0");
    }
    return std::string();
  });
  EXPECT_TRUE(answer.starts_with("error the mltunectl service refused pid ")) << answer;
  EXPECT_NE(answer.find("(uid 0): it lacks CAP_SYS_ADMIN"), std::string::npos) << answer;
  // The service goes on: the next caller is served, the refused one never ran.
  TestClient ok(path_, {"off"});
  auto r = ok.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  EXPECT_TRUE(svc.events().wait_for("switch refused: refused pid")) << svc.events().all();
  EXPECT_TRUE(svc.events().wait_for("ran off")) << svc.events().all();
  EXPECT_FALSE(svc.events().any("ran switch refused")) << svc.events().all();
}

TEST_F(Served, RootOfAnotherUserNamespaceIsRefused) {
  TestService svc(path_);
  // All capabilities, in a user namespace of its own (entered after the
  // connect: its uid there cannot open a root-only socket).
  const std::string answer = ask_from_child(path_, [] {
    if (::unshare(CLONE_NEWUSER) != 0) {
      return "skip: unshare(CLONE_NEWUSER): " + std::string(std::strerror(errno));
    }
    return holds_cap_sys_admin() ? std::string() : std::string("no CAP_SYS_ADMIN in the new user namespace");
  });
  if (answer.starts_with("skip: ")) {
    GTEST_SKIP() << answer;
  }
  EXPECT_NE(answer.find("its CAP_SYS_ADMIN is in a user namespace other than the initial one"), std::string::npos)
      << answer;
  EXPECT_TRUE(svc.events().wait_for("switch refused: refused pid")) << svc.events().all();
  EXPECT_EQ(svc.terminate(), std::optional<int>(0));
  ASSERT_TRUE(svc.events().wait_for("exit")) << svc.events().all();
  EXPECT_FALSE(svc.events().any("ran switch refused")) << svc.events().all();
}

TEST_F(ServiceSocket, PeerCheckWithAndWithoutSoPeerPidfd) {
  if (!holds_cap_sys_admin()) {
    GTEST_SKIP() << "needs CAP_SYS_ADMIN";
  }
  // The route of kernels before 6.5 (SO_PEERCRED, pidfd_open) gives the same
  // verdicts as SO_PEERPIDFD.
  auto l = ServiceListener::open(path_);
  ASSERT_TRUE(l) << l.error().message;
  for (const bool drop : {false, true}) {
    std::array<int, 2> go{};
    ASSERT_EQ(::pipe2(go.data(), O_CLOEXEC), 0);
    const pid_t pid = spawn([&] {
      ::close(go[1]);
      if (drop && !drop_cap_sys_admin()) {
        return 1;
      }
      auto c = service_connect(path_);
      char x = 0;
      (void)!::read(go[0], &x, 1); // connected until the parent has looked
      return c && c->fd() >= 0 ? 0 : 1;
    });
    ::close(go[0]);
    const UniqueFd conn(::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn) << std::strerror(errno);
    for (const auto how : {PeerLookup::pidfd, PeerLookup::peercred}) {
      const Status st = authorize_peer(conn.get(), how);
      EXPECT_EQ(st.ok(), !drop) << (st ? "" : st.error().message);
      if (!st) {
        EXPECT_EQ(st.error().kind, Errc::input);
        EXPECT_NE(st.error().message.find("pid " + std::to_string(pid) + " (uid 0): it lacks CAP_SYS_ADMIN"),
                  std::string::npos)
            << st.error().message;
      }
    }
    ::close(go[1]);
    EXPECT_EQ(wait_exit(pid, k_bound), std::optional<int>(0));
    // Its process gone: refused both ways, whoever has its pid now.
    for (const auto how : {PeerLookup::pidfd, PeerLookup::peercred}) {
      const Status st = authorize_peer(conn.get(), how);
      ASSERT_FALSE(st);
      EXPECT_NE(st.error().message.find("exited"), std::string::npos) << st.error().message;
    }
  }
}

// A FIFO opened for reading and writing, filled: whoever writes to it
// waits for ever (a stalled log collector that is this same process).
UniqueFd full_fifo(const fs::path &p) {
  if (::mkfifo(p.c_str(), 0600) != 0) {
    return {};
  }
  UniqueFd f(::open(p.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  const std::string chunk(4096, 'f');
  while (f && ::write(f.get(), chunk.data(), chunk.size()) > 0) {
  }
  if (!f || errno != EAGAIN || ::fcntl(f.get(), F_SETFL, O_RDWR) != 0) {
    return {};
  }
  return f;
}

// Runs mltunectl's client for `args` with its stdout on `out`.
pid_t client_process(const std::string &path, std::vector<std::string> args, int out) {
  return spawn([&path, args = std::move(args), out] {
    ::dup2(out, STDOUT_FILENO);
    return cli::forward(args, std::cerr, path).value_or(100);
  });
}

TEST_F(Served, AClientWithAFullPipeDoesNotDelayAnother) {
  TestService svc(path_, 5s, 10min);
  const UniqueFd fifo = full_fifo(dir_ / "fifo");
  ASSERT_TRUE(fifo);
  // 4 MiB for a client that takes none of it: the socket holds a part, the
  // service the rest.
  const pid_t stuck = client_process(path_, {"switch", "loud"}, fifo.get());
  ASSERT_TRUE(svc.events().wait_for("ran switch loud")) << svc.events().all();
  TestClient other(path_, {"switch", "other"});
  auto r = other.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  EXPECT_EQ(other.out(), "other\n");
  // ... while the first still waits on its own stdout.
  EXPECT_EQ(wait_exit(stuck, 0ms), std::nullopt);
  // And SIGTERM stops the service with that client still stalled.
  EXPECT_EQ(svc.terminate(), std::optional<int>(0));
  EXPECT_TRUE(svc.events().wait_for("the replies of switch loud: dropped: the service stops")) << svc.events().all();
  ::kill(stuck, SIGKILL);
  EXPECT_EQ(wait_exit(stuck, k_bound), std::optional<int>(128 + SIGKILL));
}

TEST_F(Served, AClientThatTakesNoRepliesIsDropped) {
  TestService svc(path_, 5s, 200ms);
  const UniqueFd fifo = full_fifo(dir_ / "fifo");
  ASSERT_TRUE(fifo);
  const pid_t stuck = client_process(path_, {"switch", "loud"}, fifo.get());
  ASSERT_TRUE(svc.events().wait_for("did not take the replies of switch loud within 0.2 s: dropped"))
      << svc.events().all();
  // Its stdout drained, it ends with exit 1: the service closed the
  // connection before the exit code.
  const UniqueFd pidfd(pidfd_of(stuck));
  ASSERT_TRUE(pidfd);
  std::string drain(1 << 16, '\0');
  std::array<pollfd, 2> p{{{fifo.get(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}}};
  while (::poll(p.data(), p.size(), static_cast<int>(std::chrono::milliseconds(k_bound).count())) > 0 &&
         (p[1].revents & POLLIN) == 0) {
    (void)!::read(fifo.get(), drain.data(), drain.size());
  }
  EXPECT_EQ(wait_exit(stuck, k_bound), std::optional<int>(1));
}

TEST_F(Served, AKilledQueuedClientsCommandNeverRuns) {
  TestService svc(path_);
  TestClient first(path_, {"switch", "hold"});
  ASSERT_TRUE(svc.events().wait_for("ran switch hold")) << svc.events().all();
  // The next one sends its request while the service is busy, and is
  // killed before its turn.
  std::array<int, 2> sent{};
  ASSERT_EQ(::pipe2(sent.data(), O_CLOEXEC), 0);
  const pid_t killed = spawn([&] {
    auto c = service_connect(path_);
    if (!c || c->fd() < 0 || !service_send(*c, {cli::service_version(), 1, {"switch", "killed"}})) {
      return 1;
    }
    (void)!::write(sent[1], "s", 1);
    const UniqueFd sink = memfile("sink");
    (void)service_wait(*c, sink.get(), sink.get());
    return 0;
  });
  ::close(sent[1]);
  const UniqueFd sent_rd(sent[0]);
  ASSERT_TRUE(readable(sent_rd.get()));
  ::kill(killed, SIGKILL);
  ASSERT_EQ(wait_exit(killed, k_bound), std::optional<int>(128 + SIGKILL));
  svc.release();
  auto r = first.wait();
  ASSERT_TRUE(r) << r.error().message;
  TestClient last(path_, {"off"});
  r = last.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  ASSERT_TRUE(svc.events().wait_for("ran off")) << svc.events().all();
  EXPECT_FALSE(svc.events().any("ran switch killed")) << svc.events().all();
  EXPECT_TRUE(svc.events().any("switch killed: its client went away before its turn: not run")) << svc.events().all();
}

TEST_F(Served, CommandsRunInTheOrderTheirConnectionsWereAccepted) {
  TestService svc(path_);
  // Connected 1, 2, 3; requests sent 3, 2, 1.
  std::vector<ServiceConnection> conns;
  for (int i = 0; i < 3; ++i) {
    auto c = service_connect(path_);
    ASSERT_TRUE(c && c->fd() >= 0);
    conns.push_back(std::move(*c));
  }
  ASSERT_TRUE(service_send(conns[2], {cli::service_version(), 1, {"switch", "c3"}}));
  ASSERT_TRUE(svc.events().wait_for("switch c3: queued behind 2 connections")) << svc.events().all();
  ASSERT_TRUE(service_send(conns[1], {cli::service_version(), 1, {"switch", "c2"}}));
  ASSERT_TRUE(svc.events().wait_for("switch c2: queued behind 1 connection")) << svc.events().all();
  ASSERT_TRUE(service_send(conns[0], {cli::service_version(), 1, {"off"}}));
  const UniqueFd sink = memfile("sink");
  for (auto &c : conns) {
    auto r = service_wait(c, sink.get(), sink.get());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  }
  ASSERT_TRUE(svc.events().wait_for("ran off")) << svc.events().all();
  ASSERT_TRUE(svc.events().wait_for("ran switch c2")) << svc.events().all();
  ASSERT_TRUE(svc.events().wait_for("ran switch c3")) << svc.events().all();
}

TEST_F(Served, AConnectionWithoutARequestIsDroppedAndTheNextServed) {
  TestService svc(path_, 200ms);
  auto silent = service_connect(path_);
  ASSERT_TRUE(silent && silent->fd() >= 0);
  TestClient next(path_, {"off"});
  auto r = next.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::rc);
  ASSERT_TRUE(svc.events().wait_for("sent no request within 0.2 s: dropped")) << svc.events().all();
  ASSERT_TRUE(svc.events().wait_for("ran off")) << svc.events().all();
}

TEST_F(Served, SigtermStopsItWhileClientsWait) {
  TestService svc(path_, 10min, 10min);
  // One connected without a request, one queued behind it.
  auto silent = service_connect(path_);
  ASSERT_TRUE(silent && silent->fd() >= 0);
  TestClient queued(path_, {"switch", "queued"});
  ASSERT_TRUE(svc.events().wait_for("switch queued: queued behind 1 connection")) << svc.events().all();
  EXPECT_EQ(svc.terminate(), std::optional<int>(0));
  auto r = queued.wait();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::error);
  EXPECT_EQ(r->detail, "the mltunectl service stopped before it ran the command");
  ASSERT_TRUE(svc.events().wait_for("no request yet: dropped: the service stops")) << svc.events().all();
  ASSERT_TRUE(svc.events().wait_for("exit")) << svc.events().all();
  EXPECT_FALSE(svc.events().any("ran switch queued")) << svc.events().all();
}

TEST_F(Served, AMalformedRequestIsAnsweredWithWhy) {
  TestService svc(path_);
  auto c = service_connect(path_);
  ASSERT_TRUE(c && c->fd() >= 0);
  const std::string bad = "mltunectl";
  ASSERT_EQ(::send(c->fd(), bad.data(), bad.size(), 0), static_cast<ssize_t>(bad.size()));
  const UniqueFd sink = memfile("sink");
  auto r = service_wait(*c, sink.get(), sink.get());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, ServiceReply::Kind::error);
  EXPECT_EQ(r->detail, "not an mltunectl request");
}

// Scripted proc connector events for the thread index.
class Events final : public ProcEventSource {
public:
  Result<ProcEventBatch> wait(int timeout_ms) override {
    EXPECT_EQ(timeout_ms, 0); // the index never waits
    ProcEventBatch b;
    if (queue.empty()) {
      b.idle = true;
      return b;
    }
    b = std::move(queue.front());
    queue.pop_front();
    return b;
  }
  void unsubscribe() override {}
  void add(std::vector<ProcEvent> evs) {
    ProcEventBatch b;
    b.events = std::move(evs);
    queue.push_back(std::move(b));
  }
  void lose() {
    ProcEventBatch b;
    b.lost = true;
    queue.push_back(std::move(b));
  }
  std::deque<ProcEventBatch> queue;
};

ProcEvent ev(ProcEvent::Kind k, int pid, int tid, std::string comm = {}) {
  return {k, pid, tid, 0, std::move(comm)};
}

std::map<int, std::string> names(ThreadIndex &ix) {
  std::map<int, std::string> m;
  auto t = ix.threads();
  EXPECT_TRUE(t) << t.error().message;
  for (const auto &[tid, th] : *t) {
    m[tid] = std::to_string(th.pid) + ":" + th.comm;
  }
  return m;
}

TEST(ThreadIndex, FollowsEventsAfterOneScan) {
  FakeSysroot fake;
  fake.set("/proc/10/task/10/comm", "python\n");
  fake.set("/proc/10/task/11/comm", "pt_main\n");
  fake.set("/proc/20/task/20/comm", "sshd\n");
  auto owned = std::make_unique<Events>();
  Events &src = *owned;
  ThreadIndex ix(std::move(owned), fake.root());
  EXPECT_EQ(names(ix), (std::map<int, std::string>{{10, "10:python"}, {11, "10:pt_main"}, {20, "20:sshd"}}));
  EXPECT_EQ(ix.counts().scans, 1U);

  // A new thread is read once; a rename comes with its name; an exit goes.
  fake.set("/proc/10/task/12/comm", "python\n");
  src.add({ev(ProcEvent::Kind::fork, 10, 12), ev(ProcEvent::Kind::comm, 10, 11, "NCCL Progress 0"),
           ev(ProcEvent::Kind::exit, 20, 20)});
  EXPECT_EQ(names(ix), (std::map<int, std::string>{{10, "10:python"}, {11, "10:NCCL Progress 0"}, {12, "10:python"}}));
  EXPECT_EQ(ix.counts().names_read, 1U);
  EXPECT_EQ(names(ix).size(), 3U);
  EXPECT_EQ(ix.counts().names_read, 1U); // not again

  // exec: the other threads of the process end without their own events.
  fake.set("/proc/10/task/10/comm", "torchrun\n");
  src.add({ev(ProcEvent::Kind::exec, 10, 10)});
  EXPECT_EQ(names(ix), (std::map<int, std::string>{{10, "10:torchrun"}}));

  // A thread gone before its name was read is left out.
  src.add({ev(ProcEvent::Kind::fork, 30, 30)});
  EXPECT_EQ(names(ix), (std::map<int, std::string>{{10, "10:torchrun"}}));

  // Lost events: the next read is a scan of /proc.
  fake.set("/proc/40/task/40/comm", "nccl\n");
  src.lose();
  src.add({ev(ProcEvent::Kind::exit, 10, 10)}); // after the loss: covered by the scan
  auto after = names(ix);
  EXPECT_EQ(ix.counts().scans, 2U);
  EXPECT_EQ(after.count(40), 1U);
}

TEST(ThreadIndex, TaskNamesReadTheInstalledIndex) {
  FakeSysroot fake;
  fake.set("/proc/7/task/7/comm", "a\n");
  fake.set("/proc/3/task/9/comm", "b\n");
  fake.set("/proc/3/task/3/comm", "c\n");
  auto owned = std::make_unique<Events>();
  Events &src = *owned;
  ThreadIndex ix(std::move(owned), fake.root());
  src.add({ev(ProcEvent::Kind::comm, 7, 7, "renamed")});
  {
    // Installed in caches that are not current: the scan, not the index.
    Caches idle;
    install_thread_index(idle, &ix);
    EXPECT_EQ(proc::task_names(fake.root())[2].comm, "a");
  }
  Caches caches;
  const CachesInUse in_use(caches);
  install_thread_index(caches, &ix);
  auto t = proc::task_names(fake.root());
  ASSERT_EQ(t.size(), 3U);
  // By pid, then tid, as the scan gives them; the rename from the event.
  EXPECT_EQ(t[0].tid, 3);
  EXPECT_EQ(t[1].tid, 9);
  EXPECT_EQ(t[2].comm, "renamed");
  // Another root is scanned, not read from the index.
  FakeSysroot other;
  other.set("/proc/5/task/5/comm", "x\n");
  auto o = proc::task_names(other.root());
  ASSERT_EQ(o.size(), 1U);
  EXPECT_EQ(o[0].comm, "x");
  // Installed as none: the scan again (the rename is not in /proc).
  install_thread_index(caches, nullptr);
  EXPECT_EQ(proc::task_names(fake.root())[2].comm, "a");
}

TEST(RealPath, ResolvesLinksLikeCanonical) {
  FakeSysroot fake;
  fake.set("/sys/devices/pci0000:00/0000:00:03.0/numa_node", "0\n");
  fs::create_directories(fake.dir() / "sys/class/net/eth0");
  fs::create_symlink("../../../devices/pci0000:00/0000:00:03.0", fake.dir() / "sys/class/net/eth0/device");
  std::error_code ec;
  const auto p = proc::real_path(fake.dir() / "sys/class/net/eth0/device", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(p, fs::canonical(fake.dir() / "sys/devices/pci0000:00/0000:00:03.0"));
  (void)proc::real_path(fake.dir() / "sys/class/net/eth1/device", ec);
  EXPECT_TRUE(ec);
}

} // namespace
} // namespace mltune
