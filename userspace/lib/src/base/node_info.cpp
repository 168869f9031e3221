// Facts about the running node that several subsystems ask for: the kernel
// release and whether irqbalance runs.
#include "mltune/node_info.hpp"

#include "mltune/parse.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace mltune {

Result<KernelVersion> kernel_version(const Sysroot &root) {
  auto rel = root.read_value("/proc/sys/kernel/osrelease");
  if (!rel) {
    return rel.error();
  }
  KernelVersion v;
  v.release = *rel;
  if (std::sscanf(v.release.c_str(), "%d.%d.%d", &v.major, &v.minor, &v.patch) < 2) { // NOLINT(cert-err34-c)
    return failure("/proc/sys/kernel/osrelease: cannot parse '" + v.release + "'");
  }
  return v;
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

} // namespace mltune
