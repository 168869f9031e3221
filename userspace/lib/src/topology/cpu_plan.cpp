#include "mltune/cpu_plan.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <set>

namespace mltune {

namespace {

// Physical cores needed before isolating anything makes sense: one for the
// OS and IRQs, one feeder, and room for DataLoader workers.
constexpr unsigned k_min_cores = 4;
// One housekeeping core per this many physical cores of a socket.
constexpr unsigned k_cores_per_housekeeping = 24;

std::string join_nodes(const std::vector<int> &v) {
  std::string s;
  for (const int n : v) {
    s += (s.empty() ? "" : ",") + std::to_string(n);
  }
  return s;
}

std::string plural(unsigned n, const char *word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// CPU set of the cores at `idx` in `cores`.
CpuSet threads_of(const std::vector<const Core *> &cores) {
  CpuSet s;
  for (const auto *c : cores) {
    s |= c->threads;
  }
  return s;
}

} // namespace

Result<CpuPlan> make_cpu_plan(const Topology &topo, const PlanOptions &opts) {
  if (opts.gpus_per_rank == 0) {
    return input_error("--gpus-per-rank must be at least 1");
  }
  CpuPlan p;
  p.online = topo.online;
  p.warnings = topo.warnings;
  auto &why = p.reasons;

  auto nic_plans = [&](const CpuSet &pool) {
    for (const auto &n : topo.nics) {
      NicIrqPlan np;
      np.name = n.name;
      np.node = n.pci.numa_node;
      const NumaNode *node = n.pci.numa_node >= 0 ? topo.node(n.pci.numa_node) : nullptr;
      np.irq_cpus = node != nullptr ? pool & node->cpus : CpuSet{};
      if (np.irq_cpus.empty() && !n.pci.local_cpus.empty()) {
        np.irq_cpus = pool & n.pci.local_cpus;
      }
      if (np.irq_cpus.empty()) {
        np.irq_cpus = pool;
      }
      for (const auto &i : n.irqs) {
        np.irqs.push_back(i.irq);
      }
      p.nics.push_back(std::move(np));
    }
  };
  auto empty_plan = [&](std::string reason) -> CpuPlan {
    why.push_back(std::move(reason));
    why.push_back("nothing is isolated: every online CPU (" + topo.online.str() + ") stays a housekeeping CPU");
    p.housekeeping = topo.online;
    p.workers = CpuSet{};
    nic_plans(p.housekeeping);
    return std::move(p);
  };

  if (topo.gpus.empty()) {
    return empty_plan("no GPU found (PCI class 0x0300/0x0302 from NVIDIA, AMD or Intel, or an accelerator): "
                      "there is nothing to feed");
  }
  if (topo.gpus.size() % opts.gpus_per_rank != 0) {
    return input_error(std::to_string(topo.gpus.size()) + " GPUs cannot be split into ranks of " +
                       std::to_string(opts.gpus_per_rank) + " (--gpus-per-rank)");
  }
  if (topo.cores.size() < k_min_cores) {
    return empty_plan("the machine has " + plural(static_cast<unsigned>(topo.cores.size()), "physical core") +
                      ": too small to isolate anything (needs at least " + std::to_string(k_min_cores) +
                      ": housekeeping, a feeder core and DataLoader workers)");
  }

  // Nodes with CPUs, and per node its cores in CPU order.
  std::map<int, std::vector<const Core *>> node_cores;
  for (const auto &c : topo.cores) {
    node_cores[c.node].push_back(&c);
  }
  std::set<const Core *> taken;
  auto free_cores = [&](int node) {
    std::vector<const Core *> out;
    for (const auto *c : node_cores[node]) {
      if (taken.count(c) == 0) {
        out.push_back(c);
      }
    }
    return out;
  };

  // ---- housekeeping ---------------------------------------------------------------
  const unsigned cpu0 = topo.online.first();
  for (const auto &s : topo.sockets) {
    std::vector<const Core *> sc;
    for (const auto &c : topo.cores) {
      if (c.socket == s.id) {
        sc.push_back(&c);
      }
    }
    // CPU 0's core first (it takes interrupts and timers no one can move).
    std::stable_partition(sc.begin(), sc.end(), [&](const Core *c) { return c->threads.test(cpu0); });
    const unsigned want = std::max(1U, (s.cores + k_cores_per_housekeeping - 1) / k_cores_per_housekeeping);
    std::vector<const Core *> chosen(sc.begin(),
                                     sc.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(want, sc.size())));
    for (const auto *c : chosen) {
      taken.insert(c);
    }
    const CpuSet hk = threads_of(chosen);
    p.housekeeping |= hk;
    why.push_back("housekeeping on socket " + std::to_string(s.id) + ": CPUs " + hk.str() + " (" +
                  plural(static_cast<unsigned>(chosen.size()), "physical core") + " of " + std::to_string(s.cores) +
                  ", one per " + std::to_string(k_cores_per_housekeeping) + " and at least one per socket" +
                  (hk.test(cpu0) ? ", CPU 0 included: it keeps timers and interrupts that cannot move" : "") +
                  ") for the OS, kthreads and IRQs");
  }
  for (const auto &n : topo.nics) {
    const int node = n.pci.numa_node;
    const NumaNode *nn = node >= 0 ? topo.node(node) : nullptr;
    if (nn == nullptr || nn->cpus.empty() || p.housekeeping.intersects(nn->cpus)) {
      continue;
    }
    auto fc = free_cores(node);
    if (fc.empty()) {
      continue;
    }
    taken.insert(fc.front());
    p.housekeeping |= fc.front()->threads;
    why.push_back("housekeeping on node " + std::to_string(node) + ": CPUs " + fc.front()->threads.str() + " so " +
                  n.name + "'s IRQs stay on its own NUMA node");
  }

  // ---- the node each GPU's feeder cores come from ------------------------------------
  std::vector<int> with_cpus;
  for (const auto &n : topo.nodes) {
    if (!n.cpus.empty()) {
      with_cpus.push_back(n.id);
    }
  }
  auto nearest_with_cpus = [&](const NumaNode &from) {
    int best = -1;
    int best_d = std::numeric_limits<int>::max();
    for (size_t i = 0; i < topo.nodes.size() && i < from.distances.size(); ++i) {
      if (!topo.nodes[i].cpus.empty() && from.distances[i] < best_d) {
        best_d = from.distances[i];
        best = topo.nodes[i].id;
      }
    }
    return best;
  };
  std::map<int, std::vector<size_t>> node_gpus; // cpu node -> GpuPlan indices
  for (const auto &g : topo.gpus) {
    GpuPlan gp;
    gp.gpu = g.index;
    gp.pci = g.pci.address;
    gp.gpu_node = g.pci.numa_node;
    const std::string name = "GPU " + std::to_string(g.index) + " (" + g.pci.address + ")";
    const NumaNode *gn = g.pci.numa_node >= 0 ? topo.node(g.pci.numa_node) : nullptr;
    if (gn != nullptr && !gn->cpus.empty()) {
      gp.cpu_node = gn->id;
    } else if (gn != nullptr) {
      gp.cpu_node = nearest_with_cpus(*gn);
      if (gp.cpu_node >= 0) {
        why.push_back(name + " is on NUMA node " + std::to_string(gn->id) +
                      ", which has no CPUs: its feeder cores come from the nearest node with CPUs, node " +
                      std::to_string(gp.cpu_node));
      }
    } else if (with_cpus.size() == 1) {
      gp.cpu_node = with_cpus.front();
    } else {
      for (const int n : with_cpus) {
        if (!g.pci.local_cpus.empty() && topo.node(n)->cpus.contains(g.pci.local_cpus)) {
          gp.cpu_node = n;
          why.push_back(name + " reports no NUMA node; its local_cpulist lies on node " + std::to_string(n));
        }
      }
    }
    if (gp.cpu_node < 0) {
      // Unknown locality: the node with the most free cores.
      size_t best = 0;
      for (const int n : with_cpus) {
        const size_t f = free_cores(n).size() / (node_gpus[n].size() + 1);
        if (gp.cpu_node < 0 || f > best) {
          best = f;
          gp.cpu_node = n;
        }
      }
      p.warnings.push_back(name + ": the firmware reports no NUMA locality; feeder cores taken from node " +
                           std::to_string(gp.cpu_node) + " (the one with the most free cores)");
    }
    node_gpus[gp.cpu_node].push_back(p.gpus.size());
    p.gpus.push_back(std::move(gp));
  }

  // ---- feeder cores ----------------------------------------------------------------
  for (auto &[node, idx] : node_gpus) {
    auto fc = free_cores(node);
    const auto k = static_cast<unsigned>(idx.size());
    const auto nfree = static_cast<unsigned>(fc.size());
    unsigned per = opts.feeder_cores_per_gpu;
    if (per > 0 && per * k > nfree) {
      return input_error("node " + std::to_string(node) + " has " + plural(nfree, "free physical core") +
                         " after housekeeping; " + std::to_string(k) + " GPUs x " + std::to_string(per) +
                         " feeder cores need " + std::to_string(per * k));
    }
    if (per == 0) {
      per = nfree >= 3 * k ? 2 : (nfree >= k ? 1 : 0);
      if (per == 0) {
        why.push_back("node " + std::to_string(node) + ": " + plural(nfree, "free physical core") + " for " +
                      plural(k, "GPU") + ": too few to give each GPU a feeder core; none isolated there");
        continue;
      }
      why.push_back("node " + std::to_string(node) + ": " + plural(per, "feeder core") + " per GPU for " +
                    plural(k, "GPU") + " (" + std::to_string(nfree) + " free physical cores; " +
                    (per == 2 ? "one for the training loop, one for NCCL proxy/progress threads, "
                                "leaving at least one worker core per GPU"
                              : "too few for two per GPU with a worker core left") +
                    ")");
    } else {
      why.push_back("node " + std::to_string(node) + ": " + plural(per, "feeder core") + " per GPU as requested");
    }
    size_t next = 0;
    for (const size_t i : idx) {
      auto &gp = p.gpus[i];
      std::vector<const Core *> mine(fc.begin() + static_cast<std::ptrdiff_t>(next),
                                     fc.begin() + static_cast<std::ptrdiff_t>(next + per));
      next += per;
      for (const auto *c : mine) {
        taken.insert(c);
      }
      gp.feeder = threads_of(mine);
      p.feeder |= gp.feeder;
      why.push_back("GPU " + std::to_string(gp.gpu) + " (" + gp.pci + ", node " +
                    (gp.gpu_node >= 0 ? std::to_string(gp.gpu_node) : std::string("unknown")) + "): feeder CPUs " +
                    gp.feeder.str() + " (whole physical cores on node " + std::to_string(gp.cpu_node) +
                    ", SMT siblings included)");
    }
  }
  if (p.feeder.empty()) {
    p.housekeeping = CpuSet{};
    return empty_plan("no node has a physical core to spare for its GPUs: too small to isolate anything");
  }
  p.workers = topo.online - p.housekeeping - p.feeder;
  why.push_back("worker CPUs " + (p.workers.empty() ? std::string("(none)") : p.workers.str()) +
                ": neither housekeeping nor feeder; DataLoader workers run there");
  nic_plans(p.housekeeping);
  for (const auto &np : p.nics) {
    why.push_back("NIC " + np.name + " (node " + (np.node >= 0 ? std::to_string(np.node) : std::string("unknown")) +
                  "): IRQs on housekeeping CPUs " + np.irq_cpus.str() + ", never on feeder cores");
  }

  // ---- ranks -----------------------------------------------------------------------------
  const auto nranks = static_cast<unsigned>(p.gpus.size() / opts.gpus_per_rank);
  std::map<int, std::vector<unsigned>> node_ranks; // primary node -> ranks
  for (unsigned r = 0; r < nranks; ++r) {
    RankPlan rp;
    rp.rank = r;
    for (unsigned j = 0; j < opts.gpus_per_rank; ++j) {
      const auto &gp = p.gpus[r * opts.gpus_per_rank + j];
      rp.gpus.push_back(gp.gpu);
      rp.cpus |= gp.feeder;
      if (std::find(rp.nodes.begin(), rp.nodes.end(), gp.cpu_node) == rp.nodes.end()) {
        rp.nodes.push_back(gp.cpu_node);
      }
    }
    if (rp.nodes.size() > 1) {
      p.warnings.push_back("rank " + std::to_string(r) + " drives GPUs on NUMA nodes " + join_nodes(rp.nodes) +
                           ": its memory cannot be local to all of them");
    }
    node_ranks[rp.nodes.front()].push_back(r);
    p.ranks.push_back(std::move(rp));
  }
  for (auto &[node, ranks] : node_ranks) {
    std::vector<const Core *> wc;
    for (const auto *c : node_cores[node]) {
      if (taken.count(c) == 0) {
        wc.push_back(c);
      }
    }
    const size_t share = wc.size() / ranks.size();
    for (size_t i = 0; i < ranks.size(); ++i) {
      auto &rp = p.ranks[ranks[i]];
      std::vector<const Core *> mine(wc.begin() + static_cast<std::ptrdiff_t>(i * share),
                                     wc.begin() + static_cast<std::ptrdiff_t>((i + 1) * share));
      rp.worker_cpus = threads_of(mine);
      rp.dataloader_workers = static_cast<unsigned>(mine.size());
      if (rp.dataloader_workers == 0) {
        rp.dataloader_workers = 1;
        rp.worker_cpus = p.housekeeping & topo.node(node)->cpus;
        why.push_back("rank " + std::to_string(rp.rank) + ": no spare worker core on node " + std::to_string(node) +
                      ": 1 DataLoader worker on the node's housekeeping CPUs " + rp.worker_cpus.str());
      } else {
        why.push_back("rank " + std::to_string(rp.rank) + ": " + plural(rp.dataloader_workers, "DataLoader worker") +
                      " (one per physical worker core, SMT siblings not counted) on CPUs " + rp.worker_cpus.str());
      }
    }
  }
  for (auto &rp : p.ranks) {
    unsigned phys = 0;
    for (const auto &c : topo.cores) {
      phys += rp.cpus.contains(c.threads) ? 1 : 0;
    }
    rp.omp_threads = std::max(1U, phys);
    std::string gpus;
    for (const unsigned g : rp.gpus) {
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    }
    const bool nvidia =
        std::all_of(rp.gpus.begin(), rp.gpus.end(), [&](unsigned g) { return topo.gpus[g].vendor == "NVIDIA"; });
    rp.env.emplace_back("OMP_NUM_THREADS", std::to_string(rp.omp_threads));
    rp.env.emplace_back("NCCL_SET_THREAD_NAME", "1");
    if (nvidia) {
      rp.env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
      rp.env.emplace_back("CUDA_VISIBLE_DEVICES", gpus);
    }
    rp.env.emplace_back("MLTUNE_DATALOADER_WORKERS", std::to_string(rp.dataloader_workers));
    rp.env.emplace_back("MLTUNE_DATALOADER_CPUS", rp.worker_cpus.str());
    const std::string nodes = join_nodes(rp.nodes);
    rp.launch = "numactl --cpunodebind=" + nodes + " --membind=" + nodes + " taskset -c " + rp.cpus.str() + " env";
    for (const auto &[k, v] : rp.env) {
      rp.launch += " " + k + "=" + v;
    }
    rp.launch += " <command>";
  }
  why.emplace_back("launch lines: memory bound to the GPU's node (numactl --membind), the process on its feeder "
                   "CPUs (taskset), OMP_NUM_THREADS = its physical feeder cores, NCCL_SET_THREAD_NAME=1 so NCCL's "
                   "threads can be told apart; DataLoader workers should pin themselves to MLTUNE_DATALOADER_CPUS");
  return p;
}

Result<CpuSet> resolve_cpuset(std::string_view spec, const CpuPlan &plan) {
  if (spec == "feeder") {
    return plan.feeder;
  }
  if (spec == "housekeeping") {
    return plan.housekeeping;
  }
  if (spec == "workers") {
    return plan.workers;
  }
  if (spec == "online") {
    return plan.online;
  }
  if (spec.rfind("feeder:", 0) == 0) {
    const std::string_view n = spec.substr(7);
    unsigned idx = 0;
    const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), idx);
    if (n.empty() || ec != std::errc{} || ptr != n.data() + n.size()) {
      return input_error("'" + std::string(spec) + "': expected feeder:GPU_INDEX");
    }
    for (const auto &g : plan.gpus) {
      if (g.gpu == idx) {
        return g.feeder;
      }
    }
    return input_error("'" + std::string(spec) + "': the plan has no GPU " + std::to_string(idx) + " (" +
                       std::to_string(plan.gpus.size()) + " GPUs planned)");
  }
  if (spec.rfind("nic:", 0) == 0) {
    for (const auto &n : plan.nics) {
      if (n.name == spec.substr(4)) {
        return n.irq_cpus;
      }
    }
    return input_error("'" + std::string(spec) + "': the plan has no NIC " + std::string(spec.substr(4)));
  }
  if (!spec.empty() && (spec.front() < '0' || spec.front() > '9')) {
    return input_error("'" + std::string(spec) +
                       "': not a cpulist nor one of feeder, feeder:N, housekeeping, workers, nic:NAME, online");
  }
  auto s = parse_cpuset(spec, "CPU set");
  if (!s) {
    return s.error();
  }
  if (!plan.online.contains(*s)) {
    return input_error("CPU set '" + std::string(spec) + "': CPUs " + (*s - plan.online).str() + " are not online");
  }
  return *s;
}

} // namespace mltune
