// mltunectl exec --gpu N [--rank R] [--mempolicy bind|preferred|none] -- CMD [ARGS...]
// (Documentation/topology.rst, "Launch-time binding")
#include "cli.hpp"

#include "mltune/launch.hpp"
#include "mltune/topology.hpp"

#include <cerrno>
#include <ostream>

namespace mltune::cli {

namespace {

struct ExecArgs {
  PlanOptions plan;
  std::optional<unsigned> gpu, rank;
  std::string mempolicy = "bind";
  std::vector<std::string> cmd;
};

std::string nodes_str(const std::vector<int> &nodes) {
  std::string s;
  for (const int n : nodes) {
    s += (s.empty() ? "" : ",") + std::to_string(n);
  }
  return s;
}

void show(Context &ctx, const LaunchSpec &s, const std::vector<std::string> &cmd) {
  if (ctx.json) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto &[k, v] : s.env) {
      env[k] = v;
    }
    return ctx.emit({{"rank", s.rank},
                     {"gpus", s.gpus},
                     {"cpus", s.cpus.str()},
                     {"mempolicy", to_string(s.mempolicy)},
                     {"nodes", s.nodes},
                     {"env", env},
                     {"command", cmd}});
  }
  auto &o = *ctx.out;
  o << "rank " << s.rank << " (GPU";
  for (const unsigned g : s.gpus) {
    o << " " << g;
  }
  o << ")\n  CPU affinity:  " << s.cpus.str() << "\n  memory policy: " << to_string(s.mempolicy);
  if (s.mempolicy != MemPolicy::none) {
    o << " on node" << (s.nodes.size() == 1 ? " " : "s ") << nodes_str(s.nodes);
  }
  o << "\n  environment:  ";
  for (const auto &[k, v] : s.env) {
    o << " " << k << "=" << v;
  }
  o << "\n  command:      ";
  for (const auto &a : cmd) {
    o << " " << a;
  }
  o << "\n";
}

void run_exec(Context &ctx, const ExecArgs &a) {
  auto policy = parse_mempolicy(a.mempolicy);
  if (!policy) {
    return ctx.fail(policy.error());
  }
  auto t = discover_topology(ctx.root(), {.pcie_state = false});
  if (!t) {
    return ctx.fail(t.error());
  }
  auto p = make_cpu_plan(*t, a.plan);
  if (!p) {
    return ctx.fail(p.error());
  }
  auto spec = launch_spec(*p, {a.gpu, a.rank, *policy});
  if (!spec) {
    return ctx.fail(spec.error());
  }
  if (ctx.dry_run) {
    return show(ctx, *spec, a.cmd);
  }
  // The affinity and memory policy are this process's, set on the live
  // kernel: not for a file tree (exit 2), nor a container of its own.
  if (auto st = ctx.root().require_namespaces("exec", {"pid"}); !st) {
    return ctx.fail(st.error());
  }
  ctx.out->flush();
  const Status st = exec_launch(*spec, a.cmd); // returns only on failure
  ctx.fail(st.error());
  if (st.error().sys_errno == ENOENT) {
    ctx.rc = k_exit_not_found;
  } else if (st.error().sys_errno == EACCES || st.error().sys_errno == ENOEXEC) {
    ctx.rc = k_exit_cannot_run;
  }
}

} // namespace

void register_exec(CLI::App &app, Context &ctx) {
  auto args = std::make_shared<ExecArgs>();
  auto *cmd = app.add_subcommand("exec", "Run a command placed for one GPU's rank: CPU affinity, memory policy, "
                                         "NIC and NCCL/UCX environment, DataLoader worker counts");
  cmd->add_option("--gpu", args->gpu, "Place the rank that drives this GPU (topology index)");
  cmd->add_option("--rank", args->rank, "Place this rank of the plan (with --gpus-per-rank)");
  cmd->add_option("--mempolicy", args->mempolicy,
                  "Memory policy on the rank's NUMA nodes: bind (default, as numactl --membind), preferred, none");
  add_plan_options(cmd, args->plan);
  cmd->add_option("cmd", args->cmd, "command and arguments (after --)")->required();
  cmd->callback([&ctx, args] { run_exec(ctx, *args); });
}

} // namespace mltune::cli
