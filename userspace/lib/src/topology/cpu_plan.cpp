#include "mltune/cpu_plan.hpp"

#include "mltune/parse.hpp"
#include "topology/cpu_plan_phases.hpp"

#include <algorithm>
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

namespace detail {

CoreBook::CoreBook(const Topology &topo) {
  for (const auto &c : topo.cores) {
    node_cores_[c.node].push_back(&c);
  }
}

const std::vector<const Core *> &CoreBook::on_node(int node) const {
  static const std::vector<const Core *> none;
  const auto it = node_cores_.find(node);
  return it == node_cores_.end() ? none : it->second;
}

std::vector<const Core *> CoreBook::free_on(int node) const {
  std::vector<const Core *> out;
  for (const auto *c : on_node(node)) {
    if (!taken(c)) {
      out.push_back(c);
    }
  }
  return out;
}

void plan_nic_irqs(const Topology &topo, const CpuSet &pool, CpuPlan &p) {
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
}

CpuPlan empty_cpu_plan(const Topology &topo, CpuPlan p, std::string reason) {
  p.reasons.push_back(std::move(reason));
  p.reasons.push_back("nothing is isolated: every online CPU (" + topo.online.str() + ") stays a housekeeping CPU");
  p.housekeeping = topo.online;
  p.workers = CpuSet{};
  plan_nic_irqs(topo, p.housekeeping, p);
  return p;
}

namespace {

// Housekeeping cores of socket `s`: one per k_cores_per_housekeeping, CPU 0's core first.
void socket_housekeeping(const Topology &topo, const Socket &s, CoreBook &book, CpuPlan &p) {
  const unsigned cpu0 = topo.online.first();
  std::vector<const Core *> sc;
  for (const auto &c : topo.cores) {
    if (c.socket == s.id) {
      sc.push_back(&c);
    }
  }
  // CPU 0's core first (it takes interrupts and timers no one can move).
  std::ranges::stable_partition(sc, [&](const Core *c) { return c->threads.test(cpu0); });
  const unsigned want = std::max(1U, (s.cores + k_cores_per_housekeeping - 1) / k_cores_per_housekeeping);
  std::vector<const Core *> chosen(sc.begin(),
                                   sc.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(want, sc.size())));
  for (const auto *c : chosen) {
    book.take(c);
  }
  const CpuSet hk = threads_of(chosen);
  p.housekeeping |= hk;
  p.reasons.push_back("housekeeping on socket " + std::to_string(s.id) + ": CPUs " + hk.str() + " (" +
                      plural(static_cast<unsigned>(chosen.size()), "physical core") + " of " + std::to_string(s.cores) +
                      ", one per " + std::to_string(k_cores_per_housekeeping) + " and at least one per socket" +
                      (hk.test(cpu0) ? ", CPU 0 included: it keeps timers and interrupts that cannot move" : "") +
                      ") for the OS, kthreads and IRQs");
}

} // namespace

void plan_housekeeping(const Topology &topo, CoreBook &book, CpuPlan &p) {
  for (const auto &s : topo.sockets) {
    socket_housekeeping(topo, s, book, p);
  }
  for (const auto &n : topo.nics) {
    const int node = n.pci.numa_node;
    const NumaNode *nn = node >= 0 ? topo.node(node) : nullptr;
    if (nn == nullptr || nn->cpus.empty() || p.housekeeping.intersects(nn->cpus)) {
      continue;
    }
    auto fc = book.free_on(node);
    if (fc.empty()) {
      continue;
    }
    book.take(fc.front());
    p.housekeeping |= fc.front()->threads;
    p.reasons.push_back("housekeeping on node " + std::to_string(node) + ": CPUs " + fc.front()->threads.str() +
                        " so " + n.name + "'s IRQs stay on its own NUMA node");
  }
}

namespace {

int nearest_with_cpus(const Topology &topo, const NumaNode &from) {
  int best = -1;
  int best_d = std::numeric_limits<int>::max();
  for (size_t i = 0; i < topo.nodes.size() && i < from.distances.size(); ++i) {
    if (!topo.nodes[i].cpus.empty() && from.distances[i] < best_d) {
      best_d = from.distances[i];
      best = topo.nodes[i].id;
    }
  }
  return best;
}

// The node GPU `g`'s feeder cores come from, as far as locality tells; -1 when it does not.
int gpu_cpu_node(const Topology &topo, const Gpu &g, const std::vector<int> &with_cpus, const std::string &name,
                 std::vector<std::string> &why) {
  int cpu_node = -1;
  const NumaNode *gn = g.pci.numa_node >= 0 ? topo.node(g.pci.numa_node) : nullptr;
  if (gn != nullptr && !gn->cpus.empty()) {
    cpu_node = gn->id;
  } else if (gn != nullptr) {
    cpu_node = nearest_with_cpus(topo, *gn);
    if (cpu_node >= 0) {
      why.push_back(name + " is on NUMA node " + std::to_string(gn->id) +
                    ", which has no CPUs: its feeder cores come from the nearest node with CPUs, node " +
                    std::to_string(cpu_node));
    }
  } else if (with_cpus.size() == 1) {
    cpu_node = with_cpus.front();
  } else {
    for (const int n : with_cpus) {
      if (!g.pci.local_cpus.empty() && topo.node(n)->cpus.contains(g.pci.local_cpus)) {
        cpu_node = n;
        why.push_back(name + " reports no NUMA node; its local_cpulist lies on node " + std::to_string(n));
      }
    }
  }
  return cpu_node;
}

} // namespace

NodeGpus place_gpus(const Topology &topo, const CoreBook &book, CpuPlan &p) {
  std::vector<int> with_cpus;
  for (const auto &n : topo.nodes) {
    if (!n.cpus.empty()) {
      with_cpus.push_back(n.id);
    }
  }
  NodeGpus node_gpus; // cpu node -> GpuPlan indices
  for (const auto &g : topo.gpus) {
    GpuPlan gp;
    gp.gpu = g.index;
    gp.pci = g.pci.address;
    gp.gpu_node = g.pci.numa_node;
    const std::string name = "GPU " + std::to_string(g.index) + " (" + g.pci.address + ")";
    gp.cpu_node = gpu_cpu_node(topo, g, with_cpus, name, p.reasons);
    if (gp.cpu_node < 0) {
      // Unknown locality: the node with the most free cores.
      size_t best = 0;
      for (const int n : with_cpus) {
        const size_t f = book.free_on(n).size() / (node_gpus[n].size() + 1);
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
  return node_gpus;
}

Result<unsigned> feeder_cores_per_gpu(int node, unsigned k, unsigned nfree, const PlanOptions &opts,
                                      std::vector<std::string> &why) {
  unsigned per = opts.feeder_cores_per_gpu;
  if (per > 0 && per * k > nfree) {
    return input_error("node " + std::to_string(node) + " has " + plural(nfree, "free physical core") +
                       " after housekeeping; " + std::to_string(k) + " GPUs x " + std::to_string(per) +
                       " feeder cores need " + std::to_string(per * k));
  }
  if (per > 0) {
    why.push_back("node " + std::to_string(node) + ": " + plural(per, "feeder core") + " per GPU as requested");
    return per;
  }
  per = nfree >= 3 * k ? 2 : (nfree >= k ? 1 : 0);
  if (per == 0) {
    why.push_back("node " + std::to_string(node) + ": " + plural(nfree, "free physical core") + " for " +
                  plural(k, "GPU") + ": too few to give each GPU a feeder core; none isolated there");
    return per;
  }
  why.push_back("node " + std::to_string(node) + ": " + plural(per, "feeder core") + " per GPU for " +
                plural(k, "GPU") + " (" + std::to_string(nfree) + " free physical cores; " +
                (per == 2 ? "one for the training loop, one for NCCL proxy/progress threads, "
                            "leaving at least one worker core per GPU"
                          : "too few for two per GPU with a worker core left") +
                ")");
  return per;
}

Status assign_feeders(const NodeGpus &node_gpus, const PlanOptions &opts, CoreBook &book, CpuPlan &p) {
  for (const auto &[node, idx] : node_gpus) {
    auto fc = book.free_on(node);
    auto per = feeder_cores_per_gpu(node, static_cast<unsigned>(idx.size()), static_cast<unsigned>(fc.size()), opts,
                                    p.reasons);
    if (!per) {
      return per.error();
    }
    if (*per == 0) {
      continue;
    }
    size_t next = 0;
    for (const size_t i : idx) {
      auto &gp = p.gpus[i];
      std::vector<const Core *> mine(fc.begin() + static_cast<std::ptrdiff_t>(next),
                                     fc.begin() + static_cast<std::ptrdiff_t>(next + *per));
      next += *per;
      for (const auto *c : mine) {
        book.take(c);
      }
      gp.feeder = threads_of(mine);
      p.feeder |= gp.feeder;
      p.reasons.push_back("GPU " + std::to_string(gp.gpu) + " (" + gp.pci + ", node " +
                          (gp.gpu_node >= 0 ? std::to_string(gp.gpu_node) : std::string("unknown")) +
                          "): feeder CPUs " + gp.feeder.str() + " (whole physical cores on node " +
                          std::to_string(gp.cpu_node) + ", SMT siblings included)");
    }
  }
  return {};
}

void plan_workers(const Topology &topo, CpuPlan &p) {
  p.workers = topo.online - p.housekeeping - p.feeder;
  p.reasons.push_back("worker CPUs " + (p.workers.empty() ? std::string("(none)") : p.workers.str()) +
                      ": neither housekeeping nor feeder; DataLoader workers run there");
  plan_nic_irqs(topo, p.housekeeping, p);
  for (const auto &np : p.nics) {
    p.reasons.push_back("NIC " + np.name + " (node " +
                        (np.node >= 0 ? std::to_string(np.node) : std::string("unknown")) +
                        "): IRQs on housekeeping CPUs " + np.irq_cpus.str() + ", never on feeder cores");
  }
}

NodeRanks plan_ranks(const PlanOptions &opts, CpuPlan &p) {
  const auto nranks = static_cast<unsigned>(p.gpus.size() / opts.gpus_per_rank);
  NodeRanks node_ranks; // primary node -> ranks
  for (unsigned r = 0; r < nranks; ++r) {
    RankPlan rp;
    rp.rank = r;
    for (unsigned j = 0; j < opts.gpus_per_rank; ++j) {
      const auto &gp = p.gpus[r * opts.gpus_per_rank + j];
      rp.gpus.push_back(gp.gpu);
      rp.cpus |= gp.feeder;
      if (std::ranges::find(rp.nodes, gp.cpu_node) == rp.nodes.end()) {
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
  return node_ranks;
}

void plan_rank_workers(const Topology &topo, const NodeRanks &node_ranks, const CoreBook &book, CpuPlan &p) {
  for (const auto &[node, ranks] : node_ranks) {
    const std::vector<const Core *> wc = book.free_on(node);
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
        p.reasons.push_back("rank " + std::to_string(rp.rank) + ": no spare worker core on node " +
                            std::to_string(node) + ": 1 DataLoader worker on the node's housekeeping CPUs " +
                            rp.worker_cpus.str());
      } else {
        p.reasons.push_back(
            "rank " + std::to_string(rp.rank) + ": " + plural(rp.dataloader_workers, "DataLoader worker") +
            " (one per physical worker core, SMT siblings not counted) on CPUs " + rp.worker_cpus.str());
      }
    }
  }
}

void plan_gpu_nics(const Topology &topo, CpuPlan &p) {
  const auto pairs = pair_gpus_with_nics(topo);
  for (auto &gp : p.gpus) {
    const auto &pair = pairs.at(gp.gpu);
    gp.nic = pair.nic;
    gp.nic_pci = pair.nic_pci;
    gp.nic_ib_device = pair.nic_ib_device;
    gp.nic_ib_port = pair.nic_ib_port;
    gp.nic_distance = pair.nic_distance;
    const std::string name = "GPU " + std::to_string(gp.gpu) + " (" + gp.pci + ")";
    if (gp.nic.empty()) {
      continue;
    }
    static constexpr std::string_view k_why[] = {"below the same PCIe switch", "below the same root port",
                                                 "on the same host bridge",    "on the same NUMA node",
                                                 "on another NUMA node",       "with unknown locality"};
    p.reasons.push_back(name + ": NIC " + gp.nic + " (" + gp.nic_pci +
                        (gp.nic_ib_device.empty() ? "" : ", " + gp.nic_ib_device) + ") " +
                        std::string(k_why[static_cast<size_t>(gp.nic_distance)]) + ", the nearest");
    if (gp.nic_distance == PciDistance::cross_node || gp.nic_distance == PciDistance::unknown) {
      p.warnings.push_back(name + ": no NIC on its NUMA node; the nearest, " + gp.nic + ", is " +
                           std::string(k_why[static_cast<size_t>(gp.nic_distance)]));
    }
  }
}

namespace {

// NCCL_IB_HCA and UCX_NET_DEVICES for RDMA NICs ("=mlx5_0:1", exact match,
// so that mlx5_1 does not also select mlx5_10); NCCL_SOCKET_IFNAME and
// UCX_NET_DEVICES for NICs without RDMA, whose sockets carry the traffic.
void nic_env(const CpuPlan &p, RankPlan &rp) {
  std::vector<std::string> hcas;
  std::vector<std::string> ifnames;
  for (const unsigned g : rp.gpus) {
    for (const auto &gp : p.gpus) {
      if (gp.gpu != g || gp.nic.empty()) {
        continue;
      }
      const std::string v = gp.nic_ib_device.empty() ? gp.nic : gp.nic_ib_device + ":" + std::to_string(gp.nic_ib_port);
      auto &list = gp.nic_ib_device.empty() ? ifnames : hcas;
      if (std::ranges::find(list, v) == list.end()) {
        list.push_back(v);
      }
    }
  }
  auto join = [](const std::vector<std::string> &v) {
    std::string s;
    for (const auto &x : v) {
      s += (s.empty() ? "" : ",") + x;
    }
    return s;
  };
  if (!hcas.empty()) {
    rp.env.emplace_back("NCCL_IB_HCA", "=" + join(hcas));
    rp.env.emplace_back("UCX_NET_DEVICES", join(hcas));
  } else if (!ifnames.empty()) {
    rp.env.emplace_back("NCCL_SOCKET_IFNAME", "=" + join(ifnames));
    rp.env.emplace_back("UCX_NET_DEVICES", join(ifnames));
  }
}

} // namespace

void plan_rank_env(const Topology &topo, CpuPlan &p) {
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
    const bool nvidia = std::ranges::all_of(rp.gpus, [&](unsigned g) { return topo.gpus[g].vendor == "NVIDIA"; });
    rp.env.emplace_back("OMP_NUM_THREADS", std::to_string(rp.omp_threads));
    rp.env.emplace_back("NCCL_SET_THREAD_NAME", "1");
    if (nvidia) {
      rp.env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
      rp.env.emplace_back("CUDA_VISIBLE_DEVICES", gpus);
    }
    nic_env(p, rp);
    rp.env.emplace_back("MLTUNE_DATALOADER_WORKERS", std::to_string(rp.dataloader_workers));
    rp.env.emplace_back("MLTUNE_DATALOADER_CPUS", rp.worker_cpus.str());
    const std::string nodes = join_nodes(rp.nodes);
    rp.launch = "numactl --cpunodebind=" + nodes + " --membind=" + nodes + " taskset -c " + rp.cpus.str() + " env";
    for (const auto &[k, v] : rp.env) {
      rp.launch += " " + k + "=" + v;
    }
    rp.launch += " <command>";
  }
  p.reasons.emplace_back("launch lines: memory bound to the GPU's node (numactl --membind), the process on its "
                         "feeder CPUs (taskset), OMP_NUM_THREADS = its physical feeder cores, "
                         "NCCL_SET_THREAD_NAME=1 so NCCL's threads can be told apart, the GPUs' nearest NICs "
                         "(NCCL_IB_HCA and UCX_NET_DEVICES for RDMA NICs, NCCL_SOCKET_IFNAME otherwise); DataLoader "
                         "workers should pin themselves to MLTUNE_DATALOADER_CPUS");
}

} // namespace detail

Result<CpuPlan> make_cpu_plan(const Topology &topo, const PlanOptions &opts) {
  using namespace detail;
  if (opts.gpus_per_rank == 0) {
    return input_error("--gpus-per-rank must be at least 1");
  }
  CpuPlan p;
  p.online = topo.online;
  p.warnings = topo.warnings;
  if (topo.gpus.empty()) {
    return empty_cpu_plan(topo, std::move(p),
                          "no GPU found (PCI class 0x0300/0x0302 from NVIDIA, AMD or Intel, or an accelerator): "
                          "there is nothing to feed");
  }
  if (topo.gpus.size() % opts.gpus_per_rank != 0) {
    return input_error(std::to_string(topo.gpus.size()) + " GPUs cannot be split into ranks of " +
                       std::to_string(opts.gpus_per_rank) + " (--gpus-per-rank)");
  }
  if (topo.cores.size() < k_min_cores) {
    return empty_cpu_plan(topo, std::move(p),
                          "the machine has " + plural(static_cast<unsigned>(topo.cores.size()), "physical core") +
                              ": too small to isolate anything (needs at least " + std::to_string(k_min_cores) +
                              ": housekeeping, a feeder core and DataLoader workers)");
  }
  CoreBook book(topo);
  plan_housekeeping(topo, book, p);
  const NodeGpus node_gpus = place_gpus(topo, book, p);
  if (auto st = assign_feeders(node_gpus, opts, book, p); !st) {
    return st.error();
  }
  if (p.feeder.empty()) {
    p.housekeeping = CpuSet{};
    return empty_cpu_plan(topo, std::move(p),
                          "no node has a physical core to spare for its GPUs: too small to isolate anything");
  }
  plan_workers(topo, p);
  plan_gpu_nics(topo, p);
  const NodeRanks node_ranks = plan_ranks(opts, p);
  plan_rank_workers(topo, node_ranks, book, p);
  plan_rank_env(topo, p);
  return p;
}

std::vector<GpuPlan> pair_gpus_with_nics(const Topology &topo) {
  std::vector<GpuPlan> out;
  std::vector<unsigned> served(topo.nics.size(), 0);
  for (const auto &g : topo.gpus) {
    GpuPlan gp;
    gp.gpu = g.index;
    gp.pci = g.pci.address;
    gp.gpu_node = g.pci.numa_node;
    size_t best = topo.nics.size();
    for (size_t i = 0; i < topo.nics.size(); ++i) {
      const PciDistance d = pci_distance(topo, g.pci, topo.nics[i].pci);
      if (best == topo.nics.size() || d < gp.nic_distance || (d == gp.nic_distance && served[i] < served[best])) {
        best = i;
        gp.nic_distance = d;
      }
    }
    if (best < topo.nics.size()) {
      const Nic &n = topo.nics[best];
      ++served[best];
      gp.nic = n.name;
      gp.nic_pci = n.pci.address;
      gp.nic_ib_device = n.ib_device;
      gp.nic_ib_port = n.ib_port;
    }
    out.push_back(std::move(gp));
  }
  return out;
}

Result<CpuSet> resolve_cpuset(std::string_view spec, const CpuPlan &plan) {
  if (spec == "none") {
    return CpuSet{};
  }
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
  if (spec.starts_with("feeder:")) {
    const auto idx = parse_int<unsigned>(spec.substr(7));
    if (!idx) {
      return input_error("'" + std::string(spec) + "': expected feeder:GPU_INDEX");
    }
    for (const auto &g : plan.gpus) {
      if (g.gpu == *idx) {
        return g.feeder;
      }
    }
    return input_error("'" + std::string(spec) + "': the plan has no GPU " + std::to_string(*idx) + " (" +
                       std::to_string(plan.gpus.size()) + " GPUs planned)");
  }
  if (spec.starts_with("nic:")) {
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
