// Busy loops on CPUs while a function runs (see feeder/busy.hpp).
#include "feeder/busy.hpp"

#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "mltune/parse.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace mltune::feeder {

namespace {

// An emulated guest can leave a vCPU unscheduled for a second or more.
constexpr auto k_wait = std::chrono::seconds(5);
constexpr auto k_poll = std::chrono::milliseconds(1);
// Between reads of /proc/interrupts (megabytes on a large node): about a
// tick at HZ=250.
constexpr auto k_tick_poll = std::chrono::milliseconds(4);
constexpr std::uint64_t k_ticks = 2;

// The local timer interrupts of each CPU of `cpus`, in that order; nullopt
// when /proc/interrupts cannot be read or has no LOC row for one of them.
std::optional<std::vector<std::uint64_t>> local_timer(const Sysroot &root, const std::vector<unsigned> &cpus) {
  auto text = root.read("/proc/interrupts");
  if (!text) {
    return std::nullopt;
  }
  auto table = proc::parse_counters(*text, "/proc/interrupts");
  if (!table) {
    return std::nullopt;
  }
  std::vector<std::uint64_t> out;
  for (const unsigned c : cpus) {
    auto n = table->count("LOC", c);
    if (!n) {
      return std::nullopt;
    }
    out.push_back(*n);
  }
  return out;
}

// Each loop's progress: starting, running on its CPU, or the errno of the
// affinity it could not take.
constexpr int k_starting = 0;
constexpr int k_running = 1;

} // namespace

CpuSet cpus_in_domains(std::string_view schedstat) {
  CpuSet out;
  std::optional<unsigned> cpu;
  for (const auto line : split_lines(schedstat)) {
    if (line.starts_with("cpu")) {
      const auto words = split_words(line);
      cpu = parse_int<unsigned>(words.front().substr(3));
    } else if (line.starts_with("domain") && cpu) {
      out.set(*cpu);
    }
  }
  return out;
}

std::optional<bool> wait_domains_gone(const Sysroot &root, const CpuSet &cpus) {
  if (!root.acts_on_node()) {
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + k_wait;
  for (;;) {
    const auto text = root.read("/proc/schedstat");
    if (!text) {
      return std::nullopt;
    }
    if (!cpus_in_domains(*text).intersects(cpus)) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(k_poll);
  }
}

namespace {

// What the loops and this process share (an anonymous shared mapping made
// before fork, zeroed, read and written through std::atomic_ref): the start
// and stop signals and each loop's progress.
struct Board {
  int go;
  int stop;
  std::array<int, k_max_cpus> state;
};

std::atomic_ref<int> at(int &v) {
  return std::atomic_ref<int>(v);
}

// One busy loop: a child process that spins on `cpu` (`one`, its mask)
// once it was put in the cgroup; dies with its parent.  It allocates
// nothing: the parent may have other threads (mltunectl serve), whose locks
// a forked child must not wait for.
[[noreturn]] void spin(Board &b, size_t i, unsigned cpu, const CpuSet::Native &one, pid_t parent) {
  (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    ::_exit(0);
  }
  while (at(b.go).load() == 0) {
  }
  if (at(b.go).load() < 0) {
    ::_exit(0);
  }
  if (::sched_setaffinity(0, CpuSet::Native::size(), one.get()) != 0) {
    at(b.state[i]) = errno;
    ::_exit(0);
  }
  while (at(b.stop).load(std::memory_order_relaxed) == 0) {
    if (at(b.state[i]).load(std::memory_order_relaxed) == k_starting && ::sched_getcpu() == static_cast<int>(cpu)) {
      at(b.state[i]) = k_running;
    }
  }
  ::_exit(0);
}

// The loops' processes, stopped and reaped when it goes.
class Loops {
public:
  Loops() {
    void *m = ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
      board_ = static_cast<Board *>(m);
    }
  }
  Loops(const Loops &) = delete;
  Loops &operator=(const Loops &) = delete;
  ~Loops() {
    if (board_ != nullptr) {
      at(board_->stop) = 1;
      if (at(board_->go).load() == 0) {
        at(board_->go) = -1;
      }
    }
    for (const pid_t p : pids_) {
      int status = 0;
      while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (board_ != nullptr) {
      ::munmap(board_, sizeof(Board));
    }
  }
  [[nodiscard]] Board *board() const { return board_; }
  // Forks the loop for CPU `cpu` (index i, mask `one`); -1 when fork failed.
  pid_t start(size_t i, unsigned cpu, const CpuSet::Native &one) {
    const pid_t parent = ::getpid();
    const pid_t p = ::fork();
    if (p == 0) {
      spin(*board_, i, cpu, one, parent);
    }
    if (p > 0) {
      pids_.push_back(p);
    }
    return p;
  }

private:
  Board *board_ = nullptr;
  std::vector<pid_t> pids_;
};

} // namespace

Status while_busy(const Sysroot &root, const CpuSet &cpus, const std::string &cgroup, const std::function<Status()> &fn,
                  std::string &note) {
  note.clear();
  if (!root.acts_on_node() || cpus.empty()) {
    return fn();
  }
  const std::vector<unsigned> list = cpus.cpus();
  std::vector<CpuSet::Native> masks;
  masks.reserve(list.size());
  for (const unsigned c : list) {
    masks.push_back(CpuSet{c}.native());
  }
  std::vector<std::string> why(list.size());
  Status result;
  {
    Loops loops;
    Board *b = loops.board();
    if (b == nullptr) {
      note = std::string("no busy loops (mmap: ") + std::strerror(errno) + ")";
      return fn();
    }
    // Each loop joins the cgroup first: a loop outside it would be moved
    // off the CPUs by the partition itself, leaving them idle while the
    // kernel takes their domains away.
    for (size_t i = 0; i < list.size(); ++i) {
      const pid_t p = loops.start(i, list[i], masks[i]);
      if (p < 0) {
        why[i] = std::string("fork: ") + std::strerror(errno);
        at(b->state[i]) = -1;
      } else if (auto st = root.write_value(cgroup::path(cgroup, "cgroup.procs"), std::to_string(p)); !st) {
        why[i] = "its busy loop could not join the feeder cgroup: " + st.error().message;
        at(b->state[i]) = -1;
        (void)::kill(p, SIGKILL);
      }
    }
    at(b->go) = 1;
    const auto deadline = std::chrono::steady_clock::now() + k_wait;
    const auto all = [&](auto pred) {
      for (size_t i = 0; i < list.size(); ++i) {
        if (!pred(i)) {
          return false;
        }
      }
      return true;
    };
    while (!all([&](size_t i) { return at(b->state[i]).load() != k_starting; }) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(k_poll);
    }
    const auto start = local_timer(root, list);
    std::optional<std::vector<std::uint64_t>> now = start;
    const auto ticked = [&](size_t i) {
      return at(b->state[i]).load() != k_running || (start && now && (*now)[i] >= (*start)[i] + k_ticks);
    };
    while (start && now && !all(ticked) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(k_tick_poll);
      now = local_timer(root, list);
    }
    std::string missed;
    for (size_t i = 0; i < list.size(); ++i) {
      const int st = at(b->state[i]).load();
      std::string w = why[i];
      if (!w.empty()) {
        // said when it happened
      } else if (st == k_starting) {
        w = "its busy loop did not run there within " + std::to_string(k_wait.count()) + " s";
      } else if (st != k_running) {
        w = std::string("a process cannot run there (sched_setaffinity: ") + std::strerror(st) + ")";
      } else if (!start || !now) {
        w = "no local timer count in /proc/interrupts";
      } else if (!ticked(i)) {
        w = "no timer tick while busy within " + std::to_string(k_wait.count()) + " s";
      }
      if (!w.empty()) {
        missed += (missed.empty() ? "" : "; ") + ("CPU " + std::to_string(list[i]) + ": " + w);
      }
    }
    note = missed;
    result = fn();
  }
  return result;
}

} // namespace mltune::feeder
