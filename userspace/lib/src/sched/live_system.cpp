// The live SchedSystem (mltune/sched.hpp): the node's threads through
// /proc, sched_setattr/sched_getattr and sched_setaffinity, cpuset
// partitions through cgroupfs.
#include "mltune/sched.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace mltune {

namespace {

// struct sched_attr, SCHED_ATTR_SIZE_VER0 (bookworm's glibc has no wrapper).
struct KernelSchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(KernelSchedAttr) == 48);

class LiveSchedSystem final : public SchedSystem {
public:
  explicit LiveSchedSystem(Sysroot root) : root_(std::move(root)), on_node_(root_.acts_on_node()) {}
  [[nodiscard]] const Sysroot &root() const override { return root_; }

  [[nodiscard]] std::vector<int> pids() const override { return proc::pids(root_.list_dir("/proc")); }
  [[nodiscard]] std::vector<int> tids(int pid) const override {
    return proc::pids(root_.list_dir("/proc/" + std::to_string(pid) + "/task"));
  }

  [[nodiscard]] Result<ThreadInfo> thread(int pid, int tid) const override {
    const std::string base = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
    ThreadInfo t;
    t.pid = pid;
    t.tid = tid;
    auto comm = root_.read(base + "/comm");
    if (!comm) {
      return failure("thread " + std::to_string(tid) + " is gone", ESRCH);
    }
    t.comm = *comm;
    if (!t.comm.empty() && t.comm.back() == '\n') {
      t.comm.pop_back();
    }
    if (auto stat = root_.read(base + "/stat")) {
      if (auto ps = proc::parse_stat(*stat)) {
        t.starttime = ps->field<uint64_t>(proc::k_stat_starttime).value_or(0);
      }
    }
    t.exe = root_.read_link("/proc/" + std::to_string(pid) + "/exe").value_or("");
    if (auto cmd = root_.read("/proc/" + std::to_string(pid) + "/cmdline")) {
      t.cmdline = *cmd;
      while (!t.cmdline.empty() && t.cmdline.back() == '\0') {
        t.cmdline.pop_back();
      }
      std::ranges::replace(t.cmdline, '\0', ' ');
    }
    t.cgroup = cgroup::of_task(root_, base);
    if (t.cgroup.empty()) {
      t.cgroup = "/";
    }
    return t;
  }

  [[nodiscard]] std::vector<ThreadInfo> thread_names() const override {
    std::vector<ThreadInfo> out;
    for (auto &t : proc::task_names(root_)) {
      ThreadInfo i;
      i.pid = t.pid;
      i.tid = t.tid;
      i.comm = std::move(t.comm);
      out.push_back(std::move(i));
    }
    return out;
  }

  [[nodiscard]] Result<std::string> comm(int pid, int tid) const override {
    auto comm = root_.read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    if (!comm) {
      return failure("thread " + std::to_string(tid) + " is gone", ESRCH);
    }
    if (!comm->empty() && comm->back() == '\n') {
      comm->pop_back();
    }
    return std::move(*comm);
  }

  [[nodiscard]] Result<SchedAttr> get(int tid) const override {
    if (!on_node_) {
      return fake_get(tid);
    }
    KernelSchedAttr ka{};
    if (syscall(SYS_sched_getattr, tid, &ka, sizeof(ka), 0) != 0) {
      return sys_error("sched_getattr(" + std::to_string(tid) + ")", errno);
    }
    SchedAttr a;
    a.policy = static_cast<SchedPolicy>(ka.sched_policy);
    a.flags = ka.sched_flags & (k_sched_flag_reset_on_fork | k_sched_flag_dl_overrun);
    a.nice = ka.sched_nice;
    a.priority = static_cast<int>(ka.sched_priority);
    if (a.policy == SchedPolicy::deadline) {
      a.runtime = ka.sched_runtime;
      a.deadline = ka.sched_deadline;
      a.period = ka.sched_period;
    }
    return a;
  }

  [[nodiscard]] Status set(int tid, const SchedAttr &a) override {
    if (!on_node_) {
      return root_.require_namespaces("sched_setattr", {"pid", "net"});
    }
    KernelSchedAttr ka{};
    ka.size = sizeof(ka);
    ka.sched_policy = static_cast<uint32_t>(a.policy);
    ka.sched_flags = a.flags;
    ka.sched_nice = a.nice;
    ka.sched_priority = static_cast<uint32_t>(a.priority);
    ka.sched_runtime = a.runtime;
    ka.sched_deadline = a.deadline;
    ka.sched_period = a.period;
    if (syscall(SYS_sched_setattr, tid, &ka, 0) != 0) {
      return sys_error("sched_setattr(" + std::to_string(tid) + ", " + a.describe() + ")", errno);
    }
    return {};
  }

  [[nodiscard]] Status move_thread(int tid, const std::string &cg) override {
    return root_.write_value(cgroup::path(cg, "cgroup.threads"), std::to_string(tid));
  }

  [[nodiscard]] Result<std::string> ensure_partition(const std::string &cg, const std::string &cpus) override {
    if (auto en = cgroup::enable_cpuset(root_); !en) {
      return en.error();
    }
    if (auto st = cgroup::make(root_, cg); !st) {
      return st.error();
    }
    // Threaded, so single threads of a process can move in; cpuset is a
    // threaded controller.
    if (auto type = root_.read_value(cgroup::path(cg, "cgroup.type")); type && *type == "domain") {
      if (auto st = root_.write_value(cgroup::path(cg, "cgroup.type"), "threaded"); !st) {
        return st.error();
      }
    }
    auto cur = root_.read_value(cgroup::path(cg, "cpuset.cpus"));
    if (!cur || *cur != cpus) {
      if (auto st = root_.write_value(cgroup::path(cg, "cpuset.cpus"), cpus); !st) {
        return st.error();
      }
    }
    return cgroup::set_partition(root_, cg, "root");
  }

  [[nodiscard]] Status remove_partition(const std::string &cg) override {
    (void)cgroup::clear_partition(root_, cg);
    return cgroup::remove(root_, cg);
  }

private:
  // A fake tree cannot answer syscalls: parse /proc/PID/task/TID/sched as a
  // best effort (used by `sched list --sysroot`).
  [[nodiscard]] Result<SchedAttr> fake_get(int tid) const {
    for (int pid : pids()) {
      auto txt = root_.read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/sched");
      if (!txt) {
        continue;
      }
      SchedAttr a;
      std::istringstream in(*txt);
      std::string line;
      while (std::getline(in, line)) {
        const size_t c = line.find(':');
        if (c == std::string::npos) {
          continue;
        }
        const std::string_view k = trim(std::string_view(line).substr(0, c));
        const long long v = parse_int<long long>(trim(std::string_view(line).substr(c + 1))).value_or(0);
        if (k == "policy") {
          a.policy = static_cast<SchedPolicy>(v);
        } else if (k == "prio") {
          if (v < 100) {
            a.priority = static_cast<int>(99 - v);
          } else {
            a.nice = static_cast<int>(v - 120);
          }
        } else if (k == "dl.runtime") {
          a.runtime = static_cast<uint64_t>(v);
        } else if (k == "dl.deadline") {
          a.deadline = static_cast<uint64_t>(v);
        } else if (k == "dl.period") {
          a.period = static_cast<uint64_t>(v);
        }
      }
      if (a.policy != SchedPolicy::deadline) {
        a.runtime = a.deadline = a.period = 0;
      }
      return a;
    }
    return failure("thread " + std::to_string(tid) + " is gone", ESRCH);
  }

  Sysroot root_;
  bool on_node_; // root_.acts_on_node(): the syscalls reach the node's threads
};

} // namespace

std::unique_ptr<SchedSystem> make_live_sched_system(const Sysroot &root) {
  return std::make_unique<LiveSchedSystem>(root);
}

} // namespace mltune
