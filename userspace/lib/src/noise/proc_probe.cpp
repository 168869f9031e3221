// The /proc noise probe: deltas of the kernel's own counters over the window
// (the fallback where the BPF programs cannot load).
//   /proc/interrupts            device IRQs and vectors, per CPU
//   /proc/softirqs              softirqs, per CPU
//   /proc/PID/task/TID/schedstat run time and timeslices of every thread,
//                               charged to the CPU it last ran on (stat
//                               field 39): exact for per-CPU kthreads,
//                               approximate for a thread that moved
#include "mltune/noise.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "mltune/parse.hpp"

#include <tuple>

namespace mltune {

namespace {

// The action names of a /proc/interrupts IRQ row, after its counts:
// "IR-PCI-MSIX-0000:00:02.0   0-edge      eth0-rx-0" -> "eth0-rx-0".
std::string irq_name(const std::vector<std::string_view> &desc) {
  for (size_t i = 1; i < desc.size(); ++i) {
    const auto t = desc[i];
    const auto dash = t.find('-');
    if (dash != std::string_view::npos && dash + 1 < t.size() &&
        (dash == 0 || parse_int<unsigned long>(t.substr(0, dash)))) {
      std::string name;
      for (size_t j = i + 1; j < desc.size(); ++j) {
        name += (name.empty() ? "" : " ") + std::string(desc[j]);
      }
      return name;
    }
  }
  return desc.size() >= 2 ? std::string(desc.back()) : "";
}

using Key = std::tuple<unsigned, RawKind, std::uint64_t, std::string>;

struct TaskSnap {
  std::string comm;
  int tgid = 0;
  unsigned flags = 0;
  unsigned cpu = 0;
  std::uint64_t run_ns = 0;
  std::uint64_t slices = 0;
  std::string cgroup;
};

struct Snapshot {
  std::map<Key, std::uint64_t> counts;
  std::map<int, TaskSnap> tasks;
};

Status read_interrupts(const Sysroot &root, Snapshot &s) {
  auto text = root.read("/proc/interrupts");
  if (!text) {
    return text.error();
  }
  auto table = proc::parse_counters(*text, "/proc/interrupts");
  if (!table) {
    return table.error();
  }
  for (const auto &r : table->rows) {
    RawKind kind = RawKind::vector;
    std::uint64_t id = 0;
    std::string name(r.label);
    if (auto irq = parse_int<std::uint64_t>(r.label)) {
      kind = RawKind::irq;
      id = *irq;
      name = irq_name(r.desc);
    } else if (r.label == "LOC") {
      kind = RawKind::timer;
    }
    for (size_t c = 0; c < table->cpus.size(); ++c) {
      s.counts[{table->cpus[c], kind, id, name}] = r.counts[c];
    }
  }
  return {};
}

Status read_softirqs(const Sysroot &root, Snapshot &s) {
  auto text = root.read("/proc/softirqs");
  if (!text) {
    return text.error();
  }
  auto table = proc::parse_counters(*text, "/proc/softirqs");
  if (!table) {
    return table.error();
  }
  for (const auto &r : table->rows) {
    for (size_t c = 0; c < table->cpus.size(); ++c) {
      s.counts[{table->cpus[c], RawKind::softirq, 0, std::string(r.label)}] = r.counts[c];
    }
  }
  return {};
}

void read_tasks(const Sysroot &root, Snapshot &s) {
  for (const int pid : proc::pids(root.list_dir("/proc"))) {
    const std::string pdir = "/proc/" + std::to_string(pid);
    const std::string cg = cgroup::of_task(root, pdir);
    for (const int tid : proc::pids(root.list_dir(pdir + "/task"))) {
      const std::string dir = pdir + "/task/" + std::to_string(tid);
      auto text = root.read(dir + "/stat");
      auto sched = root.read(dir + "/schedstat");
      if (!text || !sched) {
        continue; // exited meanwhile
      }
      const auto stat = proc::parse_stat(*text);
      const auto st = split_words(*sched);
      const auto cpu = stat ? stat->field<unsigned>(proc::k_stat_processor) : std::nullopt;
      if (!cpu || st.size() < 3) {
        continue;
      }
      TaskSnap ts;
      ts.comm = stat->comm;
      ts.tgid = pid;
      ts.flags = stat->field<unsigned>(proc::k_stat_flags).value_or(0);
      ts.cpu = *cpu;
      ts.run_ns = parse_int<std::uint64_t>(st[0]).value_or(0);
      ts.slices = parse_int<std::uint64_t>(st[2]).value_or(0);
      ts.cgroup = cg;
      s.tasks[tid] = std::move(ts);
    }
  }
}

Result<Snapshot> snapshot(const Sysroot &root) {
  Snapshot s;
  if (auto st = read_interrupts(root, s); !st) {
    return st.error();
  }
  if (auto st = read_softirqs(root, s); !st) {
    return st.error();
  }
  read_tasks(root, s);
  return s;
}

class ProcNoiseProbe final : public NoiseProbe {
public:
  explicit ProcNoiseProbe(Sysroot root) : root_(std::move(root)) {}
  [[nodiscard]] std::string name() const override { return "proc"; }

  Status start(const CpuSet &cpus) override {
    cpus_ = cpus;
    auto s = snapshot(root_);
    if (!s) {
      return s.error();
    }
    before_ = std::move(*s);
    return {};
  }

  Result<RawNoise> stop() override {
    auto after = snapshot(root_);
    if (!after) {
      return after.error();
    }
    RawNoise raw;
    for (const auto &[k, v] : after->counts) {
      const auto &[cpu, kind, id, name] = k;
      if (!cpus_.test(cpu)) {
        continue;
      }
      auto it = before_.counts.find(k);
      const std::uint64_t was = it == before_.counts.end() ? 0 : it->second;
      if (v > was) {
        RawNoiseEntry e;
        e.cpu = cpu;
        e.kind = kind;
        e.id = id;
        e.name = name;
        e.count = v - was;
        raw.entries.push_back(std::move(e));
      }
    }
    for (const auto &[tid, t] : after->tasks) {
      if (!cpus_.test(t.cpu)) {
        continue;
      }
      auto it = before_.tasks.find(tid);
      const std::uint64_t run0 = it == before_.tasks.end() ? 0 : it->second.run_ns;
      const std::uint64_t sl0 = it == before_.tasks.end() ? 0 : it->second.slices;
      if (t.run_ns <= run0 && t.slices <= sl0) {
        continue;
      }
      RawNoiseEntry e;
      e.cpu = t.cpu;
      e.kind = RawKind::task;
      e.id = static_cast<std::uint64_t>(tid);
      e.name = t.comm;
      e.count = t.slices > sl0 ? t.slices - sl0 : 0;
      e.ns = t.run_ns > run0 ? t.run_ns - run0 : 0;
      e.cgroup = t.cgroup;
      e.tgid = t.tgid;
      e.flags = t.flags;
      raw.entries.push_back(std::move(e));
    }
    raw.notes.emplace_back("counts from /proc: no time per interrupt; tasks charged to the CPU they last ran on");
    return raw;
  }

private:
  Sysroot root_;
  CpuSet cpus_;
  Snapshot before_;
};

} // namespace

std::unique_ptr<NoiseProbe> make_proc_noise_probe(const Sysroot &root) {
  return std::make_unique<ProcNoiseProbe>(root);
}

} // namespace mltune
