// mltunectl plan [--gpus-per-rank N] [--feeder-cores-per-gpu N]
#include "cli.hpp"
#include "topology_json.hpp"

#include <memory>
#include <ostream>

namespace mltune::cli {

namespace {

void run_plan(Context &ctx, const PlanOptions &opts) {
  auto t = discover_topology(ctx.root(), {.pcie_state = false});
  if (!t) {
    return ctx.fail(t.error());
  }
  auto p = make_cpu_plan(*t, opts);
  if (!p) {
    return ctx.fail(p.error());
  }
  for (const auto &w : p->warnings) {
    *ctx.err << "mltunectl: warning: " << w << "\n";
  }
  if (ctx.json) {
    return ctx.emit(plan_json(*p));
  }
  auto &o = *ctx.out;
  if (p->empty()) {
    o << "empty plan: nothing isolated\n";
  } else {
    o << "housekeeping CPUs: " << p->housekeeping.str() << "\n"
      << "feeder CPUs:       " << p->feeder.str() << "\n"
      << "worker CPUs:       " << (p->workers.empty() ? "(none)" : p->workers.str()) << "\n";
    for (const auto &g : p->gpus) {
      o << "GPU " << g.gpu << " (" << g.pci << "): feeder CPUs " << (g.feeder.empty() ? "(none)" : g.feeder.str())
        << " on node " << g.cpu_node;
      if (!g.nic.empty()) {
        o << ", NIC " << g.nic << (g.nic_ib_device.empty() ? "" : " (" + g.nic_ib_device + ")") << " ["
          << to_string(g.nic_distance) << "]";
      }
      o << "\n";
    }
  }
  for (const auto &n : p->nics) {
    o << "NIC " << n.name << ": IRQ CPUs " << n.irq_cpus.str() << " (" << n.irqs.size() << " IRQs)\n";
  }
  for (const auto &r : p->ranks) {
    o << "rank " << r.rank << ": " << r.dataloader_workers << " DataLoader workers\n  " << r.launch << "\n";
  }
  o << "why:\n";
  for (const auto &w : p->reasons) {
    o << "  - " << w << "\n";
  }
}

} // namespace

nlohmann::json plan_json(const CpuPlan &p) {
  nlohmann::json j;
  j["empty"] = p.empty();
  j["online"] = p.online.str();
  j["housekeeping"] = p.housekeeping.str();
  j["feeder"] = p.feeder.str();
  j["workers"] = p.workers.str();
  auto &gpus = j["gpus"] = nlohmann::json::array();
  for (const auto &g : p.gpus) {
    nlohmann::json nic = nullptr;
    if (!g.nic.empty()) {
      nic = {{"name", g.nic},
             {"pci", g.nic_pci},
             {"ib_device", g.nic_ib_device},
             {"ib_port", g.nic_ib_port},
             {"distance", to_string(g.nic_distance)}};
    }
    gpus.push_back({{"gpu", g.gpu},
                    {"pci", g.pci},
                    {"gpu_node", g.gpu_node},
                    {"cpu_node", g.cpu_node},
                    {"feeder", g.feeder.str()},
                    {"nic", nic}});
  }
  auto &nics = j["nics"] = nlohmann::json::array();
  for (const auto &n : p.nics) {
    nics.push_back({{"name", n.name}, {"node", n.node}, {"irq_cpus", n.irq_cpus.str()}, {"irqs", n.irqs}});
  }
  auto &ranks = j["ranks"] = nlohmann::json::array();
  for (const auto &r : p.ranks) {
    nlohmann::json env = nlohmann::json::object();
    for (const auto &[k, v] : r.env) {
      env[k] = v;
    }
    ranks.push_back({{"rank", r.rank},
                     {"gpus", r.gpus},
                     {"nodes", r.nodes},
                     {"cpus", r.cpus.str()},
                     {"worker_cpus", r.worker_cpus.str()},
                     {"dataloader_workers", r.dataloader_workers},
                     {"omp_threads", r.omp_threads},
                     {"env", env},
                     {"launch", r.launch}});
  }
  j["reasons"] = p.reasons;
  j["warnings"] = p.warnings;
  return j;
}

void add_plan_options(CLI::App *cmd, PlanOptions &opts) {
  cmd->add_option("--gpus-per-rank", opts.gpus_per_rank, "GPUs driven by one process (default 1)")
      ->check(CLI::Range(1U, 1024U));
  cmd->add_option("--feeder-cores-per-gpu", opts.feeder_cores_per_gpu,
                  "Physical feeder cores per GPU (default: automatic, 2 when the node has room)")
      ->check(CLI::Range(0U, 1024U));
}

void register_plan(CLI::App &app, Context &ctx) {
  auto opts = std::make_shared<PlanOptions>();
  auto *cmd = app.add_subcommand("plan", "Plan housekeeping, GPU-feeder and worker cores, NIC IRQ CPUs, each "
                                         "GPU's nearest NIC and per-rank launch lines from the topology");
  add_plan_options(cmd, *opts);
  cmd->callback([&ctx, opts] { run_plan(ctx, *opts); });
}

} // namespace mltune::cli
