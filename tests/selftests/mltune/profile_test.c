// SPDX-License-Identifier: GPL-2.0
/*
 * Profiles: switching training -> inference -> baseline with poll() and
 * uevent notification, rollback at every knob position, and bad input.
 * See Documentation/ABI/testing/sysfs-kernel-mltune.
 */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "profile_util.h"
#include "../kselftest_harness.h"

static struct knob ka[MAX_TEST_KNOBS];

/* Drop knobs that the last switch reported as skipped (optional ones). */
static int drop_skipped(struct knob *k, int nr)
{
	char *last = slurp(LAST_FILE);
	int i, o = 0;
	char pat[KNOB_PATH_MAX + 16];

	for (i = 0; i < nr; i++) {
		snprintf(pat, sizeof(pat), "skipped=%.255s ", k[i].path);
		if (last && strstr(last, pat))
			continue;
		snprintf(pat, sizeof(pat), "kept=%.255s\n", k[i].path);
		if (last && strstr(last, pat))
			continue;
		k[o++] = k[i];
	}
	free(last);
	return o;
}

/* Knob paths applied by the switches of one test (a set, in order). */
static char applied[2 * MAX_TEST_KNOBS][KNOB_PATH_MAX];
static int nr_applied;

static void note_applied(const struct knob *k, int nr)
{
	for (int i = 0; i < nr; i++) {
		int j;

		for (j = 0; j < nr_applied; j++)
			if (!strcmp(applied[j], k[i].path))
				break;
		if (j == nr_applied && nr_applied < (int)ARRAY_SIZE(applied))
			memcpy(applied[nr_applied++], k[i].path, KNOB_PATH_MAX);
	}
}

/* How many applied knobs the knob list @k lacks. */
static int missing_applied(const struct knob *k, int nr)
{
	int missing = 0;

	for (int j = 0; j < nr_applied; j++) {
		int i;

		for (i = 0; i < nr; i++)
			if (!strcmp(applied[j], k[i].path))
				break;
		if (i == nr) {
			ksft_print_msg("%s: applied, not in the baseline\n",
				       applied[j]);
			missing++;
		}
	}
	return missing;
}

static int uevent_socket(void)
{
	struct sockaddr_nl sa = {
		.nl_family = AF_NETLINK,
		.nl_groups = 1,
	};
	int fd, sz = 1 << 20;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
		    NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* Wait up to 5 s for the mltune uevent of generation @gen. */
static bool saw_uevent(int fd, const char *profile, const char *previous,
		       long long gen)
{
	char buf[8192], want_p[96], want_v[96], want_g[64];
	double end = now_s() + 5;

	snprintf(want_p, sizeof(want_p), "MLTUNE_PROFILE=%s", profile);
	snprintf(want_v, sizeof(want_v), "MLTUNE_PREVIOUS=%s", previous);
	snprintf(want_g, sizeof(want_g), "MLTUNE_GENERATION=%lld", gen);
	while (now_s() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		bool p = false, v = false, g = false;
		ssize_t n;
		char *s;

		if (poll(&pfd, 1, 500) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		for (s = buf; s < buf + n; s += strlen(s) + 1) {
			p |= !strcmp(s, want_p);
			v |= !strcmp(s, want_v);
			g |= !strcmp(s, want_g);
		}
		if (p && v && g)
			return true;
	}
	return false;
}

struct poller {
	int fd;
	int revents;
	int ready;
};

static void *poll_thread(void *arg)
{
	struct poller *pl = arg;
	struct pollfd pfd = { .fd = pl->fd, .events = POLLPRI | POLLERR };

	__atomic_store_n(&pl->ready, 1, __ATOMIC_SEQ_CST);
	if (poll(&pfd, 1, 10000) > 0)
		pl->revents = pfd.revents;
	return NULL;
}

TEST(switch_training_inference_baseline)
{
	static const char *const seq[] = { "training", "inference", "baseline" };
	char cur[KNOB_VALUE_MAX + 2], active[64], active0[64], *base_text;
	struct poller pl = {};
	long long gen0, gen;
	pthread_t th;
	int i, nr, ufd, ret;

	read_active(active0, sizeof(active0));
	ufd = uevent_socket();
	ASSERT_LE(0, ufd) TH_LOG("uevent socket: %s", strerror(-ufd));
	gen0 = read_generation();
	ASSERT_LE(0, gen0);

	for (i = 0; i < 3; i++) {
		/* A poll() waiter on generation wakes on the switch. */
		pl.fd = open(GENERATION_FILE, O_RDONLY);
		ASSERT_LE(0, pl.fd);
		ASSERT_LT(0, read(pl.fd, cur, sizeof(cur)));
		pl.revents = 0;
		pl.ready = 0;
		ASSERT_EQ(0, pthread_create(&th, NULL, poll_thread, &pl));
		while (!__atomic_load_n(&pl.ready, __ATOMIC_SEQ_CST))
			usleep(1000);
		usleep(50000);

		ret = switch_to(seq[i]);
		ASSERT_EQ(0, ret) TH_LOG("switch to %s: %s", seq[i],
					 strerror(-ret));
		pthread_join(th, NULL);
		close(pl.fd);
		EXPECT_TRUE(pl.revents & (POLLPRI | POLLERR))
			TH_LOG("poll waiter not woken by switch to %s", seq[i]);

		gen = read_generation();
		EXPECT_EQ(gen0 + i + 1, gen);
		read_active(active, sizeof(active));
		EXPECT_STREQ(seq[i], active);
		EXPECT_TRUE(saw_uevent(ufd, seq[i], i ? seq[i - 1] : active0, gen))
			TH_LOG("no uevent for %s generation %lld", seq[i], gen);

		if (i < 2) {
			nr = profile_knobs(seq[i], ka, MAX_TEST_KNOBS);
			ASSERT_LT(10, nr);
			nr = drop_skipped(ka, nr);
			note_applied(ka, nr);
		} else {
			base_text = slurp(BASELINE_FILE);
			ASSERT_NE(NULL, base_text);
			nr = parse_knobs(base_text, ka, MAX_TEST_KNOBS);
			free(base_text);
			/* Every knob both profiles applied is in the baseline. */
			EXPECT_LT(10, nr_applied);
			EXPECT_EQ(0, missing_applied(ka, nr));
		}
		EXPECT_EQ(0, count_mismatches(ka, nr, true))
			TH_LOG("after switch to %s", seq[i]);
	}
	close(ufd);
}

/* Values are distinct per set; the bad value fails the write (-EINVAL). */
#define RB_THP 2
static const char *const rb_path[] = {
	"/proc/sys/vm/swappiness",
	"/proc/sys/vm/dirty_ratio",
	"/sys/kernel/mm/transparent_hugepage/enabled",
	"/proc/sys/vm/dirty_background_ratio",
	"/proc/sys/vm/vfs_cache_pressure",
	"/proc/sys/vm/overcommit_ratio",
	"/proc/sys/net/core/somaxconn",
	"/proc/sys/fs/inotify/max_user_watches",
};

static const char *const rb_a[] = {
	"11", "31", "always", "7", "101", "51", "1001", "20001",
};

static const char *const rb_b[] = {
	"12", "32", "madvise", "8", "102", "52", "1002", "20002",
};

#define RB_N ((int)ARRAY_SIZE(rb_path))

/* Kernels without THP (PREEMPT_RT): a numeric knob for the string one. */
static bool rb_no_thp;

static const char *rb_knob(int i)
{
	return i == RB_THP && rb_no_thp ?
	       "/proc/sys/net/core/netdev_max_backlog" : rb_path[i];
}

static const char *rb_value(const char *const *vals, int i)
{
	if (i == RB_THP && rb_no_thp)
		return vals == rb_a ? "1003" : "1004";
	return vals[i];
}

/* Knob list of set @vals; knob @bad (if >= 0) gets @bad_line instead. */
static void rb_text(char *buf, size_t len, const char *const *vals, int bad,
		    const char *bad_line)
{
	size_t n = 0;
	int i;

	for (i = 0; i < RB_N; i++) {
		if (i == bad)
			n += snprintf(buf + n, len - n, "%s\n", bad_line);
		else
			n += snprintf(buf + n, len - n, "%s %s\n", rb_knob(i),
				      rb_value(vals, i));
	}
}

TEST(rollback_at_every_position)
{
	char text[4096], line[512], last[4096], want[600];
	long long gen;
	int k, v, nr, ret;

	rb_no_thp = access(rb_path[RB_THP], W_OK) != 0;
	rb_text(text, sizeof(text), rb_a, -1, NULL);
	ASSERT_EQ(0, define_profile("rb_a", text));
	ASSERT_EQ(0, switch_to("rb_a"));
	nr = parse_knobs(text, ka, MAX_TEST_KNOBS);
	ASSERT_EQ(RB_N, nr);
	ASSERT_EQ(0, count_mismatches(ka, nr, true));

	for (v = 0; v < 2; v++) {
		for (k = 0; k < RB_N; k++) {
			int want_err = v == 0 ? -EINVAL : -ENOENT;
			const char *bad_path = v == 0 ? rb_knob(k) :
					       "/proc/sys/vm/mltune_no_such_knob";

			snprintf(line, sizeof(line), "%s %s", bad_path,
				 v == 0 ? "bogus" : "1");
			rb_text(text, sizeof(text), rb_b, k, line);
			ASSERT_EQ(0, define_profile("rb_bad", text));
			gen = read_generation();
			ret = switch_to("rb_bad");
			EXPECT_EQ(want_err, ret) TH_LOG("position %d", k);
			EXPECT_EQ(gen + 1, read_generation());
			EXPECT_EQ(0, count_mismatches(ka, nr, true))
				TH_LOG("position %d not rolled back", k);
			ASSERT_LT(0, mltune_read_file(LAST_FILE, last,
						      sizeof(last)));
			snprintf(want, sizeof(want),
				 "profile=rb_bad result=rolled-back errno=%d knob=%s index=%d ",
				 want_err, bad_path, k);
			EXPECT_EQ(0, strncmp(last, want, strlen(want)))
				TH_LOG("last_switch '%s', want '%s'", last, want);
			read_active(line, sizeof(line));
			EXPECT_STREQ("rb_a", line);
		}
	}
	EXPECT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, remove_profile("rb_bad"));
	EXPECT_EQ(0, remove_profile("rb_a"));
}

/*
 * A rolled-back switch changes no file of the tree: knobs it wrote before
 * the failing one do not enter the baseline (found by hostile_test).
 */
TEST(rolled_back_switch_keeps_baseline)
{
	static const char knob[] = "/proc/sys/net/ipv4/tcp_keepalive_intvl";
	char cur[64], text[512], *before, *after;
	long v;

	ASSERT_EQ(0, knob_read(knob, cur, sizeof(cur)));
	before = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, before);
	if (strstr(before, knob)) {
		free(before);
		SKIP(return, "%s is in the baseline already", knob);
	}
	v = strtol(cur, NULL, 10);
	snprintf(text, sizeof(text), "%s %d\n/proc/sys/vm/swappiness bogus\n",
		 knob, v == 75 ? 76 : 75);
	ASSERT_EQ(0, define_profile("rbb", text));
	EXPECT_EQ(-EINVAL, switch_to("rbb"));
	after = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, after);
	EXPECT_STREQ(before, after);
	free(before);
	free(after);
	ASSERT_EQ(0, knob_read(knob, text, sizeof(text)));
	EXPECT_STREQ(cur, text);
	EXPECT_EQ(0, remove_profile("rbb"));
}

TEST(optional_knob_skipped)
{
	char last[4096];

	ASSERT_EQ(0, define_profile("opt",
				    "/proc/sys/vm/swappiness 13\n"
				    "?/proc/sys/vm/mltune_no_such_knob 1\n"
				    "?/proc/sys/vm/dirty_ratio bogus\n"));
	ASSERT_EQ(0, switch_to("opt"));
	ASSERT_LT(0, mltune_read_file(LAST_FILE, last, sizeof(last)));
	EXPECT_NE(NULL, strstr(last, "result=ok"));
	EXPECT_NE(NULL, strstr(last, "skipped=2"));
	EXPECT_NE(NULL, strstr(last, "skipped=/proc/sys/vm/mltune_no_such_knob errno=-2\n"));
	EXPECT_NE(NULL, strstr(last, "skipped=/proc/sys/vm/dirty_ratio errno=-22\n"));
	EXPECT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, remove_profile("opt"));
}

/*
 * Bounds: '>' keeps a value already at least the bound, '<' one at most
 * it; a bound not met is written. A kept bound is not written, so it is
 * neither rolled back nor restored: the site's value survives a switch.
 */
TEST(bounds_keep_values_beyond_them)
{
	char filemax[64], dbr[64], somax[64], buf[4096];
	bool fm_base, dbr_base;
	char *base;
	int err;

	ASSERT_EQ(0, knob_read("/proc/sys/fs/file-max", filemax, sizeof(filemax)));
	ASSERT_EQ(0, knob_read("/proc/sys/vm/dirty_background_ratio", dbr, sizeof(dbr)));
	ASSERT_EQ(0, knob_read("/proc/sys/net/core/somaxconn", somax, sizeof(somax)));
	ASSERT_EQ(0, mltune_write_file("/proc/sys/fs/file-max", "9999999"));
	ASSERT_EQ(0, mltune_write_file("/proc/sys/vm/dirty_background_ratio", "3"));
	ASSERT_EQ(0, mltune_write_file("/proc/sys/net/core/somaxconn", "1000"));

	ASSERT_EQ(0, define_profile("bnd",
				    ">/proc/sys/fs/file-max 2097152\n"
				    "</proc/sys/vm/dirty_background_ratio 5\n"
				    ">/proc/sys/net/core/somaxconn 4321\n"));
	ASSERT_LT(0, mltune_read_file(MLTUNE_SYSFS "/profiles/bnd/knobs", buf,
				      sizeof(buf)));
	EXPECT_STREQ(">/proc/sys/fs/file-max 2097152\n"
		     "</proc/sys/vm/dirty_background_ratio 5\n"
		     ">/proc/sys/net/core/somaxconn 4321\n", buf);
	base = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, base);
	fm_base = strstr(base, "/proc/sys/fs/file-max ");
	dbr_base = strstr(base, "/proc/sys/vm/dirty_background_ratio ");
	free(base);
	ASSERT_EQ(0, switch_to("bnd"));
	/* A kept value is not written, so it does not enter the baseline. */
	base = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, base);
	EXPECT_EQ(fm_base, strstr(base, "/proc/sys/fs/file-max ") != NULL);
	EXPECT_EQ(dbr_base, strstr(base, "/proc/sys/vm/dirty_background_ratio ") != NULL);
	EXPECT_NE(NULL, strstr(base, "/proc/sys/net/core/somaxconn "));
	free(base);
	ASSERT_EQ(0, knob_read("/proc/sys/fs/file-max", buf, sizeof(buf)));
	EXPECT_STREQ("9999999", buf);
	ASSERT_EQ(0, knob_read("/proc/sys/vm/dirty_background_ratio", buf, sizeof(buf)));
	EXPECT_STREQ("3", buf);
	ASSERT_EQ(0, knob_read("/proc/sys/net/core/somaxconn", buf, sizeof(buf)));
	EXPECT_STREQ("4321", buf);
	ASSERT_LT(0, mltune_read_file(LAST_FILE, buf, sizeof(buf)));
	EXPECT_NE(NULL, strstr(buf, "result=ok"));
	EXPECT_NE(NULL, strstr(buf, "written=1 skipped=0 kept=2\n"));
	EXPECT_NE(NULL, strstr(buf, "kept=/proc/sys/fs/file-max\n"));
	EXPECT_NE(NULL, strstr(buf, "kept=/proc/sys/vm/dirty_background_ratio\n"));
	EXPECT_EQ(NULL, strstr(buf, "kept=/proc/sys/net/core/somaxconn"));

	/* A bound on a file that holds no integer fails the switch. */
	ASSERT_EQ(0, define_profile("bnd2",
				    ">/proc/sys/net/core/somaxconn 5000\n"
				    ">/proc/sys/net/ipv4/tcp_rmem 4096\n"));
	err = switch_to("bnd2");
	EXPECT_EQ(-EINVAL, err);
	ASSERT_EQ(0, knob_read("/proc/sys/net/core/somaxconn", buf, sizeof(buf)));
	EXPECT_STREQ("4321", buf);

	EXPECT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, remove_profile("bnd2"));
	EXPECT_EQ(0, remove_profile("bnd"));
	EXPECT_EQ(0, mltune_write_file("/proc/sys/fs/file-max", filemax));
	EXPECT_EQ(0, mltune_write_file("/proc/sys/vm/dirty_background_ratio", dbr));
	EXPECT_EQ(0, mltune_write_file("/proc/sys/net/core/somaxconn", somax));
}

TEST(define_replace_remove)
{
	char buf[4096];

	ASSERT_EQ(0, define_profile("life", "/proc/sys/vm/swappiness 21\n"));
	ASSERT_LT(0, mltune_read_file(MLTUNE_SYSFS "/profiles/life/state", buf,
				      sizeof(buf)));
	EXPECT_STREQ("committed\n", buf);
	EXPECT_EQ(-EEXIST, mltune_write_file(CONTROL_FILE, "+life"));
	/* Staged changes do not touch the committed list. */
	ASSERT_EQ(0, mltune_write_file(MLTUNE_SYSFS "/profiles/life/knobs",
				       "# comment\n\n?/proc/sys/vm/swappiness 22\n"));
	ASSERT_LT(0, mltune_read_file(MLTUNE_SYSFS "/profiles/life/state", buf,
				      sizeof(buf)));
	EXPECT_STREQ("staged\n", buf);
	ASSERT_LT(0, mltune_read_file(MLTUNE_SYSFS "/profiles/life/knobs", buf,
				      sizeof(buf)));
	EXPECT_STREQ("/proc/sys/vm/swappiness 21\n", buf);
	ASSERT_EQ(0, mltune_write_file(MLTUNE_SYSFS "/profiles/life/state",
				       "commit\n"));
	ASSERT_LT(0, mltune_read_file(MLTUNE_SYSFS "/profiles/life/knobs", buf,
				      sizeof(buf)));
	EXPECT_STREQ("?/proc/sys/vm/swappiness 22\n", buf);
	ASSERT_EQ(0, switch_to("life"));
	EXPECT_EQ(-EBUSY, remove_profile("life"));
	ASSERT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, remove_profile("life"));
	EXPECT_EQ(-ENOENT, access(MLTUNE_SYSFS "/profiles/life", F_OK) ? -errno : 0);
	EXPECT_EQ(-ENOENT, switch_to("life"));
}

/* Errno a profile name write should give. */
static int name_errno(const char *s, size_t len)
{
	size_t i;

	if (len && s[len - 1] == '\n')
		len--;
	if (!len || len >= 32)
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) &&
		    (!i || (s[i] != '_' && s[i] != '-')))
			return -EINVAL;
	return -ENOENT;
}

static unsigned int rnd(void)
{
	static unsigned int x = 2463534242u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

static const char *const bad_knob_lines[] = {
	"/proc/sys/../../etc/passwd 1\n",
	"/proc/sys/vm/../../../etc/shadow 1\n",
	"/proc/sys/./vm/swappiness 1\n",
	"/proc/sys//vm/swappiness 1\n",
	"/proc/sys/vm/swappiness/ 1\n",
	"/proc/sys/vm/swappiness\n",
	"/proc/sys/vm/swappiness " "\n",
	"proc/sys/vm/swappiness 1\n",
	"/sys/kernel/mltune/profile training\n",
	"/sys/../proc/sys/vm/swappiness 1\n",
	"/sys/block/../kernel/mm/x 1\n",
	"/proc/self/root/etc/passwd 1\n",
	"/proc/1/environ 1\n",
	"/sys/kernel/mm/transparent_hugepage 1\n",
	"/sys/devices/system/cpu/online 0-1\n",
	"/sys/module/mltune/parameters/keep_on_unload 1\n",
	"/dev/mltune 1\n",
	"/proc/irq/default_smp_affinity ff\n",
	"/proc/sys/vm/swappiness\t1\n",
	"/proc/sys/vm/swappiness 1\r\n",
	"/proc/sys/vm/swappiness 1\n/proc/sys/vm/swappiness 2\n",
	"/proc/sys/vm/swappiness 1\n/proc/irq/../sys/x 2\n",
	">/proc/sys/fs/file-max many\n",
	">/proc/sys/fs/file-max 1 2\n",
	">/proc/sys/fs/file-max -\n",
	"></proc/sys/fs/file-max 1\n",
	">>/proc/sys/fs/file-max 1\n",
	"?\?/proc/sys/vm/swappiness 1\n", /* not a trigraph */
	"?>?/proc/sys/vm/swappiness 1\n",
	"!/proc/sys/vm/swappiness 1\n",
};

/* A write of @len bytes at @path must fail with @want. */
static void bad(const char *path, const void *buf, size_t len, int want,
		int *total, int *wrong)
{
	int r = mltune_write_len(path, buf, len);

	if (r != want && ++*wrong < 10)
		ksft_print_msg("%s: write of %zu bytes gave %d, want %d\n",
			       path, len, r, want);
	++*total;
}

#define BAD(path, buf, len, want) bad(path, buf, len, want, &total, &wrong)

static void bad_writes_privileged(int *total_p, int *wrong_p)
{
	const char *knobs = MLTUNE_SYSFS "/profiles/bad/knobs";
	const char *state = MLTUNE_SYSFS "/profiles/bad/state";
	int total = 0, wrong = 0;
	char buf[8192];
	size_t i, j, len;

	/* Random garbage and unknown names to profile. */
	for (i = 0; i < 400; i++) {
		len = 1 + rnd() % (i < 200 ? 40 : 8);
		for (j = 0; j < len; j++)
			buf[j] = i % 2 ? (char)rnd() :
				"zyxw_-0123456789AB./\n\t "[rnd() % 24];
		buf[0] = 'z';	/* never a real profile name */
		if (i % 5 == 0 && len > 1)
			buf[len / 2] = '\0';
		BAD(PROFILE_FILE, buf, len, name_errno(buf, len));
	}
	for (i = 0; i < 100; i++) {
		len = snprintf(buf, sizeof(buf), "nosuch%zu\n", i);
		BAD(PROFILE_FILE, buf, len, -ENOENT);
	}
	/* Over-long names. */
	for (i = 32; i < 132; i++) {
		memset(buf, 'a', i);
		BAD(PROFILE_FILE, buf, i, -EINVAL);
		BAD(CONTROL_FILE, buf, i, -EINVAL);
	}
	/* Control: bad syntax, traversal, reserved and unknown names. */
	{
		static const char *const c[] = {
			"+", "-", "x", "training", "+../x", "+a/b", "+.",
			"+..", "+none", "+baseline", "+control", "-nosuch",
			"+a b", "++a", "+a\n\n", "+\n", "-\n", "*a",
		};
		static const int e[] = {
			-EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL,
			-EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -ENOENT,
			-EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL,
		};

		for (i = 0; i < ARRAY_SIZE(c); i++)
			BAD(CONTROL_FILE, c[i], strlen(c[i]), e[i]);
		BAD(CONTROL_FILE, "+a\0b", 4, -EINVAL);
	}
	/* Knob lists: traversal, outside the allowlist, bad bytes. */
	for (i = 0; i < ARRAY_SIZE(bad_knob_lines); i++)
		BAD(knobs, bad_knob_lines[i], strlen(bad_knob_lines[i]),
		    -EINVAL);
	for (i = 0; i < 200; i++) {
		len = snprintf(buf, sizeof(buf), "/proc/sys/vm/swappiness 1%c\n",
			       (char)(rnd() % 32));
		if (buf[len - 2] == '\n')
			buf[len - 2] = '\x7f';
		BAD(knobs, buf, len, -EINVAL);
	}
	for (i = 0; i < 200; i++) {
		len = 8 + rnd() % 200;
		for (j = 0; j < len; j++)
			buf[j] = (char)(rnd() | 0x80);
		BAD(knobs, buf, len, -EINVAL);
	}
	BAD(knobs, "/proc/sys/vm/swappiness 1\0\n", 27, -EINVAL);
	/* A value over 4 KiB (one write of a page holds the start only). */
	len = snprintf(buf, sizeof(buf), "/proc/sys/kernel/domainname ");
	memset(buf + len, 'v', 4097);
	buf[len + 4097] = '\n';
	{
		int fd = open(knobs, O_WRONLY);
		ssize_t a = write(fd, buf, 4096);
		ssize_t b = write(fd, buf + a, len + 4098 - a);

		total++;
		if (a != 4096 || b != -1 || errno != EINVAL) {
			wrong++;
			ksft_print_msg("over-long value: %zd %zd %d\n", a, b,
				       errno);
		}
		close(fd);
	}
	/* The staged start of that line does not commit. */
	BAD(state, "commit", 6, -EINVAL);
	/* Appending at a wrong offset. */
	{
		int fd = open(knobs, O_WRONLY);

		total++;
		if (pwrite(fd, "x", 1, 12345) != -1 || errno != EINVAL)
			wrong++;
		close(fd);
	}
	for (i = 0; i < 50; i++) {
		len = 1 + rnd() % 20;
		for (j = 0; j < len; j++)
			buf[j] = 'a' + rnd() % 26;
		BAD(state, buf, len, -EINVAL);
	}
	BAD(state, "commit\0x", 8, -EINVAL);
	*total_p += total;
	*wrong_p += wrong;
}

/* In a child without CAP_SYS_ADMIN, then as nobody: every write refused. */
static int bad_writes_unprivileged(int *total_p)
{
	static const char *const files[] = {
		PROFILE_FILE, CONTROL_FILE,
		MLTUNE_SYSFS "/profiles/bad/knobs",
		MLTUNE_SYSFS "/profiles/bad/state",
	};
	static const char *const data[] = {
		"training", "+evil", "/proc/sys/vm/swappiness 1\n", "commit",
	};
	int status, i, n = 0;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		struct __user_cap_header_struct h = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[2] = {};
		int wrong = 0, r;

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
		d[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		for (i = 0; i < 4 * 50; i++) {
			r = mltune_write_len(files[i % 4], data[i % 4],
				   strlen(data[i % 4]));
			wrong += r != -EPERM;
		}
		if (setgid(65534) || setuid(65534))
			_exit(102);
		for (i = 0; i < 4 * 50; i++) {
			r = mltune_write_len(files[i % 4], data[i % 4],
				   strlen(data[i % 4]));
			wrong += r != -EACCES;
		}
		_exit(wrong > 99 ? 99 : wrong);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	n = 400;
	*total_p += n;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(bad_input)
{
	char active0[64], active1[64], *knobs0, *knobs1, *base0, *base1;
	int total = 0, wrong = 0, uwrong, nr;
	long long gen0;

	ASSERT_EQ(0, define_profile("bad", "/proc/sys/vm/swappiness 23\n"));
	ASSERT_EQ(0, switch_to("training"));
	gen0 = read_generation();
	read_active(active0, sizeof(active0));
	knobs0 = slurp(MLTUNE_SYSFS "/profiles/bad/knobs");
	base0 = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, knobs0);
	ASSERT_NE(NULL, base0);
	nr = profile_knobs("training", ka, MAX_TEST_KNOBS);
	nr = drop_skipped(ka, nr);
	ASSERT_EQ(0, count_mismatches(ka, nr, true));

	bad_writes_privileged(&total, &wrong);
	uwrong = bad_writes_unprivileged(&total);
	EXPECT_EQ(0, uwrong) TH_LOG("unprivileged writes not refused right");
	EXPECT_EQ(0, wrong) TH_LOG("%d of %d bad writes gave the wrong errno",
				   wrong, total);
	EXPECT_LE(1000, total);
	ksft_print_msg("%d bad writes refused\n", total);

	/* Nothing changed. */
	EXPECT_EQ(gen0, read_generation());
	read_active(active1, sizeof(active1));
	EXPECT_STREQ(active0, active1);
	knobs1 = slurp(MLTUNE_SYSFS "/profiles/bad/knobs");
	base1 = slurp(BASELINE_FILE);
	ASSERT_NE(NULL, knobs1);
	ASSERT_NE(NULL, base1);
	EXPECT_STREQ(knobs0, knobs1);
	EXPECT_STREQ(base0, base1);
	EXPECT_EQ(0, count_mismatches(ka, nr, true));
	EXPECT_EQ(-ENOENT, access(MLTUNE_SYSFS "/profiles/evil", F_OK) ? -errno : 0);
	free(knobs0);
	free(knobs1);
	free(base0);
	free(base1);
	EXPECT_EQ(0, switch_to("baseline"));
	EXPECT_EQ(0, remove_profile("bad"));
}

int main(int argc, char **argv)
{
	mltune_require_module();
	return test_harness_run(argc, argv);
}
