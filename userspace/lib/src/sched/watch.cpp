// The watcher: proc connector (NETLINK_CONNECTOR, CN_IDX_PROC) fork, exec
// and comm events drive the rules for threads as they appear and get named.
// libnl has no connector helpers, so this is a raw netlink socket.
#include "internal.hpp"
#include "mltune/sched.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <map>
#include <poll.h>
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

double mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
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
  // tid -> (admission domain, DEADLINE bandwidth), given back on exit.
  std::map<int, std::pair<std::string, double>> managed;
  // Events: the state file is written off the event path (flush below).
  SchedOptions hot = opt.sched;
  hot.defer_state = true;
  auto note = [&](const SchedReport &rep) {
    for (const auto &a : rep.actions) {
      if (a.result == "applied" || a.result == "unchanged" || a.result == "fallback") {
        managed[a.tid] = {a.cgroup.empty() ? "default" : a.cgroup, a.after.bandwidth()};
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
  // Hot path filter: one read of the thread's comm; only a name some rule
  // matches goes on to the full match (exe, cmdline, cgroup) and apply.
  auto named_by_rule = [&](int pid, int tid) {
    auto comm = sys.root().read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    if (!comm) {
      return false;
    }
    std::string c = *comm;
    if (!c.empty() && c.back() == '\n') {
      c.pop_back();
    }
    return std::any_of(rules.begin(), rules.end(), [&](const SchedRule &r) { return r.matches_name(c); });
  };
  auto one = [&](int pid, int tid, const char *why) {
    if (!named_by_rule(pid, tid)) {
      return;
    }
    auto rep = sched_apply_thread(sys, rules, pid, tid, hot);
    if (!rep) {
      log(std::string(why) + " " + std::to_string(tid) + ": " + rep.error().message);
      return;
    }
    note(*rep);
  };

  scan();
  double last_flush = 0;
  auto flush = [&]() {
    if (auto st = sched_state_flush(sys.root()); !st) {
      log("cannot save state: " + st.error().message);
    }
  };
  const bool cache = opt.sched.ledger_ttl_ms > 0;
  if (cache) {
    sched_ledger_refresh(sys);
  }
  log("watching proc connector events (fork, exec, comm)");

  alignas(nlmsghdr) char buf[16384];
  while (!(opt.stop && opt.stop())) {
    pollfd pfd{fd.get(), POLLIN, 0};
    const int pr = ::poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR) {
      const int err = errno;
      flush();
      return sys_error("proc connector: poll", err);
    }
    if (cache) {
      // The ledger is kept incrementally (applies charge it, exits of our
      // threads give back); a full rescan, for DEADLINE threads others
      // created or ended, runs when idle (at most once a second) or, under a
      // constant stream of events, every 10 s -- never for a matching event.
      const int64_t age = sched_ledger_age_ms();
      if (age < 0 || (pr == 0 && age >= 1000) || age >= 10000) {
        sched_ledger_refresh(sys);
      }
    }
    if (pr == 0 || mono_now() - last_flush >= 5.0) {
      flush(); // idle, or every 5 s under a stream of events
      last_flush = mono_now();
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
        const int err = errno;
        flush();
        return sys_error("proc connector: recv", err);
      }
      continue;
    }
    const double arrived = mono_now();
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
      case PROC_EVENT_COMM: {
        // Apply to this TID at once; the timing line comes after the apply.
        const int tgid = static_cast<int>(ev.event_data.comm.process_tgid);
        const int tid = static_cast<int>(ev.event_data.comm.process_pid);
        one(tgid, tid, "comm");
        if (managed.contains(tid)) {
          char line[160];
          // ev.timestamp_ns is CLOCK_MONOTONIC (ktime_get_ns) at the rename.
          const double ev_at = static_cast<double>(ev.timestamp_ns) / 1e9;
          std::snprintf(line, sizeof(line),
                        "timing: comm event %d/%d at %.6f, received %.6f (+%.0f us), handled %.6f (+%.0f us)", tgid,
                        tid, ev_at, arrived, (arrived - ev_at) * 1e6, mono_now(), (mono_now() - arrived) * 1e6);
          log(line);
        }
        break;
      }
      case PROC_EVENT_EXIT: {
        auto it = managed.find(static_cast<int>(ev.event_data.exit.process_pid));
        if (it != managed.end()) {
          if (cache && it->second.second > 0) {
            sched_ledger_charge(it->second.first, -it->second.second);
          }
          managed.erase(it);
        }
        break;
      }
      default: break;
      }
    }
  }
  flush();
  (void)subscribe(fd.get(), false);
  log("watcher stopped");
  return {};
}

} // namespace mltune
