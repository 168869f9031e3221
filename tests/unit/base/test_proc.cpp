// /proc/PID/stat parsing (base/proc.hpp), the kernel command line
// (node_info.hpp) and cgroup directories (base/cgroup.hpp).
#include "base/cgroup.hpp"
#include "base/proc.hpp"
#include "fake_sysroot.hpp"
#include "mltune/caches.hpp"
#include "mltune/node_info.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>
#include <unistd.h>

using namespace mltune;
using mltune::test::FakeSysroot;

TEST(ProcStat, CommWithSpacesAndParentheses) {
  const auto s = proc::parse_stat("42 (NCCL (x) Service 0) S 1 42 42 0 -1 4194560 "
                                  "0 0 0 0 0 0 0 0 20 0 3 0 987654\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->comm, "NCCL (x) Service 0");
  EXPECT_EQ(s->fields.at(0), "S");
  EXPECT_EQ(s->field<unsigned>(proc::k_stat_flags), 4194560U);
  EXPECT_EQ(s->field<uint64_t>(proc::k_stat_starttime), 987654U);
}

// The thread scan of a tree: every numeric task with its name, by pid then
// tid (numerically: 9 before 10), newline stripped; other entries and
// tasks without a comm file are left out.
TEST(ProcTaskNames, ScansEveryThreadByPidAndTid) {
  const FakeSysroot fake;
  fake.set("/proc/10/task/10/comm", "python3\n");
  fake.set("/proc/10/task/12/comm", "NCCL Service 0\n");
  fake.set("/proc/10/task/11/comm", "pt_autograd_0\n");
  fake.set("/proc/9/task/9/comm", "sshd");
  fake.set("/proc/9/task/notatid/comm", "x\n");
  fake.set("/proc/self/task/1/comm", "x\n");
  fake.set("/proc/sys/kernel/ostype", "Linux\n");
  fake.set("/proc/11/task/13/stat", "13 (gone) Z 1");
  const auto t = proc::task_names(fake.root());
  ASSERT_EQ(t.size(), 4U);
  EXPECT_EQ(t[0].pid, 9);
  EXPECT_EQ(t[0].comm, "sshd");
  EXPECT_EQ(t[1].tid, 10);
  EXPECT_EQ(t[1].comm, "python3");
  EXPECT_EQ(t[2].tid, 11);
  EXPECT_EQ(t[3].pid, 10);
  EXPECT_EQ(t[3].tid, 12);
  EXPECT_EQ(t[3].comm, "NCCL Service 0");
  EXPECT_TRUE(proc::task_names(Sysroot("/nonexistent-mltune-root")).empty());
}

// On the live node the scan finds this thread under its own name.
TEST(ProcTaskNames, FindsThisThreadOnTheLiveNode) {
  const auto t = proc::task_names(Sysroot("/"));
  const int me = static_cast<int>(::getpid());
  EXPECT_TRUE(std::ranges::any_of(t, [&](const proc::TaskName &n) { return n.pid == me && n.tid == me; }));
}

TEST(ProcStat, ShortOrMalformedLines) {
  EXPECT_FALSE(proc::parse_stat("no parentheses").has_value());
  EXPECT_FALSE(proc::parse_stat("1 ) S (").has_value());
  const auto s = proc::parse_stat("7 (k) S 2");
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->field<unsigned>(proc::k_stat_flags).has_value()); // beyond the line
  EXPECT_FALSE(s->field<unsigned>(3).has_value());                  // "S" is no number
  EXPECT_FALSE(s->field<unsigned>(2).has_value());                  // comm is not a numbered field here
}

// /proc/interrupts with an offline CPU (no column), a row of one count
// (ERR), an IRQ row with its description, and a row cut short.
TEST(ProcCounters, ColumnsRowsAndCounts) {
  const std::string text = "           CPU0       CPU1       CPU3\n"
                           "  24:         10          0          5  IR-PCI-MSIX-0000:00:03.0    0-edge      eth0-rx-0\n"
                           " LOC:     123456      65432      99999   Local timer interrupts\n"
                           " CAL:          7          8\n"
                           " ERR:          0\n";
  const auto t = proc::parse_counters(text, "/proc/interrupts");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->cpus, (std::vector<unsigned>{0, 1, 3}));
  ASSERT_EQ(t->rows.size(), 2U) << "CAL (short) and ERR (one count) are left out";
  EXPECT_EQ(t->count("LOC", 3), 99999U);
  EXPECT_EQ(t->count("24", 0), 10U);
  EXPECT_FALSE(t->count("LOC", 2)) << "no column for offline CPU 2";
  EXPECT_FALSE(t->count("CAL", 0));
  ASSERT_NE(t->row("24"), nullptr);
  EXPECT_EQ(t->row("24")->desc.back(), "eth0-rx-0");
  const auto bad = proc::parse_counters("LOC: 1 2\n", "/proc/interrupts");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "/proc/interrupts: no CPU columns in its first line 'LOC: 1 2'");
  EXPECT_FALSE(proc::parse_counters("", "/proc/softirqs"));
}

TEST(ProcStat, PidsSkipsNonNumericNames) {
  EXPECT_EQ(proc::pids({"self", "12", "3", "net", "0", "-1", "99999999999"}), (std::vector<int>{3, 12}));
}

TEST(KernelCmdline, QuotesFlagsAndLastWins) {
  const auto c = parse_kernel_cmdline("BOOT_IMAGE=/vmlinuz quiet isolcpus=2-3 "
                                      "dyndbg=\"file x.c +p\" isolcpus=managed_irq,domain,4-7\n");
  EXPECT_EQ(c.at("quiet"), "");
  EXPECT_EQ(c.at("dyndbg"), "file x.c +p");
  EXPECT_EQ(c.at("isolcpus"), "managed_irq,domain,4-7");
  EXPECT_FALSE(c.contains("nohz_full"));
}

TEST(KernelCmdline, ReadThroughTheSysroot) {
  FakeSysroot fake;
  fake.set("/proc/cmdline", "ro nohz_full=1-3\n");
  auto c = kernel_cmdline(fake.root());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->at("nohz_full"), "1-3");
  FakeSysroot empty;
  EXPECT_FALSE(kernel_cmdline(empty.root()).ok());
}

TEST(Cgroup, MakeAndRemoveAreIdempotent) {
  FakeSysroot fake;
  fake.set("/sys/fs/cgroup/cgroup.subtree_control", "");
  ASSERT_TRUE(cgroup::make(fake.root(), "/mltune-x").ok());
  ASSERT_TRUE(cgroup::make(fake.root(), "/mltune-x").ok());
  EXPECT_TRUE(fake.root().is_dir("/sys/fs/cgroup/mltune-x"));
  ASSERT_TRUE(cgroup::remove(fake.root(), "/mltune-x").ok());
  ASSERT_TRUE(cgroup::remove(fake.root(), "/mltune-x").ok()); // absent: fine
  EXPECT_FALSE(fake.root().exists("/sys/fs/cgroup/mltune-x"));
}

TEST(KernelVersion, DebianReleases) {
  FakeSysroot fake;
  fake.set("/proc/sys/kernel/osrelease", "6.12.117+deb12-amd64\n");
  auto v = kernel_version(fake.root());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->major, 6);
  EXPECT_EQ(v->minor, 12);
  EXPECT_EQ(v->patch, 117);
  fake.set("/proc/sys/kernel/osrelease", "7.2-rc1\n");
  v = kernel_version(fake.root());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->major, 7);
  EXPECT_EQ(v->minor, 2);
  EXPECT_EQ(v->patch, 0);
  fake.set("/proc/sys/kernel/osrelease", "vmlinux\n");
  EXPECT_FALSE(kernel_version(fake.root()).ok());
}

// While Caches are current: the live node's knob files stay open and a
// read is a pread; the value is the one a fresh open reads. A file tree is
// never kept (its regular files would not be truncated by a pwrite). Kept
// only where this process may open the file for writing (root); the reads
// agree either way. Without caches nothing is kept, and the caches close
// what they kept when they go.
TEST(KnobFiles, KeptOnTheLiveNodeOnly) {
  const Sysroot live("/");
  const auto plain = live.read_value("/proc/sys/vm/swappiness");
  ASSERT_TRUE(plain) << plain.error().message;
  FakeSysroot fake;
  fake.set("/proc/sys/vm/swappiness", "60\n");
  ASSERT_TRUE(live.read_value("/proc/sys/vm/swappiness"));
  EXPECT_EQ(kept_knob_files(), 0U); // no caches current
  auto caches = std::make_unique<Caches>();
  std::optional<CachesInUse> in_use(std::in_place, *caches);
  const auto kept = live.read_value("/proc/sys/vm/swappiness");
  const auto again = live.read_value("/proc/sys/vm/swappiness");
  const size_t open_now = kept_knob_files();
  const auto fake_read = fake.root().read_value("/proc/sys/vm/swappiness");
  const size_t after_fake = kept_knob_files();
  // The same value written back: the node does not change.
  const Status written = ::geteuid() == 0 ? live.write_value("/proc/sys/vm/swappiness", *plain) : Status{};
  const auto after_write = live.read_value("/proc/sys/vm/swappiness");
  in_use.reset();
  const size_t not_current = kept_knob_files();
  caches.reset();
  ASSERT_TRUE(kept && again && after_write);
  EXPECT_EQ(*kept, *plain);
  EXPECT_EQ(*again, *plain);
  EXPECT_TRUE(written) << written.error().message;
  EXPECT_EQ(*after_write, *plain);
  if (::geteuid() == 0) {
    EXPECT_EQ(open_now, 1U);
  }
  ASSERT_TRUE(fake_read);
  EXPECT_EQ(*fake_read, "60");
  EXPECT_EQ(after_fake, open_now);
  EXPECT_EQ(not_current, 0U);
}

namespace {
struct Counted {
  int value = 0;
  std::vector<std::string> *gone = nullptr;
  std::string name;
  Counted() = default;
  Counted(const Counted &) = delete;
  Counted &operator=(const Counted &) = delete;
  Counted(Counted &&) = delete;
  Counted &operator=(Counted &&) = delete;
  ~Counted() {
    if (gone != nullptr) {
      gone->push_back(name);
    }
  }
};
struct Other : Counted {};
} // namespace

// Caches: one slot per type, made on first use; current on this thread only
// while a CachesInUse lives (nested: the outer one comes back); the slots
// go newest first when the caches go.
TEST(Caches, SlotsByTypeCurrentWhileInUse) {
  std::vector<std::string> gone;
  EXPECT_EQ(Caches::current(), nullptr);
  {
    Caches outer;
    EXPECT_EQ(outer.find<Counted>(), nullptr);
    outer.slot<Counted>().value = 7;
    outer.slot<Counted>().gone = &gone;
    outer.slot<Counted>().name = "first";
    outer.slot<Other>().gone = &gone;
    outer.slot<Other>().name = "second";
    EXPECT_EQ(outer.slots(), 2U);
    ASSERT_NE(outer.find<Counted>(), nullptr);
    EXPECT_EQ(outer.find<Counted>()->value, 7);
    {
      const CachesInUse use_outer(outer);
      EXPECT_EQ(Caches::current(), &outer);
      {
        Caches inner;
        const CachesInUse use_inner(inner);
        EXPECT_EQ(Caches::current(), &inner);
        EXPECT_EQ(Caches::current()->find<Counted>(), nullptr);
        std::thread([] { EXPECT_EQ(Caches::current(), nullptr); }).join();
      }
      EXPECT_EQ(Caches::current(), &outer);
    }
    EXPECT_EQ(Caches::current(), nullptr);
    EXPECT_TRUE(gone.empty());
  }
  EXPECT_EQ(gone, (std::vector<std::string>{"second", "first"}));
}

// A refused bpf() is explained by what the node shows: the capabilities the
// process lacks, seccomp, lockdown, the unprivileged sysctl; or that none
// of these is the reason.
TEST(BpfRefusal, NamesWhatRefusesIt) {
  mltune::test::FakeSysroot fake;
  const auto status = [&](const char *cap_eff, int seccomp, int uid) {
    const std::string u = std::to_string(uid);
    fake.set("/proc/self/status", "Name:\tmltunectl\nUid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\nCapEff:\t" +
                                      cap_eff + "\nSeccomp:\t" + std::to_string(seccomp) + "\n");
  };
  status("000001ffffffffff", 0, 0); // root, every capability
  fake.set("/sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
  fake.set("/proc/sys/kernel/unprivileged_bpf_disabled", "2\n");
  EXPECT_EQ(mltune::bpf_refusal_reason(fake.root()).rfind("not the capabilities, seccomp, lockdown", 0), 0U);
  status("0000000000000000", 2, 1000); // a user in a container
  fake.set("/sys/kernel/security/lockdown", "none integrity [confidentiality]\n");
  EXPECT_EQ(mltune::bpf_refusal_reason(fake.root()),
            "this process lacks CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); a seccomp filter is on this process (a "
            "container runtime's default profile refuses bpf()); kernel lockdown is 'confidentiality' "
            "(/sys/kernel/security/lockdown; it refuses BPF that reads kernel memory); "
            "kernel.unprivileged_bpf_disabled=2 refuses BPF to users without CAP_BPF");
  status("000000c000000000", 0, 1000); // CAP_BPF and CAP_PERFMON are enough
  fake.set("/sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
  fake.set("/proc/sys/kernel/unprivileged_bpf_disabled", "0\n");
  EXPECT_EQ(mltune::bpf_refusal_reason(fake.root()).rfind("not the capabilities", 0), 0U);
}
