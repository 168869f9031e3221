// Drift attribution (see mltune/drift.hpp): the watcher's life cycle and its
// records.  The BPF side is bpf/mltune_drift.bpf.c, loaded through
// bpf/mltune_observe.h when this build has the toolchain (MLTUNE_HAVE_BPF).
#include "mltune/drift.hpp"
#include "mltune/node_info.hpp"

#include "base/cgroup.hpp"
#include "base/state_file.hpp"
#include "drift/raw.hpp"
#include "mltune/parse.hpp"

#ifdef MLTUNE_HAVE_BPF
#include "mltune_observe.h"
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace mltune {

namespace {

constexpr unsigned k_proc_magic = 0x9fa0;
constexpr unsigned k_sysfs_magic = 0x62656572;
constexpr unsigned k_cgroup2_magic = 0x63677270;
constexpr unsigned k_cgroup_magic = 0x27e0eb;

struct DriftState {
  std::string started;
  std::string missing;
};

[[maybe_unused]] void to_json(nlohmann::json &j, const DriftState &s) {
  j = {{"started", s.started}, {"missing", s.missing}};
}
[[maybe_unused]] void from_json(const nlohmann::json &j, DriftState &s) {
  s.started = j.value("started", "");
  s.missing = j.value("missing", "");
}

constexpr StateFile<DriftState> k_state{k_drift_state, 1, false};

std::string str(const char *p, size_t n) {
  return {p, strnlen(p, n)};
}

std::string local_time(std::int64_t unix_ns) {
  const auto t = static_cast<std::time_t>(unix_ns / 1000000000LL);
  std::tm tm{};
  char buf[32] = "";
  if (::localtime_r(&t, &tm) != nullptr) {
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  }
  return buf;
}

std::string strip_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) {
    s.pop_back();
  }
  return s;
}

// "/proc/irq/25/smp_affinity_list" -> "/proc/irq/25/smp_affinity": one setting.
std::string setting_of(std::string_view path) {
  std::string p(path);
  if (p.starts_with("/proc/irq/") && p.ends_with("/smp_affinity_list")) {
    p.resize(p.size() - 5);
  }
  return p;
}

[[maybe_unused]] std::int64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

} // namespace

std::string drift_path(const mltune_drift_rec &r) {
  std::string mount;
  switch (r.magic) {
  case k_proc_magic: mount = "/proc"; break;
  case k_sysfs_magic: mount = "/sys"; break;
  case k_cgroup2_magic: mount = "/sys/fs/cgroup"; break;
  case k_cgroup_magic: mount = "/sys/fs/cgroup/<v1>"; break;
  default: mount = "<fs " + std::to_string(r.magic) + ">"; break;
  }
  if ((r.flags & MLTUNE_DRIFT_F_DEEP) != 0) {
    mount += "/...";
  }
  const unsigned depth = std::min<unsigned>(r.depth, MLTUNE_DRIFT_DEPTH);
  for (unsigned i = depth; i-- > 0;) {
    mount += "/" + str(r.path[i], sizeof r.path[i]);
  }
  return mount;
}

DriftWrite drift_write_of(const mltune_drift_key &k, const mltune_drift_rec &r, std::int64_t boot_to_unix_ns,
                          const std::map<std::uint64_t, std::string> &cgroups) {
  DriftWrite w;
  switch (r.op) {
  case MLTUNE_DRIFT_OP_SYSCTL: w.op = "sysctl"; break;
  case MLTUNE_DRIFT_OP_KERNFS: w.op = r.magic == k_sysfs_magic ? "sysfs" : "cgroup"; break;
  case MLTUNE_DRIFT_OP_IRQ_AFFINITY: w.op = "irq_affinity"; break;
  case MLTUNE_DRIFT_OP_SETATTR: w.op = "sched_setattr"; break;
  case MLTUNE_DRIFT_OP_SETSCHEDULER: w.op = "sched_setscheduler"; break;
  case MLTUNE_DRIFT_OP_SETPARAM: w.op = "sched_setparam"; break;
  case MLTUNE_DRIFT_OP_SETAFFINITY: w.op = "sched_setaffinity"; break;
  default: w.op = "op " + std::to_string(r.op); break;
  }
  if (k.kind == MLTUNE_DRIFT_FILE) {
    w.path = drift_path(r);
  } else {
    w.target = static_cast<int>(r.target);
  }
  w.comm = str(r.comm, sizeof r.comm);
  w.pid = static_cast<int>(r.pid);
  w.tgid = static_cast<int>(r.tgid);
  if (auto it = cgroups.find(r.cgid); it != cgroups.end()) {
    w.cgroup = it->second;
  }
  w.unix_ns = static_cast<std::int64_t>(r.boot_ns) + boot_to_unix_ns;
  w.time = local_time(w.unix_ns);
  w.new_value = strip_newline(str(r.new_value, sizeof r.new_value));
  if ((r.flags & MLTUNE_DRIFT_F_OLD) != 0) {
    w.old_value = str(r.old_value, sizeof r.old_value);
  }
  w.kernel = (r.flags & MLTUNE_DRIFT_F_KERNEL) != 0;
  w.truncated = (r.flags & MLTUNE_DRIFT_F_TRUNC) != 0;
  w.seq = r.seq;
  return w;
}

std::string describe(const DriftWrite &w) {
  std::string s = w.comm + " (pid " + std::to_string(w.tgid);
  if (w.pid != w.tgid) {
    s += ", thread " + std::to_string(w.pid);
  }
  if (!w.cgroup.empty()) {
    s += ", cgroup " + w.cgroup;
  }
  s += ")";
  if (w.kernel) {
    s += " from the kernel";
  }
  s += " wrote '" + w.new_value + (w.truncated ? "...'" : "'");
  if (w.old_value) {
    s += " (was '" + *w.old_value + "')";
  }
  if (w.target != 0) {
    s += " on thread " + std::to_string(w.target);
  }
  return s + " at " + w.time;
}

DriftLog::DriftLog(std::vector<DriftWrite> writes) : writes_(std::move(writes)) {
  std::ranges::sort(writes_, [](const DriftWrite &a, const DriftWrite &b) { return a.seq > b.seq; });
}

std::optional<DriftWrite> DriftLog::last_write(std::string_view node_path) const {
  const std::string want = setting_of(node_path);
  for (const auto &w : writes_) { // newest first
    if (!w.path.empty() && setting_of(w.path) == want) {
      return w;
    }
  }
  return std::nullopt;
}

std::optional<DriftWrite> DriftLog::last_sched(int tid) const {
  for (const auto &w : writes_) {
    if (w.path.empty() && w.target == tid) {
      return w;
    }
  }
  return std::nullopt;
}

#ifdef MLTUNE_HAVE_BPF

bool drift_built() {
  return true;
}

Status drift_start(const Sysroot &root) {
  if (!root.is_live()) {
    return input_error("the drift watcher runs on the live node only, not --sysroot " + root.root().string());
  }
  mltune_drift_cfg cfg{};
  char missing[512] = "";
  char err[256] = "";
  if (int ret = mltune_drift_start(MLTUNE_DRIFT_PIN_DIR, &cfg, missing, sizeof missing, err, sizeof err); ret != 0) {
    std::string msg = std::string("drift watcher: ") + err;
    if (-ret == EPERM || -ret == EACCES) {
      msg += " (why: " + bpf_refusal_reason(root) + ")";
    }
    return failure(msg, -ret);
  }
  return k_state.save(root, {local_time(clock_ns(CLOCK_REALTIME)), missing});
}

Result<bool> drift_stop(const Sysroot &root) {
  if (!root.is_live()) {
    return input_error("the drift watcher runs on the live node only, not --sysroot " + root.root().string());
  }
  const bool running = root.exists(MLTUNE_DRIFT_PIN_DIR);
  char err[256] = "";
  if (int ret = mltune_drift_stop(MLTUNE_DRIFT_PIN_DIR, err, sizeof err); ret != 0) {
    return failure(std::string("drift watcher: ") + err, -ret);
  }
  if (auto st = k_state.remove(root); !st) {
    return st.error();
  }
  return running;
}

DriftLog load_drift_log(const Sysroot &root) {
  if (!root.is_live() || !root.exists(std::string(MLTUNE_DRIFT_PIN_DIR) + "/writes")) {
    return {};
  }
  struct Ctx {
    std::vector<DriftWrite> out;
    std::int64_t offset;
    std::map<std::uint64_t, std::string> cgroups;
  } ctx{{}, clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_BOOTTIME), cgroup::by_id(root)};
  auto cb = [](void *c, const mltune_drift_key *k, const mltune_drift_rec *r) -> int {
    auto *x = static_cast<Ctx *>(c);
    x->out.push_back(drift_write_of(*k, *r, x->offset, x->cgroups));
    return 0;
  };
  char err[256] = "";
  if (mltune_drift_read(MLTUNE_DRIFT_PIN_DIR, cb, &ctx, err, sizeof err) != 0) {
    return {};
  }
  return DriftLog(std::move(ctx.out));
}

#else

bool drift_built() {
  return false;
}

Status drift_start(const Sysroot & /*root*/) {
  return failure("this mltunectl was built without the BPF toolchain: no drift watcher");
}

Result<bool> drift_stop(const Sysroot & /*root*/) {
  return false;
}

DriftLog load_drift_log(const Sysroot & /*root*/) {
  return {};
}

#endif

Result<DriftStatus> drift_status(const Sysroot &root) {
  DriftStatus s;
  s.built = drift_built();
  s.pin_dir = MLTUNE_DRIFT_PIN_DIR;
  s.running = root.exists(s.pin_dir + "/writes");
  auto st = k_state.load(root);
  if (!st) {
    return st.error();
  }
  if (*st) {
    s.started = (*st)->started;
    s.missing = (*st)->missing;
  }
  if (s.running) {
    s.records = load_drift_log(root).writes().size();
  }
  return s;
}

} // namespace mltune
