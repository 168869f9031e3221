// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/kernel/mltune/feeder/cpus: refused writes change nothing; a feeder
 * set steers every movable IRQ and the default IRQ affinity off its CPUs
 * and keeps them off across CPU hotplug;
 * another set is computed from the saved affinities; clearing restores
 * every affinity exactly; an injected failure at any position rolls the
 * whole write back. See Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define _GNU_SOURCE
#include "feeder_util.h"
#include "../kselftest_harness.h"

static struct snap orig, mid;

FIXTURE(feeder) {
	struct cpus online;
	struct cpus f1, f2;		/* two feeder sets */
	char f1s[LIST_MAX], f2s[LIST_MAX];
};

FIXTURE_SETUP(feeder)
{
	int n;

	ASSERT_EQ(0, feeder_write("\n"));
	mltune_write_file(INJECT_FILE, "0");
	self->online = cpus_of("online");
	n = cpus_count(&self->online);
	if (n < 4)
		SKIP(return, "needs 4 online CPUs, has %d", n);
	memset(&self->f1, 0, sizeof(self->f1));
	memset(&self->f2, 0, sizeof(self->f2));
	cpus_set(&self->f1, cpus_nth(&self->online, 2));
	cpus_set(&self->f1, cpus_nth(&self->online, 3));
	cpus_set(&self->f2, cpus_nth(&self->online, n - 2));
	cpus_set(&self->f2, cpus_nth(&self->online, n - 1));
	cpus_format(&self->f1, self->f1s, sizeof(self->f1s));
	cpus_format(&self->f2, self->f2s, sizeof(self->f2s));
	ASSERT_EQ(0, snap_take(&orig, true));
	ASSERT_LT(0, orig.nr);
}

FIXTURE_TEARDOWN(feeder)
{
	mltune_write_file(INJECT_FILE, "0");
	feeder_write("\n");
}

TEST_F(feeder, reads_empty)
{
	char buf[LIST_MAX];

	ASSERT_LE(0, mltune_read_file(FEEDER_FILE, buf, sizeof(buf)));
	EXPECT_STREQ("\n", buf);
}

/* A refused write of @len bytes returns @err and changes nothing. */
static int refused_len(const char *input, size_t len, int err)
{
	char buf[LIST_MAX];
	int ret = feeder_write_len(input, len), bad = 0;

	if (ret != err) {
		ksft_print_msg("write '%s': %d (%s), want %d\n", input, ret,
			       strerror(-ret), err);
		bad++;
	}
	if (feeder_read(buf, sizeof(buf)) || buf[0]) {
		ksft_print_msg("after '%s' feeder/cpus reads '%s'\n", input,
			       buf);
		bad++;
	}
	return bad + snap_diff(&orig);
}

static int refused(const char *input, int err)
{
	return refused_len(input, strlen(input), err);
}

TEST_F_TIMEOUT(feeder, bad_input_changes_nothing, 60)
{
	static const char *const garbage[] = {
		"garbage", "1-", "-1", "3-1", "0,,x", "0 1x", "1\n2\n",
		"0-1\n\n", "99999", "4294967296",
	};
	struct cpus all_but_boot, boot, iso, nohz;
	char list[LIST_MAX], out[32];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(garbage); i++)
		EXPECT_EQ(0, refused(garbage[i], -EINVAL));
	/* One past the highest possible CPU. */
	snprintf(out, sizeof(out), "%ld", sysconf(_SC_NPROCESSORS_CONF));
	EXPECT_EQ(0, refused(out, -EINVAL));
	snprintf(out, sizeof(out), "0,%d", MAX_CPUS - 1);
	EXPECT_EQ(0, refused(out, -EINVAL));
	/* NUL inside the write. */
	EXPECT_EQ(0, refused_len("1\0" "2", 3, -EINVAL));

	/* Every online CPU: no housekeeping CPU left. */
	cpus_format(&self->online, list, sizeof(list));
	EXPECT_EQ(0, refused(list, -EBUSY));

	/* Every CPU that is not isolated at boot: same. */
	iso = cpus_of("isolated");
	nohz = cpus_of("nohz_full");
	boot = cpus_or(&iso, &nohz);
	all_but_boot = cpus_andnot(&self->online, &boot);
	if (cpus_intersects(&self->online, &boot) &&
	    !cpus_empty(&all_but_boot)) {
		cpus_format(&all_but_boot, list, sizeof(list));
		ksft_print_msg("boot-isolated CPUs present: trying %s\n", list);
		EXPECT_EQ(0, refused(list, -EBUSY));
	} else {
		ksft_print_msg("no isolcpus=/nohz_full= CPU: last-housekeeping case is 'every CPU'\n");
	}
}

TEST_F_TIMEOUT(feeder, offline_cpu_refused, 60)
{
	struct cpus all = cpus_of("possible");
	struct cpus offline = cpus_andnot(&all, &self->online);
	char path[128], list[32];
	int cpu = cpus_nth(&self->online, cpus_count(&self->online) - 1);
	int ret;

	if (cpus_empty(&offline)) {
		snprintf(path, sizeof(path), CPU_DIR "/cpu%d/online", cpu);
		if (access(path, W_OK) || mltune_write_file(path, "0"))
			SKIP(return, "no offline CPU and cpu%d cannot go offline",
			     cpu);
		/* Offlining may move IRQs: compare with the state now. */
		ASSERT_EQ(0, snap_take(&orig, false));
	} else {
		cpu = cpus_nth(&offline, 0);
		path[0] = '\0';
	}
	snprintf(list, sizeof(list), "%d", cpu);
	ret = refused(list, -EINVAL);
	snprintf(list, sizeof(list), "0,%d", cpu);
	ret += refused(list, -EINVAL);
	if (path[0])
		EXPECT_EQ(0, mltune_write_file(path, "1"));
	EXPECT_EQ(0, ret);
}

TEST_F_TIMEOUT(feeder, set_change_clear, 60)
{
	char buf[LIST_MAX];

	ASSERT_EQ(0, feeder_write(self->f1s));
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ(self->f1s, buf);
	EXPECT_EQ(0, snap_check_steered(&orig, &self->f1));

	/* The same set again: nothing moves. */
	ASSERT_EQ(0, snap_take(&mid, false));
	ASSERT_EQ(0, feeder_write(self->f1s));
	EXPECT_EQ(0, snap_diff(&mid));

	/* Another set: computed from the affinities before the first. */
	ASSERT_EQ(0, feeder_write(self->f2s));
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ(self->f2s, buf);
	EXPECT_EQ(0, snap_check_steered(&orig, &self->f2));

	/* sysfs never passes a zero-length write on: the set stays. */
	ASSERT_EQ(0, feeder_write(""));
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ(self->f2s, buf);

	ASSERT_EQ(0, feeder_write("\n"));
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	EXPECT_EQ(0, snap_diff(&orig));

	/* A write without the newline, then clearing with " \n". */
	ASSERT_EQ(0, feeder_write(self->f2s));
	EXPECT_EQ(0, snap_check_steered(&orig, &self->f2));
	ASSERT_EQ(0, feeder_write(" \n"));
	EXPECT_EQ(0, snap_diff(&orig));
}

/*
 * Make the Nth affinity change of a write fail, for every N until the
 * write succeeds; each failing write must leave @before (and @reads) in
 * force. Returns the number of failures injected, or -1 on a mismatch.
 */
static int inject_each(const char *input, const struct snap *before,
		       const char *reads)
{
	char buf[LIST_MAX], nth[16];
	int n, ret;

	for (n = 1; n < 512; n++) {
		snprintf(nth, sizeof(nth), "%d", n);
		if (mltune_write_file(INJECT_FILE, nth))
			return -1;
		ret = feeder_write(input);
		if (!ret) {
			mltune_write_file(INJECT_FILE, "0");
			return n - 1;
		}
		if (ret != -EIO) {
			ksft_print_msg("'%s' with fault %d: %d, want -EIO\n",
				       input, n, ret);
			return -1;
		}
		if (feeder_read(buf, sizeof(buf)) || strcmp(buf, reads)) {
			ksft_print_msg("'%s' with fault %d: reads '%s', want '%s'\n",
				       input, n, buf, reads);
			return -1;
		}
		if (snap_diff(before)) {
			ksft_print_msg("'%s' with fault %d: not rolled back\n",
				       input, n);
			return -1;
		}
	}
	return -1;
}

TEST_F_TIMEOUT(feeder, rollback_at_every_change, 110)
{
	int n;

	if (access(INJECT_FILE, W_OK))
		SKIP(return, "no %s", INJECT_FILE);
	/* Setting from nothing. */
	n = inject_each(self->f1s, &orig, "");
	ksft_print_msg("set %s: %d changes, each failure rolled back\n",
		       self->f1s, n);
	ASSERT_LT(1, n);	/* the default and at least one IRQ */
	EXPECT_EQ(0, snap_check_steered(&orig, &self->f1));

	/* Changing the set: the old one stays in force on failure. */
	ASSERT_EQ(0, snap_take(&mid, false));
	n = inject_each(self->f2s, &mid, self->f1s);
	ksft_print_msg("change to %s: %d changes\n", self->f2s, n);
	ASSERT_LT(0, n);
	EXPECT_EQ(0, snap_check_steered(&orig, &self->f2));

	/* Clearing. */
	ASSERT_EQ(0, snap_take(&mid, false));
	n = inject_each("\n", &mid, self->f2s);
	ksft_print_msg("clear: %d changes\n", n);
	ASSERT_LT(0, n);
	EXPECT_EQ(0, snap_diff(&orig));
}

/* The first movable IRQ of @s, or -1. */
static int first_movable(const struct snap *s)
{
	int i;

	for (i = 0; i < s->nr; i++)
		if (s->irqs[i].movable)
			return s->irqs[i].irq;
	return -1;
}

/* Movable IRQs of @s whose affinity allows a CPU of @f (logged with @log). */
static int feeder_cpus_allowed(const struct snap *s, const struct cpus *f,
			       bool log)
{
	char buf[LIST_MAX];
	struct cpus got;
	int i, n = 0;

	for (i = 0; i < s->nr; i++) {
		if (!s->irqs[i].movable ||
		    irq_read(s->irqs[i].irq, "smp_affinity_list", buf, sizeof(buf)) ||
		    cpus_parse_list(buf, &got) || !cpus_intersects(&got, f))
			continue;
		if (log)
			ksft_print_msg("IRQ %d allows a feeder CPU after hotplug: %s\n",
				       s->irqs[i].irq, buf);
		n++;
	}
	return n;
}

/*
 * Poll until no movable IRQ of @s allows a CPU of @f: the module re-steers
 * from a worker after each hotplug event. 20 s at most (a loaded emulated
 * guest); the offenders are logged at the deadline. Returns their number,
 * and in @ms how long it took.
 */
static int wait_feeder_cpus_clear(const struct snap *s, const struct cpus *f,
				  int *ms)
{
	int tries, bad = 0;

	for (tries = 0; tries < 400; tries++) {
		bad = feeder_cpus_allowed(s, f, tries == 399);
		if (!bad)
			break;
		usleep(50000);
	}
	*ms = tries * 50;
	return bad;
}

/*
 * CPU hotplug under a feeder set. An IRQ pinned to one housekeeping CPU
 * loses that CPU: the kernel breaks its affinity to every online CPU,
 * feeder CPUs included, and keeps it so after the CPU is back. A feeder CPU
 * also goes and comes back. Afterwards no movable IRQ may allow a feeder
 * CPU, the default affinity is still off them, and clearing the set gives
 * every IRQ an affinity without a feeder CPU restriction lost (the pinned
 * one gets what the kernel left it, not a feeder-only mask).
 */
TEST_F_TIMEOUT(feeder, hotplug_keeps_feeder_cpus_clear, 120)
{
	int hk = cpus_nth(&self->online, 1), fc = cpus_nth(&self->f1, 0);
	char hpath[128], fpath[128], ipath[64], pin[16], buf[LIST_MAX];
	int irq, ms, bad;

	snprintf(hpath, sizeof(hpath), CPU_DIR "/cpu%d/online", hk);
	snprintf(fpath, sizeof(fpath), CPU_DIR "/cpu%d/online", fc);
	if (access(hpath, W_OK) || access(fpath, W_OK))
		SKIP(return, "cpu%d or cpu%d cannot go offline", hk, fc);
	irq = first_movable(&orig);
	if (irq < 0)
		SKIP(return, "no movable IRQ");
	snprintf(pin, sizeof(pin), "%d", hk);
	snprintf(ipath, sizeof(ipath), "/proc/irq/%d/smp_affinity_list", irq);
	ASSERT_EQ(0, mltune_write_file(ipath, pin));
	ASSERT_EQ(0, snap_take(&orig, true));
	ASSERT_EQ(0, feeder_write(self->f1s));
	ASSERT_EQ(0, snap_check_steered(&orig, &self->f1));

	ASSERT_EQ(0, mltune_write_file(hpath, "0"));
	/* While the CPU stays offline, too. */
	bad = wait_feeder_cpus_clear(&orig, &self->f1, &ms);
	ksft_print_msg("feeder CPUs clear %d ms after cpu%d went offline\n", ms, hk);
	EXPECT_EQ(0, bad);
	ASSERT_EQ(0, mltune_write_file(fpath, "0"));
	ASSERT_EQ(0, mltune_write_file(fpath, "1"));
	ASSERT_EQ(0, mltune_write_file(hpath, "1"));
	/*
	 * The module's hotplug work runs after each event, drivers' own
	 * hotplug callbacks (virtio-net spreads its queue IRQs again) before it.
	 */
	bad = wait_feeder_cpus_clear(&orig, &self->f1, &ms);
	ksft_print_msg("feeder CPUs clear %d ms after the last hotplug event\n", ms);
	ASSERT_EQ(0, feeder_read(buf, sizeof(buf)));
	EXPECT_STREQ(self->f1s, buf);
	EXPECT_EQ(0, bad);
	ASSERT_EQ(0, feeder_write("\n"));
}

int main(int argc, char **argv)
{
	mltune_require_module();
	if (access(FEEDER_FILE, F_OK))
		ksft_exit_skip("%s missing\n", FEEDER_FILE);
	return test_harness_run(argc, argv);
}
