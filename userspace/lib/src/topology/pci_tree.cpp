// The PCIe tree above the GPUs, NICs and NVMe devices of a Topology: for
// each device, the chain of PCI functions that sysfs nests it under
// (/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0:
// host bridge pci0000:15, root port 15:01.0, switch upstream port 16:00.0,
// downstream port 17:00.0, the GPU), each function with its link attributes,
// parsed config space, NUMA node, IOMMU group and physical slot.
#include "base/sysroot_fd.hpp"
#include "mltune/parse.hpp"
#include "mltune/pci.hpp"
#include "topology/topology_phases.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace mltune::detail {

namespace {

constexpr unsigned k_max_width = 32; // the widest link PCIe defines
constexpr size_t k_cfg_std = 0x100;  // the conventional configuration space
constexpr size_t k_cfg_ext = 0x1000; // with the PCI Express extended space
constexpr size_t k_ext_cap_read = 8; // an extended capability's header and the ACS registers

// pread(2) of up to `len` bytes at `off`, across short reads; the bytes read,
// or -1.
ssize_t pread_all(int fd, char *buf, size_t len, off_t off) {
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::pread(fd, buf + got, len - got, off + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return got > 0 ? static_cast<ssize_t>(got) : -1;
    }
    if (n == 0) {
      break;
    }
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

// A function's configuration space as parse_pci_config() reads it: the
// first 256 bytes and, for a PCI Express function, only the first 8 bytes of
// each extended capability on the chain from 0x100 (its header, and the
// ACS Capability and Control registers behind an ACS header), read where
// they are. The rest of the 4096 bytes reads as zero. Reading all 4096
// bytes traps once per dword in a VM: 20 ms for an H200's on a GPU node,
// 0.9 ms for its first 256 bytes. A reader without CAP_SYS_ADMIN gets the
// 64 bytes sysfs gives it; a conventional function, its 256.
std::optional<std::string> read_config(const Sysroot &root, const std::string &abs) {
  const UniqueFd fd = detail::open_node(root, abs, O_RDONLY | O_CLOEXEC);
  if (!fd) {
    return std::nullopt;
  }
  std::string b(k_cfg_std, '\0');
  const ssize_t n = pread_all(fd.get(), b.data(), b.size(), 0);
  if (n < 0) {
    return std::nullopt;
  }
  b.resize(static_cast<size_t>(n));
  if (b.size() < k_cfg_std || !parse_pci_config(b).pcie) {
    return b;
  }
  b.resize(k_cfg_ext, '\0');
  size_t p = k_cfg_std;
  for (size_t guard = 0; guard < (k_cfg_ext - k_cfg_std) / 4; ++guard) {
    const ssize_t got =
        pread_all(fd.get(), b.data() + p, std::min(k_ext_cap_read, k_cfg_ext - p), static_cast<off_t>(p));
    if (got <= 0 && p == k_cfg_std) {
      b.resize(k_cfg_std); // no extended space to read
      return b;
    }
    if (got < 4) {
      return b;
    }
    std::uint32_t h = 0;
    std::memcpy(&h, b.data() + p, sizeof h); // little-endian, as x86 and the bus
    const size_t next = (h >> 20U) & 0xffcU;
    if (h == 0 || h == 0xffffffffU || next < k_cfg_std) {
      return b;
    }
    p = next;
  }
  return b;
}

class TreeReader {
public:
  TreeReader(const Sysroot &root, Topology &t, const PciSeen &seen, bool state)
      : root_(root), t_(t), seen_(seen), state_(state) {
    if (!state_) {
      return;
    }
    for (const auto &name : root.list_dir("/sys/bus/pci/slots")) {
      if (auto a = root.read("/sys/bus/pci/slots/" + name + "/address")) {
        slots_[std::string(trim(*a))] = name; // "0000:18:00": domain, bus, device
      }
    }
  }

  // Adds the device at `loc` and the bridges above it; fills loc's host bridge and path.
  void add(PciLocality &loc, const std::string &label) {
    // A NIC's or NVMe controller's directory was resolved when it was found.
    const auto known = seen_.dir.find(loc.address);
    auto resolved = known != seen_.dir.end() ? std::optional<std::string>(known->second)
                                             : resolve_link(root_, "/sys/bus/pci/devices/" + loc.address, t_);
    if (!resolved) {
      return;
    }
    std::vector<std::string> chain;
    std::vector<std::string> dirs; // each function's own directory
    std::string host_bridge;
    size_t pos = 0;
    const std::string &p = *resolved;
    while (pos < p.size()) {
      const size_t end = std::min(p.find('/', pos), p.size());
      const std::string comp = p.substr(pos, end - pos);
      if (comp.starts_with("pci") && comp.size() > 3 && comp.find(':') != std::string::npos) {
        host_bridge = comp;
        chain.clear();
        dirs.clear();
      } else if (!host_bridge.empty() && is_pci_address(comp)) {
        chain.push_back(comp);
        dirs.push_back(p.substr(0, end));
      }
      pos = end + 1;
    }
    if (chain.empty() || chain.back() != loc.address) {
      t_.warnings.push_back("/sys/bus/pci/devices/" + loc.address + ": not below a PCI host bridge (" + p + ")");
      return;
    }
    loc.host_bridge = host_bridge;
    loc.path.assign(chain.begin(), chain.end() - 1);
    for (size_t i = 0; i < chain.size(); ++i) {
      // Read in the function's own directory, not through its
      // /sys/bus/pci/devices link: one path walk per file, not two.
      // The device's own NUMA node was read with its locality.
      const int *numa = i + 1 == chain.size() ? &loc.numa_node : nullptr;
      PciNode &n = node(chain[i], i == 0 ? std::string() : chain[i - 1], host_bridge, dirs[i], numa);
      if (i + 1 == chain.size()) {
        n.device = label;
      } else {
        has_children_.insert(chain[i]);
      }
    }
  }

  std::vector<PciNode> finish() {
    std::function<PciePortType(const std::string &)> infer = [&](const std::string &addr) {
      PciNode &n = nodes_.at(addr);
      if (n.type != PciePortType::unknown) {
        return n.type;
      }
      const PciePortType up = n.parent.empty() ? PciePortType::unknown : infer(n.parent);
      if (!n.bridge() && has_children_.count(addr) == 0) {
        n.type = n.parent.empty() ? PciePortType::rc_endpoint : PciePortType::endpoint;
      } else if (n.parent.empty()) {
        n.type = PciePortType::root_port;
      } else if (up == PciePortType::root_port || up == PciePortType::switch_downstream) {
        n.type = PciePortType::switch_upstream;
      } else if (up == PciePortType::switch_upstream) {
        n.type = PciePortType::switch_downstream;
      }
      return n.type;
    };
    std::vector<PciNode> out;
    out.reserve(nodes_.size());
    for (auto &[addr, n] : nodes_) {
      infer(addr);
      out.push_back(n);
    }
    return out;
  }

private:
  PciNode &node(const std::string &addr, const std::string &parent, const std::string &host_bridge,
                const std::string &dir, const int *numa_node) {
    auto [it, fresh] = nodes_.try_emplace(addr);
    PciNode &n = it->second;
    if (!fresh) {
      return n;
    }
    n.address = addr;
    n.parent = parent;
    n.host_bridge = host_bridge;
    // Every function's class was read by find_gpus().
    const auto cls = seen_.cls.find(addr);
    n.pci_class = cls != seen_.cls.end() ? cls->second : text(dir + "/class");
    if (!state_) {
      if (numa_node != nullptr) {
        n.numa_node = *numa_node; // the device's own, read with its locality
      }
      return n;
    }
    if (auto c = read_config(root_, dir + "/config")) {
      n.config = parse_pci_config(*c);
      if (n.config.pcie) {
        n.type = n.config.type;
        n.type_from_config = n.type != PciePortType::unknown;
      }
    }
    read_link(dir, n);
    if (numa_node != nullptr) {
      n.numa_node = *numa_node;
    } else if (auto v = parse_int<int>(text(dir + "/numa_node"))) {
      n.numa_node = std::max(-1, *v);
    }
    if (auto g = resolve_link(root_, dir + "/iommu_group", t_)) {
      const std::string name = g->substr(g->rfind('/') + 1);
      if (auto id = parse_int<int>(name)) {
        n.iommu_group = *id;
        auto [type, fresh_group] = group_types_.try_emplace(name);
        if (fresh_group) {
          type->second = text("/sys/kernel/iommu_groups/" + name + "/type");
        }
        n.iommu_type = type->second;
      }
    }
    if (const auto s = slots_.find(addr.substr(0, 10)); s != slots_.end()) {
      n.slot = s->second;
    }
    return n;
  }

  std::string text(const std::string &abs) {
    auto r = root_.read(abs);
    return r ? std::string(trim(*r)) : std::string();
  }

  unsigned width(const std::string &abs) {
    const auto w = parse_int<unsigned>(text(abs));
    return w && *w <= k_max_width ? *w : 0;
  }

  // Where the PCI Express capability was read (root reads it; a reader
  // without CAP_SYS_ADMIN sees 64 bytes), the link comes from its registers,
  // the ones sysfs's current_link_speed, current_link_width, max_link_width
  // and max_link_speed show (the last computed as the kernel does,
  // PciConfig::max_speed): four files fewer per function. max_link_speed is
  // read where the registers name no speed. Otherwise all four from sysfs.
  void read_link(const std::string &dir, PciNode &n) {
    const bool has_link = n.config.type != PciePortType::rc_endpoint;
    if (n.config.pcie && has_link) {
      unsigned max = n.config.max_speed;
      if (max == 0) {
        const std::string f = text(dir + "/max_link_speed");
        max = f.empty() ? n.config.cap_speed : parse_link_speed(f).value_or(0);
      }
      n.link = {n.config.sta_speed, max, n.config.sta_width <= k_max_width ? n.config.sta_width : 0,
                n.config.cap_width <= k_max_width ? n.config.cap_width : 0};
      return;
    }
    n.link.current_speed = parse_link_speed(text(dir + "/current_link_speed")).value_or(0);
    n.link.max_speed = parse_link_speed(text(dir + "/max_link_speed")).value_or(0);
    n.link.current_width = width(dir + "/current_link_width");
    n.link.max_width = width(dir + "/max_link_width");
  }

  const Sysroot &root_;
  Topology &t_;
  const PciSeen &seen_;
  const bool state_; // DiscoverOptions::pcie_state
  std::map<std::string, PciNode> nodes_;
  std::map<std::string, std::string> group_types_; // IOMMU group -> its type, read once
  std::map<std::string, std::string> slots_;
  std::set<std::string> has_children_; // functions something hangs below: bridges
};

} // namespace

void read_pci_tree(const Sysroot &root, Topology &t, const PciSeen &seen, bool state) {
  TreeReader rd(root, t, seen, state);
  for (auto &g : t.gpus) {
    rd.add(g.pci, "GPU " + std::to_string(g.index));
  }
  for (auto &n : t.nics) {
    rd.add(n.pci, "NIC " + n.name);
  }
  for (auto &n : t.nvme) {
    rd.add(n.pci, "NVMe " + n.name);
  }
  t.pci = rd.finish();
  t.iommu_groups = state && !root.list_dir("/sys/kernel/iommu_groups").empty();
}

} // namespace mltune::detail

namespace mltune {

std::string_view to_string(PciDistance d) {
  switch (d) {
  case PciDistance::same_switch: return "switch";
  case PciDistance::same_root_port: return "root-port";
  case PciDistance::same_host_bridge: return "host-bridge";
  case PciDistance::same_node: return "node";
  case PciDistance::cross_node: return "system";
  case PciDistance::unknown: return "unknown";
  }
  return "unknown";
}

PciDistance pci_distance(const Topology &t, const PciLocality &a, const PciLocality &b) {
  if (!a.host_bridge.empty() && a.host_bridge == b.host_bridge) {
    size_t k = 0;
    while (k < a.path.size() && k < b.path.size() && a.path[k] == b.path[k]) {
      ++k;
    }
    if (k == 0) {
      return PciDistance::same_host_bridge;
    }
    const PciNode *common = t.pci_node(a.path[k - 1]);
    return common != nullptr && common->type == PciePortType::root_port ? PciDistance::same_root_port
                                                                        : PciDistance::same_switch;
  }
  if (t.cpu_nodes() <= 1 || (a.numa_node >= 0 && a.numa_node == b.numa_node)) {
    return PciDistance::same_node;
  }
  return a.numa_node >= 0 && b.numa_node >= 0 ? PciDistance::cross_node : PciDistance::unknown;
}

} // namespace mltune
