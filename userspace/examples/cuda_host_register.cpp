// Example: hand a pool buffer to CUDA as pinned host memory.
//
//   pool_cuda_host_register [GPU [MIB]]
//
// Takes MIB (default 256) from the huge-page pool of the GPU's own NUMA node
// (read from sysfs through the GPU's PCI address), registers it with
// cudaHostRegister() and measures host-to-device copies from it.  The pool
// pages are pinned already; cudaHostRegister() pins them once more
// (pin_user_pages(FOLL_LONGTERM), which works because the pool maps normal,
// refcounted pages, not VM_PFNMAP) and maps them for the GPU's DMA.
//
// Unregister before the buffer goes away: a registration that outlives the
// mapping keeps the pages, and the pool then writes them off ("orphaned").
//
// Built only where cuda_runtime.h and libcudart exist (examples/CMakeLists.txt).
#include "mltune/parse.hpp"
#include "mltune/pool.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

int gpu_numa_node(int gpu) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), gpu) != cudaSuccess) {
    return 0;
  }
  std::string id(bus);
  std::ranges::transform(id, id.begin(), [](unsigned char c) { return std::tolower(c); });
  std::ifstream f("/sys/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  f >> node;
  return node < 0 ? 0 : node; // -1: no NUMA information
}

bool check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  const auto gpu_arg = argc > 1 ? mltune::parse_int<int>(argv[1]) : std::optional<int>(0);
  const auto mib_arg = argc > 2 ? mltune::parse_int<std::size_t>(argv[2]) : std::optional<std::size_t>(256);
  if (!gpu_arg || *gpu_arg < 0 || !mib_arg || *mib_arg == 0) {
    std::fprintf(stderr, "usage: pool_cuda_host_register [GPU (default 0)] [MIB (default 256)]\n");
    return 2;
  }
  const int gpu = *gpu_arg;
  const std::size_t bytes = *mib_arg << 20;
  if (!check(cudaSetDevice(gpu), "cudaSetDevice")) {
    return 1;
  }
  const int node = gpu_numa_node(gpu);

  auto buf = mltune::allocate(node, bytes);
  if (!buf) {
    std::fprintf(stderr, "pool: %s\n", buf.error().message.c_str());
    return 1;
  }
  std::printf("GPU %d, NUMA node %d: %zu MiB from the pool at %p\n", gpu, node, buf->size() >> 20, buf->data());

  if (!check(cudaHostRegister(buf->data(), buf->size(), cudaHostRegisterDefault), "cudaHostRegister")) {
    return 1;
  }
  void *dev = nullptr;
  int rc = 1;
  if (check(cudaMalloc(&dev, buf->size()), "cudaMalloc")) {
    check(cudaMemcpy(dev, buf->data(), buf->size(), cudaMemcpyHostToDevice), "warm-up copy");
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = check(cudaMemcpy(dev, buf->data(), buf->size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    if (ok) {
      std::printf("host to device: %.2f GB/s\n", static_cast<double>(buf->size()) / dt.count() / 1e9);
      rc = 0;
    }
    cudaFree(dev);
  }
  check(cudaHostUnregister(buf->data()), "cudaHostUnregister");
  return rc; // buf unmaps here; the pages go back to the pool
}
