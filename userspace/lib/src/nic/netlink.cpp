// The live NIC backend: ethtool generic netlink and rtnetlink through libnl
// (LiveTransport, the NetlinkTransport message layer), queue IRQs and RPS
// through the sysroot.  LiveBackend plans the messages, maps the kernel's
// errors and reads features back; tests run it over a fake transport.
#include "base/proc.hpp"
#include "mltune/cpulist.hpp"
#include "mltune/nic.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

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

// Names of the bits set in a non-compact bitset (list mode).
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

// libnl under NetlinkTransport: one request at a time on the generic netlink
// socket (ethtool family) and the rtnetlink socket.
class LiveTransport final : public NetlinkTransport {
public:
  static constexpr size_t k_genl_buf = size_t{64} * 1024;
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
    // One recvmsg per message into a buffer larger than any ethtool reply
    // this asks for (a few KiB; the feature names are the largest), instead
    // of a MSG_PEEK for the size first: two system calls fewer per request.
    // A larger message would fail the request (NLE_MSG_TRUNC), not be cut.
    nl_socket_disable_msg_peek(genl_.get());
    if (int r = nl_socket_set_msg_buf_size(genl_.get(), k_genl_buf); r < 0) {
      return failure(std::string("netlink: receive buffer: ") + nl_geterror(r));
    }
    family_ = genl_ctrl_resolve(genl_.get(), ETHTOOL_GENL_NAME);
    if (family_ < 0) {
      return failure("netlink: generic netlink family \"ethtool\" not found (kernel without ethtool netlink): " +
                     std::string(nl_geterror(family_)));
    }
    return {};
  }

  Result<NlAttrs> ethtool_get(std::uint8_t cmd, const std::string &ifname) override {
    NlAttrs out;
    Exchange x;
    x.maxattr = k_max_scalar_attr;
    x.on_reply = [&](nlattr **tb) {
      // Attribute 1 is the nested header; the rest that are scalars count.
      for (int t = 2; t <= k_max_scalar_attr; ++t) {
        if (tb[t] && nla_len(tb[t]) == 1) {
          out[t] = nla_get_u8(tb[t]);
        } else if (tb[t] && nla_len(tb[t]) == 4) {
          out[t] = nla_get_u32(tb[t]);
        }
      }
    };
    if (auto st = request(cmd, ifname, false, nullptr, x); !st) {
      return st.error();
    }
    return out;
  }

  Status ethtool_set(std::uint8_t cmd, const std::string &ifname, const std::vector<NlAttr> &attrs) override {
    Exchange x;
    return request(
        cmd, ifname, true,
        [&](nl_msg *m) {
          for (const auto &a : attrs) {
            if (a.is_u8) {
              nla_put_u8(m, a.type, static_cast<std::uint8_t>(a.value));
            } else {
              nla_put_u32(m, a.type, a.value);
            }
          }
        },
        x);
  }

  // ETH_SS_FEATURES is the kernel's one table of feature names, the same
  // for every device: asked once per transport (a resident switcher keeps
  // its transport, so once for its life).
  Result<std::vector<std::string>> feature_names(const std::string &ifname) override {
    if (!feature_names_.empty()) {
      return feature_names_;
    }
    std::vector<std::string> names;
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
            names.emplace_back(nla_get_string(s[ETHTOOL_A_STRING_VALUE]));
          }
        }
      }
    };
    // A GET whose request carries attributes besides the header.
    auto fill = [](nl_msg *m) {
      nlattr *sets = nla_nest_start(m, ETHTOOL_A_STRSET_STRINGSETS);
      nlattr *set = nla_nest_start(m, ETHTOOL_A_STRINGSETS_STRINGSET);
      nla_put_u32(m, ETHTOOL_A_STRINGSET_ID, ETH_SS_FEATURES);
      nla_nest_end(m, set);
      nla_nest_end(m, sets);
    };
    if (auto st = request(ETHTOOL_MSG_STRSET_GET, ifname, false, fill, x); !st) {
      return st.error();
    }
    feature_names_ = names;
    return names;
  }

  Result<NlFeatures> features_get(const std::string &ifname) override {
    NlFeatures f;
    Exchange x;
    x.maxattr = ETHTOOL_A_FEATURES_MAX;
    x.on_reply = [&](nlattr **tb) {
      if (tb[ETHTOOL_A_FEATURES_HW]) {
        f.hw = bitset_names(tb[ETHTOOL_A_FEATURES_HW]);
      }
      if (tb[ETHTOOL_A_FEATURES_ACTIVE]) {
        f.active = bitset_names(tb[ETHTOOL_A_FEATURES_ACTIVE]);
      }
    };
    if (auto st = request(ETHTOOL_MSG_FEATURES_GET, ifname, false, nullptr, x); !st) {
      return st.error();
    }
    return f;
  }

  Status features_set(const std::string &ifname, const std::vector<std::pair<std::string, bool>> &wanted) override {
    Exchange x;
    return request(
        ETHTOOL_MSG_FEATURES_SET, ifname, true,
        [&](nl_msg *m) {
          nlattr *want = nla_nest_start(m, ETHTOOL_A_FEATURES_WANTED);
          nlattr *bits = nla_nest_start(m, ETHTOOL_A_BITSET_BITS);
          for (const auto &[name, on] : wanted) {
            nlattr *bit = nla_nest_start(m, ETHTOOL_A_BITSET_BITS_BIT);
            nla_put_string(m, ETHTOOL_A_BITSET_BIT_NAME, name.c_str());
            if (on) {
              nla_put_flag(m, ETHTOOL_A_BITSET_BIT_VALUE);
            }
            nla_nest_end(m, bit);
          }
          nla_nest_end(m, bits);
          nla_nest_end(m, want);
        },
        x);
  }

  Result<NlLink> link_get(const std::string &ifname) override {
    rtnl_link *raw = nullptr;
    if (int r = rtnl_link_get_kernel(rtnl_.get(), 0, ifname.c_str(), &raw); r < 0) {
      return failure(nl_geterror(r));
    }
    const LinkPtr link(raw);
    return NlLink{rtnl_link_get_ifindex(link.get()), rtnl_link_get_mtu(link.get()), rtnl_link_get_txqlen(link.get())};
  }

  Status link_set(const std::string &ifname, std::optional<unsigned> mtu, std::optional<unsigned> txqlen) override {
    rtnl_link *raw = nullptr;
    if (int r = rtnl_link_get_kernel(rtnl_.get(), 0, ifname.c_str(), &raw); r < 0) {
      return failure(nl_geterror(r));
    }
    const LinkPtr orig(raw);
    const LinkPtr change(rtnl_link_alloc());
    if (mtu) {
      rtnl_link_set_mtu(change.get(), *mtu);
    }
    if (txqlen) {
      rtnl_link_set_txqlen(change.get(), *txqlen);
    }
    Exchange x;
    // The socket's callbacks point at x only for this request.
    const CbPtr saved(nl_socket_get_cb(rtnl_.get()));
    const CbPtr cb(nl_cb_clone(saved.get()));
    nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &x);
    nl_socket_set_cb(rtnl_.get(), cb.get());
    const int r = rtnl_link_change(rtnl_.get(), orig.get(), change.get(), 0);
    nl_socket_set_cb(rtnl_.get(), saved.get());
    if (r < 0) {
      if (x.error == 0) {
        x.error = EINVAL;
      }
      return failure("kernel: " + kernel_says(x) + " [" + nl_geterror(r) + "]", x.error);
    }
    return {};
  }

private:
  // Scalar attributes of the ethtool replies read here are all below this.
  static constexpr int k_max_scalar_attr = 64;

  // One ethtool request: the header (with OMIT_REPLY for a SET), then what
  // `fill` adds; GET replies go to x.on_reply.  Fails with the kernel's
  // error (x.error, x.ext_msg) as "kernel: ...".
  Status request(std::uint8_t cmd, const std::string &ifname, bool is_set, const std::function<void(nl_msg *)> &fill,
                 Exchange &x) {
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
    if (is_set) {
      nla_put_u32(msg.get(), ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_OMIT_REPLY);
    }
    nla_nest_end(msg.get(), hdr);
    if (fill) {
      fill(msg.get());
    }
    const CbPtr cb(nl_cb_alloc(NL_CB_DEFAULT));
    if (!cb) {
      return failure("netlink: out of memory", ENOMEM);
    }
    nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &x);
    nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_ack, &x);
    nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &x);
    if (int r = nl_send_auto(genl_.get(), msg.get()); r < 0) {
      return failure(std::string("netlink send: ") + nl_geterror(r));
    }
    while (!x.done) {
      const int r = nl_recvmsgs(genl_.get(), cb.get());
      if (r < 0 && !x.done) {
        x.error = EIO;
        return failure(std::string("netlink receive: ") + nl_geterror(r), EIO);
      }
    }
    if (x.error != 0) {
      return failure("kernel: " + kernel_says(x), x.error);
    }
    return {};
  }

  SockPtr genl_;
  SockPtr rtnl_;
  int family_ = -1;
  std::vector<std::string> feature_names_;
};

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
    const auto *it =
        std::find_if(std::begin(k_groups), std::end(k_groups), [&](const EthtoolGroup &g) { return group == g.group; });
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
    std::sort(irqs.begin(), irqs.end());
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
      (k == "link.mtu" ? mtu : txqlen) = *n;
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
        const auto it = std::find_if(g->attrs.begin(), g->attrs.end(), [&](const U32Attr &x) { return k == x.key; });
        if (it != g->attrs.end()) {
          a = attr_value(it->attr, g->is_u8, ifname, k, v);
        }
      } else {
        const std::string name = k.substr(9);
        const auto *it =
            std::find_if(std::begin(k_coal), std::end(k_coal), [&](const CoalAttr &x) { return name == x.name; });
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

namespace {

// keep_netlink_transport(): one LiveTransport for the life of the process,
// lent to each backend through KeptTransport.  A request that fails drops
// it, so the next backend opens fresh sockets (nothing stale is read from a
// socket whose exchange broke off).
bool g_keep_transport = false;
std::shared_ptr<LiveTransport> g_kept;

class KeptTransport final : public NetlinkTransport {
public:
  Result<NlAttrs> ethtool_get(std::uint8_t cmd, const std::string &ifname) override {
    return check(t().ethtool_get(cmd, ifname));
  }
  Status ethtool_set(std::uint8_t cmd, const std::string &ifname, const std::vector<NlAttr> &attrs) override {
    return check(t().ethtool_set(cmd, ifname, attrs));
  }
  Result<std::vector<std::string>> feature_names(const std::string &ifname) override {
    return check(t().feature_names(ifname));
  }
  Result<NlFeatures> features_get(const std::string &ifname) override { return check(t().features_get(ifname)); }
  Status features_set(const std::string &ifname, const std::vector<std::pair<std::string, bool>> &wanted) override {
    return check(t().features_set(ifname, wanted));
  }
  Result<NlLink> link_get(const std::string &ifname) override { return check(t().link_get(ifname)); }
  Status link_set(const std::string &ifname, std::optional<unsigned> mtu, std::optional<unsigned> txqlen) override {
    return check(t().link_set(ifname, mtu, txqlen));
  }

private:
  // Kept from the first request of this backend to its last: a request
  // that failed drops the process's transport, not this one.
  LiveTransport &t() const { return *held_; }
  // A request the kernel refused ("kernel: ...", EOPNOTSUPP from a driver)
  // leaves the sockets clean; one that broke off in send or receive
  // ("netlink ...") does not.
  template <class R> R check(R r) {
    if (!r && r.error().message.starts_with("netlink") && g_kept == held_) {
      g_kept.reset();
    }
    return r;
  }
  std::shared_ptr<LiveTransport> held_ = g_kept;
};

} // namespace

void keep_netlink_transport() {
  g_keep_transport = true;
}

Result<std::unique_ptr<NetlinkTransport>> make_netlink_transport() {
  if (g_keep_transport && g_kept) {
    return std::unique_ptr<NetlinkTransport>(std::make_unique<KeptTransport>());
  }
  auto t = std::make_unique<LiveTransport>();
  if (auto st = t->open(); !st) {
    return st.error();
  }
  if (g_keep_transport) {
    g_kept = std::shared_ptr<LiveTransport>(std::move(t));
    return std::unique_ptr<NetlinkTransport>(std::make_unique<KeptTransport>());
  }
  return std::unique_ptr<NetlinkTransport>(std::move(t));
}

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
