// Which profile suits a node, from its hardware (mltunectl recommend).
//
// The rules, in order, each stated in the reasons:
//   no GPU                       -> none (the profiles are for GPU nodes)
//   an RDMA NIC (InfiniBand/RoCE) -> training (multi-node collectives)
//   4 or more GPUs               -> training (data/tensor-parallel jobs)
//   otherwise (1-3 GPUs)         -> inference (serving)
// and notes what they do not decide on (host memory per GPU).
#pragma once

#include "mltune/topology.hpp"

#include <string>
#include <vector>

namespace mltune {

struct Recommendation {
  std::string profile;              // "training", "inference", "" (none)
  std::vector<std::string> reasons; // the facts it rests on, for people
  unsigned gpus = 0;
  std::vector<std::string> rdma_nics; // "eth2 (mlx5_0)"
  std::uint64_t memory_kb = 0;        // MemTotal, else the NUMA nodes' total
  std::uint64_t node_memory_kb = 0;   // the NUMA nodes' total
};

Recommendation recommend_profile(const Topology &topo);

} // namespace mltune
