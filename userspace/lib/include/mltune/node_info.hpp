// Facts about the running node that several subsystems ask for.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

namespace mltune {

// The mltune module's sysfs directory: present while the module is loaded.
inline constexpr std::string_view k_kmod_dir = "/sys/kernel/mltune";

// Kernel release of the node (<sysroot>/proc/sys/kernel/osrelease).
struct KernelVersion {
  int major = 0, minor = 0, patch = 0;
  std::string release;
};
Result<KernelVersion> kernel_version(const Sysroot &root);

// The kernel command line (<sysroot>/proc/cmdline) as key -> value, the way
// the kernel reads it: words split at whitespace outside double quotes,
// quotes removed, "key=value" or a bare "flag" (value ""), the last of a
// repeated key winning.
using KernelCmdline = std::map<std::string, std::string, std::less<>>;
Result<KernelCmdline> kernel_cmdline(const Sysroot &root);
KernelCmdline parse_kernel_cmdline(std::string_view text);

// The pid of a running irqbalance, or 0. Looks in the cgroup of systemd's
// irqbalance.service first (one read) and scans /proc only where the
// irqbalance program is installed but not found there: on a node with
// thousands of kernel threads a /proc scan costs milliseconds.
int irqbalance_pid(const Sysroot &root);

// The pid of a process whose comm is `comm` (at most 15 characters, as the
// kernel keeps it), or 0; scans /proc only where one of `programs` exists.
int installed_process_pid(const Sysroot &root, std::string_view comm, std::initializer_list<std::string_view> programs);

// Why the kernel refuses this process's bpf() with EPERM, as far as the
// node shows it (`root`: where to read /proc/self, /proc/sys and
// securityfs): the capabilities it lacks (CAP_BPF and CAP_PERFMON, or
// CAP_SYS_ADMIN), a seccomp filter, kernel lockdown, the
// kernel.unprivileged_bpf_disabled sysctl; else that none of these is the
// reason (a security module or the platform then is).
std::string bpf_refusal_reason(const Sysroot &root);

// The node's online CPUs (<sysroot>/sys/devices/system/cpu/online).
Result<CpuSet> online_cpus(const Sysroot &root);

// A cpulist the user gave (`what` names it in errors, "--cpus"): parsed, not
// empty, and every CPU online on this node, else an input error that names
// the CPUs that are not and the node's online list.
Result<CpuSet> parse_node_cpus(const Sysroot &root, std::string_view spec, std::string_view what);

} // namespace mltune
