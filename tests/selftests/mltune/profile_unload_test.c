// SPDX-License-Identifier: GPL-2.0
/*
 * Unloading restores the baseline (unless keep_on_unload=1), and 40
 * cycles (100 with MLTUNE_SOAK=1) of load, switches, a pool page reserved, mapped, written and
 * unmapped, and unload leak nothing measurable: Slab in /proc/meminfo
 * (after dropping caches) grows by less than SLAB_TOLERANCE_KB and
 * VmallocUsed (the module's own memory, its pool bookkeeping) by less than
 * VMALLOC_TOLERANCE_KB. Needs the module file in $MLTUNE_KO (the VM test
 * bed sets it); leaves the module loaded.
 *
 * Faults: a writer killed with SIGKILL at random points of a switch loop
 * leaves the knobs of exactly the profile the module names; the module
 * unloaded in the middle of a switch storm restores the baseline exactly
 * and loads again.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/mltune.h>

#include "profile_util.h"
#include "../kselftest_harness.h"

#define CYCLES			40
#define SOAK_CYCLES		100
#define WARMUP			20
/*
 * Measured in the TCG guest (6.12, busybox): after 20 warm-up cycles Slab
 * moves by -80..+170 kB per 50 cycles with no trend (slab caches filling
 * up and draining), 7.2 up to 380 kB per 100; with a pool page mapped in
 * each cycle 6.12 +312..+788 kB, 7.2 +180, 6.1 +228 (spread over proc
 * inodes, dentries, files and tasks: no cache of the module's own grows
 * with the cycles). 1 MiB over 40 cycles is 26 KiB per cycle, over the
 * soak's 100 cycles 10 KiB: leaking the module's per-load state (built-in
 * knob sets, baseline, kernfs nodes, workqueue, a proc superblock) shows;
 * per-switch leaks are caught by the storm test's Slab check.
 */
#define SLAB_TOLERANCE_KB	1024
/*
 * The module's text and data come from vmalloc space: an area left behind
 * per cycle counts 40 (100) times. Counted from /proc/vmallocinfo without
 * kernel thread stacks: VmallocUsed also holds the stack of every kworker
 * and helper thread alive, and grew by 256 kB over 40 cycles on 7.2 once
 * (64 pages, no whole number of areas per cycle: a CI failure). On 7.2,
 * 40 cycles: 12292 -> 12292 kB without stacks while VmallocUsed grew by
 * 96 kB; a planted 64 kB vmalloc per load: +2624 kB, each area listed with
 * the raw address of the unloaded code that took it.
 */
#define VMALLOC_TOLERANCE_KB	256
#define POOL_NODE0		MLTUNE_SYSFS "/hugepool/node0/reserved"

static struct knob orig[2 * MAX_TEST_KNOBS], want[MAX_TEST_KNOBS];
static int norig;

/* Current values of every knob of both built-in profiles, in orig[]. */
static int record_orig(void)
{
	static const char *const p[] = { "training", "inference" };
	char buf[KNOB_VALUE_MAX + 2];
	int i, j, n, nr = 0;

	for (i = 0; i < 2; i++) {
		n = profile_knobs(p[i], want, MAX_TEST_KNOBS);
		if (n < 0)
			return n;
		for (j = 0; j < n; j++) {
			int k;

			for (k = 0; k < nr; k++)
				if (!strcmp(orig[k].path, want[j].path))
					break;
			if (k < nr || knob_read(want[j].path, buf, sizeof(buf)))
				continue;
			orig[nr] = want[j];
			snprintf(orig[nr].value, sizeof(orig[nr].value), "%.4096s", buf);
			orig[nr].optional = false;
			nr++;
		}
	}
	return nr;
}

static int required_only(struct knob *k, int nr)
{
	int i, o = 0;

	for (i = 0; i < nr; i++)
		if (!k[i].optional)
			k[o++] = k[i];
	return o;
}

static void restore_by_hand(void)
{
	char line[KNOB_VALUE_MAX + 2];
	int i;

	for (i = 0; i < norig; i++) {
		snprintf(line, sizeof(line), "%s\n", orig[i].value);
		mltune_write_file(orig[i].path, line);
	}
}

FIXTURE(unload) {};
FIXTURE_SETUP(unload) {}
FIXTURE_TEARDOWN(unload) {}

TEST_F_TIMEOUT(unload, restores_baseline, 60)
{
	int nr;

	ASSERT_EQ(0, switch_to("baseline"));
	norig = record_orig();
	ASSERT_LT(10, norig);

	ASSERT_EQ(0, switch_to("training"));
	nr = profile_knobs("training", want, MAX_TEST_KNOBS);
	ASSERT_LT(10, nr);
	ASSERT_EQ(0, mltune_unload_module_wait());
	ASSERT_NE(0, access(MLTUNE_SYSFS, F_OK));
	EXPECT_EQ(0, count_mismatches(orig, norig, true));

	/* keep_on_unload=1: the profile stays in effect. */
	ASSERT_EQ(0, mltune_load_module("keep_on_unload=1"));
	ASSERT_EQ(0, switch_to("inference"));
	ASSERT_EQ(0, switch_to("training"));
	ASSERT_EQ(0, mltune_unload_module_wait());
	/* The optional knob may be skipped: compare the required ones. */
	EXPECT_EQ(0, count_mismatches(want, required_only(want, nr), true));
	/* Put the original values back by hand, then reload. */
	restore_by_hand();
	EXPECT_EQ(0, count_mismatches(orig, norig, true));
	ASSERT_EQ(0, mltune_load_module(""));
}

/* One pool page of node 0: reserve, map, write, unmap, give back; 0 or -errno. */
static int pool_round(void)
{
	const size_t len = MLTUNE_HUGEPOOL_PAGE_SIZE;
	int fd, err;
	char *p;

	err = mltune_write_file(POOL_NODE0, "1");
	if (err)
		return err;
	fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	err = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return err;
	memset(p, 0x5a, len);
	err = p[len - 1] == 0x5a ? 0 : -EIO;
	if (munmap(p, len))
		return -errno;
	return err ? err : mltune_write_file(POOL_NODE0, "0");
}

/* About 0.3 s per cycle under TCG. */
TEST_F_TIMEOUT(unload, cycles_leak_nothing, 300)
{
	long before = 0, after, vm_before = 0, vm_after, vmused_before = 0;
	long cycles = mltune_size(NULL, CYCLES, SOAK_CYCLES);
	double t0 = now_s();
	int i, err = 0;

	ASSERT_EQ(0, switch_to("baseline"));
	norig = record_orig();
	ASSERT_LT(10, norig);

	for (i = 0; i < WARMUP + cycles; i++) {
		if (i == WARMUP) {
			ASSERT_EQ(0, mltune_unload_module_wait());
			before = slab_kb();
			vm_before = vmalloc_kb_no_stacks(false);
			vmused_before = meminfo_kb("VmallocUsed");
			ASSERT_EQ(0, mltune_load_module(""));
		}
		err |= switch_to("training");
		err |= switch_to("inference");
		err |= mltune_write_file(CONTROL_FILE, "+cycle");
		ASSERT_EQ(0, pool_round()) TH_LOG("cycle %d", i);
		ASSERT_EQ(0, mltune_unload_module_wait()) TH_LOG("cycle %d", i);
		ASSERT_EQ(0, mltune_load_module("")) TH_LOG("cycle %d", i);
	}
	ASSERT_EQ(0, mltune_unload_module_wait());
	after = slab_kb();
	vm_after = vmalloc_kb_no_stacks(false);
	ksft_print_msg("%ld cycles in %.1f s; Slab %ld kB -> %ld kB (tolerance %d kB)\n",
		       cycles, now_s() - t0, before, after, SLAB_TOLERANCE_KB);
	ksft_print_msg("vmalloc (no stacks) %ld kB -> %ld kB (tolerance %d kB)\n",
		       vm_before, vm_after, VMALLOC_TOLERANCE_KB);
	ksft_print_msg("VmallocUsed (stacks too) %ld kB -> %ld kB\n",
		       vmused_before, meminfo_kb("VmallocUsed"));
	if (vm_after - vm_before >= VMALLOC_TOLERANCE_KB)
		vmalloc_kb_no_stacks(true);	/* what is left, module unloaded */
	ASSERT_EQ(0, mltune_load_module(""));
	EXPECT_EQ(0, err);
	ASSERT_LE(0, vm_before);
	ASSERT_LE(0, vm_after);
	EXPECT_LT(after - before, SLAB_TOLERANCE_KB);
	EXPECT_LT(vm_after - vm_before, VMALLOC_TOLERANCE_KB);
	EXPECT_EQ(0, count_mismatches(orig, norig, true));
}

#define KILLS		10
#define SOAK_KILLS	30
#define STORM_ROUNDS	4
#define SOAK_STORM_ROUNDS 10
#define STORM_WRITERS	4

/* A child switching between the two built-in profiles until it fails. */
static pid_t switcher(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		while (!switch_to("training") && !switch_to("inference"))
			;
		_exit(0);
	}
	return pid;
}

/* Whether every required knob has the value of the active profile. */
static int active_mismatches(char *name, size_t len)
{
	int n;

	read_active(name, len);
	if (!strcmp(name, "baseline"))
		return count_mismatches(orig, norig, true);
	n = profile_knobs(name, want, MAX_TEST_KNOBS);
	if (n <= 0)
		return 1;
	return count_mismatches(want, required_only(want, n), true);
}

TEST_F_TIMEOUT(unload, killed_writer_leaves_one_profile, 300)
{
	unsigned int seed = (unsigned int)now_s();
	int kills = mltune_size(NULL, KILLS, SOAK_KILLS);
	long long gen0;
	char name[64];
	int i, status;

	ASSERT_EQ(0, switch_to("baseline"));
	norig = record_orig();
	ASSERT_LT(10, norig);
	for (i = 0; i < kills; i++) {
		pid_t pid;

		gen0 = read_generation();
		pid = switcher();
		ASSERT_LE(0, pid);
		/* Wait for the loop to be under way, then a random point of it. */
		while (read_generation() < gen0 + 2)
			usleep(1000);
		usleep(rand_r(&seed) % 20000);
		ASSERT_EQ(0, kill(pid, SIGKILL));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_EQ(0, active_mismatches(name, sizeof(name)))
			TH_LOG("kill %d: knobs are not those of '%s'", i, name);
	}
	ksft_print_msg("%d writers killed mid-loop, each left one whole profile\n", kills);
	ASSERT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, count_mismatches(orig, norig, true));
}

TEST_F_TIMEOUT(unload, rmmod_during_switch_storm, 300)
{
	pid_t pid[STORM_WRITERS];
	int rounds = mltune_size(NULL, STORM_ROUNDS, SOAK_STORM_ROUNDS);
	long long gen0;
	int r, w, status;

	ASSERT_EQ(0, switch_to("baseline"));
	norig = record_orig();
	ASSERT_LT(10, norig);
	for (r = 0; r < rounds; r++) {
		gen0 = read_generation();
		for (w = 0; w < STORM_WRITERS; w++) {
			pid[w] = switcher();
			ASSERT_LE(0, pid[w]);
		}
		while (read_generation() < gen0 + 4 * STORM_WRITERS)
			usleep(1000);
		ASSERT_EQ(0, mltune_unload_module_wait()) TH_LOG("round %d", r);
		for (w = 0; w < STORM_WRITERS; w++) {
			kill(pid[w], SIGKILL);
			ASSERT_EQ(pid[w], waitpid(pid[w], &status, 0));
		}
		EXPECT_NE(0, access(MLTUNE_SYSFS, F_OK));
		EXPECT_EQ(0, count_mismatches(orig, norig, true)) TH_LOG("round %d", r);
		ASSERT_EQ(0, mltune_reload_module()) TH_LOG("round %d", r);
	}
	ksft_print_msg("%d unloads during storms of %d writers: baseline exact each time\n",
		       rounds, STORM_WRITERS);
}

int main(int argc, char **argv)
{
	mltune_require_module();
	mltune_require_ko();
	return test_harness_run(argc, argv);
}
