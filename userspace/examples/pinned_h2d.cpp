// Host-to-device copy bandwidth and cudaHostRegister() cost by the kind of
// host memory, side by side in one run (bench/pinned/run.sh drives it):
//
//   pageable     4 KiB pages, not registered: the driver stages every copy
//                through its own pinned bounce buffer
//   pinned-4k    4 KiB pages (MADV_NOHUGEPAGE) registered with cudaHostRegister
//   pinned-thp   2 MiB transparent huge pages (2 MiB aligned, MADV_HUGEPAGE),
//                registered; the share of the buffer THP really backed is printed
//   pinned-2m    2 MiB hugetlbfs pages (MAP_HUGETLB | MAP_HUGE_2MB), registered:
//                what the mltune pool hands out, standing in for it where the
//                module cannot be loaded; skipped when no huge pages are free
//   host-alloc   cudaHostAlloc(): the driver's own pinned memory, for reference
//
//   pinned_h2d [--gpu N] [--size MIB] [--repeats R] [--copies C] [--json FILE]
//
// Every repeat maps a fresh buffer, touches it (as a workload would before
// handing it to CUDA), times cudaHostRegister, then times C copies of the
// whole buffer with CUDA events after one warm-up copy.  The medians over the
// repeats are printed and, with --json, written.  Built only where CUDA is
// installed (examples/CMakeLists.txt, or bench/pinned/run.sh with nvcc).
#include <cuda_runtime.h>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26) // MAP_HUGE_SHIFT 26, log2(2 MiB)
#endif

namespace {

constexpr std::size_t k_huge = 2UL << 20;

// A whole decimal (or, with base 16, hex) number and nothing else.
template <class T> bool number(std::string_view s, T &out, int base = 10) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

struct Options {
  int gpu = 0;
  std::size_t mib = 1024;
  int repeats = 10;
  int copies = 5;
  std::string json;
};

bool check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    return false;
  }
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::ranges::sort(v);
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A host buffer of one kind; unmapped (or freed) on destruction.
class HostBuffer {
public:
  HostBuffer(const std::string &kind, std::size_t bytes) : kind_(kind), bytes_(bytes) {
    if (kind == "host-alloc") {
      if (!check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "cudaHostAlloc")) {
        p_ = nullptr;
      }
      return;
    }
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    std::size_t len = bytes;
    if (kind == "pinned-2m") {
      flags |= MAP_HUGETLB | MAP_HUGE_2MB;
    } else if (kind == "pinned-thp") {
      len = bytes + k_huge; // room to align to 2 MiB
    }
    void *m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) {
      error_ = std::string("mmap: ") + std::strerror(errno);
      return;
    }
    map_ = m;
    map_len_ = len;
    p_ = m;
    if (kind == "pinned-thp") {
      const std::size_t off = (k_huge - reinterpret_cast<std::uintptr_t>(m) % k_huge) % k_huge;
      p_ = static_cast<char *>(m) + off; // the first 2 MiB boundary
      ::madvise(p_, bytes, MADV_HUGEPAGE);
    } else if (kind != "pinned-2m") {
      ::madvise(p_, bytes, MADV_NOHUGEPAGE);
    }
    std::memset(p_, 1, bytes); // first touch: fault every page in
  }
  ~HostBuffer() {
    if (kind_ == "host-alloc" && p_ != nullptr) {
      cudaFreeHost(p_);
    } else if (map_ != nullptr) {
      ::munmap(map_, map_len_);
    }
  }
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;

  [[nodiscard]] void *data() const { return p_; }
  [[nodiscard]] const std::string &error() const { return error_; }

  // Share of the buffer backed by transparent huge pages (AnonHugePages of
  // its mapping in /proc/self/smaps).
  [[nodiscard]] double thp_share() const {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool ours = false;
    while (std::getline(smaps, line)) {
      const std::string_view l = line;
      // A mapping's header line ("lo-hi perms ..."): no field line starts with two hex numbers.
      const auto dash = l.find('-');
      const auto space = l.find(' ');
      std::uintptr_t lo = 0;
      std::uintptr_t hi = 0;
      if (dash < space && space != std::string_view::npos && number(l.substr(0, dash), lo, 16) &&
          number(l.substr(dash + 1, space - dash - 1), hi, 16)) {
        ours = lo <= reinterpret_cast<std::uintptr_t>(map_) && reinterpret_cast<std::uintptr_t>(map_) < hi;
      }
      constexpr std::string_view field = "AnonHugePages:";
      if (ours && l.starts_with(field) && l.ends_with(" kB")) {
        std::string_view v = l.substr(field.size(), l.size() - field.size() - 3);
        v.remove_prefix(std::min(v.find_first_not_of(' '), v.size()));
        unsigned long kb = 0;
        if (number(v, kb)) {
          return static_cast<double>(kb) * 1024 / static_cast<double>(bytes_);
        }
      }
    }
    return 0;
  }

private:
  std::string kind_;
  std::size_t bytes_;
  void *p_ = nullptr;
  void *map_ = nullptr;
  std::size_t map_len_ = 0;
  std::string error_;
};

// JSON pieces, by hand: bench/pinned/run.sh builds this file alone with nvcc,
// where no JSON library can be assumed.
std::string q(const std::string &s) {
  std::string o = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
      o += u;
    } else {
      o += c;
    }
  }
  return o + "\"";
}
std::string kv(const std::string &key, const std::string &value) {
  return q(key) + ": " + value;
}
std::string num(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  std::ostringstream o;
  o << v;
  return o.str();
}
std::string list(const std::vector<double> &v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    s += (i == 0 ? "" : ", ") + num(v[i]);
  }
  return s + "]";
}

struct Result {
  std::string kind;
  std::string skipped; // why, when it could not be measured
  std::vector<double> register_ms, gbps;
  double thp_share = -1;
};

Result measure(const std::string &kind, const Options &o, void *dev, cudaStream_t s) {
  Result r;
  r.kind = kind;
  const std::size_t bytes = o.mib << 20;
  const bool registered = kind.starts_with("pinned");
  cudaEvent_t t0 = nullptr;
  cudaEvent_t t1 = nullptr;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (int i = 0; i < o.repeats && r.skipped.empty(); ++i) {
    HostBuffer b(kind, bytes);
    if (b.data() == nullptr) {
      r.skipped = b.error().empty() ? "allocation failed" : b.error();
      break;
    }
    if (kind == "pinned-thp" && i == 0) {
      r.thp_share = b.thp_share();
    }
    if (registered) {
      const auto a = std::chrono::steady_clock::now();
      if (!check(cudaHostRegister(b.data(), bytes, cudaHostRegisterDefault), "cudaHostRegister")) {
        r.skipped = "cudaHostRegister failed";
        break;
      }
      const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - a;
      r.register_ms.push_back(d.count());
    }
    check(cudaMemcpyAsync(dev, b.data(), bytes, cudaMemcpyHostToDevice, s), "warm-up copy");
    cudaEventRecord(t0, s);
    for (int c = 0; c < o.copies; ++c) {
      check(cudaMemcpyAsync(dev, b.data(), bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
    }
    cudaEventRecord(t1, s);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    r.gbps.push_back(static_cast<double>(bytes) * o.copies / (ms / 1e3) / 1e9);
    if (registered) {
      check(cudaHostUnregister(b.data()), "cudaHostUnregister");
    }
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return r;
}

bool parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) {
      return false;
    }
    if (a == "--gpu") {
      if (!number(v, o.gpu)) {
        return false;
      }
    } else if (a == "--size") {
      if (!number(v, o.mib)) {
        return false;
      }
    } else if (a == "--repeats") {
      if (!number(v, o.repeats)) {
        return false;
      }
    } else if (a == "--copies") {
      if (!number(v, o.copies)) {
        return false;
      }
    } else if (a == "--json") {
      o.json = v;
    } else {
      return false;
    }
    ++i;
  }
  return o.mib > 0 && o.mib % 2 == 0 && o.repeats > 0 && o.copies > 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: pinned_h2d [--gpu N] [--size MIB (even)] [--repeats R] [--copies C] [--json FILE]\n");
    return 2;
  }
  if (!check(cudaSetDevice(o.gpu), "cudaSetDevice")) {
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, o.gpu);
  char bus[32] = {};
  cudaDeviceGetPCIBusId(bus, sizeof bus, o.gpu);
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  void *dev = nullptr;
  if (!check(cudaMalloc(&dev, o.mib << 20), "cudaMalloc")) {
    return 1;
  }
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::printf("GPU %d %s (%s), CUDA runtime %d, driver %d: %zu MiB, %d repeats x %d copies\n", o.gpu, prop.name, bus,
              runtime, driver, o.mib, o.repeats, o.copies);
  std::vector<Result> results;
  for (const char *kind : {"pageable", "pinned-4k", "pinned-thp", "pinned-2m", "host-alloc"}) {
    results.push_back(measure(kind, o, dev, s));
  }
  std::printf("%-11s %12s %14s %16s\n", "memory", "H2D GB/s", "register ms", "register ms/GiB");
  std::ostringstream js;
  js << "{\n  " << kv("gpu", num(o.gpu)) << ", " << kv("name", q(prop.name)) << ", " << kv("pci", q(bus)) << ", "
     << kv("cuda_runtime", num(runtime)) << ", " << kv("cuda_driver", num(driver)) << ",\n  "
     << kv("size_mib", num(static_cast<double>(o.mib))) << ", " << kv("repeats", num(o.repeats)) << ", "
     << kv("copies", num(o.copies)) << ",\n  " << q("results") << ": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result &r = results[i];
    js << (i == 0 ? "\n    {" : ",\n    {") << kv("memory", q(r.kind));
    if (!r.skipped.empty()) {
      std::printf("%-11s skipped: %s\n", r.kind.c_str(), r.skipped.c_str());
      js << ", " << kv("skipped", q(r.skipped)) << "}";
      continue;
    }
    const double bw = median(r.gbps);
    const double reg = median(r.register_ms);
    const double gib = static_cast<double>(o.mib) / 1024;
    if (r.register_ms.empty()) {
      std::printf("%-11s %12.2f %14s %16s\n", r.kind.c_str(), bw, "-", "-");
    } else {
      std::printf("%-11s %12.2f %14.2f %16.2f\n", r.kind.c_str(), bw, reg, reg / gib);
    }
    js << ", " << kv("h2d_gbps_median", num(bw));
    if (!r.register_ms.empty()) {
      js << ", " << kv("register_ms_median", num(reg)) << ", " << kv("register_ms_per_gib", num(reg / gib));
    }
    if (r.thp_share >= 0) {
      std::printf("%-11s %.0f%% of the buffer backed by transparent huge pages\n", "", r.thp_share * 100);
      js << ", " << kv("thp_share", num(r.thp_share));
    }
    js << ", " << kv("h2d_gbps", list(r.gbps)) << ", " << kv("register_ms", list(r.register_ms)) << "}";
  }
  js << "\n  ]\n}\n";
  if (!o.json.empty()) {
    std::ofstream(o.json) << js.str();
  }
  cudaStreamDestroy(s);
  cudaFree(dev);
  return 0;
}
