// The watcher: proc connector (NETLINK_CONNECTOR, CN_IDX_PROC) fork, exec
// and comm events drive the rules for threads as they appear and get named.
// libnl has no connector helpers, so this is a raw netlink socket
// (LiveProcConnector, behind ProcEventSource so tests can script events);
// Watcher holds the state between events and handles them one by one.
#include "base/unique_fd.hpp"
#include "internal.hpp"
#include "mltune/sched.hpp"

#include <algorithm>
#include <array>
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

// Appends the proc events of one recv()ed buffer to `out`.
void decode(const char *buf, size_t n, std::vector<ProcEvent> &out) {
  auto len = static_cast<unsigned>(n);
  for (const auto *nh = reinterpret_cast<const nlmsghdr *>(buf); NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
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
    ProcEvent e;
    switch (ev.what) {
    case PROC_EVENT_FORK:
      e = {ProcEvent::Kind::fork,
           static_cast<int>(ev.event_data.fork.child_tgid),
           static_cast<int>(ev.event_data.fork.child_pid),
           ev.timestamp_ns,
           {}};
      break;
    case PROC_EVENT_EXEC:
      e = {ProcEvent::Kind::exec,
           static_cast<int>(ev.event_data.exec.process_tgid),
           static_cast<int>(ev.event_data.exec.process_pid),
           ev.timestamp_ns,
           {}};
      break;
    case PROC_EVENT_COMM:
      e = {ProcEvent::Kind::comm, static_cast<int>(ev.event_data.comm.process_tgid),
           static_cast<int>(ev.event_data.comm.process_pid), ev.timestamp_ns,
           std::string(ev.event_data.comm.comm, strnlen(ev.event_data.comm.comm, sizeof(ev.event_data.comm.comm)))};
      break;
    case PROC_EVENT_EXIT:
      e = {ProcEvent::Kind::exit,
           static_cast<int>(ev.event_data.exit.process_tgid),
           static_cast<int>(ev.event_data.exit.process_pid),
           ev.timestamp_ns,
           {}};
      break;
    default: continue;
    }
    out.push_back(e);
  }
}

class LiveProcConnector final : public ProcEventSource {
public:
  explicit LiveProcConnector(int fd) : fd_(fd) {}
  [[nodiscard]] int fd() const override { return fd_.get(); }

  // Every event queued, up to k_batch datagrams per recvmmsg (the
  // connector sends one event per datagram: a recv per event would be a
  // system call per event).  timeout_ms 0: no poll, only what is queued.
  Result<ProcEventBatch> wait(int timeout_ms) override {
    ProcEventBatch b;
    if (timeout_ms != 0) {
      pollfd pfd{fd_.get(), POLLIN, 0};
      const int pr = ::poll(&pfd, 1, timeout_ms);
      if (pr < 0 && errno != EINTR) {
        return sys_error("proc connector: poll", errno);
      }
      b.idle = pr == 0;
      if (pr <= 0) {
        return b;
      }
    }
    std::array<iovec, k_batch> iov{};
    std::array<mmsghdr, k_batch> msgs{};
    for (size_t i = 0; i < k_batch; ++i) {
      iov[i] = {bufs_[i].data(), bufs_[i].size()};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int n = ::recvmmsg(fd_.get(), msgs.data(), k_batch, MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == ENOBUFS) {
        b.lost = true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        b.idle = timeout_ms == 0;
      } else if (errno != EINTR) {
        return sys_error("proc connector: recvmmsg", errno);
      }
      return b;
    }
    for (int i = 0; i < n; ++i) {
      decode(bufs_[static_cast<size_t>(i)].data(), msgs[static_cast<size_t>(i)].msg_len, b.events);
    }
    return b;
  }
  void unsubscribe() override { (void)subscribe(fd_.get(), false); }

private:
  static constexpr size_t k_batch = 64;
  UniqueFd fd_;
  // One event is about 100 bytes; a datagram holds one.
  struct alignas(nlmsghdr) Buf : std::array<char, 1024> {};
  std::array<Buf, k_batch> bufs_{};
};

// The watcher between events: rules, the threads it gave a policy, and the
// cached ledger and deferred state records (SchedWatchCache).
class Watcher {
public:
  Watcher(SchedSystem &sys, std::span<const SchedRule> rules, const WatchOptions &opt)
      : sys_(sys), rules_(rules), opt_(opt), cache_(opt.sched.ledger_ttl_ms > 0) {
    scan_ = opt.sched;
    scan_.watch = sched_watch_cache();
    hot_ = scan_;
    // Events: the state file is written off the event path (flush below).
    hot_.defer_state = true;
  }

  void log(const std::string &s) const {
    if (opt_.log) {
      opt_.log(s);
    }
  }
  // The initial one-shot apply (and the rescan after lost events).
  void scan() {
    auto rep = sched_apply(sys_, rules_, scan_);
    if (!rep) {
      log("initial scan: " + rep.error().message);
      return;
    }
    note(*rep);
  }
  void start() {
    scan();
    if (cache_) {
      sched_ledger_refresh(*hot_.watch, sys_);
    }
    log("watching proc connector events (fork, exec, comm)");
  }
  // Between waits: ledger refresh and state-file flush.  `idle`: the wait
  // timed out with nothing.
  void tick(bool idle) {
    if (cache_) {
      // The ledger is kept incrementally (applies charge it, exits of our
      // threads give back); a full rescan, for DEADLINE threads others
      // created or ended, runs when idle (at most once a second) or, under a
      // constant stream of events, every 10 s -- never for a matching event.
      const int64_t age = sched_ledger_age_ms(*hot_.watch);
      if (age < 0 || (idle && age >= 1000) || age >= 10000) {
        sched_ledger_refresh(*hot_.watch, sys_);
      }
    }
    if (idle || mono_now() - last_flush_ >= 5.0) {
      flush(); // idle, or every 5 s under a stream of events
      last_flush_ = mono_now();
    }
  }
  void flush() {
    if (auto st = sched_state_flush(*hot_.watch, sys_.root()); !st) {
      log("cannot save state: " + st.error().message);
    }
  }
  void handle(const ProcEvent &ev, double arrived);

private:
  void note(const SchedReport &rep);
  bool named_by_rule(int pid, int tid) const;
  void one(int pid, int tid, const char *why);

  SchedSystem &sys_;
  std::span<const SchedRule> rules_;
  const WatchOptions &opt_;
  SchedOptions scan_; // full scans: the state file written at once
  SchedOptions hot_;  // events: deferred
  const bool cache_;
  double last_flush_ = 0;
  // Threads this watcher gave a policy; threads they create inherit their
  // name but (reset-on-fork) not their policy, and keep it that way.
  // tid -> (admission domain, DEADLINE bandwidth), given back on exit.
  std::map<int, std::pair<std::string, double>> managed_;
};

void Watcher::note(const SchedReport &rep) {
  for (const auto &a : rep.actions) {
    if (a.result == "applied" || a.result == "unchanged" || a.result == "fallback") {
      managed_[a.tid] = {a.cgroup.empty() ? "default" : a.cgroup, a.after.bandwidth()};
    }
  }
  for (const auto &n : rep.notes) {
    log(n);
  }
}

// Hot path filter: one read of the thread's comm; only a name some rule
// matches goes on to the full match (exe, cmdline, cgroup) and apply.
bool Watcher::named_by_rule(int pid, int tid) const {
  auto comm = sys_.root().read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!comm) {
    return false;
  }
  std::string c = *comm;
  if (!c.empty() && c.back() == '\n') {
    c.pop_back();
  }
  return std::ranges::any_of(rules_, [&](const SchedRule &r) { return r.matches_name(c); });
}

void Watcher::one(int pid, int tid, const char *why) {
  if (!named_by_rule(pid, tid)) {
    return;
  }
  auto rep = sched_apply_thread(sys_, rules_, pid, tid, hot_);
  if (!rep) {
    log(std::string(why) + " " + std::to_string(tid) + ": " + rep.error().message);
    return;
  }
  note(*rep);
}

void Watcher::handle(const ProcEvent &ev, double arrived) {
  switch (ev.kind) {
  case ProcEvent::Kind::fork:
    // A new thread inherits its creator's name; the kernel does not say
    // which thread created it (parent_pid is the process's parent).  Rules
    // apply to threads when they name themselves, so only new processes
    // are looked at here; threads spawned by a DEADLINE thread stay as
    // reset-on-fork made them.
    if (ev.tid == ev.pid) {
      one(ev.pid, ev.tid, "fork");
    }
    break;
  case ProcEvent::Kind::exec:
    for (int tid : sys_.tids(ev.pid)) {
      one(ev.pid, tid, "exec");
    }
    break;
  case ProcEvent::Kind::comm:
    // Apply to this TID at once; the timing line comes after the apply.
    one(ev.pid, ev.tid, "comm");
    if (managed_.contains(ev.tid)) {
      char line[160];
      // ev.timestamp_ns is CLOCK_MONOTONIC (ktime_get_ns) at the rename.
      const double ev_at = static_cast<double>(ev.timestamp_ns) / 1e9;
      std::snprintf(line, sizeof(line),
                    "timing: comm event %d/%d at %.6f, received %.6f (+%.0f us), handled %.6f (+%.0f us)", ev.pid,
                    ev.tid, ev_at, arrived, (arrived - ev_at) * 1e6, mono_now(), (mono_now() - arrived) * 1e6);
      log(line);
    }
    break;
  case ProcEvent::Kind::exit:
    if (auto it = managed_.find(ev.tid); it != managed_.end()) {
      if (cache_ && it->second.second > 0) {
        sched_ledger_charge(*hot_.watch, it->second.first, -it->second.second);
      }
      managed_.erase(it);
    }
    break;
  }
}

} // namespace

Result<std::unique_ptr<ProcEventSource>> open_proc_connector() {
  const int raw = ::socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  if (raw < 0) {
    return sys_error("proc connector: socket(NETLINK_CONNECTOR)", errno);
  }
  auto src = std::make_unique<LiveProcConnector>(raw);
  const int fd = src->fd();
  const int rcvbuf = 4 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0) {
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = CN_IDX_PROC;
  sa.nl_pid = 0;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0) {
    return sys_error("proc connector: bind(CN_IDX_PROC)", errno);
  }
  if (auto st = subscribe(fd, true); !st) {
    return st.error();
  }
  return std::unique_ptr<ProcEventSource>(std::move(src));
}

Status sched_watch(SchedSystem &sys, std::span<const SchedRule> rules, const WatchOptions &opt) {
  auto src = open_proc_connector();
  if (!src) {
    return src.error();
  }
  return sched_watch(sys, rules, opt, **src);
}

Status sched_watch(SchedSystem &sys, std::span<const SchedRule> rules, const WatchOptions &opt, ProcEventSource &src) {
  Watcher w(sys, rules, opt);
  w.start();
  while (!(opt.stop && opt.stop())) {
    auto batch = src.wait(200);
    if (!batch) {
      w.flush();
      return batch.error();
    }
    w.tick(batch->idle);
    if (batch->lost) {
      w.log("proc connector: events lost (ENOBUFS); rescanning every thread");
      w.scan();
      continue;
    }
    const double arrived = mono_now();
    for (const auto &ev : batch->events) {
      w.handle(ev, arrived);
    }
  }
  w.flush();
  src.unsubscribe();
  w.log("watcher stopped");
  return {};
}

} // namespace mltune
