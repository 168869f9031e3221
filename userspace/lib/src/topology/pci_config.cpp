#include "mltune/pci.hpp"

#include "mltune/parse.hpp"

#include <array>
#include <cstdio>
#include <utility>

namespace mltune {

namespace {

// Offsets and fields of include/uapi/linux/pci_regs.h.
constexpr size_t k_status = 0x06;
constexpr std::uint16_t k_status_cap_list = 0x10;
constexpr size_t k_header_type = 0x0e;
constexpr size_t k_cap_ptr = 0x34;
constexpr size_t k_cardbus_cap_ptr = 0x14;
constexpr std::uint8_t k_cap_id_exp = 0x10;
constexpr size_t k_exp_flags = 0x02;
constexpr size_t k_exp_devctl = 0x08;
constexpr size_t k_exp_lnkcap = 0x0c;
constexpr size_t k_exp_lnksta = 0x12;
constexpr size_t k_exp_end = 0x14;            // what this parser needs of the capability
constexpr size_t k_exp_lnkcap2 = 0x2c;        // version 2 capabilities only
constexpr std::uint32_t k_lnkcap2_sls = 0xfe; // Supported Link Speeds Vector, bits 1-7
constexpr std::uint16_t k_devctl_relax_en = 0x0010;
constexpr size_t k_ext_cap_start = 0x100;
constexpr size_t k_cfg_size = 0x1000;
constexpr std::uint16_t k_ext_cap_id_acs = 0x000d;
// Speed encodings of Link Capabilities / Link Status: index -> tenths of GT/s.
constexpr std::array<unsigned, 7> k_speed_code = {0, 25, 50, 80, 160, 320, 640};

class Bytes {
public:
  explicit Bytes(std::string_view b) : b_(b) {}
  [[nodiscard]] size_t size() const { return b_.size(); }
  [[nodiscard]] bool has(size_t off, size_t n) const { return off + n <= b_.size(); }
  [[nodiscard]] std::uint8_t u8(size_t off) const { return static_cast<std::uint8_t>(b_[off]); }
  [[nodiscard]] std::uint16_t u16(size_t off) const {
    return static_cast<std::uint16_t>(u8(off) | (static_cast<unsigned>(u8(off + 1)) << 8U));
  }
  [[nodiscard]] std::uint32_t u32(size_t off) const {
    return static_cast<std::uint32_t>(u16(off)) | (static_cast<std::uint32_t>(u16(off + 2)) << 16U);
  }

private:
  std::string_view b_;
};

unsigned speed_of(unsigned code) {
  return code < k_speed_code.size() ? k_speed_code[code] : 0;
}

PciePortType port_type(unsigned code) {
  switch (code) {
  case 0x0: return PciePortType::endpoint;
  case 0x1: return PciePortType::legacy_endpoint;
  case 0x4: return PciePortType::root_port;
  case 0x5: return PciePortType::switch_upstream;
  case 0x6: return PciePortType::switch_downstream;
  case 0x7: return PciePortType::pcie_to_pci;
  case 0x8: return PciePortType::pci_to_pcie;
  case 0x9: return PciePortType::rc_endpoint;
  case 0xa: return PciePortType::rc_event_collector;
  default: return PciePortType::unknown;
  }
}

// The largest speed the link supports, as the kernel's max_link_speed shows
// it (pcie_get_supported_speeds(), 6.13 and later): the highest speed of
// Link Capabilities 2's Supported Link Speeds Vector not above Link
// Capabilities' Max Link Speed; without that vector (a version 1
// capability, or a function before PCIe 3.0), Max Link Speed where it is
// 2.5 or 5.0 GT/s, the only two it could name then. 0: unknown, as the
// kernel's "Unknown". (Kernels before 6.13 ignore Max Link Speed where the
// vector is set; the two differ only on functions whose registers disagree.)
unsigned max_link_speed(const Bytes &b, size_t p, std::uint16_t flags, std::uint32_t lnkcap) {
  const unsigned sls = lnkcap & 0xfU;
  std::uint32_t speeds = 0;
  if ((flags & 0xfU) >= 2 && b.has(p + k_exp_lnkcap2, 4)) {
    speeds = b.u32(p + k_exp_lnkcap2) & k_lnkcap2_sls & ((2U << sls) - 1U);
  }
  if (speeds == 0) {
    return sls == 1 || sls == 2 ? speed_of(sls) : 0;
  }
  unsigned top = 0;
  for (unsigned bit = 1; bit < 8; ++bit) {
    top = (speeds & (1U << bit)) != 0 ? bit : top;
  }
  return speed_of(top);
}

void parse_exp_cap(const Bytes &b, size_t p, PciConfig &c) {
  c.pcie = true;
  const std::uint16_t flags = b.u16(p + k_exp_flags);
  c.type = port_type((flags >> 4U) & 0xfU);
  const std::uint16_t devctl = b.u16(p + k_exp_devctl);
  c.relaxed_ordering = (devctl & k_devctl_relax_en) != 0;
  c.max_payload = 128U << ((devctl >> 5U) & 0x7U);
  c.max_read_req = 128U << ((devctl >> 12U) & 0x7U);
  if (c.max_payload > 4096) {
    c.max_payload = 0; // reserved encodings
  }
  if (c.max_read_req > 4096) {
    c.max_read_req = 0;
  }
  const std::uint32_t lnkcap = b.u32(p + k_exp_lnkcap);
  c.cap_speed = speed_of(lnkcap & 0xfU);
  c.cap_width = (lnkcap >> 4U) & 0x3fU;
  const std::uint16_t lnksta = b.u16(p + k_exp_lnksta);
  c.sta_speed = speed_of(lnksta & 0xfU);
  c.sta_width = (lnksta >> 4U) & 0x3fU;
  c.max_speed = max_link_speed(b, p, flags, lnkcap);
}

void parse_caps(const Bytes &b, PciConfig &c) {
  if (!b.has(k_cap_ptr, 1) || (b.u16(k_status) & k_status_cap_list) == 0) {
    c.caps_readable = b.size() >= 0x100; // readable, and there is no list
    return;
  }
  const bool cardbus = (b.u8(k_header_type) & 0x7fU) == 2;
  size_t p = b.u8(cardbus ? k_cardbus_cap_ptr : k_cap_ptr) & ~size_t{3};
  if (p == 0) {
    c.caps_readable = true;
    return;
  }
  if (!b.has(p, 2)) {
    return; // the list lies beyond what this reader may see
  }
  c.caps_readable = true;
  for (int guard = 0; p >= 0x40 && guard < 48; ++guard) { // 48: the most a 256-byte space holds
    if (!b.has(p, 2)) {
      return;
    }
    if (b.u8(p) == k_cap_id_exp && b.has(p, k_exp_end)) {
      parse_exp_cap(b, p, c);
    }
    p = b.u8(p + 1) & ~size_t{3};
  }
}

void parse_ext_caps(const Bytes &b, PciConfig &c) {
  if (!c.pcie || b.size() < k_cfg_size) {
    return;
  }
  c.ext_caps_readable = true;
  size_t p = k_ext_cap_start;
  for (int guard = 0; std::cmp_less(guard, (k_cfg_size - k_ext_cap_start) / 4); ++guard) {
    if (p < k_ext_cap_start || !b.has(p, 8)) {
      return;
    }
    const std::uint32_t h = b.u32(p);
    if (h == 0 || h == 0xffffffffU) {
      return;
    }
    if ((h & 0xffffU) == k_ext_cap_id_acs) {
      c.acs = true;
      c.acs_cap = b.u16(p + 4);
      c.acs_ctl = b.u16(p + 6);
    }
    const size_t next = (h >> 20U) & 0xffcU;
    if (next == 0) {
      return;
    }
    p = next;
  }
}

} // namespace

std::string_view to_string(PciePortType t) {
  switch (t) {
  case PciePortType::unknown: return "unknown";
  case PciePortType::endpoint: return "endpoint";
  case PciePortType::legacy_endpoint: return "legacy endpoint";
  case PciePortType::rc_endpoint: return "root complex integrated endpoint";
  case PciePortType::root_port: return "root port";
  case PciePortType::switch_upstream: return "switch upstream port";
  case PciePortType::switch_downstream: return "switch downstream port";
  case PciePortType::pcie_to_pci: return "PCIe-to-PCI bridge";
  case PciePortType::pci_to_pcie: return "PCI-to-PCIe bridge";
  case PciePortType::rc_event_collector: return "root complex event collector";
  }
  return "unknown";
}

std::optional<unsigned> parse_link_speed(std::string_view s) {
  s = trim(s);
  const auto gt = s.find(" GT/s");
  if (gt == std::string_view::npos || gt == 0) {
    return std::nullopt;
  }
  const std::string_view num = s.substr(0, gt);
  const auto dot = num.find('.');
  const auto whole = parse_int<unsigned>(num.substr(0, dot));
  if (!whole || *whole > 1000) {
    return std::nullopt;
  }
  unsigned tenths = 0;
  if (dot != std::string_view::npos) {
    const std::string_view frac = num.substr(dot + 1);
    const auto f = frac.size() == 1 ? parse_int<unsigned>(frac) : std::nullopt;
    if (!f) {
      return std::nullopt;
    }
    tenths = *f;
  }
  const unsigned v = *whole * 10 + tenths;
  return v > 0 ? std::optional<unsigned>(v) : std::nullopt;
}

std::string link_speed_str(unsigned tenths) {
  if (tenths == 0) {
    return "unknown";
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%u.%u GT/s", tenths / 10, tenths % 10);
  std::string s = buf;
  for (size_t gen = 1; gen < k_speed_code.size(); ++gen) {
    if (k_speed_code[gen] == tenths) {
      s += " (Gen" + std::to_string(gen) + ")";
    }
  }
  return s;
}

std::string link_str(unsigned width, unsigned speed) {
  if (width == 0 && speed == 0) {
    return "unknown";
  }
  return (width > 0 ? "x" + std::to_string(width) : std::string("x?")) + " " + link_speed_str(speed);
}

PciConfig parse_pci_config(std::string_view bytes) {
  PciConfig c;
  const Bytes b(bytes);
  parse_caps(b, c);
  parse_ext_caps(b, c);
  return c;
}

std::string acs_bits_str(std::uint16_t ctl) {
  static constexpr std::pair<std::uint16_t, std::string_view> k_names[] = {
      {k_acs_sv, "SV"}, {k_acs_tb, "TB"}, {k_acs_rr, "RR"}, {k_acs_cr, "CR"},
      {k_acs_uf, "UF"}, {k_acs_ec, "EC"}, {k_acs_dt, "DT"}};
  std::string s;
  for (const auto &[bit, name] : k_names) {
    if ((ctl & bit) != 0) {
      s += (s.empty() ? "" : " ") + std::string(name);
    }
  }
  return s.empty() ? "none" : s;
}

} // namespace mltune
