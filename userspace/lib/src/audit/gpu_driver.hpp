// The NVIDIA driver's view of its GPUs, through NVML (libnvidia-ml, loaded
// with dlopen at run time so that mltune neither links against nor requires
// the driver) or through `nvidia-smi --query-gpu` where NVML cannot be
// loaded.  audit/gpu_driver.cpp turns it into findings; the unit tests drive
// both readers against a fake NVML library and a fake nvidia-smi.
// Library-private: not part of the installed API.
#pragma once

#include "mltune/result.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mltune::detail {

// One GPU; every field is unset where the driver does not support or report it
// (ECC and MIG on consumer GPUs, row remapping before Ampere, ...).
struct NvidiaGpu {
  std::string pci; // "0000:18:00.0", as sysfs names it
  std::optional<bool> persistence;
  std::optional<bool> ecc, ecc_pending;
  std::optional<bool> mig, mig_pending;
  std::optional<unsigned> app_clock_gr, default_app_clock_gr;   // MHz
  std::optional<unsigned> app_clock_mem, default_app_clock_mem; // MHz
  // Clocks held down by an application-clocks or locked-clocks setting
  // (clock event reason "applications clocks setting").
  std::optional<bool> clocks_set_limit;
  std::optional<bool> retired_pages_pending;
  std::optional<bool> remap_pending, remap_failure;
};

struct NvidiaState {
  std::string source; // "NVML (libnvidia-ml.so.1), driver 550.90.07" or "nvidia-smi"
  std::vector<NvidiaGpu> gpus;
};

// dlopen(library), nvmlInit_v2, one NvidiaGpu per device, nvmlShutdown,
// dlclose.  A failure names the step ("libnvidia-ml.so.1: cannot open shared
// object file ...", "nvmlInit_v2: Driver Not Loaded"). audit/nvml.cpp.
Result<NvidiaState> read_nvml(const std::string &library);

// read_nvml() in this process, or through the helper mltune-nvml where this
// process cannot load the library: a statically linked mltunectl on a
// system whose glibc is not the one it was linked with. The helper is
// $MLTUNE_NVML_HELPER (then always used), else mltune-nvml beside this
// executable (the build tree), else MLTUNE_LIBEXEC_DIR's (the package).
Result<NvidiaState> query_nvml(const std::string &library);

// What mltune-nvml prints and query_nvml() reads back: {"source": ...,
// "gpus": [{"pci": ..., "ecc": true|false|null, ...}]}.
nlohmann::json nvidia_state_json(const NvidiaState &st);
Result<NvidiaState> nvidia_state_from_json(std::string_view text);

// `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` with the
// program at `path`, plus the optional clock-reason and remapped-rows
// queries (older drivers lack them; their failure leaves the fields unset).
Result<NvidiaState> query_nvidia_smi(const std::string &path);

// "00000000:3B:00.0" (NVML and nvidia-smi) -> "0000:3b:00.0"; "" when malformed.
std::string sysfs_pci_address(std::string_view bus_id);

} // namespace mltune::detail
