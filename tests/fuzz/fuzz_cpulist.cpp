// libFuzzer target for the cpulist parser: any input either parses into a set
// whose formatted form parses back to the same set, or is an input error with
// a message naming the source.  Also drives resolve_cpuset()'s spec parsing.
#include "mltune/cpu_plan.hpp"
#include "mltune/cpulist.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  auto s = mltune::parse_cpuset(text, "fuzz");
  if (s.ok()) {
    const std::string f = s->str();
    auto again = mltune::parse_cpuset(f, "fuzz-roundtrip");
    if (!again.ok() || !(*again == *s) || again->str() != f) {
      std::abort();
    }
    if (!s->empty() && (s->first() >= mltune::k_max_cpus || !s->test(s->first()))) {
      std::abort();
    }
  } else if (s.error().kind != mltune::Errc::input || s.error().message.rfind("fuzz: ", 0) != 0) {
    std::abort();
  }
  mltune::CpuPlan plan;
  plan.online = mltune::CpuSet{0, 1, 2, 3, 4, 5, 6, 7};
  plan.housekeeping = mltune::CpuSet{0, 1};
  plan.feeder = mltune::CpuSet{6, 7};
  mltune::GpuPlan gpu;
  gpu.pci = "0000:82:00.0";
  gpu.gpu_node = 1;
  gpu.cpu_node = 1;
  gpu.feeder = plan.feeder;
  plan.gpus.push_back(gpu);
  (void)mltune::resolve_cpuset(text, plan);
  return 0;
}
