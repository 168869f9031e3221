// recommend_profile() (recommend.hpp).
#include "mltune/recommend.hpp"

namespace mltune {

namespace {

constexpr unsigned k_training_gpus = 4;
constexpr std::uint64_t k_kb_per_gib = 1024ULL * 1024ULL;
// Less host memory than this per GPU limits pinned staging buffers.
constexpr std::uint64_t k_low_gib_per_gpu = 16;

std::string gpu_list(const Topology &t) {
  std::string vendors;
  for (const auto &g : t.gpus) {
    const std::string v = g.vendor.empty() ? g.vendor_id : g.vendor;
    if (vendors.find(v) == std::string::npos) {
      vendors += (vendors.empty() ? "" : ", ") + v;
    }
  }
  return std::to_string(t.gpus.size()) + " GPU(s) (" + vendors + ")";
}

} // namespace

Recommendation recommend_profile(const Topology &topo) {
  Recommendation r;
  r.gpus = static_cast<unsigned>(topo.gpus.size());
  for (const auto &n : topo.nodes) {
    r.node_memory_kb += n.mem_total_kb;
  }
  r.memory_kb = topo.mem_total_kb != 0 ? topo.mem_total_kb : r.node_memory_kb;
  for (const auto &n : topo.nics) {
    if (!n.ib_device.empty()) {
      r.rdma_nics.push_back(n.name + " (" + n.ib_device + ")");
    }
  }
  if (r.gpus == 0) {
    r.reasons.emplace_back("no GPU found (PCI display or 3D controller): mltune's profiles tune GPU nodes");
    return r;
  }
  if (!r.rdma_nics.empty()) {
    r.profile = "training";
    r.reasons.push_back(gpu_list(topo) + " and RDMA NIC(s) " + r.rdma_nics.front() +
                        (r.rdma_nics.size() > 1 ? " and " + std::to_string(r.rdma_nics.size() - 1) + " more" : "") +
                        ": a node of a multi-node training cluster (NCCL over InfiniBand/RoCE)");
  } else if (r.gpus >= k_training_gpus) {
    r.profile = "training";
    r.reasons.push_back(gpu_list(topo) + ", no RDMA NIC: a multi-GPU node for data- or tensor-parallel training");
  } else {
    r.profile = "inference";
    r.reasons.push_back(gpu_list(topo) + ", no RDMA NIC: a serving node (latency over throughput)");
  }
  const std::uint64_t gib = r.memory_kb / k_kb_per_gib;
  if (r.memory_kb > 0) {
    std::string nodes;
    // The NUMA nodes' figures apart when they miss memory (hot-plugged
    // memory, memory-only nodes the node files leave out).
    if (r.node_memory_kb != 0 && r.node_memory_kb < r.memory_kb && (r.memory_kb - r.node_memory_kb) >= k_kb_per_gib) {
      nodes = " (NUMA nodes: ";
      for (size_t i = 0; i < topo.nodes.size(); ++i) {
        nodes += (i != 0 ? ", " : "") + std::to_string(topo.nodes[i].id) + ": " +
                 std::to_string(topo.nodes[i].mem_total_kb / k_kb_per_gib) + " GiB";
      }
      nodes += ")";
    }
    r.reasons.push_back(
        std::to_string(gib) + " GiB of memory" + nodes + ", " + std::to_string(gib / r.gpus) + " GiB per GPU" +
        (gib / r.gpus < k_low_gib_per_gpu ? ": little for pinned staging buffers; size the pool with care" : ""));
  }
  return r;
}

} // namespace mltune
