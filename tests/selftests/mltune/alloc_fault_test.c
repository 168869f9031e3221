// SPDX-License-Identifier: GPL-2.0
/*
 * Allocation failure at every allocation of the switch, profile, pool and
 * feeder-store paths, through the module's own injection (fail_alloc_nth: Debian kernels
 * have no failslab). For N = 1, 2, ... the Nth allocation of one operation
 * fails until N passes the number of allocations it makes: each such
 * operation must fail with ENOMEM and leave every readable file of the tree
 * as it was (a switch may count in generation and last_switch, as a
 * rolled-back switch does; for the feeder cores every IRQ affinity is
 * compared too), or succeed whole. Then the operation runs
 * without a fault and must do exactly what it does. The VM bed fails the run
 * on any kernel splat.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <linux/mltune.h>

#include "snapshot.h"

#define FAIL_NTH	"/sys/module/mltune/parameters/fail_alloc_nth"
#define NODE0		MLTUNE_SYSFS "/hugepool/node0"
#define HP		MLTUNE_HUGEPOOL_PAGE_SIZE
#define MAX_NTH		64
#define FEEDER		MLTUNE_SYSFS "/feeder/cpus"

static int arm(int n)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", n);
	return mltune_write_file(FAIL_NTH, v);
}

/* Whether the armed failure was used (the countdown reached it). */
static bool fired(void)
{
	return mltune_read_long(FAIL_NTH) == 0;
}

/*
 * Runs @op with the Nth allocation failing, N = 1.. until the operation
 * makes fewer allocations than N; after each failure the tree must be as
 * before (@switched: generation and last_switch may move). Returns how
 * many allocations the operation makes.
 */
static int each_allocation(struct __test_metadata *_metadata, struct snap *s,
			   const char *what, int (*op)(void), void (*undo)(void),
			   bool switched)
{
	int n, ret, refused = 0, absorbed = 0;
	const char *changed;

	for (n = 1; n <= MAX_NTH; n++) {
		snap_take(s);
		ASSERT_EQ(0, arm(n));
		ret = op();
		if (!fired()) {
			ASSERT_EQ(0, arm(0));
			EXPECT_EQ(0, ret) TH_LOG("%s without a fault: %s", what, strerror(-ret));
			undo();
			break;
		}
		ASSERT_EQ(0, arm(0));
		if (!ret) {
			/* A failure the operation may absorb: it succeeded whole. */
			absorbed++;
			undo();
			continue;
		}
		refused++;
		EXPECT_EQ(-ENOMEM, ret) TH_LOG("%s, allocation %d failed", what, n);
		changed = snap_changed_ex(s, true, switched);
		if (changed)
			ksft_print_msg("%s, allocation %d failed: %s changed\n", what, n, changed);
		EXPECT_EQ(NULL, changed);
	}
	ksft_print_msg("%s: %d allocations, each failed once: %d refused with ENOMEM\n",
		       what, n - 1, refused);
	ksft_print_msg("%s: nothing changed by a refusal; %d failures absorbed\n",
		       what, absorbed);
	EXPECT_GT(n, 1);
	EXPECT_LE(n, MAX_NTH);
	return n - 1;
}

static int op_switch(void)
{
	return switch_to("training");
}

static void undo_switch(void)
{
	switch_to("baseline");
}

static int op_profile(void)
{
	int ret = mltune_write_file(CONTROL_FILE, "+faulty");

	if (ret)
		return ret;
	ret = mltune_write_file(MLTUNE_SYSFS "/profiles/faulty/knobs",
				"/proc/sys/vm/swappiness 33\n");
	if (!ret)
		ret = mltune_write_file(MLTUNE_SYSFS "/profiles/faulty/state", "commit");
	if (ret)
		remove_profile("faulty"); /* what a failed definition leaves */
	return ret;
}

static void undo_profile(void)
{
	remove_profile("faulty");
}

static int op_reserve(void)
{
	return mltune_write_file(NODE0 "/reserved", "4");
}

static void undo_reserve(void)
{
	mltune_write_file(NODE0 "/reserved", "0");
}

static int op_map(void)
{
	int fd = open("/dev/mltune", O_RDWR | O_CLOEXEC), ret = 0;
	char *p;

	if (fd < 0)
		return -errno;
	p = mmap(NULL, 2 * HP, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	if (p == MAP_FAILED) {
		ret = -errno;
	} else {
		p[0] = 1;
		munmap(p, 2 * HP);
	}
	close(fd);
	return ret;
}

static void undo_map(void)
{
}

/* The last online CPU as the feeder set ("" when there is only one). */
static char feeder_set[48];

static int op_feeder(void)
{
	return mltune_write_file(FEEDER, feeder_set);
}

static void undo_feeder(void)
{
	mltune_write_file(FEEDER, "\n");
}

FIXTURE(fault) {
	struct snap s;
};

FIXTURE_SETUP(fault)
{
	mltune_require_module();
	if (access(FAIL_NTH, F_OK))
		SKIP(return, "%s missing", FAIL_NTH);
	ASSERT_EQ(0, switch_to("baseline"));
	self->s.nr = 0;
}

FIXTURE_TEARDOWN(fault)
{
	arm(0);
	switch_to("baseline");
	remove_profile("faulty");
	if (!access(NODE0, F_OK))
		mltune_write_file(NODE0 "/reserved", "0");
	if (!access(FEEDER, F_OK))
		mltune_write_file(FEEDER, "\n");
	snap_free(&self->s);
}

TEST_F(fault, switch)
{
	each_allocation(_metadata, &self->s, "switch to training", op_switch, undo_switch,
			true);
}

TEST_F(fault, profile_definition)
{
	each_allocation(_metadata, &self->s, "profile create, knobs, commit", op_profile,
			undo_profile, false);
}

TEST_F(fault, pool)
{
	if (access(NODE0, F_OK))
		SKIP(return, "no pool on node 0");
	each_allocation(_metadata, &self->s, "pool reservation", op_reserve, undo_reserve,
			false);
	ASSERT_EQ(0, op_reserve());
	each_allocation(_metadata, &self->s, "pool mapping", op_map, undo_map, false);
}

TEST_F(fault, feeder)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (access(FEEDER, F_OK))
		SKIP(return, "%s missing", FEEDER);
	if (cpus < 2)
		SKIP(return, "one CPU: no feeder set leaves a housekeeping CPU");
	snprintf(feeder_set, sizeof(feeder_set), "%ld", cpus - 1);
	ASSERT_EQ(0, mltune_write_file(FEEDER, "\n"));
	self->s.irqs = true;
	each_allocation(_metadata, &self->s, "feeder cores on", op_feeder, undo_feeder, false);
	/* Changing a set in force, and clearing it, under the same faults. */
	ASSERT_EQ(0, op_feeder());
	snprintf(feeder_set, sizeof(feeder_set), "%ld-%ld", cpus > 2 ? cpus - 2 : 1, cpus - 1);
	each_allocation(_metadata, &self->s, "feeder cores changed", op_feeder, undo_feeder,
			false);
	ASSERT_EQ(0, mltune_write_file(FEEDER, "1"));
	strcpy(feeder_set, "\n");	/* a write of 0 bytes never reaches the store */
	each_allocation(_metadata, &self->s, "feeder cores cleared", op_feeder, undo_feeder,
			false);
}

TEST_HARNESS_MAIN
