// SPDX-License-Identifier: GPL-2.0
/*
 * Huge-page pool: reservation through sysfs, buffers mapped from
 * /dev/mltune, NUMA placement, data integrity across 2 MiB boundaries,
 * pinnability (io_uring fixed buffers, O_DIRECT), errors, fork, and
 * 100 map/unmap cycles that must leak nothing.
 * See Documentation/hugepool.rst.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <linux/loop.h>
#include <linux/mltune.h>

#include "mltune_test.h"
#include "../kselftest_harness.h"

#define HP_SYSFS	MLTUNE_SYSFS "/hugepool"
#define DEV		"/dev/mltune"
#define MB		(1UL << 20)
#define HP		MLTUNE_HUGEPOOL_PAGE_SIZE
/* Per-node reservation for the tests: small enough for a 768 MiB node. */
#define TEST_PAGES	32UL

static long hp_read(const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), HP_SYSFS "/%s", rel);
	return mltune_read_long(path);
}

static long node_read(int node, const char *file)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "node%d/%s", node, file);
	return hp_read(rel);
}

static int node_reserve(int node, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), HP_SYSFS "/node%d/reserved", node);
	return mltune_write_file(path, val);
}

static int have_node(int node)
{
	return node_read(node, "reserved") >= 0;
}

/* mmap a pool buffer at a 2 MiB-aligned address (PMD-mappable). */
static void *pool_map(int fd, int node, size_t len, int flags)
{
	size_t span = len + HP;
	char *area, *p;

	area = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return MAP_FAILED;
	p = (char *)(((uintptr_t)area + HP - 1) & ~(uintptr_t)(HP - 1));
	munmap(area, span);
	return mmap(p, len, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE,
		    fd, MLTUNE_HUGEPOOL_MMAP_OFFSET(node));
}

static int page_node(void *addr)
{
	void *pages[1] = { addr };
	int status[1] = { -1 };

	if (syscall(SYS_move_pages, 0, 1UL, pages, NULL, status, 0))
		return -errno;
	return status[0];
}

static int mapped_in_maps(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, DEV))
			found = 1;
	fclose(f);
	return found;
}

/*
 * Every test starts with TEST_PAGES free pages on each node; main() puts
 * the reservations found at start back at the end (reserving once keeps
 * the TCG guest from zeroing the pages again for every test).
 */
FIXTURE(pool) {
	int fd;
};

FIXTURE_SETUP(pool)
{
	char val[32];
	int n;

	self->fd = -1;
	snprintf(val, sizeof(val), "%lu", TEST_PAGES);
	for (n = 0; n < 2; n++) {
		if (!have_node(n))
			continue;
		if (node_read(n, "reserved") != (long)TEST_PAGES)
			ASSERT_EQ(0, node_reserve(n, val)) TH_LOG("node%d", n);
		ASSERT_EQ((long)TEST_PAGES, node_read(n, "free"))
			TH_LOG("node%d: pages still mapped from an earlier test", n);
	}
	self->fd = open(DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", DEV, strerror(errno));
}

FIXTURE_TEARDOWN(pool)
{
	int n;

	if (self->fd >= 0)
		close(self->fd);
	for (n = 0; n < 2; n++)
		if (have_node(n))
			EXPECT_EQ((long)TEST_PAGES, node_read(n, "free"));
}

TEST_F(pool, reserve_both_nodes)
{
	struct mltune_hugepool_info info = { 0 };
	int n;

	if (!have_node(1))
		SKIP(return, "guest has a single NUMA node");
	for (n = 0; n < 2; n++) {
		EXPECT_EQ((long)TEST_PAGES, node_read(n, "reserved"));
		EXPECT_EQ(0, node_read(n, "mapped"));
		/* Sizes: page counts or K/M/G byte sizes (2 MiB multiples). */
		EXPECT_EQ(0, node_reserve(n, "16M"));
		EXPECT_EQ(8, node_read(n, "reserved"));
		EXPECT_EQ(0, node_reserve(n, "4096K\n"));
		EXPECT_EQ(2, node_read(n, "reserved"));
		EXPECT_EQ(0, node_reserve(n, "12"));
		EXPECT_EQ(12, node_read(n, "reserved"));
		EXPECT_EQ(-EINVAL, node_reserve(n, "3M"));
		EXPECT_EQ(-EINVAL, node_reserve(n, "many"));
		EXPECT_EQ(-EINVAL, node_reserve(n, "-1"));
		EXPECT_EQ(-EINVAL, node_reserve(n, "\n"));
		EXPECT_EQ(12, node_read(n, "reserved"));
		EXPECT_EQ(0, node_reserve(n, "64M"));
		EXPECT_EQ((long)TEST_PAGES, node_read(n, "free"));

		info.node = n;
		ASSERT_EQ(0, ioctl(self->fd, MLTUNE_IOC_HUGEPOOL_INFO, &info));
		EXPECT_EQ(HP, info.page_size);
		EXPECT_EQ(TEST_PAGES, info.reserved);
		EXPECT_EQ(TEST_PAGES, info.free);
		EXPECT_EQ(0ULL, info.mapped);
		EXPECT_EQ(MLTUNE_HUGEPOOL_MMAP_OFFSET(n), info.mmap_offset);
	}
	EXPECT_EQ((long)HP, hp_read("page_size"));
}

/*
 * Exhausts node 0 (zeroing ~700 MiB and a last allocation that reclaims
 * and compacts before it gives up): slow under TCG, hence the timeout.
 */
/*
 * Writes to nodeN/reserved in a child: without CAP_SYS_ADMIN (-EPERM,
 * the check every store of the module makes), then as nobody (-EACCES
 * from the file mode). Returns the number of wrong answers, or 100+ when
 * the child could not drop its privileges.
 */
static int reserve_unprivileged(int node)
{
	char path[256];
	int status;
	pid_t pid;

	snprintf(path, sizeof(path), HP_SYSFS "/node%d/reserved", node);
	pid = fork();
	if (pid == 0) {
		struct __user_cap_header_struct h = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[2] = {};
		int wrong = 0;

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
		d[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		wrong += mltune_write_file(path, "1") != -EPERM;
		wrong += mltune_write_file(path, "0") != -EPERM;
		if (setgid(65534) || setuid(65534))
			_exit(102);
		wrong += mltune_write_file(path, "1") != -EACCES;
		_exit(wrong);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * nodeN/reserved takes the writer check and the NUL check of every other
 * store: an unprivileged write and "1\0 2" are refused, nothing changes.
 */
TEST_F(pool, reserve_refused_unprivileged_or_with_nul)
{
	char path[256], val[32];

	snprintf(path, sizeof(path), HP_SYSFS "/node0/reserved");
	EXPECT_EQ(0, reserve_unprivileged(0));
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "reserved"));

	EXPECT_EQ(-EINVAL, mltune_write_len(path, "1\0 2", 4));
	EXPECT_EQ(-EINVAL, mltune_write_len(path, "1\0", 2));
	EXPECT_EQ(-EINVAL, mltune_write_len(path, "\0", 1));
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "reserved"));
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "free"));

	/* The same text without the NUL still works. */
	EXPECT_EQ(0, mltune_write_file(path, "1"));
	EXPECT_EQ(1, node_read(0, "reserved"));
	snprintf(val, sizeof(val), "%lu", TEST_PAGES);
	ASSERT_EQ(0, mltune_write_file(path, val));
}

/*
 * The sum of /proc/vmstat's direct reclaim and direct compaction counters
 * (allocstall_*, compact_stall): what an allocation that had to make room
 * added.  -1 when it cannot be read.
 */
static long direct_stalls(void)
{
	char name[64];
	long v, sum = 0;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", name, &v) == 2)
		if (!strncmp(name, "allocstall_", 11) || !strcmp(name, "compact_stall"))
			sum += v;
	fclose(f);
	return sum;
}

TEST_F(pool, reservation_beyond_memory_changes_nothing)
{
	long got, stalls, added = -1;
	int try;

	/*
	 * 1 GiB cannot fit a 768 MiB node: ENOMEM at once, without reclaiming
	 * or compacting the node first (no direct stall counted), and the
	 * pool stays as it was.  (A refusal after some pages were obtained
	 * gives them back: alloc_fault_test fails each allocation in turn.)
	 * The counters are global: another task's reclaim can land in one
	 * window, not in three; the refused write stalls in every one.
	 */
	for (try = 0; try < 3 && added != 0; try++) {
		stalls = direct_stalls();
		ASSERT_LE(0, stalls);
		EXPECT_EQ(-ENOMEM, node_reserve(0, "1G"));
		added = direct_stalls() - stalls;
	}
	EXPECT_EQ(0, added);
	got = node_read(0, "reserved");
	EXPECT_EQ((long)TEST_PAGES, got);
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "free"));
	ksft_print_msg("node0 reserved %ld after asking for 512 pages\n", got);
	EXPECT_EQ(0, node_reserve(0, "32"));
}

TEST_F(pool, buffer_is_on_its_node)
{
	size_t len = 4 * HP, off;
	char *p;
	int n;

	for (n = 0; n < 2; n++) {
		if (!have_node(n))
			continue;
		p = pool_map(self->fd, n, len, MAP_SHARED);
		ASSERT_NE(MAP_FAILED, p) TH_LOG("node%d: %s", n, strerror(errno));
		EXPECT_EQ((long)(TEST_PAGES - 4), node_read(n, "free"));
		EXPECT_EQ(4, node_read(n, "mapped"));
		for (off = 0; off < len; off += 256 * 1024) {
			p[off] = 1;
			ASSERT_EQ(n, page_node(p + off)) {
				TH_LOG("offset %zu of a node%d buffer", off, n);
			}
		}
		ASSERT_EQ(0, munmap(p, len));
		EXPECT_EQ((long)TEST_PAGES, node_read(n, "free"));
	}
}

TEST_F(pool, pattern_across_2m_boundaries_and_zeroed_reuse)
{
	size_t len = 6 * HP, i, n = len / sizeof(uint64_t);
	char *c, save[8192];
	uint64_t *p;

	p = pool_map(self->fd, 0, len, MAP_SHARED | MAP_POPULATE);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0ULL, p[i]) TH_LOG("fresh buffer not zeroed at %zu", i);
	}
	for (i = 0; i < n; i++)
		p[i] = i * 0x9e3779b97f4a7c15ULL;
	/* Copies that straddle every 2 MiB boundary, out and back. */
	c = (char *)p;
	for (i = 1; i < 6; i++) {
		memcpy(save, c + i * HP - 4093, sizeof(save));
		memset(c + i * HP - 4093, 0xee, sizeof(save));
		memcpy(c + i * HP - 4093, save, sizeof(save));
	}
	for (i = 0; i < n; i++) {
		ASSERT_EQ(i * 0x9e3779b97f4a7c15ULL, p[i]) TH_LOG("word %zu", i);
	}
	/* Pages survive MADV_DONTNEED: it only drops the page tables. */
	ASSERT_EQ(0, madvise(c + HP - 8192, 3 * 4096, MADV_DONTNEED));
	for (i = 0; i < n; i++) {
		ASSERT_EQ(i * 0x9e3779b97f4a7c15ULL, p[i]) TH_LOG("word %zu", i);
	}
	ASSERT_EQ(0, munmap(p, len));

	/* The same pages come back zeroed: no data leaks between users. */
	p = pool_map(self->fd, 0, (size_t)TEST_PAGES * HP, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < TEST_PAGES * HP / sizeof(*p); i += 509) {
		ASSERT_EQ(0ULL, p[i]) TH_LOG("reused page not zeroed, word %zu", i);
	}
	ASSERT_EQ(0, munmap(p, (size_t)TEST_PAGES * HP));
}

TEST_F(pool, mapping_size_counters)
{
	long pmd0 = hp_read("pmd_mappings"), pte0 = hp_read("pte_mappings");
	long pmd, pte;
	char *p;

	ASSERT_LE(0, pmd0);
	p = pool_map(self->fd, 0, 2 * HP, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, p);
	p[0] = 1;
	p[HP + 4096] = 1;
	pmd = hp_read("pmd_mappings") - pmd0;
	pte = hp_read("pte_mappings") - pte0;
	ksft_print_msg("pmd_capable=%ld: 2 MiB entries %ld, 4 KiB entries %ld\n",
		       hp_read("pmd_capable"), pmd, pte);
	/* Each 2 MiB page is mapped whole, by one PMD or by 512 PTEs. */
	EXPECT_EQ(2 * 512, pmd * 512 + pte);
	if (hp_read("pmd_capable") != 1)
		EXPECT_EQ(0, pmd);
	ASSERT_EQ(0, munmap(p, 2 * HP));
}

TEST_F(pool, errors)
{
	struct mltune_hugepool_info info = { 0 };
	long free0 = node_read(0, "free");
	struct termios t;
	int maps0 = mapped_in_maps();
	void *p;

	/* More than is free: ENOMEM, nothing mapped, nothing taken. */
	p = mmap(NULL, (TEST_PAGES + 1) * HP, PROT_READ | PROT_WRITE,
		 MAP_SHARED, self->fd, MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(free0, node_read(0, "free"));
	EXPECT_EQ(maps0, mapped_in_maps());

	/* Bad node, unaligned or zero length, bad offset, MAP_PRIVATE. */
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, HP, PROT_READ, MAP_SHARED, self->fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(1000)));
	EXPECT_EQ(EINVAL, errno);
	if (!have_node(2)) {
		errno = 0;
		EXPECT_EQ(MAP_FAILED, mmap(NULL, HP, PROT_READ, MAP_SHARED,
					   self->fd,
					   MLTUNE_HUGEPOOL_MMAP_OFFSET(2)));
		EXPECT_EQ(EINVAL, errno);
	}
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(0)));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, HP + 4096, PROT_READ, MAP_SHARED,
				   self->fd, MLTUNE_HUGEPOOL_MMAP_OFFSET(0)));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 0, PROT_READ, MAP_SHARED, self->fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(0)));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, HP, PROT_READ, MAP_SHARED, self->fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(0) + HP));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(MAP_FAILED, mmap(NULL, HP, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE, self->fd,
				   MLTUNE_HUGEPOOL_MMAP_OFFSET(0)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(free0, node_read(0, "free"));
	EXPECT_EQ(maps0, mapped_in_maps());

	/* ioctl: unknown numbers of ours EINVAL, foreign ones ENOTTY. */
	EXPECT_EQ(-1, ioctl(self->fd, _IO(MLTUNE_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(MLTUNE_IOC_MAGIC, 0x01, int), &info));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, TCGETS, &t));
	EXPECT_EQ(ENOTTY, errno);
	info.node = 1000;
	EXPECT_EQ(-1, ioctl(self->fd, MLTUNE_IOC_HUGEPOOL_INFO, &info));
	EXPECT_EQ(EINVAL, errno);
	info.node = 0;
	info.flags = 1;
	EXPECT_EQ(-1, ioctl(self->fd, MLTUNE_IOC_HUGEPOOL_INFO, &info));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, MLTUNE_IOC_HUGEPOOL_INFO, NULL));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(pool, shrink_keeps_mapped_pages)
{
	char *p = pool_map(self->fd, 0, 4 * HP, MAP_SHARED);

	ASSERT_NE(MAP_FAILED, p);
	/* Mapped pages cannot go: EBUSY, and nothing is freed. */
	EXPECT_EQ(-EBUSY, node_reserve(0, "0"));
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "reserved"));
	EXPECT_EQ((long)TEST_PAGES - 4, node_read(0, "free"));
	/* Down to the mapped pages is fine. */
	EXPECT_EQ(0, node_reserve(0, "4"));
	EXPECT_EQ(4, node_read(0, "reserved"));
	EXPECT_EQ(0, node_read(0, "free"));
	ASSERT_EQ(0, munmap(p, 4 * HP));
	EXPECT_EQ(4, node_read(0, "free"));
	EXPECT_EQ(0, node_reserve(0, "64M"));
}

TEST_F(pool, fork_does_not_inherit)
{
	int status;
	pid_t pid;
	char *p = pool_map(self->fd, 0, HP, MAP_SHARED);

	ASSERT_NE(MAP_FAILED, p);
	p[0] = 42;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		_exit(*(volatile char *)p == 42 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		TH_LOG("child status %#x: mapping was inherited", status);
	EXPECT_EQ(42, p[0]);
	ASSERT_EQ(0, munmap(p, HP));
}

TEST_F(pool, split_and_move_keep_buffer_alive)
{
	char *p = pool_map(self->fd, 0, 4 * HP, MAP_SHARED), *q;

	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0x5a, 4 * HP);
	/* Punch out the middle: the remaining parts keep the buffer. */
	ASSERT_EQ(0, munmap(p + HP + 4096, HP));
	EXPECT_EQ(4, node_read(0, "mapped"));
	q = mremap(p + 3 * HP, HP, HP, MREMAP_MAYMOVE | MREMAP_FIXED,
		   p + HP + 4096);
	ASSERT_NE(MAP_FAILED, q);
	EXPECT_EQ(0x5a, q[HP - 1]);
	EXPECT_EQ(0x5a, p[2 * HP + 4096]);
	/* Growing is refused (VM_DONTEXPAND). */
	EXPECT_EQ(MAP_FAILED, mremap(p, HP + 4096, 2 * HP, 0));
	ASSERT_EQ(0, munmap(p, HP + 4096));
	EXPECT_EQ(4, node_read(0, "mapped"));
	ASSERT_EQ(0, munmap(p, 4 * HP));
	EXPECT_EQ(0, node_read(0, "mapped"));
}

/*
 * A pipe holding a page reference past munmap: the page leaves the pool.
 * Returns the first byte read back through the pipe, or -1.
 */
static int __attribute__((noinline)) splice_then_unmap(int fd, long *orphaned)
{
	char *p = pool_map(fd, 0, 2 * HP, MAP_SHARED);
	struct iovec iov;
	char buf[4096];
	int pfd[2], ret = -1;

	if (p == MAP_FAILED || pipe(pfd))
		return -1;
	memset(p, 0x77, 2 * HP);
	iov.iov_base = p + HP;
	iov.iov_len = 4096;
	if (vmsplice(pfd[1], &iov, 1, 0) != 4096)
		goto out;
	munmap(p, 2 * HP);
	p = MAP_FAILED;
	*orphaned = hp_read("orphaned");
	if (read(pfd[0], buf, sizeof(buf)) == 4096 && buf[4095] == 0x77)
		ret = buf[0];
out:
	if (p != MAP_FAILED)
		munmap(p, 2 * HP);
	close(pfd[0]);
	close(pfd[1]);
	return ret;
}

TEST_F(pool, referenced_after_unmap_is_not_reused)
{
	long orphaned0 = hp_read("orphaned"), orphaned = -1;

	EXPECT_EQ(0x77, splice_then_unmap(self->fd, &orphaned));
	EXPECT_EQ(orphaned0 + 1, orphaned);
	EXPECT_EQ((long)TEST_PAGES - 1, node_read(0, "reserved"));
	EXPECT_EQ((long)TEST_PAGES - 1, node_read(0, "free"));
	EXPECT_EQ(0, node_reserve(0, "64M"));
}

static int ramfs_file_refused(struct __test_metadata *_metadata, int ring)
{
	const char *dir = "/tmp/mltune-ramfs";
	struct iovec iov;
	int fd, ret, err;
	void *p;

	mkdir(dir, 0700);
	if (mount("none", dir, "ramfs", 0, NULL))
		return 0;
	fd = open("/tmp/mltune-ramfs/f", O_RDWR | O_CREAT, 0600);
	ret = fd >= 0 ? ftruncate(fd, 4096) : -1;
	p = ret ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);
	err = 0;
	if (p != MAP_FAILED) {
		iov.iov_base = p;
		iov.iov_len = 4096;
		if (syscall(__NR_io_uring_register, ring,
			    IORING_REGISTER_BUFFERS, &iov, 1))
			err = errno;
		else
			syscall(__NR_io_uring_register, ring,
				IORING_UNREGISTER_BUFFERS, NULL, 0);
		munmap(p, 4096);
	}
	if (fd >= 0)
		close(fd);
	umount(dir);
	rmdir(dir);
	return err == EOPNOTSUPP;
}

TEST_F(pool, io_uring_fixed_buffers)
{
	struct io_uring_params params = { 0 };
	long orphaned0 = hp_read("orphaned");
	size_t len = 4 * HP;
	struct iovec iov;
	int ring, ret;
	char *p;

	p = pool_map(self->fd, have_node(1) ? 1 : 0, len, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, p);
	ring = syscall(__NR_io_uring_setup, 4, &params);
	if (ring < 0) {
		munmap(p, len);
		SKIP(return, "io_uring_setup: %s", strerror(errno));
	}
	iov.iov_base = p;
	iov.iov_len = len;
	ret = syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS,
		      &iov, 1);
	if (ret && errno == EOPNOTSUPP && ramfs_file_refused(_metadata, ring)) {
		close(ring);
		munmap(p, len);
		/* io_uring before 6.5 takes only anon, shmem and hugetlbfs. */
		SKIP(return, "this kernel's io_uring refuses every non-shmem file mapping");
	}
	ASSERT_EQ(0, ret) TH_LOG("IORING_REGISTER_BUFFERS: %s", strerror(errno));
	EXPECT_EQ(0, syscall(__NR_io_uring_register, ring,
			     IORING_UNREGISTER_BUFFERS, NULL, 0));
	close(ring);
	ASSERT_EQ(0, munmap(p, len));
	EXPECT_EQ(orphaned0, hp_read("orphaned"));
}

/* O_DIRECT from a loop device over a tmpfs file, into a pool buffer. */
TEST_F(pool, o_direct_read_target)
{
	size_t len = 3 * HP, i;
	char dev[32], *p, *src;
	int ctl, nr, back, bdev;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		SKIP(return, "no /dev/loop-control (loop module not loaded)");
	nr = ioctl(ctl, LOOP_CTL_GET_FREE);
	ASSERT_LE(0, nr);
	snprintf(dev, sizeof(dev), "/dev/loop%d", nr);
	back = open("/tmp/mltune-hugepool.img", O_RDWR | O_CREAT | O_TRUNC,
		    0600);
	ASSERT_LE(0, back);
	src = malloc(len);
	ASSERT_NE(NULL, src);
	for (i = 0; i < len; i++)
		src[i] = (char)(i * 7 + i / 4096);
	ASSERT_EQ((ssize_t)len, write(back, src, len));
	bdev = open(dev, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, bdev) TH_LOG("open %s: %s", dev, strerror(errno));
	ASSERT_EQ(0, ioctl(bdev, LOOP_SET_FD, back));
	close(bdev);
	bdev = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, bdev);

	p = pool_map(self->fd, 0, len + HP, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, p);
	/* Target straddles two 2 MiB boundaries, 4 KiB aligned. */
	EXPECT_EQ((ssize_t)len, pread(bdev, p + HP - 8192, len, 0))
		TH_LOG("O_DIRECT pread: %s", strerror(errno));
	EXPECT_EQ(0, memcmp(p + HP - 8192, src, len));
	ASSERT_EQ(0, munmap(p, len + HP));

	close(bdev);
	bdev = open(dev, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, bdev);
	EXPECT_EQ(0, ioctl(bdev, LOOP_CLR_FD, 0));
	close(bdev);
	close(back);
	close(ctl);
	unlink("/tmp/mltune-hugepool.img");
	free(src);
	EXPECT_EQ((long)TEST_PAGES, node_read(0, "free"));
}

TEST_F(pool, hundred_cycles_leak_nothing)
{
	long orphaned0 = hp_read("orphaned");
	int i, n, fd;
	char *p;

	for (i = 0; i < 100; i++) {
		n = have_node(1) ? i & 1 : 0;
		fd = open(DEV, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd);
		p = pool_map(fd, n, HP, MAP_SHARED);
		ASSERT_NE(MAP_FAILED, p) TH_LOG("cycle %d: %s", i, strerror(errno));
		/* Close first: the mapping alone keeps the buffer. */
		close(fd);
		p[i * 4096] = (char)i;
		/* Every third cycle splits the VMA in three. */
		if (i % 3 == 0)
			ASSERT_EQ(0, munmap(p + 8192, 4096));
		ASSERT_EQ(0, munmap(p, HP));
		ASSERT_EQ((long)TEST_PAGES, node_read(n, "free"))
			TH_LOG("cycle %d", i);
	}
	EXPECT_EQ(orphaned0, hp_read("orphaned"));
	EXPECT_EQ(0, mapped_in_maps());
}

/*
 * ---- Per-user accounting and quota (hugepool/users, hugepool/user_quota) ----
 *
 * Buffers are charged to the real UID of the task that maps them; a
 * non-root user is limited by user_quota (EDQUOT beyond it), root
 * (CAP_IPC_LOCK) is accounted but not limited. Unless a quota was set, it
 * is half the pages reserved on all nodes (rounded down, at least 1).
 * The unprivileged side runs in a child that becomes QUOTA_UID and maps
 * through the fixture's fd, as a member of the device's group would after
 * open().
 */
#define QUOTA_UID	4242u
/* Nodes looked at for the pool's total (sysfs has node<N> for each). */
#define MAX_NODES	64
#define QUOTA_PARAM	"/sys/module/mltune/parameters/hugepool_user_quota"

/* Pages charged to @uid in hugepool/users; 0 without a line, -1 on error. */
static long user_pages(unsigned int uid)
{
	char buf[4096], *line, *save = NULL;
	unsigned int u;
	long pages;

	if (mltune_read_file(HP_SYSFS "/users", buf, sizeof(buf)) < 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%u %ld", &u, &pages) != 2)
			return -1;
		if (u == uid)
			return pages;
	}
	return 0;
}

static int set_quota(const char *val)
{
	return mltune_write_file(HP_SYSFS "/user_quota", val);
}

/* The quota as a test found it: "auto" again if it followed the rule. */
struct saved_quota {
	long pages;
	long is_auto;	/* user_quota_auto: 1, 0, or -1 when missing */
};

static struct saved_quota quota_save(void)
{
	return (struct saved_quota){
		.pages = hp_read("user_quota"),
		.is_auto = hp_read("user_quota_auto"),
	};
}

static int quota_restore(struct saved_quota q)
{
	char val[32];

	if (q.is_auto == 1)
		return set_quota("auto");
	snprintf(val, sizeof(val), "%ld", q.pages);
	return set_quota(val);
}

/* Pages reserved on all nodes together. */
static long pool_total(void)
{
	long total = 0, r;
	int n;

	for (n = 0; n < MAX_NODES; n++) {
		r = node_read(n, "reserved");
		if (r > 0)
			total += r;
	}
	return total;
}

/* The default rule: half the reserved pages, rounded down, at least 1. */
static long quota_rule(long total)
{
	return total / 2 > 1 ? total / 2 : 1;
}

/* Whether the module was loaded with a hugepool_user_quota= of its own. */
static bool quota_param_set(char *val, size_t len)
{
	if (mltune_read_file(QUOTA_PARAM, val, len) <= 0)
		return false;
	val[strcspn(val, "\n")] = '\0';
	return *val && strcmp(val, "(null)") && strcmp(val, "auto");
}

/*
 * Run @fn(@fd) in a child that is QUOTA_UID without any capability.
 * Returns what fn returned (0 = all good, else the number of the check that
 * failed), or 100+ when the child could not drop its privileges.
 */
static int as_user(int (*fn)(int fd), int fd)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(QUOTA_UID, QUOTA_UID, QUOTA_UID))
			_exit(100);
		if (setresuid(QUOTA_UID, QUOTA_UID, QUOTA_UID))
			_exit(101);
		_exit(fn(fd));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

/* The user's mappings are charged to it while they live. */
static int user_maps_two_pages(int fd)
{
	char *p = pool_map(fd, 0, 2 * HP, MAP_SHARED);

	if (p == MAP_FAILED)
		return 1;
	if (user_pages(QUOTA_UID) != 2)
		return 2;
	p[0] = 1;
	if (munmap(p, 2 * HP))
		return 3;
	if (user_pages(QUOTA_UID) != 0)
		return 4;
	/* Left mapped at exit: the exit's unmap uncharges it. */
	return pool_map(fd, 0, HP, MAP_SHARED) == MAP_FAILED ? 5 : 0;
}

TEST_F(pool, users_account_each_mapping)
{
	int n1 = have_node(1);
	char *a, *b = NULL;
	char buf[4096];

	EXPECT_EQ(0, user_pages(0));
	a = pool_map(self->fd, 0, 3 * HP, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, a);
	EXPECT_EQ(3, user_pages(0));
	if (n1) {
		b = pool_map(self->fd, 1, 2 * HP, MAP_SHARED);
		ASSERT_NE(MAP_FAILED, b);
		/* One account per UID, across nodes. */
		EXPECT_EQ(5, user_pages(0));
	}
	/* Pieces of a buffer keep the whole buffer charged. */
	ASSERT_EQ(0, munmap(a, HP));
	EXPECT_EQ(n1 ? 5 : 3, user_pages(0));

	EXPECT_EQ(0, as_user(user_maps_two_pages, self->fd));
	EXPECT_EQ(0, user_pages(QUOTA_UID));

	ASSERT_EQ(0, munmap(a + HP, 2 * HP));
	if (b)
		ASSERT_EQ(0, munmap(b, 2 * HP));
	EXPECT_EQ(0, user_pages(0));
	ASSERT_LE(0, mltune_read_file(HP_SYSFS "/users", buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
}

/* Quota 4 pages (8M): four map, a fifth does not, on any node. */
static int user_hits_quota(int fd)
{
	char *p = pool_map(fd, 0, 4 * HP, MAP_SHARED), *q;
	long free0 = node_read(0, "free");

	if (p == MAP_FAILED)
		return 1;
	q = pool_map(fd, 0, HP, MAP_SHARED);
	if (q != MAP_FAILED || errno != EDQUOT)
		return 2;
	if (have_node(1)) {
		q = pool_map(fd, 1, HP, MAP_SHARED);
		if (q != MAP_FAILED || errno != EDQUOT)
			return 3;
	}
	/* The refusals took no page and charged nothing. */
	if (node_read(0, "free") != free0 || user_pages(QUOTA_UID) != 4)
		return 4;
	if (munmap(p, 4 * HP))
		return 5;
	/* Larger than the quota in one go. */
	p = pool_map(fd, 0, 5 * HP, MAP_SHARED);
	if (p != MAP_FAILED || errno != EDQUOT)
		return 6;
	p = pool_map(fd, 0, 4 * HP, MAP_SHARED);
	if (p == MAP_FAILED)
		return 7;
	return munmap(p, 4 * HP) ? 8 : 0;
}

/* No quota: the same user maps more than 4 pages. */
static int user_maps_six_pages(int fd)
{
	char *p = pool_map(fd, 0, 6 * HP, MAP_SHARED);

	if (p == MAP_FAILED)
		return 1;
	return user_pages(QUOTA_UID) == 6 ? 0 : 2;
}

TEST_F(pool, user_quota_refuses_with_edquot)
{
	struct saved_quota saved = quota_save();
	char *p;

	ASSERT_LE(0, saved.pages);
	ASSERT_EQ(0, set_quota("8M"));
	EXPECT_EQ(4, hp_read("user_quota"));
	EXPECT_EQ(0, as_user(user_hits_quota, self->fd));
	EXPECT_EQ(0, user_pages(QUOTA_UID));

	/* Root (CAP_IPC_LOCK) is accounted but not limited. */
	p = pool_map(self->fd, 0, 6 * HP, MAP_SHARED);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(6, user_pages(0));
	ASSERT_EQ(0, munmap(p, 6 * HP));

	/* A lower quota binds new mappings only; 0 lifts it. */
	ASSERT_EQ(0, set_quota("0"));
	EXPECT_EQ(0, hp_read("user_quota"));
	EXPECT_EQ(0, as_user(user_maps_six_pages, self->fd));
	EXPECT_EQ(0, user_pages(QUOTA_UID));

	ASSERT_EQ(0, quota_restore(saved));
}

/* Set by the parent before as_user(): the quota the user should meet. */
static long want_quota;

/*
 * The whole pool, node by node: the quota stops the user with EDQUOT, the
 * pages up to want_quota map, and then not one more.
 */
static int user_cannot_take_whole_pool(int fd)
{
	long got = 0, free, take;
	int n, refused = 0;

	for (n = 0; n < MAX_NODES; n++) {
		free = node_read(n, "free");
		if (free <= 0)
			continue;
		if (pool_map(fd, n, free * HP, MAP_SHARED) != MAP_FAILED) {
			got += free;
			continue;
		}
		if (errno != EDQUOT)
			return 1;
		refused++;
		/* What the quota leaves of this node maps. */
		take = want_quota - got;
		if (take > 0) {
			if (take >= free ||
			    pool_map(fd, n, take * HP, MAP_SHARED) == MAP_FAILED)
				return 2;
			got += take;
		}
	}
	/* No refusal: this user mapped every reserved page. */
	if (!refused)
		return 3;
	if (got != want_quota || user_pages(QUOTA_UID) != want_quota)
		return 4;
	for (n = 0; n < MAX_NODES; n++) {
		if (node_read(n, "free") <= 0)
			continue;
		if (pool_map(fd, n, HP, MAP_SHARED) != MAP_FAILED || errno != EDQUOT)
			return 5;
		break;
	}
	/* The exit unmaps and uncharges everything. */
	return 0;
}

/* The user maps every free page of every node. */
static int user_maps_whole_pool(int fd)
{
	long got = 0, free;
	int n;

	for (n = 0; n < MAX_NODES; n++) {
		free = node_read(n, "free");
		if (free <= 0)
			continue;
		if (pool_map(fd, n, free * HP, MAP_SHARED) == MAP_FAILED)
			return 1;
		got += free;
	}
	return got && user_pages(QUOTA_UID) == got ? 0 : 2;
}

/*
 * Regression: the quota used to default to none, so one member of the
 * device's group could pin the whole pool.
 */
TEST_F(pool, default_quota_is_half_the_pool)
{
	char param[64];

	if (quota_param_set(param, sizeof(param)))
		SKIP(return, "module loaded with hugepool_user_quota=%s", param);
	want_quota = quota_rule(pool_total());
	EXPECT_EQ(1, hp_read("user_quota_auto"));
	EXPECT_EQ(want_quota, hp_read("user_quota"));
	EXPECT_EQ(0, as_user(user_cannot_take_whole_pool, self->fd));
	EXPECT_EQ(0, user_pages(QUOTA_UID));
}

TEST_F(pool, default_quota_follows_the_reservation)
{
	char param[64], val[32];
	int n;

	if (quota_param_set(param, sizeof(param)))
		SKIP(return, "module loaded with hugepool_user_quota=%s", param);
	ASSERT_EQ(1, hp_read("user_quota_auto"));
	ASSERT_EQ(0, node_reserve(0, "10"));
	EXPECT_EQ(quota_rule(pool_total()), hp_read("user_quota"));
	for (n = 1; n < MAX_NODES; n++)
		if (have_node(n))
			ASSERT_EQ(0, node_reserve(n, "0"));
	/* Odd totals round down... */
	ASSERT_EQ(0, node_reserve(0, "5"));
	EXPECT_EQ(2, hp_read("user_quota"));
	want_quota = 2;
	EXPECT_EQ(0, as_user(user_cannot_take_whole_pool, self->fd));
	/* ...but never to 0, which would read as "no limit". */
	ASSERT_EQ(0, node_reserve(0, "1"));
	EXPECT_EQ(1, hp_read("user_quota"));
	ASSERT_EQ(0, node_reserve(0, "0"));
	EXPECT_EQ(1, hp_read("user_quota"));
	EXPECT_EQ(1, hp_read("user_quota_auto"));

	snprintf(val, sizeof(val), "%lu", TEST_PAGES);
	for (n = 0; n < 2; n++)
		if (have_node(n))
			ASSERT_EQ(0, node_reserve(n, val));
	EXPECT_EQ(quota_rule(pool_total()), hp_read("user_quota"));
}

TEST_F(pool, set_quota_overrides_the_rule)
{
	struct saved_quota saved = quota_save();
	char val[32];

	ASSERT_LE(0, saved.pages);
	ASSERT_EQ(0, set_quota("8M"));
	EXPECT_EQ(4, hp_read("user_quota"));
	EXPECT_EQ(0, hp_read("user_quota_auto"));
	/* A set quota does not follow the reservation. */
	ASSERT_EQ(0, node_reserve(0, "10"));
	EXPECT_EQ(4, hp_read("user_quota"));
	snprintf(val, sizeof(val), "%lu", TEST_PAGES);
	ASSERT_EQ(0, node_reserve(0, val));

	/* "0" sets no limit: the only way to it. */
	ASSERT_EQ(0, set_quota("0"));
	EXPECT_EQ(0, hp_read("user_quota"));
	EXPECT_EQ(0, hp_read("user_quota_auto"));
	EXPECT_EQ(0, as_user(user_maps_whole_pool, self->fd));
	EXPECT_EQ(0, user_pages(QUOTA_UID));

	/* "auto" goes back to the rule; nothing else that looks like it. */
	ASSERT_EQ(0, set_quota("auto\n"));
	EXPECT_EQ(1, hp_read("user_quota_auto"));
	EXPECT_EQ(quota_rule(pool_total()), hp_read("user_quota"));
	ASSERT_EQ(0, set_quota("6"));
	EXPECT_EQ(-EINVAL, set_quota("Auto"));
	EXPECT_EQ(-EINVAL, set_quota("automatic"));
	EXPECT_EQ(-EINVAL, set_quota("auto 4"));
	EXPECT_EQ(-EINVAL, mltune_write_len(HP_SYSFS "/user_quota", "auto\0", 5));
	EXPECT_EQ(6, hp_read("user_quota"));
	EXPECT_EQ(0, hp_read("user_quota_auto"));

	ASSERT_EQ(0, quota_restore(saved));
}

/* Writes to user_quota without CAP_SYS_ADMIN; returns the wrong answers. */
static int quota_unprivileged(void)
{
	int status, wrong;
	pid_t pid = fork();

	if (pid == 0) {
		struct __user_cap_header_struct h = {
			.version = _LINUX_CAPABILITY_VERSION_3,
		};
		struct __user_cap_data_struct d[2] = {};

		if (syscall(SYS_capget, &h, d))
			_exit(100);
		d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
		if (syscall(SYS_capset, &h, d))
			_exit(101);
		wrong = set_quota("1") != -EPERM;
		if (setresgid(QUOTA_UID, QUOTA_UID, QUOTA_UID) ||
		    setresuid(QUOTA_UID, QUOTA_UID, QUOTA_UID))
			_exit(102);
		wrong += set_quota("1") != -EACCES;
		_exit(wrong);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(pool, user_quota_store_validates_first)
{
	struct saved_quota saved = quota_save();

	ASSERT_LE(0, saved.pages);
	ASSERT_EQ(0, set_quota("16M"));
	EXPECT_EQ(8, hp_read("user_quota"));
	EXPECT_EQ(-EINVAL, set_quota("many"));
	EXPECT_EQ(-EINVAL, set_quota("3M"));
	EXPECT_EQ(-EINVAL, set_quota("-1"));
	EXPECT_EQ(-EINVAL, set_quota("\n"));
	EXPECT_EQ(-EINVAL, mltune_write_len(HP_SYSFS "/user_quota", "1\0 2", 4));
	EXPECT_EQ(0, quota_unprivileged());
	EXPECT_EQ(8, hp_read("user_quota"));
	EXPECT_EQ(0, set_quota("2\n"));
	EXPECT_EQ(2, hp_read("user_quota"));

	ASSERT_EQ(0, quota_restore(saved));
}

int main(int argc, char **argv)
{
	long saved[2];
	char val[32];
	int n, ret;

	mltune_require_module();
	if (access(HP_SYSFS, F_OK))
		ksft_exit_skip("no %s\n", HP_SYSFS);
	for (n = 0; n < 2; n++)
		saved[n] = node_read(n, "reserved");
	ret = test_harness_run(argc, argv);
	for (n = 0; n < 2; n++) {
		if (saved[n] < 0)
			continue;
		snprintf(val, sizeof(val), "%ld", saved[n]);
		if (node_reserve(n, val))
			ksft_print_msg("could not restore node%d/reserved\n", n);
	}
	return ret;
}
