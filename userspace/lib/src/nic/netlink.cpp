// The live NIC backend: ethtool generic netlink and rtnetlink through libnl,
// queue IRQs and RPS through the sysroot.
#include "mltune/nic.hpp"
#include "mltune/node_info.hpp"

#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <sys/socket.h>
#include <tuple>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

namespace mltune {

namespace fs = std::filesystem;

namespace {

struct SockFree {
  void operator()(nl_sock *s) const { nl_socket_free(s); }
};
struct MsgFree {
  void operator()(nl_msg *m) const { nlmsg_free(m); }
};
struct CbFree {
  void operator()(nl_cb *c) const { nl_cb_put(c); }
};
struct LinkFree {
  void operator()(rtnl_link *l) const { rtnl_link_put(l); }
};
using SockPtr = std::unique_ptr<nl_sock, SockFree>;
using MsgPtr = std::unique_ptr<nl_msg, MsgFree>;
using CbPtr = std::unique_ptr<nl_cb, CbFree>;
using LinkPtr = std::unique_ptr<rtnl_link, LinkFree>;

// State of one request: error and extended-ack message, done flag, reply parser.
struct Exchange {
  int error = 0;
  std::string ext_msg;
  bool done = false;
  std::function<void(nlattr **tb)> on_reply;
  int maxattr = 0;
};

int on_error(sockaddr_nl * /*nla*/, nlmsgerr *e, void *arg) {
  auto *x = static_cast<Exchange *>(arg);
  x->error = -e->error;
  x->done = true;
  const auto *nlh = reinterpret_cast<const nlmsghdr *>(reinterpret_cast<const char *>(e) - NLMSG_HDRLEN);
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) != 0) {
    size_t off = sizeof(*e);
    if ((nlh->nlmsg_flags & NLM_F_CAPPED) == 0) {
      off += e->msg.nlmsg_len - NLMSG_HDRLEN;
    }
    const long len = static_cast<long>(nlh->nlmsg_len) - NLMSG_HDRLEN - static_cast<long>(off);
    if (len > 0) {
      nlattr *tb[NLMSGERR_ATTR_MAX + 1] = {};
      auto *start = reinterpret_cast<nlattr *>(reinterpret_cast<char *>(e) + off);
      if (nla_parse(tb, NLMSGERR_ATTR_MAX, start, static_cast<int>(len), nullptr) == 0 && tb[NLMSGERR_ATTR_MSG]) {
        x->ext_msg = nla_get_string(tb[NLMSGERR_ATTR_MSG]);
      }
    }
  }
  return NL_STOP;
}

int on_ack(nl_msg * /*msg*/, void *arg) {
  static_cast<Exchange *>(arg)->done = true;
  return NL_STOP;
}

int on_valid(nl_msg *msg, void *arg) {
  auto *x = static_cast<Exchange *>(arg);
  if (!x->on_reply) {
    return NL_OK;
  }
  std::vector<nlattr *> tb(static_cast<size_t>(x->maxattr) + 1, nullptr);
  if (genlmsg_parse(nlmsg_hdr(msg), 0, tb.data(), x->maxattr, nullptr) == 0) {
    x->on_reply(tb.data());
  }
  return NL_OK;
}

void enable_ext_ack(nl_sock *sk) {
  const int one = 1;
  (void)setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  (void)setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
}

std::string kernel_says(const Exchange &x) {
  std::string s = std::strerror(x.error);
  if (!x.ext_msg.empty()) {
    return x.ext_msg + " (" + s + ")";
  }
  return s;
}

std::string onoff(bool b) {
  return b ? "on" : "off";
}

bool parse_num(const std::string &s, std::uint64_t &out) {
  try {
    size_t pos = 0;
    out = std::stoull(s, &pos, 10);
    return pos == s.size() && !s.empty() && s[0] != '-';
  } catch (...) {
    return false;
  }
}

std::vector<unsigned> parse_cpus(std::string_view text) {
  std::vector<unsigned> out;
  std::string s(text);
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '\n' || c == ' '; }), s.end());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = std::min(s.find(',', pos), s.size());
    const std::string part = s.substr(pos, end - pos);
    const size_t dash = part.find('-');
    try {
      const unsigned a = static_cast<unsigned>(std::stoul(part.substr(0, dash)));
      const unsigned b = dash == std::string::npos ? a : static_cast<unsigned>(std::stoul(part.substr(dash + 1)));
      for (unsigned c = a; c <= b && c < 8192; ++c) {
        out.push_back(c);
      }
    } catch (...) {
    }
    pos = end + 1;
  }
  return out;
}

std::string mask_normalize(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ',' || c == '\n' || c == ' '; }), s.end());
  const size_t nz = s.find_first_not_of('0');
  return nz == std::string::npos ? "0" : s.substr(nz);
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

// Names of the bits set in a non-compact bitset (list mode).
// Puts one setting's value as the attribute's type: u8 "on"/"off" or a u32
// count (anything else, or more than 32 bits, is an input error).
Status put_value(nl_msg *m, int attr, bool is_u8, const std::string &ifname, const std::string &key,
                 const std::string &v) {
  if (is_u8) {
    nla_put_u8(m, attr, v == "on" ? 1 : 0);
    return {};
  }
  std::uint64_t n = 0;
  if (!parse_num(v, n) || n > 0xffffffffULL) {
    return input_error(ifname + ": " + key + ": invalid value '" + v + "'");
  }
  nla_put_u32(m, attr, static_cast<std::uint32_t>(n));
  return {};
}

std::vector<std::string> bitset_names(nlattr *bitset) {
  std::vector<std::string> out;
  nlattr *tb[ETHTOOL_A_BITSET_MAX + 1] = {};
  if (nla_parse_nested(tb, ETHTOOL_A_BITSET_MAX, bitset, nullptr) != 0 || !tb[ETHTOOL_A_BITSET_BITS]) {
    return out;
  }
  nlattr *bit = nullptr;
  int rem = 0;
  nla_for_each_nested(bit, tb[ETHTOOL_A_BITSET_BITS], rem) {
    nlattr *bt[ETHTOOL_A_BITSET_BIT_MAX + 1] = {};
    // Without NOMASK every bit of the mask is listed; VALUE marks set ones.
    if (nla_parse_nested(bt, ETHTOOL_A_BITSET_BIT_MAX, bit, nullptr) == 0 && bt[ETHTOOL_A_BITSET_BIT_NAME] &&
        (tb[ETHTOOL_A_BITSET_NOMASK] || bt[ETHTOOL_A_BITSET_BIT_VALUE])) {
      out.emplace_back(nla_get_string(bt[ETHTOOL_A_BITSET_BIT_NAME]));
    }
  }
  return out;
}

class LiveBackend final : public NicBackend {
public:
  LiveBackend(Sysroot root, std::vector<unsigned> feeders) : root_(std::move(root)), feeders_(std::move(feeders)) {}

  Status open() {
    genl_.reset(nl_socket_alloc());
    rtnl_.reset(nl_socket_alloc());
    if (!genl_ || !rtnl_) {
      return failure("netlink: cannot allocate a socket", ENOMEM);
    }
    if (int r = genl_connect(genl_.get()); r < 0) {
      return failure(std::string("netlink: generic netlink connect: ") + nl_geterror(r));
    }
    if (int r = nl_connect(rtnl_.get(), NETLINK_ROUTE); r < 0) {
      return failure(std::string("netlink: rtnetlink connect: ") + nl_geterror(r));
    }
    enable_ext_ack(genl_.get());
    enable_ext_ack(rtnl_.get());
    nl_socket_enable_msg_peek(genl_.get());
    family_ = genl_ctrl_resolve(genl_.get(), ETHTOOL_GENL_NAME);
    if (family_ < 0) {
      return failure("netlink: generic netlink family \"ethtool\" not found (kernel without ethtool netlink): " +
                     std::string(nl_geterror(family_)));
    }
    return {};
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
    const std::string base = "/sys/class/net/" + ifname;
    std::error_code ec;
    const fs::path drv = fs::read_symlink(root_.path(base + "/device/driver"), ec);
    if (!ec) {
      d.driver = drv.filename().string();
    }
    // The NUMA node and MSI IRQs live on the PCI device, which for virtio is
    // the parent of the virtio device. The node is needed for IRQ and RPS
    // placement and for channel counts matched to the NIC-local CPUs; the
    // IRQs and queues only for IRQ and RPS settings.
    const bool want_irqs = probe_wants("irq");
    const bool want_queues = probe_wants("rps");
    if (want_irqs || want_queues || probe_wants("channels")) {
      fs::path dev = fs::canonical(root_.path(base + "/device"), ec);
      for (int depth = 0; !ec && depth < 4 && dev.has_parent_path(); ++depth, dev = dev.parent_path()) {
        if (fs::exists(dev / "numa_node", ec) && fs::exists(dev / "msi_irqs", ec)) {
          break;
        }
      }
      if (!ec) {
        std::error_code ec2;
        if (fs::exists(dev / "numa_node", ec2)) {
          std::uint64_t n = 0;
          auto txt = read_host(dev / "numa_node");
          d.numa_node = parse_num(txt, n) ? static_cast<int>(n) : -1;
        }
        std::vector<int> irqs;
        for (const auto &e : want_irqs ? fs::directory_iterator(dev / "msi_irqs", ec2) : fs::directory_iterator()) {
          std::uint64_t n = 0;
          if (parse_num(e.path().filename().string(), n)) {
            irqs.push_back(static_cast<int>(n));
          }
        }
        std::sort(irqs.begin(), irqs.end());
        d.irqs = irqs;
      }
    }
    for (int irq : d.irqs) {
      if (auto v = root_.read_value("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list")) {
        d.current["irq." + std::to_string(irq)] = *v;
      }
    }
    for (const auto &q : want_queues ? root_.list_dir(base + "/queues") : std::vector<std::string>{}) {
      if (!q.starts_with("rx-")) {
        continue;
      }
      d.rx_queues.push_back(q);
      if (auto v = root_.read_value(base + "/queues/" + q + "/rps_cpus")) {
        d.current["rps." + q + ".cpus"] = mask_normalize(*v);
      }
      if (auto v = root_.read_value(base + "/queues/" + q + "/rps_flow_cnt")) {
        d.current["rps." + q + ".flow-cnt"] = *v;
      }
    }

    // Link (rtnetlink).
    rtnl_link *raw = nullptr;
    if (int r = rtnl_link_get_kernel(rtnl_.get(), 0, ifname.c_str(), &raw); r < 0) {
      return input_error("unknown interface '" + ifname + "': " + nl_geterror(r));
    }
    LinkPtr link(raw);
    d.ifindex = rtnl_link_get_ifindex(link.get());
    d.current["link.mtu"] = std::to_string(rtnl_link_get_mtu(link.get()));
    d.current["link.txqueuelen"] = std::to_string(rtnl_link_get_txqlen(link.get()));

    // ethtool groups.
    for (const auto &[cmd, group, maxattr, table] :
         {std::tuple{ETHTOOL_MSG_RINGS_GET, "rings", int(ETHTOOL_A_RINGS_MAX), std::span<const U32Attr>(k_rings)},
          std::tuple{ETHTOOL_MSG_CHANNELS_GET, "channels", int(ETHTOOL_A_CHANNELS_MAX),
                     std::span<const U32Attr>(k_channels)},
          std::tuple{ETHTOOL_MSG_PAUSE_GET, "pause", int(ETHTOOL_A_PAUSE_MAX), std::span<const U32Attr>(k_pause)}}) {
      if (!probe_wants(group)) {
        continue;
      }
      const bool is_pause = std::string_view(group) == "pause";
      auto tbl = table;
      Exchange x;
      x.maxattr = maxattr;
      x.on_reply = [&](nlattr **tb) {
        for (const auto &a : tbl) {
          if (is_pause) {
            if (tb[a.attr]) {
              d.current[a.key] = onoff(nla_get_u8(tb[a.attr]) != 0);
            }
          } else if (tb[a.attr] && tb[a.max_attr]) {
            d.current[a.key] = std::to_string(nla_get_u32(tb[a.attr]));
            d.max[a.key] = nla_get_u32(tb[a.max_attr]);
          }
        }
      };
      if (auto st = request(static_cast<std::uint8_t>(cmd), ifname, 0, nullptr, x); !st) {
        if (x.error == EOPNOTSUPP) {
          d.unsupported_groups.insert(group);
          continue;
        }
        return st.error();
      }
    }
    if (probe_wants("coalesce")) {
      Exchange x;
      x.maxattr = ETHTOOL_A_COALESCE_MAX;
      x.on_reply = [&](nlattr **tb) {
        for (const auto &a : k_coal) {
          if (tb[a.attr]) {
            d.current[std::string("coalesce.") + a.name] =
                a.is_u8 ? onoff(nla_get_u8(tb[a.attr]) != 0) : std::to_string(nla_get_u32(tb[a.attr]));
          }
        }
      };
      if (auto st = request(ETHTOOL_MSG_COALESCE_GET, ifname, 0, nullptr, x); !st) {
        if (x.error != EOPNOTSUPP) {
          return st.error();
        }
        d.unsupported_groups.insert("coalesce");
      }
    }
    if (probe_wants("features")) {
      if (auto st = read_features(ifname, d); !st) {
        return st.error();
      }
    }
    return d;
  }

  Status set(const std::string &ifname, const std::string &group, const NicValues &values) override {
    auto describe = [&] {
      std::string s;
      for (const auto &[k, v] : values) {
        s += (s.empty() ? "" : ", ") + k + "=" + v;
      }
      return s;
    };
    if (group == "sysctl") {
      for (const auto &[k, v] : values) {
        std::string path = "/proc/sys/" + k.substr(7);
        std::replace(path.begin() + 10, path.end(), '.', '/');
        if (auto st = root_.write_value(path, v); !st) {
          return st;
        }
      }
      return {};
    }
    const std::string base = "/sys/class/net/" + ifname;
    if (group == "irq") {
      for (const auto &[k, v] : values) {
        if (v.empty()) {
          continue;
        }
        if (auto st = root_.write_value("/proc/irq/" + k.substr(4) + "/smp_affinity_list", v); !st) {
          return failure(ifname + ": " + k + "=" + v + ": " + st.error().message, st.error().sys_errno);
        }
      }
      return {};
    }
    if (group == "rps") {
      for (const auto &[k, v] : values) {
        const size_t dot = k.rfind('.');
        const std::string q = k.substr(4, dot - 4);
        const std::string file = k.substr(dot + 1) == "cpus" ? "rps_cpus" : "rps_flow_cnt";
        if (auto st = root_.write_value(base + "/queues/" + q + "/" + file, v); !st) {
          return failure(ifname + ": " + k + "=" + v + ": " + st.error().message, st.error().sys_errno);
        }
      }
      return {};
    }
    if (group == "link") {
      rtnl_link *raw = nullptr;
      if (int r = rtnl_link_get_kernel(rtnl_.get(), 0, ifname.c_str(), &raw); r < 0) {
        return failure(ifname + ": link: " + nl_geterror(r));
      }
      LinkPtr orig(raw);
      LinkPtr change(rtnl_link_alloc());
      for (const auto &[k, v] : values) {
        std::uint64_t n = 0;
        if (!parse_num(v, n)) {
          return input_error(ifname + ": " + k + ": invalid value '" + v + "'");
        }
        if (k == "link.mtu") {
          rtnl_link_set_mtu(change.get(), static_cast<unsigned>(n));
        } else {
          rtnl_link_set_txqlen(change.get(), static_cast<unsigned>(n));
        }
      }
      Exchange x;
      // The socket's callbacks point at x only for this request.
      CbPtr saved(nl_socket_get_cb(rtnl_.get()));
      CbPtr cb(nl_cb_clone(saved.get()));
      nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &x);
      nl_socket_set_cb(rtnl_.get(), cb.get());
      const int r = rtnl_link_change(rtnl_.get(), orig.get(), change.get(), 0);
      nl_socket_set_cb(rtnl_.get(), saved.get());
      if (r < 0) {
        if (x.error == 0) {
          x.error = EINVAL;
        }
        return failure(ifname + ": link (" + describe() + "): kernel: " + kernel_says(x) + " [" + nl_geterror(r) + "]",
                       x.error);
      }
      return {};
    }

    int cmd = 0;
    std::function<Status(nl_msg *)> fill;
    if (group == "rings" || group == "channels" || group == "pause") {
      cmd = group == "rings"      ? ETHTOOL_MSG_RINGS_SET
            : group == "channels" ? ETHTOOL_MSG_CHANNELS_SET
                                  : ETHTOOL_MSG_PAUSE_SET;
      std::span<const U32Attr> tbl = group == "rings"      ? std::span<const U32Attr>(k_rings)
                                     : group == "channels" ? std::span<const U32Attr>(k_channels)
                                                           : std::span<const U32Attr>(k_pause);
      fill = [&, tbl](nl_msg *m) -> Status {
        for (const auto &[k, v] : values) {
          const auto it = std::find_if(tbl.begin(), tbl.end(), [&](const U32Attr &a) { return k == a.key; });
          if (it == tbl.end()) {
            return input_error(ifname + ": unknown setting " + k);
          }
          if (auto st = put_value(m, it->attr, group == "pause", ifname, k, v); !st) {
            return st;
          }
        }
        return {};
      };
    } else if (group == "coalesce") {
      cmd = ETHTOOL_MSG_COALESCE_SET;
      fill = [&](nl_msg *m) -> Status {
        for (const auto &[k, v] : values) {
          const std::string name = k.substr(9);
          const auto *it =
              std::find_if(std::begin(k_coal), std::end(k_coal), [&](const CoalAttr &a) { return name == a.name; });
          if (it == std::end(k_coal)) {
            return input_error(ifname + ": unknown setting " + k);
          }
          if (auto st = put_value(m, it->attr, it->is_u8, ifname, k, v); !st) {
            return st;
          }
        }
        return {};
      };
    } else if (group == "features") {
      cmd = ETHTOOL_MSG_FEATURES_SET;
      fill = [&](nl_msg *m) -> Status {
        nlattr *wanted = nla_nest_start(m, ETHTOOL_A_FEATURES_WANTED);
        nlattr *bits = nla_nest_start(m, ETHTOOL_A_BITSET_BITS);
        for (const auto &[k, v] : values) {
          nlattr *bit = nla_nest_start(m, ETHTOOL_A_BITSET_BITS_BIT);
          nla_put_string(m, ETHTOOL_A_BITSET_BIT_NAME, k.substr(9).c_str());
          if (v == "on") {
            nla_put_flag(m, ETHTOOL_A_BITSET_BIT_VALUE);
          }
          nla_nest_end(m, bit);
        }
        nla_nest_end(m, bits);
        nla_nest_end(m, wanted);
        return {};
      };
    } else {
      return input_error(ifname + ": unknown NIC setting group '" + group + "'");
    }
    Exchange x;
    if (auto st = request(static_cast<std::uint8_t>(cmd), ifname, 0, fill, x); !st) {
      if (st.error().kind == Errc::input) {
        return st;
      }
      return failure(ifname + ": " + group + " (" + describe() + "): kernel: " + kernel_says(x), x.error);
    }
    if (group == "features") {
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
    }
    return {};
  }

  Result<std::string> read_global(const std::string &key) override {
    std::string path = "/proc/sys/" + key.substr(7);
    std::replace(path.begin() + 10, path.end(), '.', '/');
    return root_.read_value(path);
  }

  Result<std::vector<unsigned>> node_cpus(int node) override {
    auto txt = node < 0 ? root_.read_value("/sys/devices/system/cpu/online")
                        : root_.read_value("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    if (!txt) {
      return txt.error();
    }
    std::vector<unsigned> out;
    for (unsigned c : parse_cpus(*txt)) {
      if (std::find(feeders_.begin(), feeders_.end(), c) == feeders_.end()) {
        out.push_back(c);
      }
    }
    return out;
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
    std::string cpus;
    for (unsigned c : banned) {
      cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    }
    std::string args;
    for (int i : irqs) {
      args += (args.empty() ? "" : " ") + std::string("--banirq=") + std::to_string(i);
    }
    text +=
        "# written by mltunectl nic apply\nIRQBALANCE_BANNED_CPULIST=" + cpus + "\nIRQBALANCE_ARGS=\"" + args + "\"\n";
    if (auto st = root_.write_file(conf, text); !st) {
      return st.error();
    }
    return "irqbalance (pid " + std::to_string(pid) + "): " + conf +
           " bans the NIC IRQs; restart irqbalance to apply it";
  }

private:
  static std::string read_host(const fs::path &p) {
    std::error_code ec;
    std::string s;
    if (FILE *f = std::fopen(p.c_str(), "re")) {
      char buf[64];
      const size_t n = std::fread(buf, 1, sizeof(buf), f);
      std::fclose(f);
      s.assign(buf, n);
    }
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
      s.pop_back();
    }
    return s;
  }

  // One ethtool request; GET replies go to x.on_reply.  Fails with the
  // kernel's error (x.error, x.ext_msg).
  Status request(std::uint8_t cmd, const std::string &ifname, int /*flags*/,
                 const std::function<Status(nl_msg *)> &fill, Exchange &x) {
    MsgPtr msg(nlmsg_alloc());
    if (!msg) {
      return failure("netlink: out of memory", ENOMEM);
    }
    if (genlmsg_put(msg.get(), NL_AUTO_PORT, NL_AUTO_SEQ, family_, 0, NLM_F_REQUEST | NLM_F_ACK, cmd,
                    ETHTOOL_GENL_VERSION) == nullptr) {
      return failure("netlink: genlmsg_put failed");
    }
    // Every *_HEADER attribute is attribute 1 of its message.
    nlattr *hdr = nla_nest_start(msg.get(), 1);
    nla_put_string(msg.get(), ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    if (fill) {
      nla_put_u32(msg.get(), ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_OMIT_REPLY);
    }
    nla_nest_end(msg.get(), hdr);
    if (fill) {
      if (auto st = fill(msg.get()); !st) {
        return st;
      }
    }
    CbPtr cb(nl_cb_alloc(NL_CB_DEFAULT));
    if (!cb) {
      return failure("netlink: out of memory", ENOMEM);
    }
    nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &x);
    nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_ack, &x);
    nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &x);
    if (int r = nl_send_auto(genl_.get(), msg.get()); r < 0) {
      return failure(ifname + ": netlink send: " + nl_geterror(r));
    }
    while (!x.done) {
      const int r = nl_recvmsgs(genl_.get(), cb.get());
      if (r < 0 && !x.done) {
        x.error = EIO;
        return failure(ifname + ": netlink receive: " + nl_geterror(r), EIO);
      }
    }
    if (x.error != 0) {
      return failure(ifname + ": kernel: " + kernel_says(x), x.error);
    }
    return {};
  }

  Status read_features(const std::string &ifname, NicDevice &d) {
    if (all_features_.empty()) {
      // Every feature name the kernel knows (ETH_SS_FEATURES), once.
      Exchange x;
      x.maxattr = ETHTOOL_A_STRSET_MAX;
      x.on_reply = [&](nlattr **tb) {
        if (!tb[ETHTOOL_A_STRSET_STRINGSETS]) {
          return;
        }
        nlattr *set = nullptr;
        int rem = 0;
        nla_for_each_nested(set, tb[ETHTOOL_A_STRSET_STRINGSETS], rem) {
          nlattr *st[ETHTOOL_A_STRINGSET_MAX + 1] = {};
          if (nla_parse_nested(st, ETHTOOL_A_STRINGSET_MAX, set, nullptr) != 0 || !st[ETHTOOL_A_STRINGSET_STRINGS]) {
            continue;
          }
          nlattr *str = nullptr;
          int rem2 = 0;
          nla_for_each_nested(str, st[ETHTOOL_A_STRINGSET_STRINGS], rem2) {
            nlattr *s[ETHTOOL_A_STRING_MAX + 1] = {};
            if (nla_parse_nested(s, ETHTOOL_A_STRING_MAX, str, nullptr) == 0 && s[ETHTOOL_A_STRING_VALUE]) {
              all_features_.emplace_back(nla_get_string(s[ETHTOOL_A_STRING_VALUE]));
            }
          }
        }
      };
      auto fill = [](nl_msg *m) -> Status {
        nlattr *sets = nla_nest_start(m, ETHTOOL_A_STRSET_STRINGSETS);
        nlattr *set = nla_nest_start(m, ETHTOOL_A_STRINGSETS_STRINGSET);
        nla_put_u32(m, ETHTOOL_A_STRINGSET_ID, ETH_SS_FEATURES);
        nla_nest_end(m, set);
        nla_nest_end(m, sets);
        return {};
      };
      if (auto st = request_get_with(ETHTOOL_MSG_STRSET_GET, ifname, fill, x); !st) {
        return st;
      }
    }
    Exchange x;
    x.maxattr = ETHTOOL_A_FEATURES_MAX;
    std::vector<std::string> hw, active;
    x.on_reply = [&](nlattr **tb) {
      if (tb[ETHTOOL_A_FEATURES_HW]) {
        hw = bitset_names(tb[ETHTOOL_A_FEATURES_HW]);
      }
      if (tb[ETHTOOL_A_FEATURES_ACTIVE]) {
        active = bitset_names(tb[ETHTOOL_A_FEATURES_ACTIVE]);
      }
    };
    if (auto st = request(ETHTOOL_MSG_FEATURES_GET, ifname, 0, nullptr, x); !st) {
      return st;
    }
    for (const auto &n : all_features_) {
      if (n.empty()) {
        continue;
      }
      const std::string k = "features." + n;
      d.current[k] = onoff(std::find(active.begin(), active.end(), n) != active.end());
      if (std::find(hw.begin(), hw.end(), n) == hw.end()) {
        d.fixed.insert(k);
      }
    }
    return {};
  }

  // A GET whose request carries attributes besides the header.
  Status request_get_with(std::uint8_t cmd, const std::string &ifname, const std::function<Status(nl_msg *)> &fill,
                          Exchange &x) {
    MsgPtr msg(nlmsg_alloc());
    if (!msg) {
      return failure("netlink: out of memory", ENOMEM);
    }
    genlmsg_put(msg.get(), NL_AUTO_PORT, NL_AUTO_SEQ, family_, 0, NLM_F_REQUEST | NLM_F_ACK, cmd, ETHTOOL_GENL_VERSION);
    nlattr *hdr = nla_nest_start(msg.get(), 1);
    nla_put_string(msg.get(), ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    nla_nest_end(msg.get(), hdr);
    if (auto st = fill(msg.get()); !st) {
      return st;
    }
    CbPtr cb(nl_cb_alloc(NL_CB_DEFAULT));
    nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &x);
    nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_ack, &x);
    nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &x);
    if (int r = nl_send_auto(genl_.get(), msg.get()); r < 0) {
      return failure(ifname + ": netlink send: " + nl_geterror(r));
    }
    while (!x.done) {
      if (nl_recvmsgs(genl_.get(), cb.get()) < 0 && !x.done) {
        return failure(ifname + ": netlink receive failed", EIO);
      }
    }
    if (x.error != 0) {
      return failure(ifname + ": kernel: " + kernel_says(x), x.error);
    }
    return {};
  }

  Sysroot root_;
  std::vector<unsigned> feeders_;
  std::optional<int> irqbalance_pid_;
  SockPtr genl_;
  SockPtr rtnl_;
  int family_ = -1;
  std::vector<std::string> all_features_;
};

} // namespace

Result<std::unique_ptr<NicBackend>> make_live_nic_backend(const Sysroot &root, std::vector<unsigned> feeders) {
  auto b = std::make_unique<LiveBackend>(root, std::move(feeders));
  if (auto st = b->open(); !st) {
    return st.error();
  }
  return std::unique_ptr<NicBackend>(std::move(b));
}

std::vector<unsigned> nic_default_feeders(const Sysroot &root) {
  if (auto v = root.read_value("/sys/kernel/mltune/feeder/cpus")) {
    return parse_cpus(*v);
  }
  return {};
}

} // namespace mltune
