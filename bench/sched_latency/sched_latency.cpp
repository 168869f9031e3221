// Wake-up latency of a 1 ms periodic thread sharing its CPUs with busy-loop
// load, under SCHED_OTHER, SCHED_FIFO and SCHED_DEADLINE (500 us / 1 ms), in
// one run.  Needs root for FIFO and DEADLINE.  Changes nothing that outlives
// the process: the policies belong to its own threads.
//
//   sched_latency [--seconds S] [--load N]     (N busy threads, default 2 per CPU)
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct KAttr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

std::atomic<bool> g_stop_load{false};

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct Result {
  std::string name;
  std::vector<int64_t> lat;
  std::string error;
  int64_t pct(double p) const {
    if (lat.empty()) {
      return -1;
    }
    std::vector<int64_t> v = lat;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  }
};

void measure(Result *r, int policy, double seconds) {
  KAttr a{};
  a.size = sizeof(a);
  a.policy = static_cast<uint32_t>(policy);
  if (policy == SCHED_FIFO) {
    a.priority = 50;
  } else if (policy == 6) { // SCHED_DEADLINE
    a.runtime = 500000;
    a.deadline = 1000000;
    a.period = 1000000;
  }
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    r->error = std::string("sched_setattr: ") + std::strerror(errno);
    return;
  }
  const int64_t period = 1000000;
  int64_t next = now_ns() + period;
  const int64_t end = now_ns() + static_cast<int64_t>(seconds * 1e9);
  r->lat.reserve(static_cast<size_t>(seconds * 1100));
  while (next < end) {
    timespec ts{static_cast<time_t>(next / 1000000000LL), static_cast<long>(next % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
    const int64_t late = now_ns() - next;
    r->lat.push_back(late);
    // A little work, as a proxy loop would do.
    const int64_t until = now_ns() + 50000;
    while (now_ns() < until) {
    }
    next += period;
    while (next < now_ns()) { // missed periods count once, at their lateness
      next += period;
    }
  }
}

void busy() {
  volatile uint64_t x = 0;
  while (!g_stop_load.load(std::memory_order_relaxed)) {
    x = x + 1;
  }
}

} // namespace

int main(int argc, char **argv) {
  double seconds = 5;
  int load = 2 * static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (std::string(argv[i]) == "--load") {
      load = std::atoi(argv[i + 1]);
    }
  }
  std::vector<std::thread> hogs;
  for (int i = 0; i < load; ++i) {
    hogs.emplace_back(busy);
  }
  std::printf("sched_latency: 1 ms periodic thread, %d busy-loop threads on %u CPUs, %.1f s per policy\n", load,
              std::thread::hardware_concurrency(), seconds);
  std::vector<Result> results{{"SCHED_OTHER", {}, {}}, {"SCHED_FIFO 50", {}, {}}, {"SCHED_DEADLINE 500us/1ms", {}, {}}};
  const int policies[] = {SCHED_OTHER, SCHED_FIFO, 6};
  for (size_t i = 0; i < results.size(); ++i) {
    std::thread t(measure, &results[i], policies[i], seconds);
    t.join();
  }
  g_stop_load = true;
  for (auto &h : hogs) {
    h.join();
  }
  std::printf("%-26s %8s %10s %10s %10s\n", "policy", "samples", "p50 us", "p99 us", "max us");
  for (const auto &r : results) {
    if (!r.error.empty()) {
      std::printf("%-26s %s\n", r.name.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-26s %8zu %10.1f %10.1f %10.1f\n", r.name.c_str(), r.lat.size(), r.pct(0.50) / 1e3,
                r.pct(0.99) / 1e3, r.pct(1.0) / 1e3);
  }
  auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  const auto &o = results[0];
  const auto &f = results[1];
  const auto &d = results[2];
  if (o.error.empty() && d.error.empty() && f.error.empty()) {
    std::printf("ratios OTHER/FIFO:     p50 %.1fx  p99 %.1fx  max %.1fx\n", ratio(o.pct(0.5), f.pct(0.5)),
                ratio(o.pct(0.99), f.pct(0.99)), ratio(o.pct(1.0), f.pct(1.0)));
    std::printf("ratios OTHER/DEADLINE: p50 %.1fx  p99 %.1fx  max %.1fx\n", ratio(o.pct(0.5), d.pct(0.5)),
                ratio(o.pct(0.99), d.pct(0.99)), ratio(o.pct(1.0), d.pct(1.0)));
    const double r99 = ratio(o.pct(0.99), d.pct(0.99));
    std::printf("target DEADLINE p99 >= 10x lower than OTHER: %s (%.1fx)\n", r99 >= 10 ? "met" : "NOT met", r99);
  }
  return 0;
}
