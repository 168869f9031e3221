// The live NIC backend over a fake NetlinkTransport: which ethtool and
// rtnetlink messages a set sends (attribute types and values), how probe
// reads replies, how kernel errors are reported, and the restore of a
// transaction that fails half-way (nic_commit on the live backend).
#include "fake_sysroot.hpp"

#include "mltune/nic.hpp"

#include <cerrno>
#include <gtest/gtest.h>
#include <linux/ethtool_netlink.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

// What the backend sent, in order.
struct Sent {
  std::string op; // "ethtool_set", "features_set", "link_set"
  int cmd = 0;
  std::string ifname;
  std::vector<NlAttr> attrs;
  std::vector<std::pair<std::string, bool>> bits;
  std::optional<unsigned> mtu, txqlen;
};

class FakeTransport final : public NetlinkTransport {
public:
  Result<NlAttrs> ethtool_get(std::uint8_t cmd, const std::string &ifname) override {
    gets.emplace_back(cmd);
    if (auto it = get_errors.find(cmd); it != get_errors.end()) {
      return it->second;
    }
    if (ifname != "eth0") {
      return failure("kernel: No such device", ENODEV);
    }
    return replies[cmd];
  }
  Status ethtool_set(std::uint8_t cmd, const std::string &ifname, const std::vector<NlAttr> &attrs) override {
    sent.push_back({"ethtool_set", cmd, ifname, attrs, {}, {}, {}});
    if (auto it = set_errors.find(cmd); it != set_errors.end()) {
      return it->second;
    }
    return {};
  }
  Result<std::vector<std::string>> feature_names(const std::string & /*ifname*/) override {
    ++name_reads;
    return names;
  }
  Result<NlFeatures> features_get(const std::string & /*ifname*/) override { return features; }
  Status features_set(const std::string &ifname, const std::vector<std::pair<std::string, bool>> &wanted) override {
    sent.push_back({"features_set", 0, ifname, {}, wanted, {}, {}});
    if (!refuse_feature.empty()) {
      return {}; // accepted, but the bit stays as it was
    }
    for (const auto &[n, on] : wanted) {
      std::erase(features.active, n);
      if (on) {
        features.active.push_back(n);
      }
    }
    return {};
  }
  Result<NlLink> link_get(const std::string &ifname) override {
    if (ifname != "eth0") {
      return failure("Object not found");
    }
    return link;
  }
  Status link_set(const std::string &ifname, std::optional<unsigned> mtu, std::optional<unsigned> txqlen) override {
    sent.push_back({"link_set", 0, ifname, {}, {}, mtu, txqlen});
    if (link_error) {
      return *link_error;
    }
    return {};
  }

  std::map<int, NlAttrs> replies;
  std::map<int, Error> get_errors;
  std::map<int, Error> set_errors;
  std::vector<std::string> names{"tx-checksum-ipv4", "rx-gro-hw", "highdma"};
  NlFeatures features{{"tx-checksum-ipv4", "rx-gro-hw"}, {"tx-checksum-ipv4", "highdma"}};
  std::string refuse_feature;
  NlLink link{2, 1500, 1000};
  std::optional<Error> link_error;
  std::vector<int> gets;
  std::vector<Sent> sent;
  int name_reads = 0;
};

class Netlink : public ::testing::Test {
protected:
  void SetUp() override {
    auto t = std::make_unique<FakeTransport>();
    nl = t.get();
    nl->replies[ETHTOOL_MSG_RINGS_GET] = {{ETHTOOL_A_RINGS_RX_MAX, 8192},
                                          {ETHTOOL_A_RINGS_RX, 512},
                                          {ETHTOOL_A_RINGS_TX_MAX, 4096},
                                          {ETHTOOL_A_RINGS_TX, 256}};
    nl->replies[ETHTOOL_MSG_PAUSE_GET] = {{ETHTOOL_A_PAUSE_AUTONEG, 1}, {ETHTOOL_A_PAUSE_RX, 0}};
    nl->replies[ETHTOOL_MSG_COALESCE_GET] = {{ETHTOOL_A_COALESCE_RX_USECS, 8}, {ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, 1}};
    nl->get_errors[ETHTOOL_MSG_CHANNELS_GET] = failure("kernel: Operation not supported", EOPNOTSUPP);
    backend = make_live_nic_backend(fake.root(), {}, std::move(t));
  }
  FakeSysroot fake;
  FakeTransport *nl = nullptr;
  std::unique_ptr<NicBackend> backend;
};

TEST_F(Netlink, RingsSetSendsU32AttributesInOneRequest) {
  ASSERT_TRUE(backend->set("eth0", "rings", {{"rings.rx", "4096"}, {"rings.tx", "1024"}}));
  ASSERT_EQ(nl->sent.size(), 1U);
  EXPECT_EQ(nl->sent[0].cmd, ETHTOOL_MSG_RINGS_SET);
  EXPECT_EQ(nl->sent[0].ifname, "eth0");
  const std::vector<NlAttr> want{{ETHTOOL_A_RINGS_RX, 4096, false}, {ETHTOOL_A_RINGS_TX, 1024, false}};
  EXPECT_EQ(nl->sent[0].attrs, want);
}

TEST_F(Netlink, CoalesceSetSendsU8SwitchesAndU32Counts) {
  ASSERT_TRUE(backend->set("eth0", "coalesce", {{"coalesce.adaptive-rx", "off"}, {"coalesce.rx-usecs", "50"}}));
  ASSERT_EQ(nl->sent.size(), 1U);
  EXPECT_EQ(nl->sent[0].cmd, ETHTOOL_MSG_COALESCE_SET);
  const std::vector<NlAttr> want{{ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, 0, true},
                                 {ETHTOOL_A_COALESCE_RX_USECS, 50, false}};
  EXPECT_EQ(nl->sent[0].attrs, want);
}

TEST_F(Netlink, PauseAndChannelsUseTheirCommands) {
  ASSERT_TRUE(backend->set("eth0", "pause", {{"pause.rx", "on"}}));
  ASSERT_TRUE(backend->set("eth0", "channels", {{"channels.combined", "8"}}));
  ASSERT_EQ(nl->sent.size(), 2U);
  EXPECT_EQ(nl->sent[0].cmd, ETHTOOL_MSG_PAUSE_SET);
  EXPECT_EQ(nl->sent[0].attrs, (std::vector<NlAttr>{{ETHTOOL_A_PAUSE_RX, 1, true}}));
  EXPECT_EQ(nl->sent[1].cmd, ETHTOOL_MSG_CHANNELS_SET);
  EXPECT_EQ(nl->sent[1].attrs, (std::vector<NlAttr>{{ETHTOOL_A_CHANNELS_COMBINED_COUNT, 8, false}}));
}

TEST_F(Netlink, BadValuesAreInputErrorsAndSendNothing) {
  auto r = backend->set("eth0", "rings", {{"rings.rx", "lots"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  EXPECT_EQ(r.error().message, "eth0: rings.rx: invalid value 'lots'");
  r = backend->set("eth0", "rings", {{"rings.rx", "4294967296"}}); // 2^32 does not fit a u32
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  r = backend->set("eth0", "coalesce", {{"coalesce.rx-bogus", "1"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "eth0: unknown setting coalesce.rx-bogus");
  r = backend->set("eth0", "wol", {{"wol.x", "1"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
  EXPECT_TRUE(nl->sent.empty());
}

TEST_F(Netlink, KernelEopnotsuppNamesDeviceGroupAndValues) {
  nl->set_errors[ETHTOOL_MSG_COALESCE_SET] = failure("kernel: Operation not supported", EOPNOTSUPP);
  auto r = backend->set("eth0", "coalesce", {{"coalesce.rx-usecs", "50"}, {"coalesce.tx-usecs", "60"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::failed);
  EXPECT_EQ(r.error().sys_errno, EOPNOTSUPP);
  EXPECT_EQ(r.error().message,
            "eth0: coalesce (coalesce.rx-usecs=50, coalesce.tx-usecs=60): kernel: Operation not supported");
}

TEST_F(Netlink, ProbeReadsGroupsMaximaAndUnsupported) {
  auto d = backend->probe("eth0");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->ifindex, 2);
  EXPECT_EQ(d->current.at("link.mtu"), "1500");
  EXPECT_EQ(d->current.at("link.txqueuelen"), "1000");
  EXPECT_EQ(d->current.at("rings.rx"), "512");
  EXPECT_EQ(d->max.at("rings.rx"), 8192U);
  EXPECT_EQ(d->current.at("rings.tx"), "256");
  EXPECT_FALSE(d->current.contains("rings.rx-mini")); // not in the reply
  EXPECT_EQ(d->current.at("pause.autoneg"), "on");
  EXPECT_EQ(d->current.at("pause.rx"), "off");
  EXPECT_EQ(d->current.at("coalesce.rx-usecs"), "8");
  EXPECT_EQ(d->current.at("coalesce.adaptive-rx"), "on");
  EXPECT_TRUE(d->unsupported_groups.contains("channels"));
  EXPECT_FALSE(d->current.contains("channels.combined"));
  EXPECT_EQ(d->current.at("features.tx-checksum-ipv4"), "on");
  EXPECT_EQ(d->current.at("features.rx-gro-hw"), "off");
  EXPECT_EQ(d->current.at("features.highdma"), "on");
  EXPECT_EQ(d->fixed, (std::set<std::string>{"features.highdma"}));
}

TEST_F(Netlink, ProbeAsksOnlyForLimitedGroups) {
  backend->limit_probe({"rings"});
  auto d = backend->probe("eth0");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(nl->gets, std::vector<int>{ETHTOOL_MSG_RINGS_GET});
  EXPECT_EQ(nl->name_reads, 0);
  EXPECT_FALSE(d->current.contains("coalesce.rx-usecs"));
}

TEST_F(Netlink, ProbeErrors) {
  auto d = backend->probe("eth9");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, Errc::input);
  EXPECT_EQ(d.error().message, "unknown interface 'eth9': Object not found");
  nl->get_errors[ETHTOOL_MSG_COALESCE_GET] = failure("kernel: Input/output error", EIO);
  d = backend->probe("eth0");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().sys_errno, EIO);
  EXPECT_EQ(d.error().message, "eth0: kernel: Input/output error");
}

TEST_F(Netlink, FeaturesSetSendsBitsAndChecksTheResult) {
  ASSERT_TRUE(backend->set("eth0", "features", {{"features.rx-gro-hw", "on"}, {"features.tx-checksum-ipv4", "off"}}));
  ASSERT_EQ(nl->sent.size(), 1U);
  EXPECT_EQ(nl->sent[0].bits,
            (std::vector<std::pair<std::string, bool>>{{"rx-gro-hw", true}, {"tx-checksum-ipv4", false}}));
  nl->refuse_feature = "rx-gro-hw";
  nl->features.active = {};
  auto r = backend->set("eth0", "features", {{"features.rx-gro-hw", "on"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EOPNOTSUPP);
  EXPECT_NE(r.error().message.find("eth0: features.rx-gro-hw=on: the kernel left it off"), std::string::npos);
}

TEST_F(Netlink, LinkSetAndItsErrors) {
  ASSERT_TRUE(backend->set("eth0", "link", {{"link.mtu", "9000"}}));
  ASSERT_EQ(nl->sent.size(), 1U);
  EXPECT_EQ(nl->sent[0].mtu, 9000U);
  EXPECT_FALSE(nl->sent[0].txqlen);
  nl->link_error = failure("kernel: Invalid argument [Invalid input data or parameter]", EINVAL);
  auto r = backend->set("eth0", "link", {{"link.mtu", "99999"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EINVAL);
  EXPECT_EQ(r.error().message,
            "eth0: link (link.mtu=99999): kernel: Invalid argument [Invalid input data or parameter]");
  nl->link_error = failure("Object not found");
  r = backend->set("eth0", "link", {{"link.txqueuelen", "5000"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "eth0: link: Object not found");
  r = backend->set("eth0", "link", {{"link.mtu", "-1"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
}

// A transaction whose second request fails: the first is undone with the
// values probed before, and the error says so.
TEST_F(Netlink, FailureMidApplyRestores) {
  nl->set_errors[ETHTOOL_MSG_COALESCE_SET] = failure("kernel: Invalid argument", EINVAL);
  NicPlan plan;
  plan.changes = {{"eth0", "rings.rx", "512", "4096", "test.toml:3"},
                  {"eth0", "coalesce.rx-usecs", "8", "50", "test.toml:4"}};
  auto r = nic_commit(plan, *backend, NicOptions{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().sys_errno, EINVAL);
  EXPECT_NE(r.error().message.find("eth0: coalesce (coalesce.rx-usecs=50): kernel: Invalid argument"),
            std::string::npos);
  EXPECT_NE(r.error().message.find("restored"), std::string::npos);
  ASSERT_EQ(nl->sent.size(), 3U);
  EXPECT_EQ(nl->sent[0].cmd, ETHTOOL_MSG_RINGS_SET);
  EXPECT_EQ(nl->sent[0].attrs, (std::vector<NlAttr>{{ETHTOOL_A_RINGS_RX, 4096, false}}));
  EXPECT_EQ(nl->sent[1].cmd, ETHTOOL_MSG_COALESCE_SET);
  EXPECT_EQ(nl->sent[2].cmd, ETHTOOL_MSG_RINGS_SET);
  EXPECT_EQ(nl->sent[2].attrs, (std::vector<NlAttr>{{ETHTOOL_A_RINGS_RX, 512, false}}));
}

// With skip_unsupported an EOPNOTSUPP group is skipped and the rest applied.
TEST_F(Netlink, SkipUnsupportedKeepsTheRest) {
  nl->set_errors[ETHTOOL_MSG_COALESCE_SET] = failure("kernel: Operation not supported", EOPNOTSUPP);
  NicPlan plan;
  plan.changes = {{"eth0", "coalesce.rx-usecs", "8", "50", ""}, {"eth0", "rings.rx", "512", "4096", ""}};
  NicOptions o;
  o.skip_unsupported = true;
  auto r = nic_commit(plan, *backend, o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->applied.size(), 1U);
  EXPECT_EQ(r->applied[0].key, "rings.rx");
  ASSERT_EQ(r->skipped.size(), 1U);
  EXPECT_EQ(r->skipped[0].key, "coalesce.rx-usecs");
  EXPECT_EQ(nl->sent.size(), 2U);
}

TEST_F(Netlink, SysfsGroupsWriteTheirFiles) {
  fake.set("/proc/irq/42/smp_affinity_list", "0-7\n");
  fake.set("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0\n");
  ASSERT_TRUE(backend->set("eth0", "irq", {{"irq.42", "2-3"}}));
  ASSERT_TRUE(backend->set("eth0", "rps", {{"rps.rx-0.cpus", "f"}}));
  EXPECT_EQ(fake.get("/proc/irq/42/smp_affinity_list"), "2-3");
  EXPECT_EQ(fake.get("/sys/class/net/eth0/queues/rx-0/rps_cpus"), "f");
  EXPECT_TRUE(nl->sent.empty());
}

TEST_F(Netlink, NodeCpusLeaveOutFeedersAndReportMalformedCpulists) {
  auto t = std::make_unique<FakeTransport>();
  auto be = make_live_nic_backend(fake.root(), {2, 3}, std::move(t));
  fake.set("/sys/devices/system/node/node0/cpulist", "0-5\n");
  auto c = be->node_cpus(0);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(*c, (std::vector<unsigned>{0, 1, 4, 5}));

  fake.set("/sys/devices/system/node/node0/cpulist", "0-3,x\n");
  c = be->node_cpus(0);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, Errc::input);
  EXPECT_NE(c.error().message.find("/sys/devices/system/node/node0/cpulist: invalid cpulist '0-3,x'"),
            std::string::npos)
      << c.error().message;
}

TEST_F(Netlink, ProbeReadsRpsMasksAndReportsMalformedOnes) {
  backend->limit_probe({"rps"});
  fake.set("/sys/class/net/eth0/queues/rx-0/rps_cpus", "00000000,00000001,000000f0\n");
  auto d = backend->probe("eth0");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->current.at("rps.rx-0.cpus"), "1,000000f0");

  fake.set("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0g\n");
  d = backend->probe("eth0");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, Errc::input);
  EXPECT_NE(d.error().message.find("/sys/class/net/eth0/queues/rx-0/rps_cpus: invalid cpumask"), std::string::npos)
      << d.error().message;
}

TEST_F(Netlink, IrqbalanceBanWritesACpulist) {
  fake.set("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "4242\n");
  fake.set("/proc/4242/comm", "irqbalance\n");
  fake.set("/etc/default/irqbalance", "OTHER=1\nIRQBALANCE_BANNED_CPULIST=7\n");
  auto r = backend->irqbalance("ban", {8, 0, 1, 2, 3}, {42, 43});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(fake.get("/etc/default/irqbalance"), "OTHER=1\n# written by mltunectl nic apply\n"
                                                 "IRQBALANCE_BANNED_CPULIST=0-3,8\n"
                                                 "IRQBALANCE_ARGS=\"--banirq=42 --banirq=43\"\n");
}

TEST(NicFeederCpus, AbsentValidAndMalformed) {
  FakeSysroot fake;
  auto none = nic_feeder_cpus(fake.root());
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());

  fake.set("/sys/kernel/mltune/feeder/cpus", "2-3,8\n");
  auto cpus = nic_feeder_cpus(fake.root());
  ASSERT_TRUE(cpus) << cpus.error().message;
  EXPECT_EQ(*cpus, (std::vector<unsigned>{2, 3, 8}));

  fake.set("/sys/kernel/mltune/feeder/cpus", "2-\n");
  cpus = nic_feeder_cpus(fake.root());
  ASSERT_FALSE(cpus);
  EXPECT_EQ(cpus.error().kind, Errc::input);
  EXPECT_NE(cpus.error().message.find("/sys/kernel/mltune/feeder/cpus: invalid cpulist '2-'"), std::string::npos)
      << cpus.error().message;
}

} // namespace
