// mltunectl topology [--json]
#include "cli.hpp"
#include "topology_json.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace mltune::cli {

namespace {

// A PCI device: its address and locality, then its own fields.
nlohmann::json pci_json(const PciLocality &p, const nlohmann::json &fields) {
  nlohmann::json o{{"pci", p.address},
                   {"numa_node", p.numa_node},
                   {"local_cpus", p.local_cpus.str()},
                   {"host_bridge", p.host_bridge},
                   {"pcie_path", p.path}};
  o.update(fields);
  return o;
}

// Tenths of GT/s as a JSON number of GT/s; null when unknown.
nlohmann::json gts(unsigned tenths) {
  return tenths > 0 ? nlohmann::json(tenths / 10.0) : nlohmann::json(nullptr);
}

nlohmann::json pcie_node_json(const PciNode &n) {
  const PciConfig &c = n.config;
  auto opt_uint = [](unsigned v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json acs = nullptr;
  if (c.acs) {
    char cap[8];
    char ctl[8];
    std::snprintf(cap, sizeof cap, "0x%04x", c.acs_cap);
    std::snprintf(ctl, sizeof ctl, "0x%04x", c.acs_ctl);
    acs = {{"capability", cap}, {"control", ctl}, {"p2p_redirect", (c.acs_ctl & k_acs_p2p_redirect) != 0}};
  }
  return {{"pci", n.address},
          {"parent", n.parent},
          {"host_bridge", n.host_bridge},
          {"class", n.pci_class},
          {"type", to_string(n.type)},
          {"type_from_config", n.type_from_config},
          {"device", n.device},
          {"numa_node", n.numa_node},
          {"slot", n.slot},
          {"link",
           {{"current_gts", gts(n.link.current_speed)},
            {"current_width", opt_uint(n.link.current_width)},
            {"max_gts", gts(n.link.max_speed)},
            {"max_width", opt_uint(n.link.max_width)}}},
          {"config_readable", c.caps_readable},
          {"max_payload", opt_uint(c.max_payload)},
          {"max_read_request", opt_uint(c.max_read_req)},
          {"relaxed_ordering", c.relaxed_ordering ? nlohmann::json(*c.relaxed_ordering) : nlohmann::json(nullptr)},
          {"acs", acs},
          {"iommu_group", n.iommu_group},
          {"iommu_type", n.iommu_type}};
}

// One line per function of the PCIe tree below `parent` ("" for the root bus of `hb`), indented by depth.
void print_pcie(std::ostream &o, const Topology &t, const std::string &hb, const std::string &parent, int depth) {
  for (const auto &n : t.pci) {
    if (n.host_bridge != hb || n.parent != parent) {
      continue;
    }
    o << std::string(static_cast<size_t>(2 * depth), ' ') << n.address << " "
      << (n.device.empty() ? std::string(to_string(n.type)) : n.device);
    if (n.link.known()) {
      o << ", " << link_str(n.link.current_width, n.link.current_speed);
      if (n.link.current_width != n.link.max_width || n.link.current_speed != n.link.max_speed) {
        o << " (max " << link_str(n.link.max_width, n.link.max_speed) << ")";
      }
    }
    if (n.config.acs && n.bridge()) {
      o << ", ACS " << acs_bits_str(n.config.acs_ctl);
    }
    if (!n.slot.empty()) {
      o << ", slot " << n.slot;
    }
    if (n.iommu_group >= 0) {
      o << ", IOMMU group " << n.iommu_group << " (" << n.iommu_type << ")";
    }
    o << "\n";
    print_pcie(o, t, hb, n.address, depth + 1);
  }
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
    name_nic_irqs(ctx.root(), *t);
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
    o << "NIC " << n.name << ": " << n.pci.address << " " << (n.driver.empty() ? "(no driver)" : n.driver)
      << (n.ib_device.empty() ? "" : " " + n.ib_device) << ", node " << node_str(n.pci.numa_node) << ", " << n.rx_queues
      << " rx / " << n.tx_queues << " tx queues, " << n.irqs.size() << " IRQs";
    if (!n.irqs.empty()) {
      o << " (" << n.irqs.front().irq << (n.irqs.size() > 1 ? "-" + std::to_string(n.irqs.back().irq) : "") << ")";
    }
    o << "\n";
  }
  for (const auto &n : t->nvme) {
    o << "NVMe " << n.name << ": " << n.pci.address << ", node " << node_str(n.pci.numa_node) << "\n";
  }
  std::vector<std::string> bridges;
  for (const auto &n : t->pci) {
    if (std::ranges::find(bridges, n.host_bridge) == bridges.end()) {
      bridges.push_back(n.host_bridge);
    }
  }
  std::ranges::sort(bridges);
  if (!bridges.empty()) {
    o << "PCIe tree (GPUs, NICs, NVMe and the ports above them):\n";
  }
  for (const auto &hb : bridges) {
    o << "  " << hb << "\n";
    print_pcie(o, *t, hb, "", 2);
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
  j["memory_kb"] = t.mem_total_kb;
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
                                    {"ib_device", n.ib_device},
                                    {"ib_port", n.ib_port},
                                    {"rx_queues", n.rx_queues},
                                    {"tx_queues", n.tx_queues},
                                    {"irqs", irqs}}));
  }
  auto &nvme = j["nvme"] = nlohmann::json::array();
  for (const auto &n : t.nvme) {
    nvme.push_back(pci_json(n.pci, {{"name", n.name}}));
  }
  auto &pcie = j["pcie"] = nlohmann::json::array();
  for (const auto &n : t.pci) {
    pcie.push_back(pcie_node_json(n));
  }
  j["iommu_groups"] = t.iommu_groups;
  j["warnings"] = t.warnings;
  return j;
}

void register_topology(CLI::App &app, Context &ctx) {
  auto *cmd = app.add_subcommand("topology", "Show sockets, NUMA nodes, cores, GPUs, NICs, NVMe devices and the "
                                             "PCIe tree above them");
  cmd->callback([&ctx] { run_topology(ctx); });
}

} // namespace mltune::cli
