#include "mltune/launch.hpp"

#include "base/process.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace mltune {

std::string_view to_string(MemPolicy p) {
  switch (p) {
  case MemPolicy::bind: return "bind";
  case MemPolicy::preferred: return "preferred";
  case MemPolicy::none: return "none";
  }
  return "none";
}

Result<MemPolicy> parse_mempolicy(std::string_view s) {
  for (const auto p : {MemPolicy::bind, MemPolicy::preferred, MemPolicy::none}) {
    if (s == to_string(p)) {
      return p;
    }
  }
  return input_error("memory policy '" + std::string(s) + "': expected bind, preferred or none");
}

Result<LaunchSpec> launch_spec(const CpuPlan &plan, const LaunchOptions &opts) {
  if (!opts.gpu && !opts.rank) {
    return input_error("name the GPU (--gpu N) or the rank (--rank R) to place");
  }
  if (plan.ranks.empty()) {
    const std::string why = plan.reasons.empty() ? std::string("no GPU") : plan.reasons.front();
    return failure("the plan places no rank (" + why + "): nothing to bind to");
  }
  const RankPlan *rp = nullptr;
  if (opts.gpu) {
    for (const auto &r : plan.ranks) {
      if (std::ranges::find(r.gpus, *opts.gpu) != r.gpus.end()) {
        rp = &r;
      }
    }
    if (rp == nullptr) {
      return input_error("--gpu " + std::to_string(*opts.gpu) + ": the plan has GPUs 0-" +
                         std::to_string(plan.gpus.size() - 1));
    }
  }
  if (opts.rank) {
    if (*opts.rank >= plan.ranks.size()) {
      return input_error("--rank " + std::to_string(*opts.rank) + ": the plan has ranks 0-" +
                         std::to_string(plan.ranks.size() - 1));
    }
    if (rp != nullptr && rp->rank != *opts.rank) {
      return input_error("--gpu " + std::to_string(*opts.gpu) + " belongs to rank " + std::to_string(rp->rank) +
                         ", not to rank " + std::to_string(*opts.rank));
    }
    rp = &plan.ranks[*opts.rank];
  }
  LaunchSpec s;
  s.rank = rp->rank;
  s.gpus = rp->gpus;
  s.cpus = rp->cpus;
  s.nodes = rp->nodes;
  s.mempolicy = opts.mempolicy;
  s.env = rp->env;
  return s;
}

Status exec_launch(const LaunchSpec &spec, const std::vector<std::string> &argv) {
  if (argv.empty()) {
    return input_error("no command given (mltunectl exec --gpu N -- COMMAND ...)");
  }
  if (auto st = detail::set_affinity(spec.cpus); !st) {
    return st;
  }
  if (spec.mempolicy != MemPolicy::none) {
    auto st = spec.mempolicy == MemPolicy::bind ? detail::bind_memory(spec.nodes) : detail::prefer_memory(spec.nodes);
    if (!st) {
      return st;
    }
  }
  for (const auto &[k, v] : spec.env) {
    if (::setenv(k.c_str(), v.c_str(), 1) != 0) {
      return sys_error("setenv " + k, errno);
    }
  }
  return detail::exec_argv(argv);
}

} // namespace mltune
