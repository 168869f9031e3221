// PCIe findings of audit() on the generated fixtures: the planted faults of
// hgx-2s-8gpu-faults, the clean hgx-2s-8gpu, and variations made on copies.
#include "mltune/audit.hpp"
#include "mltune/topology.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>

using namespace mltune;
using mltune::test::fixture;
using mltune::test::FixtureCopy;

namespace {

// Sets bits `mask` of the 16-bit register at `off` of a fixture function's
// config space to `value` (the generator puts the PCI Express capability at
// 0x60: Link Capabilities at 0x6c, Link Status at 0x72).
void set_config_bits(const FixtureCopy &c, const std::string &addr, size_t off, std::uint16_t mask,
                     std::uint16_t value) {
  const auto path = c.root().path("/sys/bus/pci/devices/" + addr + "/config");
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  std::array<unsigned char, 2> b{};
  f.seekg(static_cast<std::streamoff>(off));
  f.read(reinterpret_cast<char *>(b.data()), 2); // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  const auto v = static_cast<std::uint16_t>(((b[0] | (b[1] << 8U)) & ~mask) | (value & mask));
  b = {static_cast<unsigned char>(v & 0xffU), static_cast<unsigned char>(v >> 8U)};
  f.seekp(static_cast<std::streamoff>(off));
  f.write(reinterpret_cast<const char *>(b.data()), 2); // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  ASSERT_TRUE(f) << path;
}

constexpr size_t k_lnkcap = 0x6c;
constexpr size_t k_lnksta = 0x72;
constexpr std::uint16_t k_speed = 0x000f;
constexpr std::uint16_t k_width = 0x03f0;

AuditOptions no_driver() {
  AuditOptions o;
  o.run_nvidia_smi = false;
  o.nvml_library = "none";
  return o;
}

std::vector<Finding> pcie_findings(const Sysroot &root) {
  const Profile training = *ProfileLoader().load("training");
  std::vector<Finding> out;
  for (auto &f : audit(training, root, no_driver())) {
    if (f.category == "pcie") {
      out.push_back(std::move(f));
    }
  }
  return out;
}

// id -> severity of every PCIe finding above ok.
std::map<std::string, Severity> flagged(const std::vector<Finding> &fs) {
  std::map<std::string, Severity> m;
  for (const auto &f : fs) {
    if (f.severity != Severity::ok) {
      EXPECT_TRUE(m.emplace(f.id, f.severity).second) << "reported twice: " << f.id;
    }
  }
  return m;
}

const Finding *find(const std::vector<Finding> &fs, std::string_view id) {
  for (const auto &f : fs) {
    if (f.id == id) {
      return &f;
    }
  }
  return nullptr;
}

} // namespace

// Acceptance: every planted fault is reported once, naming the device by its
// PCI address; nothing else is flagged.
TEST(PcieAudit, PlantedFaultsReportedOnceByAddress) {
  const auto fs = pcie_findings(fixture("hgx-2s-8gpu-faults"));
  const std::map<std::string, Severity> want = {
      {"pcie:link-width:0000:3a:00.0", Severity::critical}, // GPU 2 at x8 of x16
      {"pcie:link-speed:0000:9b:00.0", Severity::warning},  // NIC 4 at Gen3 of Gen5
      {"pcie:acs:0000:aa:00.0", Severity::warning},         // switch port above GPU 5
      {"pcie:iommu:0000:ba:00.0", Severity::warning},       // GPU 6 translated
      {"pcie:numa_node:0000:dc:00.0", Severity::warning},   // NIC 7 without a node
      {"pcie:maxreadreq:0000:19:00.0", Severity::info},     // NIC 0 at 512 bytes
  };
  EXPECT_EQ(flagged(fs), want);
  for (const auto &[id, sev] : want) {
    const Finding *f = find(fs, id);
    ASSERT_NE(f, nullptr) << id;
    const std::string addr = id.substr(id.rfind(':') - 7);
    EXPECT_NE(f->current.find(addr), std::string::npos) << id << ": " << f->current;
    EXPECT_FALSE(f->impact.empty()) << id;
    EXPECT_FALSE(f->fix.empty()) << id;
  }
  EXPECT_NE(find(fs, "pcie:link-width:0000:3a:00.0")->current.find("x8 32.0 GT/s"), std::string::npos);
  EXPECT_NE(find(fs, "pcie:acs:0000:aa:00.0")->current.find("GPU 5 (0000:ab:00.0)"), std::string::npos);
  EXPECT_NE(find(fs, "pcie:acs:0000:aa:00.0")->fix.find("setpci -s 0000:aa:00.0 ECAP_ACS+0x6.w=0000"),
            std::string::npos);
  EXPECT_NE(find(fs, "pcie:iommu:0000:ba:00.0")->fix.find("iommu=pt"), std::string::npos);
  // NIC 7's root port knows its node: the fix names it.
  EXPECT_NE(find(fs, "pcie:numa_node:0000:dc:00.0")->fix.find("echo 1 > /sys/bus/pci/devices/0000:dc:00.0/numa_node"),
            std::string::npos);
  EXPECT_NE(find(fs, "pcie:link-speed:0000:9b:00.0")->fix.find("physical slot 5"), std::string::npos);
}

TEST(PcieAudit, HealthyEightGpuServerIsNotFlagged) {
  const auto fs = pcie_findings(fixture("hgx-2s-8gpu"));
  EXPECT_TRUE(flagged(fs).empty());
  const auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  unsigned links = 0;
  for (const auto &n : t.pci) {
    if (!n.device.empty()) {
      const Finding *f = find(fs, "pcie:link:" + n.address);
      ASSERT_NE(f, nullptr) << n.address;
      EXPECT_EQ(f->severity, Severity::ok);
      ++links;
    }
  }
  EXPECT_EQ(links, 8U + 8 + 2);
  EXPECT_EQ(find(fs, "pcie:iommu")->current, "IOMMU in use: 16 GPU/NIC in identity domains, 0 translated");
  // Root ports keep Linux's ACS default (they are on no GPU-to-peer route);
  // the single-node workstation's numa_node -1 is no fault.
  EXPECT_TRUE(flagged(pcie_findings(fixture("workstation-1gpu"))).empty());
  EXPECT_TRUE(pcie_findings(fixture("vm-2cpu")).empty() || flagged(pcie_findings(fixture("vm-2cpu"))).empty());
}

TEST(PcieAudit, ConfigSpaceReadableOnlyByRoot) {
  FixtureCopy c("hgx-2s-8gpu-faults");
  for (const auto &e : std::filesystem::directory_iterator(c.root().path("/sys/bus/pci/devices"))) {
    const auto cfg = e.path() / "config";
    if (std::filesystem::exists(cfg)) {
      std::filesystem::resize_file(cfg, 64); // what a reader without CAP_SYS_ADMIN sees
    }
  }
  const auto m = flagged(pcie_findings(c.root()));
  EXPECT_EQ(m.count("pcie:acs:0000:aa:00.0"), 0U);
  EXPECT_EQ(m.count("pcie:maxreadreq:0000:19:00.0"), 0U);
  EXPECT_EQ(m.at("pcie:config-space"), Severity::info);
  EXPECT_EQ(m.at("pcie:link-width:0000:3a:00.0"), Severity::critical); // sysfs attributes need no root
}

TEST(PcieAudit, IdleGpuSpeedSlotLimitsAndUnknownLinks) {
  FixtureCopy c("hgx-2s-8gpu");
  // The link registers, which root reads in the config space (the sysfs
  // attributes show the same registers).
  // GPU 0 idles at 2.5 GT/s: reported, as information.
  set_config_bits(c, "0000:18:00.0", k_lnksta, k_speed, 1);
  // NIC 1's downstream port is wired x8: the slot caps it; the link at x8 is what it can be.
  set_config_bits(c, "0000:29:01.0", k_lnkcap, k_width, 8U << 4U);
  set_config_bits(c, "0000:2b:00.0", k_lnksta, k_width, 8U << 4U);
  // NIC 2 reports no link (a root complex integrated endpoint does so).
  set_config_bits(c, "0000:3b:00.0", k_lnksta, k_speed | k_width, 0);
  // NVMe 0 in a translated domain: not a GPU or NIC, not flagged.
  for (const auto &g : std::filesystem::directory_iterator(c.root().path("/sys/kernel/iommu_groups"))) {
    if (std::filesystem::exists(g.path() / "devices/0000:4a:00.0")) {
      c.set("/sys/kernel/iommu_groups/" + g.path().filename().string() + "/type", "DMA-FQ\n");
    }
  }
  const auto fs = pcie_findings(c.root());
  const std::map<std::string, Severity> want = {{"pcie:link-speed:0000:18:00.0", Severity::info},
                                                {"pcie:slot-limit:0000:2b:00.0", Severity::warning}};
  EXPECT_EQ(flagged(fs), want);
  EXPECT_NE(find(fs, "pcie:link-speed:0000:18:00.0")->impact.find("idle"), std::string::npos);
  EXPECT_EQ(find(fs, "pcie:link:0000:3b:00.0"), nullptr);
}
