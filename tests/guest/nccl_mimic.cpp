// nccl_mimic: a stand-in for a process with NCCL loaded, for tests/guest/sched.sh.
//
// Like NCCL with NCCL_SET_THREAD_NAME=1 it starts two threads that busy-poll
// with sched_yield() and, after a delay, name themselves "NCCL Progress 8" and
// "NCCL Service  0" (pthread_setname_np).  Later the service thread creates
// another thread, as NCCL's service thread does; whether that clone() succeeds
// is reported.  A third thread ("mimic-worker") never matches a rule.
//
//   nccl_mimic [--delay MS] [--spawn-after MS] [--run MS] [--progress N] [--hold FILE]
//              [--service-poll MS]
//
// --service-poll MS: after its spawn the service thread sleeps MS between
// polls, as NCCL's does in poll() when no operation is pending (500 ms), so
// it is asleep when a tool changes it (1 by default: like the others).
// --run MS: how long the threads live.  With --hold FILE they live until FILE
// exists (the test creates it once it has looked at them), --run MS being
// the upper bound.
// Output (one line each, CLOCK_MONOTONIC seconds):
//   ready pid=P
//   named tid=T name="..." mono=S.NNNNNN
//   spawn result=ok|errno=E tid=T policy=N
//   exit
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace {

int g_delay_ms = 500;
int g_spawn_after_ms = 1500;
int g_run_ms = 4000;
int g_progress = 1;
int g_service_poll_ms = 1;
std::string g_hold;
volatile bool g_stop = false;
pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;

double mono() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) {
  pthread_mutex_lock(&g_out);
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fflush(stdout);
  pthread_mutex_unlock(&g_out);
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Polls like NCCL's proxy loop, but sleeps a little (ms) so the TCG guest stays usable.
void poll_until_stop(int ms = 1) {
  while (!g_stop) {
    for (int i = 0; i < 10; ++i) {
      sched_yield();
    }
    sleep_ms(ms);
  }
}

void name_self(const char *name) {
  sleep_ms(g_delay_ms);
  pthread_setname_np(pthread_self(), name);
  say("named tid=%ld name=\"%s\" mono=%.6f\n", static_cast<long>(syscall(SYS_gettid)), name, mono());
}

void *child_main(void * /*arg*/) {
  poll_until_stop();
  return nullptr;
}

void *progress_main(void *arg) {
  const long n = reinterpret_cast<long>(arg);
  char name[16];
  std::snprintf(name, sizeof(name), "NCCL Progress%2ld", n);
  name_self(name);
  poll_until_stop();
  return nullptr;
}

void *service_main(void * /*arg*/) {
  name_self("NCCL Service  0");
  sleep_ms(g_spawn_after_ms);
  pthread_t t;
  const int rc = pthread_create(&t, nullptr, child_main, nullptr);
  if (rc != 0) {
    say("spawn result=errno=%d (%s)\n", rc, std::strerror(rc));
  } else {
    sleep_ms(50);
    say("spawn result=ok\n");
  }
  poll_until_stop(g_service_poll_ms);
  if (rc == 0) {
    pthread_join(t, nullptr);
  }
  return nullptr;
}

void *worker_main(void * /*arg*/) {
  pthread_setname_np(pthread_self(), "mimic-worker");
  poll_until_stop();
  return nullptr;
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--delay") {
      g_delay_ms = v;
    } else if (a == "--spawn-after") {
      g_spawn_after_ms = v;
    } else if (a == "--run") {
      g_run_ms = v;
    } else if (a == "--progress") {
      g_progress = v;
    } else if (a == "--service-poll") {
      g_service_poll_ms = v;
    } else if (a == "--hold") {
      g_hold = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: nccl_mimic [--delay MS] [--spawn-after MS] [--run MS] [--progress N] [--hold FILE] "
                           "[--service-poll MS]\n");
      return 2;
    }
  }
  say("ready pid=%d\n", static_cast<int>(getpid()));
  std::vector<pthread_t> threads;
  pthread_t t;
  pthread_create(&t, nullptr, worker_main, nullptr);
  threads.push_back(t);
  for (int i = 0; i < g_progress; ++i) {
    pthread_create(&t, nullptr, progress_main, reinterpret_cast<void *>(static_cast<long>(8 + i)));
    threads.push_back(t);
  }
  pthread_create(&t, nullptr, service_main, nullptr);
  threads.push_back(t);
  if (g_hold.empty()) {
    sleep_ms(g_run_ms);
  } else {
    for (int waited = 0; waited < g_run_ms && access(g_hold.c_str(), F_OK) != 0; waited += 20) {
      sleep_ms(20);
    }
  }
  g_stop = true;
  for (auto &th : threads) {
    pthread_join(th, nullptr);
  }
  say("exit\n");
  return 0;
}
