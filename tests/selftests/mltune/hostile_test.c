// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile input to every writable file under /sys/kernel/mltune: the
 * profile selector, profiles/control, a profile's knobs and state, the
 * feeder cores and each node's pool reservation. Inputs are generated from
 * seeds near the valid syntax of each file (names, cpulists, numbers, knob
 * lists with traversal, symlink and non-allowlisted paths) and mutated:
 * random bytes, embedded NUL, over-long strings, out-of-range numbers,
 * writes at odd offsets. After every refused write every readable file of
 * the tree must read as before it; an accepted write takes a new snapshot.
 * Then 1000 profiles, a 10000-knob list, and generated misuse of
 * /dev/mltune: mmap with every mix of length, protection, flags and offset
 * (bad nodes, stray offset bits, MAP_PRIVATE, PROT_EXEC), then mprotect,
 * mremap and fork on what was mapped, use after close, and ioctls with
 * foreign and malformed numbers and bad pointers; after every call the
 * pool's counters are those the call allows, and after every mapping is
 * gone the pool is whole. Counts of tries, acceptances and refusals (by
 * errno) are printed; the VM bed fails the run on any kernel splat.
 *
 * Sizes (mltune_size()): 5000 mutated writes and 5000 /dev/mltune calls by
 * default (about 15 s in an idle TCG guest), 30000 and 10000 with
 * MLTUNE_SOAK=1 (a few minutes there; 100000 writes took 15 minutes, and
 * over 20 while stress-ng loaded the host); MLTUNE_HOSTILE_WRITES and
 * MLTUNE_HOSTILE_DEV_CALLS set either count; MLTUNE_HOSTILE_SEED the
 * generator's seed (printed, to replay a run).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/mltune.h>
#include <unistd.h>

#include "snapshot.h"

#define WRITES		5000
#define SOAK_WRITES	30000
#define DEV_CALLS	5000
#define SOAK_DEV_CALLS	10000
#define HP		MLTUNE_HUGEPOOL_PAGE_SIZE
#define DEV_PAGES	4	/* node 0's pool during the /dev/mltune test */
#define SCRATCH		"hostile"
#define SCRATCH_DIR	MLTUNE_SYSFS "/profiles/" SCRATCH
/* Pool pages a generated reservation may ask for (a 768 MiB guest node). */
#define MAX_RESERVE	2

/* Read generation and last_switch into @s again (a switch ran). */
static void snap_refresh_switch(struct snap *s)
{
	for (int i = 0; i < s->nr; i++)
		if (switch_record(s->f[i].path))
			file_load(&s->f[i]);
}

/* ---- generated input ------------------------------------------------------ */

static unsigned long long rng;

static unsigned int rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng >> 11);
}

/* The generator's seed: $MLTUNE_HOSTILE_SEED, else the time; printed. */
static void seed_rng(void)
{
	const char *env = getenv("MLTUNE_HOSTILE_SEED");

	rng = env ? strtoull(env, NULL, 0) : (unsigned long long)time(NULL);
	if (!rng)
		rng = 1;
	ksft_print_msg("seed %llu (MLTUNE_HOSTILE_SEED replays it)\n", rng);
}

enum kind { K_NAME, K_CONTROL, K_KNOBS, K_STATE, K_CPUS, K_PAGES, NKIND };

static const char *const seeds[NKIND][24] = {
	[K_NAME] = { "baseline", SCRATCH, "nosuch", "", "\n", "baseline\n",
		"baseline ", " baseline", "base line", "../baseline",
		"baseline/", ".", "..", "-", "+" SCRATCH, "BASELINE",
		SCRATCH "\n\n", "\t" SCRATCH, NULL },
	[K_CONTROL] = { "+" SCRATCH "2", "-" SCRATCH "2", "-nosuch", "+baseline",
		"-baseline", "+", "-", "+\n", "+a/b", "+..", "+.", "+a b",
		"*x", "+" SCRATCH "2\n", "-" SCRATCH, "+-", "++x", "+x\ty",
		"+\xff\xfe", "+" SCRATCH, NULL },
	[K_KNOBS] = { "/proc/sys/vm/swappiness 60\n",
		"/proc/sys/vm/swappiness 60",
		"/proc/sys/vm/nosuch 1\n",
		"/proc/sys/vm/../vm/swappiness 60\n",
		"/proc/sys/../../etc/passwd x\n",
		"/proc/self/root/proc/sys/vm/swappiness 60\n",
		"/proc/sys/vm/swappiness\n",
		"/proc/sys/vm/swappiness\x20\n",	/* no value */
		"?/proc/sys/vm/swappiness 60\n",
		"/sys/devices/system/cpu/cpu1/online 0\n",
		"/sys/kernel/mm/ksm/run 1\n",
		"/sys/bus/workqueue/devices/writeback/cpumask 1\n",
		"/sys/class/net/lo/mtu 1500\n",
		"/sys/kernel/mm/transparent_hugepage/defrag madvise\n",
		"/sys/kernel/mm/transparent_hugepage/../../../../etc/x y\n",
		"/proc/sys/vm/swappiness 60\n/proc/sys/vm/swappiness 61\n",
		"relative/path 1\n", "/ 1\n", "\n\n\n", "# comment\n",
		"/proc/sys/vm/swappiness 99999999999999999999999\n",
		NULL },
	[K_STATE] = { "commit", "commit\n", "comm", "COMMIT", "commit commit",
		"", "\n", " commit", "commitx", NULL },
	[K_CPUS] = { "", "\n", "0", "1", "0-1", "1-0", "0-", "-1", "4096",
		"0-4095", "99999999999999999999", "0,,1", "a", "0x3", "1:2/3",
		"1-3:1/2", "7", "8", "0-7", ",", "1 2", "1\n2", NULL },
	[K_PAGES] = { "0", "1", "2", "-1", "18446744073709551616",
		"18446744073709551615", "0x1", " 1", "1 2", "", "+1", "1e3",
		"00000000000000000000000000000001", "1\n", "\n", "8", "9",
		"4294967296", NULL },
};

static int nseeds(enum kind k)
{
	int n = 0;

	while (seeds[k][n])
		n++;
	return n;
}

/* A mutated seed of kind @k into @buf; returns its length. */
static size_t gen(enum kind k, char *buf, size_t cap)
{
	const char *s = seeds[k][rnd() % nseeds(k)];
	size_t len = strlen(s), i, n;

	memcpy(buf, s, len);
	switch (rnd() % 10) {
	case 0: case 1: case 2:		/* as is */
		break;
	case 3:				/* a random byte replaced */
		if (len)
			buf[rnd() % len] = (char)rnd();
		break;
	case 4:				/* a byte inserted (NUL often) */
		i = len ? rnd() % (len + 1) : 0;
		memmove(buf + i + 1, buf + i, len - i);
		buf[i] = rnd() % 2 ? '\0' : (char)rnd();
		len++;
		break;
	case 5:				/* truncated */
		len = len ? rnd() % len : 0;
		break;
	case 6:				/* over-long: repeated to the size */
		n = (rnd() % 3 == 0) ? cap : 1 + rnd() % 5000;
		for (i = len; len && i < n && i < cap; i++)
			buf[i] = buf[i % len];
		if (len)
			len = i;
		break;
	case 7:				/* random bytes */
		len = rnd() % 300;
		for (i = 0; i < len; i++)
			buf[i] = (char)rnd();
		break;
	case 8:				/* a digit changed */
		for (i = 0; i < len; i++)
			if (buf[i] >= '0' && buf[i] <= '9' && rnd() % 2)
				buf[i] = '0' + rnd() % 10;
		break;
	default:			/* two seeds joined */
		s = seeds[k][rnd() % nseeds(k)];
		n = strlen(s);
		if (len + n < cap) {
			memcpy(buf + len, s, n);
			len += n;
		}
		break;
	}
	/*
	 * A reservation the guest can hold: a valid count above MAX_RESERVE
	 * would really allocate (and may take memory a later test needs).
	 */
	if (k == K_PAGES) {
		char t[64], *end;

		/* No size suffix: "8G" is a valid reservation, too big. */
		for (i = 0; i < len; i++)
			if (strchr("kKmMgG", buf[i]) && buf[i])
				buf[i] = 'x';
		unsigned long long v;

		if (len < sizeof(t)) {
			memcpy(t, buf, len);
			t[len] = '\0';
			errno = 0;
			v = strtoull(t, &end, 0);
			if (!errno && end != t && v > MAX_RESERVE)
				len = snprintf(buf, cap, "%u", MAX_RESERVE);
		}
	}
	return len;
}

/* ---- the run -------------------------------------------------------------- */

struct target {
	char path[256];
	enum kind kind;
	long tries, accepted, refused;
	double accepted_s, refused_s;	/* time in write(2), by outcome */
};

static int nerrno[4096];

static bool errno_allowed(int e)
{
	return e == EINVAL || e == ENOENT || e == EBUSY || e == EEXIST ||
	       e == ENOSPC || e == ENOMEM || e == EFBIG || e == E2BIG ||
	       e == ERANGE;
}

/*
 * One write of @len bytes at @off: the bytes taken (sysfs takes at most a
 * page of a longer write), or -errno.
 */
static ssize_t write_at(const char *path, const char *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = off ? pwrite(fd, buf, len, off) : write(fd, buf, len);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

/*
 * "\n" and the profiles defined when the program started, one per line:
 * read before the harness forks the first test, so that a test killed by
 * its timeout (its teardown never runs) cannot make its leftovers part of
 * the next test's start.
 */
static char initial[4096];

/* Back to the baseline: no feeder cores, no pool, no profile of ours. */
static void restore(void)
{
	char *list, *name, *save;
	char cmd[80];
	int i;

	mltune_write_file(PROFILE_FILE, "baseline");
	mltune_write_file(MLTUNE_SYSFS "/feeder/cpus", "");
	for (i = 0; i < 64; i++) {
		char p[128];

		snprintf(p, sizeof(p), MLTUNE_SYSFS "/hugepool/node%d/reserved", i);
		if (access(p, F_OK))
			break;
		mltune_write_file(p, "0");
	}
	/* Every profile that was not there when the program started. */
	list = slurp(CONTROL_FILE);
	for (name = list ? strtok_r(list, "\n", &save) : NULL; name;
	     name = strtok_r(NULL, "\n", &save)) {
		snprintf(cmd, sizeof(cmd), "\n%.70s\n", name);
		if (strstr(initial, cmd))
			continue;
		snprintf(cmd, sizeof(cmd), "-%.70s", name);
		mltune_write_file(CONTROL_FILE, cmd);
	}
	free(list);
}

__attribute__((constructor)) static void record_initial(void)
{
	char *list = slurp(CONTROL_FILE);

	snprintf(initial, sizeof(initial), "\n%s", list ? list : "");
	free(list);
}

/* After the last test, in the harness's own process: nothing of ours left. */
__attribute__((destructor)) static void restore_at_exit(void)
{
	restore();
}

FIXTURE(hostile) {
	struct target t[16];
	int nt;
	struct snap s;
};

FIXTURE_SETUP(hostile)
{
	char p[128];
	int i;

	mltune_require_module();
	restore();
	mltune_write_file(CONTROL_FILE, "-" SCRATCH);
	ASSERT_EQ(0, mltune_write_file(CONTROL_FILE, "+" SCRATCH));
	self->nt = 0;
#define ADD(p_, k_) do { \
		memset(&self->t[self->nt], 0, sizeof(self->t[0])); \
		snprintf(self->t[self->nt].path, sizeof(self->t[0].path), "%s", p_); \
		self->t[self->nt++].kind = k_; \
	} while (0)
	ADD(PROFILE_FILE, K_NAME);
	ADD(CONTROL_FILE, K_CONTROL);
	ADD(SCRATCH_DIR "/knobs", K_KNOBS);
	ADD(SCRATCH_DIR "/state", K_STATE);
	if (!access(MLTUNE_SYSFS "/feeder/cpus", F_OK))
		ADD(MLTUNE_SYSFS "/feeder/cpus", K_CPUS);
	for (i = 0; i < 8; i++) {
		snprintf(p, sizeof(p), MLTUNE_SYSFS "/hugepool/node%d/reserved", i);
		if (access(p, F_OK))
			break;
		ADD(p, K_PAGES);
	}
#undef ADD
	self->s.nr = 0;
}

FIXTURE_TEARDOWN(hostile)
{
	restore();
	snap_free(&self->s);
}

TEST_F_TIMEOUT(hostile, generated_writes, 2700)
{
	long writes = mltune_size("MLTUNE_HOSTILE_WRITES", WRITES, SOAK_WRITES);
	long i, refused = 0, accepted = 0;
	static char buf[2 * 4096 + 64];
	char msg[1024];
	const char *changed;
	double t0 = now_s();
	int e;

	double t_write = 0, t_snap = 0, t_check = 0, t1;

	seed_rng();
	ksft_print_msg("%ld writes\n", writes);
	snap_take(&self->s);
	ksft_print_msg("%d files compared after each refused write\n", self->s.nr);
	for (i = 0; i < writes; i++) {
		struct target *t = &self->t[rnd() % self->nt];
		size_t len = gen(t->kind, buf, sizeof(buf));
		/* Now and then at an odd offset (the knob list is a bin file). */
		off_t off = rnd() % 50 == 0 ? 1 + rnd() % 8192 : 0;
		ssize_t ret;

		t1 = now_s();
		ret = write_at(t->path, buf, len, off);
		t1 = now_s() - t1;
		t_write += t1;
		*(ret >= 0 ? &t->accepted_s : &t->refused_s) += t1;
		t->tries++;
		if (ret >= 0) {
			t->accepted++;
			accepted++;
			t1 = now_s();
			/* Only a control write adds or removes files. */
			if (t->kind == K_CONTROL)
				snap_take(&self->s);
			else
				snap_reload(&self->s);
			t_snap += now_s() - t1;
			continue;
		}
		t->refused++;
		refused++;
		e = (int)-ret;
		if (e < (int)ARRAY_SIZE(nerrno))
			nerrno[e]++;
		if (!errno_allowed(e)) {
			ksft_print_msg("write %ld: %s: %zu bytes at %lld refused with %s: \"%s\"\n",
				       i, t->path, len, (long long)off, strerror(e),
				       escaped(buf, len, msg, sizeof(msg)));
			ASSERT_TRUE(errno_allowed(e));
		}
		t1 = now_s();
		changed = snap_changed_ex(&self->s, t->kind == K_CONTROL,
					  t->kind == K_NAME);
		t_check += now_s() - t1;
		if (changed) {
			ksft_print_msg("write %ld: %s refused %zu bytes at %lld (%s) but %s changed: \"%s\"\n",
				       i, t->path, len, (long long)off, strerror(e), changed,
				       escaped(buf, len, msg, sizeof(msg)));
			snap_print_change(&self->s, changed);
			if (strcmp(changed, "the set of files")) {
				char *last = slurp(MLTUNE_SYSFS "/last_switch");

				ksft_print_msg("last_switch: %s", last ? last : "?\n");
				free(last);
			}
			ASSERT_EQ(NULL, changed);
		}
		if (t->kind == K_NAME)
			snap_refresh_switch(&self->s);
	}
	for (i = 0; i < self->nt; i++)
		ksft_print_msg("%-45s %6ld tries %6ld accepted (%.1f s) %6ld refused (%.1f s)\n",
			       self->t[i].path, self->t[i].tries,
			       self->t[i].accepted, self->t[i].accepted_s,
			       self->t[i].refused, self->t[i].refused_s);
	for (e = 1; e < (int)ARRAY_SIZE(nerrno); e++)
		if (nerrno[e])
			ksft_print_msg("refused with %s: %d\n", strerror(e), nerrno[e]);
	ksft_print_msg("%ld writes: %ld accepted, %ld refused, %s (%.1f s)\n",
		       writes, accepted, refused, "0 changes from refused writes",
		       now_s() - t0);
	ksft_print_msg("time: writes %.1f s, rereads %.1f s, compares %.1f s\n",
		       t_write, t_snap, t_check);
}

/* 1000 profiles: each created or refused with a reason, and all removed. */
TEST_F(hostile, thousand_profiles)
{
	char name[64];
	int made = 0, full = 0, ret, i;

	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "+h%d", i);
		ret = mltune_write_file(CONTROL_FILE, name);
		if (!ret)
			made++;
		else if (ret == -ENOSPC || ret == -ENOMEM)
			full++;
		else
			ASSERT_EQ(0, ret);
	}
	ksft_print_msg("1000 profiles: %d created, %d refused (limit)\n", made, full);
	ASSERT_EQ(1000, made + full);
	snap_take(&self->s);
	/* A duplicate is refused (or the limit), and nothing changes. */
	ret = mltune_write_file(CONTROL_FILE, "+h0");
	EXPECT_TRUE(ret == -EEXIST || ret == -ENOSPC);
	expect_unchanged(_metadata, &self->s);
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "-h%d", i);
		ret = mltune_write_file(CONTROL_FILE, name);
		ASSERT_EQ(i < made ? 0 : -ENOENT, ret);
	}
}

/* A 10000-knob list: staged and committed whole, or refused whole. */
TEST_F(hostile, ten_thousand_knobs)
{
	size_t cap = 10000 * 64, len = 0, off;
	char *list = malloc(cap);
	ssize_t n = 0;
	int ret, i;

	ASSERT_NE(NULL, list);
	for (i = 0; i < 10000; i++)
		len += snprintf(list + len, cap - len, "?/proc/sys/mltune_hostile/k%d %d\n",
				i, i);
	snap_take(&self->s);
	/* As cat writes it: page by page, each at the offset reached. */
	for (off = 0; off < len; off += n) {
		n = write_at(SCRATCH_DIR "/knobs", list + off, len - off, off);
		if (n <= 0)
			break;
	}
	ksft_print_msg("10000 knobs (%zu bytes): %s after %zu bytes\n", len,
		       n < 0 ? strerror((int)-n) : "staged", off);
	if (n < 0) {
		EXPECT_TRUE(errno_allowed((int)-n));
		/* Refused part way: the profile refuses to commit it. */
		ret = mltune_write_file(SCRATCH_DIR "/state", "commit");
		EXPECT_EQ(off ? -EINVAL : 0, ret);
		if (!off)
			expect_unchanged(_metadata, &self->s);
	} else {
		ret = mltune_write_file(SCRATCH_DIR "/state", "commit");
		ksft_print_msg("commit: %s\n", ret ? strerror(-ret) : "committed");
		EXPECT_TRUE(!ret || errno_allowed(-ret));
	}
	free(list);
}

/* ---- /dev/mltune misuse -------------------------------------------------- */

static long pool_count(const char *what)
{
	char path[128];

	snprintf(path, sizeof(path), MLTUNE_SYSFS "/hugepool/node0/%s", what);
	return mltune_read_long(path);
}

static const size_t dev_lens[] = {
	0, 1, 4096, HP - 4096, HP, HP + 4096, 2 * HP, DEV_PAGES * HP,
	(DEV_PAGES + 1) * HP, 1ULL << 40,
};

static const int dev_prots[] = {
	PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_EXEC,
	PROT_READ | PROT_WRITE | PROT_EXEC, PROT_WRITE,
};

static const int dev_flags[] = {
	MAP_SHARED, MAP_PRIVATE, MAP_SHARED | MAP_POPULATE, MAP_SHARED | MAP_LOCKED,
	MAP_SHARED | MAP_NORESERVE, MAP_SHARED_VALIDATE, MAP_SHARED | MAP_ANONYMOUS,
	MAP_PRIVATE | MAP_POPULATE,
};

static off_t dev_offset(void)
{
	switch (rnd() % 6) {
	case 0:
		return MLTUNE_HUGEPOOL_MMAP_OFFSET(0);
	case 1:
		return MLTUNE_HUGEPOOL_MMAP_OFFSET(rnd() % 4);
	case 2:
		return MLTUNE_HUGEPOOL_MMAP_OFFSET(0) + 4096ULL * (1 + rnd() % 1024);
	case 3:
		return MLTUNE_HUGEPOOL_MMAP_OFFSET(1ULL << (rnd() % 23));
	case 4:
		return (off_t)(((unsigned long long)rnd() << 32 | rnd()) & ~4095ULL);
	default:
		return MLTUNE_HUGEPOOL_MMAP_OFFSET(0) + HP;
	}
}

/*
 * What is done with an accepted mapping before it goes: the first byte
 * written (when writable), an mprotect, an mremap and a fork that must
 * not inherit it, at random.
 */
static int dev_use(char *p, size_t len, int prot)
{
	int status;
	void *q;
	pid_t pid;

	if (prot & PROT_WRITE)
		p[0] = 1;
	switch (rnd() % 4) {
	case 0:
		(void)mprotect(p, len, (int)(rnd() % 8));
		break;
	case 1:
		q = mremap(p, len, len * 2, MREMAP_MAYMOVE);
		if (q != MAP_FAILED)
			return munmap(q, len * 2);
		break;
	case 2:
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			return -1;
		break;
	default:
		break;
	}
	return munmap(p, len);
}

TEST_F_TIMEOUT(hostile, dev_misuse, 2700)
{
	long calls = mltune_size("MLTUNE_HOSTILE_DEV_CALLS", DEV_CALLS, SOAK_DEV_CALLS);
	long maps = 0, mapped_ok = 0, ioctls = 0, ioctl_ok = 0, i;
	static int nerr[4096];
	struct mltune_hugepool_info info;
	char *ro, buf[256];
	double t0 = now_s();
	int fd, e;

	if (access("/dev/mltune", F_OK) || pool_count("reserved") < 0)
		SKIP(return, "no /dev/mltune or no pool on node 0");
	ASSERT_EQ(0, mltune_write_file(MLTUNE_SYSFS "/hugepool/node0/reserved", "4"));
	ASSERT_EQ(DEV_PAGES, pool_count("free"));
	fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	seed_rng();
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	for (i = 0; i < calls; i++) {
		if (rnd() % 3) {
			size_t len = dev_lens[rnd() % ARRAY_SIZE(dev_lens)];
			int prot = dev_prots[rnd() % ARRAY_SIZE(dev_prots)];
			int flags = dev_flags[rnd() % ARRAY_SIZE(dev_flags)];
			off_t off = dev_offset();
			char *p;

			maps++;
			errno = 0;
			p = mmap(NULL, len, prot, flags, fd, off);
			e = errno;
			if (p == MAP_FAILED) {
				if (e > 0 && e < (int)ARRAY_SIZE(nerr))
					nerr[e]++;
				ASSERT_EQ(DEV_PAGES, pool_count("free"))
					TH_LOG("mmap(%zu, %#x, %#x, %#llx): %s, pages taken",
					       len, prot, flags, (unsigned long long)off,
					       strerror(e));
				continue;
			}
			mapped_ok++;
			/* Only an anonymous mapping (the fd ignored) takes nothing. */
			if (!(flags & MAP_ANONYMOUS))
				ASSERT_EQ(DEV_PAGES - (long)(len / HP), pool_count("free"))
					TH_LOG("mmap(%zu, %#x, %#x, %#llx) accepted",
					       len, prot, flags, (unsigned long long)off);
			ASSERT_EQ(0, dev_use(p, len, prot));
			ASSERT_EQ(DEV_PAGES, pool_count("free"));
			ASSERT_EQ(0, pool_count("mapped"));
		} else {
			unsigned int cmd;
			void *arg;

			switch (rnd() % 4) {
			case 0:
				cmd = MLTUNE_IOC_HUGEPOOL_INFO;
				break;
			case 1:
				cmd = _IOC(rnd() % 4, MLTUNE_IOC_MAGIC, rnd() % 256, rnd() % 512);
				break;
			case 2:
				cmd = rnd();
				break;
			default:	/* our number, a wrong size */
				cmd = _IOC(_IOC_READ | _IOC_WRITE, MLTUNE_IOC_MAGIC, 0x01,
					   rnd() % 128);
				break;
			}
			/* NULL, read-only, kernel, unaligned, or a real buffer. */
			switch (rnd() % 5) {
			case 0:
				arg = NULL;
				break;
			case 1:
				arg = ro;
				break;
			case 2:
				arg = (void *)0xffff888000000000ULL;
				break;
			case 3:
				arg = buf + 1;
				break;
			default:
				arg = &info;
				break;
			}
			for (size_t k = 0; k < sizeof(buf); k++)
				buf[k] = (char)rnd();
			memcpy(&info, buf, sizeof(info));
			if (rnd() % 2) {
				info.node = 0;
				info.flags = 0;
			}
			ioctls++;
			errno = 0;
			if (!ioctl(fd, cmd, arg))
				ioctl_ok++;
			else if (errno > 0 && errno < (int)ARRAY_SIZE(nerr))
				nerr[errno]++;
			ASSERT_EQ(DEV_PAGES, pool_count("free"));
			ASSERT_EQ(DEV_PAGES, pool_count("reserved"));
		}
	}
	/* After close: the descriptor is gone, nothing maps through it. */
	close(fd);
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, HP, PROT_READ, MAP_SHARED, fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(0)));
	EXPECT_EQ(EBADF, errno);
	EXPECT_EQ(DEV_PAGES, pool_count("free"));
	munmap(ro, 4096);
	for (e = 1; e < (int)ARRAY_SIZE(nerr); e++)
		if (nerr[e])
			ksft_print_msg("/dev/mltune refused with %s: %d\n", strerror(e), nerr[e]);
	ksft_print_msg("/dev/mltune: %ld mmaps (%ld accepted), %ld ioctls (%ld accepted)\n",
		       maps, mapped_ok, ioctls, ioctl_ok);
	ksft_print_msg("the pool as each call allows after every call (%.1f s)\n", now_s() - t0);
}

TEST_HARNESS_MAIN
