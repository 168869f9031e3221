// The resident switcher: its request format, the socket exchange with the
// client's descriptors, which command lines go to it, and the thread index
// that replaces the /proc scan.
#include "fake_sysroot.hpp"

#include "base/proc.hpp"
#include "cli.hpp"
#include "mltune/service.hpp"

#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <sys/socket.h>
#include <thread>
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

std::string drain(int fd) {
  std::string s;
  std::array<char, 256> b{};
  ssize_t n = 0;
  while ((n = ::read(fd, b.data(), b.size())) > 0) {
    s.append(b.data(), static_cast<size_t>(n));
  }
  return s;
}

TEST_F(ServiceSocket, NoServiceMeansRunHere) {
  auto c = service_connect(path_);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_LT(c->fd(), 0);
  // A socket file nobody listens on (a service that ended) is the same.
  {
    auto l = ServiceListener::open(path_);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(fs::status(path_).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::owner_exec);
  }
  EXPECT_FALSE(fs::exists(path_)); // the listener removes its socket
  std::ostringstream err;
  EXPECT_FALSE(cli::forward({"off"}, err, path_).has_value());
}

TEST_F(ServiceSocket, RequestWithDescriptorsAndReply) {
  auto l = ServiceListener::open(path_);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_FALSE(l->activated());
  // A second service on the same socket is refused, not stolen.
  auto twice = ServiceListener::open(path_);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("already listens"), std::string::npos) << twice.error().message;
  // Its probe is a connection without a request: refused, saying so.
  auto probe = l->accept();
  ASSERT_FALSE(probe);
  EXPECT_NE(probe.error().message.find("without a request"), std::string::npos) << probe.error().message;

  std::array<int, 2> out{};
  std::array<int, 2> err{};
  ASSERT_EQ(::pipe2(out.data(), O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(err.data(), O_CLOEXEC), 0);
  std::optional<Result<ServiceReply>> reply;
  std::thread client([&] {
    auto c = service_connect(path_);
    ASSERT_TRUE(c && c->fd() >= 0);
    ASSERT_TRUE(service_send(*c, {"9.9", 42, {"switch", "training"}}, out[1], err[1]));
    reply = service_wait(*c);
  });
  auto a = l->accept();
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->request.version, "9.9");
  EXPECT_EQ(a->request.started_ns, 42);
  EXPECT_EQ(a->request.args, (std::vector<std::string>{"switch", "training"}));
  EXPECT_EQ(a->peer_pid, ::getpid());
  // What the service writes to the passed descriptors reaches the client's.
  ASSERT_EQ(::write(a->out_fd, "out\n", 4), 4);
  ASSERT_EQ(::write(a->err_fd, "err\n", 4), 4);
  ::close(a->out_fd);
  ::close(a->err_fd);
  ASSERT_TRUE(service_reply(a->conn, {ServiceReply::Kind::rc, 3, {}}));
  client.join();
  ::close(out[1]);
  ::close(err[1]);
  EXPECT_EQ(drain(out[0]), "out\n");
  EXPECT_EQ(drain(err[0]), "err\n");
  ::close(out[0]);
  ::close(err[0]);
  ASSERT_TRUE(reply.has_value() && reply->ok());
  EXPECT_EQ((*reply)->kind, ServiceReply::Kind::rc);
  EXPECT_EQ((*reply)->rc, 3);
}

TEST_F(ServiceSocket, StaleAndGoneReplies) {
  auto l = ServiceListener::open(path_);
  ASSERT_TRUE(l);
  for (const bool stale : {true, false}) {
    std::optional<Result<ServiceReply>> reply;
    std::thread client([&] {
      auto c = service_connect(path_);
      ASSERT_TRUE(c && c->fd() >= 0);
      ASSERT_TRUE(service_send(*c, {"old", 1, {"off"}}, 1, 2));
      reply = service_wait(*c);
    });
    auto a = l->accept();
    ASSERT_TRUE(a);
    ::close(a->out_fd);
    ::close(a->err_fd);
    if (stale) {
      ASSERT_TRUE(service_reply(a->conn, {ServiceReply::Kind::stale, 0, "new"}));
    }
    a->conn = ServiceConnection(); // closed: a service that ended mid-command
    client.join();
    ASSERT_TRUE(reply.has_value() && reply->ok());
    EXPECT_EQ((*reply)->kind, stale ? ServiceReply::Kind::stale : ServiceReply::Kind::gone);
    if (stale) {
      EXPECT_EQ((*reply)->detail, "new");
    }
  }
}

TEST_F(ServiceSocket, ARequestWithoutDescriptorsIsRefused) {
  auto l = ServiceListener::open(path_);
  ASSERT_TRUE(l);
  std::thread client([&] {
    auto c = service_connect(path_);
    ASSERT_TRUE(c && c->fd() >= 0);
    const std::string p = encode_request({"v", 1, {"off"}});
    ASSERT_EQ(::send(c->fd(), p.data(), p.size(), 0), static_cast<ssize_t>(p.size()));
  });
  auto a = l->accept();
  client.join();
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("stdout and stderr"), std::string::npos) << a.error().message;
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
  install_thread_index(&ix);
  src.add({ev(ProcEvent::Kind::comm, 7, 7, "renamed")});
  auto t = proc::task_names(fake.root());
  install_thread_index(nullptr);
  ASSERT_EQ(t.size(), 3U);
  // By pid, then tid, as the scan gives them; the rename from the event.
  EXPECT_EQ(t[0].tid, 3);
  EXPECT_EQ(t[1].tid, 9);
  EXPECT_EQ(t[2].comm, "renamed");
  // Another root is scanned, not read from the index.
  FakeSysroot other;
  other.set("/proc/5/task/5/comm", "x\n");
  install_thread_index(&ix);
  auto o = proc::task_names(other.root());
  install_thread_index(nullptr);
  ASSERT_EQ(o.size(), 1U);
  EXPECT_EQ(o[0].comm, "x");
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
