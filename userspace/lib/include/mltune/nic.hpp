// NIC tuning: ethtool netlink settings (rings, channels, coalescing, features,
// pause), rtnetlink link settings (MTU, txqueuelen), queue IRQ affinity,
// RPS/RFS, applied to every NIC as one transaction.  Documentation/nic.rst.
//
// Every setting is a flat key with a string value:
//   rings.rx  rings.tx  rings.rx-mini  rings.rx-jumbo          (count | "max")
//   channels.rx  channels.tx  channels.other  channels.combined (count | "max" | "local")
//   coalesce.rx-usecs ... coalesce.adaptive-rx ...             (count | on/off)
//   features.NAME   (ethtool -K names: gro, tso, rx-checksumming, ... or kernel names)
//   pause.autoneg  pause.rx  pause.tx                           (on/off)
//   link.mtu  link.txqueuelen                                   (count)
//   irq.affinity   ("housekeeping" | "leave")
//   irq.irqbalance ("ban" | "stop" | "ignore")
//   rps.cpus       ("housekeeping" | "off" | "leave")
//   rps.flow-entries (count: net.core.rps_sock_flow_entries, split over rx queues)
// A device's state uses the same keys (booleans as "on"/"off") plus
// "irq.N" (cpulist of IRQ N), "rps.QUEUE.cpus" (hex mask) and
// "rps.QUEUE.flow-cnt".
#pragma once

#include "mltune/result.hpp"
#include "mltune/step.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

struct Profile;

// ---- profile side -----------------------------------------------------------

struct NicSetting {
  std::string key;    // "coalesce.rx-usecs"
  std::string value;  // "50", "max", "on"
  std::string origin; // "training.toml:31"
  // From the command line (--set): sent to the device even when it does not
  // report the setting, so the kernel gives its verdict.  Profile settings a
  // device does not report are skipped and listed instead.
  bool explicit_request = false;
};

// One `[nic."GLOB"]` table: applies to interfaces whose name or driver
// matches GLOB (fnmatch).  Later rules override earlier ones key by key.
struct NicRule {
  std::string glob;
  std::vector<NicSetting> settings;
  std::string origin;
};

// Checks one setting's key and value syntax; returns the error text or "".
std::string nic_check_setting(std::string_view key, std::string_view value);
// "on"/"off" for booleans, decimal for numbers, symbolic values unchanged.
std::string nic_normalize_value(std::string_view value);

// ---- device side ------------------------------------------------------------

using NicValues = std::map<std::string, std::string>;

struct NicDevice {
  std::string name;
  std::string driver;
  int ifindex = 0;
  int numa_node = -1;                       // -1: no affinity (root bus)
  NicValues current;                        // every readable setting
  std::map<std::string, std::uint64_t> max; // "rings.rx" -> device maximum
  std::set<std::string> fixed;              // "features.NAME" the device cannot change
  std::set<std::string> unsupported_groups; // "channels" when the driver has no get_channels
  std::vector<int> irqs;                    // queue (MSI) IRQs of the device
  bool up = true;                           // IFF_UP: a down NIC has no queue IRQs
  std::vector<std::string> rx_queues;       // "rx-0", ...
};

// What talks to the kernel.  The live one uses libnl; tests use a fake.
class NicBackend {
public:
  virtual ~NicBackend() = default;
  // Interface names with a device below them (physical or virtual NICs), sorted.
  [[nodiscard]] virtual Result<std::vector<std::string>> interfaces() = 0;
  [[nodiscard]] virtual Result<NicDevice> probe(const std::string &ifname) = 0;
  // Applies the values of one group ("rings", "channels", "coalesce",
  // "features", "pause", "link", "irq", "rps") to a device in one request, or
  // one global ("sysctl") with ifname "".  Errors name device, setting and the
  // kernel's message.
  [[nodiscard]] virtual Status set(const std::string &ifname, const std::string &group, const NicValues &values) = 0;
  [[nodiscard]] virtual Result<std::string> read_global(const std::string &key) = 0;
  // Housekeeping CPUs (not feeders) of a NUMA node; node -1: all nodes.
  [[nodiscard]] virtual Result<std::vector<unsigned>> node_cpus(int node) = 0;
  // irqbalance: its pid, or 0 when not running.
  [[nodiscard]] virtual int irqbalance_pid() = 0;
  // Handles irqbalance ("ban" or "stop"); returns a line for the report.
  [[nodiscard]] virtual Result<std::string> irqbalance(const std::string &mode, const std::vector<unsigned> &banned,
                                                       const std::vector<int> &irqs) = 0;

  // Restricts later probe() calls to the groups an apply will plan ("link"
  // is always read; empty: every group). A hint: a backend may read more,
  // the live one skips the kernel requests and sysfs reads of the others.
  void limit_probe(std::set<std::string, std::less<>> groups) { probe_groups_ = std::move(groups); }

protected:
  [[nodiscard]] bool probe_wants(std::string_view group) const {
    return probe_groups_.empty() || probe_groups_.contains(group);
  }

private:
  std::set<std::string, std::less<>> probe_groups_;
};

// ---- the message layer under the live backend -------------------------------

// One scalar attribute of an ethtool message (ETHTOOL_A_*): u8 or u32.
struct NlAttr {
  int type = 0;
  std::uint32_t value = 0;
  bool is_u8 = false;
  bool operator==(const NlAttr &) const = default;
};
// The scalar attributes of a reply, by attribute type (u8 values widened).
using NlAttrs = std::map<int, std::uint32_t>;

struct NlLink {
  int ifindex = 0;
  unsigned mtu = 0;
  unsigned txqlen = 0;
};

struct NlFeatures {
  std::vector<std::string> hw;     // features the device can change
  std::vector<std::string> active; // features on
};

// The kernel requests the live backend makes: ethtool generic netlink and
// rtnetlink links.  Errors: a kernel refusal has sys_errno set and the
// message "kernel: <extended ack> (<strerror>)"; other failures
// ("netlink send: ...") may have none.  Messages do not name the device.
class NetlinkTransport {
public:
  virtual ~NetlinkTransport() = default;
  // ETHTOOL_MSG_*_GET with just the header: the reply's scalar attributes.
  [[nodiscard]] virtual Result<NlAttrs> ethtool_get(std::uint8_t cmd, const std::string &ifname) = 0;
  // ETHTOOL_MSG_*_SET with these attributes after the header.
  [[nodiscard]] virtual Status ethtool_set(std::uint8_t cmd, const std::string &ifname,
                                           const std::vector<NlAttr> &attrs) = 0;
  // Every feature name the kernel knows (the ETH_SS_FEATURES string set).
  [[nodiscard]] virtual Result<std::vector<std::string>> feature_names(const std::string &ifname) = 0;
  [[nodiscard]] virtual Result<NlFeatures> features_get(const std::string &ifname) = 0;
  // ETHTOOL_MSG_FEATURES_SET: the wanted bits (name, on).
  [[nodiscard]] virtual Status features_set(const std::string &ifname,
                                            const std::vector<std::pair<std::string, bool>> &wanted) = 0;
  // rtnetlink; link_get errors carry libnl's text only.
  [[nodiscard]] virtual Result<NlLink> link_get(const std::string &ifname) = 0;
  // Changes MTU and/or txqueuelen.  sys_errno 0: the link could not be read
  // (libnl's text); otherwise the kernel refused the change.
  [[nodiscard]] virtual Status link_set(const std::string &ifname, std::optional<unsigned> mtu,
                                        std::optional<unsigned> txqlen) = 0;
};

// libnl sockets: generic netlink (family "ethtool" resolved) and rtnetlink.
// While Caches are current on the thread (mltunectl serve:
// mltune/caches.hpp), the sockets and the resolved family are opened once
// and kept there; a request that fails closes them, and the next transport
// opens new ones.
Result<std::unique_ptr<NetlinkTransport>> make_netlink_transport();

// The live backend: ethtool genetlink + rtnetlink (libnl) and sysfs/procfs
// through `root`.  `feeders` are never used for NIC IRQs or RPS.
Result<std::unique_ptr<NicBackend>> make_live_nic_backend(const Sysroot &root,
                                                          const std::vector<unsigned> &feeders = {});
// The same over another message layer (tests).
std::unique_ptr<NicBackend> make_live_nic_backend(const Sysroot &root, const std::vector<unsigned> &feeders,
                                                  std::unique_ptr<NetlinkTransport> transport);

// Feeder CPUs known to the node: /sys/kernel/mltune/feeder/cpus when present
// (none when absent); a file that cannot be read or is not a cpulist is an
// error naming it.
Result<std::vector<unsigned>> nic_feeder_cpus(const Sysroot &root);

// ---- planning ---------------------------------------------------------------

struct NicChange {
  std::string ifname; // "" for globals
  std::string key;
  std::string from;
  std::string to;
  std::string origin;
};

struct NicSkip {
  std::string ifname;
  std::string key;
  std::string why;
};

struct NicPlan {
  std::vector<NicChange> changes; // in apply order
  std::vector<NicSkip> skipped;   // settings the device does not support
  std::size_t compared = 0;       // device settings compared (changed or not)
  std::vector<std::string> notes; // irqbalance and similar
  std::string irqbalance;         // mode to apply ("" = nothing to do)
  std::vector<unsigned> irqbalance_banned;
  std::vector<int> irqbalance_irqs;
};

struct NicOptions {
  std::string only;              // one interface, "" = all
  bool skip_unsupported = false; // failures with EOPNOTSUPP are skipped, not fatal
  // Where to record, before the first write, the value of every setting
  // mltune changes for the first time (the node baseline that `mltunectl
  // off` restores); null: nothing is recorded (rollbacks, restores).
  const Sysroot *record_baseline = nullptr;
};

// The settings the profile (plus `extra`) wants for a device, resolved
// against it: "max"/"local" become numbers, feature aliases become kernel
// feature names.  Input errors (unknown feature, value above the device's
// maximum) are Errc::input.
Result<NicPlan> nic_plan(std::span<const NicRule> rules, const std::vector<NicDevice> &devices, NicBackend &backend,
                         const NicOptions &opts);

struct NicReport {
  NicPlan plan;
  std::vector<NicChange> applied;
  std::vector<NicSkip> skipped; // plan.skipped plus EOPNOTSUPP with skip_unsupported
  std::vector<std::string> notes;
};

// Probes, plans and applies as one transaction across all devices.  On any
// failure every device is restored to the state probed before (in reverse)
// and the error names the device, the setting and the kernel's message.
Result<NicReport> nic_apply(std::span<const NicRule> rules, NicBackend &backend, const NicOptions &opts, bool dry_run);
// Applies a plan made by nic_plan (or a dry-run nic_apply) as one
// transaction: the `from` values of its changes are what a failure restores.
Result<NicReport> nic_commit(const NicPlan &plan, NicBackend &backend, const NicOptions &opts);
// Probes the devices selected by `only` ("" = all).
Result<std::vector<NicDevice>> nic_probe_all(NicBackend &backend, const std::string &only);

// Feature aliases of the ethtool program ("tso") to kernel feature-name
// prefixes or names ("tx-tcp-segmentation", ...).
std::vector<std::string> nic_feature_expand(std::string_view name, const NicDevice &dev);

// Group of a key: "rings.rx" -> "rings".
std::string nic_group(std::string_view key);

// Puts every NIC setting of the node baseline back (newest first, as one
// NIC transaction) and forgets them.  A device or IRQ that no longer exists
// (interface renamed or gone, IRQ released) is skipped and listed in the
// report; a failure restores the devices as they were and keeps the record.
// With `dry_run`, only the plan (and what is gone): nothing is written.
Result<NicReport> restore_nic_baseline(const Sysroot &root, NicBackend &backend, bool dry_run = false);

// The profile's [nic] tables (Profile::nic) as a transaction step.  Without
// a backend given, plan() uses the live one when the sysroot is the live
// node and does nothing otherwise, or when there is no rule.  apply() records the
// value of every setting it changes for the first time in the node
// baseline (base/baseline.hpp) before writing; rollback() applies the
// inverse of what apply() changed; baseline() puts every recorded setting
// back (restore_nic_baseline()).
class NicStep final : public Step {
public:
  NicStep(std::span<const NicRule> rules, const Sysroot &root, std::unique_ptr<NicBackend> backend = nullptr);
  [[nodiscard]] std::string_view name() const override { return "nic"; }
  Status plan() override;
  Status apply() override;
  Status verify() override;
  Status rollback() override;
  Status baseline() override;
  // The rules' settings as the devices read now (over netlink: "unchecked"
  // on a tree that does not share the node's network namespace).
  [[nodiscard]] Result<DomainCheck> check(std::vector<NodeDifference> &out) override;
  // Every NIC setting of the node baseline put back (a dry run: listed).
  [[nodiscard]] DomainState off(bool dry_run) override;
  [[nodiscard]] std::string summary() const override;

  // The feeder CPUs the NIC plan keeps IRQs and RPS off: by default those
  // in force (nic_feeder_cpus()); a transaction that also turns feeder
  // cores on or off names the ones it will leave (called in plan()).
  void feeders_from(std::function<std::vector<unsigned>()> f) { feeders_ = std::move(f); }
  // What plan() found to change (nullopt when the step has nothing to do).
  [[nodiscard]] const std::optional<NicReport> &planned() const { return planned_; }
  // What apply() changed.
  [[nodiscard]] const std::optional<NicReport> &applied() const { return applied_; }

private:
  Status ensure_backend();

  std::span<const NicRule> rules_;
  const Sysroot &root_;
  std::unique_ptr<NicBackend> backend_;
  std::function<std::vector<unsigned>()> feeders_;
  std::optional<NicReport> planned_;
  std::optional<NicReport> applied_;
};

} // namespace mltune
