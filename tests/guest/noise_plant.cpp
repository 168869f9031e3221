// Planted noise sources and a planted writer for tests/guest/noise.sh and
// drift.sh, and the CPU-bound loop of bench/noise.  Each mode names itself
// (prctl PR_SET_NAME), so the tests can look for that name.
//
//   noise_plant busy NAME               spin forever (a busy kthread-like task)
//   noise_plant sleep NAME USEC         sleep USEC, wake, repeat (timer heavy)
//   noise_plant write NAME PATH VALUE...  print "pid N", write each VALUE to PATH
//   noise_plant setsched NAME TID PRIO  print "pid N", make TID SCHED_FIFO PRIO
//   noise_plant rt NAME CPUS PRIO USEC  on CPUS (a cpulist) as SCHED_FIFO PRIO:
//                                       print "pid N", then sleep USEC, wake,
//                                       repeat (a periodic real-time thread)
//   noise_plant dl NAME RUNTIME PERIOD CPU
//                                       as SCHED_DEADLINE (microseconds),
//                                       started on CPU and allowed on every
//                                       CPU: print "pid N", then spin
//                                       (throttled to RUNTIME of every PERIOD)
//   noise_plant loop NAME SECONDS       count loop iterations for SECONDS of
//                                       CLOCK_MONOTONIC, print "iterations N"
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

int usage() {
  std::fprintf(stderr, "usage: noise_plant busy|sleep|write|setsched|rt|dl|loop NAME ARGS...\n");
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

// "2-3,5" -> CPUs 2, 3, 5; false on anything else.
bool parse_cpus(const char *list, cpu_set_t &set) {
  CPU_ZERO(&set);
  const char *p = list;
  while (*p != '\0') {
    char *end = nullptr;
    const long lo = std::strtol(p, &end, 10);
    long hi = lo;
    if (end == p || lo < 0 || lo >= CPU_SETSIZE) {
      return false;
    }
    p = end;
    if (*p == '-') {
      hi = std::strtol(p + 1, &end, 10);
      if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE) {
        return false;
      }
      p = end;
    }
    for (long c = lo; c <= hi; ++c) {
      CPU_SET(static_cast<int>(c), &set);
    }
    if (*p == ',') {
      ++p;
    } else if (*p != '\0') {
      return false;
    }
  }
  return true;
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
  if (mode == "rt" && argc == 6) {
    cpu_set_t set;
    if (!parse_cpus(argv[3], set)) {
      std::fprintf(stderr, "noise_plant: bad cpulist '%s'\n", argv[3]);
      return 2;
    }
    sched_param sp{};
    sp.sched_priority = std::atoi(argv[4]);
    if (sched_setaffinity(0, sizeof(set), &set) != 0 || sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      std::fprintf(stderr, "noise_plant: rt: %s\n", std::strerror(errno));
      return 1;
    }
    std::printf("pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    const long us = std::strtol(argv[5], nullptr, 10);
    const timespec ts{us / 1000000, (us % 1000000) * 1000};
    for (;;) {
      nanosleep(&ts, nullptr);
    }
  }
  // A SCHED_DEADLINE thread that spins, so it runs RUNTIME of every PERIOD
  // (the kernel throttles it in between).  Its affinity must span its root
  // domain: it moves to CPU first, then widens its affinity (a running
  // task stays where it is) and becomes DEADLINE there.
  if (mode == "dl" && argc == 6) {
    cpu_set_t one;
    cpu_set_t all;
    if (!parse_cpus(argv[5], one) || CPU_COUNT(&one) != 1) {
      std::fprintf(stderr, "noise_plant: bad CPU '%s'\n", argv[5]);
      return 2;
    }
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      CPU_SET(c, &all);
    }
    if (sched_setaffinity(0, sizeof(one), &one) != 0 || sched_setaffinity(0, sizeof(all), &all) != 0) {
      std::fprintf(stderr, "noise_plant: dl: sched_setaffinity: %s\n", std::strerror(errno));
      return 1;
    }
    struct {
      std::uint32_t size, policy;
      std::uint64_t flags;
      std::int32_t nice;
      std::uint32_t priority;
      std::uint64_t runtime, deadline, period;
    } attr{};
    attr.size = sizeof(attr);
    attr.policy = 6; // SCHED_DEADLINE
    attr.runtime = std::strtoull(argv[3], nullptr, 10) * 1000;
    attr.deadline = attr.period = std::strtoull(argv[4], nullptr, 10) * 1000;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
      std::fprintf(stderr, "noise_plant: dl: sched_setattr: %s\n", std::strerror(errno));
      return 1;
    }
    std::printf("pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    for (;;) {
      asm volatile("" ::: "memory");
    }
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
