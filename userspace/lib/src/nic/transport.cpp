// The ethtool generic netlink and rtnetlink message layer under the NIC
// backend (NetlinkTransport, mltune/nic.hpp) through libnl: LiveTransport,
// one request at a time, the kernel's extended acks as its errors; and the
// transport that `mltunectl serve` keeps in its Caches (mltune/caches.hpp).
#include "mltune/caches.hpp"
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
#include <sys/socket.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

namespace mltune {
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

} // namespace

namespace {

// While Caches are current (mltune/caches.hpp): one LiveTransport kept in
// them, lent to each backend through KeptTransport.  A request that fails
// drops it, so the next backend opens fresh sockets (nothing stale is read
// from a socket whose exchange broke off).
struct KeptSockets {
  std::shared_ptr<LiveTransport> transport;
};

class KeptTransport final : public NetlinkTransport {
public:
  explicit KeptTransport(KeptSockets &kept) : kept_(kept), held_(kept.transport) {}
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
  // that failed drops the caches' transport, not this one.
  LiveTransport &t() const { return *held_; }
  // A request the kernel refused ("kernel: ...", EOPNOTSUPP from a driver)
  // leaves the sockets clean; one that broke off in send or receive
  // ("netlink ...") does not.
  template <class R> R check(R r) {
    if (!r && r.error().message.starts_with("netlink") && kept_.transport == held_) {
      kept_.transport.reset();
    }
    return r;
  }
  // The caches outlive every backend of a request they are current for.
  KeptSockets &kept_;
  std::shared_ptr<LiveTransport> held_;
};

} // namespace

Result<std::unique_ptr<NetlinkTransport>> make_netlink_transport() {
  KeptSockets *kept = Caches::current() != nullptr ? &Caches::current()->slot<KeptSockets>() : nullptr;
  if (kept != nullptr && kept->transport) {
    return std::unique_ptr<NetlinkTransport>(std::make_unique<KeptTransport>(*kept));
  }
  auto t = std::make_unique<LiveTransport>();
  if (auto st = t->open(); !st) {
    return st.error();
  }
  if (kept != nullptr) {
    kept->transport = std::shared_ptr<LiveTransport>(std::move(t));
    return std::unique_ptr<NetlinkTransport>(std::make_unique<KeptTransport>(*kept));
  }
  return std::unique_ptr<NetlinkTransport>(std::move(t));
}

} // namespace mltune
