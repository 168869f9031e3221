// SPDX-License-Identifier: GPL-2.0
/*
 * Wake-up latency of a periodic "feeder" task: the calling thread sleeps to
 * an absolute CLOCK_MONOTONIC deadline every PERIOD us (clock_nanosleep
 * TIMER_ABSTIME) and records how late it woke (actual - intended), for
 * SECONDS.  Missed periods are skipped and counted once, at their lateness.
 * The load is not created here: bench.sh starts the busy loops as separate
 * processes, outside the feeder cgroup, and starts this program (through
 * `mltunectl feeder run` when a mechanism is on).
 *
 *   feeder_lat [SECONDS [PERIOD_US]]        (default 5 s, 1000 us)
 *
 * Output, one line:  samples=N p50_us=X p99_us=X max_us=X cpus=LIST
 * (cpus: the CPUs it woke on, as a bitmask over the first 64 CPUs in hex).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static double pct_us(const int64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n);

	if (n == 0)
		return -1;
	if (i >= n)
		i = n - 1;
	return (double)v[i] / 1e3;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	int64_t period = (argc > 2 ? atoll(argv[2]) : 1000) * 1000LL;
	size_t cap, n = 0;
	uint64_t cpus = 0;
	int64_t *lat, next, end;

	if (seconds <= 0 || period <= 0) {
		fprintf(stderr, "usage: feeder_lat [SECONDS [PERIOD_US]]\n");
		return 2;
	}
	cap = (size_t)(seconds * 1e9 / (double)period) + 2;
	lat = calloc(cap, sizeof(*lat));
	if (!lat)
		return 1;
	next = now_ns() + period;
	end = next + (int64_t)(seconds * 1e9);
	while (next < end && n < cap) {
		struct timespec ts = { .tv_sec = next / 1000000000LL,
				       .tv_nsec = next % 1000000000LL };
		int cpu;

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		lat[n++] = now_ns() - next;
		cpu = sched_getcpu();
		if (cpu >= 0 && cpu < 64)
			cpus |= 1ULL << cpu;
		next += period;
		while (next < now_ns())
			next += period;
	}
	qsort(lat, n, sizeof(*lat), cmp64);
	printf("samples=%zu p50_us=%.1f p99_us=%.1f max_us=%.1f cpus=%llx\n", n,
	       pct_us(lat, n, 0.50), pct_us(lat, n, 0.99), pct_us(lat, n, 1.0),
	       (unsigned long long)cpus);
	free(lat);
	return 0;
}
