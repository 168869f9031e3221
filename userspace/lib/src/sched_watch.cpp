// The watcher: proc connector (NETLINK_CONNECTOR, CN_IDX_PROC) fork, exec
// and comm events drive the rules for threads as they appear and get named.
// libnl has no connector helpers, so this is a raw netlink socket.
#include "mltune/sched.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

namespace mltune {

namespace {

class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  [[nodiscard]] int get() const { return fd_; }

private:
  int fd_;
};

Status subscribe(int fd, bool on) {
  // nlmsghdr | cn_msg | op, packed back to back (cn_msg ends in data[]).
  alignas(nlmsghdr) unsigned char msg[NLMSG_SPACE(sizeof(cn_msg) + sizeof(uint32_t))]{};
  auto *nl = reinterpret_cast<nlmsghdr *>(msg);
  nl->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(uint32_t));
  nl->nlmsg_type = NLMSG_DONE;
  nl->nlmsg_pid = static_cast<uint32_t>(getpid());
  cn_msg cn{};
  cn.id.idx = CN_IDX_PROC;
  cn.id.val = CN_VAL_PROC;
  cn.len = sizeof(uint32_t);
  const uint32_t op = on ? PROC_CN_MCAST_LISTEN : PROC_CN_MCAST_IGNORE;
  std::memcpy(msg + NLMSG_HDRLEN, &cn, sizeof(cn));
  std::memcpy(msg + NLMSG_HDRLEN + sizeof(cn_msg), &op, sizeof(op));
  if (::send(fd, msg, nl->nlmsg_len, 0) != static_cast<ssize_t>(nl->nlmsg_len)) {
    return sys_error("proc connector: subscribe", errno);
  }
  return {};
}

} // namespace

Status sched_watch(SchedSystem &sys, const std::vector<SchedRule> &rules, const WatchOptions &opt) {
  auto log = [&](const std::string &s) {
    if (opt.log) {
      opt.log(s);
    }
  };
  const Fd fd(::socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR));
  if (fd.get() < 0) {
    return sys_error("proc connector: socket(NETLINK_CONNECTOR)", errno);
  }
  const int rcvbuf = 4 << 20;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0) {
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = CN_IDX_PROC;
  sa.nl_pid = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0) {
    return sys_error("proc connector: bind(CN_IDX_PROC)", errno);
  }
  if (auto st = subscribe(fd.get(), true); !st) {
    return st;
  }

  // Threads this watcher gave a policy; threads they create inherit their
  // name but (reset-on-fork) not their policy, and keep it that way.
  std::set<int> managed;
  auto note = [&](const SchedReport &rep) {
    for (const auto &a : rep.actions) {
      if (a.result == "applied" || a.result == "unchanged" || a.result == "fallback") {
        managed.insert(a.tid);
      }
    }
    for (const auto &n : rep.notes) {
      log(n);
    }
  };
  auto scan = [&]() {
    auto rep = sched_apply(sys, rules, opt.sched);
    if (!rep) {
      log("initial scan: " + rep.error().message);
      return;
    }
    note(*rep);
  };
  auto one = [&](int pid, int tid, const char *why) {
    auto rep = sched_apply_thread(sys, rules, pid, tid, opt.sched);
    if (!rep) {
      log(std::string(why) + " " + std::to_string(tid) + ": " + rep.error().message);
      return;
    }
    note(*rep);
  };

  scan();
  log("watching proc connector events (fork, exec, comm)");

  alignas(nlmsghdr) char buf[16384];
  while (!(opt.stop && opt.stop())) {
    pollfd pfd{fd.get(), POLLIN, 0};
    const int pr = ::poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR) {
      return sys_error("proc connector: poll", errno);
    }
    if (pr <= 0) {
      continue;
    }
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == ENOBUFS) {
        log("proc connector: events lost (ENOBUFS); rescanning every thread");
        scan();
      } else if (errno != EINTR && errno != EAGAIN) {
        return sys_error("proc connector: recv", errno);
      }
      continue;
    }
    auto len = static_cast<unsigned>(n);
    for (auto *nh = reinterpret_cast<nlmsghdr *>(buf); NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_type == NLMSG_NOOP || nh->nlmsg_type == NLMSG_ERROR) {
        continue;
      }
      cn_msg cn{};
      const auto *payload = static_cast<const unsigned char *>(NLMSG_DATA(nh));
      std::memcpy(&cn, payload, sizeof(cn));
      if (cn.id.idx != CN_IDX_PROC || cn.id.val != CN_VAL_PROC) {
        continue;
      }
      proc_event ev{};
      std::memcpy(&ev, payload + sizeof(cn_msg), std::min<size_t>(cn.len, sizeof(ev)));
      switch (ev.what) {
      case PROC_EVENT_FORK: {
        // A new thread inherits its creator's name; the kernel does not say
        // which thread created it (parent_pid is the process's parent).  Rules
        // apply to threads when they name themselves, so only new processes
        // are looked at here; threads spawned by a DEADLINE thread stay as
        // reset-on-fork made them.
        const int child = static_cast<int>(ev.event_data.fork.child_pid);
        const int tgid = static_cast<int>(ev.event_data.fork.child_tgid);
        if (child == tgid) {
          one(tgid, child, "fork");
        }
        break;
      }
      case PROC_EVENT_EXEC: {
        const int tgid = static_cast<int>(ev.event_data.exec.process_tgid);
        for (int tid : sys.tids(tgid)) {
          one(tgid, tid, "exec");
        }
        break;
      }
      case PROC_EVENT_COMM:
        one(static_cast<int>(ev.event_data.comm.process_tgid), static_cast<int>(ev.event_data.comm.process_pid),
            "comm");
        break;
      case PROC_EVENT_EXIT:
        managed.erase(static_cast<int>(ev.event_data.exit.process_pid));
        break;
      default:
        break;
      }
    }
  }
  (void)subscribe(fd.get(), false);
  log("watcher stopped");
  return {};
}

} // namespace mltune
