#include "mltune/topology.hpp"

#include "base/proc.hpp"
#include "base/sysroot_fd.hpp"
#include "mltune/parse.hpp"
#include "topology/topology_phases.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <unistd.h>
#include <unordered_map>

namespace mltune {

namespace fs = std::filesystem;

const NumaNode *Topology::node(int id) const {
  for (const auto &n : nodes) {
    if (n.id == id) {
      return &n;
    }
  }
  return nullptr;
}

const PciNode *Topology::pci_node(std::string_view address) const {
  const auto it = std::ranges::lower_bound(pci, address, std::ranges::less{}, &PciNode::address);
  return it != pci.end() && it->address == address ? &*it : nullptr;
}

unsigned Topology::cpu_nodes() const {
  return static_cast<unsigned>(
      std::count_if(nodes.begin(), nodes.end(), [](const NumaNode &n) { return !n.cpus.empty(); }));
}

bool Topology::smt() const {
  return std::ranges::any_of(cores, [](const Core &c) { return c.threads.count() > 1; });
}

namespace {

// "node12" -> 12 for names PREFIX<digits>.
std::optional<int> suffix_number(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || !name.starts_with(prefix)) {
    return std::nullopt;
  }
  auto v = parse_int<int>(name.substr(prefix.size()));
  if (!v || *v < 0 || *v > 1 << 20) {
    return std::nullopt;
  }
  return v;
}

class Reader {
public:
  Reader(const Sysroot &root, Topology &t, const detail::PciSeen *seen = nullptr) : root_(root), t_(t), seen_(seen) {}

  void warn(std::string msg) { t_.warnings.push_back(std::move(msg)); }

  std::optional<std::string> text(const std::string &abs, bool required_warn) {
    auto r = root_.read(abs);
    if (!r) {
      if (required_warn) {
        warn(r.error().message);
      }
      return std::nullopt;
    }
    return std::string(trim(*r));
  }

  std::optional<long long> integer(const std::string &abs, bool required_warn) {
    auto s = text(abs, required_warn);
    if (!s) {
      return std::nullopt;
    }
    auto v = parse_int<long long>(*s); // text() trimmed it
    if (!v) {
      warn(abs + ": expected an integer, got '" + s->substr(0, 40) + "'");
    }
    return v;
  }

  std::optional<CpuSet> cpulist(const std::string &abs, bool required_warn) {
    auto s = text(abs, required_warn);
    if (!s) {
      return std::nullopt;
    }
    auto c = parse_cpuset(*s, abs);
    if (!c) {
      warn(c.error().message);
      return std::nullopt;
    }
    return *c;
  }

  // Resolves symlinks of an absolute node path inside the sysroot; nullopt
  // when it does not exist or escapes the sysroot.
  std::optional<std::string> resolve(const std::string &abs) { return detail::resolve_link(root_, abs, t_); }

  std::string link_name(const std::string &abs) {
    const auto target = root_.read_link(abs);
    return target ? fs::path(*target).filename().string() : std::string();
  }

  PciLocality pci(const std::string &dev_abs, std::string address) {
    PciLocality p;
    p.address = std::move(address);
    if (auto n = integer(dev_abs + "/numa_node", false)) {
      p.numa_node = static_cast<int>(std::clamp<long long>(*n, -1, 1 << 20));
    }
    if (auto c = cpulist(dev_abs + "/local_cpulist", false)) {
      p.local_cpus = *c;
    }
    return p;
  }

  // PCI device path (node path) at or above `dev` (resolved).
  std::optional<std::string> pci_parent(std::string dev) {
    while (!dev.empty() && dev != "/") {
      const std::string name = fs::path(dev).filename().string();
      // A function find_gpus() listed is one without asking again.
      if (detail::is_pci_address(name) &&
          ((seen_ != nullptr && seen_->cls.contains(name)) || root_.exists(dev + "/class"))) {
        return dev;
      }
      dev = fs::path(dev).parent_path().string();
    }
    return std::nullopt;
  }

  const Sysroot &root_;
  Topology &t_;
  const detail::PciSeen *seen_;
};

// IRQ number -> action name from /proc/interrupts (streamed: it grows past
// 1 MiB on large machines).
std::unordered_map<unsigned, std::string> irq_names(const Sysroot &root) {
  std::unordered_map<unsigned, std::string> out;
  detail::for_each_line(root, "/proc/interrupts", [&](std::string_view line) {
    const std::string_view l = trim(line);
    const auto colon = l.find(':');
    if (colon == std::string_view::npos) {
      return true;
    }
    auto irq = parse_int<unsigned>(trim(l.substr(0, colon)));
    if (!irq) {
      return true; // NMI, LOC, header ...
    }
    const auto last = l.find_last_of(" \t");
    if (last == std::string_view::npos || last < colon) {
      return true;
    }
    out[*irq] = std::string(l.substr(last + 1));
    return true;
  });
  return out;
}

std::string vendor_name(std::string_view id) {
  if (id == "0x10de") {
    return "NVIDIA";
  }
  if (id == "0x1002") {
    return "AMD";
  }
  if (id == "0x8086") {
    return "Intel";
  }
  if (id == "0x1da3") {
    return "Habana";
  }
  if (id == "0x1234" || id == "0x1af4" || id == "0x1b36") {
    return "QEMU";
  }
  return "";
}

// Display controllers that are never compute devices: BMC video (ASPEED,
// Matrox G200eW/eH), legacy server VGA.
bool bmc_vendor(std::string_view id) {
  return id == "0x1a03" || id == "0x102b" || id == "0x19a2";
}

// Display controllers and processing accelerators: the classes gpu_class()
// may accept, depending on the vendor.
bool gpu_class_candidate(std::string_view cls) {
  const std::string_view base = cls.substr(0, 6); // 0xCCSS
  return base == "0x0300" || base == "0x0302" || base == "0x0380" || base == "0x1200";
}

bool gpu_class(std::string_view cls, std::string_view vendor) {
  if (cls.size() < 6) {
    return false;
  }
  const std::string_view base = cls.substr(0, 6); // 0xCCSS
  if (base == "0x0300" || base == "0x0302") {
    return !bmc_vendor(vendor);
  }
  // Display "other" (AMD Instinct) and processing accelerators (Gaudi,
  // Intel Data Center GPU Max in compute mode) from GPU vendors only.
  if (base == "0x0380" || base == "0x1200") {
    return vendor == "0x10de" || vendor == "0x1002" || vendor == "0x8086" || vendor == "0x1da3";
  }
  return false;
}

} // namespace

namespace detail {

bool is_pci_address(std::string_view s) {
  // dddd:bb:dd.f (hex)
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') {
    return false;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) {
      continue;
    }
    if (std::isxdigit(static_cast<unsigned char>(s[i])) == 0) {
      return false;
    }
  }
  return true;
}

std::optional<std::string> resolve_link(const Sysroot &root, const std::string &abs, Topology & /*t*/) {
  return root.resolve(abs);
}

Status read_online_cpus(const Sysroot &root, Topology &t) {
  const std::string online_path = "/sys/devices/system/cpu/online";
  auto online_text = root.read(online_path);
  if (!online_text) {
    return with_context(online_text.error(), "cannot describe the machine");
  }
  auto online = parse_cpuset(*online_text, online_path);
  if (!online) {
    return failure(online.error().message);
  }
  if (online->empty()) {
    return failure(online_path + ": no online CPU");
  }
  t.online = *online;
  return {};
}

namespace {

// The first processor's lines of /proc/cpuinfo: one read of at most 4 KiB.
// The whole file is over a megabyte on a 1024-CPU node, and the kernel makes
// it one CPU at a time, only as far as it is read (a read returns whole
// CPUs' blocks where they fit, CPU 0's at least); kernels before the 2022
// rework of x86's aperfmperf.c (Debian 11's 5.10 among them) sample each
// busy CPU's frequency for it through an IPI, feeder cores included.
std::string cpuinfo_head(const Sysroot &root) {
  const UniqueFd fd = open_node(root, "/proc/cpuinfo", O_RDONLY);
  if (!fd) {
    return {};
  }
  std::string b(4096, '\0');
  ssize_t n = 0;
  do {
    n = ::read(fd.get(), b.data(), b.size());
  } while (n < 0 && errno == EINTR);
  b.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return b;
}

} // namespace

void read_cpu_model(const Sysroot &root, Topology &t) {
  const std::string info = cpuinfo_head(root);
  std::string_view s = info;
  auto field = [&](std::string_view key) -> std::string {
    const auto p = s.find(key);
    if (p == std::string_view::npos) {
      return "";
    }
    const auto colon = s.find(':', p);
    const auto nl = s.find('\n', p);
    if (colon == std::string_view::npos || (nl != std::string_view::npos && colon > nl)) {
      return "";
    }
    return std::string(trim(s.substr(colon + 1, nl == std::string_view::npos ? nl : nl - colon - 1)));
  };
  t.cpu_vendor = field("vendor_id");
  t.cpu_model = field("model name");
}

namespace {

std::string cpu_topology_dir(unsigned c) {
  return "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology";
}

// CPU c's core: its core_id and thread siblings, given to every sibling not
// yet placed (one core's files are read once, not once per thread). A
// sibling another core already claimed is a warning naming both lists.
void read_core(Reader &rd, const CpuSet &online, unsigned c, CpuInfoMap &cpus, CpuSet &placed) {
  const std::string dir = cpu_topology_dir(c);
  int core_id = 0;
  if (auto k = rd.integer(dir + "/core_id", true)) {
    core_id = static_cast<int>(std::clamp<long long>(*k, -1, 1 << 30));
  }
  auto sib = rd.cpulist(dir + "/thread_siblings_list", false);
  if (!sib) {
    sib = rd.cpulist(dir + "/core_cpus_list", false);
  }
  if (!sib) {
    rd.warn(dir + "/thread_siblings_list: missing; treating CPU " + std::to_string(c) + " as a core of its own");
    sib = CpuSet{c};
  }
  if (!sib->test(c)) {
    rd.warn(dir + "/thread_siblings_list: does not contain CPU " + std::to_string(c));
    sib->set(c);
  }
  *sib &= online;
  for (const unsigned s : sib->cpus()) {
    if (placed.test(s)) {
      rd.warn(dir + "/thread_siblings_list: " + sib->str() + " disagrees with CPU " + std::to_string(s) + "'s " +
              cpus[s].siblings.str());
      continue;
    }
    cpus[s].core_id = core_id;
    cpus[s].siblings = *sib;
    placed.set(s);
  }
}

// CPU c's package: its physical_package_id, given to every CPU of its
// package_cpus_list (core_siblings_list on kernels before 5.3). Where a
// kernel has neither list, `lists` turns false and each CPU's own id is read.
void read_package(Reader &rd, const CpuSet &online, unsigned c, CpuInfoMap &cpus, CpuSet &placed, bool &lists) {
  const std::string dir = cpu_topology_dir(c);
  int socket = 0;
  if (auto p = rd.integer(dir + "/physical_package_id", true)) {
    socket = static_cast<int>(std::clamp<long long>(*p, 0, 1 << 20)); // -1 in some VMs
  }
  std::optional<CpuSet> pkg;
  if (lists) {
    pkg = rd.cpulist(dir + "/package_cpus_list", false);
    if (!pkg) {
      pkg = rd.cpulist(dir + "/core_siblings_list", false);
    }
    lists = pkg.has_value();
  }
  if (!pkg || !pkg->test(c)) {
    pkg = CpuSet{c};
  }
  *pkg &= online;
  for (const unsigned s : pkg->cpus()) {
    if (!placed.test(s)) {
      cpus[s].socket = socket;
      placed.set(s);
    }
  }
}

} // namespace

CpuInfoMap read_cpu_topology(const Sysroot &root, Topology &t) {
  Reader rd(root, t);
  CpuInfoMap cpus;
  CpuSet have_core;
  CpuSet have_package;
  bool package_lists = true;
  for (const unsigned c : t.online.cpus()) {
    if (!have_core.test(c)) {
      read_core(rd, t.online, c, cpus, have_core);
    }
    if (!have_package.test(c)) {
      read_package(rd, t.online, c, cpus, have_package, package_lists);
    }
  }
  return cpus;
}

std::vector<int> numa_node_ids(const Sysroot &root, Topology &t) {
  Reader rd(root, t);
  std::vector<int> node_ids;
  if (auto nl = rd.cpulist("/sys/devices/system/node/online", false)) {
    for (const unsigned n : nl->cpus()) {
      node_ids.push_back(static_cast<int>(n));
    }
  } else {
    for (const auto &name : root.list_dir("/sys/devices/system/node")) {
      if (auto n = suffix_number(name, "node")) {
        node_ids.push_back(*n);
      }
    }
    std::ranges::sort(node_ids);
  }
  return node_ids;
}

namespace {

// The "MemTotal:" figure in kB of /proc/meminfo or of a node's meminfo
// ("Node 0 MemTotal:       4017536 kB"); nullopt when missing or malformed.
std::optional<std::uint64_t> meminfo_total_kb(std::string_view mi) {
  const auto p = mi.find("MemTotal:");
  if (p == std::string::npos) {
    return std::nullopt;
  }
  const auto e = mi.find('\n', p);
  std::string_view v = mi.substr(p + 9, e == std::string::npos ? std::string::npos : e - p - 9);
  v = trim(v);
  if (v.size() > 3 && v.substr(v.size() - 2) == "kB") {
    v = trim(v.substr(0, v.size() - 2));
  }
  return parse_int<std::uint64_t>(v);
}

void read_node_meminfo(const Sysroot &root, Reader &rd, const std::string &dir, NumaNode &n) {
  auto mi = root.read(dir + "/meminfo");
  if (!mi || mi->find("MemTotal:") == std::string::npos) {
    return;
  }
  if (auto kb = meminfo_total_kb(*mi)) {
    n.mem_total_kb = *kb;
  } else {
    rd.warn(dir + "/meminfo: cannot parse MemTotal");
  }
}

void read_node_distances(Reader &rd, const std::string &dir, size_t nnodes, NumaNode &n) {
  auto d = rd.text(dir + "/distance", false);
  if (!d) {
    return;
  }
  std::string_view s = *d;
  while (!s.empty()) {
    const auto sp = s.find(' ');
    const std::string_view tok = s.substr(0, sp);
    if (!tok.empty()) {
      auto v = parse_int<int>(trim(tok));
      if (!v || *v < 0 || *v > 255) {
        rd.warn(dir + "/distance: invalid entry '" + std::string(tok.substr(0, 20)) + "'");
        n.distances.clear();
        break;
      }
      n.distances.push_back(*v);
    }
    if (sp == std::string_view::npos) {
      break;
    }
    s.remove_prefix(sp + 1);
  }
  if (!n.distances.empty() && n.distances.size() != nnodes) {
    rd.warn(dir + "/distance: " + std::to_string(n.distances.size()) + " entries for " + std::to_string(nnodes) +
            " nodes");
    n.distances.clear();
  }
}

} // namespace

NumaNode read_numa_node(const Sysroot &root, Topology &t, int id, size_t nnodes) {
  Reader rd(root, t);
  const std::string dir = "/sys/devices/system/node/node" + std::to_string(id);
  NumaNode n;
  n.id = id;
  if (auto c = rd.cpulist(dir + "/cpulist", true)) {
    n.cpus = *c & t.online;
  }
  read_node_meminfo(root, rd, dir, n);
  read_node_distances(rd, dir, nnodes, n);
  return n;
}

Status read_numa_nodes(const Sysroot &root, Topology &t, CpuInfoMap &cpus) {
  const std::vector<int> node_ids = numa_node_ids(root, t);
  std::map<unsigned, std::string> cpu_node_file;
  if (node_ids.empty()) {
    // Kernel without NUMA: one node with every CPU.
    NumaNode n;
    n.id = 0;
    n.cpus = t.online;
    n.distances = {10};
    t.nodes.push_back(n);
  }
  for (const int id : node_ids) {
    NumaNode n = read_numa_node(root, t, id, node_ids.size());
    const std::string cl = "/sys/devices/system/node/node" + std::to_string(id) + "/cpulist";
    for (const unsigned c : n.cpus.cpus()) {
      if (auto [it, fresh] = cpu_node_file.emplace(c, cl); !fresh) {
        return failure("inconsistent topology: CPU " + std::to_string(c) + " is listed in both " + it->second +
                       " and " + cl);
      }
    }
    t.nodes.push_back(std::move(n));
  }
  CpuSet unassigned = t.online;
  for (auto &n : t.nodes) {
    for (const unsigned c : n.cpus.cpus()) {
      cpus[c].node = n.id;
    }
    unassigned -= n.cpus;
  }
  if (!unassigned.empty()) {
    t.warnings.push_back("/sys/devices/system/node: online CPUs " + unassigned.str() + " are in no NUMA node");
  }
  return {};
}

namespace {

// Warnings for SMT siblings of CPU `c` that disagree with it on siblings, node or socket.
void check_siblings(Topology &t, unsigned c, const CpuInfo &ci, const CpuSet &threads, CpuInfoMap &cpus) {
  for (const unsigned s2 : threads.cpus()) {
    const auto &o = cpus[s2];
    if (!(o.siblings == ci.siblings)) {
      t.warnings.push_back("/sys/devices/system/cpu/cpu" + std::to_string(s2) + "/topology/thread_siblings_list: " +
                           o.siblings.str() + " disagrees with CPU " + std::to_string(c) + "'s " + ci.siblings.str());
    }
    if (o.node != ci.node) {
      t.warnings.push_back("/sys/devices/system/cpu/cpu" + std::to_string(s2) +
                           "/topology/thread_siblings_list: SMT sibling of CPU " + std::to_string(c) +
                           " is on NUMA node " + std::to_string(o.node) + ", not " + std::to_string(ci.node));
    }
    if (o.socket != ci.socket) {
      t.warnings.push_back("/sys/devices/system/cpu/cpu" + std::to_string(s2) +
                           "/topology/physical_package_id: SMT sibling of CPU " + std::to_string(c) + " is on socket " +
                           std::to_string(o.socket));
    }
  }
}

} // namespace

void build_cores_and_sockets(Topology &t, CpuInfoMap &cpus) {
  CpuSet seen;
  std::map<int, Socket> sockets;
  for (const auto &[c, ci] : cpus) {
    auto &s = sockets[ci.socket];
    s.id = ci.socket;
    s.cpus.set(c);
    if (ci.node >= 0 && std::ranges::find(s.nodes, ci.node) == s.nodes.end()) {
      s.nodes.push_back(ci.node);
    }
    if (seen.test(c)) {
      continue;
    }
    Core core;
    core.socket = ci.socket;
    core.core_id = ci.core_id;
    core.node = ci.node;
    core.threads = ci.siblings - seen;
    core.threads.set(c);
    check_siblings(t, c, ci, core.threads, cpus);
    seen |= core.threads;
    sockets[ci.socket].cores++;
    t.cores.push_back(std::move(core));
  }
  for (auto &[id, s] : sockets) {
    std::ranges::sort(s.nodes);
    t.sockets.push_back(std::move(s));
  }
}

void find_gpus(const Sysroot &root, Topology &t, PciSeen *seen) {
  Reader rd(root, t);
  for (const auto &addr : root.list_dir("/sys/bus/pci/devices")) {
    const std::string dev = "/sys/bus/pci/devices/" + addr;
    auto cls = rd.text(dev + "/class", false);
    if (!cls) {
      continue;
    }
    if (seen != nullptr) {
      seen->cls.emplace(addr, *cls);
    }
    if (!gpu_class_candidate(*cls)) {
      continue; // the vendor is read only where the class may be a GPU's
    }
    auto vendor = rd.text(dev + "/vendor", false);
    if (!vendor || !gpu_class(*cls, *vendor)) {
      continue;
    }
    Gpu g;
    g.index = static_cast<unsigned>(t.gpus.size());
    g.pci = rd.pci(dev, addr);
    g.vendor_id = *vendor;
    g.device_id = rd.text(dev + "/device", false).value_or("");
    g.pci_class = *cls;
    g.vendor = vendor_name(*vendor);
    if (g.vendor.empty()) {
      g.vendor = *vendor;
    }
    t.gpus.push_back(std::move(g));
  }
}

namespace {

// The RDMA device of PCI function `pcidev` (mlx5_core: <pcidev>/infiniband/mlx5_0)
// and its first port.
void read_ib_device(const Sysroot &root, const std::string &pcidev, Nic &nic) {
  const auto ibs = root.list_dir(pcidev + "/infiniband");
  if (ibs.empty()) {
    return;
  }
  nic.ib_device = ibs.front();
  for (const auto &port : root.list_dir(pcidev + "/infiniband/" + nic.ib_device + "/ports")) {
    if (auto n = parse_int<unsigned>(port); n && *n > 0 && (nic.ib_port == 0 || *n < nic.ib_port)) {
      nic.ib_port = *n;
    }
  }
}

// The IRQs of PCI device `pcidev` (its MSI IRQs, else its legacy irq), sorted.
std::vector<unsigned> pci_irqs(const Sysroot &root, Reader &rd, const std::string &pcidev) {
  std::vector<unsigned> irqs;
  for (const auto &m : root.list_dir(pcidev + "/msi_irqs")) {
    if (auto v = parse_int<unsigned>(m)) {
      irqs.push_back(*v);
    } else {
      rd.warn(pcidev + "/msi_irqs/" + m + ": not an IRQ number");
    }
  }
  if (irqs.empty()) {
    if (auto v = rd.integer(pcidev + "/irq", false); v && *v > 0) {
      irqs.push_back(static_cast<unsigned>(*v));
    }
  }
  std::ranges::sort(irqs);
  return irqs;
}

} // namespace

void find_nics(const Sysroot &root, Topology &t, PciSeen *seen) {
  Reader rd(root, t, seen);
  for (const auto &ifname : root.list_dir("/sys/class/net")) {
    const std::string base = "/sys/class/net/" + ifname;
    if (!root.exists(base + "/device")) {
      continue; // lo, bridges, tunnels
    }
    auto devpath = rd.resolve(base + "/device");
    if (!devpath) {
      rd.warn(base + "/device: cannot resolve");
      continue;
    }
    auto pcidev = rd.pci_parent(*devpath);
    if (!pcidev) {
      continue; // not a PCI NIC
    }
    Nic nic;
    nic.name = ifname;
    nic.pci = rd.pci(*pcidev, fs::path(*pcidev).filename().string());
    if (seen != nullptr) {
      seen->dir.emplace(nic.pci.address, *pcidev);
    }
    nic.driver = rd.link_name(base + "/device/driver");
    read_ib_device(root, *pcidev, nic);
    for (const auto &q : root.list_dir(base + "/queues")) {
      nic.rx_queues += q.starts_with("rx-") ? 1 : 0;
      nic.tx_queues += q.starts_with("tx-") ? 1 : 0;
    }
    for (const unsigned i : pci_irqs(root, rd, *pcidev)) {
      nic.irqs.push_back({i, std::string()});
    }
    t.nics.push_back(std::move(nic));
  }
}

void find_nvme(const Sysroot &root, Topology &t, PciSeen *seen) {
  Reader rd(root, t, seen);
  for (const auto &name : root.list_dir("/sys/class/nvme")) {
    const std::string base = "/sys/class/nvme/" + name;
    auto devpath = rd.resolve(base + "/device");
    if (!devpath) {
      continue;
    }
    auto pcidev = rd.pci_parent(*devpath);
    if (!pcidev) {
      continue; // NVMe over fabrics
    }
    t.nvme.push_back({name, rd.pci(*pcidev, fs::path(*pcidev).filename().string())});
    if (seen != nullptr) {
      seen->dir.emplace(t.nvme.back().pci.address, *pcidev);
    }
  }
}

} // namespace detail

void name_nic_irqs(const Sysroot &root, Topology &t) {
  if (std::ranges::none_of(t.nics, [](const Nic &n) { return !n.irqs.empty(); })) {
    return;
  }
  const auto names = irq_names(root);
  for (auto &n : t.nics) {
    for (auto &i : n.irqs) {
      const auto it = names.find(i.irq);
      i.name = it == names.end() ? std::string() : it->second;
    }
  }
}

Result<Topology> discover_topology(const Sysroot &root, const DiscoverOptions &opt) {
  using namespace detail;
  Topology t;
  if (auto st = read_online_cpus(root, t); !st) {
    return st.error();
  }
  read_cpu_model(root, t);
  CpuInfoMap cpus = read_cpu_topology(root, t);
  if (auto st = read_numa_nodes(root, t, cpus); !st) {
    return st.error();
  }
  build_cores_and_sockets(t, cpus);
  // The node's memory as the kernel counts it: the NUMA nodes' figures can
  // miss hot-plugged memory (seen on a cloud GPU VM: 4 of 125 GiB).
  if (auto mi = root.read("/proc/meminfo"); mi) {
    t.mem_total_kb = meminfo_total_kb(*mi).value_or(0);
  }
  PciSeen seen;
  find_gpus(root, t, &seen);
  find_nics(root, t, &seen);
  find_nvme(root, t, &seen);
  read_pci_tree(root, t, seen, opt.pcie_state);
  return t;
}

} // namespace mltune
