// Facts about the running node that several subsystems ask for: the kernel
// release and whether irqbalance runs.
#include "mltune/node_info.hpp"

#include "mltune/parse.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

namespace mltune {

Result<KernelVersion> kernel_version(const Sysroot &root) {
  auto rel = root.read_value("/proc/sys/kernel/osrelease");
  if (!rel) {
    return rel.error();
  }
  KernelVersion v;
  v.release = *rel;
  // "6.12.117+deb12-amd64": MAJOR.MINOR[.PATCH] then anything.
  std::string_view rest = v.release;
  const std::array<int *, 3> parts = {&v.major, &v.minor, &v.patch};
  size_t n = 0;
  for (int *part : parts) {
    const size_t len = std::min(rest.find_first_not_of("0123456789"), rest.size());
    const auto num = parse_int<int>(rest.substr(0, len));
    if (!num) {
      break;
    }
    *part = *num;
    ++n;
    rest.remove_prefix(len);
    if (!rest.starts_with('.')) {
      break;
    }
    rest.remove_prefix(1);
  }
  if (n < 2) {
    return failure("/proc/sys/kernel/osrelease: cannot parse '" + v.release + "'");
  }
  return v;
}

namespace {

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (const char c : s) {
    if (c == '"') {
      quoted = !quoted;
      continue;
    }
    if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
      if (!cur.empty()) {
        out.push_back(std::move(cur));
        cur.clear();
      }
      continue;
    }
    cur.push_back(c);
  }
  if (!cur.empty()) {
    out.push_back(std::move(cur));
  }
  return out;
}

} // namespace

KernelCmdline parse_kernel_cmdline(std::string_view text) {
  KernelCmdline out;
  for (const auto &tok : split_ws(text)) {
    const auto eq = tok.find('=');
    out[tok.substr(0, eq)] = eq == std::string::npos ? std::string() : tok.substr(eq + 1);
  }
  return out;
}

Result<KernelCmdline> kernel_cmdline(const Sysroot &root) {
  auto text = root.read("/proc/cmdline");
  if (!text) {
    return text.error();
  }
  return parse_kernel_cmdline(*text);
}

namespace {

// The pid when `name` is a pid whose comm is `comm`, else 0.
int process_at(const Sysroot &root, std::string_view name, std::string_view comm) {
  const int pid = parse_int<int>(name).value_or(0);
  if (pid <= 0) {
    return 0;
  }
  auto c = root.read_value("/proc/" + std::string(name) + "/comm");
  return c && *c == comm ? pid : 0;
}

} // namespace

int irqbalance_pid(const Sysroot &root) {
  if (auto procs = root.read("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs")) {
    size_t pos = 0;
    while (pos < procs->size()) {
      const size_t end = std::min(procs->find('\n', pos), procs->size());
      if (const int pid = process_at(root, std::string_view(procs->data() + pos, end - pos), "irqbalance"); pid > 0) {
        return pid;
      }
      pos = end + 1;
    }
  }
  return installed_process_pid(
      root, "irqbalance",
      {"/usr/sbin/irqbalance", "/sbin/irqbalance", "/usr/local/sbin/irqbalance", "/usr/bin/irqbalance"});
}

int installed_process_pid(const Sysroot &root, std::string_view comm,
                          std::initializer_list<std::string_view> programs) {
  bool installed = false;
  for (const auto p : programs) {
    installed = installed || root.exists(p);
  }
  if (!installed) {
    return 0;
  }
  for (const auto &name : root.list_dir("/proc")) {
    if (const int pid = process_at(root, name, comm); pid > 0) {
      return pid;
    }
  }
  return 0;
}

std::string bpf_refusal_reason(const Sysroot &root) {
  std::vector<std::string> why;
  std::uint64_t cap_eff = 0;
  bool seccomp = false;
  bool root_uid = false;
  if (auto status = root.read("/proc/self/status")) {
    for (const auto line : split_lines(*status)) {
      const auto w = split_words(line);
      if (w.size() >= 2 && w[0] == "CapEff:") {
        cap_eff = std::strtoull(std::string(w[1]).c_str(), nullptr, 16);
      } else if (w.size() >= 2 && w[0] == "Seccomp:") {
        seccomp = w[1] != "0";
      } else if (w.size() >= 3 && w[0] == "Uid:") {
        root_uid = w[2] == "0"; // effective
      }
    }
  }
  constexpr unsigned k_cap_sys_admin = 21;
  constexpr unsigned k_cap_perfmon = 38;
  constexpr unsigned k_cap_bpf = 39;
  const auto has = [&](unsigned cap) { return (cap_eff >> cap & 1U) != 0; };
  if (!has(k_cap_sys_admin) && !(has(k_cap_bpf) && has(k_cap_perfmon))) {
    why.emplace_back("this process lacks CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)");
  }
  if (seccomp) {
    why.emplace_back("a seccomp filter is on this process (a container runtime's default profile refuses bpf())");
  }
  // read_value() gives a choice file's selected value ("[integrity]" -> "integrity").
  if (auto mode = root.read_value("/sys/kernel/security/lockdown"); mode && !mode->empty() && *mode != "none") {
    why.push_back("kernel lockdown is '" + *mode + "' (/sys/kernel/security/lockdown; " +
                  (*mode == "confidentiality" ? "it refuses BPF that reads kernel memory"
                                              : "Secure Boot turns it on; it can refuse BPF helpers") +
                  ")");
  }
  if (auto v = root.read_value("/proc/sys/kernel/unprivileged_bpf_disabled"); v && *v != "0" && !root_uid) {
    why.push_back("kernel.unprivileged_bpf_disabled=" + *v + " refuses BPF to users without CAP_BPF");
  }
  if (why.empty()) {
    return "not the capabilities, seccomp, lockdown or kernel.unprivileged_bpf_disabled: a security module "
           "(SELinux, AppArmor, a BPF LSM) or the platform refuses it";
  }
  std::string out;
  for (const auto &w : why) {
    out += (out.empty() ? "" : "; ") + w;
  }
  return out;
}

Result<CpuSet> online_cpus(const Sysroot &root) {
  static constexpr std::string_view k_online = "/sys/devices/system/cpu/online";
  auto txt = root.read(k_online);
  if (!txt) {
    return with_context(txt.error(), "online CPUs");
  }
  return parse_cpuset(*txt, k_online);
}

Result<CpuSet> parse_node_cpus(const Sysroot &root, std::string_view spec, std::string_view what) {
  auto c = parse_cpuset(spec, what);
  if (!c) {
    return c.error();
  }
  if (c->empty()) {
    return input_error(std::string(what) + ": empty CPU list");
  }
  auto online = online_cpus(root);
  if (!online) {
    return online.error();
  }
  if (!online->contains(*c)) {
    const CpuSet off = *c - *online;
    return input_error(std::string(what) + " " + std::string(spec) + ": CPU" + (off.count() > 1 ? "s " : " ") +
                       off.str() + (off.count() > 1 ? " are" : " is") +
                       " not online on this node (online: " + online->str() + ")");
  }
  return c;
}

} // namespace mltune
