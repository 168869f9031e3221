// Planted noise sources and a planted writer for tests/guest/noise.sh and
// drift.sh, and the CPU-bound loop of bench/noise.  Each mode names itself
// (prctl PR_SET_NAME), so the tests can look for that name.
//
//   noise_plant busy NAME               spin forever (a busy kthread-like task)
//   noise_plant sleep NAME USEC         sleep USEC, wake, repeat (timer heavy)
//   noise_plant write NAME PATH VALUE...  print "pid N", write each VALUE to PATH
//   noise_plant setsched NAME TID PRIO  print "pid N", make TID SCHED_FIFO PRIO
//   noise_plant loop NAME SECONDS       count loop iterations for SECONDS of
//                                       CLOCK_MONOTONIC, print "iterations N"
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <sys/prctl.h>
#include <unistd.h>

namespace {

int usage() {
  std::fprintf(stderr, "usage: noise_plant busy|sleep|write|setsched|loop NAME ARGS...\n");
  return 2;
}

double now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int write_file(const char *path, const char *value) {
  const int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "noise_plant: %s: %s\n", path, std::strerror(errno));
    return 1;
  }
  const size_t n = std::strlen(value);
  const ssize_t w = write(fd, value, n);
  const int err = errno;
  close(fd);
  if (w != static_cast<ssize_t>(n)) {
    std::fprintf(stderr, "noise_plant: write %s to %s: %s\n", value, path, std::strerror(err));
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    return usage();
  }
  const std::string mode = argv[1];
  prctl(PR_SET_NAME, argv[2], 0, 0, 0);
  if (mode == "busy") {
    for (;;) {
      asm volatile("" ::: "memory"); // a loop the compiler keeps
    }
  }
  if (mode == "sleep" && argc == 4) {
    const long us = std::strtol(argv[3], nullptr, 10);
    const timespec ts{us / 1000000, (us % 1000000) * 1000};
    for (;;) {
      nanosleep(&ts, nullptr);
    }
  }
  if (mode == "write" && argc >= 5 && argc % 2 == 1) {
    std::printf("pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    int rc = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
      rc |= write_file(argv[i], argv[i + 1]);
    }
    return rc;
  }
  if (mode == "setsched" && argc == 5) {
    std::printf("pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    sched_param sp{};
    sp.sched_priority = std::atoi(argv[4]);
    if (sched_setscheduler(std::atoi(argv[3]), SCHED_FIFO, &sp) != 0) {
      std::fprintf(stderr, "noise_plant: sched_setscheduler: %s\n", std::strerror(errno));
      return 1;
    }
    return 0;
  }
  if (mode == "loop" && argc == 4) {
    const double end = now() + std::strtod(argv[3], nullptr);
    unsigned long long n = 0;
    // Check the clock every 4096 iterations: the loop itself dominates.
    for (;;) {
      for (unsigned i = 0; i < 4096; ++i) {
        asm volatile("" ::: "memory");
      }
      n += 4096;
      if (now() >= end) {
        break;
      }
    }
    std::printf("iterations %llu\n", n);
    return 0;
  }
  return usage();
}
