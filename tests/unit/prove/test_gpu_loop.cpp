// mltune-gpu-loop (userspace/helpers/mltune_gpu_loop.cpp) run against a
// fake libcuda (prove/fake_cuda.c): its JSON, the driver calls it makes
// (from the fake's call log), its messages and exit statuses.
#include "base/process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <vector>

using mltune::detail::CommandOutput;
using mltune::detail::CommandResult;
using mltune::detail::run_command;

namespace {

// A temporary folder with the fake's configuration, named by
// $MLTUNE_FAKE_CUDA while it lives; its call log is log().
class FakeCuda {
public:
  explicit FakeCuda(const std::string &config) {
    std::string tmpl = "/tmp/mltune-cuda-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    dir_ = tmpl;
    std::ofstream(dir_ / "config") << config << "log=" << (dir_ / "log").string() << "\n";
    ::setenv("MLTUNE_FAKE_CUDA", (dir_ / "config").c_str(), 1);
  }
  ~FakeCuda() {
    ::unsetenv("MLTUNE_FAKE_CUDA");
    std::filesystem::remove_all(dir_);
  }
  FakeCuda(const FakeCuda &) = delete;
  FakeCuda &operator=(const FakeCuda &) = delete;

  // The calls the helper made, in order.
  [[nodiscard]] std::vector<std::string> log() const {
    std::vector<std::string> calls;
    std::ifstream in(dir_ / "log");
    for (std::string line; std::getline(in, line);) {
      calls.push_back(line);
    }
    return calls;
  }

private:
  std::filesystem::path dir_;
};

CommandResult gpu_loop(std::vector<std::string> args, CommandOutput output = CommandOutput::stdout_stderr) {
  args.insert(args.begin(), MLTUNE_GPU_LOOP_BIN);
  auto r = run_command(args, output);
  if (!r) {
    throw std::runtime_error(r.error().message);
  }
  return *r;
}

std::vector<std::string> with_fake(std::vector<std::string> args) {
  args.insert(args.begin(), {"--lib", MLTUNE_FAKE_CUDA_LIB});
  return args;
}

std::map<std::string, int> count(const std::vector<std::string> &calls) {
  std::map<std::string, int> n;
  for (const auto &c : calls) {
    ++n[c];
  }
  return n;
}

// Every acquiring call that succeeded (all but `failed`, which the fake
// made fail) was undone as often, and in reverse order.
void expect_all_released(const std::vector<std::string> &calls, const std::string &failed = "") {
  auto n = count(calls);
  if (!failed.empty()) {
    --n[failed];
  }
  EXPECT_EQ(n["cuDevicePrimaryCtxRetain"], n["cuDevicePrimaryCtxRelease_v2"]);
  EXPECT_EQ(n["cuStreamCreate"], n["cuStreamDestroy_v2"]);
  EXPECT_EQ(n["cuMemHostAlloc"], n["cuMemFreeHost"]);
  EXPECT_EQ(n["cuMemAlloc_v2"], n["cuMemFree_v2"]);
  EXPECT_EQ(n["cuModuleLoadData"], n["cuModuleUnload"]);
  EXPECT_EQ(n["cuMemHostRegister_v2"], n["cuMemHostUnregister"]);
  const auto pos = [&](const std::string &name) { return std::ranges::find(calls, name) - calls.begin(); };
  const std::vector<const char *> undo = {"cuModuleUnload", "cuMemFree_v2", "cuMemFreeHost", "cuStreamDestroy_v2",
                                          "cuDevicePrimaryCtxRelease_v2"};
  for (size_t i = 1; i < undo.size(); ++i) {
    if (n[undo[i - 1]] > 0 && n[undo[i]] > 0) {
      EXPECT_LT(pos(undo[i - 1]), pos(undo[i])) << undo[i - 1] << " before " << undo[i];
    }
  }
}

TEST(GpuLoop, TimesEveryStepAndFreesWhatItAllocated) {
  const FakeCuda fake("name=Fake H100 80GB HBM3\nsleep_us=200\n");
  const auto r = gpu_loop(with_fake({"--steps", "50", "--register-mib", "4"}), CommandOutput::stdout_only);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::ordered_json::parse(r.output);
  std::vector<std::string> keys;
  for (const auto &[k, v] : j.items()) {
    keys.push_back(k);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"device", "name", "steps", "bytes", "mean_us", "p50_us", "p99_us",
                                            "p999_us", "max_us", "register_mib", "register_ms_per_gib", "cpu"}))
      << r.output;
  EXPECT_EQ(j["device"], 0);
  EXPECT_EQ(j["name"], "Fake H100 80GB HBM3");
  EXPECT_EQ(j["steps"], 50);
  EXPECT_EQ(j["bytes"], 262144);
  EXPECT_EQ(j["register_mib"], 4);
  EXPECT_TRUE(j["register_ms_per_gib"].is_number()) << r.output;
  EXPECT_GE(j["register_ms_per_gib"].get<double>(), 0.0);
  EXPECT_GE(j["cpu"].get<int>(), 0);
  // cuStreamSynchronize sleeps 200 us: every step takes at least that.
  const double p50 = j["p50_us"];
  const double p99 = j["p99_us"];
  const double p999 = j["p999_us"];
  const double max = j["max_us"];
  EXPECT_GE(p50, 200.0) << r.output;
  EXPECT_LE(p50, p99);
  EXPECT_LE(p99, p999);
  EXPECT_LE(p999, max);
  EXPECT_GE(j["mean_us"].get<double>(), 200.0);
  EXPECT_LE(j["mean_us"].get<double>(), max);

  const auto calls = fake.log();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), "cuInit");
  auto n = count(calls);
  // 100 warm-up steps, then the 50 timed: one copy, launch and sync each.
  EXPECT_EQ(n["cuMemcpyHtoDAsync_v2"], 150);
  EXPECT_EQ(n["cuLaunchKernel"], 150);
  EXPECT_EQ(n["cuStreamSynchronize"], 150);
  const auto first = std::ranges::find(calls, std::string("cuMemcpyHtoDAsync_v2"));
  ASSERT_GE(calls.end() - first, 450);
  for (auto it = first; it < first + 450; it += 3) {
    ASSERT_EQ(*it, "cuMemcpyHtoDAsync_v2");
    ASSERT_EQ(*(it + 1), "cuLaunchKernel");
    ASSERT_EQ(*(it + 2), "cuStreamSynchronize");
  }
  EXPECT_EQ(n["cuDevicePrimaryCtxRetain"], 1);
  EXPECT_EQ(n["cuMemHostAlloc"], 1);
  EXPECT_EQ(n["cuMemAlloc_v2"], 1);
  EXPECT_EQ(n["cuMemHostRegister_v2"], 1);
  EXPECT_EQ(n["cuGetErrorName"], 0); // no error
  expect_all_released(calls);
  EXPECT_EQ(calls.back(), "cuDevicePrimaryCtxRelease_v2");
}

TEST(GpuLoop, RegisterMibZeroSkipsTheRegister) {
  const FakeCuda fake("");
  const auto r = gpu_loop(with_fake({"--steps", "5", "--register-mib", "0", "--bytes", "4096", "--device", "0"}),
                          CommandOutput::stdout_only);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["name"], "Fake CUDA GPU");
  EXPECT_EQ(j["steps"], 5);
  EXPECT_EQ(j["bytes"], 4096);
  EXPECT_EQ(j["register_mib"], 0);
  EXPECT_TRUE(j["register_ms_per_gib"].is_null());
  auto n = count(fake.log());
  EXPECT_EQ(n["cuMemHostRegister_v2"], 0);
  EXPECT_EQ(n["cuLaunchKernel"], 105);
}

TEST(GpuLoop, ACudaErrorNamesTheCallAndTheError) {
  const FakeCuda fake("fail=cuLaunchKernel\n");
  const auto r = gpu_loop(with_fake({"--steps", "50", "--register-mib", "4"}));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "mltune-gpu-loop: error: cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access "
                      "was encountered)\n");
  const auto calls = fake.log();
  auto n = count(calls);
  EXPECT_EQ(n["cuLaunchKernel"], 1);
  EXPECT_EQ(n["cuStreamSynchronize"], 0);
  expect_all_released(calls);
  EXPECT_EQ(n["cuDevicePrimaryCtxRelease_v2"], 1);
}

TEST(GpuLoop, AnErrorWithoutANameGivesItsNumber) {
  const FakeCuda fake("fail=cuMemAlloc\nfail_code=12345\n");
  const auto r = gpu_loop(with_fake({"--steps", "5"}));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "mltune-gpu-loop: error: cuMemAlloc_v2: CUresult 12345\n");
  const auto calls = fake.log();
  EXPECT_EQ(count(calls)["cuMemFree_v2"], 0); // nothing to free
  expect_all_released(calls, "cuMemAlloc_v2");
}

TEST(GpuLoop, AMissingDeviceIsNamedWithTheCount) {
  const FakeCuda fake("devices=1\n");
  const auto r = gpu_loop(with_fake({"--device", "3", "--steps", "5"}));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "mltune-gpu-loop: error: no device 3: the driver reports 1 device\n");
  auto n = count(fake.log());
  EXPECT_EQ(n["cuDevicePrimaryCtxRetain"], 0);
}

TEST(GpuLoop, NoDriverLibraryExits3) {
  const auto r = gpu_loop({"--lib", "/nonexistent/libcuda.so.1", "--steps", "5"});
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_EQ(r.output.rfind("mltune-gpu-loop: error: cannot load /nonexistent/libcuda.so.1: ", 0), 0U) << r.output;
  // A library that is not the driver: a failure, not "no driver".
  const auto libc = gpu_loop({"--lib", "libc.so.6", "--steps", "5"});
  EXPECT_EQ(libc.status, 1) << libc.output;
  EXPECT_EQ(libc.output, "mltune-gpu-loop: error: libc.so.6: no cuInit: not the CUDA driver library\n");
}

TEST(GpuLoop, TheEnvironmentNamesTheDefaultLibrary) {
  const FakeCuda fake("name=from env\n");
  ::setenv("MLTUNE_CUDA_LIB", MLTUNE_FAKE_CUDA_LIB, 1);
  auto r = gpu_loop({"--steps", "2", "--register-mib", "0"}, CommandOutput::stdout_only);
  EXPECT_EQ(r.status, 0) << r.output;
  // --lib wins over the environment.
  ::setenv("MLTUNE_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
  r = gpu_loop(with_fake({"--steps=2", "--register-mib=0"}), CommandOutput::stdout_only);
  ::unsetenv("MLTUNE_CUDA_LIB");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["name"], "from env");
}

TEST(GpuLoop, AMissingConfigurationIsTheDefaults) {
  ::setenv("MLTUNE_FAKE_CUDA", "/nonexistent/fake-cuda.conf", 1);
  const auto r = gpu_loop(with_fake({"--steps", "3", "--register-mib", "1"}), CommandOutput::stdout_only);
  ::unsetenv("MLTUNE_FAKE_CUDA");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["name"], "Fake CUDA GPU");
}

TEST(GpuLoop, BadArgumentsExit2) {
  for (const auto &args : std::vector<std::vector<std::string>>{{"--steps", "0"},
                                                                {"--steps", "10x"},
                                                                {"--steps", "-1"},
                                                                {"--bytes", "2"},
                                                                {"--device", "-1"},
                                                                {"--register-mib", ""},
                                                                {"--lib="},
                                                                {"--device"},
                                                                {"--bogus", "1"},
                                                                {"extra"}}) {
    const auto r = gpu_loop(with_fake(args));
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.output;
    EXPECT_EQ(r.output.rfind("mltune-gpu-loop: error: ", 0), 0U) << r.output;
  }
  const auto r = gpu_loop({"--steps", "0"});
  EXPECT_NE(r.output.find("--steps: '0' is not a whole number from 1 to"), std::string::npos) << r.output;
  const auto help = gpu_loop({"--help"}, CommandOutput::stdout_only);
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.output.rfind("usage: mltune-gpu-loop [--device N]", 0), 0U) << help.output;
}

} // namespace

TEST(GpuLoop, CpuPinsItBeforeItStarts) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) {
      last = c;
    }
  }
  const FakeCuda fake("");
  const auto r = gpu_loop(with_fake({"--steps", "20", "--register-mib", "0", "--cpu", std::to_string(last)}),
                          CommandOutput::stdout_only);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output).at("cpu").get<int>(), last);
  const auto bad = gpu_loop(with_fake({"--steps", "20", "--cpu", std::to_string(CPU_SETSIZE - 1)}));
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("--cpu 1023: sched_setaffinity"), std::string::npos) << bad.output;
}
