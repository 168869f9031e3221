// mltune-nvml [LIBRARY]: the NVIDIA driver's state of its GPUs through NVML
// (LIBRARY, default libnvidia-ml.so.1), printed as one JSON object on
// stdout; exit 1 with the reason on stderr where NVML cannot be read.
//
// The statically linked mltunectl runs this where it cannot load NVML
// itself: a static program maps shared libraries with its own glibc only,
// and the driver's library on a node with another glibc dies in its early
// init. This helper is linked dynamically against the system's glibc (and
// statically against libstdc++), so it loads NVML as any program does; it
// costs one process start, where nvidia-smi costs an NVML start-up per
// query (about 24 ms on an H200 node). Installed in libexec, not on PATH.
#include "audit/gpu_driver.hpp"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc > 2 || (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h"))) {
    std::fprintf(argc > 2 ? stderr : stdout,
                 "usage: mltune-nvml [LIBRARY]\n"
                 "Prints the NVIDIA GPUs' state read through NVML (LIBRARY, default libnvidia-ml.so.1) as JSON.\n"
                 "Run by mltunectl audit; exit 0 on success, 1 where NVML cannot be read, 2 on bad usage.\n");
    return argc > 2 ? 2 : 0;
  }
  const std::string library = argc == 2 ? argv[1] : "libnvidia-ml.so.1";
  auto st = mltune::detail::read_nvml(library);
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 1;
  }
  // On a line of its own: the caller reads the last line that starts with
  // '{', whatever the library wrote to stderr without a newline.
  std::fflush(stderr);
  std::printf("\n%s\n", mltune::detail::nvidia_state_json(*st).dump().c_str());
  return 0;
}
