// Busy loops on CPUs while a function runs: how 'feeder on' makes an
// isolated cpuset partition whose CPUs the scheduler's idle load balancer
// then leaves alone (isolate.cpp, make_partition(), says why it must).
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mltune::feeder {

// Runs `fn` while a child process of cgroup `cgroup` spins on each CPU of
// `cpus` (in that cgroup, which keeps the CPUs, a loop stays on its CPU
// through a partition change), once each of those CPUs has taken two local
// timer interrupts (/proc/interrupts LOC) while its loop ran: a tick on a
// busy CPU takes it out of the scheduler's set of tickless idle CPUs.
// Waits at most a few seconds for that; `note` then names the CPUs that
// were not held busy and why ("" when all were).  The loops are gone when
// it returns.  Where `root` is not the live node, runs fn alone.
Status while_busy(const Sysroot &root, const CpuSet &cpus, const std::string &cgroup, const std::function<Status()> &fn,
                  std::string &note);

// Waits, at most a few seconds, until no CPU of `cpus` is in a scheduling
// domain (/proc/schedstat lists no domain under it), in case the kernel
// rebuilds the domains after a partition write returns.  False when one
// still is; nullopt where the kernel does not
// say (no /proc/schedstat without CONFIG_SCHEDSTATS); true at once where
// `root` is not the live node.
std::optional<bool> wait_domains_gone(const Sysroot &root, const CpuSet &cpus);

// The CPUs /proc/schedstat text lists with at least one scheduling domain.
CpuSet cpus_in_domains(std::string_view schedstat);

} // namespace mltune::feeder
