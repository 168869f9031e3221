// PCIe findings of audit(): what the PCIe tree of a Topology (topology/pci_tree.cpp)
// says about the GPUs, NICs and NVMe devices.  Every fact comes from sysfs:
// current_link_* / max_link_* of the device and of the port above it, the
// `config` file (ACS Control, Device Control), /sys/kernel/iommu_groups/N/type,
// numa_node, /sys/bus/pci/slots/*/address.  Documentation/topology.rst
// ("PCIe audit") lists them with the fix for each.
#include "audit/audit_parts.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace mltune::detail {

namespace {

// NICs whose link carries at least this much (Gen3 x8) want 4 KiB reads.
constexpr unsigned k_fast_link_speed = 80;
constexpr unsigned k_fast_link_width = 8;
constexpr unsigned k_nic_max_read_req = 4096;

enum class Kind { gpu, nic, nvme };

Kind kind_of(const PciNode &n) {
  if (n.device.starts_with("GPU")) {
    return Kind::gpu;
  }
  return n.device.starts_with("NIC") ? Kind::nic : Kind::nvme;
}

// "GPU 2 (0000:3a:00.0)"
std::string name_of(const PciNode &n) {
  return n.device + " (" + n.address + ")";
}

std::string where(const PciNode &n) {
  return n.slot.empty() ? std::string("its slot, riser or cable") : "physical slot " + n.slot;
}

std::string lspci_check(const PciNode &n) {
  return "lspci -vv -s " + n.address + " | grep -E 'LnkCap|LnkSta'";
}

void audit_link(const Topology &t, const PciNode &n, std::vector<Finding> &out) {
  const PcieLink &l = n.link;
  if (!l.known()) {
    return; // no link (root complex integrated endpoint) or nothing readable
  }
  const PciNode *port = n.parent.empty() ? nullptr : t.pci_node(n.parent);
  // What the link can train at: the lower of the device's and its port's capability.
  unsigned cap_w = l.max_width;
  unsigned cap_s = l.max_speed;
  if (port != nullptr && port->link.max_width > 0) {
    cap_w = cap_w > 0 ? std::min(cap_w, port->link.max_width) : port->link.max_width;
  }
  if (port != nullptr && port->link.max_speed > 0) {
    cap_s = cap_s > 0 ? std::min(cap_s, port->link.max_speed) : port->link.max_speed;
  }
  const std::string cur = link_str(l.current_width, l.current_speed);
  const std::string cap = link_str(cap_w, cap_s);
  const std::string port_text =
      port != nullptr ? " and its port " + port->address + " (" + std::string(to_string(port->type)) + ")" : "";
  bool fault = false;
  if (cap_w > 0 && l.current_width < cap_w) {
    fault = true;
    out.push_back(Finding{
        "pcie:link-width:" + n.address, "pcie", Severity::critical, name_of(n) + ": " + cur,
        "x" + std::to_string(cap_w) + ", what the device" + port_text + " support",
        "Only " + std::to_string(l.current_width) + " of " + std::to_string(cap_w) + " lanes carry data: " +
            "every host-device copy, GPUDirect RDMA and NVMe transfer through this link gets that fraction of the "
            "bandwidth",
        "reseat the device (" + where(n) +
            "); a link that trains narrow again after a reseat points at the slot, "
            "riser or card. Check with: " +
            lspci_check(n)});
  }
  if (cap_s > 0 && l.current_speed < cap_s) {
    fault = true;
    const bool gpu = kind_of(n) == Kind::gpu;
    out.push_back(Finding{
        "pcie:link-speed:" + n.address, "pcie", gpu ? Severity::info : Severity::warning, name_of(n) + ": " + cur,
        link_speed_str(cap_s) + ", what the device" + port_text + " support",
        std::string("The link runs at a fraction of the bandwidth it could carry") +
            (gpu ? "; GPUs lower their link speed while idle, so this is a fault only when it stays low under load"
                 : ""),
        (gpu ? "run the audit again while the GPU is busy; if it stays low: " : std::string()) +
            "check the firmware's PCIe speed setting for " + where(n) +
            " (a slot forced to a lower generation), "
            "then reseat the device. Check with: " +
            lspci_check(n)});
  }
  if (port != nullptr && l.max_width > 0 && l.max_speed > 0 && port->link.max_width > 0 && port->link.max_speed > 0 &&
      (port->link.max_width < l.max_width || port->link.max_speed < l.max_speed)) {
    fault = true;
    out.push_back(Finding{"pcie:slot-limit:" + n.address, "pcie",
                          kind_of(n) == Kind::nvme ? Severity::info : Severity::warning,
                          name_of(n) + ": device capable of " + link_str(l.max_width, l.max_speed) + ", its port " +
                              port->address + " only of " + link_str(port->link.max_width, port->link.max_speed),
                          "a slot or port as capable as the device",
                          "The slot caps the device below what it can do, for as long as it sits there",
                          "move the device to a slot wired for " + link_str(l.max_width, l.max_speed) + " (" +
                              where(n) + " is not), or check the firmware's link settings for port " + port->address});
  }
  if (!fault) {
    out.push_back(Finding{"pcie:link:" + n.address, "pcie", Severity::ok, name_of(n) + ": " + cur,
                          "the device's and its port's capability (" + cap + ")", "", ""});
  }
}

// Switch ports with ACS P2P redirect between a GPU and a peer (another GPU
// or a NIC) below the same switch: their traffic detours through the root
// complex.  Root ports are not on such a route.
void audit_acs(const Topology &t, const std::vector<const PciNode *> &devs, std::vector<Finding> &out) {
  auto route = [&](const PciNode *n) {
    std::vector<std::string> p; // bridges from the root port down to n's port
    for (const PciNode *up = t.pci_node(n->parent); up != nullptr; up = t.pci_node(up->parent)) {
      p.push_back(up->address);
    }
    std::ranges::reverse(p);
    return p;
  };
  std::map<std::string, std::set<std::string>> ports; // port -> devices whose P2P it redirects
  for (const auto *g : devs) {
    if (kind_of(*g) != Kind::gpu) {
      continue;
    }
    const auto pg = route(g);
    for (const auto *p : devs) {
      if (p == g || kind_of(*p) == Kind::nvme || p->host_bridge != g->host_bridge) {
        continue;
      }
      const auto pp = route(p);
      size_t k = 0;
      while (k < pg.size() && k < pp.size() && pg[k] == pp[k]) {
        ++k;
      }
      if (k == 0) {
        continue; // different root ports: through the root complex anyway
      }
      for (const auto *side : {&pg, &pp}) {
        for (size_t i = k; i < side->size(); ++i) {
          const PciNode *port = t.pci_node((*side)[i]);
          if (port != nullptr && port->config.acs && (port->config.acs_ctl & k_acs_p2p_redirect) != 0) {
            ports[port->address].insert(side == &pg ? name_of(*g) : name_of(*p));
          }
        }
      }
    }
  }
  for (const auto &[addr, who] : ports) {
    const PciNode *port = t.pci_node(addr);
    std::string list;
    for (const auto &w : who) {
      list += (list.empty() ? "" : ", ") + w;
    }
    out.push_back(Finding{
        "pcie:acs:" + addr, "pcie", Severity::warning,
        addr + " (" + std::string(to_string(port->type)) + ") above " + list + ": ACS Control " +
            acs_bits_str(port->config.acs_ctl),
        "no P2P redirect (RR, CR, EC clear) on switch ports on bare metal",
        "Peer-to-peer traffic between GPUs and from GPUs to their NIC (GPUDirect RDMA) detours through the root "
        "complex instead of turning around in the switch: lower bandwidth, higher latency, and NCCL may fall back "
        "to staging through host memory",
        "setpci -s " + addr + " ECAP_ACS+0x6.w=0000 (until reboot), or boot with pci=disable_acs_redir=" + addr +
            " (persistent; keep ACS where devices are passed through to virtual machines)"});
  }
}

void audit_iommu(const Topology &t, const std::vector<const PciNode *> &devs, std::vector<Finding> &out) {
  unsigned identity = 0;
  unsigned translated = 0;
  for (const auto *n : devs) {
    if (kind_of(*n) == Kind::nvme || n->iommu_group < 0) {
      continue;
    }
    if (n->iommu_type == "DMA" || n->iommu_type == "DMA-FQ") {
      ++translated;
      const std::string g = std::to_string(n->iommu_group);
      out.push_back(Finding{
          "pcie:iommu:" + n->address, "pcie", Severity::warning,
          name_of(*n) + ": IOMMU group " + g + " translates DMA (" + n->iommu_type + ")",
          "identity (passthrough) on bare metal",
          "Every DMA of the device is translated by the IOMMU: IOTLB misses cut GPUDirect RDMA and peer-to-peer "
          "bandwidth, and mapping pinned buffers costs more",
          "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, "
          "reboot); or, with no driver bound to the group's devices, "
          "echo identity > /sys/kernel/iommu_groups/" +
              g + "/type"});
    } else if (n->iommu_type == "identity") {
      ++identity;
    }
  }
  Finding f{"pcie:iommu", "pcie", Severity::ok, "", "identity (passthrough) domains for GPUs and NICs, or no IOMMU",
            "",           ""};
  f.current = t.iommu_groups ? "IOMMU in use: " + std::to_string(identity) + " GPU/NIC in identity domains, " +
                                   std::to_string(translated) + " translated"
                             : "no IOMMU groups (no IOMMU in use)";
  out.push_back(std::move(f));
}

// The node a device without one most likely belongs to: that of the nearest
// bridge above it that has one, else of the one node holding its local CPUs.
std::string likely_node(const Topology &t, const PciNode &n) {
  for (const PciNode *p = t.pci_node(n.parent); p != nullptr; p = t.pci_node(p->parent)) {
    if (p->numa_node >= 0) {
      return std::to_string(p->numa_node);
    }
  }
  const PciLocality *loc = nullptr;
  for (const auto &g : t.gpus) {
    loc = g.pci.address == n.address ? &g.pci : loc;
  }
  for (const auto &nic : t.nics) {
    loc = nic.pci.address == n.address ? &nic.pci : loc;
  }
  for (const auto &nv : t.nvme) {
    loc = nv.pci.address == n.address ? &nv.pci : loc;
  }
  for (const auto &node : t.nodes) {
    if (loc != nullptr && !loc->local_cpus.empty() && !node.cpus.empty() && node.cpus.contains(loc->local_cpus)) {
      return std::to_string(node.id);
    }
  }
  return "";
}

void audit_numa(const Topology &t, const std::vector<const PciNode *> &devs, std::vector<Finding> &out) {
  if (t.cpu_nodes() < 2) {
    return;
  }
  for (const auto *n : devs) {
    if (n->numa_node >= 0) {
      continue;
    }
    const std::string guess = likely_node(t, *n);
    out.push_back(
        Finding{"pcie:numa_node:" + n->address, "pcie", Severity::warning,
                name_of(*n) + ": numa_node -1 on a machine with " + std::to_string(t.cpu_nodes()) + " NUMA nodes",
                "the node the device is attached to" + (guess.empty() ? std::string() : " (node " + guess + ")"),
                "The firmware does not say where the device is: the kernel allocates its DMA buffers and places its "
                "interrupts without locality, and mltune's plan cannot put its feeder cores and memory on its node",
                "update the firmware or enable its ACPI NUMA (SRAT/_PXM) setting; until then: echo " +
                    (guess.empty() ? std::string("N") : guess) + " > /sys/bus/pci/devices/" + n->address +
                    "/numa_node (taints the kernel, lost at reboot)"});
  }
}

void audit_max_read_req(const PciNode &n, std::vector<Finding> &out) {
  const unsigned mrrs = n.config.max_read_req;
  if (kind_of(n) != Kind::nic || mrrs == 0 || mrrs >= k_nic_max_read_req || n.link.current_speed < k_fast_link_speed ||
      n.link.current_width < k_fast_link_width) {
    return;
  }
  out.push_back(Finding{
      "pcie:maxreadreq:" + n.address, "pcie", Severity::info,
      name_of(n) + ": MaxReadReq " + std::to_string(mrrs) + " bytes" +
          (n.config.relaxed_ordering ? (*n.config.relaxed_ordering ? ", relaxed ordering on" : ", relaxed ordering off")
                                     : ""),
      "4096 bytes on fast NICs",
      "Small read requests split every transmit DMA into more PCIe transactions, which costs throughput at "
      "100 Gb/s and beyond",
      "setpci -s " + n.address +
          " CAP_EXP+8.w=5000:7000 (until reboot; the NIC vendor's firmware tool makes it "
          "persistent)"});
}

} // namespace

void audit_pcie(const Topology &t, std::vector<Finding> &out) {
  std::vector<const PciNode *> devs;
  unsigned unreadable = 0;
  for (const auto &n : t.pci) {
    if (!n.device.empty()) {
      devs.push_back(&n);
    }
    unreadable += !n.config.caps_readable && n.link.known() ? 1 : 0;
  }
  if (devs.empty()) {
    return;
  }
  for (const auto *n : devs) {
    audit_link(t, *n, out);
    audit_max_read_req(*n, out);
  }
  audit_acs(t, devs, out);
  audit_iommu(t, devs, out);
  audit_numa(t, devs, out);
  if (unreadable > 0) {
    out.push_back(Finding{"pcie:config-space", "pcie", Severity::info,
                          std::to_string(unreadable) + " PCI functions show only the first 64 bytes of config space",
                          "readable capability lists",
                          "ACS and MaxReadReq cannot be checked: the kernel shows the capability lists to root only",
                          "run mltunectl audit as root"});
  }
}

} // namespace mltune::detail
