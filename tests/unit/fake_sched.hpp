// An in-memory SchedSystem for unit tests: threads with their attributes and
// cgroups on top of a fake sysroot (for the admission ledger's sysctls,
// cgroup partitions and the state file).  Built on a FakeSysroot, it also
// writes each thread's name to the fake procfs, where the watcher's name
// filter reads it.
#pragma once

#include "fake_sysroot.hpp"
#include "mltune/sched.hpp"

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mltune::test {

class FakeSched final : public SchedSystem {
public:
  explicit FakeSched(Sysroot root) : root_(std::move(root)) {}
  explicit FakeSched(const FakeSysroot &fake) : fake_(&fake), root_(fake.root()) {}

  void add(int pid, int tid, const std::string &comm, SchedAttr a = {}) {
    ThreadInfo t;
    t.pid = pid;
    t.tid = tid;
    t.exe = "/usr/bin/python3";
    t.cmdline = "python3 train.py";
    t.cgroup = "/";
    t.starttime = 1000 + static_cast<uint64_t>(tid);
    threads_[tid] = {t, a};
    rename(tid, comm);
  }
  void rename(int tid, const std::string &comm) {
    auto &t = threads_.at(tid).first;
    t.comm = comm;
    if (fake_ != nullptr) {
      fake_->set("/proc/" + std::to_string(t.pid) + "/task/" + std::to_string(tid) + "/comm", comm + "\n");
    }
  }
  void kill(int tid) { threads_.erase(tid); }
  [[nodiscard]] const SchedAttr &attr(int tid) const { return threads_.at(tid).second; }
  [[nodiscard]] const std::string &cgroup(int tid) const { return threads_.at(tid).first.cgroup; }

  [[nodiscard]] const Sysroot &root() const override { return root_; }
  [[nodiscard]] std::vector<int> pids() const override {
    std::set<int> s;
    for (const auto &[tid, t] : threads_) {
      s.insert(t.first.pid);
    }
    return {s.begin(), s.end()};
  }
  [[nodiscard]] std::vector<int> tids(int pid) const override {
    std::vector<int> out;
    for (const auto &[tid, t] : threads_) {
      if (t.first.pid == pid) {
        out.push_back(tid);
      }
    }
    return out;
  }
  [[nodiscard]] Result<ThreadInfo> thread(int pid, int tid) const override {
    auto it = threads_.find(tid);
    if (it == threads_.end() || it->second.first.pid != pid) {
      return failure("gone", ESRCH);
    }
    return it->second.first;
  }
  [[nodiscard]] Result<SchedAttr> get(int tid) const override {
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      return failure("gone", ESRCH);
    }
    return it->second.second;
  }
  Status set(int tid, const SchedAttr &a) override {
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      return failure("gone", ESRCH);
    }
    if (refuse.contains(tid)) {
      return failure("sched_setattr: Operation not permitted", EPERM);
    }
    ++sets;
    ++sets_of[tid];
    it->second.second = a;
    return {};
  }
  Status move_thread(int tid, const std::string &cg) override {
    threads_.at(tid).first.cgroup = cg;
    return {};
  }
  Result<std::string> ensure_partition(const std::string &cg, const std::string &cpus) override {
    ++partitions_made;
    made[cg] = cpus;
    return std::string("root");
  }
  Status remove_partition(const std::string &cg) override {
    made.erase(cg);
    return {};
  }

  int sets = 0;               // set() calls
  std::map<int, int> sets_of; // set() calls per thread
  int partitions_made = 0;
  std::set<int> refuse; // set() fails with EPERM for these threads
  std::map<std::string, std::string> made;

private:
  const FakeSysroot *fake_ = nullptr;
  Sysroot root_;
  std::map<int, std::pair<ThreadInfo, SchedAttr>> threads_;
};

} // namespace mltune::test
