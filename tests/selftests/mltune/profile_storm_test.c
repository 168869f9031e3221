// SPDX-License-Identifier: GPL-2.0
/*
 * Switch storm: 8 writer threads x 2000 switches among 3 profiles while
 * reader threads read the state files. At every quiescent point (all
 * writers parked on a barrier) every knob must equal exactly one profile,
 * the one /sys/kernel/mltune/profile names, and generation must have
 * counted every switch. MLTUNE_STORM_SWITCHES overrides the per-thread
 * count; on a slow guest the storm stops at the first quiescent point
 * after BUDGET_S seconds and says so. Slab (after dropping caches) must
 * not grow by SLAB_TOLERANCE_KB over the storm, or, when it did, by half
 * that over a second storm: no per-switch leak.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "profile_util.h"
#include "../kselftest_harness.h"

#define WRITERS		8
#define READERS		2
#define ROUNDS		16
/* Stop after the round that ends past this (slow TCG guests). */
#define BUDGET_S	30.0
/*
 * Slab growth over the whole storm. Measured (6.12 and 7.2 TCG guests):
 * rounds of 2000 switches move Slab by +4..+256 kB with no trend, a storm
 * with 10 threads by up to 612 kB (task and file slabs freed after RCU).
 * 1 MiB catches a leak of 64 bytes per switch over 16000 switches.
 */
#define SLAB_TOLERANCE_KB 1024
#define NPROF		3
#define NKNOB		4

static const char *const names[NPROF] = { "storm0", "storm1", "storm2" };
static const char *const paths[NKNOB] = {
	"/proc/sys/vm/swappiness",
	"/proc/sys/vm/dirty_ratio",
	"/proc/sys/vm/vfs_cache_pressure",
	"/sys/kernel/mm/transparent_hugepage/defrag",
};

/* The knobs in use: kernels without THP (PREEMPT_RT) lack the last one. */
static int nknob = NKNOB;

static const char *const values[NPROF][NKNOB] = {
	{ "10", "30", "100", "madvise" },
	{ "20", "35", "150", "defer" },
	{ "30", "40", "200", "never" },
};

static pthread_barrier_t barrier;
static int per_round;
static int stop_readers;
static int errors;
static long long gen_base;
static int switches_failed;
static int rounds_done;
static double t_start;
static int stop_rounds;

static unsigned int rnd(unsigned int *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Which profile all knobs equal, -1 if none or a mix. */
static int which_profile(void)
{
	char cur[NKNOB][256];
	int k, p;

	for (k = 0; k < nknob; k++)
		if (knob_read(paths[k], cur[k], sizeof(cur[k])))
			return -1;
	for (p = 0; p < NPROF; p++) {
		for (k = 0; k < nknob; k++)
			if (strcmp(cur[k], values[p][k]))
				break;
		if (k == nknob)
			return p;
	}
	for (k = 0; k < nknob; k++)
		ksft_print_msg("%s = %s\n", paths[k], cur[k]);
	return -1;
}

static void *writer(void *arg)
{
	unsigned int seed = 0x9e3779b9u * (unsigned int)(long)arg + 1;
	long id = (long)arg;
	int r, i, p, ret;

	for (r = 0; r < ROUNDS && !stop_rounds; r++) {
		for (i = 0; i < per_round; i++) {
			p = rnd(&seed) % NPROF;
			ret = switch_to(names[p]);
			if (ret)
				__atomic_add_fetch(&switches_failed, 1,
						   __ATOMIC_RELAXED);
		}
		pthread_barrier_wait(&barrier);
		if (id == 0) {
			char active[64];
			long long gen = read_generation();
			long long want = gen_base +
				(long long)(r + 1) * per_round * WRITERS;

			p = which_profile();
			read_active(active, sizeof(active));
			if (p < 0 || strcmp(active, names[p]) || gen != want) {
				ksft_print_msg("round %d: knobs match %d, active %s\n",
					       r, p, active);
				ksft_print_msg("generation %lld, want %lld\n",
					       gen, want);
				__atomic_add_fetch(&errors, 1,
						   __ATOMIC_RELAXED);
			}
			rounds_done = r + 1;
			/* Seen by all writers after the next barrier. */
			if (now_s() - t_start > BUDGET_S)
				stop_rounds = 1;
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void *reader(void *arg)
{
	long long last = 0, gen;
	char buf[4096];
	int i;

	(void)arg;
	while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
		gen = read_generation();
		if (gen < last)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
		last = gen;
		read_active(buf, sizeof(buf));
		for (i = 0; i < NPROF; i++)
			if (!strcmp(buf, names[i]))
				break;
		if (i == NPROF && strcmp(buf, "baseline") &&
		    strcmp(buf, "none") && strcmp(buf, "training") &&
		    strcmp(buf, "inference")) {
			ksft_print_msg("profile read as '%s'\n", buf);
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
		}
		if (mltune_read_file(LAST_FILE, buf, sizeof(buf)) <= 0)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * One storm: WRITERS writers doing @total switches each in ROUNDS rounds,
 * READERS readers. Returns the wall time in seconds, or a negative value if
 * a thread could not be created.
 */
static double run_storm(int total)
{
	pthread_t w[WRITERS], rd[READERS];
	double t0;
	long i;

	per_round = total / ROUNDS > 0 ? total / ROUNDS : 1;
	rounds_done = 0;
	stop_rounds = 0;
	stop_readers = 0;
	gen_base = read_generation();
	if (gen_base < 0 || pthread_barrier_init(&barrier, NULL, WRITERS))
		return -1;
	t0 = now_s();
	t_start = t0;
	for (i = 0; i < READERS; i++)
		if (pthread_create(&rd[i], NULL, reader, NULL))
			return -1;
	for (i = 0; i < WRITERS; i++)
		if (pthread_create(&w[i], NULL, writer, (void *)i))
			return -1;
	for (i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
	for (i = 0; i < READERS; i++)
		pthread_join(rd[i], NULL);
	pthread_barrier_destroy(&barrier);
	return now_s() - t0;
}

FIXTURE(storm) {};
FIXTURE_SETUP(storm) {}
FIXTURE_TEARDOWN(storm) {}

/* Under TCG a switch takes about 1 ms: 16000 of them need more than 30 s. */
TEST_F_TIMEOUT(storm, writers_and_readers, 110)
{
	char text[1024];
	const char *env = getenv("MLTUNE_STORM_SWITCHES");
	int total = env ? atoi(env) : 2000;
	long slab0, slab1;
	double secs;
	int p, k;
	size_t n;

	if (access(paths[NKNOB - 1], W_OK))
		nknob = NKNOB - 1;
	for (p = 0; p < NPROF; p++) {
		n = 0;
		for (k = 0; k < nknob; k++)
			n += snprintf(text + n, sizeof(text) - n, "%s %s\n",
				      paths[k], values[p][k]);
		ASSERT_EQ(0, define_profile(names[p], text));
	}
	/*
	 * Warm up with a short storm of the same shape, so that the slab
	 * caches' first use by these threads on every CPU (task, file and
	 * kernfs objects, per-CPU slabs) is not counted as growth.
	 */
	ASSERT_LT(0, run_storm(ROUNDS * 8));
	slab0 = slab_kb();
	secs = run_storm(total);
	ASSERT_LT(0, secs);
	ksft_print_msg("%d writers x %d switches in %.1f s\n", WRITERS,
		       per_round * rounds_done, secs);
	if (rounds_done < ROUNDS)
		ksft_print_msg("time budget of %.0f s reached after %d of %d rounds\n",
			       BUDGET_S, rounds_done, ROUNDS);
	slab1 = slab_kb();
	ksft_print_msg("Slab %ld kB -> %ld kB (tolerance %d kB)\n", slab0,
		       slab1, SLAB_TOLERANCE_KB);
	if (slab1 - slab0 >= SLAB_TOLERANCE_KB) {
		/*
		 * Over the tolerance once (seen: 1036 kB on a loaded 6.1
		 * guest, from proc and kernfs caches): a leak grows again by
		 * as much over a second storm of the same length, cache noise
		 * does not.
		 */
		long slab2;

		ASSERT_LT(0, run_storm(total));
		slab2 = slab_kb();
		ksft_print_msg("second storm: Slab %ld kB -> %ld kB (tolerance %d kB)\n",
			       slab1, slab2, SLAB_TOLERANCE_KB / 2);
		EXPECT_LT(slab2 - slab1, SLAB_TOLERANCE_KB / 2);
	}
	EXPECT_EQ(0, switches_failed);
	EXPECT_EQ(0, errors);
	EXPECT_EQ(0, switch_to("baseline"));
	for (p = 0; p < NPROF; p++)
		EXPECT_EQ(0, remove_profile(names[p]));
}

int main(int argc, char **argv)
{
	mltune_require_module();
	return test_harness_run(argc, argv);
}
