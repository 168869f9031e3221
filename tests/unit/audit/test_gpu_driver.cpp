// GPU driver findings of audit(): NVIDIA through a fake NVML library
// (audit/fake_nvml.c, loaded with dlopen as the real one is) and through a
// fake nvidia-smi; AMD through amdgpu's sysfs files on a fixture copy.
#include "audit/gpu_driver.hpp"
#include "mltune/audit.hpp"

#include "cli.hpp"
#include "fake_sysroot.hpp"
#include "topology_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace mltune;
using mltune::test::FakeSysroot;
using mltune::test::fixture;
using mltune::test::FixtureCopy;

namespace {

// The NVML configuration the fake library reads at nvmlInit_v2, removed at scope exit.
class FakeNvml {
public:
  explicit FakeNvml(const std::string &text) {
    char tmpl[] = "/tmp/mltune-nvml-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << text;
    ::setenv("MLTUNE_FAKE_NVML", path_.c_str(), 1);
  }
  ~FakeNvml() {
    ::unsetenv("MLTUNE_FAKE_NVML");
    std::filesystem::remove(path_);
  }
  FakeNvml(const FakeNvml &) = delete;
  FakeNvml &operator=(const FakeNvml &) = delete;

private:
  std::string path_;
};

// Every GPU of hgx-2s-8gpu as a healthy H100 reports itself.
std::string healthy_h100s() {
  std::string s = "driver=550.90.07\n";
  for (const auto *bus : {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}) {
    s += std::string("gpu 00000000:") + bus +
         ":00.0 persistence=1 ecc=1 ecc_pending=1 mig=0 mig_pending=0 app_gr=1980 default_gr=1980 app_mem=2619 "
         "default_mem=2619 reasons=0x1 remap_pending=0 remap_failure=0\n";
  }
  return s;
}

std::vector<Finding> gpu_findings(const Sysroot &root, const AuditOptions &opt) {
  const Profile training = *ProfileLoader().load("training");
  std::vector<Finding> out;
  for (auto &f : audit(training, root, opt)) {
    if (f.category == "gpu") {
      out.push_back(std::move(f));
    }
  }
  return out;
}

const Finding &find(const std::vector<Finding> &fs, std::string_view id) {
  static const Finding none{"<none>", "", Severity::ok, "", "", "", ""};
  for (const auto &f : fs) {
    if (f.id == id) {
      return f;
    }
  }
  return none;
}

AuditOptions with_nvml() {
  AuditOptions o;
  o.nvml_library = MLTUNE_FAKE_NVML_LIB;
  o.run_nvidia_smi = false;
  return o;
}

} // namespace

TEST(NvidiaDriver, HealthyGpusThroughNvml) {
  const FakeNvml nvml(healthy_h100s());
  const auto fs = gpu_findings(fixture("hgx-2s-8gpu"), with_nvml());
  EXPECT_EQ(find(fs, "gpu:driver").current,
            std::string("NVML (") + MLTUNE_FAKE_NVML_LIB + "), driver 550.90.07: 8 GPUs");
  for (const auto &f : fs) {
    EXPECT_EQ(f.severity, Severity::ok) << f.id << ": " << f.current;
  }
  EXPECT_EQ(find(fs, "gpu:persistence_mode").current, "Enabled on 8/8 GPUs");
  EXPECT_EQ(find(fs, "gpu:ecc").current, "fine on 8/8 GPUs");
  EXPECT_EQ(find(fs, "gpu:mps").current, "no MPS daemon");
  EXPECT_EQ(find(fs, "gpu:retired_pages").id, "<none>"); // H100s report row remapping instead
}

// The helper a static mltunectl runs where it cannot load NVML itself
// (another glibc): MLTUNE_NVML_HELPER names it and makes query_nvml() use
// it, as the glibc check does on such a node.
class HelperEnv {
public:
  explicit HelperEnv(const char *path) { ::setenv("MLTUNE_NVML_HELPER", path, 1); }
  ~HelperEnv() { ::unsetenv("MLTUNE_NVML_HELPER"); }
  HelperEnv(const HelperEnv &) = delete;
  HelperEnv &operator=(const HelperEnv &) = delete;
};

TEST(NvmlHelper, ReadsWhatThisProcessReads) {
  // A library that writes to stderr: the helper's JSON is still found.
  const FakeNvml nvml("stderr=nvml: a warning of the library's own\n"
                      "stderr=, written without a newline\n"
                      "driver=550.90.07\n"
                      "gpu 00000000:18:00.0 persistence=0 ecc=1 ecc_pending=0 app_gr=1410 default_gr=1980 "
                      "reasons=0x2 remap_pending=1 remap_failure=0\n"
                      "gpu 00000000:2A:00.0 persistence=1 mig=1 mig_pending=0\n");
  const auto direct = detail::read_nvml(MLTUNE_FAKE_NVML_LIB);
  ASSERT_TRUE(direct.ok()) << direct.error().message;
  const HelperEnv env(MLTUNE_NVML_HELPER_BIN);
  const auto helped = detail::query_nvml(MLTUNE_FAKE_NVML_LIB);
  ASSERT_TRUE(helped.ok()) << helped.error().message;
  EXPECT_EQ(helped->source, direct->source + " through mltune-nvml");
  EXPECT_EQ(detail::nvidia_state_json(*helped)["gpus"], detail::nvidia_state_json(*direct)["gpus"]);
  ASSERT_EQ(helped->gpus.size(), 2U);
  EXPECT_EQ(helped->gpus[0].pci, "0000:18:00.0");
  EXPECT_EQ(helped->gpus[0].persistence, false);
  EXPECT_EQ(helped->gpus[0].app_clock_gr, 1410U);
  EXPECT_EQ(helped->gpus[0].clocks_set_limit, true);
  EXPECT_EQ(helped->gpus[0].remap_pending, true);
  EXPECT_EQ(helped->gpus[1].mig, true);
  EXPECT_FALSE(helped->gpus[1].ecc.has_value()); // not reported stays unset through the JSON
  // The audit through the helper finds what it finds in-process.
  const auto fs = gpu_findings(fixture("hgx-2s-8gpu"), with_nvml());
  EXPECT_EQ(find(fs, "gpu:driver").current,
            std::string("NVML (") + MLTUNE_FAKE_NVML_LIB + "), driver 550.90.07 through mltune-nvml: 2 GPUs");
  EXPECT_EQ(find(fs, "gpu:persistence_mode").severity, Severity::warning);
}

TEST(NvmlHelper, ItsFailuresNameTheHelperAndTheCause) {
  {
    const HelperEnv env(MLTUNE_NVML_HELPER_BIN);
    const auto r = detail::query_nvml("/nonexistent/libnvidia-ml.so.1");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(std::string(MLTUNE_NVML_HELPER_BIN) + ": /nonexistent/libnvidia-ml.so.1"),
              std::string::npos)
        << r.error().message;
  }
  const HelperEnv missing("/nonexistent/mltune-nvml");
  const auto r = detail::query_nvml(MLTUNE_FAKE_NVML_LIB);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/mltune-nvml"), std::string::npos) << r.error().message;
}

// Every field survives the helper's JSON: written and read from one list.
TEST(NvmlHelper, EveryFieldRoundTrips) {
  detail::NvidiaState st{"NVML (libnvidia-ml.so.1), driver 550.90.07", {}};
  detail::NvidiaGpu g;
  g.pci = "0000:18:00.0";
  g.persistence = true;
  g.ecc = false;
  g.ecc_pending = true;
  g.mig = false;
  g.mig_pending = true;
  g.app_clock_gr = 1410;
  g.default_app_clock_gr = 1095;
  g.app_clock_mem = 2619;
  g.default_app_clock_mem = 2618;
  g.clocks_set_limit = true;
  g.retired_pages_pending = false;
  g.remap_pending = true;
  g.remap_failure = false;
  st.gpus.push_back(g);
  detail::NvidiaGpu unknown; // every field unknown (null in the JSON)
  unknown.pci = "0000:2a:00.0";
  st.gpus.push_back(unknown);
  const auto back = detail::nvidia_state_from_json(detail::nvidia_state_json(st).dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->source, st.source);
  ASSERT_EQ(back->gpus.size(), 2U);
  const detail::NvidiaGpu &b = back->gpus[0];
  EXPECT_EQ(b.pci, g.pci);
  EXPECT_EQ(b.persistence, g.persistence);
  EXPECT_EQ(b.ecc, g.ecc);
  EXPECT_EQ(b.ecc_pending, g.ecc_pending);
  EXPECT_EQ(b.mig, g.mig);
  EXPECT_EQ(b.mig_pending, g.mig_pending);
  EXPECT_EQ(b.app_clock_gr, g.app_clock_gr);
  EXPECT_EQ(b.default_app_clock_gr, g.default_app_clock_gr);
  EXPECT_EQ(b.app_clock_mem, g.app_clock_mem);
  EXPECT_EQ(b.default_app_clock_mem, g.default_app_clock_mem);
  EXPECT_EQ(b.clocks_set_limit, g.clocks_set_limit);
  EXPECT_EQ(b.retired_pages_pending, g.retired_pages_pending);
  EXPECT_EQ(b.remap_pending, g.remap_pending);
  EXPECT_EQ(b.remap_failure, g.remap_failure);
  EXPECT_EQ(back->gpus[1].pci, "0000:2a:00.0");
  EXPECT_FALSE(back->gpus[1].ecc.has_value());
  EXPECT_FALSE(back->gpus[1].app_clock_mem.has_value());
}

TEST(NvmlHelper, ItsOutputIsCheckedBeforeUse) {
  EXPECT_FALSE(detail::nvidia_state_from_json("").ok());
  EXPECT_FALSE(detail::nvidia_state_from_json("{\"source\": \"x\"}").ok());
  EXPECT_FALSE(detail::nvidia_state_from_json(R"({"source": "x", "gpus": [{"ecc": true}]})").ok());
  const auto bad = detail::nvidia_state_from_json(R"({"source": "x", "gpus": [{"pci": "0000:18:00.0", "ecc": 1}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "GPU 0000:18:00.0: 'ecc' is not true, false or null");
  const auto clock =
      detail::nvidia_state_from_json(R"({"source": "x", "gpus": [{"pci": "0000:18:00.0", "app_clock_gr": -5}]})");
  ASSERT_FALSE(clock.ok());
  EXPECT_EQ(clock.error().message, "GPU 0000:18:00.0: 'app_clock_gr' is not a whole number of MHz or null");
  const auto ok = detail::nvidia_state_from_json(R"({"source": "x", "gpus": [{"pci": "0000:18:00.0", "ecc": null}]})");
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(ok->gpus.at(0).ecc.has_value());
}

TEST(NvidiaDriver, EveryDriverFaultNamesItsGpu) {
  const FakeNvml nvml("gpu 00000000:18:00.0 persistence=0 ecc=1 ecc_pending=1\n"
                      "gpu 00000000:2A:00.0 persistence=1 ecc=0 ecc_pending=0\n"
                      "gpu 00000000:3A:00.0 persistence=1 ecc=1 ecc_pending=0\n"
                      "gpu 00000000:5D:00.0 persistence=1 mig=1 mig_pending=1\n"
                      "gpu 00000000:9A:00.0 persistence=1 mig=0 mig_pending=1\n"
                      "gpu 00000000:AB:00.0 persistence=1 app_gr=1410 default_gr=1980 reasons=0x2\n"
                      "gpu 00000000:BA:00.0 persistence=1 retired=1 remap_pending=1 remap_failure=0\n"
                      "gpu 00000000:DB:00.0 persistence=1 remap_pending=0 remap_failure=1\n");
  const auto fs = gpu_findings(fixture("hgx-2s-8gpu"), with_nvml());
  const std::map<std::string, std::pair<Severity, std::string>> want = {
      {"gpu:persistence_mode", {Severity::warning, "GPU 0 (0000:18:00.0)"}},
      {"gpu:ecc", {Severity::warning, "GPU 1 (0000:2a:00.0)"}},
      {"gpu:ecc_pending", {Severity::warning, "GPU 2 (0000:3a:00.0)"}},
      {"gpu:mig", {Severity::info, "GPU 3 (0000:5d:00.0)"}},
      {"gpu:mig_pending", {Severity::warning, "GPU 4 (0000:9a:00.0)"}},
      {"gpu:app_clocks", {Severity::warning, "GPU 5 (0000:ab:00.0)"}},
      {"gpu:clock_limit", {Severity::info, "GPU 5 (0000:ab:00.0)"}},
      {"gpu:retired_pages", {Severity::critical, "GPU 6 (0000:ba:00.0)"}},
      {"gpu:row_remap_pending", {Severity::warning, "GPU 6 (0000:ba:00.0)"}},
      {"gpu:row_remap_failure", {Severity::critical, "GPU 7 (0000:db:00.0)"}},
  };
  for (const auto &[id, sev_gpu] : want) {
    const Finding &f = find(fs, id);
    EXPECT_EQ(f.severity, sev_gpu.first) << id << ": " << f.current;
    EXPECT_NE(f.current.find(sev_gpu.second), std::string::npos) << id << ": " << f.current;
    EXPECT_FALSE(f.fix.empty()) << id;
  }
  // Only the faulty GPU is named.
  EXPECT_EQ(find(fs, "gpu:ecc").current, "ECC disabled on GPU 1 (0000:2a:00.0)");
  EXPECT_EQ(find(fs, "gpu:persistence_mode").current, "Enabled on 7/8 GPUs (off: GPU 0 (0000:18:00.0))");
}

TEST(NvidiaDriver, NvmlAbsentFallsBackToNvidiaSmiOrSaysWhy) {
  FixtureCopy c("hgx-2s-8gpu");
  AuditOptions opt = with_nvml();
  {
    const FakeNvml nvml("init=9\n"); // NVML_ERROR_DRIVER_NOT_LOADED
    const Finding f = find(gpu_findings(c.root(), opt), "gpu:driver");
    EXPECT_EQ(f.severity, Severity::info);
    EXPECT_NE(f.current.find("nvmlInit_v2: Driver Not Loaded"), std::string::npos) << f.current;
    EXPECT_NE(f.current.find("nvidia-smi not run"), std::string::npos) << f.current;
  }
  opt.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  EXPECT_NE(find(gpu_findings(c.root(), opt), "gpu:driver").current.find("/nonexistent/libnvidia-ml.so.1"),
            std::string::npos);
  // A fake nvidia-smi answering the three queries the way the driver prints them.
  c.set("/usr/bin/nvidia-smi",
        "#!/bin/sh\n"
        "case $1 in\n"
        "--query-gpu=pci.bus_id,persistence_mode,*)\n"
        "  echo '00000000:18:00.0, Enabled, Enabled, Enabled, Disabled, Disabled, 1980, 1980, 2619, 2619, [N/A]'\n"
        "  echo '00000000:2A:00.0, Disabled, Enabled, Disabled, Disabled, Disabled, 1980, 1980, 2619, 2619, [N/A]'\n"
        "  ;;\n"
        "--query-gpu=pci.bus_id,clocks_throttle_reasons.*)\n"
        "  echo '00000000:18:00.0, Not Active'; echo '00000000:2A:00.0, Active' ;;\n"
        "--query-remapped-rows=*)\n"
        "  echo '00000000:18:00.0, No, No'; echo '00000000:2A:00.0, Yes, No' ;;\n"
        "*) echo \"unknown $1\" >&2; exit 2 ;;\n"
        "esac\n");
  std::filesystem::permissions(c.root().path("/usr/bin/nvidia-smi"), std::filesystem::perms::owner_all);
  opt.run_nvidia_smi = true;
  const auto fs = gpu_findings(c.root(), opt);
  EXPECT_EQ(find(fs, "gpu:driver").current, "nvidia-smi: 2 GPUs");
  EXPECT_EQ(find(fs, "gpu:persistence_mode").severity, Severity::warning);
  EXPECT_EQ(find(fs, "gpu:ecc_pending").current, "an ECC mode change waits for a GPU reset on GPU 1 (0000:2a:00.0)");
  EXPECT_EQ(find(fs, "gpu:clock_limit").severity, Severity::info);
  EXPECT_EQ(find(fs, "gpu:row_remap_pending").current, "row remapping waiting for a GPU reset on GPU 1 (0000:2a:00.0)");
  EXPECT_EQ(find(fs, "gpu:retired_pages").id, "<none>"); // [N/A] on both
  // Neither interface: skipped with a note, never an error.
  opt.run_nvidia_smi = false;
  opt.nvml_library = "none";
  EXPECT_EQ(find(gpu_findings(c.root(), opt), "gpu:driver").current,
            "NVIDIA driver state not read: nvidia-smi not run");
}

TEST(NvidiaDriver, ReadersDirectly) {
  EXPECT_EQ(detail::sysfs_pci_address("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(detail::sysfs_pci_address("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(detail::sysfs_pci_address("0001:3b:00.0\n"), "0001:3b:00.0");
  for (const auto *bad : {"", "3b:00.0", "00000000:3B:00", "0000:3g:00.0", "00010000:3B:00.0"}) {
    EXPECT_EQ(detail::sysfs_pci_address(bad), "") << bad;
  }
  {
    const FakeNvml nvml(healthy_h100s());
    auto st = detail::query_nvml(MLTUNE_FAKE_NVML_LIB);
    ASSERT_TRUE(st) << st.error().message;
    ASSERT_EQ(st->gpus.size(), 8U);
    EXPECT_EQ(st->gpus[1].pci, "0000:2a:00.0");
    EXPECT_EQ(st->gpus[1].app_clock_mem, 2619U);
    EXPECT_EQ(st->gpus[1].clocks_set_limit, false);
    EXPECT_FALSE(st->gpus[1].retired_pages_pending);
  }
  EXPECT_FALSE(detail::query_nvml("/nonexistent.so"));
  EXPECT_FALSE(detail::query_nvidia_smi("/bin/false"));
}

// A current driver answers every per-GPU field in one --query-gpu, and the
// remapped-rows query runs beside it: two nvidia-smi runs, overlapping (the
// fake's main query waits, at most 10 s, until the other has started).
TEST(NvidiaDriver, NvidiaSmiRunsTwiceSideBySide) {
  char dir_tmpl[] = "/tmp/mltune-smi-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::filesystem::path dir = dir_tmpl;
  const std::string log = (dir / "log").string();
  const std::string smi = (dir / "nvidia-smi").string();
  std::ofstream(smi)
      << "#!/bin/sh\n"
         "echo \"$1\" >>" +
             log +
             "\n"
             "case $1 in\n"
             "--query-gpu=pci.bus_id,persistence_mode,*,clocks_throttle_reasons.applications_clocks_setting)\n"
             "  i=0; while [ ! -e " +
             log +
             ".remap ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done\n"
             "  [ -e " +
             log + ".remap ] && echo overlapped >>" + log +
             "\n"
             "  echo '00000000:18:00.0, Enabled, Enabled, Enabled, Disabled, Disabled, 1980, 1980, 2619, "
             "2619, [N/A], Active' ;;\n"
             "--query-remapped-rows=*) : >" +
             log +
             ".remap; echo '00000000:18:00.0, Yes, No' ;;\n"
             "*) exit 2 ;;\n"
             "esac\n";
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
  auto st = detail::query_nvidia_smi(smi);
  ASSERT_TRUE(st) << st.error().message;
  ASSERT_EQ(st->gpus.size(), 1U);
  EXPECT_EQ(st->gpus[0].persistence, true);
  EXPECT_EQ(st->gpus[0].clocks_set_limit, true);
  EXPECT_EQ(st->gpus[0].remap_pending, true);
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    lines.push_back(l);
  }
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string &l) { return l.starts_with("--query"); }), 2)
      << "nvidia-smi runs";
  EXPECT_NE(std::ranges::find(lines, "overlapped"), lines.end()) << "the two queries did not overlap";
  std::filesystem::remove_all(dir);
}

TEST(NvidiaDriver, MpsDaemonIsReported) {
  FakeSysroot fake;
  fake.set("/usr/bin/nvidia-cuda-mps-control", "");
  fake.set("/proc/4242/comm", "nvidia-cuda-mps\n");
  const FakeNvml nvml("gpu 00000000:18:00.0 persistence=1\n");
  AuditOptions opt = with_nvml();
  const Finding f = find(gpu_findings(fake.root(), opt), "gpu:mps");
  EXPECT_EQ(f.severity, Severity::info);
  EXPECT_EQ(f.current, "MPS daemon running (pid 4242)");
}

TEST(AmdDriver, PerformanceLevelAndPowerProfile) {
  FixtureCopy c("epyc-nps4-4gpu");
  const char *profiles_compute = "PROFILE_INDEX(NAME) CLOCK_TYPE(NAME) FPS UseRlcBusy MinActiveFreqType\n"
                                 " 0 BOOTUP_DEFAULT :\n"
                                 " 1 3D_FULL_SCREEN :\n"
                                 " 5 COMPUTE*:\n"
                                 " 6 CUSTOM :\n";
  const char *profiles_default = "PROFILE_INDEX(NAME) CLOCK_TYPE(NAME) FPS UseRlcBusy MinActiveFreqType\n"
                                 " 0 BOOTUP_DEFAULT*:\n"
                                 "                    0(       GFXCLK)       0       5       1\n"
                                 " 5 COMPUTE :\n";
  for (const auto *a : {"0000:03:00.0", "0000:23:00.0", "0000:43:00.0", "0000:63:00.0"}) {
    const std::string dev = std::string("/sys/bus/pci/devices/") + a;
    c.set(dev + "/power_dpm_force_performance_level", std::string(a) == "0000:43:00.0" ? "low\n" : "auto\n");
    c.set(dev + "/pp_power_profile_mode", std::string(a) == "0000:63:00.0" ? profiles_default : profiles_compute);
  }
  AuditOptions opt;
  opt.nvml_library = "none";
  const auto fs = gpu_findings(c.root(), opt);
  const Finding &level = find(fs, "gpu:amd:performance_level");
  EXPECT_EQ(level.severity, Severity::warning);
  EXPECT_EQ(level.current, "forced low: GPU 2 (0000:43:00.0) low");
  EXPECT_EQ(level.fix, "echo auto > /sys/bus/pci/devices/0000:43:00.0/power_dpm_force_performance_level");
  const Finding &profile = find(fs, "gpu:amd:power_profile");
  EXPECT_EQ(profile.severity, Severity::info);
  EXPECT_EQ(profile.current, "not COMPUTE: GPU 3 (0000:63:00.0) BOOTUP_DEFAULT");
  EXPECT_NE(profile.fix.find("echo 5 > /sys/bus/pci/devices/0000:63:00.0/pp_power_profile_mode"), std::string::npos);
  EXPECT_EQ(find(fs, "gpu:driver").id, "<none>"); // no NVIDIA GPU: nothing to say about its driver
  // Without the files (older kernels, other drivers) there is nothing to report.
  EXPECT_EQ(find(gpu_findings(fixture("epyc-nps4-4gpu"), opt), "gpu:amd:performance_level").id, "<none>");
}

// The CLI's --nvml option; and the static mltunectl loads the same library
// (tests/unit/audit/static_nvml.sh, a ctest of its own).
TEST(NvidiaDriver, AuditCliNamesTheLibrary) {
  const FakeNvml nvml(healthy_h100s());
  std::ostringstream out;
  std::ostringstream err;
  const int rc = cli::run({"--sysroot", mltune::test::fixture_dir("hgx-2s-8gpu").string(), "--json", "audit", "--nvml",
                           MLTUNE_FAKE_NVML_LIB, "--no-nvidia-smi"},
                          out, err);
  EXPECT_EQ(rc, 1) << err.str(); // the fixture's sysctls are untuned
  const auto j = nlohmann::json::parse(out.str());
  bool driver = false;
  for (const auto &f : j["findings"]) {
    if (f["id"] == "gpu:driver") {
      driver = true;
      EXPECT_NE(f["current"].get<std::string>().find("8 GPUs"), std::string::npos);
    }
  }
  EXPECT_TRUE(driver);
}
