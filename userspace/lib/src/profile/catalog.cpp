#include "mltune/catalog.hpp"

#include "mltune/parse.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace mltune {

namespace {

constexpr long long k_i32 = std::numeric_limits<int>::max();
constexpr long long k_i64 = std::numeric_limits<long long>::max();

using enum KnobType;
using enum Severity;

// Ranges are the kernel's own limits (proc_dointvec_minmax bounds) where it
// has them, otherwise the type's range.  "kernels" says which kernels carry
// the knob; everything here exists on Debian 6.1, 6.12 and 7.2 kernels.
constexpr CatalogEntry k_catalog[] = {
    {"vm.swappiness", integer, 0, 200, "", "all (max 200 since 5.8)", warning,
     "Swapping model weights or pinned host buffers stalls GPU feeding for milliseconds per fault"},
    {"vm.overcommit_memory", integer, 0, 2, "", "all", warning,
     "Heuristic overcommit makes large mmap() and fork() of big workers fail although memory is free"},
    {"vm.dirty_ratio", integer, 0, 100, "", "all", info,
     "A low ratio blocks checkpoint writers in balance_dirty_pages()"},
    {"vm.dirty_background_ratio", integer, 0, 100, "", "all", info,
     "Writeback that starts late drains checkpoints in one large burst"},
    {"vm.zone_reclaim_mode", integer, 0, 7, "", "CONFIG_NUMA", warning,
     "Zone reclaim drops local page cache instead of using remote memory: latency spikes"},
    {"vm.max_map_count", integer, 0, k_i32, "", "all", info,
     "mmap-heavy datasets and allocators fail with ENOMEM at the default 65530 mappings"},
    {"vm.stat_interval", integer, 1, 3600, "", "all", info,
     "Per-CPU vmstat updates every second add jitter on latency-critical cores"},
    {"vm.min_free_kbytes", integer, 0, k_i32, "", "all", info,
     "Too small a reserve lets atomic allocations in NIC drivers fail under pressure"},
    {"kernel.numa_balancing", integer, 0, 3, "", "CONFIG_NUMA_BALANCING", warning,
     "Automatic NUMA migration adds hinting faults and TLB shootdowns to pinned workloads"},
    {"kernel.sched_autogroup_enabled", integer, 0, 1, "", "CONFIG_SCHED_AUTOGROUP", info,
     "Per-session CPU sharing starves data loader workers launched from one session"},
    {"net.core.rmem_max", integer, 4096, k_i32, "", "all", warning,
     "Small socket buffer caps limit TCP/IP collectives on high bandwidth-delay links"},
    {"net.core.wmem_max", integer, 4096, k_i32, "", "all", warning,
     "Small socket buffer caps limit TCP/IP collectives on high bandwidth-delay links"},
    {"net.core.rmem_default", integer, 4096, k_i32, "", "all", info,
     "Default receive buffer for sockets that do not autotune"},
    {"net.core.wmem_default", integer, 4096, k_i32, "", "all", info,
     "Default send buffer for sockets that do not autotune"},
    {"net.ipv4.tcp_rmem", int_list, 1, k_i32, "", "all", warning,
     "TCP receive autotuning cannot grow past the third value"},
    {"net.ipv4.tcp_wmem", int_list, 1, k_i32, "", "all", warning,
     "TCP send autotuning cannot grow past the third value"},
    {"net.core.netdev_max_backlog", integer, 1, k_i32, "", "all", warning,
     "A short per-CPU input queue drops packets in bursts from fast NICs"},
    {"net.core.somaxconn", integer, 1, k_i32, "", "all", info,
     "Short listen backlogs drop connections at job start and under serving load"},
    {"net.ipv4.tcp_max_syn_backlog", integer, 1, k_i32, "", "all", info, "A short SYN queue drops connection storms"},
    {"net.ipv4.tcp_congestion_control", word, 0, 0, "", "tcp_bbr module for bbr", info,
     "CUBIC collapses throughput on lossy long paths where BBR keeps it"},
    {"net.ipv4.tcp_slow_start_after_idle", integer, 0, 1, "", "all", info,
     "Each request after an idle gap restarts from a small congestion window"},
    {"net.ipv4.tcp_fastopen", integer, 0, 0x7ff, "", "all", info,
     "Every new connection pays a full handshake round trip"},
    {"net.core.busy_poll", integer, 0, k_i32, "", "CONFIG_NET_RX_BUSY_POLL", info,
     "Interrupt-driven receive adds wakeup latency to every request"},
    {"net.core.busy_read", integer, 0, k_i32, "", "CONFIG_NET_RX_BUSY_POLL", info,
     "Interrupt-driven receive adds wakeup latency to every request"},
    {"fs.file-max", integer, 1024, k_i64, "", "all", info,
     "Datasets with many shards plus sockets run out of file handles"},
    {"fs.inotify.max_user_watches", integer, 1, k_i32, "", "all", info, "File watchers in pipelines fail with ENOSPC"},
    {"kernel/mm/transparent_hugepage/enabled", choice, 0, 0, "always madvise never", "CONFIG_TRANSPARENT_HUGEPAGE",
     warning,
     "THP 'always' makes khugepaged compact behind the job's back; 'never' loses huge pages for large tensors"},
    {"kernel/mm/transparent_hugepage/defrag", choice, 0, 0, "always defer defer+madvise madvise never",
     "CONFIG_TRANSPARENT_HUGEPAGE", info, "Synchronous compaction on page faults stalls the faulting thread"},
    {"kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs", integer, 0, 4294967295LL, "",
     "CONFIG_TRANSPARENT_HUGEPAGE", info, "Frequent khugepaged scans take CPU time from feeder cores"},
    {"kernel/mm/transparent_hugepage/khugepaged/defrag", integer, 0, 1, "", "CONFIG_TRANSPARENT_HUGEPAGE", info,
     "khugepaged compaction competes with the job for memory bandwidth"},
};

} // namespace

std::string_view to_string(Severity s) {
  switch (s) {
  case ok: return "ok";
  case info: return "info";
  case warning: return "warning";
  case critical: return "critical";
  }
  return "?";
}

std::span<const CatalogEntry> catalog() {
  return k_catalog;
}

const CatalogEntry *catalog_find(std::string_view key) {
  const auto *it = std::ranges::find_if(k_catalog, [&](const CatalogEntry &e) { return e.key == key; });
  return it == std::end(k_catalog) ? nullptr : it;
}

std::optional<std::string> catalog_check(const CatalogEntry &e, std::string_view value) {
  auto range = [&](std::string_view v) -> std::optional<std::string> {
    const auto parsed = parse_int<long long>(v);
    if (!parsed) {
      return "'" + std::string(v) + "' is not an integer";
    }
    const long long n = *parsed;
    if (n < e.min || n > e.max) {
      return std::to_string(n) + " is out of range [" + std::to_string(e.min) + ", " + std::to_string(e.max) + "]";
    }
    return std::nullopt;
  };
  switch (e.type) {
  case integer: return range(value);
  case int_list: {
    const auto ints = split_words(value);
    for (const auto w : ints) {
      if (auto err = range(w)) {
        return err;
      }
    }
    if (ints.size() != 3) {
      return "expected three integers \"min default max\", got '" + std::string(value) + "'";
    }
    return std::nullopt;
  }
  case choice: {
    const auto cs = split_words(e.choices);
    if (std::ranges::find(cs, value) != cs.end()) {
      return std::nullopt;
    }
    return "'" + std::string(value) + "' is not one of: " + std::string(e.choices);
  }
  case word:
    if (value.empty() || value.find(' ') != std::string_view::npos) {
      return "expected a single word, got '" + std::string(value) + "'";
    }
    return std::nullopt;
  }
  return std::nullopt;
}

} // namespace mltune
