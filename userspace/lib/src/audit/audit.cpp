#include "mltune/audit.hpp"

#include "audit/audit_parts.hpp"
#include "base/unique_fd.hpp"
#include "mltune/compare.hpp"
#include "mltune/feeder.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"
#include "mltune/topology.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <map>
#include <unistd.h>

namespace mltune {

namespace {

constexpr long long k_nofile_wanted = 1048576;

bool is_number(std::string_view s) {
  return parse_int<unsigned long long>(s).has_value();
}

// A non-negative number, or -1.
long long to_ll(std::string_view s) {
  return parse_int<long long>(s).value_or(-1);
}

std::string knob_fix(const Knob &k) {
  if (k.kind == KnobKind::sysctl) {
    return "sysctl -w " + k.key + "='" + k.value + "'";
  }
  return "echo '" + k.value + "' > " + k.path();
}

void audit_knobs(const Profile &profile, const Sysroot &root, std::vector<Finding> &out) {
  for (const auto &st : compare(profile, root)) {
    const Knob &k = *st.knob;
    const auto *cat = catalog_find(k.key);
    Finding f{std::string(k.kind == KnobKind::sysctl ? "sysctl:" : "sysfs:") + k.key,
              k.kind == KnobKind::sysctl ? "sysctl" : "sysfs",
              Severity::ok,
              st.current,
              k.wanted(),
              cat != nullptr ? std::string(cat->impact) : k.reason,
              {}};
    switch (st.state) {
    case KnobState::match: break;
    case KnobState::differs:
      f.severity = k.optional ? Severity::info : (cat != nullptr ? cat->severity : Severity::warning);
      f.fix = knob_fix(k) + "  (or: mltunectl switch " + profile.name + ")";
      break;
    case KnobState::missing:
    case KnobState::unreadable:
    case KnobState::not_read: // not asked for here: audit spares no CPU for plain knobs
      f.current = std::string(to_string(st.state));
      f.severity = st.allowed() ? Severity::info : Severity::warning;
      // The read error names the path already.
      f.fix = st.allowed() ? "optional; " + k.reason
              : st.state == KnobState::missing
                  ? "the kernel lacks " + k.path() + " (not built in, or its module is not loaded)"
                  : st.error;
      break;
    }
    out.push_back(std::move(f));
  }
}

std::vector<std::string> cpus(const Sysroot &root) {
  std::vector<std::string> out;
  for (const auto &n : root.list_dir("/sys/devices/system/cpu")) {
    if (n.size() > 3 && n.starts_with("cpu") && is_number(n.substr(3))) {
      out.push_back(n);
    }
  }
  return out;
}

// "performance on 2/4 CPUs, powersave on 2/4 CPUs"
std::string tally(const std::map<std::string, int> &counts, size_t total) {
  std::string s;
  for (const auto &[v, n] : counts) {
    s += (s.empty() ? "" : ", ") + v + " on " + std::to_string(n) + "/" + std::to_string(total) + " CPUs";
  }
  return s;
}

void audit_cpu(const Sysroot &root, std::vector<Finding> &out) {
  const auto list = cpus(root);
  // The kernel reads energy_perf_bias on the CPU itself (an IPI): feeder and
  // isolated CPUs are not asked.
  const CpuSet quiet = quiet_cpus(root);
  const auto online = online_cpus(root); // unreadable: every CPU counts as online
  // Without a cpufreq driver there is no policy, and no CPU has a governor
  // (a VM, most often): one directory read instead of a file per CPU.
  const auto policies = root.list_dir("/sys/devices/system/cpu/cpufreq");
  const bool cpufreq = std::ranges::any_of(policies, [](const auto &p) { return p.starts_with("policy"); });
  // energy_perf_bias is on every online CPU or on none (the kernel adds it
  // where the CPU has the EPB feature): the first online CPU without it ends
  // the search.
  bool epb_exposed = true;
  std::map<std::string, int> gov;
  std::map<std::string, int> epb;
  size_t epb_asked = 0;
  size_t epb_quiet = 0;
  for (const auto &c : list) {
    const std::string base = "/sys/devices/system/cpu/" + c;
    if (cpufreq) {
      if (auto g = root.read_value(base + "/cpufreq/scaling_governor")) {
        ++gov[*g];
      }
    }
    const auto n = parse_int<unsigned>(std::string_view(c).substr(3));
    if (!n || *n >= k_max_cpus || (online && !online->test(*n))) {
      continue;
    }
    if (quiet.test(*n)) {
      ++epb_quiet;
      continue;
    }
    ++epb_asked;
    if (!epb_exposed) {
      continue;
    }
    const std::string file = base + "/power/energy_perf_bias";
    if (auto e = root.read_value(file)) {
      ++epb[*e];
    } else if (!root.exists(file)) {
      epb_exposed = false;
    }
  }
  Finding g{"cpu:governor",
            "cpu",
            Severity::ok,
            tally(gov, list.size()),
            "performance",
            "Frequency ramp-up on bursty feeder threads delays kernel launches and collectives",
            {}};
  if (gov.empty()) {
    g.current = "no cpufreq (firmware or hypervisor controls frequency)";
    g.severity = Severity::info;
  } else if (gov.size() != 1 || gov.begin()->first != "performance") {
    g.severity = Severity::warning;
    g.fix = "cpupower frequency-set -g performance";
  }
  out.push_back(std::move(g));
  Finding e{"cpu:energy_perf_bias",
            "cpu",
            Severity::ok,
            tally(epb, epb_asked),
            "0",
            "A power-saving bias lowers turbo residency and adds wake-up latency",
            {}};
  if (epb.empty()) {
    e.current = epb_asked == 0 ? "not read" : "not exposed";
    e.severity = Severity::info;
  } else if (epb.size() != 1 || epb.begin()->first != "0") {
    e.severity = Severity::warning;
    e.fix = "x86_energy_perf_policy performance  (or: echo 0 > /sys/devices/system/cpu/cpu*/power/energy_perf_bias)";
  }
  if (epb_quiet != 0) {
    e.current += " (" + std::to_string(epb_quiet) + " feeder or isolated CPUs not read: reading it interrupts the CPU)";
  }
  out.push_back(std::move(e));
}

void audit_memory(const Profile &profile, const Sysroot &root, std::vector<Finding> &out) {
  // THP and NUMA balancing are knobs of the built-in profiles; check them even
  // when a custom profile leaves them out.
  const std::pair<std::string_view, std::string_view> must[] = {{"kernel/mm/transparent_hugepage/enabled", "madvise"},
                                                                {"kernel.numa_balancing", "0"}};
  Profile extra;
  extra.name = profile.name;
  for (const auto &[key, value] : must) {
    if (profile.find(key) == nullptr) {
      const bool sysfs = key.find('/') != std::string_view::npos;
      extra.knobs.push_back({sysfs ? KnobKind::sysfs : KnobKind::sysctl, std::string(key), std::string(value), true,
                             false, "recommended for ML nodes", "audit"});
    }
  }
  audit_knobs(extra, root, out);

  auto swaps = root.read("/proc/swaps");
  if (swaps) {
    long long kib = 0;
    int devices = 0;
    for (const auto line : split_lines(*swaps)) {
      const auto w = split_words(line);
      if (w.size() >= 3 && is_number(w[2])) {
        ++devices;
        kib += to_ll(w[2]);
      }
    }
    auto swappiness = root.read_value("/proc/sys/vm/swappiness");
    const long long sw = swappiness ? to_ll(*swappiness) : -1;
    Finding f{"memory:swap",
              "memory",
              Severity::ok,
              devices == 0 ? "no swap" : std::to_string(devices) + " device(s), " + std::to_string(kib / 1024) + " MiB",
              "no swap, or vm.swappiness <= 1",
              "Pages of the training process or pinned staging buffers swapped out stall the GPU pipeline",
              {}};
    if (devices > 0) {
      f.severity = sw >= 0 && sw <= 1 ? Severity::info : Severity::warning;
      f.fix = "swapoff -a and remove swap entries from /etc/fstab, or mltunectl switch " + profile.name;
    }
    out.push_back(std::move(f));
  }
}

// Configured limits: limits.conf then limits.d/*.conf, later lines win.
std::map<std::string, std::string> configured_limits(const Sysroot &root, std::string_view item) {
  std::map<std::string, std::string> soft_hard; // "soft"/"hard" -> value, for domain '*'
  std::vector<std::string> files{"/etc/security/limits.conf"};
  for (const auto &f : root.list_dir("/etc/security/limits.d")) {
    if (f.ends_with(".conf")) {
      files.push_back("/etc/security/limits.d/" + f);
    }
  }
  for (const auto &f : files) {
    auto text = root.read(f);
    if (!text) {
      continue;
    }
    for (const auto line : split_lines(*text)) {
      const auto w = split_words(line.substr(0, line.find('#')));
      if (w.size() != 4 || w[0] != "*" || w[2] != item) {
        continue;
      }
      if (w[1] == "soft" || w[1] == "-") {
        soft_hard["soft"] = w[3];
      }
      if (w[1] == "hard" || w[1] == "-") {
        soft_hard["hard"] = w[3];
      }
    }
  }
  return soft_hard;
}

bool limit_ok(std::string_view v, long long wanted) {
  return v == "unlimited" || v == "infinity" || (wanted > 0 && is_number(v) && to_ll(v) >= wanted);
}

void audit_limits(const Sysroot &root, std::vector<Finding> &out) {
  struct Lim {
    std::string_view item, proc_name, want_text;
    long long want;
    std::string_view unit_limit; // the systemd directive
    std::string_view impact;
  };
  const Lim lims[] = {
      {"memlock", "Max locked memory", "unlimited", -1, "LimitMEMLOCK=infinity",
       "cudaHostAlloc, RDMA memory registration and NCCL fail or fall back to pageable copies"},
      {"nofile", "Max open files", "1048576", k_nofile_wanted, "LimitNOFILE=1048576",
       "Data loaders with many workers and shards fail with EMFILE"},
  };
  auto proc_limits = root.read("/proc/self/limits");
  for (const auto &l : lims) {
    const auto conf = configured_limits(root, l.item);
    const std::string soft = conf.contains("soft") ? conf.at("soft") : "not set";
    const std::string hard = conf.contains("hard") ? conf.at("hard") : "not set";
    Finding c{"limits:" + std::string(l.item) + ":configured",
              "limits",
              Severity::ok,
              "soft " + soft + ", hard " + hard,
              std::string(l.want_text),
              std::string(l.impact),
              {}};
    if (!limit_ok(soft, l.want) || !limit_ok(hard, l.want)) {
      c.severity = Severity::warning;
      // mltune does not own login limits: the fix is the admin's file (new
      // sessions) and the service's own limit (units do not read limits.d).
      c.fix = "add '* - " + std::string(l.item) + " " + std::string(l.want_text) +
              "' to a file in /etc/security/limits.d/ (new login sessions); services and job daemons need " +
              std::string(l.unit_limit) + " in their unit";
    }
    out.push_back(std::move(c));
    if (!proc_limits) {
      continue;
    }
    for (const auto line : split_lines(*proc_limits)) {
      if (!line.starts_with(l.proc_name)) {
        continue;
      }
      const auto w = split_words(line.substr(l.proc_name.size()));
      if (w.size() < 2) {
        break;
      }
      Finding e{"limits:" + std::string(l.item) + ":effective",
                "limits",
                Severity::ok,
                "soft " + std::string(w[0]) + ", hard " + std::string(w[1]),
                std::string(l.want_text),
                std::string(l.impact),
                {}};
      if (!limit_ok(w[0], l.want)) {
        e.severity = Severity::warning;
        e.fix = "set LimitMEMLOCK=/LimitNOFILE= in the job's systemd unit or container runtime, "
                "or log in again after mltunectl persist";
      }
      out.push_back(std::move(e));
      break;
    }
  }
}

void audit_kernel(const Sysroot &root, std::vector<Finding> &out) {
  auto v = kernel_version(root);
  Finding f{"kernel:version",
            "kernel",
            Severity::ok,
            v ? v->release : "unknown",
            ">= 6.1",
            "Older kernels lack EEVDF fixes, cpuset partitions and folio-based THP improvements",
            {}};
  if (!v) {
    f.severity = Severity::info;
  } else if (v->major < 5 || (v->major == 5 && v->minor < 15)) {
    f.severity = Severity::warning;
    f.fix = "upgrade to the distribution's 6.x kernel (Debian bookworm: linux-image-amd64)";
  } else if (v->major == 5) {
    f.severity = Severity::info;
    f.fix = "upgrade to a 6.1 or newer kernel";
  }
  out.push_back(std::move(f));
}

void audit_irqbalance(const Sysroot &root, std::vector<Finding> &out) {
  const bool running = irqbalance_pid(root) > 0;
  bool banned = false;
  if (auto cfg = root.read("/etc/default/irqbalance")) {
    for (const auto line : split_lines(*cfg)) {
      const auto w = split_words(line);
      banned = banned || (!w.empty() && (w[0].starts_with("IRQBALANCE_BANNED_CPUS=") ||
                                         w[0].starts_with("IRQBALANCE_BANNED_CPULIST=")));
    }
  }
  Finding f{"irq:irqbalance",
            "irq",
            Severity::ok,
            running ? (banned ? "running, feeder CPUs banned" : "running") : "not running",
            "not running, or running with IRQBALANCE_BANNED_CPULIST",
            "irqbalance moves GPU and NIC interrupts across NUMA nodes and onto feeder cores",
            {}};
  if (running && !banned) {
    f.severity = Severity::info;
    f.fix = "set IRQBALANCE_BANNED_CPULIST=<feeder cores> in /etc/default/irqbalance, or "
            "systemctl disable --now irqbalance and pin NIC/GPU IRQs to their NUMA node";
  }
  out.push_back(std::move(f));
}

// A process that maps libnccl but has no thread whose name starts with "NCCL":
// NCCL names its threads only with NCCL_SET_THREAD_NAME=1, and without the
// names the [[sched.rule]] tables (mltunectl sched/watch) match nothing.
void audit_nccl_names(const Sysroot &root, std::vector<Finding> &out) {
  for (const auto &pid : root.list_dir("/proc")) {
    if (!is_number(pid)) {
      continue;
    }
    const std::string base = "/proc/" + pid;
    auto maps = root.read(base + "/maps");
    if (!maps || maps->find("libnccl") == std::string::npos) {
      continue;
    }
    bool named = false;
    for (const auto &tid : root.list_dir(base + "/task")) {
      if (auto comm = root.read(base + "/task/" + tid + "/comm"); comm && comm->starts_with("NCCL")) {
        named = true;
        break;
      }
    }
    if (named) {
      continue;
    }
    std::string comm = "?";
    if (auto c = root.read(base + "/comm")) {
      comm = *c;
      while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) {
        comm.pop_back();
      }
    }
    out.push_back(Finding{"sched:nccl-thread-names:" + pid, "sched", Severity::warning,
                          "process " + pid + " (" + comm + ") maps libnccl but no thread is named NCCL*",
                          "NCCL_SET_THREAD_NAME=1",
                          "NCCL names its proxy threads only with NCCL_SET_THREAD_NAME=1; without the names the "
                          "sched rules (SCHED_DEADLINE for NCCL Progress/Service threads) cannot find them",
                          "set NCCL_SET_THREAD_NAME=1 in the job's environment and restart it"});
  }
}

} // namespace

std::vector<Finding> audit(const Profile &profile, const Sysroot &root, const AuditOptions &opt) {
  std::vector<Finding> out;
  audit_knobs(profile, root, out);
  audit_cpu(root, out);
  audit_memory(profile, root, out);
  audit_limits(root, out);
  audit_kernel(root, out);
  audit_irqbalance(root, out);
  auto topo = discover_topology(root);
  if (topo) {
    detail::audit_pcie(*topo, out);
  } else {
    out.push_back(Finding{"pcie:topology", "pcie", Severity::info, topo.error().message, "a readable topology",
                          "The PCIe checks need the machine's topology", ""});
  }
  // Without a topology the driver is still asked; GPUs are then named by address only.
  detail::audit_gpu_driver(root, topo ? *topo : Topology{}, opt, out);
  audit_nccl_names(root, out);
  return out;
}

Severity worst(const std::vector<Finding> &findings) {
  Severity w = Severity::ok;
  for (const auto &f : findings) {
    w = std::max(w, f.severity);
  }
  return w;
}

} // namespace mltune
