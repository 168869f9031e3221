// The node as one unit (mltune/node.hpp): the profile switch over every
// domain, the check of every domain, status, off and switch baseline.
#include "mltune/node.hpp"

#include "base/baseline.hpp"
#include "base/file_lock.hpp"
#include "mltune/boot.hpp"
#include "mltune/compare.hpp"
#include "mltune/config.hpp"
#include "mltune/device_knobs.hpp"
#include "mltune/feeder.hpp"
#include "mltune/parse.hpp"
#include "mltune/persist.hpp"
#include "mltune/pool.hpp"
#include "node/config_revert.hpp"
#include "node/domains.hpp"

#include <algorithm>
#include <cerrno>

namespace mltune {

// ---- the node lock -------------------------------------------------------------

struct NodeLock::Held {
  FileLock lock;
};

NodeLock::NodeLock(std::unique_ptr<Held> h) : held_(std::move(h)) {}
NodeLock::NodeLock(NodeLock &&) noexcept = default;
NodeLock &NodeLock::operator=(NodeLock &&) noexcept = default;
NodeLock::~NodeLock() = default;

Result<std::optional<NodeLock>> NodeLock::acquire_if(const Sysroot &root, bool changes) {
  if (!changes) {
    return std::optional<NodeLock>{};
  }
  auto l = acquire(root);
  if (!l) {
    return l.error();
  }
  return std::optional<NodeLock>(std::move(*l));
}

void NodeLock::remove_on_release() {
  held_->lock.remove_on_release();
}

Result<NodeLock> NodeLock::acquire(const Sysroot &root) {
  auto l = FileLock::acquire(root, k_node_lock);
  if (!l) {
    if (l.error().sys_errno == EACCES || l.error().sys_errno == EPERM) {
      // Not root: say what it takes, not which file refused.
      return Error{Errc::failed,
                   "changing the node needs root (CAP_SYS_ADMIN; the resident switcher takes the same) (" +
                       l.error().message + ")",
                   l.error().sys_errno};
    }
    return with_context(l.error(), "taking the node lock");
  }
  l->pass_to_children(); // modprobe keeps it (module_step.cpp)
  return NodeLock(std::make_unique<Held>(Held{std::move(*l)}));
}

namespace {

std::unique_ptr<NicBackend> nic_backend(const Sysroot &root, const NodeSeams &seams) {
  if (seams.nic) {
    return seams.nic();
  }
  if (!root.shares_network()) {
    return nullptr;
  }
  auto feeders = nic_feeder_cpus(root);
  auto be = make_live_nic_backend(root, feeders ? *feeders : std::vector<unsigned>{});
  return be ? std::move(*be) : nullptr;
}

} // namespace

// ---- switch ----------------------------------------------------------------------

ProfileSwitch::ProfileSwitch(const Profile &profile, const Sysroot &root, Backend backend, const NodeSeams &seams)
    : profile_(profile), root_(root), backend_(backend),
      domains_(std::make_unique<detail::NodeDomains>(root, &profile, backend, seams)) {}

ProfileSwitch::~ProfileSwitch() = default;

ModuleStep &ProfileSwitch::modules() {
  return domains_->modules();
}
KnobStep &ProfileSwitch::knobs() {
  return domains_->knobs();
}
NicStep &ProfileSwitch::nic() {
  return domains_->nic();
}
SchedStep &ProfileSwitch::sched() {
  return domains_->sched();
}
BootStep &ProfileSwitch::boot() {
  return domains_->boot();
}

Result<TransactionReport> ProfileSwitch::run(const TransactionOptions &opt) {
  auto lock = NodeLock::acquire_if(root_, !opt.dry_run);
  if (!lock) {
    return lock.error();
  }
  domains_->modules().stop_at(opt.stop_at);
  auto r = run_transaction(domains_->steps(detail::NodeOp::profile_switch), opt);
  if (r && !opt.dry_run) {
    if (auto st = record_profile(root_, profile_); !st) {
      return with_context(st.error(), "recording the switched profile");
    }
  }
  if (r && !opt.dry_run && backend_ == Backend::kernel) {
    // The module's uevent wakes the follower: it has nothing left to do.
    if (auto st = note_followed(root_, profile_.name); !st) {
      return with_context(st.error(), "recording the switch for mltunectl follow");
    }
  }
  return r;
}

// ---- check -------------------------------------------------------------------------

bool NodeCheck::matches() const {
  return std::none_of(differences.begin(), differences.end(), [](const NodeDifference &d) { return d.counts; });
}

namespace {

DomainCheck check_modules(const Profile &profile, const Sysroot &root, ModuleLoader *loader,
                          std::vector<NodeDifference> &out) {
  DomainCheck dc{"modules", "match", profile.modules.size(), {}};
  if (profile.modules.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  std::unique_ptr<ModuleLoader> live;
  if (loader == nullptr) {
    live = make_live_module_loader(root);
    loader = live.get();
  }
  for (const auto &m : profile.modules) {
    const bool in = loader != nullptr ? loader->loaded(m.name) : root.is_dir("/sys/module/" + m.name);
    if (!in) {
      out.push_back({"modules", m.name, "loaded", "not loaded", "missing", m.required});
      dc.state = m.required ? "differs" : dc.state;
    }
  }
  return dc;
}

// Files whose reading interrupts a feeder core or boot-isolated CPU
// (energy_perf_bias, energy_performance_preference) are not read: verify,
// metrics and conformance run again and again; the switch wrote them and
// read them back. The note says how many were left out.
DomainCheck check_knobs(const Profile &profile, const Sysroot &root, std::vector<NodeDifference> &out) {
  DomainCheck dc{"knobs", "match", profile.knobs.size(), {}};
  if (profile.knobs.empty()) {
    dc.state = "not-applicable";
  }
  const bool any_on_cpu =
      std::any_of(profile.knobs.begin(), profile.knobs.end(), [](const Knob &k) { return k.read_on_cpu >= 0; });
  const CpuSet spare = any_on_cpu ? quiet_cpus(root) : CpuSet{};
  CpuSet spared;
  for (const auto &st : compare(profile, root, &spare)) {
    if (st.state == KnobState::not_read) {
      --dc.checked;
      spared.set(static_cast<unsigned>(st.knob->read_on_cpu));
      continue;
    }
    if (st.state == KnobState::match) {
      continue;
    }
    out.push_back(
        {"knobs", st.knob->key, st.knob->wanted(), st.current, std::string(to_string(st.state)), st.counts()});
    if (st.counts()) {
      dc.state = "differs";
    }
  }
  if (!spared.empty()) {
    dc.note = std::to_string(profile.knobs.size() - dc.checked) + " knob(s) not read on feeder or isolated CPUs " +
              spared.str() + " (energy_perf_bias, energy_performance_preference: reading them interrupts the CPU)";
  }
  return dc;
}

DomainCheck check_nic(const Profile &profile, NicBackend *be, std::vector<NodeDifference> &out) {
  DomainCheck dc{"nic", "match", 0, {}};
  if (profile.nic.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  if (be == nullptr) {
    dc.state = "unchecked";
    dc.note = "NIC settings are read over netlink from the live node only";
    return dc;
  }
  auto rep = nic_apply(profile.nic, *be, NicOptions{}, true);
  if (!rep) {
    dc.state = "unchecked";
    dc.note = rep.error().message;
    return dc;
  }
  for (const auto &c : rep->plan.changes) {
    out.push_back({"nic", (c.ifname.empty() ? "" : c.ifname + " ") + c.key, c.to, c.from, "differs", true});
    dc.state = "differs";
  }
  dc.checked = rep->plan.compared;
  if (!rep->skipped.empty()) {
    dc.note = std::to_string(rep->skipped.size()) + " setting(s) the devices do not support were left out";
  }
  return dc;
}

DomainCheck check_sched(const Profile &profile, SchedSystem *sys, std::vector<NodeDifference> &out) {
  DomainCheck dc{"sched", "match", 0, {}};
  if (profile.sched_rules.empty()) {
    dc.state = "not-applicable";
    return dc;
  }
  if (sys == nullptr) {
    dc.state = "unchecked";
    dc.note = "thread policies are read on a running node that shares its PID namespace, not in a file tree";
    return dc;
  }
  for (const auto &e : sched_list(*sys, profile.sched_rules, std::nullopt)) {
    const auto r = std::find_if(profile.sched_rules.begin(), profile.sched_rules.end(),
                                [&](const SchedRule &x) { return x.name == e.rule; });
    if (r == profile.sched_rules.end()) {
      continue;
    }
    ++dc.checked;
    if (sched_attr_holds(e.attr, r->attr) || (r->fallback && sched_attr_holds(e.attr, *r->fallback))) {
      continue;
    }
    out.push_back({"sched", std::to_string(e.thread.tid) + " \"" + e.thread.comm + "\"", r->attr.describe(),
                   e.attr.describe(), "differs", true});
    dc.state = "differs";
  }
  if (dc.checked == 0) {
    dc.note = "no thread matches a rule now";
  }
  return dc;
}

} // namespace

Result<NodeCheck> check_node(const Profile &profile, const Sysroot &root, const NodeSeams &seams) {
  NodeCheck c;
  c.domains.push_back(check_modules(profile, root, seams.modules, c.differences));
  auto node = profile_for_node(profile, root);
  if (!node) {
    return node.error();
  }
  c.domains.push_back(check_knobs(*node, root, c.differences));
  const auto be = profile.nic.empty() ? nullptr : nic_backend(root, seams);
  c.domains.push_back(check_nic(profile, be.get(), c.differences));
  std::unique_ptr<SchedSystem> live;
  SchedSystem *sys = seams.sched;
  if (sys == nullptr && root.acts_on_node() && !profile.sched_rules.empty()) {
    live = make_live_sched_system(root);
    sys = live.get();
  }
  c.domains.push_back(check_sched(profile, sys, c.differences));
  return c;
}

// ---- status ------------------------------------------------------------------------

namespace {

DomainState feeder_state(const Sysroot &root) {
  auto st = feeder_status(root);
  if (!st) {
    return {"feeder", "unchecked", st.error().message};
  }
  if (!st->state.active) {
    return {"feeder", "off", "no feeder cores"};
  }
  return {"feeder", "applied", "CPUs " + st->state.cpus.str() + " (" + st->state.mechanism + ")"};
}

DomainState pool_state(const Sysroot &root) {
  if (!root.is_dir(k_kmod_dir)) {
    return {"pool", "off", "the module is not loaded"};
  }
  auto st = pool_status(root);
  if (!st) {
    return {"pool", "unchecked", st.error().message};
  }
  std::string detail;
  std::uint64_t total = 0;
  for (const auto &n : st->nodes) {
    detail += (detail.empty() ? "" : ", ") + std::string("node") + std::to_string(n.node) + " " +
              std::to_string(n.reserved) + " pages (" + std::to_string(n.mapped) + " mapped)";
    total += n.reserved;
  }
  return {"pool", total > 0 ? "applied" : "off", detail.empty() ? "no NUMA node" : detail};
}

DomainState boot_state(const Sysroot &root) {
  auto dropin = root.read(k_grub_dropin);
  if (!dropin) {
    return {"boot", "off", "no " + std::string(k_grub_dropin)};
  }
  // The drop-in's parameters, as GRUB_CMDLINE_LINUX_DEFAULT="$... PARAMS".
  auto cmdline = root.read("/proc/cmdline");
  const std::string have = cmdline ? " " + std::string(trim(*cmdline)) + " " : "";
  size_t missing = 0;
  std::string params;
  for (const auto line : split_lines(*dropin)) {
    const auto q = line.find('"');
    if (line.starts_with("#") || q == std::string_view::npos) {
      continue;
    }
    for (const auto w : split_words(line.substr(q + 1, line.rfind('"') - q - 1))) {
      if (w.starts_with("$")) {
        continue;
      }
      params += (params.empty() ? "" : " ") + std::string(w);
      missing += have.find(" " + std::string(w) + " ") == std::string::npos ? 1 : 0;
    }
  }
  if (missing > 0) {
    return {"boot", "pending-reboot",
            std::to_string(missing) + " parameter(s) of " + std::string(k_grub_dropin) +
                " not on the running command line: " + params};
  }
  return {"boot", "applied", params};
}

DomainState persist_state(const Sysroot &root) {
  if (!root.exists(k_config_file)) {
    return {"persist", "off", "no " + std::string(k_config_file)};
  }
  auto cfg = load_config(root);
  if (!cfg) {
    return {"persist", "unchecked", cfg.error().message};
  }
  return {"persist", "applied",
          std::string(k_config_file) + ": profile " + cfg->profile.value_or("(none)") + " at boot"};
}

bool out_of_line_state(const DomainState &d) {
  return d.state == "drifted" || d.state == "failed" || d.state == "rolled-back";
}

} // namespace

bool NodeStatus::in_line() const {
  // A profile that could not be checked (its file gone or changed, or
  // defined in the module only) is not in line: status, metrics and
  // conformance say the same.
  return !profile.empty() && !fingerprint.empty() && std::none_of(domains.begin(), domains.end(), out_of_line_state);
}

std::string NodeStatus::out_of_line() const {
  std::string out;
  for (const auto &d : domains) {
    if (out_of_line_state(d)) {
      out += (out.empty() ? "" : ", ") + d.domain + " " + d.state;
    }
  }
  return out;
}

Result<NodeStatus> node_status(const Sysroot &root, const NodeSeams &seams) {
  NodeStatus s;
  s.backend = choose_backend(root, Backend::automatic);
  auto active = active_profile(root, s.backend);
  if (!active) {
    return active.error();
  }
  s.profile = active->name == k_baseline ? "" : active->name;
  if (s.profile.empty()) {
    for (const char *d : {"modules", "knobs", "nic", "sched"}) {
      s.domains.push_back({d, "off", "no profile active"});
    }
  } else if (auto p = load_active_profile(root, s.profile); !p) {
    // A profile defined in the module only, or a file that no longer loads.
    for (const char *d : {"modules", "knobs", "nic", "sched"}) {
      s.domains.push_back({d, "unchecked", "profile '" + s.profile + "': " + p.error().message});
    }
  } else {
    s.fingerprint = profile_fingerprint(*p);
    auto c = check_node(*p, root, seams);
    if (!c) {
      return c.error();
    }
    for (const auto &d : c->domains) {
      const std::string state = d.state == "match"            ? "applied"
                                : d.state == "differs"        ? "drifted"
                                : d.state == "not-applicable" ? "off"
                                                              : d.state;
      std::string detail = std::to_string(d.checked) + " checked";
      const auto n = std::count_if(c->differences.begin(), c->differences.end(),
                                   [&](const NodeDifference &x) { return x.domain == d.domain && x.counts; });
      if (n > 0) {
        detail += ", " + std::to_string(n) + " differ";
      }
      if (d.state == "not-applicable") {
        detail = "nothing in profile " + s.profile;
      }
      if (!d.note.empty()) {
        detail += (detail.empty() ? "" : "; ") + d.note;
      }
      s.domains.push_back({d.domain, state, detail});
    }
    s.differences = std::move(c->differences);
  }
  if (kernel_backend_present(root)) {
    auto f = follow_state(root);
    if (f && *f) {
      const FollowRecord &l = (*f)->last;
      std::string d = "generation " + std::to_string(l.generation) + ": in line with '" + l.in_line + "'";
      if ((*f)->last_failure && (*f)->last_failure->generation != l.generation) {
        d += "; last failure at generation " + std::to_string((*f)->last_failure->generation) + " ('" +
             (*f)->last_failure->profile + "'): " + (*f)->last_failure->error;
      } else if (!l.error.empty()) {
        d += ": " + l.error;
      }
      s.domains.push_back({"follow", l.result == "ok" ? "applied" : l.result, d});
    }
  }
  s.domains.push_back(feeder_state(root));
  s.domains.push_back(pool_state(root));
  s.domains.push_back(boot_state(root));
  s.domains.push_back(persist_state(root));
  return s;
}

// ---- off ---------------------------------------------------------------------------

bool OffReport::ok() const {
  return std::none_of(domains.begin(), domains.end(), [](const DomainState &d) { return d.state == "failed"; });
}

namespace {

DomainState off_boot(const Sysroot &root) {
  if (!root.exists(k_grub_dropin)) {
    return {"boot", "off", "no " + std::string(k_grub_dropin)};
  }
  if (auto st = root.remove_file(k_grub_dropin); !st) {
    return {"boot", "failed", st.error().message};
  }
  return {"boot", "pending-reboot",
          "removed " + std::string(k_grub_dropin) + "; run update-grub, the parameters leave at the next boot"};
}

DomainState off_persist(const Sysroot &root) {
  // A node configuration written by hand or by configuration management
  // (Ansible, Puppet) is the administrator's, not a change of mltune's.
  if (auto text = root.read(k_config_file); text && !text->starts_with(k_config_marker)) {
    return {"persist", "kept",
            std::string(k_config_file) + " was not written by mltunectl persist: left as it is (the next boot "
                                         "applies it; remove it to keep the node off)"};
  }
  auto removed = remove_persist(root);
  if (!removed) {
    return {"persist", "failed", removed.error().message};
  }
  if (removed->empty()) {
    return {"persist", "off", "nothing persisted by mltunectl"};
  }
  std::string files;
  for (const auto &f : *removed) {
    files += (files.empty() ? "" : ", ") + f;
  }
  return {"persist", "restored", "removed " + files};
}

DomainState off_config(const Sysroot &root) {
  auto r = detail::revert_config_locked(root, true);
  if (!r) {
    return {"pool", "failed", r.error().message};
  }
  std::string what;
  for (const auto &l : r->restored) {
    what += (what.empty() ? "" : "; ") + l;
  }
  return {"pool", r->restored.empty() ? "off" : "restored", what.empty() ? "no reservation made by mltune" : what};
}

DomainState off_feeder(const Sysroot &root, const NodeSeams &seams) {
  auto st = feeder_status(root);
  if (!st) {
    return {"feeder", "failed", st.error().message};
  }
  if (!st->state.active) {
    return {"feeder", "off", "no feeder cores"};
  }
  const std::string cpus = st->state.cpus.str();
  auto r = seams.feeder != nullptr ? feeder_off(root, *seams.feeder) : feeder_off(root);
  if (!r) {
    return {"feeder", "failed", r.error().message};
  }
  return {"feeder", "restored", "feeder cores " + cpus + " off"};
}

DomainState off_sched(const Sysroot &root, const NodeSeams &seams, bool dry_run = false) {
  std::unique_ptr<SchedSystem> live;
  SchedSystem *sys = seams.sched;
  if (sys == nullptr) {
    if (!root.acts_on_node()) {
      if (auto st = root.require_namespaces("sched", {"pid", "net"}); !st) {
        return {"sched", root.is_node() ? "failed" : "unchecked", st.error().message};
      }
    }
    live = make_live_sched_system(root);
    sys = live.get();
  }
  SchedOptions opt;
  opt.dry_run = dry_run;
  auto r = sched_reset(*sys, opt);
  if (!r) {
    return {"sched", "failed", r.error().message};
  }
  if (dry_run) {
    const auto alive =
        std::count_if(r->actions.begin(), r->actions.end(), [](const SchedAction &a) { return a.result == "dry-run"; });
    if (r->actions.empty()) {
      return {"sched", "off", "no thread policy changed by mltune"};
    }
    return {"sched", "planned",
            std::to_string(alive) + " thread(s) to restore, " + std::to_string(r->actions.size() - alive) +
                " gone since"};
  }
  size_t restored = 0;
  size_t failed = 0;
  for (const auto &a : r->actions) {
    restored += a.result == "restored" ? 1 : 0;
    failed += a.result == "failed" ? 1 : 0;
  }
  if (failed > 0) {
    return {"sched", "failed", std::to_string(failed) + " thread(s) could not be restored (see sched list)"};
  }
  if (r->actions.empty()) {
    return {"sched", "off", "no thread policy changed by mltune"};
  }
  return {"sched", "restored",
          std::to_string(restored) + " thread(s) restored, " + std::to_string(r->actions.size() - restored) +
              " gone since"};
}

DomainState off_nic(const Sysroot &root, const NodeSeams &seams, bool dry_run = false) {
  auto b = detail::load_baseline(root);
  if (!b) {
    return {"nic", "failed", b.error().message};
  }
  if (!b->has("nic")) {
    return {"nic", "off", "no NIC setting changed by mltune"};
  }
  auto be = nic_backend(root, seams);
  if (!be) {
    if (root.is_node()) {
      auto st = root.require_namespaces("nic", {"net"});
      return {"nic", "failed", st ? "no netlink backend for the node's NICs" : st.error().message};
    }
    return {"nic", "unchecked", "NIC settings are restored over netlink on a running node only, not in a file tree"};
  }
  auto r = restore_nic_baseline(root, *be, dry_run);
  if (!r) {
    return {"nic", "failed", r.error().message};
  }
  std::string detail = std::to_string(dry_run ? r->plan.changes.size() : r->applied.size()) +
                       (dry_run ? " setting(s) to restore" : " setting(s) restored");
  for (size_t i = 0; dry_run && i < r->plan.changes.size(); ++i) {
    const auto &c = r->plan.changes[i];
    detail += (i == 0 ? ": " : ", ") + (c.ifname.empty() ? "" : c.ifname + " ") + c.key + " " + c.from + " -> " + c.to;
  }
  if (!r->skipped.empty()) {
    detail += ", " + std::to_string(r->skipped.size()) + " gone since (";
    for (size_t i = 0; i < r->skipped.size(); ++i) {
      detail += (i == 0 ? "" : ", ") + r->skipped[i].ifname + " " + r->skipped[i].key;
    }
    detail += ")";
  }
  return {"nic", dry_run ? "planned" : "restored", detail};
}

DomainState off_modules(const Sysroot &root, const NodeSeams &seams, bool dry_run = false) {
  auto b = detail::load_baseline(root);
  if (!b) {
    return {"modules", "failed", b.error().message};
  }
  if (!b->has("modules")) {
    return {"modules", "off", "no module loaded by mltune"};
  }
  const Profile none;
  ModuleStep step(none.modules, root, seams.modules);
  if (seams.modules == nullptr && !root.is_node()) {
    return {"modules", "unchecked", "modules are unloaded on a running node only, not in a file tree"};
  }
  if (dry_run) {
    auto names = recorded_modules(root);
    if (!names) {
      return {"modules", "failed", names.error().message};
    }
    std::string list;
    for (const auto &n : *names) {
      list += (list.empty() ? "" : ", ") + n;
    }
    return {"modules", "planned", "unload " + list + " (those still loaded and not in use)"};
  }
  if (auto st = step.baseline(); !st) {
    return {"modules", "failed", st.error().message};
  }
  if (!step.in_use().empty()) {
    std::string why;
    for (const auto &u : step.in_use()) {
      why += (why.empty() ? "" : "; ") + u;
    }
    // Not a failure: the module goes when its last user does.
    return {"modules", "pending", "still in use, left loaded (off unloads it next time): " + why};
  }
  std::string unloaded;
  std::string gone;
  for (const auto &n : step.recorded()) {
    const bool by_us = std::find(step.unloaded().begin(), step.unloaded().end(), n) != step.unloaded().end();
    std::string &list = by_us ? unloaded : gone;
    list += (list.empty() ? "" : ", ") + n;
  }
  if (unloaded.empty()) {
    return {"modules", "restored", gone + ": no longer loaded"};
  }
  return {"modules", "restored", "unloaded " + unloaded + (gone.empty() ? "" : "; " + gone + ": no longer loaded")};
}

DomainState knobs_state(const Result<SwitchReport> &r) {
  if (!r) {
    return {"knobs", "failed", r.error().message};
  }
  if (r->written.empty()) {
    return {"knobs", "off", "every knob on its baseline"};
  }
  return {"knobs", "restored", std::to_string(r->written.size()) + " knob(s) written back"};
}

DomainState off_knobs(const Sysroot &root) {
  std::string detail, failed;
  bool any = false;
  if (kernel_backend_present(root)) {
    auto a = active_profile(root, Backend::kernel);
    if (a && !a->name.empty() && a->name != k_baseline) {
      auto r = restore_baseline_kernel(root);
      if (!r) {
        failed += r.error().message;
      } else {
        any = true;
        detail += "module: baseline restored";
      }
    }
  }
  auto direct = direct_baseline(root);
  if (!direct) {
    failed += (failed.empty() ? "" : "; ") + direct.error().message;
  } else if (!direct->empty()) {
    auto r = restore_baseline_direct(root);
    if (!r) {
      failed += (failed.empty() ? "" : "; ") + r.error().message;
    } else {
      any = true;
      detail += (detail.empty() ? "" : "; ") + std::string("direct: ") + std::to_string(r->written.size()) +
                " knob(s) written back";
    }
  }
  if (!failed.empty()) {
    return {"knobs", "failed", failed};
  }
  return {"knobs", any ? "restored" : "off", any ? detail : "no knob changed by mltune"};
}

} // namespace

bool BaselineReport::ok() const {
  return std::none_of(domains.begin(), domains.end(), [](const DomainState &d) { return d.state == "failed"; });
}

namespace {

// switch_to_baseline() with dry_run: what each domain would restore.
Result<BaselineReport> plan_switch_to_baseline(const Sysroot &root, Backend backend, const NodeSeams &seams) {
  BaselineReport rep;
  rep.plan.profile = std::string(k_baseline);
  rep.domains.push_back(off_sched(root, seams, true));
  rep.domains.push_back(off_nic(root, seams, true));
  if (backend == Backend::direct) {
    auto plan = plan_baseline_direct(root);
    if (!plan) {
      rep.domains.push_back({"knobs", "failed", plan.error().message});
    } else {
      const auto n = std::count_if(plan->steps.begin(), plan->steps.end(),
                                   [](const PlanStep &p) { return p.action == PlanStep::Action::write; });
      rep.domains.push_back({"knobs", n == 0 ? "off" : "planned",
                             n == 0 ? "every knob on its baseline" : std::to_string(n) + " knob(s) to write back"});
      rep.plan = std::move(*plan);
    }
  } else {
    rep.domains.push_back({"knobs", "planned", "the module writes back the values it captured"});
  }
  rep.domains.push_back(off_modules(root, seams, true));
  return rep;
}

} // namespace

Result<BaselineReport> switch_to_baseline(const Sysroot &root, Backend backend, const NodeSeams &seams, bool dry_run) {
  if (dry_run) {
    return plan_switch_to_baseline(root, backend, seams);
  }
  auto lock = NodeLock::acquire(root);
  if (!lock) {
    return lock.error();
  }
  BaselineReport rep;
  // The reverse of the order a switch applies them in (modules, knobs, NIC,
  // threads): a knob of a module mltune loaded goes back before the module.
  rep.domains.push_back(off_sched(root, seams));
  rep.domains.push_back(off_nic(root, seams));
  auto knobs = backend == Backend::kernel ? restore_baseline_kernel(root) : restore_baseline_direct(root);
  rep.domains.push_back(knobs_state(knobs));
  if (knobs) {
    rep.knobs = std::move(*knobs);
  }
  rep.knobs.backend = backend;
  rep.knobs.profile = std::string(k_baseline);
  rep.domains.push_back(off_modules(root, seams));
  if (backend == Backend::kernel) {
    // The module's uevent wakes the follower: it has nothing left to do.
    if (auto st = note_followed(root, std::string(k_baseline)); !st) {
      rep.domains.push_back({"follow", "failed", st.error().message});
    }
  }
  if (auto st = forget_profile(root); !st) {
    rep.domains.push_back({"profile", "failed", st.error().message});
  }
  return rep;
}

Result<OffReport> node_off(const Sysroot &root, const NodeSeams &seams) {
  auto lock = NodeLock::acquire(root);
  if (!lock) {
    return lock.error();
  }
  OffReport rep;
  // The reverse of the order things are applied in (config apply: knobs,
  // feeder, NIC, pool; switch: modules, knobs, NIC, threads).
  rep.domains.push_back(off_boot(root));
  rep.domains.push_back(off_persist(root));
  rep.domains.push_back(off_config(root));
  rep.domains.push_back(off_sched(root, seams));
  rep.domains.push_back(off_nic(root, seams));
  rep.domains.push_back(off_feeder(root, seams));
  rep.domains.push_back(off_knobs(root));
  rep.domains.push_back(off_modules(root, seams));
  if (auto st = note_followed(root, std::string(k_baseline)); !st) {
    rep.domains.push_back({"follow", "failed", st.error().message});
  }
  if (auto st = forget_profile(root); !st) {
    rep.domains.push_back({"profile", "failed", st.error().message});
  }
  lock->remove_on_release();
  return rep;
}

} // namespace mltune
