// The PCIe tree of the topology, the config-space reader, GPU-NIC pairing
// in the plan and launch-time binding (mltunectl exec), on the generated
// fixtures (tests/fixtures/gen_fixtures.py) and on this process itself.
#include "mltune/cpu_plan.hpp"
#include "mltune/launch.hpp"
#include "mltune/parse.hpp"
#include "mltune/pci.hpp"
#include "mltune/topology.hpp"

#include "cli.hpp"
#include "topology_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <fstream>
#include <functional>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace mltune;
using mltune::test::fixture;
using mltune::test::fixture_dir;
using mltune::test::FixtureCopy;
using json = nlohmann::json;

namespace {

std::string read_file(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct CliOut {
  int rc;
  std::string out, err;
};

CliOut cli_run(const std::string &sysroot, std::vector<std::string> args) {
  args.insert(args.begin(), {"--sysroot", fixture_dir(sysroot).string()});
  std::ostringstream o;
  std::ostringstream e;
  const int rc = cli::run(args, o, e);
  return {rc, o.str(), e.str()};
}

const Gpu &gpu(const Topology &t, unsigned i) {
  return t.gpus.at(i);
}

const Nic &nic(const Topology &t, std::string_view name) {
  for (const auto &n : t.nics) {
    if (n.name == name) {
      return n;
    }
  }
  ADD_FAILURE() << "no NIC " << name;
  return t.nics.front();
}

} // namespace

TEST(PciConfig, LinkSpeedStrings) {
  EXPECT_EQ(parse_link_speed("16.0 GT/s PCIe\n"), 160U);
  EXPECT_EQ(parse_link_speed("2.5 GT/s PCIe"), 25U);
  EXPECT_EQ(parse_link_speed("8 GT/s"), 80U); // kernels before 5.x
  EXPECT_EQ(parse_link_speed("32.0 GT/s PCIe"), 320U);
  for (const auto *bad : {"Unknown", "", "16.0GT/s", "1.25 GT/s", "x GT/s", " GT/s", "0 GT/s", "-8 GT/s"}) {
    EXPECT_FALSE(parse_link_speed(bad)) << bad;
  }
  EXPECT_EQ(link_speed_str(320), "32.0 GT/s (Gen5)");
  EXPECT_EQ(link_speed_str(0), "unknown");
  EXPECT_EQ(link_str(8, 160), "x8 16.0 GT/s (Gen4)");
  EXPECT_EQ(acs_bits_str(0x1d), "SV RR CR UF");
  EXPECT_EQ(acs_bits_str(0), "none");
}

TEST(PciConfig, ParsesTheFixturesConfigSpace) {
  const auto dir = fixture_dir("hgx-2s-8gpu") / "sys/bus/pci/devices";
  const PciConfig gpu0 = parse_pci_config(read_file(dir / "0000:18:00.0/config"));
  EXPECT_TRUE(gpu0.caps_readable);
  EXPECT_TRUE(gpu0.ext_caps_readable);
  EXPECT_TRUE(gpu0.pcie);
  EXPECT_EQ(gpu0.type, PciePortType::endpoint);
  EXPECT_EQ(gpu0.max_read_req, 512U);
  EXPECT_EQ(gpu0.max_payload, 256U);
  EXPECT_EQ(gpu0.relaxed_ordering, true);
  EXPECT_EQ(gpu0.cap_speed, 320U);
  EXPECT_EQ(gpu0.sta_width, 16U);
  EXPECT_FALSE(gpu0.acs);
  const PciConfig down = parse_pci_config(read_file(dir / "0000:17:00.0/config"));
  EXPECT_EQ(down.type, PciePortType::switch_downstream);
  EXPECT_TRUE(down.acs);
  EXPECT_EQ(down.acs_cap, 0x5f);
  EXPECT_EQ(down.acs_ctl, 0);
  EXPECT_EQ(parse_pci_config(read_file(dir / "0000:15:01.0/config")).acs_ctl, 0x1d);
  EXPECT_EQ(parse_pci_config(read_file(dir / "0000:16:00.0/config")).type, PciePortType::switch_upstream);
}

// max_link_speed as the kernel computes it (pcie_get_supported_speeds()):
// the fixture's GPU has PCI Express capability version 2 at 0x60, Link
// Capabilities at 0x6c, Link Capabilities 2 at 0x8c.
TEST(PciConfig, MaxSpeedFollowsTheKernelsRule) {
  const std::string gpu = read_file(fixture_dir("hgx-2s-8gpu") / "sys/bus/pci/devices/0000:18:00.0/config");
  auto with = [&](unsigned lnkcap_sls, std::uint8_t lnkcap2_sls, unsigned version) {
    std::string b = gpu;
    b[0x62] = static_cast<char>((static_cast<unsigned char>(b[0x62]) & 0xf0U) | version);
    b[0x6c] = static_cast<char>((static_cast<unsigned char>(b[0x6c]) & 0xf0U) | lnkcap_sls);
    b[0x8c] = static_cast<char>(lnkcap2_sls);
    return parse_pci_config(b).max_speed;
  };
  EXPECT_EQ(parse_pci_config(gpu).max_speed, 320U);
  EXPECT_EQ(with(5, 0x3e, 2), 320U); // 2.5-32 GT/s supported, Max Link Speed 32
  EXPECT_EQ(with(4, 0x3e, 2), 160U); // the vector's speeds above Max Link Speed do not count
  EXPECT_EQ(with(1, 0x0e, 2), 25U);  // as on a Thunderbolt controller that says 8 but means 2.5
  EXPECT_EQ(with(6, 0x7e, 2), 640U);
  EXPECT_EQ(with(2, 0x00, 2), 50U); // no vector (before PCIe 3.0): Max Link Speed 5.0
  EXPECT_EQ(with(1, 0x00, 2), 25U);
  EXPECT_EQ(with(3, 0x00, 2), 0U); // no vector and 8 GT/s: the kernel's "Unknown"
  EXPECT_EQ(with(3, 0x0e, 1), 0U); // a version 1 capability has no Link Capabilities 2
  EXPECT_EQ(with(2, 0x0e, 1), 50U);
  // 64 bytes, as a reader without CAP_SYS_ADMIN sees: unknown.
  EXPECT_EQ(parse_pci_config(gpu.substr(0, 64)).max_speed, 0U);
}

TEST(PciConfig, PartialOrHostileBytesAreLeftUnknown) {
  const std::string full = read_file(fixture_dir("hgx-2s-8gpu") / "sys/bus/pci/devices/0000:17:00.0/config");
  // What a reader without CAP_SYS_ADMIN gets: the 64-byte header.
  const PciConfig user = parse_pci_config(full.substr(0, 64));
  EXPECT_FALSE(user.caps_readable);
  EXPECT_FALSE(user.pcie);
  EXPECT_FALSE(user.acs);
  // 256 bytes: capabilities, no extended ones.
  const PciConfig conventional = parse_pci_config(full.substr(0, 256));
  EXPECT_TRUE(conventional.pcie);
  EXPECT_FALSE(conventional.ext_caps_readable);
  EXPECT_FALSE(conventional.acs);
  // A capability list and an extended list that point at themselves end.
  std::string loop = full;
  loop[0x51] = 0x50;                     // MSI -> MSI
  loop[0x102] = static_cast<char>(0x01); // AER -> 0x100: next = 0x100
  loop[0x103] = static_cast<char>(0x10);
  const PciConfig l = parse_pci_config(loop);
  EXPECT_FALSE(l.pcie);
  EXPECT_FALSE(l.acs);
  EXPECT_FALSE(parse_pci_config(std::string(4096, '\xff')).pcie);
  EXPECT_FALSE(parse_pci_config("").caps_readable);
  EXPECT_FALSE(parse_pci_config(std::string(0x40, '\0') + "\x10").pcie);
}

TEST(PciTree, SwitchPerGpuNicPairOnTheEightGpuServer) {
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  EXPECT_TRUE(t.warnings.empty());
  EXPECT_TRUE(t.iommu_groups);
  const auto &g0 = gpu(t, 0);
  EXPECT_EQ(g0.pci.host_bridge, "pci0000:15");
  EXPECT_EQ(g0.pci.path, (std::vector<std::string>{"0000:15:01.0", "0000:16:00.0", "0000:17:00.0"}));
  const PciNode *rp = t.pci_node("0000:15:01.0");
  ASSERT_NE(rp, nullptr);
  EXPECT_EQ(rp->type, PciePortType::root_port);
  EXPECT_TRUE(rp->type_from_config);
  EXPECT_EQ(t.pci_node("0000:16:00.0")->type, PciePortType::switch_upstream);
  const PciNode *g = t.pci_node("0000:18:00.0");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->device, "GPU 0");
  EXPECT_EQ(g->parent, "0000:17:00.0");
  EXPECT_EQ(g->link.current_speed, 320U);
  EXPECT_EQ(g->link.max_width, 16U);
  EXPECT_EQ(g->iommu_type, "identity");
  EXPECT_GE(g->iommu_group, 0);
  const Nic &n0 = nic(t, "enp25s0np0");
  EXPECT_EQ(n0.ib_device, "mlx5_0");
  EXPECT_EQ(n0.ib_port, 1U);
  EXPECT_EQ(t.pci_node(n0.pci.address)->slot, "1");
  // GPUs, NICs, NVMe and their ports: 8 x (root, up, 2 down, GPU, NIC) + 2 x (root, NVMe).
  EXPECT_EQ(t.pci.size(), 8U * 6 + 2 * 2);
  EXPECT_EQ(t.pci_node("0000:99:99.9"), nullptr);
}

// The tree reads each function's config space sparsely (the first 256
// bytes, then only the header words of the extended capabilities on the
// chain): what it parses equals the parse of the whole 4096 bytes, for
// every function of the fixture (ports with and without ACS, GPUs, NICs).
TEST(PciTree, SparseConfigReadParsesAsTheWholeSpace) {
  const auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  size_t with_acs = 0;
  size_t compared = 0;
  for (const PciNode &n : t.pci) {
    const auto path = fixture_dir("hgx-2s-8gpu") / ("sys/bus/pci/devices/" + n.address + "/config");
    if (!std::filesystem::exists(path)) {
      continue;
    }
    const PciConfig whole = parse_pci_config(read_file(path));
    const PciConfig &c = n.config;
    ++compared;
    with_acs += whole.acs ? 1 : 0;
    EXPECT_EQ(c.caps_readable, whole.caps_readable) << n.address;
    EXPECT_EQ(c.ext_caps_readable, whole.ext_caps_readable) << n.address;
    EXPECT_EQ(c.pcie, whole.pcie) << n.address;
    EXPECT_EQ(c.type, whole.type) << n.address;
    EXPECT_EQ(c.max_payload, whole.max_payload) << n.address;
    EXPECT_EQ(c.max_read_req, whole.max_read_req) << n.address;
    EXPECT_EQ(c.relaxed_ordering, whole.relaxed_ordering) << n.address;
    EXPECT_EQ(c.cap_speed, whole.cap_speed) << n.address;
    EXPECT_EQ(c.max_speed, whole.max_speed) << n.address;
    EXPECT_EQ(c.sta_width, whole.sta_width) << n.address;
    EXPECT_EQ(c.acs, whole.acs) << n.address;
    EXPECT_EQ(c.acs_cap, whole.acs_cap) << n.address;
    EXPECT_EQ(c.acs_ctl, whole.acs_ctl) << n.address;
  }
  EXPECT_EQ(compared, t.pci.size());
  EXPECT_GT(with_acs, 0U) << "the fixture has ACS capabilities to find";
}

// The largest link speed comes from the registers where they name one, and
// from sysfs's max_link_speed where they do not. (The class the tree shows
// is checked here for its value only: the GPU search and the tree would
// read the same file.)
TEST(PciTree, MaxSpeedFromRegistersElseSysfs) {
  FixtureCopy c("hgx-2s-8gpu");
  const std::string gpu = "/sys/bus/pci/devices/0000:18:00.0";
  const std::string nic = "/sys/bus/pci/devices/0000:19:00.0";
  c.set(gpu + "/max_link_speed", "8.0 GT/s PCIe\n"); // not read: the registers say 32
  c.set(nic + "/max_link_speed", "16.0 GT/s PCIe\n");
  {
    // NIC 0 with Max Link Speed 8 GT/s and no Link Capabilities 2: the
    // registers name no speed.
    std::fstream f(c.root().path(nic + "/config"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0x6c); // Link Capabilities' low byte: Max Link Speed 3, width bits 0 (x16 is 0x100)
    f.put(0x03);
    f.seekp(0x8c);
    f.put('\0');
    ASSERT_TRUE(f);
  }
  const auto t = discover_topology(c.root()).value();
  EXPECT_EQ(t.pci_node("0000:18:00.0")->link.max_speed, 320U);
  EXPECT_EQ(t.pci_node("0000:19:00.0")->link.max_speed, 160U);
  EXPECT_EQ(t.pci_node("0000:18:00.0")->pci_class, "0x030200");
  EXPECT_EQ(t.pci_node("0000:17:00.0")->pci_class, "0x060400");
}

TEST(PciTree, RolesAreInferredWithoutConfigSpace) {
  FixtureCopy c("hgx-2s-8gpu");
  for (const auto *a : {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"}) {
    c.remove(std::string("/sys/bus/pci/devices/") + a + "/config");
  }
  auto t = discover_topology(c.root()).value();
  EXPECT_EQ(t.pci_node("0000:15:01.0")->type, PciePortType::root_port);
  EXPECT_FALSE(t.pci_node("0000:15:01.0")->type_from_config);
  EXPECT_EQ(t.pci_node("0000:16:00.0")->type, PciePortType::switch_upstream);
  EXPECT_EQ(t.pci_node("0000:17:00.0")->type, PciePortType::switch_downstream);
  EXPECT_EQ(t.pci_node("0000:18:00.0")->type, PciePortType::endpoint);
  EXPECT_EQ(t.pci_node("0000:18:00.0")->link.current_width, 16U); // sysfs still has the link
}

TEST(PciTree, DistancesNearestFirst) {
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  EXPECT_EQ(pci_distance(t, gpu(t, 0).pci, nic(t, "enp25s0np0").pci), PciDistance::same_switch);
  EXPECT_EQ(pci_distance(t, gpu(t, 0).pci, nic(t, "enp43s0np0").pci), PciDistance::same_node);
  EXPECT_EQ(pci_distance(t, gpu(t, 0).pci, nic(t, "enp155s0np0").pci), PciDistance::cross_node);
  auto q = discover_topology(fixture("guest-q35")).value();
  // The VGA stand-in and virtio-net hang below two root ports of one expander bridge.
  EXPECT_EQ(pci_distance(q, gpu(q, 0).pci, nic(q, "eth1").pci), PciDistance::same_host_bridge);
  EXPECT_EQ(to_string(PciDistance::same_switch), "switch");
  EXPECT_EQ(to_string(PciDistance::cross_node), "system");
}

// Acceptance: plan --json on the 8-GPU fixture pairs every GPU with the NIC
// below its PCIe switch, and each rank's environment and launch line use it.
TEST(GpuNicPairing, EveryGpuGetsTheNicBelowItsSwitch) {
  const auto r = cli_run("hgx-2s-8gpu", {"--json", "plan"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  ASSERT_EQ(j["gpus"].size(), 8U);
  for (unsigned i = 0; i < 8; ++i) {
    const json &g = j["gpus"][i];
    const std::string hca = "mlx5_" + std::to_string(i);
    EXPECT_EQ(g["nic"]["ib_device"], hca);
    EXPECT_EQ(g["nic"]["distance"], "switch");
    // The NIC really is below the GPU's switch upstream port.
    const PciNode *n = t.pci_node(g["nic"]["pci"].get<std::string>());
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(t.pci_node(n->parent)->parent, gpu(t, i).pci.path.at(1));
    const json &rank = j["ranks"][i];
    EXPECT_EQ(rank["env"]["NCCL_IB_HCA"], "=" + hca + ":1");
    EXPECT_EQ(rank["env"]["UCX_NET_DEVICES"], hca + ":1");
    EXPECT_FALSE(rank["env"].contains("NCCL_SOCKET_IFNAME"));
    EXPECT_NE(rank["launch"].get<std::string>().find("NCCL_IB_HCA==" + hca + ":1"), std::string::npos);
  }
}

TEST(GpuNicPairing, NicsSharedOutAndFarOnesWarned) {
  auto t = discover_topology(fixture("epyc-nps4-4gpu")).value();
  const auto pairs = pair_gpus_with_nics(t);
  ASSERT_EQ(pairs.size(), 4U);
  EXPECT_EQ(pairs[1].nic, "enp33s0f0np0"); // node 1's NIC for node 1's GPU
  EXPECT_EQ(pairs[1].nic_distance, PciDistance::same_node);
  EXPECT_EQ(pairs[3].nic, "enp97s0f0np0");
  EXPECT_EQ(pairs[0].nic_distance, PciDistance::cross_node);
  EXPECT_NE(pairs[0].nic, pairs[2].nic); // the far GPUs are shared out over both NICs
  auto p = make_cpu_plan(t).value();
  unsigned warned = 0;
  for (const auto &w : p.warnings) {
    warned += w.find("no NIC on its NUMA node") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(warned, 2U);
  // A NIC without RDMA is named for the socket transport.
  const auto r = cli_run("guest-q35", {"--json", "plan"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["gpus"][0]["nic"]["name"], "eth1");
  EXPECT_EQ(j["ranks"][0]["env"]["NCCL_SOCKET_IFNAME"], "=eth1");
  EXPECT_EQ(j["ranks"][0]["env"]["UCX_NET_DEVICES"], "eth1");
  EXPECT_FALSE(j["ranks"][0]["env"].contains("NCCL_IB_HCA"));
  EXPECT_TRUE(pair_gpus_with_nics(discover_topology(fixture("vm-2cpu")).value()).empty());
}

TEST(TopologyCli, ShowsThePcieTree) {
  auto r = cli_run("hgx-2s-8gpu", {"topology"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("PCIe tree"), std::string::npos);
  EXPECT_NE(r.out.find("0000:17:00.0 switch downstream port, x16 32.0 GT/s (Gen5), ACS none"), std::string::npos);
  EXPECT_NE(r.out.find("0000:18:00.0 GPU 0, x16 32.0 GT/s (Gen5)"), std::string::npos);
  r = cli_run("hgx-2s-8gpu", {"--json", "topology"});
  ASSERT_EQ(r.rc, 0);
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["iommu_groups"]);
  EXPECT_EQ(j["gpus"][0]["pcie_path"].size(), 3U);
  EXPECT_EQ(j["nics"][0]["ib_device"].get<std::string>().substr(0, 5), "mlx5_");
  bool saw_switch = false;
  for (const auto &n : j["pcie"]) {
    if (n["pci"] == "0000:16:00.0") {
      saw_switch = true;
      EXPECT_EQ(n["type"], "switch upstream port");
      EXPECT_EQ(n["link"]["current_gts"], 32.0);
      EXPECT_EQ(n["link"]["current_width"], 16);
    }
    if (n["pci"] == "0000:17:00.0") {
      EXPECT_EQ(n["acs"]["control"], "0x0000");
      EXPECT_EQ(n["acs"]["p2p_redirect"], false);
    }
  }
  EXPECT_TRUE(saw_switch);
}

TEST(Exec, DryRunShowsThePlacementOfTheGpusRank) {
  auto r = cli_run("hgx-2s-8gpu", {"--dry-run", "--json", "exec", "--gpu", "5", "--", "python3", "train.py"});
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["rank"], 5);
  EXPECT_EQ(j["cpus"], "52-53,148-149");
  EXPECT_EQ(j["nodes"], json::array({1}));
  EXPECT_EQ(j["mempolicy"], "bind");
  EXPECT_EQ(j["env"]["CUDA_VISIBLE_DEVICES"], "5");
  EXPECT_EQ(j["env"]["NCCL_IB_HCA"], "=mlx5_5:1");
  EXPECT_EQ(j["env"]["MLTUNE_DATALOADER_WORKERS"], "9");
  EXPECT_EQ(j["command"], json::array({"python3", "train.py"}));
  // Two GPUs per rank: GPU 3 is rank 1's second GPU; both NICs are named.
  r = cli_run("hgx-2s-8gpu", {"--dry-run", "--json", "exec", "--gpus-per-rank", "2", "--gpu", "3", "--rank", "1",
                              "--mempolicy", "preferred", "--", "x"});
  ASSERT_EQ(r.rc, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["gpus"], json::array({2, 3}));
  EXPECT_EQ(j["env"]["NCCL_IB_HCA"], "=mlx5_2:1,mlx5_3:1");
  EXPECT_EQ(j["mempolicy"], "preferred");
  r = cli_run("hgx-2s-8gpu", {"--dry-run", "exec", "--gpu", "0", "--", "true"});
  EXPECT_NE(r.out.find("CPU affinity:  2-3,98-99"), std::string::npos) << r.out;
}

TEST(Exec, BadRequestsExit2AndNoRankExits1) {
  for (const auto &args : std::vector<std::vector<std::string>>{
           {"exec", "--gpu", "8", "--", "true"},
           {"exec", "--rank", "8", "--", "true"},
           {"exec", "--gpu", "5", "--rank", "4", "--", "true"},
           {"exec", "--", "true"},
           {"exec", "--gpu", "0", "--mempolicy", "interleave", "--", "true"},
           {"exec", "--gpu", "0"},
           {"exec", "--gpu", "zero", "--", "true"},
       }) {
    const auto r = cli_run("hgx-2s-8gpu", args);
    EXPECT_EQ(r.rc, 2) << args[1] << " " << args[2] << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
  const auto r = cli_run("vm-2cpu", {"exec", "--gpu", "0", "--", "true"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("the plan places no rank"), std::string::npos) << r.err;
}

// Runs `body` in a child with its stdout on a pipe; the exit status and output.
std::pair<int, std::string> in_child(const std::function<int()> &body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    return {-1, ""};
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::_exit(body());
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// exec_launch on this process (in a child): the command starts with the
// spec's affinity, memory policy and environment.
TEST(Exec, TheCommandStartsPlaced) {
  LaunchSpec s;
  s.cpus = CpuSet{0};
  s.nodes = {0};
  s.mempolicy = MemPolicy::bind;
  s.env = {{"MLTUNE_TEST_PLACED", "yes"}};
  const auto [rc, out] = in_child([&] {
    const Status st =
        exec_launch(s, {"/bin/sh", "-c",
                        "sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status; echo $MLTUNE_TEST_PLACED; "
                        "grep -c ' bind:0 ' /proc/self/numa_maps"});
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 99;
  });
  EXPECT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string cpus;
  std::string env;
  std::string bound;
  std::getline(lines, cpus);
  std::getline(lines, env);
  std::getline(lines, bound);
  EXPECT_EQ(cpus, "0");
  EXPECT_EQ(env, "yes");
  EXPECT_GT(parse_int<int>(bound).value_or(0), 0) << "no mapping with the bind:0 policy";
  // A command that cannot be found: the error keeps ENOENT (mltunectl exits 127).
  const auto missing = in_child([&] { return exec_launch(s, {"/nonexistent/cmd"}).error().sys_errno; });
  EXPECT_EQ(missing.first, ENOENT);
  // An affinity the machine cannot give fails before anything else happens.
  s.cpus = CpuSet{k_max_cpus - 1};
  const auto no_cpu = in_child([&] {
    const Status st = exec_launch(s, {"/bin/true"});
    return st.error().message.find("sched_setaffinity(CPUs 8191)") != std::string::npos ? 3 : 4;
  });
  EXPECT_EQ(no_cpu.first, 3);
}

// Discovery without the PCIe tree's state (plan, exec, recommend) keeps the
// tree's shape and port types and so the plan: on every fixture the plan is
// the one full discovery gives, and none of the state was read.
TEST(PciTree, ShapeOnlyDiscoveryKeepsTheTreeAndThePlan) {
  for (const auto name : mltune::test::k_fixtures) {
    SCOPED_TRACE(name);
    const Topology full = discover_topology(fixture(name)).value();
    const Topology shape = discover_topology(fixture(name), {.pcie_state = false}).value();
    ASSERT_EQ(shape.pci.size(), full.pci.size());
    for (size_t i = 0; i < full.pci.size(); ++i) {
      const PciNode &a = full.pci[i];
      const PciNode &b = shape.pci[i];
      SCOPED_TRACE(a.address);
      EXPECT_EQ(b.address, a.address);
      EXPECT_EQ(b.parent, a.parent);
      EXPECT_EQ(b.host_bridge, a.host_bridge);
      EXPECT_EQ(b.pci_class, a.pci_class);
      EXPECT_EQ(b.device, a.device);
      EXPECT_EQ(b.type, a.type); // inferred from the shape, read from config space
      EXPECT_FALSE(b.type_from_config);
      EXPECT_FALSE(b.config.pcie);
      EXPECT_EQ(b.link.max_speed, 0U);
      EXPECT_EQ(b.iommu_group, -1);
      EXPECT_TRUE(b.slot.empty());
      if (a.device.empty()) {
        EXPECT_EQ(b.numa_node, -1); // a bridge's node is not read
      } else {
        EXPECT_EQ(b.numa_node, a.numa_node);
      }
    }
    EXPECT_FALSE(shape.iommu_groups);
    const CpuPlan pa = make_cpu_plan(full).value();
    const CpuPlan pb = make_cpu_plan(shape).value();
    EXPECT_EQ(pb.housekeeping, pa.housekeeping);
    EXPECT_EQ(pb.feeder, pa.feeder);
    EXPECT_EQ(pb.reasons, pa.reasons);
    ASSERT_EQ(pb.gpus.size(), pa.gpus.size());
    for (size_t g = 0; g < pa.gpus.size(); ++g) {
      EXPECT_EQ(pb.gpus[g].nic, pa.gpus[g].nic);
      EXPECT_EQ(pb.gpus[g].nic_distance, pa.gpus[g].nic_distance);
    }
  }
}
