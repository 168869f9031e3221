// mltunectl topology [--json]
#include "cli.hpp"
#include "topology_json.hpp"

#include <ostream>

namespace mltune::cli {

namespace {

// A PCI device: its address and locality, then its own fields.
nlohmann::json pci_json(const PciLocality &p, const nlohmann::json &fields) {
  nlohmann::json o{{"pci", p.address}, {"numa_node", p.numa_node}, {"local_cpus", p.local_cpus.str()}};
  o.update(fields);
  return o;
}

std::string node_str(int n) {
  return n >= 0 ? std::to_string(n) : std::string("unknown");
}

void run_topology(Context &ctx) {
  auto t = discover_topology(ctx.root());
  if (!t) {
    return ctx.fail(t.error());
  }
  for (const auto &w : t->warnings) {
    *ctx.err << "mltunectl: warning: " << w << "\n";
  }
  if (ctx.json) {
    return ctx.emit(topology_json(*t));
  }
  auto &o = *ctx.out;
  o << "CPUs: " << t->online.count() << " online (" << t->online.str() << "), " << t->cores.size()
    << " physical cores, " << t->sockets.size() << " socket" << (t->sockets.size() == 1 ? "" : "s")
    << (t->smt() ? ", SMT on" : ", no SMT");
  if (!t->cpu_model.empty()) {
    o << ", " << t->cpu_model;
  }
  o << "\n";
  for (const auto &s : t->sockets) {
    o << "socket " << s.id << ": CPUs " << s.cpus.str() << ", " << s.cores << " cores, NUMA nodes";
    for (const int n : s.nodes) {
      o << " " << n;
    }
    o << "\n";
  }
  for (const auto &n : t->nodes) {
    o << "node " << n.id << ": CPUs " << (n.cpus.empty() ? "(none)" : n.cpus.str()) << ", " << n.mem_total_kb / 1024
      << " MiB, distances";
    for (const int d : n.distances) {
      o << " " << d;
    }
    o << "\n";
  }
  if (ctx.verbose > 0) {
    for (const auto &c : t->cores) {
      o << "core " << c.core_id << " (socket " << c.socket << ", node " << node_str(c.node) << "): CPUs "
        << c.threads.str() << "\n";
    }
  }
  for (const auto &g : t->gpus) {
    o << "GPU " << g.index << ": " << g.pci.address << " " << g.vendor << " " << g.device_id << " (class "
      << g.pci_class << "), node " << node_str(g.pci.numa_node) << ", local CPUs " << g.pci.local_cpus.str() << "\n";
  }
  if (t->gpus.empty()) {
    o << "GPUs: none\n";
  }
  for (const auto &n : t->nics) {
    o << "NIC " << n.name << ": " << n.pci.address << " " << (n.driver.empty() ? "(no driver)" : n.driver) << ", node "
      << node_str(n.pci.numa_node) << ", " << n.rx_queues << " rx / " << n.tx_queues << " tx queues, " << n.irqs.size()
      << " IRQs";
    if (!n.irqs.empty()) {
      o << " (" << n.irqs.front().irq << (n.irqs.size() > 1 ? "-" + std::to_string(n.irqs.back().irq) : "") << ")";
    }
    o << "\n";
  }
  for (const auto &n : t->nvme) {
    o << "NVMe " << n.name << ": " << n.pci.address << ", node " << node_str(n.pci.numa_node) << "\n";
  }
}

} // namespace

nlohmann::json topology_json(const Topology &t) {
  nlohmann::json j;
  j["cpu"] = {{"vendor", t.cpu_vendor},           {"model", t.cpu_model},
              {"online", t.online.str()},         {"count", t.online.count()},
              {"physical_cores", t.cores.size()}, {"smt", t.smt()}};
  auto &sockets = j["sockets"] = nlohmann::json::array();
  for (const auto &s : t.sockets) {
    sockets.push_back({{"id", s.id}, {"cpus", s.cpus.str()}, {"cores", s.cores}, {"nodes", s.nodes}});
  }
  auto &nodes = j["nodes"] = nlohmann::json::array();
  for (const auto &n : t.nodes) {
    nodes.push_back({{"id", n.id}, {"cpus", n.cpus.str()}, {"memory_kb", n.mem_total_kb}, {"distances", n.distances}});
  }
  auto &cores = j["cores"] = nlohmann::json::array();
  for (const auto &c : t.cores) {
    cores.push_back({{"socket", c.socket}, {"core_id", c.core_id}, {"node", c.node}, {"cpus", c.threads.str()}});
  }
  auto &gpus = j["gpus"] = nlohmann::json::array();
  for (const auto &g : t.gpus) {
    gpus.push_back(pci_json(g.pci, {{"index", g.index},
                                    {"vendor", g.vendor},
                                    {"vendor_id", g.vendor_id},
                                    {"device_id", g.device_id},
                                    {"class", g.pci_class}}));
  }
  auto &nics = j["nics"] = nlohmann::json::array();
  for (const auto &n : t.nics) {
    nlohmann::json irqs = nlohmann::json::array();
    for (const auto &i : n.irqs) {
      irqs.push_back({{"irq", i.irq}, {"name", i.name}});
    }
    nics.push_back(pci_json(n.pci, {{"name", n.name},
                                    {"driver", n.driver},
                                    {"rx_queues", n.rx_queues},
                                    {"tx_queues", n.tx_queues},
                                    {"irqs", irqs}}));
  }
  auto &nvme = j["nvme"] = nlohmann::json::array();
  for (const auto &n : t.nvme) {
    nvme.push_back(pci_json(n.pci, {{"name", n.name}}));
  }
  j["warnings"] = t.warnings;
  return j;
}

void register_topology(CLI::App &app, Context &ctx) {
  auto *cmd = app.add_subcommand("topology", "Show sockets, NUMA nodes, cores, GPUs, NICs and NVMe devices");
  cmd->callback([&ctx] { run_topology(ctx); });
}

} // namespace mltune::cli
