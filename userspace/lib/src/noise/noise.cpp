// Noise on CPUs: the window, the choice of probe and the report (see
// mltune/noise.hpp).  The probes are in bpf_probe.cpp and proc_probe.cpp.
#include "mltune/noise.hpp"

#include "mltune/node_info.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "base/process.hpp"
#include "base/sysroot_fd.hpp"
#include "mltune/parse.hpp"

#include "mltune_noise.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

namespace mltune {

std::string_view to_string(NoiseKind k) {
  switch (k) {
  case NoiseKind::irq: return "irq";
  case NoiseKind::timer: return "timer";
  case NoiseKind::ipi: return "ipi";
  case NoiseKind::vector: return "vector";
  case NoiseKind::softirq: return "softirq";
  case NoiseKind::task: return "task";
  }
  return "?";
}

std::vector<const NoiseSource *> CpuNoise::offenders(size_t n) const {
  std::vector<const NoiseSource *> out;
  for (const auto &s : sources) { // already worst first
    if (out.size() >= n) {
      break;
    }
    if (!s.own && s.interruption && (s.count > 0 || s.cost() > 0)) {
      out.push_back(&s);
    }
  }
  return out;
}

namespace {

// Softirq vector names in the kernel's order (include/linux/interrupt.h).
constexpr std::string_view k_softirq_names[] = {"HI",       "TIMER",   "NET_TX", "NET_RX",  "BLOCK",
                                                "IRQ_POLL", "TASKLET", "SCHED",  "HRTIMER", "RCU"};

struct VecName {
  NoiseKind kind;
  std::string_view id;    // after "ipi:"/"vector:"
  std::string_view label; // /proc/interrupts row
  std::string_view name;
};

// enum mltune_noise_vec, and the /proc/interrupts rows of the same things.
constexpr VecName k_vectors[] = {
    {NoiseKind::ipi, "reschedule", "RES", "IPI reschedule"},
    {NoiseKind::ipi, "call_function", "CAL", "IPI function call"},
    {NoiseKind::ipi, "call_function_single", "", "IPI function call (single)"},
    {NoiseKind::ipi, "irq_work", "IWI", "IPI irq_work"},
    {NoiseKind::ipi, "tlb_shootdown", "TLB", "TLB shootdown"},
    {NoiseKind::vector, "thermal", "TRM", "thermal event interrupt"},
    {NoiseKind::vector, "threshold", "THR", "MCE threshold interrupt"},
    {NoiseKind::vector, "deferred_error", "DFR", "deferred error interrupt"},
    {NoiseKind::vector, "error", "ERR", "APIC error interrupt"},
    {NoiseKind::vector, "spurious", "SPU", "spurious interrupt"},
    {NoiseKind::vector, "platform_ipi", "PIN", "platform IPI"},
};

const VecName *vector_by_enum(std::uint64_t id) {
  if (id >= MLTUNE_VEC_RESCHEDULE && id <= MLTUNE_VEC_PLATFORM_IPI) {
    return &k_vectors[id - MLTUNE_VEC_RESCHEDULE];
  }
  return nullptr;
}

const VecName *vector_by_label(std::string_view label) {
  for (const auto &v : k_vectors) {
    if (!v.label.empty() && v.label == label) {
      return &v;
    }
  }
  return nullptr;
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string fn_name(const std::map<std::uint64_t, std::string> &syms, std::uint64_t addr) {
  auto it = syms.find(addr);
  return it != syms.end() ? it->second : hex(addr);
}

bool in_cgroup(const std::string &cg, const std::string &own) {
  return !own.empty() && !cg.empty() && (cg == own || (cg.starts_with(own) && cg[own.size()] == '/'));
}

void name_known(NoiseSource &s) {
  if (auto k = known_noise(s)) {
    s.known = std::string(k->name);
    s.fix = std::string(k->fix);
  }
  if (s.kind == NoiseKind::irq) {
    s.fix = "echo HOUSEKEEPING > /proc/irq/" + std::to_string(s.irq) +
            "/smp_affinity_list (mltunectl feeder on steers movable IRQs); a managed IRQ needs "
            "isolcpus=managed_irq,CPUS";
  }
}

// One raw entry as a source (false: a detail, added to `details` instead).
bool to_source(const RawNoiseEntry &e, const std::map<std::uint64_t, std::string> &syms,
               const std::map<std::uint64_t, std::string> &cgroups, NoiseSource &s, std::vector<NoiseDetail> &details) {
  s.count = e.count;
  s.ns = e.ns;
  s.bh_ns = e.bh_ns;
  switch (e.kind) {
  case RawKind::irq:
    s.kind = NoiseKind::irq;
    s.irq = static_cast<int>(e.id);
    s.id = "irq:" + std::to_string(e.id);
    s.name = "IRQ " + std::to_string(e.id) + (e.name.empty() ? "" : " " + e.name);
    break;
  case RawKind::vector: {
    const VecName *v = e.name.empty() ? vector_by_enum(e.id) : vector_by_label(e.name);
    if (v != nullptr && v->id == "tlb_shootdown") {
      details.push_back({"tlb_shootdown", "", e.count, {}, {}});
      return false;
    }
    if (v == nullptr) {
      s.kind = NoiseKind::vector;
      s.id = "vector:" + (e.name.empty() ? std::to_string(e.id) : e.name);
      s.name = "interrupt " + (e.name.empty() ? std::to_string(e.id) : e.name);
      break;
    }
    s.kind = v->kind;
    s.id = std::string(v->kind == NoiseKind::ipi ? "ipi:" : "vector:") + std::string(v->id);
    s.name = std::string(v->name);
    if (!e.name.empty() && v->id == "call_function") {
      s.name += " (all)"; // /proc/interrupts counts both kinds in one row
    }
    break;
  }
  case RawKind::timer:
    s.kind = NoiseKind::timer;
    if (!e.name.empty()) { // /proc/interrupts LOC: not split by cause
      s.id = "timer:all";
      s.name = "local timer interrupts";
    } else {
      s.id = e.id == 0 ? "timer:0" : "timer:" + fn_name(syms, e.id);
      s.name = e.id == 0 ? "local timer: no hrtimer expired" : "local timer: " + fn_name(syms, e.id);
    }
    break;
  case RawKind::timer_task:
    s.kind = NoiseKind::timer;
    s.pid = static_cast<int>(e.id);
    s.comm = e.name;
    s.id = "timer-task:" + std::to_string(e.id);
    s.name = "local timer: wake-up of " + e.name + " (pid " + std::to_string(e.id) + ")";
    break;
  case RawKind::timer_dl_server:
    s.kind = NoiseKind::timer;
    s.id = "timer:dl_server";
    s.name = "local timer: deadline server (fair_server)";
    break;
  case RawKind::softirq:
    s.kind = NoiseKind::softirq;
    s.interruption = false;
    if (!e.name.empty()) {
      s.id = "softirq:" + e.name;
    } else if (e.id < std::size(k_softirq_names)) {
      s.id = "softirq:" + std::string(k_softirq_names[e.id]);
    } else {
      s.id = "softirq:" + std::to_string(e.id);
    }
    s.name = "softirq " + s.id.substr(8);
    break;
  case RawKind::task: {
    s.kind = NoiseKind::task;
    s.pid = static_cast<int>(e.id);
    s.tgid = e.tgid;
    s.comm = e.name;
    s.kthread = (e.flags & proc::k_pf_kthread) != 0;
    s.cgroup = e.cgroup;
    if (s.cgroup.empty() && e.cgid != 0) {
      if (auto it = cgroups.find(e.cgid); it != cgroups.end()) {
        s.cgroup = it->second;
      }
    }
    s.id = "task:" + std::to_string(e.id);
    s.name = (s.kthread ? "kthread " : "task ") + e.name + " (pid " + std::to_string(e.id) + ")";
    break;
  }
  case RawKind::hrtimer_dl_server: details.push_back({"hrtimer", "dl_server", e.count, {}, {}}); return false;
  case RawKind::numa_scan: details.push_back({"task_work", "task_numa_work", e.count, {}, {}}); return false;
  case RawKind::hrtimer:
  case RawKind::work:
  case RawKind::timer_cb: {
    NoiseDetail d{e.kind == RawKind::hrtimer ? "hrtimer"
                  : e.kind == RawKind::work  ? "work"
                                             : "timer",
                  fn_name(syms, e.id),
                  e.count,
                  {},
                  {}};
    details.push_back(std::move(d));
    return false;
  }
  }
  name_known(s);
  return true;
}

} // namespace

NoiseReport build_noise_report(const Sysroot &root, const RawNoise &raw, const CpuSet &cpus, double seconds,
                               const std::string &own_cgroup, const std::map<std::uint64_t, std::string> &kallsyms,
                               const std::vector<int> &own_tgids) {
  NoiseReport r;
  r.seconds = seconds;
  r.cpus = cpus;
  r.own_cgroup = own_cgroup;
  r.dropped = raw.dropped;
  r.missing = raw.missing;
  r.notes = raw.notes;
  std::map<std::uint64_t, std::string> cgroups;
  if (std::ranges::any_of(raw.entries, [](const auto &e) { return e.cgid != 0; })) {
    cgroups = cgroup::by_id(root);
  }
  std::map<unsigned, CpuNoise> per;
  for (unsigned c : cpus.cpus()) {
    per[c].cpu = c;
    if (auto it = raw.switches.find(c); it != raw.switches.end()) {
      per[c].switches = it->second;
    }
  }
  std::set<int> own_pids;
  for (const auto &e : raw.entries) {
    if (!cpus.test(e.cpu)) {
      continue;
    }
    NoiseSource s;
    CpuNoise &cn = per[e.cpu];
    if (!to_source(e, kallsyms, cgroups, s, cn.details)) {
      continue;
    }
    if (s.kind == NoiseKind::task &&
        (in_cgroup(s.cgroup, own_cgroup) || std::ranges::find(own_tgids, s.tgid) != own_tgids.end())) {
      s.own = true;
      own_pids.insert(s.pid);
    }
    cn.sources.push_back(std::move(s));
  }
  for (auto &[cpu, cn] : per) {
    for (auto &s : cn.sources) {
      if (s.id.starts_with("timer-task:") && own_pids.contains(s.pid)) {
        s.own = true; // the own task's own sleeps
      }
      if (!s.own && s.interruption) {
        cn.interruptions += s.count;
      }
      if (!s.own && s.ns && (s.interruption || s.kind == NoiseKind::softirq)) {
        cn.foreign_ns += *s.ns;
      }
    }
    // Worst first: by time where every interruption has one (BPF), else by count.
    const bool timed =
        std::ranges::all_of(cn.sources, [](const NoiseSource &s) { return !s.interruption || s.ns.has_value(); });
    const auto weight = [timed](const NoiseSource &s) { return timed ? s.cost() : s.count; };
    std::ranges::sort(cn.sources, [&weight](const NoiseSource &a, const NoiseSource &b) {
      if (a.own != b.own) {
        return !a.own;
      }
      if (a.interruption != b.interruption) {
        return a.interruption;
      }
      if (weight(a) != weight(b)) {
        return weight(a) > weight(b);
      }
      return a.id < b.id;
    });
    for (auto &d : cn.details) {
      if (auto k = known_noise(d)) {
        d.known = std::string(k->name);
        d.fix = std::string(k->fix);
      }
    }
    std::ranges::sort(cn.details, [](const NoiseDetail &a, const NoiseDetail &b) {
      return a.count != b.count ? a.count > b.count : a.function < b.function;
    });
    cn.per_second = seconds > 0 ? static_cast<double>(cn.interruptions) / seconds : 0;
    r.per_cpu.push_back(std::move(cn));
  }
  return r;
}

std::map<std::uint64_t, std::string> load_kallsyms(const Sysroot &root, const std::vector<std::uint64_t> &addrs) {
  std::map<std::uint64_t, std::string> out;
  const std::set<std::uint64_t> want(addrs.begin(), addrs.end());
  if (want.empty()) {
    return out;
  }
  detail::for_each_line(root, "/proc/kallsyms", [&](std::string_view text) {
    if (out.size() >= want.size()) {
      return false;
    }
    const std::string line(text);
    // "ffffffff81123450 t tick_nohz_handler" (a module's symbols end in "\t[mod]")
    const auto sp = line.find(' ');
    if (sp == std::string::npos || line.size() < sp + 4) {
      return true;
    }
    auto addr = parse_int<std::uint64_t>(std::string_view(line).substr(0, sp), 16);
    if (!addr || !want.contains(*addr) || out.contains(*addr)) {
      return true;
    }
    std::string name = line.substr(sp + 3);
    name = name.substr(0, name.find_first_of(" \t"));
    out[*addr] = name;
    return true;
  });
  return out;
}

Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, NoiseProbe *bpf,
                                  const std::string &bpf_error, NoiseProbe &proc, const NoiseWindow &window) {
  if (opt.probe != "auto" && opt.probe != "bpf" && opt.probe != "proc") {
    return input_error("--probe: '" + opt.probe + "' is not auto, bpf or proc");
  }
  CpuSet cpus = opt.cpus;
  if (cpus.empty()) {
    auto online = online_cpus(root);
    if (!online) {
      return online.error();
    }
    cpus = *online;
  }
  if (cpus.count() > 0 && cpus.cpus().back() >= MLTUNE_NOISE_MAX_CPUS) {
    return input_error("CPU " + std::to_string(cpus.cpus().back()) + " is beyond the " +
                       std::to_string(MLTUNE_NOISE_MAX_CPUS) + " CPUs noise accounting handles");
  }
  std::string fallback;
  NoiseProbe *probe = &proc;
  if (opt.probe != "proc") {
    if (bpf == nullptr) {
      if (opt.probe == "bpf") {
        return failure("BPF noise accounting unavailable: " + bpf_error);
      }
      fallback = bpf_error;
    } else if (auto st = bpf->start(cpus); !st) {
      if (opt.probe == "bpf") {
        return st.error();
      }
      fallback = st.error().message;
    } else {
      probe = bpf;
    }
  }
  if (probe == &proc) {
    if (auto st = proc.start(cpus); !st) {
      return with_context(st.error(), "/proc counters");
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Status w = window();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto raw = probe->stop();
  if (!w) {
    return w.error();
  }
  if (!raw) {
    return raw.error();
  }
  std::vector<std::uint64_t> addrs;
  for (const auto &e : raw->entries) {
    if (e.kind == RawKind::timer || e.kind == RawKind::hrtimer || e.kind == RawKind::work ||
        e.kind == RawKind::timer_cb) {
      addrs.push_back(e.id);
    }
  }
  NoiseReport r =
      build_noise_report(root, *raw, cpus, seconds, opt.own_cgroup, load_kallsyms(root, addrs), opt.own_tgids);
  r.probe = probe->name();
  r.fallback = fallback;
  return r;
}

Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, int *exec_status) {
  if (opt.exec.empty() && !(opt.seconds > 0 && opt.seconds <= 86400)) {
    return input_error("--duration: " + std::to_string(opt.seconds) + " is not a number of seconds in (0, 86400]");
  }
  const NoiseWindow window = [&opt, exec_status]() -> Status {
    if (!opt.exec.empty()) {
      auto r = detail::run_command(opt.exec, detail::CommandOutput::inherit);
      if (!r) {
        return r.error();
      }
      if (exec_status != nullptr) {
        *exec_status = r->status;
      }
      return Status{};
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.seconds));
    return {};
  };
  return measure_noise(root, opt, window);
}

Result<NoiseReport> measure_noise(const Sysroot &root, const NoiseOptions &opt, const NoiseWindow &window) {
  auto proc = make_proc_noise_probe(root);
  auto bpf = make_bpf_noise_probe(root);
  return measure_noise(root, opt, bpf ? bpf->get() : nullptr, bpf ? std::string() : bpf.error().message, *proc, window);
}

} // namespace mltune
