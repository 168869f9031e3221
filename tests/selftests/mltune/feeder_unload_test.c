// SPDX-License-Identifier: GPL-2.0
/*
 * Unloading the module with a feeder set active restores every IRQ's
 * affinity and the default IRQ affinity exactly. Needs the module file in
 * $MLTUNE_KO (the VM test bed sets it); leaves the module loaded with
 * $MLTUNE_KO_ARGS.
 */
#define _GNU_SOURCE
#include "feeder_util.h"
#include "../kselftest_harness.h"

static struct snap orig;

FIXTURE(unload) {};
FIXTURE_SETUP(unload) {}
FIXTURE_TEARDOWN(unload) {}

TEST_F_TIMEOUT(unload, restores_affinities, 60)
{
	struct cpus online = cpus_of("online"), f = {};
	char list[LIST_MAX], buf[LIST_MAX];
	int n = cpus_count(&online);

	if (n < 4)
		SKIP(return, "needs 4 online CPUs, has %d", n);
	cpus_set(&f, cpus_nth(&online, 1));
	cpus_set(&f, cpus_nth(&online, n - 1));
	cpus_format(&f, list, sizeof(list));

	ASSERT_EQ(0, feeder_write("\n"));
	ASSERT_EQ(0, snap_take(&orig, true));
	ASSERT_EQ(0, feeder_write(list));
	EXPECT_EQ(0, snap_check_steered(&orig, &f));

	ASSERT_EQ(0, mltune_unload_module_wait());
	ASSERT_NE(0, access(MLTUNE_SYSFS, F_OK));
	EXPECT_EQ(0, snap_diff(&orig));

	/* Reloaded, the module starts with no feeder set. */
	ASSERT_EQ(0, mltune_reload_module());
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	EXPECT_EQ(0, snap_diff(&orig));
}

int main(int argc, char **argv)
{
	mltune_require_module();
	if (access(FEEDER_FILE, F_OK))
		ksft_exit_skip("%s missing\n", FEEDER_FILE);
	mltune_require_ko();
	return test_harness_run(argc, argv);
}
