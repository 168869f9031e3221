// The CPU feeding loop and the neighbour (mltune/prove.hpp).
//
// Each loop process is forked before the window and waits on a pipe; the
// parent moves it into the loop's cgroup (a process outside a cpuset
// partition cannot be pinned inside it), then closes the pipe to start them
// all.  A child allocates nothing: its CPU mask, its sample array and its
// result slot are made before fork, in memory shared with the parent.
#include "mltune/prove.hpp"

#include "base/cgroup.hpp"
#include "base/unique_fd.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <memory>

namespace mltune {

namespace {

std::uint64_t mono_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(t.tv_nsec);
}

// The work quantum: arithmetic the compiler cannot drop.
void work(std::uint64_t iterations) {
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    x ^= x << 13U;
    x ^= x >> 7U;
    x ^= x << 17U;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  volatile std::uint64_t sink = x;
  (void)sink;
}

void reap(std::vector<int> &pids) {
  for (int p : pids) {
    ::kill(p, SIGKILL);
  }
  for (int p : pids) {
    int st = 0;
    while (::waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
  }
  pids.clear();
}

// One child's slot in the shared memory.
struct Slot {
  int error = 0; // errno of what failed in the child (sched_setaffinity)
  int done = 0;
  std::uint64_t steps = 0, missed = 0, involuntary = 0, voluntary = 0;
};

// An anonymous shared mapping.
class Shared {
public:
  Shared() = default;
  explicit Shared(size_t bytes)
      : p_(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)), n_(bytes) {
    if (p_ == MAP_FAILED) {
      p_ = nullptr;
    }
  }
  Shared(Shared &&o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  Shared &operator=(Shared &&o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  Shared(const Shared &) = delete;
  Shared &operator=(const Shared &) = delete;
  ~Shared() {
    if (p_ != nullptr) {
      ::munmap(p_, n_);
    }
  }
  [[nodiscard]] void *get() const { return p_; }

private:
  void *p_ = nullptr;
  size_t n_ = 0;
};

[[noreturn]] void child(const cpu_set_t &mask, int go, const LoopOptions &opt, std::uint64_t max_steps, Slot &slot,
                        std::uint64_t *samples) {
  char c = 0;
  while (::read(go, &c, 1) < 0 && errno == EINTR) {
  }
  if (::sched_setaffinity(0, sizeof mask, &mask) != 0) {
    slot.error = errno;
    ::_exit(1);
  }
  rusage r0{};
  ::getrusage(RUSAGE_SELF, &r0);
  const std::uint64_t period = std::uint64_t{opt.period_us} * 1000;
  const std::uint64_t start = mono_ns();
  const std::uint64_t end = start + static_cast<std::uint64_t>(opt.seconds * 1e9);
  std::uint64_t next = start + period;
  std::uint64_t n = 0;
  while (next < end && n < max_steps) {
    const timespec t{static_cast<time_t>(next / 1'000'000'000ULL), static_cast<long>(next % 1'000'000'000ULL)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) == EINTR) {
    }
    work(opt.work_iterations);
    const std::uint64_t now = mono_ns();
    samples[n++] = now - next;
    next += period;
    while (next <= now) {
      next += period;
      ++slot.missed;
    }
  }
  rusage r1{};
  ::getrusage(RUSAGE_SELF, &r1);
  slot.steps = n;
  slot.involuntary = static_cast<std::uint64_t>(r1.ru_nivcsw - r0.ru_nivcsw);
  slot.voluntary = static_cast<std::uint64_t>(r1.ru_nvcsw - r0.ru_nvcsw);
  slot.done = 1;
  ::_exit(0);
}

} // namespace

std::uint64_t calibrate_work(unsigned work_us) {
  constexpr std::uint64_t k_probe = 200'000;
  std::uint64_t best = ~0ULL;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t t0 = mono_ns();
    work(k_probe);
    best = std::min(best, mono_ns() - t0);
  }
  best = std::max<std::uint64_t>(best, 1);
  return std::max<std::uint64_t>(1, std::uint64_t{work_us} * 1000 * k_probe / best);
}

struct FeederLoop::Impl {
  LoopOptions opt;
  std::uint64_t max_steps = 0;
  Shared shared;
  std::vector<int> pids;
  UniqueFd go; // the write end: closed to start them
  ~Impl() { reap(pids); }
  [[nodiscard]] Slot *slot(size_t i) const { return static_cast<Slot *>(shared.get()) + i; }
  [[nodiscard]] std::uint64_t *samples(size_t i) const {
    auto *base = reinterpret_cast<std::uint64_t *>(static_cast<Slot *>(shared.get()) + opt.cpus.count());
    return base + i * max_steps;
  }
};

FeederLoop::FeederLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeederLoop::FeederLoop(FeederLoop &&) noexcept = default;
FeederLoop &FeederLoop::operator=(FeederLoop &&) noexcept = default;
FeederLoop::~FeederLoop() = default;

const std::vector<int> &FeederLoop::pids() const {
  return impl_->pids;
}

Result<FeederLoop> FeederLoop::prepare(const Sysroot &root, const LoopOptions &opt) {
  if (opt.cpus.empty()) {
    return input_error("the feeding loop needs at least one CPU");
  }
  if (!(opt.seconds > 0 && opt.seconds <= 3600) || opt.period_us < 50 || opt.period_us > 1'000'000) {
    return input_error("the feeding loop's window (" + std::to_string(opt.seconds) + " s) or period (" +
                       std::to_string(opt.period_us) + " us) is out of range");
  }
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  impl->max_steps = static_cast<std::uint64_t>(opt.seconds * 1e6 / opt.period_us) + 2;
  const auto cpus = opt.cpus.cpus();
  impl->shared = Shared(cpus.size() * (sizeof(Slot) + impl->max_steps * sizeof(std::uint64_t)));
  if (impl->shared.get() == nullptr) {
    return failure(std::string("the feeding loop's memory: mmap: ") + std::strerror(errno), errno);
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return failure(std::string("the feeding loop: pipe: ") + std::strerror(errno), errno);
  }
  UniqueFd rd(fds[0]);
  impl->go = UniqueFd(fds[1]);
  std::vector<cpu_set_t> masks(cpus.size());
  for (size_t i = 0; i < cpus.size(); ++i) {
    CPU_ZERO(&masks[i]);
    CPU_SET(cpus[i], &masks[i]);
    std::construct_at(impl->slot(i));
  }
  for (size_t i = 0; i < cpus.size(); ++i) {
    const pid_t p = ::fork();
    if (p < 0) {
      return failure(std::string("the feeding loop: fork: ") + std::strerror(errno), errno);
    }
    if (p == 0) {
      impl->go.reset();
      child(masks[i], rd.get(), opt, impl->max_steps, *impl->slot(i), impl->samples(i));
    }
    impl->pids.push_back(p);
  }
  if (!opt.cgroup.empty()) {
    for (int p : impl->pids) {
      if (auto st = root.write_value(cgroup::path(opt.cgroup, "cgroup.procs"), std::to_string(p)); !st) {
        return with_context(st.error(), "the feeding loop joining " + opt.cgroup);
      }
    }
  }
  return FeederLoop(std::move(impl));
}

Result<LoopRun> FeederLoop::run() {
  Impl &m = *impl_;
  m.go.reset(); // every child reads EOF and starts
  std::string failed;
  for (size_t i = 0; i < m.pids.size(); ++i) {
    int st = 0;
    while (::waitpid(m.pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    const Slot &s = *m.slot(i);
    if (s.error != 0) {
      failed += (failed.empty() ? "" : "; ") + std::string("CPU ") + std::to_string(m.opt.cpus.cpus()[i]) +
                ": sched_setaffinity: " + std::strerror(s.error);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || s.done == 0) {
      failed += (failed.empty() ? "" : "; ") + std::string("CPU ") + std::to_string(m.opt.cpus.cpus()[i]) +
                ": the loop process ended abnormally (status " + std::to_string(st) + ")";
    }
  }
  m.pids.clear();
  if (!failed.empty()) {
    return failure("the feeding loop: " + failed);
  }
  LoopRun r;
  for (size_t i = 0; i < m.opt.cpus.count(); ++i) {
    const Slot &s = *m.slot(i);
    const std::uint64_t *v = m.samples(i);
    r.step_ns.insert(r.step_ns.end(), v, v + s.steps);
    r.missed += s.missed;
    r.involuntary += s.involuntary;
    r.voluntary += s.voluntary;
  }
  return r;
}

// ---- the neighbour ----------------------------------------------------------

Status Neighbour::check(unsigned n) {
  if (n > 4096) {
    return input_error("--neighbour: " + std::to_string(n) + " busy processes is more than 4096");
  }
  return {};
}

Result<Neighbour> Neighbour::start(unsigned n) {
  if (auto ok = check(n); !ok) {
    return ok.error();
  }
  Neighbour nb;
  nb.pids_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    const pid_t p = ::fork();
    if (p < 0) {
      return failure(std::string("the neighbour: fork: ") + std::strerror(errno), errno);
    }
    if (p == 0) {
      ::prctl(PR_SET_NAME, "mltune-nbr", 0, 0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      for (;;) {
        work(1'000'000);
      }
    }
    nb.pids_.push_back(p);
  }
  return nb;
}

Neighbour &Neighbour::operator=(Neighbour &&o) noexcept {
  if (this != &o) {
    stop();
    pids_ = std::exchange(o.pids_, {});
  }
  return *this;
}

Neighbour::~Neighbour() {
  stop();
}

void Neighbour::stop() {
  reap(pids_);
}

} // namespace mltune
