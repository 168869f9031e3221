// SPDX-License-Identifier: GPL-2.0
/*
 * Huge-page pool benchmark, one process, side by side (run it in the guest
 * through bench/hugepool/run.sh).
 *
 * Obtain: time to get SIZE bytes of pinned memory and touch every 4 KiB:
 *   pool        mmap() of /dev/mltune, SIZE/2 from node 0 and SIZE/2 from
 *               node 1 (both pools reserved beforehand, not timed)
 *   malloc+mlock            malloc(), mlock() (THP as the system has it)
 *   malloc+mlock 4K         the same with MADV_NOHUGEPAGE first
 *   MAP_HUGETLB+mlock       after nr_hugepages was raised (not timed)
 * Release: the matching munmap()/free() (the pool zeroes pages here).
 * memcpy: bandwidth copying SIZE/4 inside a pool buffer vs inside a
 * 4 KiB-page buffer.
 *
 * Prints medians over ITERS runs and the ratios; exit 0 unless a method
 * fails outright.  Usage: hugepool_bench [SIZE_MIB [ITERS]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/mltune.h>

#define MIB		(1UL << 20)
#define HP		MLTUNE_HUGEPOOL_PAGE_SIZE
#define MAX_ITERS	32

static size_t size;
static int iters;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -errno;
}

static void touch(char *p, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += 4096)
		p[off] = 1;
}

struct result {
	const char *name;
	double obtain, release;
	int ok;
};

/* ---- methods: obtain fills *p (and *p2 for the pool), release undoes ---- */

static int pool_fd = -1;

static int pool_obtain(char **p, char **p2)
{
	size_t half = size / 2;

	*p = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd,
		  MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	*p2 = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd,
		   MLTUNE_HUGEPOOL_MMAP_OFFSET(1));
	if (*p == MAP_FAILED || *p2 == MAP_FAILED)
		return -errno;
	touch(*p, half);
	touch(*p2, half);
	return 0;
}

static void pool_release(char *p, char *p2)
{
	munmap(p, size / 2);
	munmap(p2, size / 2);
}

static int malloc_obtain(char **p, int nohuge)
{
	*p = malloc(size);
	if (!*p)
		return -ENOMEM;
	if (nohuge)
		madvise((void *)((uintptr_t)*p & ~4095UL), size,
			MADV_NOHUGEPAGE);
	if (mlock(*p, size))
		return -errno;
	touch(*p, size);
	return 0;
}

static void malloc_release(char *p)
{
	munlock(p, size);
	free(p);
}

static int hugetlb_obtain(char **p)
{
	*p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (*p == MAP_FAILED)
		return -errno;
	if (mlock(*p, size))
		return -errno;
	touch(*p, size);
	return 0;
}

static void run(struct result *r, int method)
{
	double ob[MAX_ITERS], rel[MAX_ITERS], t;
	char *p = NULL, *p2 = NULL;
	int i, err = 0;

	r->ok = 0;
	for (i = 0; i < iters; i++) {
		t = now();
		switch (method) {
		case 0:
			err = pool_obtain(&p, &p2);
			break;
		case 1:
		case 2:
			err = malloc_obtain(&p, method == 2);
			break;
		case 3:
			err = hugetlb_obtain(&p);
			break;
		}
		ob[i] = now() - t;
		if (err) {
			printf("# %s: %s\n", r->name, strerror(-err));
			return;
		}
		t = now();
		if (method == 0)
			pool_release(p, p2);
		else if (method == 3)
			munmap(p, size);
		else
			malloc_release(p);
		rel[i] = now() - t;
	}
	r->obtain = median(ob, iters);
	r->release = median(rel, iters);
	r->ok = 1;
}

static double copy_bw(char *buf, size_t len)
{
	double v[MAX_ITERS], t;
	size_t n = len / 2;
	int i;

	memset(buf, 0x33, len);
	for (i = 0; i < iters; i++) {
		t = now();
		memcpy(buf + n, buf, n);
		memcpy(buf, buf + n, n);
		v[i] = 2.0 * n / (now() - t) / 1e9;
	}
	return median(v, iters);
}

int main(int argc, char **argv)
{
	struct result r[4] = {
		{ .name = "pool (2 nodes)" },
		{ .name = "malloc+mlock" },
		{ .name = "malloc+mlock 4K" },
		{ .name = "MAP_HUGETLB+mlock" },
	};
	char val[32], *pool_buf, *small;
	double t_reserve, bw_pool = 0, bw_4k = 0;
	int i;

	size = (argc > 1 ? strtoul(argv[1], NULL, 0) : 512) * MIB;
	iters = argc > 2 ? atoi(argv[2]) : 5;
	if (size < 2 * HP || size % (2 * HP) || iters < 1 || iters > MAX_ITERS) {
		fprintf(stderr, "usage: %s [SIZE_MIB (multiple of 4)] [ITERS <= %d]\n",
			argv[0], MAX_ITERS);
		return 2;
	}
	printf("# hugepool bench: %zu MiB, %d iterations, medians\n",
	       size / MIB, iters);

	/* Pool: reserve SIZE/2 per node up front (the boot-time cost). */
	snprintf(val, sizeof(val), "%zuM", size / 2 / MIB);
	t_reserve = now();
	if (write_str("/sys/kernel/mltune/hugepool/node0/reserved", val) ||
	    write_str("/sys/kernel/mltune/hugepool/node1/reserved", val)) {
		fprintf(stderr, "reserving %s per node failed\n", val);
		return 1;
	}
	t_reserve = now() - t_reserve;
	pool_fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
	if (pool_fd < 0) {
		perror("/dev/mltune");
		return 1;
	}
	run(&r[0], 0);
	/* memcpy inside one pool buffer (PMD or 4 KiB PTEs, see sysfs). */
	pool_buf = mmap(NULL, size / 2, PROT_READ | PROT_WRITE, MAP_SHARED,
			pool_fd, MLTUNE_HUGEPOOL_MMAP_OFFSET(0));
	if (pool_buf != MAP_FAILED) {
		bw_pool = copy_bw(pool_buf, size / 2);
		munmap(pool_buf, size / 2);
	}
	close(pool_fd);
	write_str("/sys/kernel/mltune/hugepool/node0/reserved", "0");
	write_str("/sys/kernel/mltune/hugepool/node1/reserved", "0");

	run(&r[1], 1);
	run(&r[2], 2);
	small = malloc(size / 2);
	if (small) {
		madvise((void *)((uintptr_t)small & ~4095UL), size / 2,
			MADV_NOHUGEPAGE);
		bw_4k = copy_bw(small, size / 2);
		free(small);
	}

	snprintf(val, sizeof(val), "%zu", (size_t)(size / HP));
	if (write_str("/proc/sys/vm/nr_hugepages", val))
		printf("# nr_hugepages: %s\n", strerror(errno));
	run(&r[3], 3);
	write_str("/proc/sys/vm/nr_hugepages", "0");

	printf("# pool reservation (2 x %zu MiB, once): %.1f ms\n",
	       size / 2 / MIB, t_reserve * 1e3);
	printf("%-20s %12s %12s\n", "method", "obtain_ms", "release_ms");
	for (i = 0; i < 4; i++) {
		if (r[i].ok)
			printf("%-20s %12.2f %12.2f\n", r[i].name,
			       r[i].obtain * 1e3, r[i].release * 1e3);
		else
			printf("%-20s %12s %12s\n", r[i].name, "failed", "-");
	}
	printf("memcpy GB/s: pool %.2f, 4K pages %.2f, ratio %.2f\n", bw_pool,
	       bw_4k, bw_4k > 0 ? bw_pool / bw_4k : 0);
	if (!r[0].ok)
		return 1;
	for (i = 1; i < 4; i++)
		if (r[i].ok)
			printf("obtain speedup vs %s: %.1fx\n", r[i].name,
			       r[i].obtain / r[0].obtain);
	if (r[1].ok)
		printf("RESULT pool_vs_malloc_mlock=%.1fx target=5x %s\n",
		       r[1].obtain / r[0].obtain,
		       r[1].obtain / r[0].obtain >= 5 ? "met" : "missed");
	return 0;
}
