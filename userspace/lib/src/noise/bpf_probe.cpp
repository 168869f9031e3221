// The BPF noise probe: bpf/mltune_noise.bpf.c through its loader
// (bpf/mltune_observe.h).  Built only with the BPF toolchain
// (MLTUNE_HAVE_BPF); without it make_bpf_noise_probe() says so and
// measure_noise() falls back to the /proc counters.
#include "mltune/noise.hpp"

#include "mltune/node_info.hpp"

#include "noise/bpf_raw.hpp"

#ifdef MLTUNE_HAVE_BPF
#include "mltune_observe.h"
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace mltune {

RawKind raw_kind_of(unsigned kind) {
  switch (kind) {
  case MLTUNE_NOISE_IRQ: return RawKind::irq;
  case MLTUNE_NOISE_VECTOR: return RawKind::vector;
  case MLTUNE_NOISE_TIMER: return RawKind::timer;
  case MLTUNE_NOISE_TIMER_TASK: return RawKind::timer_task;
  case MLTUNE_NOISE_TIMER_DL_SERVER: return RawKind::timer_dl_server;
  case MLTUNE_NOISE_SOFTIRQ: return RawKind::softirq;
  case MLTUNE_NOISE_TASK: return RawKind::task;
  case MLTUNE_NOISE_HRTIMER: return RawKind::hrtimer;
  case MLTUNE_NOISE_WORK: return RawKind::work;
  case MLTUNE_NOISE_HRTIMER_DL_SERVER: return RawKind::hrtimer_dl_server;
  case MLTUNE_NOISE_NUMA_SCAN: return RawKind::numa_scan;
  default: return RawKind::timer_cb;
  }
}

RawNoiseEntry raw_entry(const mltune_noise_key &k, const mltune_noise_val &v) {
  RawNoiseEntry e;
  e.cpu = k.cpu;
  e.kind = raw_kind_of(k.kind);
  e.id = k.id;
  e.name.assign(v.name, strnlen(v.name, sizeof(v.name)));
  e.count = v.count;
  if (e.kind != RawKind::hrtimer && e.kind != RawKind::hrtimer_dl_server && e.kind != RawKind::work &&
      e.kind != RawKind::timer_cb && e.kind != RawKind::numa_scan) {
    e.ns = v.ns;
  }
  e.bh_ns = v.bh_ns;
  e.cgid = v.cgid;
  e.tgid = static_cast<int>(v.tgid);
  e.flags = v.flags;
  return e;
}

void add_running_tasks(RawNoise &raw, const std::vector<mltune_noise_pcpu> &pcpu, const CpuSet &cpus,
                       std::uint64_t start_ns, std::uint64_t stop_ns) {
  for (unsigned cpu = 0; cpu < pcpu.size(); ++cpu) {
    const auto &s = pcpu[cpu];
    if (!cpus.test(cpu) || s.task_pid == 0 || s.task_ts == 0 || s.task_ts > stop_ns) {
      continue;
    }
    const std::uint64_t begin = std::max<std::uint64_t>(s.task_ts, start_ns);
    std::uint64_t dur = stop_ns > begin ? stop_ns - begin : 0;
    const std::uint64_t nested = (s.hard_ns - s.task_hard_base) + (s.soft_ns - s.task_soft_base);
    dur = dur > nested ? dur - nested : 0;
    RawNoiseEntry *e = nullptr;
    for (auto &x : raw.entries) {
      if (x.cpu == cpu && x.kind == RawKind::task && x.id == s.task_pid) {
        e = &x;
        break;
      }
    }
    if (e == nullptr) {
      RawNoiseEntry n;
      n.cpu = cpu;
      n.kind = RawKind::task;
      n.id = s.task_pid;
      n.name.assign(s.task_comm, strnlen(s.task_comm, sizeof(s.task_comm)));
      n.ns = 0;
      n.cgid = s.task_cgid;
      n.tgid = static_cast<int>(s.task_tgid);
      n.flags = s.task_flags;
      raw.entries.push_back(std::move(n));
      e = &raw.entries.back();
    }
    e->ns = e->ns.value_or(0) + dur;
  }
}

#ifdef MLTUNE_HAVE_BPF

namespace {

std::uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

class BpfNoiseProbe final : public NoiseProbe {
public:
  BpfNoiseProbe() = default;
  BpfNoiseProbe(const BpfNoiseProbe &) = delete;
  BpfNoiseProbe &operator=(const BpfNoiseProbe &) = delete;
  ~BpfNoiseProbe() override { mltune_noise_close(n_); }

  [[nodiscard]] std::string name() const override { return "bpf"; }

  Status start(const CpuSet &cpus) override {
    cpus_ = cpus;
    cfg_ = {};
    for (unsigned c : cpus.cpus()) {
      if (c >= MLTUNE_NOISE_MAX_CPUS) {
        return input_error("CPU " + std::to_string(c) + " beyond the BPF probe's limit");
      }
      cfg_.mask[c / 64] |= 1ULL << (c % 64);
    }
    char missing[512] = "";
    char err[256] = "";
    if (int ret = mltune_noise_open(&n_, &cfg_, missing, sizeof missing, err, sizeof err); ret != 0) {
      std::string msg = std::string("BPF: ") + err;
      if (-ret == EPERM || -ret == EACCES) {
        msg += " (why: " + bpf_refusal_reason(Sysroot("/")) + ")";
      }
      return failure(msg, -ret);
    }
    missing_ = missing;
    cfg_.enabled = 1;
    cfg_.start_ns = monotonic_ns();
    if (int ret = mltune_noise_set_cfg(n_, &cfg_, err, sizeof err); ret != 0) {
      return failure(std::string("BPF: ") + err, -ret);
    }
    return {};
  }

  Result<RawNoise> stop() override {
    char err[256] = "";
    cfg_.enabled = 0;
    if (int ret = mltune_noise_set_cfg(n_, &cfg_, err, sizeof err); ret != 0) {
      return failure(std::string("BPF: ") + err, -ret);
    }
    const std::uint64_t stop_ns = monotonic_ns();
    RawNoise raw;
    raw.missing = missing_;
    auto cb = [](void *ctx, const mltune_noise_key *k, const mltune_noise_val *v) -> int {
      static_cast<RawNoise *>(ctx)->entries.push_back(raw_entry(*k, *v));
      return 0;
    };
    if (int ret = mltune_noise_read(n_, cb, &raw, err, sizeof err); ret != 0) {
      return failure(std::string("BPF: ") + err, -ret);
    }
    const int ncpu = mltune_observe_possible_cpus();
    if (ncpu <= 0) {
      return failure("BPF: cannot count the possible CPUs");
    }
    std::vector<mltune_noise_pcpu> pcpu(static_cast<size_t>(ncpu));
    if (int ret = mltune_noise_read_pcpu(n_, pcpu.data(), ncpu, err, sizeof err); ret != 0) {
      return failure(std::string("BPF: ") + err, -ret);
    }
    for (unsigned c = 0; c < pcpu.size(); ++c) {
      if (cpus_.test(c)) {
        raw.switches[c] = pcpu[c].switches;
        raw.dropped += pcpu[c].dropped;
      }
    }
    add_running_tasks(raw, pcpu, cpus_, cfg_.start_ns, stop_ns);
    mltune_noise_close(n_);
    n_ = nullptr;
    return raw;
  }

private:
  mltune_noise *n_ = nullptr;
  mltune_noise_cfg cfg_{};
  CpuSet cpus_;
  std::string missing_;
};

} // namespace

bool noise_bpf_built() {
  return true;
}

Result<std::unique_ptr<NoiseProbe>> make_bpf_noise_probe(const Sysroot &root) {
  if (!root.is_live()) {
    return failure("BPF counts only the live node, not --sysroot " + root.root().string());
  }
  return std::unique_ptr<NoiseProbe>(std::make_unique<BpfNoiseProbe>());
}

#else

bool noise_bpf_built() {
  return false;
}

Result<std::unique_ptr<NoiseProbe>> make_bpf_noise_probe(const Sysroot & /*root*/) {
  return failure("this mltunectl was built without the BPF toolchain");
}

#endif

} // namespace mltune
