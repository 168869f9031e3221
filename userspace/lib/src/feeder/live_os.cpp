// The live FeederOs (feeder/internal.hpp): thread affinity by syscall, the
// kthreads and user threads of /proc, the sched_ext scheduler through its
// loader, the watcher process, the kernel log.
#include "feeder/internal.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"
#include "feeder/busy.hpp"

#ifdef MLTUNE_HAVE_SCX
#include "mltune_scx.h"
#endif

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace mltune::feeder {

namespace {

void live_kmsg(const std::string &line) {
  if (const UniqueFd fd(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC)); fd) {
    const std::string l = "<4>mltune: " + line + "\n";
    (void)!::write(fd.get(), l.data(), l.size());
  }
  std::fprintf(stderr, "mltune: %s\n", line.c_str());
}

} // namespace

std::vector<FeederTask> kthreads(const Sysroot &root) {
  std::vector<FeederTask> out;
  for (const int pid : proc::pids(root.list_dir("/proc"))) {
    auto st = root.read("/proc/" + std::to_string(pid) + "/stat");
    if (!st) {
      continue;
    }
    auto ps = proc::parse_stat(*st);
    const auto flags = ps ? ps->field<unsigned>(proc::k_stat_flags) : std::nullopt;
    if (flags && (*flags & proc::k_pf_kthread) != 0) {
      out.push_back({pid, ps->comm, *flags});
    }
  }
  return out;
}

namespace {

bool get_affinity(int pid, CpuSet &out) {
  CpuSet::Native set;
  if (::sched_getaffinity(pid, CpuSet::Native::size(), set.get()) != 0) {
    return false;
  }
  out = CpuSet::from_native(set);
  return true;
}

bool set_affinity(int pid, const CpuSet &s) {
  const CpuSet::Native set = s.native();
  return ::sched_setaffinity(pid, CpuSet::Native::size(), set.get()) == 0;
}

// The live sweep: user threads (kthreads are move_kthreads()'s) outside the
// feeder cgroup; /proc/PID/task/TID/stat field 41 is the policy.
std::vector<FeederIntruder> live_threads(const Sysroot &root, const std::string &feeder_cg) {
  constexpr size_t k_stat_policy = 41;
  std::vector<FeederIntruder> out;
  for (const int pid : proc::pids(root.list_dir("/proc"))) {
    const std::string pdir = "/proc/" + std::to_string(pid);
    for (const int tid : proc::pids(root.list_dir(pdir + "/task"))) {
      const std::string dir = pdir + "/task/" + std::to_string(tid);
      auto st = root.read(dir + "/stat");
      auto ps = st ? proc::parse_stat(*st) : std::nullopt;
      const auto policy = ps ? ps->field<int>(k_stat_policy) : std::nullopt;
      const auto flags = ps ? ps->field<unsigned>(proc::k_stat_flags) : std::nullopt;
      if (!policy || !flags || (*flags & (proc::k_pf_kthread | proc::k_pf_no_setaffinity)) != 0) {
        continue;
      }
      if (cgroup::is_within(cgroup::of_task(root, dir), feeder_cg)) {
        continue;
      }
      out.push_back({tid, -1, *policy, ps->comm});
    }
  }
  return out;
}

// ---- sched_ext --------------------------------------------------------------

#ifdef MLTUNE_HAVE_SCX
Result<mltune_feeder_cfg> scx_cfg(const Sysroot &root, const FeederState &s) {
  mltune_feeder_cfg c{};
  struct stat st {};
  const UniqueFd dir = detail::open_node(root, cgroup::path(s.cgroup), O_PATH | O_DIRECTORY);
  if (!dir || ::fstat(dir.get(), &st) != 0) {
    return sys_error(cgroup::path(s.cgroup), errno);
  }
  c.cgid = st.st_ino;
  unsigned level = 0;
  for (char ch : s.cgroup) {
    level += ch == '/' ? 1U : 0U;
  }
  c.level = level;
  for (unsigned cpu : s.cpus.cpus()) {
    if (cpu >= MLTUNE_FEEDER_MAX_CPUS) {
      return input_error("CPU " + std::to_string(cpu) + " beyond the scheduler's limit");
    }
    c.mask[cpu / 64] |= 1ULL << (cpu % 64);
  }
  return c;
}
#endif

Status live_scx_attach(const Sysroot &root, const FeederState &s, bool update) {
#ifdef MLTUNE_HAVE_SCX
  auto c = scx_cfg(root, s);
  if (!c) {
    return c.error();
  }
  char err[256] = "";
  mltune_feeder_cfg old{};
  if (update && mltune_scx_read_cfg(k_pin_dir, &old, err, sizeof(err)) == 0) {
    c->gen = old.gen + 1;
  }
  int ret = update ? mltune_scx_update(k_pin_dir, &*c, err, sizeof(err))
                   : mltune_scx_attach(k_pin_dir, &*c, err, sizeof(err));
  if (ret) {
    return failure(err, -ret);
  }
  return {};
#else
  (void)root;
  (void)s;
  (void)update;
  return failure("this mltunectl was built without the sched_ext scheduler");
#endif
}

void live_scx_detach() {
#ifdef MLTUNE_HAVE_SCX
  char err[256];
  (void)mltune_scx_detach(k_pin_dir, err, sizeof(err));
#endif
}

// Used only when the sched_ext scheduler is built (MLTUNE_HAVE_SCX).
[[maybe_unused]] std::string exit_kind_name(int k) {
  switch (k) {
  case 1: return "done";
  case 64: return "unregistered";
  case 65: return "unregistered from BPF";
  case 66: return "unregistered from the kernel";
  case 67: return "disabled by SysRq-S";
  case 1024: return "runtime error";
  case 1025: return "scheduler error";
  case 1026: return "watchdog stall";
  default: return "exit kind " + std::to_string(k);
  }
}

[[maybe_unused]] std::string read_scx_state() {
  std::string v;
  if (FILE *f = std::fopen("/sys/kernel/sched_ext/state", "re")) {
    char buf[64] = "";
    if (std::fgets(buf, sizeof(buf), f) != nullptr) {
      v = std::string(trim(buf));
    }
    std::fclose(f);
  }
  return v;
}

std::string live_scx_exit_reason() {
#ifdef MLTUNE_HAVE_SCX
  mltune_feeder_uei u{};
  char err[256] = "";
  // The kernel calls ops.exit while the state reads "disabling": wait for the
  // exit info (up to 3 s) rather than report an ejection without its reason.
  for (int i = 0; i < 150; ++i) {
    const bool disabled = read_scx_state() == "disabled";
    if (mltune_scx_read_uei(k_pin_dir, &u, err, sizeof(err)) != 0) {
      return std::string("exit reason unavailable (") + err + ")";
    }
    if (u.kind != 0 || disabled) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (u.kind == 0) {
    return "scheduler no longer active (no exit info)";
  }
  std::string r = exit_kind_name(u.kind);
  if (u.reason[0] != '\0') {
    r += ": " + std::string(u.reason, strnlen(u.reason, sizeof(u.reason)));
  }
  if (u.msg[0] != '\0') {
    r += " (" + std::string(u.msg, strnlen(u.msg, sizeof(u.msg))) + ")";
  }
  return r;
#else
  return "unknown";
#endif
}

} // namespace

bool scx_is_ours(const Sysroot &root) {
  auto st = root.read_value(std::string(k_scx_dir) + "/state");
  auto ops = root.read_value(std::string(k_scx_dir) + "/root/ops");
  return st && *st == "enabled" && ops && *ops == k_scx_name;
}

namespace {

void live_start_watcher() {
  pid_t pid = ::fork();
  if (pid != 0) {
    return;
  }
  ::setsid();
  pid_t pid2 = ::fork(); // detach completely: reparented to init
  if (pid2 != 0) {
    ::_exit(0);
  }
  // No inherited descriptor may stay open: a caller reading our output
  // (sh's $(...)) waits for EOF on every copy of its pipe.
  int fd = ::open("/dev/null", O_RDWR);
  if (fd >= 0) {
    ::dup2(fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (fd > 2) {
      ::close(fd);
    }
  }
  for (int i = 3; i < 1024; ++i) {
    (void)::close(i);
  }
  ::execl("/proc/self/exe", "mltunectl", "feeder", "watch", static_cast<char *>(nullptr));
  ::_exit(127);
}

bool live_scx_stats(FeederScxStats &out) {
#ifdef MLTUNE_HAVE_SCX
  mltune_feeder_stats s{};
  char err[256];
  if (mltune_scx_read_stats(k_pin_dir, &s, err, sizeof(err)) == 0) {
    out = {s.foreign,    s.stray,       s.forced,     s.preempted, s.feeder_enq,
           s.normal_enq, s.kthread_enq, s.rt_foreign, s.dl_foreign};
    return true;
  }
#else
  (void)out;
#endif
  return false;
}

std::vector<FeederIntruder> live_scx_intruders() {
  std::vector<FeederIntruder> out;
#ifdef MLTUNE_HAVE_SCX
  std::vector<__u32> tids(MLTUNE_FEEDER_MAX_INTRUDERS);
  std::vector<mltune_feeder_intruder> recs(MLTUNE_FEEDER_MAX_INTRUDERS);
  char err[256];
  const int n = mltune_scx_read_intruders(k_pin_dir, tids.data(), recs.data(), tids.size(), err, sizeof(err));
  for (int i = 0; i < n; ++i) {
    const auto &r = recs[static_cast<size_t>(i)];
    out.push_back({static_cast<int>(tids[static_cast<size_t>(i)]), static_cast<int>(r.cpu), static_cast<int>(r.policy),
                   std::string(r.comm, ::strnlen(r.comm, sizeof(r.comm)))});
  }
#endif
  return out;
}

void live_scx_forget([[maybe_unused]] int tid) {
#ifdef MLTUNE_HAVE_SCX
  char err[256];
  (void)mltune_scx_forget_intruder(k_pin_dir, static_cast<__u32>(tid), err, sizeof(err));
#endif
}

class LiveFeederOs final : public FeederOs {
public:
  explicit LiveFeederOs(Sysroot root) : root_(std::move(root)), on_node_(root_.acts_on_node()) {}
  std::vector<FeederTask> kthreads() override { return on_node_ ? feeder::kthreads(root_) : std::vector<FeederTask>{}; }
  bool get_affinity(int pid, CpuSet &out) override { return feeder::get_affinity(pid, out); }
  bool set_affinity(int pid, const CpuSet &cpus) override { return feeder::set_affinity(pid, cpus); }
  Status scx_attach(const FeederState &s, bool update) override { return live_scx_attach(root_, s, update); }
  void scx_detach() override { live_scx_detach(); }
  std::string scx_exit_reason() override { return live_scx_exit_reason(); }
  bool scx_stats(FeederScxStats &out) override { return live_scx_stats(out); }
  std::vector<FeederIntruder> scx_intruders() override { return live_scx_intruders(); }
  void scx_forget(int tid) override { live_scx_forget(tid); }
  std::vector<FeederIntruder> threads(const std::string &feeder_cg) override {
    return on_node_ ? live_threads(root_, feeder_cg) : std::vector<FeederIntruder>{};
  }
  void start_watcher() override {
    if (on_node_) {
      live_start_watcher();
    }
  }
  void kmsg(const std::string &line) override { live_kmsg(line); }
  Status while_busy(const CpuSet &cpus, const std::string &cg, const std::function<Status()> &fn,
                    std::string &note) override {
    return feeder::while_busy(root_, cpus, cg, fn, note);
  }

private:
  Sysroot root_;
  bool on_node_; // root_.acts_on_node(), read once: each asks the kernel four times
};

} // namespace

} // namespace mltune::feeder

namespace mltune {

std::unique_ptr<FeederOs> make_live_feeder_os(const Sysroot &root) {
  return std::make_unique<feeder::LiveFeederOs>(root);
}

} // namespace mltune
