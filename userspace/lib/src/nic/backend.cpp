// The live NIC backend (NicBackend, mltune/nic.hpp): LiveBackend plans the
// ethtool and rtnetlink messages for each setting, maps the kernel's errors
// and reads features back, over any NetlinkTransport (transport.cpp; tests
// run it over a fake); queue IRQs and RPS through the sysroot.
#include "mltune/cpulist.hpp"
#include "mltune/nic.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <optional>
#include <span>

namespace mltune {

namespace fs = std::filesystem;
namespace {

std::string onoff(bool b) {
  return b ? "on" : "off";
}

// The cpulist in sysfs file `abs`; an absent or unreadable file is the
// read's error, a malformed one an input error naming the file.
Result<CpuSet> read_cpulist(const Sysroot &root, const std::string &abs) {
  auto txt = root.read(abs);
  if (!txt) {
    return txt.error();
  }
  return parse_cpuset(*txt, abs);
}

struct CoalAttr {
  const char *name;
  int attr;
  bool is_u8;
};
constexpr CoalAttr k_coal[] = {
    {"rx-usecs", ETHTOOL_A_COALESCE_RX_USECS, false},
    {"rx-frames", ETHTOOL_A_COALESCE_RX_MAX_FRAMES, false},
    {"rx-usecs-irq", ETHTOOL_A_COALESCE_RX_USECS_IRQ, false},
    {"rx-frames-irq", ETHTOOL_A_COALESCE_RX_MAX_FRAMES_IRQ, false},
    {"tx-usecs", ETHTOOL_A_COALESCE_TX_USECS, false},
    {"tx-frames", ETHTOOL_A_COALESCE_TX_MAX_FRAMES, false},
    {"tx-usecs-irq", ETHTOOL_A_COALESCE_TX_USECS_IRQ, false},
    {"tx-frames-irq", ETHTOOL_A_COALESCE_TX_MAX_FRAMES_IRQ, false},
    {"stats-block-usecs", ETHTOOL_A_COALESCE_STATS_BLOCK_USECS, false},
    {"adaptive-rx", ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, true},
    {"adaptive-tx", ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, true},
    {"pkt-rate-low", ETHTOOL_A_COALESCE_PKT_RATE_LOW, false},
    {"rx-usecs-low", ETHTOOL_A_COALESCE_RX_USECS_LOW, false},
    {"rx-frames-low", ETHTOOL_A_COALESCE_RX_MAX_FRAMES_LOW, false},
    {"tx-usecs-low", ETHTOOL_A_COALESCE_TX_USECS_LOW, false},
    {"tx-frames-low", ETHTOOL_A_COALESCE_TX_MAX_FRAMES_LOW, false},
    {"pkt-rate-high", ETHTOOL_A_COALESCE_PKT_RATE_HIGH, false},
    {"rx-usecs-high", ETHTOOL_A_COALESCE_RX_USECS_HIGH, false},
    {"rx-frames-high", ETHTOOL_A_COALESCE_RX_MAX_FRAMES_HIGH, false},
    {"tx-usecs-high", ETHTOOL_A_COALESCE_TX_USECS_HIGH, false},
    {"tx-frames-high", ETHTOOL_A_COALESCE_TX_MAX_FRAMES_HIGH, false},
    {"sample-interval", ETHTOOL_A_COALESCE_RATE_SAMPLE_INTERVAL, false},
};

struct U32Attr {
  const char *key;
  int attr;
  int max_attr;
};
constexpr U32Attr k_rings[] = {
    {"rings.rx", ETHTOOL_A_RINGS_RX, ETHTOOL_A_RINGS_RX_MAX},
    {"rings.rx-mini", ETHTOOL_A_RINGS_RX_MINI, ETHTOOL_A_RINGS_RX_MINI_MAX},
    {"rings.rx-jumbo", ETHTOOL_A_RINGS_RX_JUMBO, ETHTOOL_A_RINGS_RX_JUMBO_MAX},
    {"rings.tx", ETHTOOL_A_RINGS_TX, ETHTOOL_A_RINGS_TX_MAX},
};
constexpr U32Attr k_channels[] = {
    {"channels.rx", ETHTOOL_A_CHANNELS_RX_COUNT, ETHTOOL_A_CHANNELS_RX_MAX},
    {"channels.tx", ETHTOOL_A_CHANNELS_TX_COUNT, ETHTOOL_A_CHANNELS_TX_MAX},
    {"channels.other", ETHTOOL_A_CHANNELS_OTHER_COUNT, ETHTOOL_A_CHANNELS_OTHER_MAX},
    {"channels.combined", ETHTOOL_A_CHANNELS_COMBINED_COUNT, ETHTOOL_A_CHANNELS_COMBINED_MAX},
};
constexpr U32Attr k_pause[] = {
    {"pause.autoneg", ETHTOOL_A_PAUSE_AUTONEG, 0},
    {"pause.rx", ETHTOOL_A_PAUSE_RX, 0},
    {"pause.tx", ETHTOOL_A_PAUSE_TX, 0},
};

// One setting's value as the attribute's type: u8 "on"/"off" or a u32
// count (anything else, or more than 32 bits, is an input error).
Result<NlAttr> attr_value(int attr, bool is_u8, const std::string &ifname, const std::string &key,
                          const std::string &v) {
  if (is_u8) {
    return NlAttr{attr, v == "on" ? 1U : 0U, true};
  }
  const auto n = parse_int<std::uint32_t>(v);
  if (!n) {
    return input_error(ifname + ": " + key + ": invalid value '" + v + "'");
  }
  return NlAttr{attr, *n, false};
}
// The ethtool groups read with a plain GET: their command and attributes.
struct EthtoolGroup {
  const char *group;
  std::uint8_t get;
  std::uint8_t set;
  std::span<const U32Attr> attrs;
  bool is_u8; // pause: u8 on/off
};
const EthtoolGroup k_groups[] = {
    {"rings", ETHTOOL_MSG_RINGS_GET, ETHTOOL_MSG_RINGS_SET, k_rings, false},
    {"channels", ETHTOOL_MSG_CHANNELS_GET, ETHTOOL_MSG_CHANNELS_SET, k_channels, false},
    {"pause", ETHTOOL_MSG_PAUSE_GET, ETHTOOL_MSG_PAUSE_SET, k_pause, true},
};

class LiveBackend final : public NicBackend {
public:
  LiveBackend(Sysroot root, const std::vector<unsigned> &feeders, std::unique_ptr<NetlinkTransport> nl)
      : root_(std::move(root)), nl_(std::move(nl)) {
    for (const unsigned c : feeders) {
      feeders_.set(c);
    }
  }

  Result<std::vector<std::string>> interfaces() override {
    std::vector<std::string> out;
    for (const auto &n : root_.list_dir("/sys/class/net")) {
      if (root_.exists("/sys/class/net/" + n + "/device")) {
        out.push_back(n);
      }
    }
    return out;
  }

  Result<NicDevice> probe(const std::string &ifname) override {
    NicDevice d;
    d.name = ifname;
    probe_pci(d);
    if (auto st = probe_sysfs_values(d); !st) {
      return st.error();
    }
    if (auto st = probe_link(d); !st) {
      return st.error();
    }
    if (auto st = probe_ethtool(d); !st) {
      return st.error();
    }
    if (probe_wants("features")) {
      if (auto st = read_features(ifname, d); !st) {
        return st.error();
      }
    }
    return d;
  }

  Status set(const std::string &ifname, const std::string &group, const NicValues &values) override {
    if (group == "sysctl") {
      return set_sysctl(values);
    }
    if (group == "irq" || group == "rps") {
      return set_sysfs(ifname, group, values);
    }
    if (group == "link") {
      return set_link(ifname, values);
    }
    if (group == "features") {
      return set_features(ifname, values);
    }
    auto attrs = encode(ifname, group, values);
    if (!attrs) {
      return attrs.error();
    }
    const std::uint8_t cmd = group == "coalesce" ? std::uint8_t{ETHTOOL_MSG_COALESCE_SET} : group_of(group)->set;
    if (auto st = nl_->ethtool_set(cmd, ifname, *attrs); !st) {
      return kernel_error(ifname, group, values, st.error());
    }
    return {};
  }

  Result<std::string> read_global(const std::string &key) override {
    std::string path = "/proc/sys/" + key.substr(7);
    std::replace(path.begin() + 10, path.end(), '.', '/');
    return root_.read_value(path);
  }

  Result<std::vector<unsigned>> node_cpus(int node) override {
    auto cpus = read_cpulist(root_, node < 0 ? "/sys/devices/system/cpu/online"
                                             : "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    if (!cpus) {
      return cpus.error();
    }
    return (*cpus - feeders_).cpus();
  }

  int irqbalance_pid() override {
    if (!irqbalance_pid_) { // asked by the plan and again by the apply
      irqbalance_pid_ = mltune::irqbalance_pid(root_);
    }
    return *irqbalance_pid_;
  }

  Result<std::string> irqbalance(const std::string &mode, const std::vector<unsigned> &banned,
                                 const std::vector<int> &irqs) override {
    const int pid = irqbalance_pid();
    if (pid <= 0) {
      return std::string("irqbalance is not running");
    }
    if (mode == "stop") {
      if (root_.is_live() && ::kill(pid, SIGTERM) != 0) {
        return sys_error("irqbalance: kill " + std::to_string(pid), errno);
      }
      return "irqbalance (pid " + std::to_string(pid) + ") stopped";
    }
    // ban: keep irqbalance off the NIC IRQs and off the non-housekeeping CPUs.
    const std::string conf = "/etc/default/irqbalance";
    std::string text;
    if (auto old = root_.read(conf)) {
      size_t pos = 0;
      while (pos < old->size()) {
        const size_t end = std::min(old->find('\n', pos), old->size());
        const std::string line = old->substr(pos, end - pos);
        if (!line.starts_with("IRQBALANCE_BANNED_CPULIST=") && !line.starts_with("IRQBALANCE_ARGS=")) {
          text += line + "\n";
        }
        pos = end + 1;
      }
    }
    CpuSet cpus;
    for (const unsigned c : banned) {
      cpus.set(c);
    }
    std::string args;
    for (int i : irqs) {
      args += (args.empty() ? "" : " ") + std::string("--banirq=") + std::to_string(i);
    }
    text += "# written by mltunectl nic apply\nIRQBALANCE_BANNED_CPULIST=" + cpus.str() + "\nIRQBALANCE_ARGS=\"" +
            args + "\"\n";
    if (auto st = root_.write_file(conf, text); !st) {
      return st.error();
    }
    return "irqbalance (pid " + std::to_string(pid) + "): " + conf +
           " bans the NIC IRQs; restart irqbalance to apply it";
  }

private:
  static const EthtoolGroup *group_of(std::string_view group) {
    const auto *it = std::ranges::find_if(k_groups, [&](const EthtoolGroup &g) { return group == g.group; });
    return it == std::end(k_groups) ? nullptr : it;
  }

  static std::string describe(const NicValues &values) {
    std::string s;
    for (const auto &[k, v] : values) {
      s += (s.empty() ? "" : ", ") + k + "=" + v;
    }
    return s;
  }

  // A refused SET: device, group and what was asked, then the kernel's word.
  static Error kernel_error(const std::string &ifname, const std::string &group, const NicValues &values,
                            const Error &e) {
    return with_context(e, ifname + ": " + group + " (" + describe(values) + ")");
  }

  // Driver, and the NUMA node and MSI IRQs of the PCI device, which for
  // virtio is the parent of the virtio device. The node is needed for IRQ
  // and RPS placement and for channel counts matched to the NIC-local CPUs;
  // the IRQs only for IRQ settings.
  void probe_pci(NicDevice &d) const {
    const std::string base = "/sys/class/net/" + d.name;
    if (const auto drv = root_.read_link(base + "/device/driver")) {
      d.driver = fs::path(*drv).filename().string();
    }
    const bool want_irqs = probe_wants("irq");
    if (!want_irqs && !probe_wants("rps") && !probe_wants("channels")) {
      return;
    }
    // Node paths, resolved inside the sysroot.
    auto found = root_.resolve(base + "/device");
    if (!found) {
      return;
    }
    fs::path dev = *found;
    for (int depth = 0; depth < 4 && dev.has_parent_path(); ++depth, dev = dev.parent_path()) {
      if (root_.exists((dev / "numa_node").string()) && root_.exists((dev / "msi_irqs").string())) {
        break;
      }
    }
    if (auto text = root_.read((dev / "numa_node").string())) {
      // -1 when the platform does not say.
      const auto n = parse_int<int>(trim(*text));
      d.numa_node = n && *n >= 0 ? *n : -1;
    }
    // The vectors the driver has requested: a NIC that is down (at boot,
    // before the network is configured) lists its MSI-X vectors in sysfs
    // but has no /proc/irq/N for them; they get the default affinity when
    // it comes up.
    std::vector<int> irqs;
    for (const auto &e : want_irqs ? root_.list_dir((dev / "msi_irqs").string()) : std::vector<std::string>{}) {
      if (const auto n = parse_int<int>(e);
          n && *n >= 0 && root_.exists("/proc/irq/" + std::to_string(*n) + "/smp_affinity_list")) {
        irqs.push_back(*n);
      }
    }
    std::ranges::sort(irqs);
    d.irqs = irqs;
  }

  // IRQ affinities and RPS settings (procfs, sysfs); RPS masks in the form
  // CpuSet::mask_str() gives them, as the plan does.  A malformed mask is an
  // error naming its file.
  Status probe_sysfs_values(NicDevice &d) const {
    const std::string base = "/sys/class/net/" + d.name;
    for (int irq : d.irqs) {
      if (auto v = root_.read_value("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list")) {
        d.current["irq." + std::to_string(irq)] = *v;
      }
    }
    for (const auto &q : probe_wants("rps") ? root_.list_dir(base + "/queues") : std::vector<std::string>{}) {
      if (!q.starts_with("rx-")) {
        continue;
      }
      d.rx_queues.push_back(q);
      const std::string mask_file = base + "/queues/" + q + "/rps_cpus";
      if (auto v = root_.read(mask_file)) {
        auto mask = parse_cpumask(*v, mask_file);
        if (!mask) {
          return mask.error();
        }
        d.current["rps." + q + ".cpus"] = mask->mask_str();
      }
      if (auto v = root_.read_value(base + "/queues/" + q + "/rps_flow_cnt")) {
        d.current["rps." + q + ".flow-cnt"] = *v;
      }
    }
    return {};
  }

  Status probe_link(NicDevice &d) {
    auto link = nl_->link_get(d.name);
    if (!link) {
      return input_error("unknown interface '" + d.name + "': " + link.error().message);
    }
    d.ifindex = link->ifindex;
    // IFF_UP (0x1) of the interface flags, as sysfs prints them ("0x1003").
    if (auto f = root_.read_value("/sys/class/net/" + d.name + "/flags"); f && f->starts_with("0x")) {
      d.up = (parse_int<unsigned>(f->substr(2), 16).value_or(1) & 0x1U) != 0;
    }
    d.current["link.mtu"] = std::to_string(link->mtu);
    d.current["link.txqueuelen"] = std::to_string(link->txqlen);
    return {};
  }

  // One ethtool GET; a group the driver lacks (EOPNOTSUPP) is noted, not an
  // error.  Returns no attributes then.
  Result<std::optional<NlAttrs>> get_group(NicDevice &d, std::uint8_t cmd, const char *group) {
    auto tb = nl_->ethtool_get(cmd, d.name);
    if (tb) {
      return std::optional<NlAttrs>(std::move(*tb));
    }
    if (tb.error().sys_errno == EOPNOTSUPP) {
      d.unsupported_groups.insert(group);
      return std::optional<NlAttrs>();
    }
    return with_context(tb.error(), d.name);
  }

  // Rings, channels, pause (with their maxima) and coalescing.
  Status probe_ethtool(NicDevice &d) {
    for (const auto &g : k_groups) {
      if (!probe_wants(g.group)) {
        continue;
      }
      auto tb = get_group(d, g.get, g.group);
      if (!tb) {
        return tb.error();
      }
      for (const auto &a : *tb ? g.attrs : std::span<const U32Attr>()) {
        const NlAttrs &t = **tb;
        if (g.is_u8 && t.contains(a.attr)) {
          d.current[a.key] = onoff(t.at(a.attr) != 0);
        } else if (!g.is_u8 && t.contains(a.attr) && t.contains(a.max_attr)) {
          d.current[a.key] = std::to_string(t.at(a.attr));
          d.max[a.key] = t.at(a.max_attr);
        }
      }
    }
    if (!probe_wants("coalesce")) {
      return {};
    }
    auto tb = get_group(d, ETHTOOL_MSG_COALESCE_GET, "coalesce");
    if (!tb) {
      return tb.error();
    }
    for (const auto &a : *tb ? std::span<const CoalAttr>(k_coal) : std::span<const CoalAttr>()) {
      if (auto it = (*tb)->find(a.attr); it != (*tb)->end()) {
        d.current[std::string("coalesce.") + a.name] = a.is_u8 ? onoff(it->second != 0) : std::to_string(it->second);
      }
    }
    return {};
  }

  Status set_sysctl(const NicValues &values) {
    for (const auto &[k, v] : values) {
      std::string path = "/proc/sys/" + k.substr(7);
      std::replace(path.begin() + 10, path.end(), '.', '/');
      if (auto st = root_.write_value(path, v); !st) {
        return st;
      }
    }
    return {};
  }

  // irq: /proc/irq/N/smp_affinity_list; rps: the rx queue's rps files.
  Status set_sysfs(const std::string &ifname, const std::string &group, const NicValues &values) {
    const std::string base = "/sys/class/net/" + ifname;
    for (const auto &[k, v] : values) {
      std::string path;
      if (group == "irq") {
        if (v.empty()) {
          continue;
        }
        path = "/proc/irq/" + k.substr(4) + "/smp_affinity_list";
      } else {
        const size_t dot = k.rfind('.');
        const std::string q = k.substr(4, dot - 4);
        path = base + "/queues/" + q + "/" + (k.substr(dot + 1) == "cpus" ? "rps_cpus" : "rps_flow_cnt");
      }
      if (auto st = root_.write_value(path, v); !st) {
        return with_context(st.error(), ifname + ": " + k + "=" + v);
      }
    }
    return {};
  }

  Status set_link(const std::string &ifname, const NicValues &values) {
    std::optional<unsigned> mtu, txqlen;
    for (const auto &[k, v] : values) {
      const auto n = parse_int<unsigned>(v);
      if (!n) {
        return input_error(ifname + ": " + k + ": invalid value '" + v + "'");
      }
      (k == "link.mtu" ? mtu : txqlen) = n;
    }
    if (auto st = nl_->link_set(ifname, mtu, txqlen); !st) {
      if (st.error().sys_errno == 0) {
        return with_context(st.error(), ifname + ": link");
      }
      return kernel_error(ifname, "link", values, st.error());
    }
    return {};
  }

  // The attributes of a rings, channels, pause or coalesce SET.
  static Result<std::vector<NlAttr>> encode(const std::string &ifname, const std::string &group,
                                            const NicValues &values) {
    const EthtoolGroup *g = group_of(group);
    if (g == nullptr && group != "coalesce") {
      return input_error(ifname + ": unknown NIC setting group '" + group + "'");
    }
    std::vector<NlAttr> out;
    for (const auto &[k, v] : values) {
      Result<NlAttr> a = input_error(ifname + ": unknown setting " + k);
      if (g != nullptr) {
        const auto it = std::ranges::find_if(g->attrs, [&](const U32Attr &x) { return k == x.key; });
        if (it != g->attrs.end()) {
          a = attr_value(it->attr, g->is_u8, ifname, k, v);
        }
      } else {
        const std::string name = k.substr(9);
        const auto *it = std::ranges::find_if(k_coal, [&](const CoalAttr &x) { return name == x.name; });
        if (it != std::end(k_coal)) {
          a = attr_value(it->attr, it->is_u8, ifname, k, v);
        }
      }
      if (!a) {
        return a.error();
      }
      out.push_back(*a);
    }
    return out;
  }

  // Features: the wanted bits, then a read back -- the kernel silently keeps
  // a feature off whose dependency is off.
  Status set_features(const std::string &ifname, const NicValues &values) {
    std::vector<std::pair<std::string, bool>> wanted;
    for (const auto &[k, v] : values) {
      wanted.emplace_back(k.substr(9), v == "on");
    }
    if (auto st = nl_->features_set(ifname, wanted); !st) {
      return kernel_error(ifname, "features", values, st.error());
    }
    NicDevice after;
    if (auto st = read_features(ifname, after); !st) {
      return st;
    }
    for (const auto &[k, v] : values) {
      const auto it = after.current.find(k);
      if (it != after.current.end() && it->second != v) {
        return failure(ifname + ": " + k + "=" + v + ": the kernel left it " + it->second +
                           " (a feature it depends on is off, or the driver refused it)",
                       EOPNOTSUPP);
      }
    }
    return {};
  }

  Status read_features(const std::string &ifname, NicDevice &d) {
    if (all_features_.empty()) {
      // Every feature name the kernel knows (ETH_SS_FEATURES), once.
      auto names = nl_->feature_names(ifname);
      if (!names) {
        return with_context(names.error(), ifname);
      }
      all_features_ = std::move(*names);
    }
    auto f = nl_->features_get(ifname);
    if (!f) {
      return with_context(f.error(), ifname);
    }
    for (const auto &n : all_features_) {
      if (n.empty()) {
        continue;
      }
      const std::string k = "features." + n;
      d.current[k] = onoff(std::find(f->active.begin(), f->active.end(), n) != f->active.end());
      if (std::find(f->hw.begin(), f->hw.end(), n) == f->hw.end()) {
        d.fixed.insert(k);
      }
    }
    return {};
  }

  Sysroot root_;
  CpuSet feeders_;
  std::unique_ptr<NetlinkTransport> nl_;
  std::optional<int> irqbalance_pid_;
  std::vector<std::string> all_features_;
};

} // namespace

std::unique_ptr<NicBackend> make_live_nic_backend(const Sysroot &root, const std::vector<unsigned> &feeders,
                                                  std::unique_ptr<NetlinkTransport> transport) {
  return std::make_unique<LiveBackend>(root, feeders, std::move(transport));
}
Result<std::unique_ptr<NicBackend>> make_live_nic_backend(const Sysroot &root, const std::vector<unsigned> &feeders) {
  auto t = make_netlink_transport();
  if (!t) {
    return t.error();
  }
  return make_live_nic_backend(root, feeders, std::move(*t));
}

Result<std::vector<unsigned>> nic_feeder_cpus(const Sysroot &root) {
  const std::string file = "/sys/kernel/mltune/feeder/cpus";
  if (!root.exists(file)) {
    return std::vector<unsigned>{};
  }
  auto cpus = read_cpulist(root, file);
  if (!cpus) {
    return cpus.error();
  }
  return cpus->cpus();
}

} // namespace mltune
