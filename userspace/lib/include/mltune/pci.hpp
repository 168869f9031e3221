// PCI Express facts of one PCI function, as a live node shows them: the link
// attributes of sysfs (current_link_speed, current_link_width,
// max_link_speed, max_link_width) and what the function's configuration
// space says (the sysfs `config` file): its PCIe port type, MaxReadReq,
// MaxPayload, relaxed ordering and the Access Control Services registers.
//
// The kernel shows the first 64 bytes of `config` to readers without
// CAP_SYS_ADMIN: the capability lists need root.  parse_pci_config() says
// what it could see (caps_readable, ext_caps_readable) instead of guessing.
//
// Register layouts: PCI Express Base Specification, "PCI Express Capability
// Structure" (Device Control, Link Capabilities, Link Status) and "ACS
// Extended Capability"; the kernel's include/uapi/linux/pci_regs.h names them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mltune {

// Device/Port Type of the PCI Express Capabilities register, and the role a
// function plays in the PCIe tree when config space cannot be read.
enum class PciePortType {
  unknown,
  endpoint,          // 0x0
  legacy_endpoint,   // 0x1
  rc_endpoint,       // 0x9, root complex integrated endpoint: no link
  root_port,         // 0x4
  switch_upstream,   // 0x5
  switch_downstream, // 0x6
  pcie_to_pci,       // 0x7
  pci_to_pcie,       // 0x8
  rc_event_collector // 0xa
};
std::string_view to_string(PciePortType t);

// One PCIe link as sysfs prints it.  Speeds are in tenths of GT/s (2.5 GT/s
// is 25) so that "2.5 GT/s PCIe", "8.0 GT/s PCIe" and the older "8 GT/s"
// compare exactly; 0 is unknown ("Unknown", a missing file, or no link as on
// root complex integrated endpoints).  Widths are lanes; 0 is unknown (the
// kernel prints 0 or 255 when the register says nothing).
struct PcieLink {
  unsigned current_speed = 0, max_speed = 0; // tenths of GT/s
  unsigned current_width = 0, max_width = 0; // lanes

  [[nodiscard]] bool known() const { return current_speed > 0 && current_width > 0; }
};

// "16.0 GT/s PCIe" -> 160, "8 GT/s" -> 80, "2.5 GT/s PCIe" -> 25;
// nullopt for "Unknown" and anything else.
std::optional<unsigned> parse_link_speed(std::string_view s);
// 160 -> "16.0 GT/s (Gen4)"; 0 -> "unknown".
std::string link_speed_str(unsigned tenths);
// "x16 16.0 GT/s (Gen4)"; "unknown" when neither is known.
std::string link_str(unsigned width, unsigned speed);

// What parse_pci_config() read.
struct PciConfig {
  bool caps_readable = false;     // the capability list was inside what could be read
  bool ext_caps_readable = false; // 4096 bytes: the extended capabilities too
  bool pcie = false;              // a PCI Express Capability was found
  PciePortType type = PciePortType::unknown;
  unsigned max_payload = 0;  // bytes (Device Control); 0 unknown
  unsigned max_read_req = 0; // bytes (Device Control); 0 unknown
  std::optional<bool> relaxed_ordering;
  // Link Capabilities / Link Status of the capability itself (sysfs has the
  // same facts; these are the fallback where a kernel lacks the files).
  unsigned cap_speed = 0, cap_width = 0, sta_speed = 0, sta_width = 0;
  // The largest supported speed as the kernel's max_link_speed computes it
  // (Link Capabilities 2's Supported Link Speeds Vector up to Max Link
  // Speed, else Max Link Speed where it is 2.5 or 5.0 GT/s); 0 unknown.
  unsigned max_speed = 0;
  bool acs = false;          // an ACS Extended Capability exists
  std::uint16_t acs_cap = 0; // ACS Capability register
  std::uint16_t acs_ctl = 0; // ACS Control register
};

// ACS Control bits (pci_regs.h PCI_ACS_*).
inline constexpr std::uint16_t k_acs_sv = 0x01; // source validation
inline constexpr std::uint16_t k_acs_tb = 0x02; // translation blocking
inline constexpr std::uint16_t k_acs_rr = 0x04; // P2P request redirect
inline constexpr std::uint16_t k_acs_cr = 0x08; // P2P completion redirect
inline constexpr std::uint16_t k_acs_uf = 0x10; // upstream forwarding
inline constexpr std::uint16_t k_acs_ec = 0x20; // P2P egress control
inline constexpr std::uint16_t k_acs_dt = 0x40; // direct translated P2P
// The bits that send peer-to-peer traffic up to the root complex.
inline constexpr std::uint16_t k_acs_p2p_redirect = k_acs_rr | k_acs_cr | k_acs_ec;

// Parses the bytes of a function's configuration space.  Never fails: what
// is too short, malformed or looping is left unknown.
PciConfig parse_pci_config(std::string_view bytes);

// "RR CR UF" for the set ACS Control bits; "none" for 0.
std::string acs_bits_str(std::uint16_t ctl);

} // namespace mltune
