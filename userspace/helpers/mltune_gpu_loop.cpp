// mltune-gpu-loop: the latency of a GPU feeding loop, as a training step's
// host thread sees it. Per step: an async copy of --bytes from pinned host
// memory, a one-thread kernel launch, a stream synchronize; the wall time
// of each step (CLOCK_MONOTONIC) after 100 warm-up steps. Then, unless
// --register-mib 0, the time cuMemHostRegister takes to pin that much
// malloc'd memory. Prints one JSON object on stdout.
//
// Uses the CUDA driver API only, loaded with dlopen (libcuda.so.1 or
// --lib): no CUDA toolkit at build time, the few types and prototypes it
// needs are declared here (cuda.h). Linked dynamically against glibc, as
// mltune-nvml is, so that it loads the driver as any CUDA program does.
//
// Exit: 0 measured, 1 a CUDA call failed, 2 bad usage, 3 the driver's
// library cannot be loaded (no NVIDIA driver).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <memory>
#include <optional>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

// The CUDA driver ABI used here (cuda.h, 64-bit): CUresult, handles.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUstream = struct CUstream_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
constexpr CUresult k_cuda_success = 0;
constexpr unsigned k_stream_non_blocking = 1; // CU_STREAM_NON_BLOCKING

constexpr int k_exit_cuda = 1;
constexpr int k_exit_usage = 2;
constexpr int k_exit_no_driver = 3;
constexpr int k_warmup_steps = 100;

// mltune_bump(int *p): ++*p, one thread. PTX 6.0 (CUDA 9) for sm_52: the
// driver compiles it for the GPU it runs on.
constexpr const char *k_ptx = R"(.version 6.0
.target sm_52
.address_size 64

.visible .entry mltune_bump(
	.param .u64 mltune_bump_param_0
)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;

	ld.param.u64 %rd1, [mltune_bump_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [%rd2];
	add.s32 %r2, %r1, 1;
	st.global.u32 [%rd2], %r2;
	ret;
}
)";
constexpr const char *k_kernel = "mltune_bump";

// A failure and the exit status it ends the program with.
class Failure : public std::runtime_error {
public:
  Failure(int status, const std::string &what) : std::runtime_error(what), status_(status) {}
  [[nodiscard]] int status() const { return status_; }

private:
  int status_;
};

struct Options {
  int device = 0;
  unsigned long steps = 30000;
  size_t bytes = 262144;
  unsigned long register_mib = 1024;
  int cpu = -1; // pinned there before anything else; -1: where it is started
  std::string lib = "libcuda.so.1";
};

constexpr const char *k_usage =
    "usage: mltune-gpu-loop [--device N] [--steps N] [--bytes N] [--register-mib N] [--cpu N] [--lib PATH]\n"
    "Times a GPU feeding loop: per step an async host-to-device copy of --bytes (default 262144)\n"
    "from pinned memory, a one-thread kernel launch and a stream synchronize, --steps times\n"
    "(default 30000, after 100 warm-up steps), on GPU --device (default 0); then the time\n"
    "cuMemHostRegister takes to pin --register-mib MiB (default 1024, 0: skipped).\n"
    "--cpu: run on that CPU alone (default: where it was started).\n"
    "--lib: the CUDA driver library (default $MLTUNE_CUDA_LIB, else libcuda.so.1).\n"
    "Prints one JSON object. Exit 0 measured, 1 CUDA error, 2 bad usage, 3 no driver library.\n";

template <class T> T parse_number(std::string_view opt, std::string_view v, T lo, T hi) {
  T n{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
    throw Failure(k_exit_usage, std::string(opt) + ": '" + std::string(v) + "' is not a whole number from " +
                                    std::to_string(lo) + " to " + std::to_string(hi));
  }
  return n;
}

// Options as --name VALUE or --name=VALUE. Unset: nothing to do (--help).
std::optional<Options> parse_args(int argc, char **argv) {
  Options o;
  if (const char *env = std::getenv("MLTUNE_CUDA_LIB"); env != nullptr && *env != '\0') {
    o.lib = env;
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      return std::nullopt;
    }
    if (!a.starts_with("--")) {
      throw Failure(k_exit_usage, "unexpected argument '" + std::string(a) + "'");
    }
    std::string_view v;
    const auto eq = a.find('=');
    if (eq != std::string_view::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    if (a != "--device" && a != "--steps" && a != "--bytes" && a != "--register-mib" && a != "--cpu" && a != "--lib") {
      throw Failure(k_exit_usage, "unknown option '" + std::string(a) + "'");
    }
    if (eq == std::string_view::npos) {
      if (i + 1 == argc) {
        throw Failure(k_exit_usage, std::string(a) + " needs a value");
      }
      v = argv[++i];
    }
    if (a == "--device") {
      o.device = parse_number<int>(a, v, 0, 1 << 16);
    } else if (a == "--steps") {
      o.steps = parse_number<unsigned long>(a, v, 1, 10'000'000);
    } else if (a == "--bytes") {
      o.bytes = parse_number<size_t>(a, v, 4, size_t{1} << 32); // the kernel's int at least
    } else if (a == "--register-mib") {
      o.register_mib = parse_number<unsigned long>(a, v, 0, 1 << 20);
    } else if (a == "--cpu") {
      o.cpu = parse_number<int>(a, v, 0, CPU_SETSIZE - 1);
    } else if (a == "--lib") {
      if (v.empty()) {
        throw Failure(k_exit_usage, "--lib: empty path");
      }
      o.lib = v;
    }
  }
  return o;
}

struct DlClose {
  void operator()(void *h) const { ::dlclose(h); }
};

// A driver entry point and the name it was found under.
template <class F> struct Fn {
  F f = nullptr;
  const char *name = nullptr;
};

// The driver's entry points this program calls, resolved at load. The
// versioned names (_v2) are the ones cuda.h maps the calls to and every
// driver since CUDA 11 exports; the plain names are a fallback for a
// library that exports only those.
class Cuda {
public:
  explicit Cuda(const std::string &lib) : h_(::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (!h_) {
      const char *e = ::dlerror();
      throw Failure(k_exit_no_driver, "cannot load " + lib + ": " + (e != nullptr ? e : "dlopen failed"));
    }
    lib_ = lib;
    resolve(init, {"cuInit"});
    resolve(device_get_count, {"cuDeviceGetCount"});
    resolve(device_get, {"cuDeviceGet"});
    resolve(device_get_name, {"cuDeviceGetName"});
    resolve(primary_ctx_retain, {"cuDevicePrimaryCtxRetain"});
    resolve(primary_ctx_release, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
    resolve(ctx_set_current, {"cuCtxSetCurrent"});
    resolve(stream_create, {"cuStreamCreate"});
    resolve(stream_destroy, {"cuStreamDestroy_v2", "cuStreamDestroy"});
    resolve(stream_synchronize, {"cuStreamSynchronize"});
    resolve(mem_host_alloc, {"cuMemHostAlloc"});
    resolve(mem_free_host, {"cuMemFreeHost"});
    resolve(mem_alloc, {"cuMemAlloc_v2", "cuMemAlloc"});
    resolve(mem_free, {"cuMemFree_v2", "cuMemFree"});
    resolve(memcpy_htod_async, {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync"});
    resolve(mem_host_register, {"cuMemHostRegister_v2", "cuMemHostRegister"});
    resolve(mem_host_unregister, {"cuMemHostUnregister"});
    resolve(module_load_data, {"cuModuleLoadData"});
    resolve(module_unload, {"cuModuleUnload"});
    resolve(module_get_function, {"cuModuleGetFunction"});
    resolve(launch_kernel, {"cuLaunchKernel"});
    get_error_name_ = reinterpret_cast<CUresult (*)(CUresult, const char **)>(::dlsym(h_.get(), "cuGetErrorName"));
    get_error_string_ = reinterpret_cast<CUresult (*)(CUresult, const char **)>(::dlsym(h_.get(), "cuGetErrorString"));
  }

  // Calls fn; a failure ends the program: "cuXxx: NAME (text)".
  template <class F, class... A> void call(const Fn<F> &fn, A... args) const {
    if (const CUresult rc = fn.f(args...); rc != k_cuda_success) {
      throw Failure(k_exit_cuda, std::string(fn.name) + ": " + error(rc));
    }
  }
  [[nodiscard]] std::string error(CUresult rc) const {
    const char *name = nullptr;
    const char *text = nullptr;
    if (get_error_name_ == nullptr || get_error_name_(rc, &name) != k_cuda_success || name == nullptr) {
      name = nullptr;
    }
    if (get_error_string_ == nullptr || get_error_string_(rc, &text) != k_cuda_success || text == nullptr) {
      text = nullptr;
    }
    std::string s = name != nullptr ? name : "CUresult " + std::to_string(rc);
    return text != nullptr ? s + " (" + text + ")" : s;
  }

  Fn<CUresult (*)(unsigned)> init;
  Fn<CUresult (*)(int *)> device_get_count;
  Fn<CUresult (*)(CUdevice *, int)> device_get;
  Fn<CUresult (*)(char *, int, CUdevice)> device_get_name;
  Fn<CUresult (*)(CUcontext *, CUdevice)> primary_ctx_retain;
  Fn<CUresult (*)(CUdevice)> primary_ctx_release;
  Fn<CUresult (*)(CUcontext)> ctx_set_current;
  Fn<CUresult (*)(CUstream *, unsigned)> stream_create;
  Fn<CUresult (*)(CUstream)> stream_destroy;
  Fn<CUresult (*)(CUstream)> stream_synchronize;
  Fn<CUresult (*)(void **, size_t, unsigned)> mem_host_alloc;
  Fn<CUresult (*)(void *)> mem_free_host;
  Fn<CUresult (*)(CUdeviceptr *, size_t)> mem_alloc;
  Fn<CUresult (*)(CUdeviceptr)> mem_free;
  Fn<CUresult (*)(CUdeviceptr, const void *, size_t, CUstream)> memcpy_htod_async;
  Fn<CUresult (*)(void *, size_t, unsigned)> mem_host_register;
  Fn<CUresult (*)(void *)> mem_host_unregister;
  Fn<CUresult (*)(CUmodule *, const void *)> module_load_data;
  Fn<CUresult (*)(CUmodule)> module_unload;
  Fn<CUresult (*)(CUfunction *, CUmodule, const char *)> module_get_function;
  Fn<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,
                  void **)>
      launch_kernel;

private:
  template <class F> void resolve(Fn<F> &fn, std::initializer_list<const char *> names) {
    for (const char *n : names) {
      if (void *p = ::dlsym(h_.get(), n); p != nullptr) {
        fn = {reinterpret_cast<F>(p), n};
        return;
      }
    }
    throw Failure(k_exit_cuda, lib_ + ": no " + *names.begin() + ": not the CUDA driver library");
  }

  std::unique_ptr<void, DlClose> h_;
  std::string lib_;
  CUresult (*get_error_name_)(CUresult, const char **) = nullptr;
  CUresult (*get_error_string_)(CUresult, const char **) = nullptr;
};

// Runs `undo` at scope exit: the release of what a CUDA call acquired.
template <class F> class Undo {
public:
  explicit Undo(F f) : f_(std::move(f)) {}
  ~Undo() { f_(); }
  Undo(const Undo &) = delete;
  Undo &operator=(const Undo &) = delete;
  Undo(Undo &&) = delete;
  Undo &operator=(Undo &&) = delete;

private:
  F f_;
};

struct Free {
  void operator()(void *p) const { std::free(p); } // NOLINT(cppcoreguidelines-no-malloc)
};

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Nearest rank: the smallest value with at least per_mille/1000 of the
// values at or below it.
int64_t percentile(const std::vector<int64_t> &sorted, size_t per_mille) {
  const size_t rank = (sorted.size() * per_mille + 999) / 1000;
  return sorted[std::max<size_t>(rank, 1) - 1];
}

double us(int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

nlohmann::ordered_json run(const Options &o) {
  const Cuda cu(o.lib);
  cu.call(cu.init, 0U);
  int count = 0;
  cu.call(cu.device_get_count, &count);
  if (o.device >= count) {
    throw Failure(k_exit_cuda, "no device " + std::to_string(o.device) + ": the driver reports " +
                                   std::to_string(count) + (count == 1 ? " device" : " devices"));
  }
  CUdevice dev = 0;
  cu.call(cu.device_get, &dev, o.device);
  char name[256] = {};
  cu.call(cu.device_get_name, static_cast<char *>(name), static_cast<int>(sizeof name), dev);
  name[sizeof name - 1] = '\0';

  CUcontext ctx = nullptr;
  cu.call(cu.primary_ctx_retain, &ctx, dev);
  const Undo release_ctx([&] { cu.primary_ctx_release.f(dev); });
  cu.call(cu.ctx_set_current, ctx);
  CUstream stream = nullptr;
  cu.call(cu.stream_create, &stream, k_stream_non_blocking);
  const Undo destroy_stream([&] { cu.stream_destroy.f(stream); });
  void *host = nullptr;
  cu.call(cu.mem_host_alloc, &host, o.bytes, 0U);
  const Undo free_host([&] { cu.mem_free_host.f(host); });
  std::memset(host, 0, o.bytes);
  CUdeviceptr dptr = 0;
  cu.call(cu.mem_alloc, &dptr, o.bytes);
  const Undo free_dev([&] { cu.mem_free.f(dptr); });
  CUmodule mod = nullptr;
  cu.call(cu.module_load_data, &mod, static_cast<const void *>(k_ptx));
  const Undo unload([&] { cu.module_unload.f(mod); });
  CUfunction fn = nullptr;
  cu.call(cu.module_get_function, &fn, mod, k_kernel);

  void *params[] = {&dptr};
  std::vector<int64_t> ns;
  ns.reserve(o.steps);
  for (unsigned long i = 0; i < o.steps + k_warmup_steps; ++i) {
    const int64_t t0 = now_ns();
    cu.call(cu.memcpy_htod_async, dptr, static_cast<const void *>(host), o.bytes, stream);
    cu.call(cu.launch_kernel, fn, 1U, 1U, 1U, 1U, 1U, 1U, 0U, stream, static_cast<void **>(params),
            static_cast<void **>(nullptr));
    cu.call(cu.stream_synchronize, stream);
    const int64_t t1 = now_ns();
    if (i >= k_warmup_steps) {
      ns.push_back(t1 - t0);
    }
  }

  nlohmann::ordered_json reg = nullptr;
  if (o.register_mib > 0) {
    const size_t size = o.register_mib << 20U;
    const long page = ::sysconf(_SC_PAGESIZE);
    void *p = nullptr;
    if (const int e = ::posix_memalign(&p, page > 0 ? static_cast<size_t>(page) : 4096, size); e != 0) {
      throw Failure(k_exit_cuda, "posix_memalign(" + std::to_string(o.register_mib) + " MiB): " + std::strerror(e));
    }
    const std::unique_ptr<void, Free> buf(p);
    std::memset(buf.get(), 1, size); // every page present before it is pinned
    const int64_t t0 = now_ns();
    cu.call(cu.mem_host_register, buf.get(), size, 0U);
    const int64_t t1 = now_ns();
    cu.call(cu.mem_host_unregister, buf.get());
    reg = static_cast<double>(t1 - t0) / 1e6 / (static_cast<double>(o.register_mib) / 1024.0);
  }

  int64_t sum = 0;
  for (const int64_t v : ns) {
    sum += v;
  }
  std::ranges::sort(ns);
  nlohmann::ordered_json j;
  j["device"] = o.device;
  j["name"] = std::string(static_cast<const char *>(name));
  j["steps"] = o.steps;
  j["bytes"] = o.bytes;
  j["mean_us"] = us(sum) / static_cast<double>(ns.size());
  j["p50_us"] = us(percentile(ns, 500));
  j["p99_us"] = us(percentile(ns, 990));
  j["p999_us"] = us(percentile(ns, 999));
  j["max_us"] = us(ns.back());
  j["register_mib"] = o.register_mib;
  j["register_ms_per_gib"] = reg;
  j["cpu"] = ::sched_getcpu();
  return j;
}

} // namespace

int main(int argc, char **argv) {
  try {
    const auto o = parse_args(argc, argv);
    if (!o) {
      std::fputs(k_usage, stdout);
      return 0;
    }
    if (o->cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(o->cpu, &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) {
        throw Failure(k_exit_cuda, "--cpu " + std::to_string(o->cpu) + ": sched_setaffinity: " + std::strerror(errno));
      }
    }
    const auto j = run(*o);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const Failure &f) {
    std::fprintf(stderr, "mltune-gpu-loop: error: %s\n", f.what());
    if (f.status() == k_exit_usage) {
      std::fputs("Try 'mltune-gpu-loop --help'.\n", stderr);
    }
    return f.status();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mltune-gpu-loop: error: %s\n", e.what());
    return k_exit_cuda;
  }
}
