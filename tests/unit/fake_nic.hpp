// An in-memory NicBackend for unit tests: two NICs modelled on the guests'
// e1000e and virtio-net, set() applying values unless a failure is injected.
#pragma once

#include "mltune/nic.hpp"

#include <cerrno>
#include <map>
#include <string>
#include <vector>

namespace mltune::test {

class FakeBackend : public NicBackend {
public:
  std::map<std::string, NicDevice> devs;
  std::map<std::string, std::string> globals{{"sysctl.net.core.rps_sock_flow_entries", "0"}};
  std::map<std::string, std::vector<unsigned>> node{{"0", {0, 1, 2, 3}}, {"1", {4, 5, 6, 7}}};
  std::string fail_dev, fail_group;
  int fail_errno = EINVAL;
  int sets = 0;

  Result<std::vector<std::string>> interfaces() override {
    std::vector<std::string> n;
    n.reserve(devs.size());
    for (const auto &[k, v] : devs) {
      n.push_back(k);
    }
    return n;
  }
  Result<NicDevice> probe(const std::string &ifname) override { return devs.at(ifname); }
  Status set(const std::string &ifname, const std::string &group, const NicValues &values) override {
    ++sets;
    if (ifname == fail_dev && group == fail_group) {
      return failure(ifname + ": " + group + ": kernel: cannot modify an unsupported parameter", fail_errno);
    }
    for (const auto &[k, v] : values) {
      if (ifname.empty()) {
        globals[k] = v;
      } else {
        devs.at(ifname).current[k] = v;
      }
    }
    return {};
  }
  Result<std::string> read_global(const std::string &key) override { return globals.at(key); }
  Result<std::vector<unsigned>> node_cpus(int n) override {
    if (n < 0) {
      return std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7};
    }
    return node.at(std::to_string(n));
  }
  int irqbalance_pid() override { return 0; }
  Result<std::string> irqbalance(const std::string &, const std::vector<unsigned> &,
                                 const std::vector<int> &) override {
    return std::string("ok");
  }
};

// A NicBackend that forwards to a FakeBackend the test keeps (a step owns its
// backend; the test still sees the devices).
class SharedBackend final : public NicBackend {
public:
  explicit SharedBackend(FakeBackend &b) : b_(b) {}
  Result<std::vector<std::string>> interfaces() override { return b_.interfaces(); }
  Result<NicDevice> probe(const std::string &ifname) override { return b_.probe(ifname); }
  Status set(const std::string &ifname, const std::string &group, const NicValues &values) override {
    return b_.set(ifname, group, values);
  }
  Result<std::string> read_global(const std::string &key) override { return b_.read_global(key); }
  Result<std::vector<unsigned>> node_cpus(int n) override { return b_.node_cpus(n); }
  int irqbalance_pid() override { return b_.irqbalance_pid(); }
  Result<std::string> irqbalance(const std::string &mode, const std::vector<unsigned> &banned,
                                 const std::vector<int> &irqs) override {
    return b_.irqbalance(mode, banned, irqs);
  }

private:
  FakeBackend &b_;
};

inline NicDevice e1000e() {
  NicDevice d;
  d.name = "eth0";
  d.driver = "e1000e";
  d.numa_node = -1;
  d.current = {{"rings.rx", "256"},
               {"rings.tx", "256"},
               {"coalesce.rx-usecs", "3"},
               {"features.rx-gro", "on"},
               {"features.rx-lro", "off"},
               {"features.tx-tcp-segmentation", "on"},
               {"features.tx-tcp6-segmentation", "on"},
               {"link.mtu", "1500"},
               {"irq.24", "0-7"},
               {"irq.25", "0-7"}};
  d.max = {{"rings.rx", 4096}, {"rings.tx", 4096}};
  d.fixed = {"features.rx-lro"};
  d.unsupported_groups = {"channels"};
  d.irqs = {24, 25};
  return d;
}

inline NicDevice virtio() {
  NicDevice d;
  d.name = "eth1";
  d.driver = "virtio_net";
  d.numa_node = 1;
  d.current = {{"rings.rx", "256"},        {"rings.tx", "256"},         {"channels.combined", "2"},
               {"coalesce.rx-usecs", "0"}, {"coalesce.rx-frames", "1"}, {"features.rx-gro", "on"},
               {"irq.30", "0-7"},          {"irq.31", "0-7"},           {"irq.32", "0-7"},
               {"rps.rx-0.cpus", "0"},     {"rps.rx-0.flow-cnt", "0"},  {"rps.rx-1.cpus", "0"},
               {"rps.rx-1.flow-cnt", "0"}};
  d.max = {{"rings.rx", 256}, {"rings.tx", 256}, {"channels.combined", 4}};
  d.unsupported_groups = {"pause"};
  d.irqs = {30, 31, 32};
  d.rx_queues = {"rx-0", "rx-1"};
  return d;
}

inline FakeBackend two_nics() {
  FakeBackend b;
  b.devs["eth0"] = e1000e();
  b.devs["eth1"] = virtio();
  return b;
}

} // namespace mltune::test
