// Noise accounting on a fake node: the /proc fallback probe (deltas of
// /proc/interrupts, /proc/softirqs and per-thread schedstat), the fallback
// from an unavailable or failing BPF probe, the report built from the BPF
// maps' structs (names, known sources, own work, ranking, the task still
// running when the window closes), kallsyms names, audit findings and the
// CLI surface.
#include "fake_sysroot.hpp"

#include "cli.hpp"
#include "mltune/noise.hpp"
#include "noise/bpf_raw.hpp"

#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/stat.h>

using namespace mltune;
using mltune::test::FakeSysroot;

namespace {

constexpr const char *k_interrupts_before = R"(            CPU0       CPU1       CPU2       CPU3
   0:         40          0          0          0   IO-APIC   2-edge      timer
   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
  25:          0          0        100          0  PCI-MSIX-0000:00:02.0   0-edge      eth0-rx-0
  26:          5          0          0          0  PCI-MSIX-0000:00:02.0   1-edge      ahci[0000:00:1f.2], eth1
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:       1000       1000       1000       1000   Local timer interrupts
 RES:         10         10         10         10   Rescheduling interrupts
 CAL:          3          3          3          3   Function call interrupts
 TLB:          1          1          1          1   TLB shootdowns
 ERR:          0
 MIS:          0
)";

constexpr const char *k_interrupts_after = R"(            CPU0       CPU1       CPU2       CPU3
   0:         40          0          0          0   IO-APIC   2-edge      timer
   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
  25:          0          0       1100          0  PCI-MSIX-0000:00:02.0   0-edge      eth0-rx-0
  26:          9          0          7          0  PCI-MSIX-0000:00:02.0   1-edge      ahci[0000:00:1f.2], eth1
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:       1250       1250       1250       1250   Local timer interrupts
 RES:         10         10         30         10   Rescheduling interrupts
 CAL:          3          3          5          3   Function call interrupts
 TLB:          1          1          2          1   TLB shootdowns
 ERR:          0
 MIS:          0
)";

constexpr const char *k_softirqs_before = R"(                    CPU0       CPU1       CPU2       CPU3
          HI:          0          0          0          0
       TIMER:         10         10         10         10
      NET_RX:          0          0          5          0
         RCU:         50         50         50         50
)";

constexpr const char *k_softirqs_after = R"(                    CPU0       CPU1       CPU2       CPU3
          HI:          0          0          0          0
       TIMER:         20         20         40         20
      NET_RX:          0          0        905          0
         RCU:         60         60         70         60
)";

// /proc/PID/task/TID/stat with `comm`, PF_* `flags` and last CPU `cpu`.
std::string stat_line(int tid, const std::string &comm, unsigned flags, unsigned cpu) {
  std::string s = std::to_string(tid) + " (" + comm + ") S 2 0 0 0 -1 " + std::to_string(flags);
  for (int f = 10; f < 39; ++f) { // fields 10..38
    s += " 0";
  }
  return s + " " + std::to_string(cpu) + " 0 0\n";
}

void set_task(const FakeSysroot &fake, int pid, int tid, const std::string &comm, unsigned flags, unsigned cpu,
              const std::string &run_ns, const std::string &slices, const std::string &cgroup) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  fake.set(dir + "/stat", stat_line(tid, comm, flags, cpu));
  fake.set(dir + "/schedstat", run_ns + " 0 " + slices + "\n");
  fake.set("/proc/" + std::to_string(pid) + "/cgroup", "0::" + cgroup + "\n");
}

constexpr unsigned k_kthread = 0x00200000;

struct Node {
  FakeSysroot fake;
  Node() {
    fake.set("/sys/devices/system/cpu/online", "0-3\n");
    fake.set("/proc/interrupts", k_interrupts_before);
    fake.set("/proc/softirqs", k_softirqs_before);
    set_task(fake, 40, 40, "kworker/2:1", k_kthread, 2, "1000000", "10", "/");
    set_task(fake, 300, 300, "trainer", 0, 2, "5000000", "4", "/mltune-feeder");
    set_task(fake, 301, 301, "elsewhere", 0, 0, "100", "1", "/");
  }
  void advance() const {
    fake.set("/proc/interrupts", k_interrupts_after);
    fake.set("/proc/softirqs", k_softirqs_after);
    set_task(fake, 40, 40, "kworker/2:1", k_kthread, 2, "3000000", "25", "/");
    set_task(fake, 300, 300, "trainer", 0, 2, "905000000", "9", "/mltune-feeder");
    set_task(fake, 301, 301, "elsewhere", 0, 0, "999999", "50", "/");
    // a thread that started in the window, on CPU 3
    set_task(fake, 302, 302, "newcomer", 0, 3, "700", "2", "/user.slice");
  }
};

const NoiseSource *find(const CpuNoise &c, const std::string &id) {
  for (const auto &s : c.sources) {
    if (s.id == id) {
      return &s;
    }
  }
  return nullptr;
}

const CpuNoise *cpu_of(const NoiseReport &r, unsigned cpu) {
  for (const auto &c : r.per_cpu) {
    if (c.cpu == cpu) {
      return &c;
    }
  }
  return nullptr;
}

CpuSet cpus(const std::string &s) {
  return *parse_cpuset(s);
}

// A BPF probe that cannot start (a kernel without BTF, a verifier refusal).
class FailingProbe final : public NoiseProbe {
public:
  [[nodiscard]] std::string name() const override { return "bpf"; }
  Status start(const CpuSet & /*cpus*/) override { return failure("BPF: load the noise BPF programs: EPERM"); }
  Result<RawNoise> stop() override { return failure("not started"); }
};

} // namespace

TEST(NoiseProc, DeltasPerCpuAndSource) {
  Node n;
  auto proc = make_proc_noise_probe(n.fake.root());
  ASSERT_TRUE(proc->start(cpus("2-3")));
  n.advance();
  auto raw = proc->stop();
  ASSERT_TRUE(raw) << raw.error().message;
  const NoiseReport r = build_noise_report(n.fake.root(), *raw, cpus("2-3"), 10, "/mltune-feeder", {});
  ASSERT_EQ(r.per_cpu.size(), 2U);
  const CpuNoise *c2 = cpu_of(r, 2);
  ASSERT_NE(c2, nullptr);
  const auto *irq = find(*c2, "irq:25");
  ASSERT_NE(irq, nullptr);
  EXPECT_EQ(irq->count, 1000U);
  EXPECT_EQ(irq->name, "IRQ 25 eth0-rx-0");
  EXPECT_FALSE(irq->ns.has_value()); // /proc has no time per interrupt
  const auto *shared = find(*c2, "irq:26");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->count, 7U);
  EXPECT_EQ(shared->name, "IRQ 26 ahci[0000:00:1f.2], eth1");
  EXPECT_EQ(find(*c2, "timer:all")->count, 250U);
  EXPECT_EQ(find(*c2, "ipi:reschedule")->count, 20U);
  EXPECT_EQ(find(*c2, "ipi:call_function")->count, 2U);
  EXPECT_EQ(find(*c2, "softirq:NET_RX")->count, 900U);
  EXPECT_FALSE(find(*c2, "softirq:NET_RX")->interruption);
  EXPECT_EQ(find(*c2, "softirq:RCU")->known, "RCU callback processing");
  EXPECT_EQ(find(*c2, "vector:NMI"), nullptr); // no change: not listed
  const auto *kw = find(*c2, "task:40");
  ASSERT_NE(kw, nullptr);
  EXPECT_EQ(kw->count, 15U);
  EXPECT_EQ(kw->ns, 2000000U);
  EXPECT_TRUE(kw->kthread);
  EXPECT_EQ(kw->known, "workqueue worker");
  const auto *own = find(*c2, "task:300");
  ASSERT_NE(own, nullptr);
  EXPECT_TRUE(own->own);
  // Foreign interruptions: IRQs 1000 + 7, LOC 250, RES 20, CAL 2, kworker 15.
  EXPECT_EQ(c2->interruptions, 1294U);
  EXPECT_DOUBLE_EQ(c2->per_second, 129.4);
  EXPECT_EQ(c2->details.size(), 1U); // TLB shootdowns
  EXPECT_EQ(c2->details[0].what, "tlb_shootdown");
  // Ranked by count without time: the IRQ first, own work last.
  ASSERT_FALSE(c2->offenders(1).empty());
  EXPECT_EQ(c2->offenders(1)[0]->id, "irq:25");
  EXPECT_TRUE(c2->sources.back().own);
  // CPU 0 is not watched; the new thread on CPU 3 is charged there.
  EXPECT_EQ(cpu_of(r, 0), nullptr);
  const auto *nc = find(*cpu_of(r, 3), "task:302");
  ASSERT_NE(nc, nullptr);
  EXPECT_EQ(nc->cgroup, "/user.slice");
}

TEST(NoiseProc, MissingCountersAreAnError) {
  FakeSysroot fake;
  auto proc = make_proc_noise_probe(fake.root());
  const auto st = proc->start(cpus("0"));
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("/proc/interrupts"), std::string::npos);
}

TEST(NoiseMeasure, FallsBackToProcAndSaysWhy) {
  Node n;
  auto proc = make_proc_noise_probe(n.fake.root());
  NoiseOptions opt;
  opt.cpus = cpus("2");
  const NoiseWindow window = [&n]() -> Status {
    n.advance();
    return {};
  };
  // BPF not built / not loadable: the reason is kept.
  auto r =
      measure_noise(n.fake.root(), opt, nullptr, "this mltunectl was built without the BPF toolchain", *proc, window);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->probe, "proc");
  EXPECT_EQ(r->fallback, "this mltunectl was built without the BPF toolchain");
  EXPECT_EQ(find(r->per_cpu.at(0), "irq:25")->count, 1000U);

  // BPF present but refused at load: falls back too.
  Node m;
  auto proc2 = make_proc_noise_probe(m.fake.root());
  FailingProbe bpf;
  const NoiseWindow w2 = [&m]() -> Status {
    m.advance();
    return {};
  };
  r = measure_noise(m.fake.root(), opt, &bpf, "", *proc2, w2);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->probe, "proc");
  EXPECT_NE(r->fallback.find("EPERM"), std::string::npos);

  // Asked for BPF explicitly: an error, no fallback.
  opt.probe = "bpf";
  r = measure_noise(m.fake.root(), opt, &bpf, "", *proc2, w2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("EPERM"), std::string::npos);
  opt.probe = "sometimes";
  r = measure_noise(m.fake.root(), opt, &bpf, "", *proc2, w2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, Errc::input);
}

TEST(NoiseMeasure, EveryOnlineCpuByDefault) {
  Node n;
  n.fake.set("/sys/devices/system/cpu/online", "1-2\n");
  auto proc = make_proc_noise_probe(n.fake.root());
  auto r = measure_noise(n.fake.root(), {}, nullptr, "no BPF", *proc, []() -> Status { return {}; });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cpus.str(), "1-2");
  EXPECT_EQ(r->per_cpu.size(), 2U);
}

namespace {

RawNoiseEntry bpf_entry(unsigned cpu, unsigned kind, std::uint64_t id, std::uint64_t count, std::uint64_t ns,
                        const char *name = "", std::uint64_t bh_ns = 0) {
  mltune_noise_key k{cpu, kind, id};
  mltune_noise_val v{};
  v.count = count;
  v.ns = ns;
  v.bh_ns = bh_ns;
  std::strncpy(v.name, name, sizeof v.name - 1);
  return raw_entry(k, v);
}

} // namespace

TEST(NoiseBpf, ReportNamesKnownSourcesAndRanksByTime) {
  FakeSysroot fake;
  fake.set("/sys/fs/cgroup/mltune-feeder/cgroup.procs", "");
  fake.set("/sys/fs/cgroup/system.slice/cgroup.procs", "");
  struct stat st {};
  ASSERT_EQ(::stat((fake.dir() / "sys/fs/cgroup/mltune-feeder").c_str(), &st), 0);
  const std::uint64_t feeder_cg = st.st_ino;
  ASSERT_EQ(::stat((fake.dir() / "sys/fs/cgroup/system.slice").c_str(), &st), 0);
  const std::uint64_t sys_cg = st.st_ino;

  RawNoise raw;
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_IRQ, 25, 900, 90000, "virtio2-input.0", 4000000));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_TIMER, 0xffffffff81100000ULL, 250, 500000));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_TIMER_DL_SERVER, 0, 40, 80000));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_TIMER_TASK, 300, 1000, 2000000, "trainer"));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_TIMER_TASK, 77, 5, 1000, "sleeper"));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_VECTOR, MLTUNE_VEC_CALL_FUNCTION, 3, 300));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_VECTOR, MLTUNE_VEC_TLB_SHOOTDOWN, 2, 0));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_SOFTIRQ, 3, 900, 3900000));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_WORK, 0xffffffff81200000ULL, 4, 0));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_HRTIMER_DL_SERVER, 0, 3, 0));
  auto own = bpf_entry(2, MLTUNE_NOISE_TASK, 300, 1000, 800000000, "trainer");
  own.cgid = feeder_cg;
  raw.entries.push_back(own);
  auto daemon = bpf_entry(2, MLTUNE_NOISE_TASK, 512, 12, 3000000, "chronyd");
  daemon.cgid = sys_cg;
  daemon.tgid = 510;
  raw.entries.push_back(daemon);
  raw.entries.push_back(bpf_entry(3, MLTUNE_NOISE_IRQ, 30, 1, 10, "other"));
  raw.switches[2] = 2024;
  const std::map<std::uint64_t, std::string> syms{{0xffffffff81100000ULL, "tick_nohz_handler"},
                                                  {0xffffffff81200000ULL, "vmstat_update"}};

  const NoiseReport r = build_noise_report(fake.root(), raw, cpus("2"), 10, "/mltune-feeder", syms);
  ASSERT_EQ(r.per_cpu.size(), 1U);
  const CpuNoise &c = r.per_cpu[0];
  EXPECT_EQ(c.switches, 2024U);
  // The IRQ with the softirqs on its exit takes the most time: the worst offender.
  const auto off = c.offenders(3);
  ASSERT_EQ(off.size(), 3U);
  EXPECT_EQ(off[0]->id, "irq:25");
  EXPECT_EQ(off[0]->name, "IRQ 25 virtio2-input.0");
  EXPECT_EQ(off[0]->cost(), 4090000U);
  EXPECT_NE(off[0]->fix.find("/proc/irq/25/smp_affinity_list"), std::string::npos);
  EXPECT_EQ(off[1]->id, "task:512");
  EXPECT_EQ(off[1]->cgroup, "/system.slice");
  EXPECT_EQ(off[1]->tgid, 510);
  EXPECT_EQ(off[2]->id, "timer:tick_nohz_handler");
  EXPECT_EQ(off[2]->known, "scheduler tick");
  EXPECT_NE(off[2]->fix.find("nohz_full="), std::string::npos);
  const auto *dl = find(c, "timer:dl_server");
  ASSERT_NE(dl, nullptr);
  EXPECT_NE(dl->known.find("deadline server"), std::string::npos);
  EXPECT_NE(dl->fix.find("fair_server"), std::string::npos);
  // The feeder's own task and its own sleeps are not noise.
  EXPECT_TRUE(find(c, "task:300")->own);
  EXPECT_TRUE(find(c, "timer-task:300")->own);
  EXPECT_FALSE(find(c, "timer-task:77")->own);
  EXPECT_EQ(find(c, "timer-task:77")->name, "local timer: wake-up of sleeper (pid 77)");
  // irq 900 + tick 250 + dl 40 + sleeper 5 + CAL 3 + chronyd 12
  EXPECT_EQ(c.interruptions, 1210U);
  EXPECT_EQ(c.foreign_ns, 90000U + 500000 + 80000 + 1000 + 300 + 3000000 + 3900000);
  ASSERT_EQ(c.details.size(), 3U); // most frequent first
  EXPECT_EQ(c.details[0].function, "vmstat_update");
  EXPECT_EQ(c.details[0].known, "vmstat per-CPU counter folding");
  EXPECT_NE(c.details[0].fix.find("vm.stat_interval"), std::string::npos);
  EXPECT_EQ(c.details[1].function, "dl_server"); // its expiries, whatever expired first
  EXPECT_NE(c.details[1].known.find("deadline server"), std::string::npos);
  EXPECT_EQ(c.details[2].what, "tlb_shootdown");
}

// The resched IPIs a nohz_full CPU takes once a second with NUMA balancing
// on: the scan its task runs afterwards is the detail that names them.
TEST(NoiseBpf, NumaBalancingScanIsNamedWithItsFix) {
  FakeSysroot fake;
  RawNoise raw;
  raw.entries.push_back(bpf_entry(5, MLTUNE_NOISE_VECTOR, MLTUNE_VEC_RESCHEDULE, 10, 2000));
  raw.entries.push_back(bpf_entry(5, MLTUNE_NOISE_NUMA_SCAN, 0, 10, 123456));
  const NoiseReport r = build_noise_report(fake.root(), raw, cpus("5"), 10, "/mltune-feeder", {});
  ASSERT_EQ(r.per_cpu.size(), 1U);
  const CpuNoise &c = r.per_cpu[0];
  EXPECT_EQ(c.interruptions, 10U); // the scan is not an interruption of its own
  const auto *res = find(c, "ipi:reschedule");
  ASSERT_NE(res, nullptr);
  EXPECT_NE(res->fix.find("kernel.numa_balancing=0"), std::string::npos) << res->fix;
  ASSERT_EQ(c.details.size(), 1U);
  EXPECT_EQ(c.details[0].what, "task_work");
  EXPECT_EQ(c.details[0].function, "task_numa_work");
  EXPECT_EQ(c.details[0].count, 10U);
  EXPECT_NE(c.details[0].known.find("NUMA balancing"), std::string::npos);
  EXPECT_NE(c.details[0].fix.find("numa_balancing=disable"), std::string::npos);
}

TEST(NoiseBpf, TaskRunningWhenTheWindowClosesIsCharged) {
  RawNoise raw;
  std::vector<mltune_noise_pcpu> pcpu(4);
  auto &s = pcpu[2];
  s.task_pid = 99;
  s.task_tgid = 98;
  std::strncpy(s.task_comm, "busy", sizeof s.task_comm - 1);
  s.task_ts = 500;  // before the window: charged from start_ns
  s.hard_ns = 3000; // hardirqs while it ran
  s.task_hard_base = 1000;
  s.soft_ns = 700;
  s.task_soft_base = 200;
  pcpu[3].task_pid = 5; // not watched
  pcpu[3].task_ts = 1;
  add_running_tasks(raw, pcpu, cpus("1-2"), 1000, 101000);
  ASSERT_EQ(raw.entries.size(), 1U);
  EXPECT_EQ(raw.entries[0].cpu, 2U);
  EXPECT_EQ(raw.entries[0].id, 99U);
  EXPECT_EQ(raw.entries[0].name, "busy");
  EXPECT_EQ(raw.entries[0].count, 0U);
  EXPECT_EQ(raw.entries[0].ns, 100000U - 2000 - 500);
  // An entry that exists already gets the time added.
  add_running_tasks(raw, pcpu, cpus("2"), 1000, 101000);
  ASSERT_EQ(raw.entries.size(), 1U);
  EXPECT_EQ(raw.entries[0].ns, 2 * (100000U - 2500));
}

TEST(NoiseKallsyms, NamesOnlyTheAddressesAsked) {
  FakeSysroot fake;
  fake.set("/proc/kallsyms", "ffffffff81000000 T _stext\n"
                             "ffffffff81100000 t tick_nohz_handler\n"
                             "ffffffffc0001000 t e1000_intr\t[e1000e]\n"
                             "ffffffff81200000 T vmstat_update\n");
  const auto m = load_kallsyms(fake.root(), {0xffffffff81100000ULL, 0xffffffffc0001000ULL, 0x1234});
  ASSERT_EQ(m.size(), 2U);
  EXPECT_EQ(m.at(0xffffffff81100000ULL), "tick_nohz_handler");
  EXPECT_EQ(m.at(0xffffffffc0001000ULL), "e1000_intr");
}

TEST(NoiseFindings, OffendersOverBudgetWithConcreteFixes) {
  RawNoise raw;
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_TIMER, 0x10, 2500, 500000));
  raw.entries.push_back(bpf_entry(3, MLTUNE_NOISE_TIMER, 0x10, 10, 2000));
  raw.entries.push_back(bpf_entry(2, MLTUNE_NOISE_HRTIMER_DL_SERVER, 0, 40, 0));
  FakeSysroot fake;
  const NoiseReport r =
      build_noise_report(fake.root(), raw, cpus("2-3"), 10, "/mltune-feeder", {{0x10, "tick_nohz_handler"}});
  const auto f = noise_findings(r, 100);
  ASSERT_EQ(f.size(), 4U);
  EXPECT_EQ(f[0].id, "noise:cpu2");
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_EQ(f[1].id, "noise:cpu2:timer:tick_nohz_handler");
  EXPECT_NE(f[1].fix.find("nohz_full=2-3"), std::string::npos) << f[1].fix;
  EXPECT_EQ(f[2].id, "noise:cpu2:hrtimer:dl_server");
  EXPECT_EQ(f[2].severity, Severity::info);
  EXPECT_NE(f[2].fix.find("fair_server/cpu2/runtime"), std::string::npos) << f[2].fix;
  EXPECT_EQ(f[3].id, "noise:cpu3");
  EXPECT_EQ(f[3].severity, Severity::ok);
}

TEST(NoiseCli, ProbeChoiceAndJson) {
  Node n;
  auto run = [&n](std::vector<std::string> args) {
    args.insert(args.begin(), {"--sysroot", n.fake.dir().string()});
    std::ostringstream o;
    std::ostringstream e;
    const int rc = cli::run(args, o, e);
    return std::tuple{rc, o.str(), e.str()};
  };
  auto [rc, out, err] = run({"noise", "--probe", "bpf", "--", "true"});
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("BPF"), std::string::npos) << err;
  std::tie(rc, out, err) = run({"noise", "--probe", "maybe", "--", "true"});
  EXPECT_EQ(rc, 2);
  std::tie(rc, out, err) = run({"noise", "--cpus", "9-2", "--", "true"});
  EXPECT_EQ(rc, 2) << err;
  std::tie(rc, out, err) = run({"noise", "--duration", "-1"});
  EXPECT_EQ(rc, 2) << err;
  std::tie(rc, out, err) = run({"--json", "noise", "--cpus", "2-3", "--", "true"});
  ASSERT_EQ(rc, 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["probe"], "proc"); // --sysroot: never BPF
  EXPECT_NE(j["fallback"].get<std::string>().find("--sysroot"), std::string::npos);
  EXPECT_EQ(j["cpus"], "2-3");
  EXPECT_EQ(j["per_cpu"].size(), 2U);
  EXPECT_EQ(j["command_status"], 0);
  std::tie(rc, out, err) = run({"noise", "--cpus", "2", "--", "false"});
  EXPECT_EQ(rc, 1); // the command failed
  EXPECT_NE(out.find("CPU 2: 0 interruptions"), std::string::npos) << out;
  // audit --noise: one finding per CPU (no plan on this node: every CPU).
  std::tie(rc, out, err) = run({"--json", "audit", "--noise", "0.01"});
  const auto a = nlohmann::json::parse(out);
  std::set<std::string> ids;
  for (const auto &f : a["findings"]) {
    if (f["category"] == "noise") {
      ids.insert(f["id"].get<std::string>());
      EXPECT_EQ(f["severity"], "ok") << f.dump();
    }
  }
  EXPECT_EQ(ids, (std::set<std::string>{"noise:cpu0", "noise:cpu1", "noise:cpu2", "noise:cpu3"}));
}
