// The NVML reader (audit/gpu_driver.hpp): dlopen of libnvidia-ml, one
// NvidiaGpu per device, and the JSON form of what it read. Built into
// libmltune and, on its own, into the dynamically linked helper mltune-nvml
// (userspace/helpers), which a statically linked mltunectl runs where the
// system's glibc is not the one it was linked with: so this file depends on
// nothing but headers.
#include "audit/gpu_driver.hpp"

#include "mltune/parse.hpp"

#include <cctype>
#include <dlfcn.h>
#include <memory>

namespace mltune::detail {

namespace {

// The NVML ABI this reader uses (nvml.h): return codes, an opaque device
// handle, enable states and nvmlPciInfo_t.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st *;
constexpr nvmlReturn_t k_nvml_success = 0;
constexpr unsigned k_nvml_clock_graphics = 0;
constexpr unsigned k_nvml_clock_mem = 2;
constexpr unsigned long long k_reason_applications_clocks_setting = 0x2ULL;
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct DlClose {
  void operator()(void *h) const { ::dlclose(h); }
};
using DlHandle = std::unique_ptr<void, DlClose>;

class Nvml {
public:
  explicit Nvml(void *h) : h_(h) {}

  template <class F> F fn(const char *name) const { return reinterpret_cast<F>(::dlsym(h_, name)); }
  [[nodiscard]] std::string error(nvmlReturn_t rc) const {
    auto str = fn<const char *(*)(nvmlReturn_t)>("nvmlErrorString");
    const char *s = str != nullptr ? str(rc) : nullptr;
    return s != nullptr ? std::string(s) : "NVML error " + std::to_string(rc);
  }
  // Calls `name` when the library has it: unset when it lacks it or fails.
  template <class... A> [[nodiscard]] bool call(const char *name, A... args) const {
    auto f = fn<nvmlReturn_t (*)(A...)>(name);
    return f != nullptr && f(args...) == k_nvml_success;
  }

private:
  void *h_;
};

NvidiaGpu nvml_gpu(const Nvml &nv, nvmlDevice_t d) {
  NvidiaGpu g;
  nvmlPciInfo_t pci{};
  if (nv.call("nvmlDeviceGetPciInfo_v3", d, &pci) || nv.call("nvmlDeviceGetPciInfo_v2", d, &pci)) {
    pci.busId[sizeof pci.busId - 1] = '\0';
    g.pci = sysfs_pci_address(pci.busId);
  }
  unsigned a = 0;
  unsigned b = 0;
  if (nv.call("nvmlDeviceGetPersistenceMode", d, &a)) {
    g.persistence = a != 0;
  }
  if (nv.call("nvmlDeviceGetEccMode", d, &a, &b)) {
    g.ecc = a != 0;
    g.ecc_pending = b != 0;
  }
  if (nv.call("nvmlDeviceGetMigMode", d, &a, &b)) {
    g.mig = a != 0;
    g.mig_pending = b != 0;
  }
  auto clock = [&](const char *name, unsigned type) {
    unsigned mhz = 0;
    return nv.call(name, d, type, &mhz) ? std::optional<unsigned>(mhz) : std::nullopt;
  };
  g.app_clock_gr = clock("nvmlDeviceGetApplicationsClock", k_nvml_clock_graphics);
  g.default_app_clock_gr = clock("nvmlDeviceGetDefaultApplicationsClock", k_nvml_clock_graphics);
  g.app_clock_mem = clock("nvmlDeviceGetApplicationsClock", k_nvml_clock_mem);
  g.default_app_clock_mem = clock("nvmlDeviceGetDefaultApplicationsClock", k_nvml_clock_mem);
  unsigned long long reasons = 0;
  if (nv.call("nvmlDeviceGetCurrentClocksEventReasons", d, &reasons) ||
      nv.call("nvmlDeviceGetCurrentClocksThrottleReasons", d, &reasons)) {
    g.clocks_set_limit = (reasons & k_reason_applications_clocks_setting) != 0;
  }
  if (nv.call("nvmlDeviceGetRetiredPagesPendingStatus", d, &a)) {
    g.retired_pages_pending = a != 0;
  }
  unsigned corrected = 0;
  unsigned uncorrected = 0;
  if (nv.call("nvmlDeviceGetRemappedRows", d, &corrected, &uncorrected, &a, &b)) {
    g.remap_pending = a != 0;
    g.remap_failure = b != 0;
  }
  return g;
}

} // namespace

std::string sysfs_pci_address(std::string_view bus_id) {
  bus_id = trim(bus_id);
  // [domain:]bus:device.function, the domain 4 or 8 hex digits.
  if (bus_id.size() == 16 && bus_id.starts_with("0000")) {
    bus_id.remove_prefix(4);
  }
  if (bus_id.size() != 12 || bus_id[4] != ':' || bus_id[7] != ':' || bus_id[10] != '.') {
    return "";
  }
  std::string s(bus_id);
  for (auto &c : s) {
    if (std::isxdigit(static_cast<unsigned char>(c)) == 0 && c != ':' && c != '.') {
      return "";
    }
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

Result<NvidiaState> read_nvml(const std::string &library) {
  const DlHandle h(::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!h) {
    const char *e = ::dlerror();
    return failure(e != nullptr ? std::string(e) : library + ": cannot be loaded");
  }
  const Nvml nv(h.get());
  auto init = nv.fn<nvmlReturn_t (*)()>("nvmlInit_v2");
  auto shutdown = nv.fn<nvmlReturn_t (*)()>("nvmlShutdown");
  if (init == nullptr || shutdown == nullptr) {
    return failure(library + ": no nvmlInit_v2/nvmlShutdown: not NVML");
  }
  if (const nvmlReturn_t rc = init(); rc != k_nvml_success) {
    return failure("nvmlInit_v2: " + nv.error(rc));
  }
  struct Shutdown {
    nvmlReturn_t (*f)();
    ~Shutdown() { f(); }
  } guard{shutdown};
  NvidiaState st;
  st.source = "NVML (" + library + ")";
  char version[96] = {};
  if (nv.call("nvmlSystemGetDriverVersion", static_cast<char *>(version), static_cast<unsigned>(sizeof version))) {
    version[sizeof version - 1] = '\0';
    st.source += ", driver " + std::string(version);
  }
  unsigned count = 0;
  auto get_count = nv.fn<nvmlReturn_t (*)(unsigned *)>("nvmlDeviceGetCount_v2");
  if (get_count == nullptr) {
    return failure(library + ": no nvmlDeviceGetCount_v2");
  }
  if (const nvmlReturn_t rc = get_count(&count); rc != k_nvml_success) {
    return failure("nvmlDeviceGetCount_v2: " + nv.error(rc));
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (nv.call("nvmlDeviceGetHandleByIndex_v2", i, &d)) {
      st.gpus.push_back(nvml_gpu(nv, d));
    }
  }
  return st;
}

namespace {

nlohmann::json opt_json(const std::optional<bool> &v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json opt_json(const std::optional<unsigned> &v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

template <class T> bool opt_from(const nlohmann::json &j, const char *key, std::optional<T> &out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    out.reset();
    return true;
  }
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) {
      return false;
    }
  } else if (!it->is_number_unsigned()) {
    return false;
  }
  out = it->template get<T>();
  return true;
}

} // namespace

// NvidiaGpu's fields by their JSON names: the one list that
// nvidia_state_json() writes and nvidia_state_from_json() reads.
constexpr std::pair<const char *, std::optional<bool> NvidiaGpu::*> k_flag_fields[] = {
    {"persistence", &NvidiaGpu::persistence},
    {"ecc", &NvidiaGpu::ecc},
    {"ecc_pending", &NvidiaGpu::ecc_pending},
    {"mig", &NvidiaGpu::mig},
    {"mig_pending", &NvidiaGpu::mig_pending},
    {"clocks_set_limit", &NvidiaGpu::clocks_set_limit},
    {"retired_pages_pending", &NvidiaGpu::retired_pages_pending},
    {"remap_pending", &NvidiaGpu::remap_pending},
    {"remap_failure", &NvidiaGpu::remap_failure}};
constexpr std::pair<const char *, std::optional<unsigned> NvidiaGpu::*> k_clock_fields[] = {
    {"app_clock_gr", &NvidiaGpu::app_clock_gr},
    {"default_app_clock_gr", &NvidiaGpu::default_app_clock_gr},
    {"app_clock_mem", &NvidiaGpu::app_clock_mem},
    {"default_app_clock_mem", &NvidiaGpu::default_app_clock_mem}};

nlohmann::json nvidia_state_json(const NvidiaState &st) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto &g : st.gpus) {
    nlohmann::json o = {{"pci", g.pci}};
    for (const auto &[key, field] : k_flag_fields) {
      o[key] = opt_json(g.*field);
    }
    for (const auto &[key, field] : k_clock_fields) {
      o[key] = opt_json(g.*field);
    }
    gpus.push_back(std::move(o));
  }
  return {{"source", st.source}, {"gpus", gpus}};
}

Result<NvidiaState> nvidia_state_from_json(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("source") || !j["source"].is_string() || !j.contains("gpus") ||
      !j["gpus"].is_array()) {
    return failure("not the NVML state mltune-nvml prints");
  }
  NvidiaState st;
  st.source = j["source"].get<std::string>();
  for (const auto &g : j["gpus"]) {
    NvidiaGpu out;
    if (!g.is_object() || !g.contains("pci") || !g["pci"].is_string()) {
      return failure("a GPU without its PCI address");
    }
    out.pci = g["pci"].get<std::string>();
    for (const auto &[key, field] : k_flag_fields) {
      if (!opt_from(g, key, out.*field)) {
        return failure("GPU " + out.pci + ": '" + key + "' is not true, false or null");
      }
    }
    for (const auto &[key, field] : k_clock_fields) {
      if (!opt_from(g, key, out.*field)) {
        return failure("GPU " + out.pci + ": '" + key + "' is not a whole number of MHz or null");
      }
    }
    st.gpus.push_back(std::move(out));
  }
  return st;
}

} // namespace mltune::detail
