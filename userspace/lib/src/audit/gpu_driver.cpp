// GPU driver findings of audit(): the NVIDIA driver through NVML or
// nvidia-smi, AMD GPUs through amdgpu's sysfs files.  Documentation/topology.rst
// ("GPU driver audit") says where each fact is read from.
#include "audit/gpu_driver.hpp"

#include "audit/audit_parts.hpp"
#include "base/process.hpp"
#include "base/sysroot_fd.hpp"
#include "base/unique_fd.hpp"
#include "mltune/node_info.hpp"
#include "mltune/parse.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <map>
#include <sys/auxv.h>
#include <unistd.h>

namespace mltune::detail {

namespace {

// "Enabled"/"Yes"/"Active"/"1" -> true, "Disabled"/"No"/"Not Active"/"0" ->
// false, "[N/A]", "[Not Supported]" and anything else -> unset.
std::optional<bool> smi_bool(std::string_view v) {
  v = trim(v);
  if (v == "Enabled" || v == "Yes" || v == "Active" || v == "1") {
    return true;
  }
  if (v == "Disabled" || v == "No" || v == "Not Active" || v == "0") {
    return false;
  }
  return std::nullopt;
}

std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> f;
  size_t pos = 0;
  while (pos <= line.size()) {
    const size_t e = std::min(line.find(',', pos), line.size());
    f.emplace_back(trim(line.substr(pos, e - pos)));
    pos = e + 1;
  }
  return f;
}

// Each CSV row of a query's output whose first field is a bus id, by
// address; none when the query failed.
std::map<std::string, std::vector<std::string>> smi_rows(const Result<CommandResult> &out, size_t nfields) {
  std::map<std::string, std::vector<std::string>> rows;
  if (!out || out->status != 0) {
    return rows;
  }
  for (const auto line : split_lines(out->output)) {
    auto f = csv_fields(line);
    if (f.size() == nfields && !sysfs_pci_address(f[0]).empty()) {
      rows[sysfs_pci_address(f[0])] = std::move(f);
    }
  }
  return rows;
}

std::map<std::string, std::vector<std::string>> smi_rows(const std::vector<std::string> &argv, size_t nfields) {
  return smi_rows(run_command(argv, CommandOutput::stdout_only), nfields);
}

} // namespace

namespace {

// mltune-nvml beside this executable or in the package (find_helper()).
std::string nvml_helper() {
  return find_helper("mltune-nvml");
}

// The helper's reading of `library`: its JSON, or its first line of error
// (its own, or the dynamic loader's where this glibc is too old for it).
Result<NvidiaState> query_nvml_helper(const std::string &helper, const std::string &library) {
  auto r = run_command({helper, library}, CommandOutput::stdout_stderr);
  if (!r) {
    return failure(helper + ": " + r.error().message);
  }
  if (r->status != 0) {
    const std::string_view out = trim(r->output);
    return failure(helper + ": " + std::string(out.substr(0, out.find('\n'))));
  }
  // Its one line of JSON (the last line that starts with '{'), wherever the
  // library's own messages on stderr put it.
  std::string_view json = r->output;
  if (const auto at = json.rfind("\n{"); at != std::string_view::npos) {
    json.remove_prefix(at + 1);
  }
  auto st = nvidia_state_from_json(json.substr(0, json.find('\n')));
  if (!st) {
    return failure(helper + ": " + st.error().message);
  }
  st->source += " through mltune-nvml";
  return st;
}

} // namespace

Result<NvidiaState> query_nvml(const std::string &library) {
  if (const char *e = std::getenv("MLTUNE_NVML_HELPER"); e != nullptr && *e != '\0') { // NOLINT(concurrency-mt-unsafe)
    return query_nvml_helper(e, library);
  }
  // A statically linked program (no dynamic loader: AT_BASE is 0) can load
  // a shared library only where the system's glibc is the one it was linked
  // with: another maps a libc that dies in its early init (SIGFPE in
  // __libc_early_init, seen with libnvidia-ml.so.1 on an H200 node whose
  // glibc is newer). There nvidia-smi answers instead.
  if (::getauxval(AT_BASE) == 0) {
    const std::string linked = std::string("glibc ") + ::gnu_get_libc_version();
    auto sys = detail::run_command({"getconf", "GNU_LIBC_VERSION"}, detail::CommandOutput::stdout_only);
    const std::string found = sys && sys->status == 0 ? std::string(trim(sys->output)) : std::string("unknown");
    if (found != linked) {
      // The dynamically linked helper loads it with the system's glibc.
      if (const std::string helper = nvml_helper(); !helper.empty()) {
        return query_nvml_helper(helper, library);
      }
      return failure(library + ": not loaded: this mltunectl is statically linked with " + linked +
                     " and the system has " + found +
                     " (a static program loads shared libraries of its own glibc only), and mltune-nvml, which "
                     "would load it, is not installed (" MLTUNE_LIBEXEC_DIR "/mltune-nvml)");
    }
  }
  return read_nvml(library);
}

Result<NvidiaState> query_nvidia_smi(const std::string &path) {
  // Each nvidia-smi run costs an NVML start-up (about 24 ms on an H200
  // node): one --query-gpu for every per-GPU field, the remapped-rows query
  // (its own kind) beside it; only a driver that refuses a field of the
  // first (older than the throttle-reason field) gets the two narrower
  // queries after.
  static constexpr const char *k_fields = "pci.bus_id,persistence_mode,ecc.mode.current,ecc.mode.pending,"
                                          "mig.mode.current,mig.mode.pending,clocks.applications.graphics,"
                                          "clocks.default_applications.graphics,clocks.applications.memory,"
                                          "clocks.default_applications.memory,retired_pages.pending";
  static constexpr const char *k_reason = "clocks_throttle_reasons.applications_clocks_setting";
  const auto both = run_commands(
      {{path, std::string("--query-gpu=") + k_fields + "," + k_reason, "--format=csv,noheader,nounits"},
       {path, "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure", "--format=csv,noheader"}},
      CommandOutput::stdout_only);
  auto main = smi_rows(both[0], 12);
  std::map<std::string, std::vector<std::string>> reasons;
  if (main.empty()) {
    main = smi_rows({path, std::string("--query-gpu=") + k_fields, "--format=csv,noheader,nounits"}, 11);
    if (main.empty()) {
      return failure(path + " --query-gpu: no answer");
    }
    reasons = smi_rows({path, std::string("--query-gpu=pci.bus_id,") + k_reason, "--format=csv,noheader"}, 2);
  } else {
    for (const auto &[addr, f] : main) {
      reasons[addr] = {f[0], f[11]};
    }
  }
  const auto remap = smi_rows(both[1], 3);
  NvidiaState st;
  st.source = "nvidia-smi";
  for (const auto &[addr, f] : main) {
    NvidiaGpu g;
    g.pci = addr;
    g.persistence = smi_bool(f[1]);
    g.ecc = smi_bool(f[2]);
    g.ecc_pending = smi_bool(f[3]);
    g.mig = smi_bool(f[4]);
    g.mig_pending = smi_bool(f[5]);
    auto mhz = [](const std::string &v) { return parse_int<unsigned>(v); };
    g.app_clock_gr = mhz(f[6]);
    g.default_app_clock_gr = mhz(f[7]);
    g.app_clock_mem = mhz(f[8]);
    g.default_app_clock_mem = mhz(f[9]);
    g.retired_pages_pending = smi_bool(f[10]);
    if (const auto r = reasons.find(addr); r != reasons.end()) {
      g.clocks_set_limit = smi_bool(r->second[1]);
    }
    if (const auto r = remap.find(addr); r != remap.end()) {
      g.remap_pending = smi_bool(r->second[1]);
      g.remap_failure = smi_bool(r->second[2]);
    }
    st.gpus.push_back(std::move(g));
  }
  return st;
}

namespace {

// "GPU 3 (0000:5d:00.0)" when the topology knows the address.
std::string gpu_name(const Topology &t, const std::string &pci) {
  for (const auto &g : t.gpus) {
    if (g.pci.address == pci) {
      return "GPU " + std::to_string(g.index) + " (" + pci + ")";
    }
  }
  return pci;
}

// A per-GPU check: `bad` says whether a GPU is at fault (unset where the
// GPU does not report the fact); one finding covers every GPU.
struct GpuCheck {
  const char *id;
  Severity severity;
  const char *what;        // "ECC disabled"
  const char *recommended; // "ECC enabled"
  const char *impact;
  const char *fix;
  std::optional<bool> (*bad)(const NvidiaGpu &);
};

std::optional<bool> differs(const std::optional<bool> &a, const std::optional<bool> &b) {
  return a && b ? std::optional<bool>(*a != *b) : std::nullopt;
}

std::optional<bool> clocks_lowered(const NvidiaGpu &g) {
  if (!g.app_clock_gr || !g.default_app_clock_gr) {
    return std::nullopt;
  }
  return *g.app_clock_gr < *g.default_app_clock_gr ||
         (g.app_clock_mem && g.default_app_clock_mem && *g.app_clock_mem < *g.default_app_clock_mem);
}

constexpr const char *k_reset_fix = "drain the node and reset the GPU (nvidia-smi -r) or reboot";

constexpr GpuCheck k_gpu_checks[] = {
    {"gpu:ecc", Severity::warning, "ECC disabled", "ECC enabled",
     "Without ECC a flipped bit in GPU memory silently corrupts weights or gradients",
     "nvidia-smi -e 1, then reset the GPU (nvidia-smi -r) or reboot",
     [](const NvidiaGpu &g) { return g.ecc ? std::optional<bool>(!*g.ecc) : std::nullopt; }},
    {"gpu:ecc_pending", Severity::warning, "an ECC mode change waits for a GPU reset", "no pending ECC change",
     "The GPU runs in a mode other than the configured one until it is reset", k_reset_fix,
     [](const NvidiaGpu &g) { return differs(g.ecc, g.ecc_pending); }},
    {"gpu:mig", Severity::info, "MIG mode enabled", "MIG disabled on GPUs that run whole training jobs",
     "With MIG a job sees GPU instances, not the whole GPU: a fraction of its SMs and memory",
     "nvidia-smi -mig 0 -i <GPU> where whole GPUs are wanted", [](const NvidiaGpu &g) { return g.mig; }},
    {"gpu:mig_pending", Severity::warning, "a MIG mode change waits for a GPU reset", "no pending MIG change",
     "The GPU runs in a MIG mode other than the configured one until it is reset", k_reset_fix,
     [](const NvidiaGpu &g) { return differs(g.mig, g.mig_pending); }},
    {"gpu:app_clocks", Severity::warning, "application clocks below the default", "application clocks at their default",
     "Kernels run at the lowered clock: every step takes longer", "nvidia-smi -rac (reset application clocks)",
     clocks_lowered},
    {"gpu:clock_limit", Severity::info, "clocks held by an application-clocks or locked-clocks setting",
     "clocks free to boost", "A clock lock set for determinism or power caps every kernel's speed",
     "nvidia-smi -rgc -rmc (reset locked clocks) and nvidia-smi -rac, unless the lock is intended",
     [](const NvidiaGpu &g) { return g.clocks_set_limit; }},
    {"gpu:retired_pages", Severity::critical, "retired pages waiting for a GPU reset", "no pending page retirement",
     "Memory pages with errors stay in use until the GPU is reset", k_reset_fix,
     [](const NvidiaGpu &g) { return g.retired_pages_pending; }},
    {"gpu:row_remap_pending", Severity::warning, "row remapping waiting for a GPU reset", "no pending row remapping",
     "Rows with uncorrectable errors stay in use until the GPU is reset", k_reset_fix,
     [](const NvidiaGpu &g) { return g.remap_pending; }},
    {"gpu:row_remap_failure", Severity::critical, "row remapping failed", "no row remapping failure",
     "The GPU has run out of spare rows for failing memory: its memory can no longer be trusted",
     "take the node out of service and have the GPU replaced", [](const NvidiaGpu &g) { return g.remap_failure; }},
};

void per_gpu(const Topology &t, const NvidiaState &st, const GpuCheck &c, std::vector<Finding> &out) {
  unsigned known = 0;
  std::string list;
  for (const auto &g : st.gpus) {
    const auto b = c.bad(g);
    if (!b) {
      continue;
    }
    ++known;
    if (*b) {
      list += (list.empty() ? "" : ", ") + gpu_name(t, g.pci);
    }
  }
  if (known == 0) {
    return; // no GPU reports it
  }
  Finding f{c.id, "gpu", Severity::ok, "", c.recommended, c.impact, ""};
  if (list.empty()) {
    f.current = "fine on " + std::to_string(known) + "/" + std::to_string(known) + " GPUs";
  } else {
    f.severity = c.severity;
    f.current = std::string(c.what) + " on " + list;
    f.fix = c.fix;
  }
  out.push_back(std::move(f));
}

void nvidia_findings(const Sysroot &root, const Topology &t, const NvidiaState &st, std::vector<Finding> &out) {
  unsigned pm_on = 0;
  std::string pm_off;
  for (const auto &g : st.gpus) {
    if (g.persistence.value_or(false)) {
      ++pm_on;
    } else {
      pm_off += (pm_off.empty() ? "" : ", ") + gpu_name(t, g.pci);
    }
  }
  Finding pm{"gpu:persistence_mode",
             "gpu",
             Severity::ok,
             "Enabled on " + std::to_string(pm_on) + "/" + std::to_string(st.gpus.size()) + " GPUs",
             "Enabled on all GPUs",
             "Without persistence the driver tears GPUs down between jobs: seconds of start-up latency",
             {}};
  if (!pm_off.empty()) {
    pm.severity = Severity::warning;
    pm.current += " (off: " + pm_off + ")";
    pm.fix = "systemctl enable --now nvidia-persistenced  (or: nvidia-smi -pm 1)";
  }
  out.push_back(std::move(pm));
  for (const auto &c : k_gpu_checks) {
    per_gpu(t, st, c, out);
  }
  const int mps = installed_process_pid(root, "nvidia-cuda-mps",
                                        {"/usr/bin/nvidia-cuda-mps-control", "/usr/local/bin/nvidia-cuda-mps-control"});
  out.push_back(Finding{"gpu:mps", "gpu", mps > 0 ? Severity::info : Severity::ok,
                        mps > 0 ? "MPS daemon running (pid " + std::to_string(mps) + ")" : "no MPS daemon",
                        "MPS only where processes are meant to share GPUs",
                        "Under MPS the processes of all jobs share each GPU's SMs through one server",
                        mps > 0 ? "echo quit | nvidia-cuda-mps-control, where GPUs are not to be shared" : ""});
}

bool is_executable(const Sysroot &root, std::string_view abs) {
  // Opened inside the tree; X_OK as the file's mode says.
  const UniqueFd fd = detail::open_node(root, abs, O_PATH);
  return fd && ::faccessat(fd.get(), "", X_OK, AT_EMPTY_PATH) == 0;
}

// The active profile of pp_power_profile_mode (the row marked '*') and the
// index of COMPUTE; either may be unknown.
struct PowerProfiles {
  std::string active;
  std::string compute_index;
};

PowerProfiles power_profiles(std::string_view text) {
  PowerProfiles p;
  for (const auto line : split_lines(text)) {
    const auto w = split_words(line);
    if (w.size() < 2 || !parse_int<unsigned>(w[0])) {
      continue;
    }
    std::string name(w[1]);
    const auto colon = line.find(':');
    const bool active = line.substr(0, colon).find('*') != std::string_view::npos;
    std::erase_if(name, [](char c) { return c == '*' || c == ':'; });
    if (active) {
      p.active = name;
    }
    if (name == "COMPUTE") {
      p.compute_index = std::string(w[0]);
    }
  }
  return p;
}

void amd_findings(const Sysroot &root, const Topology &t, std::vector<Finding> &out) {
  std::string low;
  std::string not_compute;
  std::string fix_level;
  std::string fix_profile;
  unsigned levels = 0;
  unsigned profiles = 0;
  for (const auto &g : t.gpus) {
    if (g.vendor != "AMD") {
      continue;
    }
    const std::string dev = "/sys/bus/pci/devices/" + g.pci.address;
    const std::string name = "GPU " + std::to_string(g.index) + " (" + g.pci.address + ")";
    if (auto level = root.read_value(dev + "/power_dpm_force_performance_level")) {
      ++levels;
      if (*level == "low" || *level == "profile_min_sclk" || *level == "profile_min_mclk") {
        low += (low.empty() ? "" : ", ") + name + " " + *level;
        fix_level +=
            (fix_level.empty() ? "" : "; ") + std::string("echo auto > ") + dev + "/power_dpm_force_performance_level";
      }
    }
    if (auto modes = root.read(dev + "/pp_power_profile_mode")) {
      const PowerProfiles p = power_profiles(*modes);
      if (p.active.empty()) {
        continue;
      }
      ++profiles;
      if (p.active != "COMPUTE") {
        not_compute += (not_compute.empty() ? "" : ", ") + name + " " + p.active;
        if (!p.compute_index.empty()) {
          fix_profile += (fix_profile.empty() ? "" : "; ") + std::string("echo manual > ") + dev +
                         "/power_dpm_force_performance_level; echo " + p.compute_index + " > " + dev +
                         "/pp_power_profile_mode";
        }
      }
    }
  }
  if (levels > 0) {
    out.push_back(
        Finding{"gpu:amd:performance_level", "gpu", low.empty() ? Severity::ok : Severity::warning,
                low.empty() ? "no GPU forced low (" + std::to_string(levels) + " GPUs)" : "forced low: " + low,
                "auto (or high / a profile_peak set on purpose)",
                "A GPU forced to its lowest clocks runs every kernel slowly", fix_level});
  }
  if (profiles > 0) {
    out.push_back(Finding{
        "gpu:amd:power_profile", "gpu", not_compute.empty() ? Severity::ok : Severity::info,
        not_compute.empty() ? "COMPUTE on " + std::to_string(profiles) + " GPUs" : "not COMPUTE: " + not_compute,
        "COMPUTE", "The power profile tunes the clock governor for the workload it names", fix_profile});
  }
}

} // namespace

void audit_gpu_driver(const Sysroot &root, const Topology &t, const AuditOptions &opt, std::vector<Finding> &out) {
  const bool nvidia_gpus = std::ranges::any_of(t.gpus, [](const Gpu &g) { return g.vendor == "NVIDIA"; });
  std::string library = opt.nvml_library;
  if (library.empty()) {
    library = root.is_live() ? "libnvidia-ml.so.1" : "none";
  }
  std::vector<std::string> notes;
  std::optional<NvidiaState> st;
  if (library != "none") {
    auto r = query_nvml(library);
    if (r && !r->gpus.empty()) {
      st = std::move(*r);
    } else {
      notes.push_back(r ? "NVML reports no GPU" : "NVML: " + r.error().message);
    }
  }
  // Where the driver's packages put it: the distribution's, NVIDIA's
  // container toolkit's and the .run installer's places.
  std::string smi = "/usr/bin/nvidia-smi";
  for (const char *p : {"/usr/local/nvidia/bin/nvidia-smi", "/usr/local/bin/nvidia-smi"}) {
    if (!is_executable(root, smi) && is_executable(root, p)) {
      smi = p;
    }
  }
  if (!st && opt.run_nvidia_smi && is_executable(root, smi)) {
    auto r = query_nvidia_smi(root.path(smi).string());
    if (r) {
      st = std::move(*r);
    } else {
      notes.push_back(r.error().message);
    }
  } else if (!st) {
    notes.emplace_back(opt.run_nvidia_smi ? "no " + smi : "nvidia-smi not run");
  }
  if (st) {
    out.push_back(Finding{"gpu:driver", "gpu", Severity::ok,
                          st->source + ": " + std::to_string(st->gpus.size()) + " GPUs", "", "", ""});
    nvidia_findings(root, t, *st, out);
  } else if (nvidia_gpus) {
    std::string why;
    for (const auto &n : notes) {
      why += (why.empty() ? "" : "; ") + n;
    }
    out.push_back(Finding{"gpu:driver", "gpu", Severity::info, "NVIDIA driver state not read: " + why,
                          "NVML (libnvidia-ml.so.1) or nvidia-smi",
                          "Persistence, ECC, MIG, clocks and memory retirement go unchecked",
                          "install the NVIDIA driver's NVML library and nvidia-smi, or name the library with "
                          "mltunectl audit --nvml PATH"});
  }
  amd_findings(root, t, out);
}

} // namespace mltune::detail
